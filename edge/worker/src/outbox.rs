//! Transactional outbox shared by every Durable Object class.
//!
//! A state change and its outbox row are written by the same `sqltx::transaction` call. Before
//! it the object arms a safety-net alarm `SAFETY_NET_MS` ahead ([`arm_safety_net`]); after it,
//! the object answers and drains in the background ([`drain_soon`], `State::wait_until`); the
//! alarm drains whatever that left (a crash, a failed send, a drain already running). Drains of one
//! object never overlap ([`DrainGate`]); while sends fail, only the alarm retries (backoff).
//! A drain sends unsent rows to the Queue in bounded batches (`queue.send_batch`, at most
//! `batch` messages per send, at most `max_batches` sends per alarm invocation) and marks rows sent
//! only after the send resolved OK. A failed send leaves the rows unsent and re-arms the alarm with
//! exponential backoff, so delivery is at-least-once; consumers dedup on `event_id`.
//!
//! Message body: a JSON *string* sent with content type `text` (`MessageBuilder::content_type(
//! QueueContentType::Text)`). Sending a serde value with the default `json` content type goes
//! through `serde_wasm_bindgen` → JS numbers, which silently loses i64 precision above 2^53;
//! a JSON string keeps every digit for the (Rust) consumer.
//!
//! The message body is the event in schema v1 (`ledger_events::Event::to_json`, docs/EVENTS.md).

use std::cell::Cell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use worker::{
    Date, Env, MessageBuilder, Queue, QueueContentType, ScheduledTime, SendMessage, SqlStorage,
    SqlStorageValue as V, State, Storage,
};

use crate::sqltx;
use worker::js_sys;

pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v)",
    "CREATE TABLE IF NOT EXISTS outbox (
        seq INTEGER PRIMARY KEY,          -- contiguous from 1 per object (= per stream key)
        event_id TEXT NOT NULL UNIQUE,    -- stream:key:seq
        kind TEXT NOT NULL,
        body TEXT NOT NULL,               -- the exact message sent to the queue
        created_at INTEGER NOT NULL,
        sent_at INTEGER                   -- NULL until queue.send_batch resolved OK
    )",
    "CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox(seq) WHERE sent_at IS NULL",
];

pub fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

/// A Durable Object's tables, created with its first write rather than in its
/// constructor (which runs for any request, a read of an id nobody created
/// included): an object that never wrote is not kept, so reading unknown ids
/// stores nothing. The `CREATE … IF NOT EXISTS` statements (which also add
/// tables a newer version brings) run once per instance, before its first
/// write, not before every write.
pub struct Tables {
    /// One of the object's own tables: it exists once the schema does.
    probe: &'static str,
    extra: &'static [&'static str],
    /// The statements ran in this instance.
    ensured: Cell<bool>,
}

