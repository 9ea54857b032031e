//! The queue consumer Worker: ledger events from the `ledger-events` queue into the lake, and
//! from `ledger-events-undelivered` (where that queue puts a batch whose retries are spent) the
//! same way (wrangler.toml; docs/LAKE.md, "Undelivered batches").
//!
//! Thin glue over the pure core (`ledger_ingest::ingest`, contract in ingest/core/src/batch.rs):
//! no rule lives here. Per batch:
//!
//! 1. every message body (text, as the edge sends it) becomes a `ledger_ingest::Message`;
//! 2. the core returns the lake's Parquet files (content-addressed keys) and the dead letters;
//! 3. every file is `put` to R2 (`LAKE`) under its key;
//! 4. every dead letter goes to the dead-letter queue (`LEDGER_EVENTS_DLQ`) as JSON text
//!    `{"message_id", "reason", "body"}`, and is logged with its id, reason and digest (the
//!    logs outlive the queue's retention); every conflict is logged;
//! 5. only then is every message acked, but a newer writer's events (`ledger_ingest::Newer`,
//!    logged), which are retried, message by message: the queue keeps them for an ingest that
//!    reads them.
//!
//! If any step fails the whole batch is retried (`retry_all`) and nothing is acked: a retry
//! produces the same files under the same keys (identical bytes), so a partial earlier attempt
//! leaves nothing a reader miscounts (docs/LAKE.md).
//!
//! Fault injection (tests only): where the var `FAULT_INJECTION` is `"on"` (the runtime tests;
//! wrangler.toml keeps it `"off"`), `FAULT_FAIL_PUTS` lists put ordinals that fail, see
//! [`fault`].

use worker::{
    console_error, console_log, event, js_sys, wasm_bindgen::JsCast, wasm_bindgen::JsValue,
    Context, Env, MessageBatch, MessageBuilder, MessageExt, QueueContentType,
};

const LAKE_BINDING: &str = "LAKE";

/// A MOCK of a fault the real R2 cannot produce on demand: a `put` that fails. Active only where
/// the var `FAULT_INJECTION` is `"on"` (the runtime tests; production config keeps it `"off"`,
/// the same convention as the edge). `FAULT_FAIL_PUTS` is a comma-separated list of put
/// ordinals, counted from 1 over this isolate's lifetime (every put the consumer attempts,
/// across invocations), whose put fails before reaching R2 — e.g. `"2"` lets the first file of
/// a batch land and fails the second, so the batch must be retried.
mod fault {
    use std::sync::atomic::{AtomicU32, Ordering};
    use worker::Env;

    static PUTS: AtomicU32 = AtomicU32::new(0);

    /// The put ordinals to fail; empty (no fault, no counting) unless `FAULT_INJECTION` is on.
    pub fn failing_puts(env: &Env) -> Vec<u32> {
        let on = env
            .var("FAULT_INJECTION")
            .map(|v| v.to_string() == "on")
            .unwrap_or(false);
        if !on {
            return Vec::new();
        }
        env.var("FAULT_FAIL_PUTS")
            .map(|v| v.to_string())
            .unwrap_or_default()
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    }

    /// Counts this put; `Err` when its ordinal is listed.
    pub fn before_put(failing: &[u32], key: &str) -> worker::Result<()> {
        if failing.is_empty() {
            return Ok(());
        }
        let n = PUTS.fetch_add(1, Ordering::SeqCst) + 1;
        if failing.contains(&n) {
            return Err(worker::Error::RustError(format!(
                "injected fault (FAULT_FAIL_PUTS): put #{n} of {key} refused"
            )));
        }
        Ok(())
    }
}
const DLQ_BINDING: &str = "LEDGER_EVENTS_DLQ";

/// A message body as bytes: text as sent by the edge; bytes as is; anything else (a JSON
/// object sent with another content type) as its JSON text, so the core dead-letters it with
/// the exact decode error instead of it being lost.
fn body_bytes(body: &JsValue) -> Vec<u8> {
    if let Some(s) = body.as_string() {
        return s.into_bytes();
    }
    if let Some(a) = body.dyn_ref::<js_sys::Uint8Array>() {
        return a.to_vec();
    }
    if let Some(b) = body.dyn_ref::<js_sys::ArrayBuffer>() {
        return js_sys::Uint8Array::new(b).to_vec();
    }
    js_sys::JSON::stringify(body)
        .ok()
        .and_then(|s| s.as_string())
        .unwrap_or_default()
        .into_bytes()
}

#[event(queue)]
pub async fn main(batch: MessageBatch<JsValue>, env: Env, _ctx: Context) -> worker::Result<()> {
    if let Err(e) = consume(&batch, &env).await {
        // Nothing was acked: the whole batch comes back (same files, same keys).
        console_error!("ingest: batch from {} retried: {e}", batch.queue());
        batch.retry_all();
    }
    Ok(())
}

async fn consume(batch: &MessageBatch<JsValue>, env: &Env) -> worker::Result<()> {
    let raw: Vec<(String, Vec<u8>)> = batch
        .raw_iter()
        .map(|m| (m.id(), body_bytes(&m.body())))
        .collect();
    let messages: Vec<ledger_ingest::Message<'_>> = raw
        .iter()
        .map(|(id, body)| ledger_ingest::Message { id, body })
        .collect();
    let out =
        ledger_ingest::ingest(&messages).map_err(|e| worker::Error::RustError(format!("{e}")))?;

    let lake = env.bucket(LAKE_BINDING)?;
    let failing = fault::failing_puts(env);
    for f in &out.files {
        fault::before_put(&failing, &f.key)?;
        lake.put(f.key.as_str(), f.bytes.clone()).execute().await?;
    }

    if !out.dead_letters.is_empty() {
        let dlq = env.queue(DLQ_BINDING)?;
        for d in &out.dead_letters {
            let body = raw
                .iter()
                .find(|(id, _)| *id == d.message_id)
                .map_or(&[][..], |(_, b)| b.as_slice());
            dlq.send(
                MessageBuilder::new(d.queue_item(body))
                    .content_type(QueueContentType::Text)
                    .build(),
            )
            .await?;
            console_error!("ingest: dead letter {}", d.log_item(body));
        }
    }
    for c in &out.conflicts {
        console_error!("ingest: {c}");
    }
    if let Some(line) = out.newer_line() {
        console_error!("ingest: {line}");
    }

    console_log!(
        "ingest: {} messages -> {} files ({} rows), {} dead letters, {} duplicates, {} conflicts, {} newer",
        raw.len(),
        out.files.len(),
        out.rows(),
        out.dead_letters.len(),
        out.duplicates.len(),
        out.conflicts.len(),
        out.newer.len()
    );
    // Message by message: a newer writer's event is retried, every other acked.
    for m in batch.raw_iter() {
        let id = m.id();
        if out.newer.iter().any(|n| n.message_id == id) {
            m.retry();
        } else {
            m.ack();
        }
    }
    Ok(())
}
