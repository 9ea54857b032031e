//! What the compaction tests share: the small-file lake they compact and
//! the assertions that hold on any store (local directory or S3), so the S3
//! test asserts exactly what the local tests assert.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use futures::TryStreamExt;
use ledger_compact::{compact_partition, read_table_deduplicated, Lake, Options, StopAt};
use ledger_events::decode;
use ledger_ingest::{
    ingest, parse_object_key, synth, FileLayer, FileVersion, Manifest, Message, Row, Table,
    Unaccounted, MANIFEST_PREFIX,
};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};

pub fn golden_lines() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../edge/events/golden/v1");
    let mut lines = Vec::new();
    for name in ["account.jsonl", "transfer.jsonl"] {
        lines.extend(
            std::fs::read_to_string(dir.join(name))
                .unwrap()
                .lines()
                .map(str::to_owned),
        );
    }
    lines
}

/// The queue batches of a lake of many small ingest files: the golden
/// vectors, a conflicting version of one event, a partial redelivery, and
/// synthetic events over two days in batches of 50, each batch delivered
/// twice with an overlap.
pub fn small_file_batches() -> Vec<Vec<String>> {
    let lines = golden_lines();
    let mut batches = vec![lines.clone()];
    let mut forged = decode(lines[1].as_bytes()).unwrap();
    forged.amount = Some(forged.amount.unwrap() + 1);
    forged.balance_after = Some(forged.balance_after.unwrap() + 1);
    batches.push(vec![forged.seal().to_json(), lines[2].clone()]);
    batches.push(lines[..6].to_vec());
    let synthetic: Vec<String> = synth::events(1_000, 8, 1_767_225_600_000 + 86_000_000)
        .iter()
        .map(|e| e.to_json())
        .collect();
    for (i, chunk) in synthetic.chunks(50).enumerate() {
        batches.push(chunk.to_vec());
        let start = (i * 50).saturating_sub(10);
        batches.push(synthetic[start..(i * 50 + 20).min(synthetic.len())].to_vec());
    }
    batches
}

/// The files ingest writes for one queue batch (key, bytes).
pub fn ingest_files(bodies: &[String]) -> Vec<(String, Vec<u8>)> {
    let ids: Vec<String> = (0..bodies.len()).map(|i| format!("m{i}")).collect();
    let messages: Vec<Message> = ids
        .iter()
        .zip(bodies)
        .map(|(id, b)| Message {
            id,
            body: b.as_bytes(),
        })
        .collect();
    ingest(&messages)
        .unwrap()
        .files
        .into_iter()
        .map(|f| (f.key, f.bytes))
        .collect()
}

/// Puts one batch's ingest files through the lake's store.
pub async fn ingest_into_store(lake: &Lake, bodies: &[String]) {
    for (key, bytes) in ingest_files(bodies) {
        lake.store
            .put(&ObjectPath::from(key.as_str()), PutPayload::from(bytes))
            .await
            .unwrap();
    }
}

/// Every object key under events/ (lake files or not), sorted.
pub async fn keys(lake: &Lake) -> Vec<String> {
    let mut keys: Vec<String> = lake
        .store
        .list(Some(&ObjectPath::from("events")))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    keys.sort();
    keys
}

/// What every reader sees: the deduplicated rows of each table.
pub async fn view(lake: &Lake) -> Vec<Vec<Row>> {
    let mut v = Vec::new();
    for t in [Table::Account, Table::Transfer] {
        v.push(read_table_deduplicated(lake, t).await.unwrap());
    }
    v
}

/// Rows a compaction of these tests holds before spilling a run: small, so
/// that every partition of the small-file lake is merged from many runs on
/// disk (the tests that pass `Options::default()` merge in memory).
pub const TEST_RUN_ROWS: usize = 37;

/// Runs a compaction of these tests merges side by side: small, so that
/// they are merged into longer runs first.
pub const TEST_FAN_IN: usize = 3;

/// Compacts every partition, runs of [`TEST_RUN_ROWS`] rows spilled.
pub async fn compact_all(lake: &Lake, stop_at: StopAt) -> Vec<ledger_compact::PartitionReport> {
    let mut reports = Vec::new();
    for p in lake.partitions(None).await.unwrap() {
        let r = compact_partition(
            lake,
            &p,
            &Options {
                stop_at,
                run_rows: Some(TEST_RUN_ROWS),
                fan_in: Some(TEST_FAN_IN),
                ..Options::default()
            },
        )
        .await
        .unwrap();
        let stopped = r.stopped_early;
        reports.push(r);
        if stopped {
            break;
        }
    }
    reports
}

