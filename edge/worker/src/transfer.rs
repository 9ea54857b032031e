//! TransferDO (proving skeleton): one object per idempotency key. Records the transfer and its
//! outbox row in one transaction, credits the destination AccountDO through a stub fetch
//! (idempotent via `ref`), and uses its alarm both to drain its outbox and to re-drive the saga
//! until it is terminal at its deadline.
//!
//! workers-rs APIs used: `Env::durable_object("ACCOUNT")` → `ObjectNamespace::id_from_name` →
//! `ObjectId::get_stub` → `Stub::fetch_with_request` (see `crate::call_do`); alarms as in AccountDO.

use serde::{Deserialize, Serialize};
use serde_json::json;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorage,
    SqlStorageValue as V, State,
};

use crate::outbox::{self, now_ms};
use crate::sqltx;

const EXTRA_SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS transfer (
        key TEXT PRIMARY KEY,
        to_account TEXT NOT NULL,
        amount INTEGER NOT NULL,
        status TEXT NOT NULL,             -- pending -> credited -> settled
        deadline_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        settled_at INTEGER,
        alarm_runs INTEGER NOT NULL DEFAULT 0
    )"];

#[durable_object]
pub struct TransferDO {
    state: State,
    env: Env,
}

#[derive(Deserialize)]
struct Start {
    key: String,
    to: String,
    amount: i64,
    /// Saga deadline, relative to now.
    #[serde(default = "default_deadline")]
    deadline_ms: i64,
}

fn default_deadline() -> i64 {
    30_000
}

#[derive(Serialize, Deserialize, Clone)]
struct Row {
    key: String,
    to_account: String,
    amount: i64,
    status: String,
    deadline_at: i64,
    created_at: i64,
    settled_at: Option<i64>,
    alarm_runs: i64,
}

fn load(sql: &SqlStorage) -> Result<Option<Row>> {
    Ok(sql
        .exec("SELECT * FROM transfer LIMIT 1", None)?
        .to_array::<Row>()?
        .into_iter()
        .next())
}

impl TransferDO {
    /// Saga step: credit the destination. Safe to repeat (AccountDO dedups on `ref`).
    async fn credit_destination(&self, row: &Row) -> Result<()> {
        let mut resp = crate::call_do(
            &self.env,
            "ACCOUNT",
            &row.to_account,
            Method::Post,
            "/credit",
            Some(json!({
                "account": row.to_account, "amount": row.amount, "ref": format!("transfer:{}", row.key)
            })),
        )
        .await?;
        if resp.status_code() != 200 {
            let body = resp.text().await.unwrap_or_default();
            return Err(worker::Error::RustError(format!(
                "account credit failed: {body}"
            )));
        }
        #[derive(Deserialize)]
        struct Credited {
            balance: i64,
        }
        let c: Credited = serde_json::from_str(&resp.text().await?)
            .map_err(|e| worker::Error::RustError(format!("account reply: {e}")))?;
        let (key, at) = (row.key.clone(), now_ms());
        sqltx::transaction(&self.state.storage(), move |sql| {
            let changed = sql
                .exec(
                    "UPDATE transfer SET status = 'credited' WHERE key = ? AND status = 'pending'",
                    vec![V::from(key.as_str())],
                )?
                .rows_written();
            if changed > 0 {
                outbox::append(
                    sql,
                    "transfer",
                    &key,
                    "transfer.credited",
                    &json!({"balance_after": c.balance}),
                    at,
                )?;
            }
            Ok(())
        })
    }
}

