//! AccountDO: one object per account (named `{tenant}.{account_id}`), on the pure core.
//!
//! Every command: parse → load exactly the rows `ledger_core::account::View` needs (the header,
//! the op record under `cmd.op_id()`, the hold under `cmd.hold_key()`, the same key's record in
//! the other direction under `cmd.paired_op_id()`) → `account::decide` → on
//! `Decision::Commit` write header, hold, entry, op record and the event's outbox row in ONE
//! `transactionSync` → only then answer (I3) and make sure an alarm drains the outbox. Load,
//! decide and write all run inside the synchronous transaction callback, so no other request
//! can interleave between reading the view and committing. No business rule lives here.
//! An object with no tables yet (nothing ever written) decides on the empty view first and
//! creates them only for a commit: a refused command to a name nobody opened stores nothing,
//! except a transfer's reserve, credit or release, whose refusal is recorded (the core's
//! `unknown_account`: another delivery of the step may land once the account is opened). A
//! client cannot reach that recording by naming accounts at random: the gateway reads both
//! accounts of a transfer before it admits it (`GET /header`, which stores nothing) and refuses
//! one nobody opened with a 404, and an account once open stays open. So a saga step meets an
//! unopened account only for a transfer admitted before that check existed; the recording
//! stays, as the saga's own guarantee rather than one borrowed from the gateway.
//!
//! Internal protocol (only the gateway and TransferDOs call it):
//! - `POST /cmd` body = `ledger_core::account::Command` JSON, header `x-ledger-name` = the
//!   account name, optional `x-ledger-amount-max` = the gateway's `AMOUNT_MAX` for a new deposit
//!   or withdrawal (applied after the op record is looked up: `account::decide_within`)
//!   → 200 with `Outcome` JSON, header `x-ledger-decision` =
//!   `commit|replay|refuse|noop`. 503 (no state touched) for a saga step while an injected fault is armed.
//! - Every route: 500 with `x-ledger-error: internal` for a deterministic failure (a broken
//!   invariant, a stored value the object cannot read: `crate::bug`), which a retry would meet
//!   again; any other failure throws, and its caller sees no answer.
//! - `GET /state` → `{"header": AccountHeader|null, "outbox": stats, "alarm": ms|null,
//!   "alarm_runs", "alarm_heals", "delayed_commands", "stored"}` (the admin read): read only;
//!   `alarm` as found (this read arms none, so a lost alarm shows).
//! - `GET /header` → `{"header": AccountHeader|null}` (the gateway's read): re-arms an alarm
//!   lost behind unsent rows, counted in `alarm_heals`; stores nothing for a name nobody opened.
//! - `GET /entries?after_seq=&limit=` → `{"header": ..., "entries": [Entry...]}` in seq order.
//! - `POST /_admin/faults {"fail_sends"?: n, "fail_commands"?: n, "fail_after_write"?: n,
//!   "fail_after_commit"?: n, "delay_commands_ms"?: ms, "drop_alarm"?: bool,
//!   "corrupt_header"?: bool}` (test fault injection, reachable only where the var
//!   `FAULT_INJECTION` is "on"): fail the next n queue sends, answer the next n saga steps 503,
//!   fail the next n commands after their writes (rolled back), fail the alarm re-check after
//!   the next n commits (and start no inline drain: the rows wait for the safety net); make
//!   every saga step wait ms before it runs (a slow account; 0 ends it); delete the alarm (a
//!   lost one); store a header status no version reads (a stored value the object cannot
//!   decode: every later command and read fails alike, 500 internal).
//!
//! Storage: money columns (`balance`, `held`, `overdraft_limit`, `amount`, `balance_after`) are
//! TEXT holding the decimal `i64`: the DO SQL binding passes INTEGER values as JS doubles, which
//! are exact only up to 2^53 − 1, and balances may exceed that. Seqs and timestamps stay INTEGER
//! (written with `try_from_i64`, which refuses anything a double cannot hold exactly).