impl Tables {
    pub fn new(probe: &'static str, extra: &'static [&'static str]) -> Tables {
        Tables {
            probe,
            extra,
            ensured: Cell::new(false),
        }
    }

    /// Whether the object has its tables.
    pub fn exist(&self, sql: &SqlStorage) -> worker::Result<bool> {
        if self.ensured.get() {
            return Ok(true);
        }
        let n = sql
            .exec(
                "SELECT COUNT(*) AS v FROM sqlite_master WHERE type = 'table' AND name = ?",
                vec![V::from(self.probe)],
            )?
            .one::<OneI64>()?
            .v
            .unwrap_or(0);
        Ok(n > 0)
    }

    /// Creates them unless this instance did already: before a write.
    pub fn ensure(&self, sql: &SqlStorage) -> worker::Result<()> {
        if !self.ensured.get() {
            ensure_schema(sql, self.extra)?;
            self.ensured.set(true);
        }
        Ok(())
    }
}

fn ensure_schema(sql: &SqlStorage, extra: &[&str]) -> worker::Result<()> {
    for stmt in SCHEMA.iter().chain(extra.iter()) {
        sql.exec(stmt, None)?;
    }
    Ok(())
}

#[derive(Deserialize)]
struct OneI64 {
    v: Option<i64>,
}

#[derive(Deserialize)]
struct OneText {
    v: Option<String>,
}

pub fn kv_i64(sql: &SqlStorage, k: &str) -> worker::Result<Option<i64>> {
    let rows: Vec<OneI64> = sql
        .exec("SELECT v FROM kv WHERE k = ?", vec![V::from(k)])?
        .to_array()?;
    Ok(rows.into_iter().next().and_then(|r| r.v))
}

pub fn kv_text(sql: &SqlStorage, k: &str) -> worker::Result<Option<String>> {
    let rows: Vec<OneText> = sql
        .exec(
            "SELECT CAST(v AS TEXT) AS v FROM kv WHERE k = ?",
            vec![V::from(k)],
        )?
        .to_array()?;
    Ok(rows.into_iter().next().and_then(|r| r.v))
}

pub fn kv_set(sql: &SqlStorage, k: &str, v: V) -> worker::Result<()> {
    sql.exec(
        "INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
        vec![V::from(k), v],
    )?;
    Ok(())
}

/// Append one event (schema v1, `Event::to_json()`) as the outbox row of its seq; call only
/// inside `sqltx::transaction` together with the state change it describes. Each object is one
/// stream, so the outbox seq is the event's stream seq (contiguous from 1).
pub fn append_event(sql: &SqlStorage, ev: &ledger_core::Event, at: i64) -> worker::Result<()> {
    sql.exec(
        "INSERT INTO outbox (seq, event_id, kind, body, created_at) VALUES (?, ?, ?, ?, ?)",
        vec![
            V::try_from_i64(ev.seq as i64)?,
            V::from(ev.event_id.as_str()),
            V::from(ev.kind.as_str()),
            V::from(ev.to_json()),
            V::from(at),
        ],
    )?;
    Ok(())
}

#[derive(Serialize, Deserialize, Default, Debug)]
pub struct OutboxStats {
    pub last_seq: i64,
    pub pending: i64,
    /// Rows ever sent (a counter: sent rows are pruned after [`DrainCfg::keep_sent_ms`]).
    pub sent: i64,
    /// Sent rows still stored.
    pub kept: i64,
    pub drains: i64,
    /// Largest batch ever sent (proves the bound).
    pub max_batch: i64,
    pub fail_streak: i64,
    pub last_error: Option<String>,
}

/// The outbox's figures without a scan of its rows: its seqs by the primary key (the rows
/// stored are one run of seqs: pruning takes the lowest), the unsent ones by their partial index,
/// the rows ever sent by a counter.
pub fn stats(sql: &SqlStorage) -> worker::Result<OutboxStats> {
    #[derive(Deserialize)]
    struct Row {
        first_seq: i64,
        last_seq: i64,
        pending: i64,
    }
    let r: Row = sql
        .exec(
            "SELECT COALESCE(MIN(seq), 1) AS first_seq, COALESCE(MAX(seq), 0) AS last_seq,
                    (SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL) AS pending
             FROM outbox",
            None,
        )?
        .one()?;
    Ok(OutboxStats {
        last_seq: r.last_seq,
        pending: r.pending,
        kept: r.last_seq - r.first_seq + 1 - r.pending,
        sent: sent_count(sql)?,
        drains: kv_i64(sql, "outbox.drains")?.unwrap_or(0),
        max_batch: kv_i64(sql, "outbox.max_batch")?.unwrap_or(0),
        fail_streak: kv_i64(sql, "outbox.fail_streak")?.unwrap_or(0),
        last_error: kv_text(sql, "outbox.last_error")?,
    })
}

/// Rows ever sent: the counter, or (an object whose rows were sent before it was kept, none
/// pruned yet) the count of its sent rows.
fn sent_count(sql: &SqlStorage) -> worker::Result<i64> {
    if let Some(n) = kv_i64(sql, "outbox.sent")? {
        return Ok(n);
    }
    #[derive(Deserialize)]
    struct Row {
        n: i64,
    }
    let r: Row = sql
        .exec(
            "SELECT COUNT(*) AS n FROM outbox WHERE sent_at IS NOT NULL",
            None,
        )?
        .one()?;
    Ok(r.n)
}

#[derive(Clone, Copy, Debug)]
pub struct DrainCfg {
    /// Messages per `send_batch` (Queues accept at most 100 per batch, 256 KB in all).
    pub batch: usize,
    /// Sends per alarm invocation; leftovers re-arm the alarm immediately.
    pub max_batches: usize,
    /// How long a sent row is kept before it is pruned (`OUTBOX_KEEP_SENT_MS`, default
    /// [`KEEP_SENT_MS`]).
    pub keep_sent_ms: i64,
}

/// A sent row is kept 14 days: as long as a queue keeps a message (Queues retain one at most
/// 14 days, the held dead-letter queue included), so while a message may still be lost on its
/// way to the lake its row is here for an operator to send again. Then it is pruned: the lake
/// is the archive, and an account's outbox would otherwise grow with its whole history.
pub const KEEP_SENT_MS: i64 = 14 * 86_400_000;

/// Rows one drain batch prunes at most (the lowest seqs, by the primary key: a bounded step
/// per batch sent, so pruning keeps up without ever scanning the table).
const PRUNE_MAX: i64 = 200;

#[derive(Debug, Serialize)]
pub enum Drain {
    /// Nothing left unsent.
    Done { sent: usize },
    /// Stopped at `max_batches`; more rows wait. Caller re-arms now.
    More { sent: usize },
    /// A send failed; rows stay unsent. Caller re-arms after `retry_in_ms`.
    Failed { sent: usize, retry_in_ms: i64 },
}

#[derive(Deserialize)]
struct Unsent {
    seq: i64,
    body: String,
}

/// Drain unsent rows in seq order. Each row is marked sent only after its batch's
/// `queue.send_batch(..).await` resolved OK.
pub async fn drain(storage: &Storage, queue: &Queue, cfg: DrainCfg) -> worker::Result<Drain> {
    let sql = storage.sql();
    let mut sent = 0usize;
    for _ in 0..cfg.max_batches {
        let rows: Vec<Unsent> = sql
            .exec(
                "SELECT seq, body FROM outbox WHERE sent_at IS NULL ORDER BY seq LIMIT ?",
                vec![V::from(cfg.batch as i64)],
            )?
            .to_array()?;
        if rows.is_empty() {
            return Ok(Drain::Done { sent });
        }
        let (first, last) = (rows[0].seq, rows[rows.len() - 1].seq);
        let n = rows.len();
        let msgs: Vec<SendMessage<String>> = rows
            .into_iter()
            .map(|r| {
                MessageBuilder::new(r.body)
                    .content_type(QueueContentType::Text)
                    .build()
            })
            .collect();

        // Test-only fault injection (set through the admin API): fail the next N sends.
        let injected = take_injected_failure(storage)?;
        let result = if injected {
            Err(worker::Error::RustError(
                "injected queue send failure".into(),
            ))
        } else {
            queue.send_batch(msgs).await
        };

        match result {
            Ok(()) => {
                let at = now_ms();
                let keep_sent_ms = cfg.keep_sent_ms;
                sqltx::transaction(storage, move |sql| {
                    #[derive(Deserialize)]
                    struct Row {
                        n: i64,
                    }
                    let marking: Row = sql
                        .exec(
                            "SELECT COUNT(*) AS n FROM outbox
                             WHERE seq BETWEEN ? AND ? AND sent_at IS NULL",
                            vec![V::from(first), V::from(last)],
                        )?
                        .one()?;
                    let ever = sent_count(sql)? + marking.n;
                    sql.exec(
                        "UPDATE outbox SET sent_at = ? WHERE seq BETWEEN ? AND ? AND sent_at IS NULL",
                        vec![V::from(at), V::from(first), V::from(last)],
                    )?;
                    kv_set(sql, "outbox.sent", V::from(ever))?;
                    // The oldest sent rows past their keep, the last row always kept (its seq
                    // is the stream's last). The oldest row first (the primary key): with
                    // nothing to prune, one lookup.
                    #[derive(Deserialize)]
                    struct Oldest {
                        sent_at: Option<i64>,
                    }
                    let cutoff = at.saturating_sub(keep_sent_ms);
                    let oldest: Vec<Oldest> = sql
                        .exec("SELECT sent_at FROM outbox ORDER BY seq LIMIT 1", None)?
                        .to_array()?;
                    if oldest
                        .first()
                        .and_then(|o| o.sent_at)
                        .is_some_and(|t| t < cutoff)
                    {
                        sql.exec(
                            "DELETE FROM outbox
                             WHERE seq IN (SELECT seq FROM outbox ORDER BY seq LIMIT ?)
                               AND sent_at IS NOT NULL AND sent_at < ?
                               AND seq < (SELECT MAX(seq) FROM outbox)",
                            vec![V::from(PRUNE_MAX), V::from(cutoff)],
                        )?;
                    }
                    sql.exec(
                        "INSERT INTO kv (k, v) VALUES ('outbox.drains', 1)
                         ON CONFLICT(k) DO UPDATE SET v = v + 1",
                        None,
                    )?;
                    kv_set(sql, "outbox.fail_streak", V::from(0i64))?;
                    let max = kv_i64(sql, "outbox.max_batch")?.unwrap_or(0).max(n as i64);
                    kv_set(sql, "outbox.max_batch", V::from(max))?;
                    sql.exec("DELETE FROM kv WHERE k = 'outbox.last_error'", None)?;
                    Ok(())
                })?;
                sent += n;
            }
            Err(e) => {
                let msg = e.to_string();
                let streak = sqltx::transaction(storage, move |sql| {
                    let streak = kv_i64(sql, "outbox.fail_streak")?.unwrap_or(0) + 1;
                    kv_set(sql, "outbox.fail_streak", V::from(streak))?;
                    kv_set(sql, "outbox.last_error", V::from(msg))?;
                    Ok(streak)
                })?;
                // 1 s, 2 s, 4 s ... capped at 60 s.
                let retry_in_ms = (1000i64 << (streak - 1).min(6)).min(60_000);
                return Ok(Drain::Failed { sent, retry_in_ms });
            }
        }
    }
    Ok(if has_unsent(&sql)? {
        Drain::More { sent }
    } else {
        Drain::Done { sent }
    })
}

fn take_injected_failure(storage: &Storage) -> worker::Result<bool> {
    sqltx::transaction(storage, |sql| {
        let n = kv_i64(sql, "fault.fail_sends")?.unwrap_or(0);
        if n > 0 {
            kv_set(sql, "fault.fail_sends", V::from(n - 1))?;
        }
        Ok(n > 0)
    })
}

/// Make sure an alarm fires no later than `at_ms` (keeps an earlier one).
/// `get_alarm`/`set_alarm` are the workers-rs bindings of `storage.getAlarm/setAlarm`; on a
/// SQLite-backed object the alarm time is stored in the same database and survives restarts.
pub async fn arm_alarm_by(storage: &Storage, at_ms: i64) -> worker::Result<()> {
    match storage.get_alarm().await? {
        Some(existing) if existing <= at_ms => Ok(()),
        _ => {
            let when = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at_ms as f64));
            storage.set_alarm(ScheduledTime::new(when)).await
        }
    }
}

