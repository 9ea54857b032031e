//! TransferDO: one object per transfer, named by the tenant-namespaced idempotency key
//! (`t.{tenant}.{key}`), so a duplicate request reaches the same object. Runs the core's saga.
//!
//! - `POST /create` (body: `TransferSpec` JSON, header `x-ledger-wait-ms`): `transfer::admit`;
//!   a new transfer and its `created` event commit in one transaction, then the object drives
//!   it for at most the wait and answers `{"transfer": Transfer}` (terminal or not) or
//!   `{"rejected": Rejection}` (invalid, or the key reused with other parameters).
//! - drive: `next_step()` → `request(step)` → AccountDO `POST /cmd` → `on_reply` on the transfer
//!   *re-loaded inside the commit transaction* (so a concurrent driver's progress makes this
//!   reply `Stale` instead of applying twice) → the new state and its event commit together →
//!   loop until terminal or `RetryAt`. A failed call, no answer within `STEP_TIMEOUT_MS`, a
//!   non-200 answer or an unreadable body is `Reply::Transient`.
//! - While the transfer is not terminal an alarm stays set (at `next_attempt_at_ms`, or, while a
//!   request drives it, a lease that ends `LEASE_MS` after the request's drive budget), so a
//!   crash at any point is re-driven, and a slow step is not sent twice by the alarm while the
//!   request still waits on it; the alarm also drains the outbox. `POST /drive` re-drives on
//!   demand, ignoring the backoff (the sweeper).
//! - `GET /state` → `{"transfer": Transfer|null, "outbox": stats, "alarm": ms|null}`.
//! - `POST /_admin/faults {"fail_sends"?: n}` (test fault injection, reachable only where the var
//!   `FAULT_INJECTION` is "on"): fail the next n queue sends. It creates the object's tables, so
//!   it can be armed before the transfer is created (the object then reads as `stored`, with no
//!   transfer).
//!
//! The transfer row keeps the whole `Transfer` as serde_json text (exact integers) plus the
//! phase and next attempt as columns for inspection.

use ledger_core::account::Outcome;
use ledger_core::transfer::{self, Admission, Advance, Reply, Transfer, TransferSpec};
use serde_json::json;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorage,
    SqlStorageValue as V, State,
};

use crate::outbox::{self, now_ms};
use crate::{bug, sqltx};

const EXTRA_SCHEMA: &[&str] = &["CREATE TABLE IF NOT EXISTS transfer (
        id TEXT PRIMARY KEY,
        phase TEXT NOT NULL,
        next_attempt_at_ms INTEGER NOT NULL,
        body TEXT NOT NULL                -- the whole ledger_core::transfer::Transfer as JSON
    )"];

/// The lease: how long past the end of a driver's budget the safety-net alarm waits before it
/// re-drives. Armed at start + budget + lease, never at start + lease: an alarm due while the
/// request still drives sends the step in flight again, doubling the load on an account that is
/// slow already (its reply is then `Stale`: harmless, not free). A drive checks its budget
/// before each step, so its last step may run past the budget by as long as the account takes;
/// the lease covers such a step of up to this long. The price: a request that dies mid-drive is
/// re-driven budget + lease after it started, not lease after.
const LEASE_MS: i64 = 2_000;
/// How long one saga step's call to its account is waited for (`STEP_TIMEOUT_MS`, taken within
/// `STEP_TIMEOUT_MS_MIN..=STEP_TIMEOUT_MS_MAX`): past it the step is `Reply::Transient`, retried
/// with backoff like a failed call, and the reserve's give-up at the deadline applies. Without
/// it, an account that never answers held the transfer in its phase past its deadline, and its
/// recorded events behind the alarm's drive (rev-s56-edge L2). Safe because every step is
/// idempotent at its account: a call given up on that lands later is replayed by the retry, and
/// its reply, if it ever comes, is `Stale`.
const STEP_TIMEOUT_MS_DEFAULT: i64 = 30_000;
const STEP_TIMEOUT_MS_MIN: i64 = 500;
const STEP_TIMEOUT_MS_MAX: i64 = 300_000;
/// How long `/drive` (the sweeper's re-drive) and the alarm drive at most.
const DRIVE_BUDGET_MS: i64 = 5_000;
/// Most steps one drive performs (the saga has at most three).
const DRIVE_STEPS_MAX: usize = 8;

fn load(sql: &SqlStorage) -> Result<Option<Transfer>> {
    #[derive(serde::Deserialize)]
    struct Row {
        body: String,
    }
    let rows: Vec<Row> = sql.exec("SELECT body FROM transfer", None)?.to_array()?;
    match rows.into_iter().next() {
        None => Ok(None),
        Some(r) => serde_json::from_str(&r.body)
            .map(Some)
            .map_err(|e| bug(format!("stored transfer: {e}"))),
    }
}