/// After a complete compaction of the partitions under `prefix`: only `c-`
/// files are left there (every input is gone), each holds every event once,
/// sorted by stream_key, seq, hash, and no event is in two of them; and
/// readers see exactly what they saw `before`.
pub async fn assert_compacted(lake: &Lake, prefix: &str, before: &[Vec<Row>]) {
    let mut seen = BTreeSet::new();
    let mut outputs = 0;
    for f in keys(lake).await.iter().filter(|k| k.starts_with(prefix)) {
        assert_eq!(
            parse_object_key(f).map(|k| k.layer),
            Some(FileLayer::Compacted),
            "{f}: only compacted files are left"
        );
        outputs += 1;
        let bytes = lake
            .store
            .get(&ObjectPath::from(f.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let rows = ledger_ingest::read_file(f, bytes).unwrap();
        for r in &rows {
            assert!(
                seen.insert((r.event.event_id.clone(), r.event.hash.clone())),
                "{f}: {} is in no other compacted file and only once in this one",
                r.event.event_id
            );
        }
        assert!(rows.windows(2).all(|w| (
            &w[0].event.stream_key,
            w[0].event.seq,
            &w[0].event.hash
        ) < (
            &w[1].event.stream_key,
            w[1].event.seq,
            &w[1].event.hash
        )));
    }
    assert!(outputs > 0, "{prefix}: no compacted file");
    assert_eq!(
        view(lake).await,
        before,
        "readers see exactly the same deduplicated rows"
    );
}

/// Mid-way (outputs written, inputs not all deleted): both layers are
/// present under `prefix`, and readers still see exactly what they saw
/// `before`, each event once.
pub async fn assert_mid_way(lake: &Lake, prefix: &str, before: &[Vec<Row>], what: &str) {
    let mid: Vec<String> = keys(lake)
        .await
        .into_iter()
        .filter(|k| k.starts_with(prefix))
        .collect();
    assert!(
        mid.iter().any(|f| f.contains("/c-")) && mid.iter().any(|f| f.contains("/i-")),
        "{what}: both layers: {mid:?}"
    );
    assert_eq!(
        view(lake).await,
        before,
        "{what}: a reader mid-compaction sees the same rows"
    );
}

/// Every lake file under events/ as the store lists it (key, size, ETag).
pub async fn versions(lake: &Lake) -> Vec<FileVersion> {
    let mut v: Vec<FileVersion> = lake
        .store
        .list(Some(&ObjectPath::from("events")))
        .map_ok(|m| FileVersion {
            key: m.location.to_string(),
            size: m.size,
            e_tag: m.e_tag,
        })
        .try_collect()
        .await
        .unwrap();
    v.sort();
    v
}

/// Every compaction manifest in the lake, each checked by `Manifest::parse`.
pub async fn manifests(lake: &Lake) -> Vec<Manifest> {
    let metas: Vec<_> = lake
        .store
        .list(Some(&ObjectPath::from(MANIFEST_PREFIX)))
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for m in metas {
        let key = m.location.to_string();
        let bytes = lake
            .store
            .get(&m.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        out.push(Manifest::parse(&key, &bytes).unwrap());
    }
    out
}

/// Which of the files listed `before` (any that are gone or changed now)
/// the lake's manifests do not account for (`ledger_ingest::manifest`).
pub async fn unaccounted(lake: &Lake, before: &[FileVersion]) -> Option<Unaccounted> {
    let now: Vec<(String, String)> = versions(lake)
        .await
        .into_iter()
        .map(|f| (f.key.clone(), f.stamp()))
        .collect();
    let listed = now.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
    let before: Vec<(String, String)> = before.iter().map(|f| (f.key.clone(), f.stamp())).collect();
    let gone = before
        .iter()
        .filter(|(k, s)| !now.contains(&(k.clone(), s.clone())))
        .map(|(k, s)| (k.as_str(), s.as_str()));
    ledger_ingest::unaccounted(gone, &listed, &manifests(lake).await)
        .into_iter()
        .next()
}

/// Compaction deleted some of the files listed `before`, and its manifests
/// account for every one of them; without the manifests, none would be.
pub async fn assert_accounted(lake: &Lake, before: &[FileVersion]) {
    let now = versions(lake).await;
    let gone: Vec<&FileVersion> = before.iter().filter(|f| !now.contains(f)).collect();
    assert!(!gone.is_empty(), "compaction deleted files");
    assert_eq!(unaccounted(lake, before).await, None);
    let listed = now.iter().map(|f| (f.key.as_str(), "")).collect();
    let gone_stamps: Vec<(String, String)> =
        gone.iter().map(|f| (f.key.clone(), f.stamp())).collect();
    assert!(matches!(
        ledger_ingest::unaccounted(
            gone_stamps.iter().map(|(k, s)| (k.as_str(), s.as_str())),
            &listed,
            &[]
        )
        .first(),
        Some(Unaccounted::NotCompacted { .. })
    ));
}