use ledger_core::account::{
    self, AccountHeader, Command, Decision, Entry, Hold, HoldState, OpRecord, Outcome, Status, View,
};
use ledger_core::idempotency::Fingerprint;
use ledger_core::money::AMOUNT_MINOR_MAX;
use ledger_core::Currency;
use serde::Deserialize;
use serde_json::json;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorage,
    SqlStorageValue as V, State,
};

use crate::outbox::{self, kv_i64, kv_set, now_ms};
use crate::{bug, sqltx};

const EXTRA_SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS account (
        id TEXT PRIMARY KEY,
        currency TEXT NOT NULL,
        overdraft_limit TEXT NOT NULL,
        status TEXT NOT NULL,
        balance TEXT NOT NULL,
        held TEXT NOT NULL,
        seq INTEGER NOT NULL,
        last_hash TEXT NOT NULL,
        opened_at_ms INTEGER NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS ops (
        op_id TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        outcome TEXT NOT NULL             -- Outcome JSON (serde_json: exact integers)
    )",
    "CREATE TABLE IF NOT EXISTS holds (
        transfer_id TEXT PRIMARY KEY,
        amount TEXT NOT NULL,
        counterparty TEXT,
        state TEXT NOT NULL               -- held | captured | released
    )",
    "CREATE TABLE IF NOT EXISTS entries (
        entry_id TEXT PRIMARY KEY,
        transfer_id TEXT,
        counterparty TEXT,
        amount TEXT NOT NULL,
        balance_after TEXT NOT NULL,
        seq INTEGER NOT NULL UNIQUE,
        occurred_at_ms INTEGER NOT NULL
    )",
];

fn money(s: &str, what: &str) -> Result<i64> {
    s.parse::<i64>()
        .map_err(|_| bug(format!("stored {what} {s:?} is not an i64")))
}

#[derive(Deserialize)]
struct HeaderRow {
    id: String,
    currency: String,
    overdraft_limit: String,
    status: String,
    balance: String,
    held: String,
    seq: i64,
    last_hash: String,
    opened_at_ms: i64,
}

fn load_header(sql: &SqlStorage) -> Result<Option<AccountHeader>> {
    let rows: Vec<HeaderRow> = sql.exec("SELECT * FROM account", None)?.to_array()?;
    let Some(r) = rows.into_iter().next() else {
        return Ok(None);
    };
    Ok(Some(AccountHeader {
        currency: Currency::parse(&r.currency).map_err(|e| bug(e.to_string()))?,
        overdraft_limit: money(&r.overdraft_limit, "overdraft_limit")?,
        status: match r.status.as_str() {
            "active" => Status::Active,
            "frozen" => Status::Frozen,
            other => return Err(bug(format!("stored status {other:?}"))),
        },
        balance: money(&r.balance, "balance")?,
        held: money(&r.held, "held")?,
        seq: r.seq as u64,
        last_hash: r.last_hash,
        opened_at_ms: r.opened_at_ms,
        id: r.id,
    }))
}

fn save_header(sql: &SqlStorage, h: &AccountHeader) -> Result<()> {
    sql.exec(
        "INSERT INTO account (id, currency, overdraft_limit, status, balance, held, seq, last_hash, opened_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET status = excluded.status, balance = excluded.balance,
           held = excluded.held, seq = excluded.seq, last_hash = excluded.last_hash",
        vec![
            V::from(h.id.as_str()),
            V::from(h.currency.as_str()),
            V::from(h.overdraft_limit.to_string()),
            V::from(match h.status {
                Status::Active => "active",
                Status::Frozen => "frozen",
            }),
            V::from(h.balance.to_string()),
            V::from(h.held.to_string()),
            V::try_from_i64(h.seq as i64)?,
            V::from(h.last_hash.as_str()),
            V::try_from_i64(h.opened_at_ms)?,
        ],
    )?;
    Ok(())
}