/// Unconditionally (re)schedule the alarm. Used inside `alarm()`, where the alarm being handled
/// is still "current" and would otherwise be deleted when the handler returns.
pub async fn set_alarm_at(storage: &Storage, at_ms: i64) -> worker::Result<()> {
    let when = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at_ms as f64));
    storage.set_alarm(ScheduledTime::new(when)).await
}

/// The longest wait of an alarm handler's fallback ([`AlarmFallback::arm`]): the saga's longest
/// backoff.
pub const FALLBACK_MS_MAX: i64 = 60_000;

/// An object's alarm handlers in a row that did not finish (in memory: a new instance, after a
/// kill or a reset, starts from none), which [`AlarmFallback::arm`] backs off by.
#[derive(Default)]
pub struct AlarmFallback(Cell<u32>);

impl AlarmFallback {
    /// First thing in an alarm handler: a fallback alarm. A handler that fails returns before it
    /// sets its next alarm, and the runtime stops retrying a failing alarm after a few attempts:
    /// an object with unsent rows or a transfer not terminal would then wait for a request or the
    /// nightly sweep. The fallback waits `SAFETY_NET_MS`, doubling with each handler in a row that
    /// did not finish in this instance (a new instance after a kill retries at once; a persistent
    /// error backs off to `FALLBACK_MS_MAX` and keeps its object alive and logging). The handler
    /// replaces it with the alarm it wants, or deletes it ([`AlarmFallback::settle`]).
    pub async fn arm(&self, storage: &Storage) -> worker::Result<()> {
        let unfinished = self.0.get();
        self.0.set(unfinished.saturating_add(1));
        let wait = (SAFETY_NET_MS << unfinished.min(5)).min(FALLBACK_MS_MAX);
        set_alarm_at(storage, now_ms() + wait).await
    }

