//! Synthetic, valid schema-v1 events (`ledger_ingest::synth::events`, the same the bench uses)
//! as queue message bodies, with the lake files the native core writes for them as ONE batch.
//! The consumer Worker's runtime tests and its benchmark send these bodies through the queue
//! and compare what lands in R2 with the native keys and bytes.
//!
//!   cargo run -p ledger-ingest --example synth -- N [STREAMS] [START_MS]
//!
//! Prints one JSON object on stdout:
//! `{"events": [body, ...], "files": [{"key", "rows", "sha256"}, ...]}`, where each body is the
//! event's JSON text as the edge sends it. Defaults: STREAMS = max(N / 10, 2),
//! START_MS = 1767225600000 (2026-01-01T00:00:00Z, one event per second from there).

use ledger_ingest::{ingest, synth, Message};
use sha2::{Digest, Sha256};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synth N [STREAMS] [START_MS]";
    let n: usize = match args.first().and_then(|s| s.parse().ok()) {
        Some(n) if n > 0 => n,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let streams: usize = args
        .get(1)
        .map(|s| s.parse().expect(usage))
        .unwrap_or((n / 10).max(2));
    let start_ms: i64 = args
        .get(2)
        .map(|s| s.parse().expect(usage))
        .unwrap_or(1_767_225_600_000);

    let bodies: Vec<String> = synth::events(n, streams, start_ms)
        .iter()
        .map(|e| e.to_json())
        .collect();
    let ids: Vec<String> = (0..n).map(|i| format!("synth-{i}")).collect();
    let messages: Vec<Message> = ids
        .iter()
        .zip(&bodies)
        .map(|(id, body)| Message {
            id,
            body: body.as_bytes(),
        })
        .collect();
    let out = ingest(&messages).expect("synthetic events ingest");
    assert!(out.dead_letters.is_empty(), "synthetic events are valid");
    let files: Vec<serde_json::Value> = out
        .files
        .iter()
        .map(|f| {
            let digest = Sha256::digest(&f.bytes);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            serde_json::json!({ "key": f.key, "rows": f.rows, "sha256": hex })
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({ "events": bodies, "files": files })
    );
}