fn load_op(sql: &SqlStorage, op_id: &str) -> Result<Option<OpRecord>> {
    #[derive(Deserialize)]
    struct Row {
        fingerprint: String,
        outcome: String,
    }
    let rows: Vec<Row> = sql
        .exec(
            "SELECT fingerprint, outcome FROM ops WHERE op_id = ?",
            vec![V::from(op_id)],
        )?
        .to_array()?;
    let Some(r) = rows.into_iter().next() else {
        return Ok(None);
    };
    Ok(Some(OpRecord {
        op_id: op_id.to_owned(),
        fingerprint: Fingerprint::from_hex(&r.fingerprint)
            .ok_or_else(|| bug("stored fingerprint is not hex"))?,
        outcome: serde_json::from_str(&r.outcome).map_err(|e| bug(e.to_string()))?,
    }))
}

fn save_op(sql: &SqlStorage, op: &OpRecord) -> Result<()> {
    let outcome = serde_json::to_string(&op.outcome).map_err(|e| bug(e.to_string()))?;
    // Plain INSERT: an op record is written once; a duplicate is a bug and rolls back.
    sql.exec(
        "INSERT INTO ops (op_id, fingerprint, outcome) VALUES (?, ?, ?)",
        vec![
            V::from(op.op_id.as_str()),
            V::from(op.fingerprint.to_hex()),
            V::from(outcome),
        ],
    )?;
    Ok(())
}

fn hold_state(s: HoldState) -> &'static str {
    match s {
        HoldState::Held => "held",
        HoldState::Captured => "captured",
        HoldState::Released => "released",
    }
}

fn load_hold(sql: &SqlStorage, transfer_id: &str) -> Result<Option<Hold>> {
    #[derive(Deserialize)]
    struct Row {
        amount: String,
        counterparty: Option<String>,
        state: String,
    }
    let rows: Vec<Row> = sql
        .exec(
            "SELECT amount, counterparty, state FROM holds WHERE transfer_id = ?",
            vec![V::from(transfer_id)],
        )?
        .to_array()?;
    let Some(r) = rows.into_iter().next() else {
        return Ok(None);
    };
    Ok(Some(Hold {
        transfer_id: transfer_id.to_owned(),
        amount: money(&r.amount, "hold amount")?,
        counterparty: r.counterparty,
        state: match r.state.as_str() {
            "held" => HoldState::Held,
            "captured" => HoldState::Captured,
            "released" => HoldState::Released,
            other => return Err(bug(format!("stored hold state {other:?}"))),
        },
    }))
}

fn save_hold(sql: &SqlStorage, h: &Hold) -> Result<()> {
    sql.exec(
        "INSERT INTO holds (transfer_id, amount, counterparty, state) VALUES (?, ?, ?, ?)
         ON CONFLICT(transfer_id) DO UPDATE SET amount = excluded.amount,
           counterparty = excluded.counterparty, state = excluded.state",
        vec![
            V::from(h.transfer_id.as_str()),
            V::from(h.amount.to_string()),
            h.counterparty.as_deref().map_or(V::Null, V::from),
            V::from(hold_state(h.state)),
        ],
    )?;
    Ok(())
}

fn save_entry(sql: &SqlStorage, e: &Entry) -> Result<()> {
    sql.exec(
        "INSERT INTO entries (entry_id, transfer_id, counterparty, amount, balance_after, seq, occurred_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        vec![
            V::from(e.entry_id.as_str()),
            e.transfer_id.as_deref().map_or(V::Null, V::from),
            e.counterparty.as_deref().map_or(V::Null, V::from),
            V::from(e.amount.to_string()),
            V::from(e.balance_after.to_string()),
            V::try_from_i64(e.seq as i64)?,
            V::try_from_i64(e.occurred_at_ms)?,
        ],
    )?;
    Ok(())
}

