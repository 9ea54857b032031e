//! Compaction throughput (rows read per second) on a local directory: N
//! synthetic events on one day, ingested in queue batches of 100 (each batch
//! delivered twice, so half the rows are duplicates), then one partition
//! compacted.
//!
//!   cargo run --release -p ledger-compact --example bench_compact [-- EVENTS]

use std::sync::Arc;
use std::time::Instant;

use ledger_compact::{compact_partition, Lake, Options};
use ledger_ingest::{ingest, synth, Message, Table};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let dir = std::env::temp_dir().join(format!("ledger-bench-compact-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut events = synth::events(n, 64, 1_767_225_600_000);
    for e in events.iter_mut() {
        e.occurred_at_ms = 1_767_225_600_000 + (e.occurred_at_ms - 1_767_225_600_000) % 86_400_000;
        *e = e.clone().seal();
    }
    let bodies: Vec<String> = events.iter().map(|e| e.to_json()).collect();
    let mut files = 0;
    let t = Instant::now();
    for chunk in bodies.chunks(100) {
        let ids: Vec<String> = (0..chunk.len()).map(|i| i.to_string()).collect();
        let msgs: Vec<Message> = ids
            .iter()
            .zip(chunk)
            .map(|(id, b)| Message {
                id,
                body: b.as_bytes(),
            })
            .collect();
        for f in ingest(&msgs).unwrap().files {
            // The redelivered copy gets another (valid) key so that it is a second file.
            for key in [f.key.clone(), redelivered_key(&f.key)] {
                let path = dir.join(&key);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, &f.bytes).unwrap();
                files += 1;
            }
        }
    }
    eprintln!(
        "setup: {files} ingest files from {n} events in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let store = object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap();
    let lake = Lake::from_store(Arc::new(store), "bench");
    for p in lake.partitions(Some(Table::Account)).await.unwrap() {
        let t = Instant::now();
        let r = compact_partition(&lake, &p, &Options::default())
            .await
            .unwrap();
        let s = t.elapsed().as_secs_f64();
        println!("{r}");
        println!(
            "compaction: {} rows read in {s:.2} s = {:.0} rows/s",
            r.input_rows,
            r.input_rows as f64 / s
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A valid lake key for the second copy: change the digest's first hex digit.
fn redelivered_key(k: &str) -> String {
    let (head, digest) = k.rsplit_once("/i-").unwrap();
    let first = u32::from_str_radix(&digest[..1], 16).unwrap();
    format!("{head}/i-{:x}{}", (first + 1) % 16, &digest[1..])
}
