//! Events/s of the native ingest core (decode, dedup, Arrow, Parquet, keys)
//! for queue batches of 10, 100 and 1,000 events.
//!
//!   cargo run --release -p ledger-ingest --example bench [-- SECONDS_PER_SIZE]

use std::time::Instant;

use ledger_ingest::{ingest, synth, Message};

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    println!("batch_events  batches  events/s  us/batch  files/batch  bytes/batch");
    for n in [10usize, 100, 1_000] {
        let bodies: Vec<Vec<u8>> = synth::events(n, (n / 10).max(2), 1_767_225_600_000)
            .iter()
            .map(|e| e.to_json().into_bytes())
            .collect();
        let ids: Vec<String> = (0..n).map(|i| format!("msg-{i}")).collect();
        let messages: Vec<Message> = ids
            .iter()
            .zip(&bodies)
            .map(|(id, body)| Message { id, body })
            .collect();
        let out = ingest(&messages).unwrap();
        assert_eq!(out.rows(), n);
        let (files, bytes) = (
            out.files.len(),
            out.files.iter().map(|f| f.bytes.len()).sum::<usize>(),
        );
        let start = Instant::now();
        let mut batches = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            std::hint::black_box(ingest(&messages).unwrap());
            batches += 1;
        }
        let t = start.elapsed().as_secs_f64();
        println!(
            "{n:>12}  {batches:>7}  {:>8.0}  {:>8.0}  {files:>11}  {bytes:>11}",
            (batches as f64 * n as f64) / t,
            t * 1e6 / batches as f64
        );
    }
}