fn load_entries(sql: &SqlStorage, after_seq: i64, limit: i64) -> Result<Vec<Entry>> {
    #[derive(Deserialize)]
    struct Row {
        entry_id: String,
        transfer_id: Option<String>,
        counterparty: Option<String>,
        amount: String,
        balance_after: String,
        seq: i64,
        occurred_at_ms: i64,
    }
    let rows: Vec<Row> = sql
        .exec(
            "SELECT * FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
            vec![V::try_from_i64(after_seq)?, V::from(limit)],
        )?
        .to_array()?;
    rows.into_iter()
        .map(|r| {
            Ok(Entry {
                amount: money(&r.amount, "entry amount")?,
                balance_after: money(&r.balance_after, "entry balance_after")?,
                entry_id: r.entry_id,
                transfer_id: r.transfer_id,
                counterparty: r.counterparty,
                seq: r.seq as u64,
                occurred_at_ms: r.occurred_at_ms,
            })
        })
        .collect()
}

/// Load the view, decide (a new deposit or withdrawal within `amount_max`), and commit the
/// transition: one synchronous transaction.
fn execute(
    sql: &SqlStorage,
    name: &str,
    cmd: &Command,
    now: i64,
    amount_max: i64,
) -> Result<(Outcome, &'static str, bool)> {
    let header = load_header(sql)?;
    if let Some(h) = &header {
        if h.id != name {
            return Err(bug(format!(
                "object of account {} addressed as {name}",
                h.id
            )));
        }
    }
    let op = match cmd.op_id() {
        Some(id) => load_op(sql, &id)?,
        None => None,
    };
    let hold = match cmd.hold_key() {
        Some(k) => load_hold(sql, k)?,
        None => None,
    };
    // The same key's record in the other direction (a deposit's withdrawal or the reverse),
    // read in this transaction: a new operation that finds it is a conflict, not a second run.
    let paired_op = match cmd.paired_op_id() {
        Some(id) => load_op(sql, &id)?,
        None => None,
    };
    let view = View {
        header: header.as_ref(),
        op: op.as_ref(),
        hold: hold.as_ref(),
        paired_op: paired_op.as_ref(),
    };
    let decision = account::decide_within(name, view, cmd, now, amount_max);
    let outcome = decision.outcome();
    let label = label(&decision);
    let emitted = match decision {
        Decision::Replay(_) | Decision::Refuse(_) | Decision::Noop(_) => false,
        Decision::Commit(t) => {
            if let Some(h) = &t.header {
                save_header(sql, h)?;
            }
            if let Some(h) = &t.hold {
                save_hold(sql, h)?;
            }
            if let Some(e) = &t.entry {
                save_entry(sql, e)?;
            }
            if let Some(op) = &t.op {
                save_op(sql, op)?;
            }
            if let Some(ev) = &t.event {
                outbox::append_event(sql, ev, now)?;
            }
            t.event.is_some()
        }
    };
    Ok((outcome, label, emitted))
}

/// Counts down an armed test fault: whether this command is one it fails.
fn take_one(fault: &std::cell::Cell<i64>) -> bool {
    let n = fault.get();
    if n > 0 {
        fault.set(n - 1);
    }
    n > 0
}

/// The `x-ledger-decision` header's value.
fn label(d: &Decision) -> &'static str {
    match d {
        Decision::Replay(_) => "replay",
        Decision::Refuse(_) => "refuse",
        Decision::Noop(_) => "noop",
        Decision::Commit(_) => "commit",
    }
}

/// The answer to `/cmd`: the outcome as JSON, the decision in its header.
fn answer(outcome: &Outcome, label: &'static str) -> Result<Response> {
    let body = serde_json::to_string(outcome).map_err(|e| bug(e.to_string()))?;
    let mut resp = crate::json_text(200, body)?;
    resp.headers_mut().set("x-ledger-decision", label)?;
    Ok(resp)
}