    /// The end of an alarm handler that armed its fallback: the alarm at `next`, or none, unless
    /// rows are unsent: a command may have committed while the handler awaited (after seeing
    /// the fallback armed, it set no alarm of its own), and its rows need one. The check and the
    /// delete run with no await between, so a command committing later sees no alarm and arms
    /// its own ([`after_commit`]).
    pub async fn settle(&self, storage: &Storage, next: Option<i64>) -> worker::Result<()> {
        self.0.set(0);
        let unsent = has_unsent(&storage.sql())?;
        match next {
            Some(at) => set_alarm_at(storage, at).await,
            None if unsent => set_alarm_at(storage, now_ms() + SAFETY_NET_MS).await,
            None => storage.delete_alarm().await,
        }
    }
}

/// Whether the outbox has a row not yet sent (the partial index `outbox_unsent`: no scan).
pub fn has_unsent(sql: &SqlStorage) -> worker::Result<bool> {
    #[derive(Deserialize)]
    struct Row {
        v: i64,
    }
    let r: Row = sql
        .exec(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE sent_at IS NULL) AS v",
            None,
        )?
        .one()?;
    Ok(r.v != 0)
}

/// After a commit that wrote outbox rows (the safety net armed before it): make sure an alarm
/// still stands (an alarm handler that finished in between may have deleted the one this
/// command saw), then drain right after the answer ([`drain_soon`]), whether or not the
/// re-check could be made. Best-effort, for the caller to log, never to fail its answer with:
/// the change is committed, and the safety net armed before the commit stands unless a
/// handler deleted it in that window, which the drain started here then covers.
pub async fn after_commit(state: &State, env: &Env, gate: &DrainGate) -> worker::Result<()> {
    let rearmed = arm_alarm_by(&state.storage(), now_ms() + SAFETY_NET_MS).await;
    drain_soon(state, env, gate);
    rearmed
}

