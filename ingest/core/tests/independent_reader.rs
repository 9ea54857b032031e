//! An independent Parquet reader (DuckDB, from PyPI) reads the files the
//! ingest core writes and must see exactly the rows the core meant: same row
//! counts, same sums of amounts, the same (event_id, hash, conflict) rows in
//! lake order, the hive partitions, and integer (never float) money columns.
//!
//! Setup: `scripts/install-lake-readers.sh` (idempotent, pinned duckdb) is run
//! from here, then `scripts/lake-read-duckdb.py LAKE_DIR` prints what DuckDB sees.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{golden_lines, Batch};
use ledger_ingest::{synth, Row};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn duckdb_view(lake: &Path) -> serde_json::Value {
    let install = Command::new("bash")
        .arg(repo().join("scripts/install-lake-readers.sh"))
        .status()
        .expect("run scripts/install-lake-readers.sh");
    assert!(
        install.success(),
        "installing duckdb failed: see the output above"
    );
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .arg(repo().join("scripts/lake-read-duckdb.py"))
        .arg(lake)
        .output()
        .expect("run scripts/lake-read-duckdb.py");
    assert!(
        out.status.success(),
        "duckdb could not read the lake: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn duckdb_sees_the_same_rows_sums_and_ids() {
    let lake = std::env::temp_dir().join(format!("ledger-ingest-duckdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&lake);

    // The golden vectors (every kind), a conflict, duplicates, and a few
    // thousand synthetic events over two days, written as several batches.
    let mut lines = golden_lines();
    let mut forged = ledger_events::decode(lines[1].as_bytes()).unwrap();
    forged.amount = Some(forged.amount.unwrap() + 7);
    forged.balance_after = Some(forged.balance_after.unwrap() + 7);
    lines.push(forged.seal().to_json());
    lines.push(lines[0].clone());
    let synthetic = synth::events(3_000, 10, 1_767_225_600_000 + 80_000_000);
    // A partial redelivery: the same events in another batch, so another file.
    let mut batches = vec![Batch::of_lines(&lines), Batch::of_lines(&lines[..5])];
    for chunk in synthetic.chunks(100) {
        batches.push(Batch::of_events(chunk));
    }

    let mut expected: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for b in &batches {
        let out = b.ingest();
        for f in out.files {
            let path = lake.join(&f.key);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &f.bytes).unwrap();
            let rows = ledger_ingest::read_file(&f.key, bytes::Bytes::from(f.bytes)).unwrap();
            expected
                .entry(f.partition.table.as_str().to_owned())
                .or_default()
                .extend(rows);
        }
    }

    let seen = duckdb_view(&lake);
    // The documented dedup rule, run by DuckDB, agrees with the core's dedup.
    for (table, rows) in &expected {
        let d = ledger_ingest::dedup(rows.iter().map(|r| (String::new(), r.clone())));
        let t = &seen[table.as_str()];
        assert_eq!(
            t["distinct_rows"].as_u64().unwrap() as usize,
            d.rows.len(),
            "{table}: deduplicated rows"
        );
        let conflicts: Vec<String> = d.conflicts.iter().map(|c| c.event_id.clone()).collect();
        assert_eq!(
            serde_json::from_value::<Vec<String>>(t["conflict_ids"].clone()).unwrap(),
            conflicts
        );
    }
    assert!(
        seen["account"]["distinct_rows"].as_u64() < seen["account"]["rows"].as_u64(),
        "copies across files"
    );
    assert_eq!(
        seen.as_object().unwrap().keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (table, rows) in expected.iter_mut() {
        // Lake order, then the conflict flag (copies of one event in different
        // files may differ in it: it is advisory, see docs/LAKE.md).
        ledger_ingest::sort_rows(rows);
        rows.sort_by_key(|r| {
            (
                r.event.stream,
                r.event.stream_key.clone(),
                r.event.seq,
                r.event.hash.clone(),
                r.conflict,
            )
        });
        let t = &seen[table.as_str()];
        assert_eq!(
            t["rows"].as_u64().unwrap() as usize,
            rows.len(),
            "{table}: row count"
        );
        let sum: i64 = rows.iter().filter_map(|r| r.event.amount).sum();
        assert_eq!(
            t["amount_sum"].as_i64().unwrap(),
            sum,
            "{table}: sum of amounts"
        );
        let ids: Vec<(String, String, bool)> = rows
            .iter()
            .map(|r| (r.event.event_id.clone(), r.event.hash.clone(), r.conflict))
            .collect();
        let seen_ids: Vec<(String, String, bool)> =
            serde_json::from_value(t["ids"].clone()).unwrap();
        assert_eq!(seen_ids, ids, "{table}: event_id/hash/conflict rows");
        for col in [
            "amount",
            "balance_after",
            "held_after",
            "overdraft_limit",
            "seq",
            "occurred_at_ms",
            "deadline_ms",
        ] {
            assert_eq!(t["types"][col], "BIGINT", "{table}.{col}");
        }
        assert_eq!(t["types"]["v"], "USMALLINT");
        assert_eq!(t["types"]["conflict"], "BOOLEAN");
        let mut dates: Vec<String> = rows
            .iter()
            .map(|r| ledger_ingest::date_of_ms(r.event.occurred_at_ms))
            .collect();
        dates.sort();
        dates.dedup();
        assert_eq!(
            serde_json::from_value::<Vec<String>>(t["dates"].clone()).unwrap(),
            dates,
            "{table}: partitions"
        );
    }
    assert_eq!(
        seen["account"]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r[2] == true)
            .count(),
        2,
        "the conflict"
    );
    std::fs::remove_dir_all(&lake).unwrap();
}