impl DurableObject for TransferDO {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = outbox::ensure_schema(&state.storage().sql(), EXTRA_SCHEMA) {
            worker::console_error!("TransferDO schema: {e}");
        }
        Self { state, env }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let storage = self.state.storage();
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/start") => {
                let s: Start = crate::json_or_400!(req);
                if s.amount <= 0 || s.amount > outbox::MAX_SAFE_INT {
                    return Response::error("amount must be in 1..=2^53-1", 400);
                }
                let now = now_ms();
                let (key, to, amount, deadline_at) = (
                    s.key.clone(),
                    s.to.clone(),
                    s.amount,
                    now + s.deadline_ms.max(0),
                );
                // Ok(Ok(row)) = new or replay; Ok(Err(())) = same key, different parameters.
                let started = sqltx::transaction(&storage, move |sql| {
                    if let Some(existing) = load(sql)? {
                        if existing.to_account != to || existing.amount != amount {
                            return Ok(Err(()));
                        }
                        return Ok(Ok((existing, true)));
                    }
                    sql.exec(
                        "INSERT INTO transfer (key, to_account, amount, status, deadline_at, created_at)
                         VALUES (?, ?, ?, 'pending', ?, ?)",
                        vec![V::from(key.as_str()), V::from(to.as_str()), V::from(amount), V::from(deadline_at), V::from(now)],
                    )?;
                    outbox::append(
                        sql,
                        "transfer",
                        &key,
                        "transfer.created",
                        &json!({"to": to, "amount": amount, "deadline_at": deadline_at}),
                        now,
                    )?;
                    Ok(Ok((load(sql)?.expect("row just inserted"), false)))
                })?;
                let Ok((row, replayed)) = started else {
                    return Response::error(
                        "idempotency key reused with different parameters",
                        409,
                    );
                };
                // Drain soon; alarm() re-arms for the deadline while the saga is open.
                outbox::arm_alarm_by(&storage, now_ms()).await?;
                if row.status == "pending" {
                    if let Err(e) = self.credit_destination(&row).await {
                        // Not fatal: the alarm re-drives the pending step.
                        worker::console_warn!("transfer {}: {e}", row.key);
                    }
                }
                let row = load(&storage.sql())?.unwrap_or(row);
                Response::from_json(&json!({"transfer": row, "replayed": replayed}))
            }
            (Method::Get, "/state") => {
                let sql = storage.sql();
                Response::from_json(&json!({
                    "transfer": load(&sql)?,
                    "outbox": outbox::stats(&sql)?,
                    "alarm": storage.get_alarm().await?,
                }))
            }
            _ => Response::error("not found", 404),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        let storage = self.state.storage();
        let now = now_ms();
        sqltx::transaction(&storage, |sql| {
            sql.exec("UPDATE transfer SET alarm_runs = alarm_runs + 1", None)?;
            Ok(())
        })?;
        let mut next: Option<i64> = None;
        if let Some(row) = load(&storage.sql())? {
            if row.status == "pending" {
                if let Err(e) = self.credit_destination(&row).await {
                    worker::console_warn!("transfer {} re-drive: {e}", row.key);
                    next = Some(now + 1000);
                }
            }
            let row = load(&storage.sql())?.unwrap_or(row);
            if row.status == "credited" {
                if now >= row.deadline_at {
                    let key = row.key.clone();
                    sqltx::transaction(&storage, move |sql| {
                        sql.exec(
                            "UPDATE transfer SET status = 'settled', settled_at = ? WHERE key = ?",
                            vec![V::from(now), V::from(key.as_str())],
                        )?;
                        outbox::append(sql, "transfer", &key, "transfer.settled", &json!({}), now)?;
                        Ok(())
                    })?;
                } else {
                    next = Some(next.map_or(row.deadline_at, |n| n.min(row.deadline_at)));
                }
            }
        }
        let queue = self.env.queue("LEDGER_EVENTS")?;
        let d = outbox::drain(&storage, &queue, outbox::drain_cfg(&self.env)).await?;
        if let Some(w) = outbox::next_wake(&d, now_ms()) {
            next = Some(next.map_or(w, |n| n.min(w)));
        }
        if let Some(at) = next {
            outbox::set_alarm_at(&storage, at).await?;
        }
        Response::ok(format!("{d:?}"))
    }
}