/// After a drain: re-arm according to the outcome. Returns the next wake-up wanted by the outbox.
pub fn next_wake(d: &Drain, now: i64) -> Option<i64> {
    match d {
        Drain::Done { .. } => None,
        Drain::More { .. } => Some(now),
        Drain::Failed { retry_in_ms, .. } => Some(now + retry_in_ms),
    }
}

pub fn drain_cfg(env: &worker::Env) -> DrainCfg {
    // A setting that is not a whole number, or outside its range, is logged where it is read.
    let get = |name: &str, default: i64, least: i64, most: i64| {
        crate::env_i64_within(env, name, default, least, most) as usize
    };
    DrainCfg {
        batch: get("OUTBOX_BATCH_SIZE", 50, 1, 100),
        max_batches: get("OUTBOX_MAX_BATCHES_PER_ALARM", 4, 1, i64::from(u32::MAX)),
        keep_sent_ms: crate::env_i64(env, "OUTBOX_KEEP_SENT_MS", KEEP_SENT_MS).max(0),
    }
}

/// How far ahead the safety-net alarm is armed at a commit whose rows are drained inline.
pub const SAFETY_NET_MS: i64 = 2_000;

/// One drain at a time per object (in memory: a restarted object starts with none running).
/// A commit that finds a drain running marks it dirty, and that drain goes round once more, so
/// rows committed during a send do not wait for the safety-net alarm.
#[derive(Clone, Default)]
pub struct DrainGate(Rc<GateState>);

