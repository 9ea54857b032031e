//! AccountDO (proving skeleton): one object per account name, a balance counter and an outbox
//! written in ONE `transactionSync`, an alarm that drains the outbox to `LEDGER_EVENTS`.
//!
//! workers-rs APIs used:
//! - `#[durable_object]` + `impl DurableObject` (`new`, `fetch`, `alarm`), all `&self`: the runtime
//!   serialises events per object, and persistent state lives in SQLite, not in the struct.
//! - `State::storage()` → `Storage::sql()` (SQL), `get_alarm`/`set_alarm` (alarms).
//! - `Env::queue("LEDGER_EVENTS")` → `Queue::send_batch` (in `outbox::drain`).

use serde::Deserialize;
use serde_json::json;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorageValue as V,
    State,
};

use crate::outbox::{self, kv_i64, kv_set, now_ms};
use crate::sqltx;

const EXTRA_SCHEMA: &[&str] = &[
    // Applied references make a credit idempotent: a re-driven saga step never applies twice.
    "CREATE TABLE IF NOT EXISTS applied (ref TEXT PRIMARY KEY, seq INTEGER NOT NULL, balance INTEGER NOT NULL)",
];

#[durable_object]
pub struct AccountDO {
    state: State,
    env: Env,
}

#[derive(Deserialize)]
struct Credit {
    account: String,
    amount: i64,
    /// Idempotency reference (e.g. the transfer key); optional for direct credits.
    #[serde(rename = "ref")]
    reference: Option<String>,
    /// Test hook: fail after both writes so the test can see the rollback.
    #[serde(default)]
    fail_after_write: bool,
}

impl DurableObject for AccountDO {
    fn new(state: State, env: Env) -> Self {
        // The constructor cannot await; SQL is synchronous, so schema setup can run here.
        if let Err(e) = outbox::ensure_schema(&state.storage().sql(), EXTRA_SCHEMA) {
            worker::console_error!("AccountDO schema: {e}");
        }
        Self { state, env }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let storage = self.state.storage();
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/credit") => {
                let c: Credit = crate::json_or_400!(req);
                if c.amount <= 0 || c.amount > outbox::MAX_SAFE_INT {
                    return Response::error("amount must be in 1..=2^53-1", 400);
                }
                let at = now_ms();
                let (account, amount, reference, fail) = (
                    c.account.clone(),
                    c.amount,
                    c.reference.clone(),
                    c.fail_after_write,
                );
                let result = sqltx::transaction(&storage, move |sql| {
                    if let Some(r) = &reference {
                        #[derive(Deserialize)]
                        struct Prev {
                            seq: i64,
                            balance: i64,
                        }
                        let prev: Vec<Prev> = sql
                            .exec(
                                "SELECT seq, balance FROM applied WHERE ref = ?",
                                vec![V::from(r.as_str())],
                            )?
                            .to_array()?;
                        if let Some(p) = prev.into_iter().next() {
                            return Ok((p.balance, p.seq, true));
                        }
                    }
                    let balance = kv_i64(sql, "balance")?.unwrap_or(0);
                    let new_balance = balance
                        .checked_add(amount)
                        .ok_or_else(|| worker::Error::RustError("balance overflow".into()))?;
                    // try_from_i64 refuses values a JS number cannot hold exactly (the SQL binding
                    // passes integers as f64); the error rolls the whole transaction back.
                    kv_set(sql, "balance", V::try_from_i64(new_balance)?)?;
                    let seq = outbox::append(
                        sql,
                        "account",
                        &account,
                        "account.credited",
                        &json!({"amount": amount, "balance_after": new_balance, "ref": reference}),
                        at,
                    )?;
                    if let Some(r) = &reference {
                        sql.exec(
                            "INSERT INTO applied (ref, seq, balance) VALUES (?, ?, ?)",
                            vec![V::from(r.as_str()), V::from(seq), V::from(new_balance)],
                        )?;
                    }
                    if fail {
                        return Err(worker::Error::RustError(
                            "injected failure after write".into(),
                        ));
                    }
                    Ok((new_balance, seq, false))
                });
                match result {
                    Ok((balance, seq, replayed)) => {
                        // Right after the commit: make sure an alarm will drain the new row. An
                        // alarm already set (immediate drain or send backoff) is kept.
                        outbox::ensure_alarm(&storage).await?;
                        Response::from_json(&json!({
                            "account": c.account, "balance": balance, "seq": seq, "replayed": replayed
                        }))
                    }
                    Err(e) => Response::error(format!("rolled back: {e}"), 500),
                }
            }
            (Method::Get, "/state") => {
                let sql = storage.sql();
                let stats = outbox::stats(&sql)?;
                // Self-heal: unsent rows must always have an alarm behind them.
                if stats.pending > 0 {
                    outbox::ensure_alarm(&storage).await?;
                }
                Response::from_json(&json!({
                    "balance": kv_i64(&sql, "balance")?.unwrap_or(0),
                    "outbox": stats,
                    "alarm": storage.get_alarm().await?,
                    "alarm_runs": kv_i64(&sql, "alarm.runs")?.unwrap_or(0),
                }))
            }
            (Method::Post, "/_admin/faults") => {
                #[derive(Deserialize)]
                struct Faults {
                    fail_sends: i64,
                }
                let f: Faults = crate::json_or_400!(req);
                sqltx::transaction(&storage, move |sql| {
                    kv_set(sql, "fault.fail_sends", V::from(f.fail_sends))
                })?;
                Response::from_json(&json!({"fail_sends": f.fail_sends}))
            }
            (Method::Get, "/_probe/begin") => {
                // Documents the runtime's answer to raw BEGIN through sql.exec.
                let sql = storage.sql();
                let msg = match sql.exec("BEGIN TRANSACTION", None) {
                    Ok(_) => {
                        let _ = sql.exec("COMMIT", None);
                        "accepted".to_string()
                    }
                    Err(e) => e.to_string(),
                };
                Response::from_json(&json!({"begin": msg}))
            }
            _ => Response::error("not found", 404),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        let storage = self.state.storage();
        sqltx::transaction(&storage, |sql| {
            sql.exec(
                "INSERT INTO kv (k, v) VALUES ('alarm.runs', 1) ON CONFLICT(k) DO UPDATE SET v = v + 1",
                None,
            )?;
            Ok(())
        })?;
        let queue = self.env.queue("LEDGER_EVENTS")?;
        let d = outbox::drain(&storage, &queue, outbox::drain_cfg(&self.env)).await?;
        if let Some(at) = outbox::next_wake(&d, now_ms()) {
            outbox::set_alarm_at(&storage, at).await?;
        }
        Response::ok(format!("{d:?}"))
    }
}
