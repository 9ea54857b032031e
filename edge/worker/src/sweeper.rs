//! The sweeper: re-drive transfers by id, from the admin route or from the cron.
//!
//! The cron reads the reconciler's dangling list (`LAKE` bucket, `ledger_api::sweep::DANGLING_KEY`),
//! validates it with `ledger_api::sweep`, re-drives at most `SWEEP_MAX_PER_RUN` transfers from
//! its cursor on, and stores the cursor and a report of the run under
//! `ledger_api::sweep::SWEEP_STATE_KEY`. It never fails the cron: a missing binding or list, an
//! oversized or malformed document, a failed R2 call are logged and the run ends with nothing
//! re-driven. Format and behaviour: docs/SWEEPER.md.
//!
//! A run cannot be held up by one transfer: each re-drive waits at most
//! `SWEEP_REDRIVE_TIMEOUT_MS` (no DO call has a timeout of its own, and an object that never
//! answers would otherwise stop the run before it stores its cursor, so every later run would
//! start at the same transfer and stop there again). And the state is stored after every
//! re-drive, the cursor past it, so a run the platform cuts short (a wall-clock limit, an
//! eviction, a deploy) is taken up by the next one where it stopped.

use ledger_api::sweep::{self, SweepCursor};
use serde_json::{json, Value};
use worker::{Env, Method};

use crate::outbox::now_ms;

/// How long one re-drive is waited for by default: the object drives for at most 5 s plus the
/// step it started last, so an answer later than this is a hung call, not a slow drive. A run
/// then takes at most `SWEEP_MAX_PER_RUN` times this; should the platform end it sooner, the
/// progress stored after each re-drive is where the next run goes on.
const REDRIVE_TIMEOUT_MS_DEFAULT: i64 = 10_000;
/// Bounds of the var `SWEEP_REDRIVE_TIMEOUT_MS`.
const REDRIVE_TIMEOUT_MS_MIN: i64 = 100;
const REDRIVE_TIMEOUT_MS_MAX: i64 = 60_000;

/// `SWEEP_REDRIVE_TIMEOUT_MS`, within its bounds (the default when unset or not an integer).
pub fn redrive_timeout_ms(env: &Env) -> i64 {
    crate::env_i64(env, "SWEEP_REDRIVE_TIMEOUT_MS", REDRIVE_TIMEOUT_MS_DEFAULT)
        .clamp(REDRIVE_TIMEOUT_MS_MIN, REDRIVE_TIMEOUT_MS_MAX)
}

/// Re-drive each transfer now (`POST /drive` on its TransferDO: the next step is attempted at
/// once, ignoring its backoff), one after the other, each waited for at most `timeout_ms`.
/// Returns `{"transfer_id", "phase"}` per id, `phase` null when there is no such transfer; when
/// its object did not answer (an error, a reset, an overload, no answer in time) `phase` is null
/// and `error` says what happened: a failed re-drive, not an unknown id.
pub async fn redrive(env: &Env, ids: &[String], timeout_ms: i64) -> Vec<Value> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(redrive_one(env, id, timeout_ms).await);
    }
    out
}

/// One re-drive, waited for at most `timeout_ms`. A re-drive given up on is not cancelled: the
/// object may still drive the transfer (every step is idempotent), and its alarm goes on.
async fn redrive_one(env: &Env, id: &str, timeout_ms: i64) -> Value {
    let call = crate::call_do_text(env, "TRANSFER", id, Method::Post, "/drive", None);
    let r = match crate::within(timeout_ms, call).await {
        Some(r) => r.map_err(|e| e.to_string()),
        None => Err(format!(
            "no answer within {timeout_ms} ms (SWEEP_REDRIVE_TIMEOUT_MS); the object may still \
             be driving it, and its alarm and the next run go on"
        )),
    };
    let answered = match r {
        Ok((200, text)) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => Ok(v["transfer"]["phase"].as_str().map(str::to_owned)),
            Err(e) => Err(format!("the object's answer is not JSON ({e})")),
        },
        Ok((status, text)) => Err(format!("{status} {text}")),
        Err(e) => Err(e),
    };
    match answered {
        Ok(phase) => json!({"transfer_id": id, "phase": phase}),
        Err(error) => {
            worker::console_warn!("sweeper: re-drive {id} failed: {error}");
            json!({"transfer_id": id, "phase": null, "error": error})
        }
    }
}

/// One cron run. Every failure is logged here; nothing propagates.
pub async fn run(env: &Env, scheduled_at_ms: i64) {
    if let Err(e) = try_run(env, scheduled_at_ms).await {
        worker::console_error!("SWEEP failed: {e}");
    }
}