#[durable_object]
pub struct AccountDO {
    state: State,
    env: Env,
    /// Test fault (in memory, so the rollback cannot undo it): fail the next N commands after
    /// all their writes, inside the transaction.
    fail_after_write: std::cell::Cell<i64>,
    /// Test fault (in memory, as `fail_after_write`): the next N commands that commit find their
    /// post-commit alarm re-check failing, and start no inline drain either.
    fail_after_commit: std::cell::Cell<i64>,
    drains: outbox::DrainGate,
    alarms: outbox::AlarmFallback,
    /// Created by the first write (see `outbox::Tables`).
    tables: outbox::Tables,
}

impl DurableObject for AccountDO {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            fail_after_write: std::cell::Cell::new(0),
            fail_after_commit: std::cell::Cell::new(0),
            drains: outbox::DrainGate::default(),
            alarms: outbox::AlarmFallback::default(),
            tables: outbox::Tables::new("account", EXTRA_SCHEMA),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        crate::answer_or_internal(self.handle(req).await)
    }

    async fn alarm(&self) -> Result<Response> {
        let storage = self.state.storage();
        if !self.tables.exist(&storage.sql())? {
            return Response::ok("nothing stored"); // alarms are set only after a write
        }
        // Tables a newer version brings exist before this instance's first write.
        self.tables.ensure(&storage.sql())?;
        self.alarms.arm(&storage).await?;
        sqltx::transaction(&storage, |sql| {
            sql.exec(
                "INSERT INTO kv (k, v) VALUES ('alarm.runs', 1) ON CONFLICT(k) DO UPDATE SET v = v + 1",
                None,
            )?;
            Ok(())
        })?;
        let queue = self.env.queue("LEDGER_EVENTS")?;
        let d = self
            .drains
            .drain(&storage, &queue, outbox::drain_cfg(&self.env))
            .await?;
        let next = match &d {
            Some(d) => outbox::next_wake(d, now_ms()),
            // An inline drain is running: look again shortly.
            None => Some(now_ms() + outbox::SAFETY_NET_MS),
        };
        self.alarms.settle(&storage, next).await?;
        Response::ok(format!("{d:?}"))
    }
}