fn save(sql: &SqlStorage, t: &Transfer) -> Result<()> {
    let body = serde_json::to_string(t).map_err(|e| bug(e.to_string()))?;
    sql.exec(
        "INSERT INTO transfer (id, phase, next_attempt_at_ms, body) VALUES (?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET phase = excluded.phase,
           next_attempt_at_ms = excluded.next_attempt_at_ms, body = excluded.body",
        vec![
            V::from(t.spec.id.as_str()),
            V::from(t.phase.as_str()),
            V::try_from_i64(t.next_attempt_at_ms)?,
            V::from(body),
        ],
    )?;
    Ok(())
}

#[durable_object]
pub struct TransferDO {
    state: State,
    env: Env,
    drains: outbox::DrainGate,
    alarms: outbox::AlarmFallback,
    /// Created by `/create` (see `outbox::Tables`), so that reading a
    /// transfer id nobody created (a client's `GET`, the sweeper's re-drive
    /// of an id it does not know) stores nothing.
    tables: outbox::Tables,
}

impl TransferDO {
    /// One saga step against its account: any failure to get a readable answer is transient.
    async fn call_account(&self, account: &str, cmd: &ledger_core::account::Command) -> Reply {
        let body = match serde_json::to_string(cmd) {
            Ok(b) => b,
            Err(_) => return Reply::Transient,
        };
        let call = crate::call_do_text(
            &self.env,
            "ACCOUNT",
            account,
            Method::Post,
            "/cmd",
            Some(body),
        );
        let timeout_ms = crate::env_i64_within(
            &self.env,
            "STEP_TIMEOUT_MS",
            STEP_TIMEOUT_MS_DEFAULT,
            STEP_TIMEOUT_MS_MIN,
            STEP_TIMEOUT_MS_MAX,
        );
        let resp = match crate::within(timeout_ms, call).await {
            Some(r) => r,
            None => {
                worker::console_warn!(
                    "account {account}: no answer to a saga step within {timeout_ms} ms \
                     (STEP_TIMEOUT_MS); retried with backoff"
                );
                return Reply::Transient;
            }
        };
        match resp {
            Ok((200, text)) => match serde_json::from_str::<Outcome>(&text) {
                Ok(o) => Reply::Outcome(o),
                Err(e) => {
                    worker::console_warn!("account {account}: unreadable outcome: {e}");
                    Reply::Transient
                }
            },
            Ok((500, text)) => {
                // Deterministic at the account (a bug, a stored value it cannot read): still
                // only retried, with backoff, since no other answer is safe (a capture must
                // happen, I0), but loudly: it needs a fix, not time.
                worker::console_error!("account {account}: internal error: {text}");
                Reply::Transient
            }
            Ok((status, text)) => {
                worker::console_warn!("account {account}: {status} {text}");
                Reply::Transient
            }
            Err(e) => {
                worker::console_warn!("account {account}: {e}");
                Reply::Transient
            }
        }
    }

    /// Drive the saga until terminal, waiting on a retry, or `budget_ms` spent. `force` (the
    /// sweeper's re-drive) attempts the next step now even while it waits on a retry.
    async fn drive(&self, budget_ms: i64, force: bool) -> Result<Option<Transfer>> {
        let storage = self.state.storage();
        if !self.tables.exist(&storage.sql())? {
            return Ok(None); // no such transfer
        }
        let until = now_ms() + budget_ms.max(0);
        for _ in 0..DRIVE_STEPS_MAX {
            let Some(t) = load(&storage.sql())? else {
                return Ok(None);
            };
            let Some(step) = t.next_step() else {
                return Ok(Some(t));
            };
            if (!force && t.next_attempt_at_ms > now_ms()) || now_ms() > until {
                return Ok(Some(t));
            }
            let (account, cmd) = t.request(step);
            let account = account.to_owned();
            let reply = self.call_account(&account, &cmd).await;
            let now = now_ms();
            let advance = sqltx::transaction(&storage, move |sql| {
                let mut t = load(sql)?.ok_or_else(|| bug("transfer vanished"))?;
                let advance = t.on_reply(step, &reply, now);
                match &advance {
                    Advance::Moved(ev) => {
                        save(sql, &t)?;
                        outbox::append_event(sql, ev, now)?;
                    }
                    Advance::RetryAt(_) | Advance::Anomaly { .. } => save(sql, &t)?,
                    Advance::Stale => {}
                }
                Ok(advance)
            })?;
            match advance {
                Advance::Moved(_) | Advance::Stale => continue,
                Advance::RetryAt(_) => break,
                Advance::Anomaly { rejection, .. } => {
                    worker::console_error!(
                        "ANOMALY transfer step {step:?} rejected: {rejection:?}; retrying later"
                    );
                    break;
                }
            }
        }
        load(&storage.sql())
    }