async fn try_run(env: &Env, scheduled_at_ms: i64) -> worker::Result<()> {
    let bucket = match env.bucket("LAKE") {
        Ok(b) => b,
        Err(e) => {
            worker::console_error!("SWEEP skipped: no LAKE bucket binding ({e})");
            return Ok(());
        }
    };
    let Some(obj) = bucket.get(sweep::DANGLING_KEY).execute().await? else {
        worker::console_log!("sweep: no dangling list at {}", sweep::DANGLING_KEY);
        return Ok(());
    };
    let etag = obj.etag();
    let parsed = match sweep::check_size(obj.size()) {
        Err(e) => Err(e),
        Ok(()) => {
            let text = match obj.body() {
                Some(b) => b.text().await?,
                None => String::new(),
            };
            sweep::parse_dangling(&text)
        }
    };
    let list = match parsed {
        Ok(l) => l,
        Err(e) => {
            worker::console_error!(
                "SWEEP skipped malformed dangling list {} (etag {etag}): {e}",
                sweep::DANGLING_KEY
            );
            return Ok(());
        }
    };
    for (i, why) in &list.skipped {
        worker::console_warn!("sweep: skipped entry {i} of {}: {why}", sweep::DANGLING_KEY);
    }

    let cursor: Option<SweepCursor> = match bucket.get(sweep::SWEEP_STATE_KEY).execute().await {
        Ok(Some(o)) => match o.body() {
            Some(b) => b
                .text()
                .await
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| serde_json::from_value(v["cursor"].clone()).ok()),
            None => None,
        },
        Ok(None) => None,
        Err(e) => {
            worker::console_warn!("sweep: cannot read {}: {e}", sweep::SWEEP_STATE_KEY);
            None
        }
    };
    let configured = env.var("SWEEP_MAX_PER_RUN").ok().map(|v| v.to_string());
    if let Some(v) = configured
        .as_deref()
        .filter(|v| v.trim().parse::<usize>().is_err())
    {
        worker::console_error!(
            "configuration: SWEEP_MAX_PER_RUN={v:?} is not a whole number; using {}",
            sweep::SWEEP_MAX_PER_RUN
        );
    }
    let max = sweep::max_per_run(configured.as_deref());
    let (range, next) = sweep::window(list.transfers.len(), max, &etag, cursor.as_ref());
    let ids = &list.transfers[range.clone()];
    let timeout_ms = redrive_timeout_ms(env);
    let skipped: Vec<Value> = list
        .skipped
        .iter()
        .map(|(i, why)| json!({"index": i, "reason": why}))
        .collect();
    // The state as it stands: `finished_at_ms` null while the run goes on, and `skipped` null
    // then too (listed once, in the final state: the list's bad entries can be thousands, and
    // the progress is stored after every re-drive).
    let state = |cursor: &SweepCursor, redriven: &[Value], finished_at_ms: Option<i64>| {
        json!({
            "version": 1,
            "cursor": cursor,
            "last_run": {
                "scheduled_at_ms": scheduled_at_ms,
                "finished_at_ms": finished_at_ms,
                "list_generated_at_ms": list.generated_at_ms,
                "list_entries": list.transfers.len(),
                "skipped": finished_at_ms.map(|_| &skipped),
                "redriven": redriven,
            },
        })
        .to_string()
    };
    let mut redriven = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        redriven.push(redrive_one(env, id, timeout_ms).await);
        if i + 1 < ids.len() {
            // Progress: the cursor past this transfer (inside the window, so before the end of
            // the list). A failed put is not the end of the run: the last one stores it all.
            let at = SweepCursor {
                list_etag: etag.clone(),
                next_index: range.start + i + 1,
            };
            let put = bucket
                .put(sweep::SWEEP_STATE_KEY, state(&at, &redriven, None))
                .execute()
                .await;
            if let Err(e) = put {
                worker::console_warn!("sweep: progress not stored after {id}: {e}");
            }
        }
    }
    let terminal = redriven
        .iter()
        .filter(|r| {
            matches!(
                r["phase"].as_str(),
                Some("captured" | "failed" | "released")
            )
        })
        .count();
    let failed = redriven.iter().filter(|r| r.get("error").is_some()).count();
    worker::console_log!(
        "sweep: list generated_at_ms={} entries={} skipped={} redriven={} ({}..{}) terminal={} failed={} next_index={}",
        list.generated_at_ms,
        list.transfers.len(),
        list.skipped.len(),
        ids.len(),
        range.start,
        range.end,
        terminal,
        failed,
        next.next_index
    );
    bucket
        .put(
            sweep::SWEEP_STATE_KEY,
            state(&next, &redriven, Some(now_ms())),
        )
        .execute()
        .await?;
    Ok(())
}