impl AccountDO {
    /// `fetch`, with its deterministic failures answered as such (`crate::answer_or_internal`).
    async fn handle(&self, mut req: Request) -> Result<Response> {
        let storage = self.state.storage();
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/cmd") => {
                let Some(name) = req.headers().get("x-ledger-name")? else {
                    return Response::error("x-ledger-name header required", 400);
                };
                // The gateway's AMOUNT_MAX for a new deposit or withdrawal (none from a saga).
                let amount_max = match req.headers().get(crate::AMOUNT_MAX_HEADER)? {
                    None => AMOUNT_MINOR_MAX,
                    Some(v) => match v.parse::<i64>() {
                        Ok(max) => max,
                        Err(e) => return Response::error(format!("bad amount max: {e}"), 400),
                    },
                };
                let cmd: Command = match serde_json::from_str(&req.text().await?) {
                    Ok(c) => c,
                    Err(e) => return Response::error(format!("bad command: {e}"), 400),
                };
                if !self.tables.exist(&storage.sql())? {
                    // Nothing was ever written here: the core decides on the empty view
                    // first, and a command it does not commit (a deposit to an account
                    // nobody opened) is answered without creating anything. Only a saga
                    // step's refusal commits here, and the gateway admits no transfer whose
                    // accounts are not open (module doc).
                    let empty = View {
                        header: None,
                        op: None,
                        hold: None,
                        paired_op: None,
                    };
                    let decision = account::decide_within(&name, empty, &cmd, now_ms(), amount_max);
                    if !matches!(decision, Decision::Commit(_)) {
                        return answer(&decision.outcome(), label(&decision));
                    }
                }
                self.tables.ensure(&storage.sql())?;
                // Test faults: make this account unreachable for the next N saga steps, or slow
                // (every saga step waits `fault.delay_commands_ms` before it runs, counted in
                // `fault.delayed_commands`, so a test sees how often a step reached it).
                let saga_step = matches!(
                    cmd,
                    Command::Reserve { .. }
                        | Command::Credit { .. }
                        | Command::Capture { .. }
                        | Command::Release { .. }
                );
                let (failing, delay_ms) = if saga_step {
                    sqltx::transaction(&storage, |sql| {
                        let n = kv_i64(sql, "fault.fail_commands")?.unwrap_or(0);
                        if n > 0 {
                            kv_set(sql, "fault.fail_commands", V::from(n - 1))?;
                            return Ok((true, 0));
                        }
                        let delay_ms = kv_i64(sql, "fault.delay_commands_ms")?.unwrap_or(0);
                        if delay_ms > 0 {
                            let seen = kv_i64(sql, "fault.delayed_commands")?.unwrap_or(0);
                            kv_set(sql, "fault.delayed_commands", V::from(seen + 1))?;
                        }
                        Ok((false, delay_ms))
                    })?
                } else {
                    (false, 0)
                };
                if failing {
                    return Response::error("injected unavailability", 503);
                }
                if delay_ms > 0 {
                    // Before the step's view is loaded: what a slow network or an overloaded
                    // account does. Other requests to this object run meanwhile.
                    worker::Delay::from(std::time::Duration::from_millis(delay_ms as u64)).await;
                }
                outbox::arm_safety_net(&storage).await?;
                let now = now_ms();
                let fail = take_one(&self.fail_after_write);
                let account = name.clone();
                let (outcome, label, emitted) = sqltx::transaction(&storage, move |sql| {
                    let r = execute(sql, &account, &cmd, now, amount_max)?;
                    if fail {
                        // A failing write, not a bug: what a caller sees as no answer.
                        return Err(worker::Error::RustError(
                            "injected failure after write".into(),
                        ));
                    }
                    Ok(r)
                })?;
                if emitted {
                    // Committed, the safety net armed before: still armed? Then drain right after
                    // the answer. Best-effort: whatever fails here, the change is durable, and
                    // an error answer would make the gateway tell the client "did not answer;
                    // retry" about it. The alarm armed before the commit sends the rows.
                    let rechecked = if take_one(&self.fail_after_commit) {
                        Err(worker::Error::RustError(
                            "injected failure after commit".into(),
                        ))
                    } else {
                        outbox::after_commit(&self.state, &self.env, &self.drains).await
                    };
                    if let Err(e) = rechecked {
                        worker::console_error!(
                            "account {name}: committed, but the alarm re-check after it failed: \
                             {e}; answering the committed outcome (the safety net armed before \
                             the commit drains the outbox)"
                        );
                    }
                }
                answer(&outcome, label)
            }
            (Method::Get, "/state") if !self.tables.exist(&storage.sql())? => {
                // Nothing was ever written here: nothing to show, nothing stored.
                let body = json!({
                    "header": null,
                    "outbox": outbox::OutboxStats::default(),
                    "alarm": storage.get_alarm().await?,
                    "alarm_runs": 0,
                    "alarm_heals": 0,
                    "delayed_commands": 0,
                    "stored": false,
                });
                crate::json_text(200, body.to_string())
            }
            (Method::Get, "/header") if !self.tables.exist(&storage.sql())? => {
                crate::json_text(200, json!({ "header": null }).to_string())
            }
            (Method::Get, "/entries") if !self.tables.exist(&storage.sql())? => {
                crate::json_text(200, json!({ "header": null, "entries": [] }).to_string())
            }
            (Method::Get, "/state") => {
                let sql = storage.sql();
                // The alarm as found, and this read arms none: unsent rows with no alarm
                // behind them are a lost alarm (an alarm handler that failed before it
                // re-armed, past the platform's retries), which operators and the tests' drain
                // checks must see. The gateway's reads (`/header`) re-arm one.
                let body = json!({
                    "header": load_header(&sql)?,
                    "outbox": outbox::stats(&sql)?,
                    "alarm": storage.get_alarm().await?,
                    "alarm_runs": kv_i64(&sql, "alarm.runs")?.unwrap_or(0),
                    "alarm_heals": kv_i64(&sql, "alarm.heals")?.unwrap_or(0),
                    "delayed_commands": kv_i64(&sql, "fault.delayed_commands")?.unwrap_or(0),
                    "stored": true,
                });
                crate::json_text(200, body.to_string())
            }
            (Method::Get, "/header") => {
                // The gateway's read of an account (a balance, the accounts a transfer names):
                // the header alone, two indexed reads, not the outbox figures. It re-arms an
                // alarm lost behind unsent rows and counts the heal (`alarm_heals`, to alert
                // on): an idle account's events are not left waiting for its next write. Any
                // command re-arms it too.
                let sql = storage.sql();
                if outbox::has_unsent(&sql)? && storage.get_alarm().await?.is_none() {
                    outbox::set_alarm_at(&storage, now_ms()).await?;
                    let heals = kv_i64(&sql, "alarm.heals")?.unwrap_or(0) + 1;
                    kv_set(&sql, "alarm.heals", V::from(heals))?;
                    worker::console_error!(
                        "account {}: unsent outbox rows had no alarm behind them; re-armed (heal {heals})",
                        req.headers().get("x-ledger-name")?.unwrap_or_default()
                    );
                }
                crate::json_text(200, json!({ "header": load_header(&sql)? }).to_string())
            }
            (Method::Get, "/entries") => {
                #[derive(Deserialize)]
                struct Q {
                    after_seq: Option<i64>,
                    limit: Option<i64>,
                }
                let q: Q = req.query()?;
                let sql = storage.sql();
                let body = json!({
                    "header": load_header(&sql)?,
                    "entries": load_entries(&sql, q.after_seq.unwrap_or(0), q.limit.unwrap_or(50).clamp(1, 1000))?,
                });
                crate::json_text(200, body.to_string())
            }
            (Method::Post, "/_admin/faults") => {
                #[derive(Deserialize)]
                struct Faults {
                    fail_sends: Option<i64>,
                    fail_commands: Option<i64>,
                    fail_after_write: Option<i64>,
                    fail_after_commit: Option<i64>,
                    delay_commands_ms: Option<i64>,
                    drop_alarm: Option<bool>,
                    corrupt_header: Option<bool>,
                }
                let f: Faults = crate::json_or_400!(req);
                self.tables.ensure(&storage.sql())?;
                if let Some(n) = f.fail_after_write {
                    self.fail_after_write.set(n);
                }
                if let Some(n) = f.fail_after_commit {
                    self.fail_after_commit.set(n);
                }
                sqltx::transaction(&storage, move |sql| {
                    if let Some(n) = f.fail_sends {
                        kv_set(sql, "fault.fail_sends", V::from(n))?;
                    }
                    if let Some(n) = f.fail_commands {
                        kv_set(sql, "fault.fail_commands", V::from(n))?;
                    }
                    if let Some(ms) = f.delay_commands_ms {
                        kv_set(sql, "fault.delay_commands_ms", V::from(ms))?;
                    }
                    if f.corrupt_header == Some(true) {
                        // What a code dropped from a table the header is decoded with (a
                        // withdrawn currency) would do to every stored account in it.
                        sql.exec("UPDATE account SET status = 'corrupt'", None)?;
                    }
                    Ok(())
                })?;
                if f.drop_alarm == Some(true) {
                    // A lost alarm (a bug, or the platform losing one): what `/state` and the
                    // tests' drain checks must be able to see.
                    storage.delete_alarm().await?;
                }
                Response::ok("{}")
            }
            _ => Response::error("not found", 404),
        }
    }
}