    /// After a drive: an alarm no later than the next attempt while non-terminal, and now if
    /// the outbox has unsent rows.
    async fn arm(&self, t: Option<&Transfer>, in_alarm: bool) -> Result<()> {
        let storage = self.state.storage();
        let now = now_ms();
        let mut want: Option<i64> = None;
        if let Some(t) = t.filter(|t| !t.is_terminal()) {
            want = Some(t.next_attempt_at_ms.max(now));
        }
        let pending = outbox::has_unsent(&storage.sql())?;
        if pending {
            // The safety net; the rows are drained right after the answer.
            let at = now + outbox::SAFETY_NET_MS;
            want = Some(want.map_or(at, |w| w.min(at)));
        }
        match (want, in_alarm) {
            (Some(at), true) => outbox::set_alarm_at(&storage, at).await?,
            (Some(at), false) => outbox::arm_alarm_by(&storage, at).await?,
            (None, _) => {}
        }
        if pending && !in_alarm {
            outbox::drain_soon(&self.state, &self.env, &self.drains);
        }
        Ok(())
    }

    /// [`TransferDO::arm`] after a request's drive, best-effort: what the drive committed is
    /// durable, and an error answer would make the gateway report "did not answer; retry"
    /// about it. Nothing is left without an alarm when this fails: a request that commits
    /// (`/create` of a new transfer, `/drive` of one not terminal) armed its lease before its
    /// first commit, and that alarm re-drives and drains; a request that commits nothing (a
    /// replay) left the alarm as it was.
    async fn arm_after_commit(&self, t: Option<&Transfer>) {
        if let Err(e) = self.arm(t, false).await {
            let id = t.map_or("?", |t| t.spec.id.as_str());
            worker::console_error!("transfer {id}: arming after the drive failed: {e}");
        }
    }
}

impl DurableObject for TransferDO {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            drains: outbox::DrainGate::default(),
            alarms: outbox::AlarmFallback::default(),
            tables: outbox::Tables::new("transfer", EXTRA_SCHEMA),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        crate::answer_or_internal(self.handle(req).await)
    }

    async fn alarm(&self) -> Result<Response> {
        let storage = self.state.storage();
        if !self.tables.exist(&storage.sql())? {
            return Response::ok("no transfer"); // alarms are set only after `/create`
        }
        // Tables a newer version brings exist before this instance's first write.
        self.tables.ensure(&storage.sql())?;
        self.alarms.arm(&storage).await?;
        let queue = self.env.queue("LEDGER_EVENTS")?;
        let cfg = outbox::drain_cfg(&self.env);
        // What earlier steps committed goes out before the drive, which may wait on an account
        // up to the step timeout (rev-s56-edge L2). A send that fails there is the alarm's one
        // drain (its backoff counts one failure per alarm); an error is logged, and the drain
        // after the drive tries again and decides the next wake.
        let before = match self.drains.drain(&storage, &queue, cfg).await {
            Ok(d) => d,
            Err(e) => {
                worker::console_warn!("transfer outbox drain before the drive failed: {e}");
                None
            }
        };
        let t = self.drive(DRIVE_BUDGET_MS, false).await?;
        let d = match before {
            Some(failed @ outbox::Drain::Failed { .. }) => Some(failed),
            _ => self.drains.drain(&storage, &queue, cfg).await?,
        };
        let now = now_ms();
        let mut next = match &d {
            Some(d) => outbox::next_wake(d, now),
            None => Some(now + outbox::SAFETY_NET_MS),
        };
        if let Some(t) = t.as_ref().filter(|t| !t.is_terminal()) {
            if now >= t.deadline_ms {
                // Visible, never abandoned: it keeps being re-driven and is reported here (and
                // by the reconciler's dangling list from the lake).
                worker::console_error!(
                    "DANGLING transfer {} in phase {} past its deadline {} (attempt {})",
                    t.spec.id,
                    t.phase.as_str(),
                    t.deadline_ms,
                    t.attempt
                );
            }
            let at = t.next_attempt_at_ms.max(now);
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        self.alarms.settle(&storage, next).await?;
        Response::ok(format!("{d:?}"))
    }
}