#[derive(Default)]
pub struct GateState {
    running: Cell<bool>,
    dirty: Cell<bool>,
}

/// Extra rounds one gated drain makes for rows committed while it ran; then the alarm.
const DIRTY_ROUNDS_MAX: usize = 4;

impl DrainGate {
    /// Drain, unless a drain of this object is already running: `None` (that one goes round
    /// again, or the safety-net alarm, sends the new rows).
    pub async fn drain(
        &self,
        storage: &Storage,
        queue: &Queue,
        cfg: DrainCfg,
    ) -> worker::Result<Option<Drain>> {
        if self.0.running.replace(true) {
            self.0.dirty.set(true);
            return Ok(None);
        }
        let mut r;
        let mut rounds = 0;
        loop {
            self.0.dirty.set(false);
            r = drain(storage, queue, cfg).await;
            rounds += 1;
            let again = self.0.dirty.get() && rounds <= DIRTY_ROUNDS_MAX;
            if !again || !matches!(r, Ok(Drain::Done { .. })) {
                break;
            }
        }
        if self.0.dirty.replace(false) {
            // Rows committed during the last round: leave them to a prompt alarm.
            if let Ok(Drain::Done { sent }) = r {
                r = Ok(Drain::More { sent });
            }
        }
        self.0.running.set(false);
        r.map(Some)
    }
}

/// Before a command that may write outbox rows: arm the safety net `SAFETY_NET_MS` ahead. Armed
/// before the write, not after it: an object reset between its commit and the arming would leave
/// the rows with no alarm behind them until the object's next change (the client's retry is a
/// replay, which writes nothing), and the reconciler cannot see an event missing at a stream's
/// end. An alarm with nothing to send costs one empty drain.
pub async fn arm_safety_net(storage: &Storage) -> worker::Result<()> {
    arm_alarm_by(storage, now_ms() + SAFETY_NET_MS).await
}

/// Drain in the background (after the response) unless sends are failing (then the alarm's
/// backoff decides); leftovers re-arm the alarm per [`next_wake`].
pub fn drain_soon(state: &State, env: &Env, gate: &DrainGate) {
    let storage = state.storage();
    let queue = match env.queue("LEDGER_EVENTS") {
        Ok(q) => q,
        Err(e) => {
            worker::console_error!("outbox: no queue binding: {e}");
            return;
        }
    };
    let cfg = drain_cfg(env);
    let gate = gate.clone();
    state.wait_until(async move {
        let failing = kv_i64(&storage.sql(), "outbox.fail_streak")
            .ok()
            .flatten()
            .unwrap_or(0)
            > 0;
        if failing {
            return;
        }
        let r = match gate.drain(&storage, &queue, cfg).await {
            Ok(Some(d)) => match next_wake(&d, now_ms()) {
                Some(at) => arm_alarm_by(&storage, at).await,
                None => Ok(()),
            },
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            worker::console_warn!("outbox: inline drain: {e} (the alarm retries)");
        }
    });
}
