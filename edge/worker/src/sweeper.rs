//! The sweeper: re-drive transfers by id, from the admin route or from the cron.
//!
//! The cron reads the reconciler's dangling list (`LAKE` bucket, `ledger_api::sweep::DANGLING_KEY`),
//! validates it with `ledger_api::sweep`, re-drives at most `SWEEP_MAX_PER_RUN` transfers from
//! its cursor on, and stores the cursor and a report of the run under
//! `ledger_api::sweep::SWEEP_STATE_KEY`. It never fails the cron: a missing binding or list, an
//! oversized or malformed document, a failed R2 call are logged and the run ends with nothing
//! re-driven. Format and behaviour: docs/SWEEPER.md.

use ledger_api::sweep::{self, SweepCursor};
use serde_json::{json, Value};
use worker::{Env, Method};

use crate::outbox::now_ms;

/// Re-drive each transfer now (`POST /drive` on its TransferDO: the next step is attempted at
/// once, ignoring its backoff). Returns `{"transfer_id", "phase"}` per id, `phase` null when
/// there is no such transfer; when its object did not answer (an error, a reset, an overload)
/// `phase` is null and `error` says what happened: a failed re-drive, not an unknown id.
pub async fn redrive(env: &Env, ids: &[String]) -> Vec<Value> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let r = crate::call_do_text(env, "TRANSFER", id, Method::Post, "/drive", None).await;
        let answered = match r {
            Ok((200, text)) => match serde_json::from_str::<Value>(&text) {
                Ok(v) => Ok(v["transfer"]["phase"].as_str().map(str::to_owned)),
                Err(e) => Err(format!("the object's answer is not JSON ({e})")),
            },
            Ok((status, text)) => Err(format!("{status} {text}")),
            Err(e) => Err(e.to_string()),
        };
        out.push(match answered {
            Ok(phase) => json!({"transfer_id": id, "phase": phase}),
            Err(error) => {
                worker::console_warn!("sweeper: re-drive {id} failed: {error}");
                json!({"transfer_id": id, "phase": null, "error": error})
            }
        });
    }
    out
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
    let max = sweep::max_per_run(
        env.var("SWEEP_MAX_PER_RUN")
            .ok()
            .map(|v| v.to_string())
            .as_deref(),
    );
    let (range, next) = sweep::window(list.transfers.len(), max, &etag, cursor.as_ref());
    let ids = &list.transfers[range.clone()];
    let redriven = redrive(env, ids).await;
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
    let state = json!({
        "version": 1,
        "cursor": next,
        "last_run": {
            "scheduled_at_ms": scheduled_at_ms,
            "finished_at_ms": now_ms(),
            "list_generated_at_ms": list.generated_at_ms,
            "list_entries": list.transfers.len(),
            "skipped": list.skipped.iter().map(|(i, why)| json!({"index": i, "reason": why})).collect::<Vec<_>>(),
            "redriven": redriven,
        },
    });
    bucket
        .put(sweep::SWEEP_STATE_KEY, state.to_string())
        .execute()
        .await?;
    Ok(())
}