impl TransferDO {
    /// `fetch`, with its deterministic failures answered as such (`crate::answer_or_internal`).
    async fn handle(&self, mut req: Request) -> Result<Response> {
        let storage = self.state.storage();
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/create") => {
                let wait_ms = req
                    .headers()
                    .get("x-ledger-wait-ms")?
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(2_000)
                    .clamp(0, 30_000);
                let spec: TransferSpec = match serde_json::from_str(&req.text().await?) {
                    Ok(s) => s,
                    Err(e) => return Response::error(format!("bad spec: {e}"), 400),
                };
                // The object is named by the transfer's id: a spec under another name would
                // live where no request for its id looks.
                let name = req.headers().get("x-ledger-name")?;
                if name.as_deref() != Some(spec.id.as_str()) {
                    return Response::error(
                        format!("spec {} sent to the object named {name:?}", spec.id),
                        400,
                    );
                }
                self.tables.ensure(&storage.sql())?;
                // The lease before the commit, not after it: if this request dies in between,
                // the alarm still re-drives what it committed (a replay of a terminal transfer
                // commits nothing and needs none). Due once this request's drive is over
                // (`LEASE_MS`), not while it may still be waiting on a step.
                if !load(&storage.sql())?.is_some_and(|t| t.is_terminal()) {
                    outbox::arm_alarm_by(&storage, now_ms() + wait_ms + LEASE_MS).await?;
                }
                let now = now_ms();
                // 1 s ..= 30 days: a deadline is minutes in practice; the
                // reconciler refuses one outside these bounds (and an
                // instant past the year 9999 would be refused by every
                // reader of the event: ledger_events::TIME_MS_MAX).
                let deadline = now.saturating_add(crate::env_i64_within(
                    &self.env,
                    "TRANSFER_DEADLINE_MS",
                    300_000,
                    ledger_events::TRANSFER_DEADLINE_MS_MIN,
                    ledger_events::TRANSFER_DEADLINE_MS_MAX,
                ));
                let admitted = sqltx::transaction(&storage, move |sql| {
                    let existing = load(sql)?;
                    Ok(
                        match transfer::admit(existing.as_ref(), spec, now, deadline) {
                            Admission::Start(t, ev) => {
                                save(sql, &t)?;
                                outbox::append_event(sql, &ev, now)?;
                                Ok(true)
                            }
                            Admission::Existing(_) => Ok(false),
                            Admission::Refuse(r) => Err(r),
                        },
                    )
                })?;
                match admitted {
                    Err(r) => crate::json_text(200, json!({ "rejected": r }).to_string()),
                    Ok(created) => {
                        // The lease armed above: if this request dies mid-drive, the alarm
                        // re-drives.
                        let t = self.drive(wait_ms, false).await?;
                        self.arm_after_commit(t.as_ref()).await;
                        let body = json!({ "transfer": t, "replayed": !created });
                        crate::json_text(200, body.to_string())
                    }
                }
            }
            (Method::Post, "/drive") => {
                if self.tables.exist(&storage.sql())? {
                    self.tables.ensure(&storage.sql())?;
                    // As for `/create`: a drive that dies after a commit leaves an alarm (a
                    // terminal transfer, the sweeper's usual case, is not driven).
                    if load(&storage.sql())?.is_some_and(|t| !t.is_terminal()) {
                        outbox::arm_alarm_by(&storage, now_ms() + DRIVE_BUDGET_MS + LEASE_MS)
                            .await?;
                    }
                }
                let t = self.drive(DRIVE_BUDGET_MS, true).await?;
                if t.is_some() {
                    self.arm_after_commit(t.as_ref()).await;
                }
                crate::json_text(200, json!({ "transfer": t }).to_string())
            }
            (Method::Get, "/state") => {
                let sql = storage.sql();
                let stored = self.tables.exist(&sql)?;
                crate::json_text(
                    200,
                    json!({
                        "transfer": if stored { load(&sql)? } else { None },
                        "outbox": if stored { outbox::stats(&sql)? } else { Default::default() },
                        "alarm": storage.get_alarm().await?,
                        "stored": stored,
                    })
                    .to_string(),
                )
            }
            (Method::Post, "/_admin/faults") => {
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Faults {
                    fail_sends: Option<i64>,
                }
                let f: Faults = crate::json_or_400!(req);
                // The tables, whether or not the transfer was created: a test arms the fault
                // before `/create`, so that the `created` event's first send fails. The count
                // stays in the kv until sends consume it (`outbox::drain`).
                self.tables.ensure(&storage.sql())?;
                if let Some(n) = f.fail_sends {
                    sqltx::transaction(&storage, move |sql| {
                        outbox::kv_set(sql, "fault.fail_sends", V::from(n))
                    })?;
                }
                Response::ok("{}")
            }
            _ => Response::error("not found", 404),
        }
    }
}
