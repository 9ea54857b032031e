//! Compaction on a local directory: duplicates removed, conflicts kept,
//! sorted large files, idempotent, damaged inputs refused without change, and
//! crash safety: a crash between write and delete (in-process stop points
//! and a real abort of the CLI) leaves a lake that reads the same and that a
//! second run converges to the same files as a clean run.

mod common;
#[path = "../../../tests/support/layout.rs"]
mod layout;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::{
    assert_accounted, assert_compacted, assert_mid_way, compact_all, golden_lines, ingest_files,
    manifests, small_file_batches, unaccounted, versions, view,
};
use ledger_compact::{
    compact_partition, compact_partition_with_progress, CompactError, Lake, Options, Progress,
    StopAt,
};
use ledger_ingest::{parse_object_key, Table, Unaccounted};

fn ingest_into(lake: &Path, bodies: &[String]) {
    for (key, bytes) in ingest_files(bodies) {
        let path = lake.join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &bytes).unwrap();
    }
}

/// A lake of many small ingest files (`common::small_file_batches`).
fn small_file_lake(name: &str) -> PathBuf {
    let lake = tempfile_dir(name);
    for batch in small_file_batches() {
        ingest_into(&lake, &batch);
    }
    lake
}

/// An empty directory under the temporary directory, for this process.
fn tempfile_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ledger-compact-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn lake_of(dir: &Path) -> Lake {
    let store = object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
    Lake::from_store(Arc::new(store), &dir.display().to_string())
}

/// Every file under events/, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &dir.join("events"), &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn compaction_merges_sorts_and_removes_duplicates_and_keeps_conflicts() {
    let dir = small_file_lake("merge");
    let lake = lake_of(&dir);
    let before = view(&lake).await;
    let n_before = files(&dir).len();
    let reports = compact_all(&lake, StopAt::Never).await;
    assert!(reports.iter().map(|r| r.duplicates_removed).sum::<usize>() > 0);
    let after_files = files(&dir);
    assert!(
        after_files.len() < n_before / 5,
        "{} files left of {n_before}",
        after_files.len()
    );
    assert_compacted(&lake, "events/", &before).await;
    let after = view(&lake).await;
    let conflicts: Vec<_> = after[0].iter().filter(|r| r.conflict).collect();
    assert_eq!(
        conflicts.len(),
        2,
        "both versions of the conflicting event kept and flagged"
    );
    assert_eq!(reports.iter().map(|r| r.conflicts.len()).sum::<usize>(), 1);

    // Idempotent: a second run changes nothing.
    let again = compact_all(&lake, StopAt::Never).await;
    assert!(again.iter().all(|r| r.already_compact));
    assert_eq!(files(&dir), after_files);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A partition merged from runs spilled to disk comes out exactly as one
/// merged in memory: the same files, byte for byte, and the same report.
#[tokio::test]
async fn a_partition_merged_from_spilled_runs_is_the_one_merged_in_memory() {
    let mut results = Vec::new();
    let mut passes = 0;
    let sizes = [
        (None, None),
        (Some(1), None),
        (Some(1), Some(2)),
        (Some(common::TEST_RUN_ROWS), Some(common::TEST_FAN_IN)),
        (Some(100), None),
    ];
    for (run_rows, fan_in) in sizes {
        let dir = small_file_lake(&format!("spill-{run_rows:?}-{fan_in:?}"));
        let spill = tempfile_dir(&format!("spill-dir-{run_rows:?}-{fan_in:?}"));
        let lake = lake_of(&dir);
        let options = Options {
            run_rows,
            fan_in,
            spill_dir: Some(spill.clone()),
            ..Options::default()
        };
        let mut reports = Vec::new();
        for p in lake.partitions(None).await.unwrap() {
            let mut steps = Vec::new();
            let r = compact_partition_with_progress(&lake, &p, &options, |s| steps.push(s))
                .await
                .unwrap();
            // Progress: every input read, runs merged into longer ones,
            // then every output cut, in order, ending at the report's counts.
            let reading = steps
                .iter()
                .take_while(|s| matches!(s, Progress::Reading { .. }))
                .count();
            let merging = steps[reading..]
                .iter()
                .take_while(|s| matches!(s, Progress::Merging { .. }))
                .count();
            passes += merging;
            assert_eq!(reading, r.input_files);
            assert_eq!(steps.len() - reading - merging, r.outputs.len());
            let Some(Progress::Reading {
                files_read,
                files,
                rows,
                ..
            }) = steps.get(reading - 1)
            else {
                panic!("{steps:?}")
            };
            assert_eq!(
                (*files_read, *files, *rows),
                (r.input_files, r.input_files, r.input_rows)
            );
            let Some(Progress::Writing {
                outputs,
                rows_out,
                rows,
            }) = steps.last()
            else {
                panic!("{steps:?}")
            };
            assert_eq!(
                (*outputs, *rows_out, *rows),
                (r.outputs.len(), r.output_rows, r.input_rows)
            );
            reports.push((
                r.input_files,
                r.input_rows,
                r.outputs,
                r.output_rows,
                r.duplicates_removed,
                r.conflicts,
                r.deleted,
            ));
        }
        let tree: Vec<(String, Vec<u8>)> = files(&dir)
            .into_iter()
            .map(|f| {
                let bytes = std::fs::read(dir.join(&f)).unwrap();
                (f, bytes)
            })
            .collect();
        assert_eq!(
            std::fs::read_dir(&spill).unwrap().count(),
            0,
            "runs removed"
        );
        results.push(((run_rows, fan_in), reports, tree));
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&spill).unwrap();
    }
    let (_, reports, tree) = &results[0];
    assert!(
        reports.iter().any(|r| r.1 > 100),
        "a partition spills even at 100 rows a run"
    );
    assert!(
        reports.iter().any(|r| !r.5.is_empty()),
        "a conflict is merged"
    );
    assert!(passes > 0, "runs were merged into longer runs");
    for (sizes, r, t) in &results[1..] {
        assert_eq!(r, reports, "(run rows, fan-in) {sizes:?}: the same reports");
        assert!(
            t == tree,
            "(run rows, fan-in) {sizes:?}: the same files and bytes"
        );
    }
}

/// A partition listed exactly as a compaction left it is not read
/// again (its manifest says what it holds): the nightly job over every
/// partition reads only what changed. `--recheck` reads it anyway, and a
/// partition that changed is compacted as before.
#[tokio::test]
async fn a_partition_as_its_compaction_left_it_is_not_read_again_unless_rechecked() {
    let dir = small_file_lake("unread");
    let lake = lake_of(&dir);
    compact_all(&lake, StopAt::Never).await;
    let after = files(&dir);
    let again = compact_all(&lake, StopAt::Never).await;
    for r in &again {
        assert!(r.already_compact && r.unread_as.is_some(), "{r}");
        assert_eq!(r.input_rows, 0, "{r}");
        assert!(r.to_string().contains("not read again"), "{r}");
    }
    assert_eq!(files(&dir), after);

    // A lake compacted before manifests recorded their layout (here: none
    // at all): read once, found compact, recorded; then not read again.
    std::fs::remove_dir_all(dir.join("manifests")).unwrap();
    for r in compact_all(&lake, StopAt::Never).await {
        assert!(
            r.already_compact && r.unread_as.is_none() && r.input_rows > 0,
            "{r}"
        );
        assert!(
            r.manifest.is_some() && r.to_string().contains("recorded in"),
            "{r}"
        );
    }
    assert!(compact_all(&lake, StopAt::Never)
        .await
        .iter()
        .all(|r| r.unread_as.is_some()));
    assert_eq!(files(&dir), after, "no lake file changed");

    // A late ingest file in a compacted partition: read and compacted.
    let batch = small_file_batches().pop().unwrap();
    ingest_into(&dir, &batch[..1]);
    let changed = parse_object_key(&files(&dir).into_iter().find(|f| f.contains("/i-")).unwrap())
        .unwrap()
        .partition;
    let r = compact_partition(&lake, &changed, &Options::default())
        .await
        .unwrap();
    assert!(r.unread_as.is_none() && r.input_rows > 0, "{r}");
    compact_all(&lake, StopAt::Never).await;
    let after = files(&dir);

    // A file damaged in place with its size, inode and modification time
    // kept (what the store's version shows): not read, so not seen...
    let victim = after.iter().find(|f| f.contains("/c-")).unwrap().clone();
    let path = dir.join(&victim);
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(4)).unwrap();
        f.write_all(&[0xff; 64]).unwrap();
        f.set_modified(modified).unwrap();
    }
    let partition = parse_object_key(&victim).unwrap().partition;
    let unread = compact_partition(&lake, &partition, &Options::default())
        .await
        .unwrap();
    assert!(unread.unread_as.is_some(), "{unread}");
    // ...but --recheck reads every row again, and finds it.
    let recheck = Options {
        recheck: true,
        ..Options::default()
    };
    match compact_partition(&lake, &partition, &recheck).await {
        Err(CompactError::Damaged(e)) => assert_eq!(e.key, victim),
        other => panic!("{other:?}"),
    }

    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_crash_between_write_and_delete_reads_the_same_and_a_rerun_converges() {
    let clean = small_file_lake("clean");
    compact_all(&lake_of(&clean), StopAt::Never).await;
    let clean_files = files(&clean);

    for stop in [StopAt::AfterWrite, StopAt::AfterFirstDelete] {
        let dir = small_file_lake(&format!("crash-{stop:?}"));
        let lake = lake_of(&dir);
        let before = view(&lake).await;
        let listed = versions(&lake).await;
        let reports = compact_all(&lake, stop).await;
        assert!(reports.last().unwrap().stopped_early);
        let first_manifest = reports.last().unwrap().manifest.clone().unwrap();
        assert_mid_way(&lake, "events/", &before, &format!("{stop:?}")).await;
        compact_all(&lake, StopAt::Never).await;
        compact_all(&lake, StopAt::Never).await;
        // The crashed run's manifest is kept beside the re-run's, which
        // names only what was left: together they account for every input.
        assert!(dir.join(&first_manifest).is_file(), "{first_manifest}");
        assert_accounted(&lake, &listed).await;
        assert_eq!(
            files(&dir),
            clean_files,
            "{stop:?}: converges to the clean run's files"
        );
        for f in &clean_files {
            assert_eq!(
                std::fs::read(dir.join(f)).unwrap(),
                std::fs::read(clean.join(f)).unwrap(),
                "{f}: same bytes"
            );
        }
        assert_eq!(view(&lake).await, before);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::remove_dir_all(&clean).unwrap();
}

#[tokio::test]
async fn every_file_compaction_deletes_is_named_in_a_manifest_with_the_version_it_read() {
    let dir = small_file_lake("manifest");
    let lake = lake_of(&dir);
    let listed = versions(&lake).await;
    let reports = compact_all(&lake, StopAt::Never).await;
    let written = manifests(&lake).await;
    assert_eq!(written.len(), reports.len(), "one manifest a partition");
    for r in &reports {
        let m = written
            .iter()
            .find(|m| m.partition().as_ref() == Some(&r.partition))
            .unwrap();
        assert_eq!(r.manifest.as_deref(), Some(m.key().as_str()));
        let inputs: Vec<_> = listed
            .iter()
            .filter(|f| f.key.starts_with(&r.partition.prefix()))
            .cloned()
            .collect();
        assert_eq!(m.inputs, inputs, "every input, in the version listed");
        let outputs: Vec<&str> = m.outputs.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(outputs, r.outputs);
    }
    assert_accounted(&lake, &listed).await;

    // A second compaction of a partition (a late batch arrived): the chain
    // of manifests still accounts for the first day's ingest files.
    let mut late = ledger_events::decode(golden_lines()[3].as_bytes()).unwrap();
    late.amount = late.amount.map(|a| a + 7);
    ingest_into(&dir, &[late.seal().to_json()]);
    let mid = versions(&lake).await;
    let again = compact_all(&lake, StopAt::Never).await;
    assert!(again.iter().any(|r| r.manifest.is_some() && r.deleted > 0));
    let now = versions(&lake).await;
    assert!(
        mid.iter()
            .any(|f| f.key.contains("/c-") && !now.contains(f)),
        "a compacted file was compacted again"
    );
    assert_accounted(&lake, &listed).await;
    assert_accounted(&lake, &mid).await;

    // An output rewritten since (same bytes, another version): what it
    // replaced is no longer accounted for. So is a file deleted by hand.
    let output = versions(&lake).await[0].key.clone();
    let bytes = std::fs::read(dir.join(&output)).unwrap();
    std::fs::remove_file(dir.join(&output)).unwrap();
    std::fs::write(dir.join(&output), &bytes).unwrap();
    assert!(
        matches!(
            unaccounted(&lake, &listed).await,
            Some(Unaccounted::OutputsChanged { .. })
        ),
        "{:?}",
        unaccounted(&lake, &listed).await
    );
    let now = versions(&lake).await;
    std::fs::remove_file(dir.join(&now[1].key)).unwrap();
    assert_eq!(
        unaccounted(&lake, &now).await,
        Some(Unaccounted::NotCompacted {
            key: now[1].key.clone()
        })
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_manifest_that_cannot_be_written_deletes_nothing() {
    let dir = small_file_lake("no-manifest");
    let lake = lake_of(&dir);
    // A file where the manifests' directory would go: every put under it fails.
    std::fs::write(dir.join("manifests"), b"in the way").unwrap();
    let before = view(&lake).await;
    let victim = files(&dir)[0].clone();
    let partition = parse_object_key(&victim).unwrap().partition;
    let inputs: Vec<String> = files(&dir)
        .into_iter()
        .filter(|f| f.starts_with(&partition.prefix()))
        .collect();
    let err = compact_partition(&lake, &partition, &Options::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("manifests/"), "{err}");
    let now = files(&dir);
    for f in &inputs {
        assert!(now.contains(f), "{f}: not deleted without its manifest");
    }
    assert_eq!(view(&lake).await, before);
    // Once the manifest can be written, the re-run finishes.
    std::fs::remove_file(dir.join("manifests")).unwrap();
    let report = compact_partition(&lake, &partition, &Options::default())
        .await
        .unwrap();
    assert!(report.manifest.is_some() && report.deleted > 0, "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_file_is_read_only_in_the_version_listed() {
    let dir = small_file_lake("race");
    let lake = lake_of(&dir);
    let listed = versions(&lake).await.remove(0);
    assert!(lake.read_version(&listed).await.is_ok());
    // Rewritten after the listing (same bytes, another version): the read
    // is refused, so a manifest never names a version compaction did not read.
    let bytes = std::fs::read(dir.join(&listed.key)).unwrap();
    std::fs::remove_file(dir.join(&listed.key)).unwrap();
    std::fs::write(dir.join(&listed.key), &bytes).unwrap();
    let err = lake.read_version(&listed).await.unwrap_err().to_string();
    assert!(
        err.contains("changed between the listing and the read"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_damaged_input_leaves_its_partition_untouched_and_names_the_key() {
    let dir = small_file_lake("damaged");
    let lake = lake_of(&dir);
    // The partition's last file: read after runs of the others were
    // spilled, in the second compaction below.
    let victim = files(&dir)
        .into_iter()
        .rfind(|f| f.starts_with("events/transfer/"))
        .unwrap();
    let bytes = std::fs::read(dir.join(&victim)).unwrap();
    std::fs::write(dir.join(&victim), &bytes[..bytes.len() / 2]).unwrap();
    let partition = parse_object_key(&victim).unwrap().partition;
    let before = files(&dir);
    let spill = tempfile_dir("damaged-spill");
    let spilled = Options {
        run_rows: Some(3),
        spill_dir: Some(spill.clone()),
        ..Options::default()
    };
    for options in [Options::default(), spilled] {
        let err = compact_partition(&lake, &partition, &options)
            .await
            .unwrap_err();
        match &err {
            CompactError::Damaged(e) => assert_eq!(e.key, victim),
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains(&victim));
        assert_eq!(files(&dir), before, "nothing written, nothing deleted");
    }
    let left: Vec<_> = std::fs::read_dir(&spill).unwrap().collect();
    assert!(left.is_empty(), "the spilled runs are removed: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&spill).unwrap();
}

/// A file that is not the one its key names: valid rows, each hashing to
/// its recorded hash, but copied under another file's name (so the key's
/// digest is not its rows'), or into another date's directory (its rows
/// belong to another partition). Compacting either would carry over other
/// rows than the manifest names, or write into the other partition: the
/// partition is left as it was, the file named.
#[tokio::test]
async fn a_file_under_a_key_that_is_not_its_own_is_damaged_and_changes_nothing() {
    let dir = small_file_lake("not-its-key");
    let lake = lake_of(&dir);
    let all = files(&dir);
    let transfer: Vec<&String> = all
        .iter()
        .filter(|f| f.starts_with("events/transfer/"))
        .collect();
    let dates = |f: &str| parse_object_key(f).unwrap().partition;
    // Two files of one partition: the second's bytes under the first's key.
    let (a, b) = transfer
        .iter()
        .enumerate()
        .find_map(|(i, a)| {
            let b = transfer[i + 1..].iter().find(|b| dates(b) == dates(a))?;
            Some(((*a).clone(), (*b).clone()))
        })
        .expect("a partition with two files");
    // A file of another date, copied into the first's directory.
    let other = transfer
        .iter()
        .find(|f| dates(f) != dates(&a))
        .expect("two dates")
        .to_string();
    let name = other.rsplit_once('/').unwrap().1;
    let moved = format!("{}{name}", dates(&a).prefix());
    for (victim, bytes, why) in [
        (a.clone(), std::fs::read(dir.join(&b)).unwrap(), "digest to"),
        (
            moved.clone(),
            std::fs::read(dir.join(&other)).unwrap(),
            "belongs to events/transfer/date=",
        ),
    ] {
        let keep = std::fs::read(dir.join(&victim)).ok();
        std::fs::write(dir.join(&victim), &bytes).unwrap();
        let before = files(&dir);
        let err = compact_partition(&lake, &dates(&a), &Options::default())
            .await
            .unwrap_err();
        match &err {
            CompactError::Damaged(e) => assert_eq!(e.key, victim),
            other => panic!("{other}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains("not the file its key names") && msg.contains(why),
            "{msg}"
        );
        assert_eq!(files(&dir), before, "nothing written, nothing deleted");
        match keep {
            Some(k) => std::fs::write(dir.join(&victim), k).unwrap(),
            None => std::fs::remove_file(dir.join(&victim)).unwrap(),
        }
    }
    // Restored, the partition compacts.
    compact_partition(&lake, &dates(&a), &Options::default())
        .await
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn cli(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ledger-compact"));
    // Every partition merged from runs spilled to local disk.
    c.args(args)
        .env_remove("LEDGER_LAKE")
        .env("LEDGER_COMPACT_RUN_ROWS", common::TEST_RUN_ROWS.to_string())
        .env("LEDGER_COMPACT_FAN_IN", common::TEST_FAN_IN.to_string());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// rev-s55-blackbox F2: `--lake ""` (an unset variable in the job's
/// command) is exit 2 with nothing compacted, never the default `.lake` of
/// the working directory; LEDGER_LAKE set to nothing is the default.
#[test]
fn an_empty_lake_argument_is_an_error_not_the_default() {
    let dir = small_file_lake("empty-arg");
    let work = tempfile_dir("empty-arg-work");
    std::fs::rename(&dir, work.join(".lake")).unwrap();
    let before = files(&work.join(".lake"));
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ledger-compact"));
        c.current_dir(&work).args(args).env_remove("LEDGER_LAKE");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&["--lake", ""], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--lake is empty"), "{err}");
    assert_eq!(files(&work.join(".lake")), before, "nothing compacted");
    let out = run(&["--dry-run"], &[("LEDGER_LAKE", "")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&work).unwrap();
}

#[tokio::test]
async fn the_cli_keeps_its_exit_code_contract_and_survives_a_real_crash() {
    let help = cli(&["--help"], &[]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit codes"));
    assert_eq!(cli(&["--no-such-flag"], &[]).status.code(), Some(2));
    let missing = cli(&["--lake", "/nonexistent/lake"], &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("Help:"));
    for day in ["yesterday", "2026-02-30", "2026-13-01", "2025-02-29"] {
        assert_eq!(
            cli(&["--lake", "/tmp", "--date", day], &[]).status.code(),
            Some(2),
            "{day}"
        );
    }
    let spill = cli(
        &["--lake", "/tmp", "--spill-dir", "/nonexistent/spill"],
        &[],
    );
    assert_eq!(spill.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&spill.stderr)
        .contains("--spill-dir /nonexistent/spill is not a directory"));
    // A leap day is a day (of a lake that has no partition for it).
    let empty = small_file_lake("leap-day");
    assert_eq!(
        cli(
            &["--lake", empty.to_str().unwrap(), "--date", "2024-02-29"],
            &[]
        )
        .status
        .code(),
        Some(0)
    );
    std::fs::remove_dir_all(&empty).unwrap();

    let dir = small_file_lake("cli");
    let lake_arg = dir.to_str().unwrap();
    let before = view(&lake_of(&dir)).await;
    let n = files(&dir).len();
    let dry = cli(&["--lake", lake_arg, "--dry-run"], &[]);
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert_eq!(files(&dir).len(), n, "dry run changes nothing");

    // A real crash: the process aborts after writing its first partition's output.
    let crashed = cli(
        &["--lake", lake_arg],
        &[("LEDGER_COMPACT_CRASH", "after-write")],
    );
    assert!(!crashed.status.success());
    assert!(
        String::from_utf8_lossy(&crashed.stderr).contains("aborting now"),
        "{}",
        String::from_utf8_lossy(&crashed.stderr)
    );
    let mid = files(&dir);
    assert!(
        mid.iter().any(|f| f.contains("/c-")) && mid.iter().any(|f| f.contains("/i-")),
        "outputs written, inputs kept"
    );
    assert_eq!(
        view(&lake_of(&dir)).await,
        before,
        "after the crash readers see the same rows"
    );
    let ok = cli(&["--lake", lake_arg], &[]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let stderr = String::from_utf8_lossy(&ok.stderr);
    assert!(
        stderr.contains("rows/s")
            && stderr.contains("duplicates removed")
            && stderr.contains("recorded in manifests/"),
        "{stderr}"
    );
    assert!(files(&dir).iter().all(|f| f.contains("/c-")));
    assert_eq!(view(&lake_of(&dir)).await, before);

    // A damaged file: exit 1, the others compacted.
    let victim = files(&dir).into_iter().next().unwrap();
    std::fs::write(dir.join(&victim), b"garbage").unwrap();
    ingest_into(&dir, &golden_lines()[..3]);
    let damaged = cli(&["--lake", lake_arg], &[]);
    assert_eq!(damaged.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&damaged.stderr).contains(&victim));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A lake file or a day behind a symbolic link whose target is missing (a
/// share not mounted) is refused by name, exit 2, and nothing changes:
/// `object_store`'s local listing would pass over it, and a day on the share
/// would be "nothing to do", or compacted without the files on it.
#[cfg(unix)]
#[test]
fn a_dangling_symlink_in_a_local_lake_is_refused_by_name() {
    let dir = small_file_lake("dangling");
    let lake_arg = dir.to_str().unwrap();
    let first = files(&dir).into_iter().next().unwrap();
    let day = Path::new(&first).parent().unwrap().to_owned();
    let gone = dir.join("not-mounted");
    let file_link = day.join("i-00000000000000000000000000000000.parquet");
    std::os::unix::fs::symlink(&gone, dir.join(&file_link)).unwrap();
    let before = files(&dir);
    for args in [
        vec!["--lake", lake_arg],
        vec!["--lake", lake_arg, "--dry-run"],
    ] {
        let out = cli(&args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(file_link.to_str().unwrap()), "{stderr}");
        assert!(stderr.contains("symbolic link"), "{stderr}");
        assert_eq!(files(&dir), before, "nothing changed");
    }
    // A day's directory behind one.
    std::fs::remove_file(dir.join(&file_link)).unwrap();
    let table = day.parent().unwrap();
    let day_link = table.join("date=2099-01-01");
    std::os::unix::fs::symlink(&gone, dir.join(&day_link)).unwrap();
    let out = cli(&["--lake", lake_arg], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(day_link.to_str().unwrap()), "{stderr}");
    std::fs::remove_file(dir.join(&day_link)).unwrap();
    let out = cli(&["--lake", lake_arg], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGINT or SIGTERM (a scheduler's timeout) mid-compaction: the run stops
/// at its next wait, removes its spill directory (rev-s49-compact: a killed
/// run's runs stayed on disk until the next spill), says so, and exits
/// 128 + the signal; the lake is unchanged, and the next run compacts it.
#[cfg(unix)]
#[tokio::test]
async fn a_signal_stops_compaction_and_removes_its_spilled_runs() {
    let dir = small_file_lake("signal");
    let lake_arg = dir.to_str().unwrap();
    let before = (files(&dir), view(&lake_of(&dir)).await);
    let spill = tempfile_dir("signal-spill");
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let child = Command::new(env!("CARGO_BIN_EXE_ledger-compact"))
            .args(["--lake", lake_arg, "--spill-dir", spill.to_str().unwrap()])
            .env_remove("LEDGER_LAKE")
            .env("LEDGER_COMPACT_RUN_ROWS", common::TEST_RUN_ROWS.to_string())
            .env("LEDGER_COMPACT_CRASH", "hold-after-read")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Held with its first partition read: runs are on disk.
        let runs = || {
            std::fs::read_dir(&spill)
                .unwrap()
                .filter_map(|d| std::fs::read_dir(d.ok()?.path()).ok())
                .flatten()
                .filter(|f| {
                    let name = f.as_ref().unwrap().file_name();
                    name.to_string_lossy().starts_with("run-")
                })
                .count()
        };
        let waited = std::time::Instant::now();
        while runs() == 0 {
            assert!(waited.elapsed().as_secs() < 120, "no run spilled");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let pid = child.id().to_string();
        let kill = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        assert!(kill.unwrap().success());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(
            stderr.contains(&format!("stopped by SIG{signal} during [1/"))
                && stderr.contains("spill directory is removed"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_dir(&spill).unwrap().count(),
            0,
            "the spill directory is removed"
        );
        assert_eq!((files(&dir), view(&lake_of(&dir)).await), before);
    }
    let out = cli(&["--lake", lake_arg], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(files(&dir).iter().all(|f| f.contains("/c-")));
    assert_eq!(view(&lake_of(&dir)).await, before.1);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&spill);
}

/// `ledger-compact --lake DIR` under `ulimit -f 1` (no file it writes may
/// outgrow 512 bytes): its output, and its stderr as text.
fn compact_under_a_file_size_limit(dir: &Path) -> (std::process::Output, String) {
    let out = Command::new("sh")
        .args(["-c", "ulimit -f 1 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_ledger-compact"))
        .args(["--lake", dir.to_str().unwrap()])
        .env_remove("LEDGER_LAKE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// A stderr that is gone (a closed pipe: `ledger-compact … 2>&1 | true`)
/// does not stop the work: every partition is compacted and the exit code is
/// the run's (`eprintln!` panicked, exit 101, after the first partition).
/// rev-s51-ops2 F2: under a file-size limit (`ulimit -f`) the output that
/// outgrows it is an error with its message, exit 2, and the lake is as it
/// was (no input deleted); SIGXFSZ killed the run (exit 153, not a word).
#[test]
fn a_file_size_limit_is_an_error_that_changes_nothing() {
    let dir = small_file_lake("fsize");
    let before = files(&dir);
    let (out, stderr) = compact_under_a_file_size_limit(&dir);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("File too large") && stderr.contains("ulimit -f"),
        "{stderr}"
    );
    assert_eq!(files(&dir), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// rev-s57-ingest 6: a damaged file found before a store error still makes
/// the run's exit code 1 (what the nightly job pages on as tampering), and
/// the summary still says what was left untouched and what was not tried.
#[test]
fn a_store_error_after_a_damaged_partition_does_not_hide_it() {
    let dir = small_file_lake("damaged-then-fsize");
    let first = files(&dir).into_iter().next().unwrap();
    let day = Path::new(&first).parent().unwrap();
    let victim = day.join(format!("i-{}.parquet", "d".repeat(32)));
    std::fs::write(dir.join(&victim), b"garbage").unwrap();
    let partitions: std::collections::BTreeSet<_> = files(&dir)
        .iter()
        .map(|f| Path::new(f).parent().unwrap().to_owned())
        .collect();
    assert!(partitions.len() >= 2, "{partitions:?}");
    let before = files(&dir);
    let (out, stderr) = compact_under_a_file_size_limit(&dir);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&*victim.to_string_lossy())
            && stderr.contains("File too large")
            && stderr.contains("1 left untouched because of a damaged file")
            && stderr.contains("ledger-compact: error: [")
            && stderr.contains("one failed (the error above)"),
        "{stderr}"
    );
    assert_eq!(files(&dir), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_stderr_does_not_stop_compaction() {
    let dir = small_file_lake("closed-stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ledger-compact"))
        .args(["--lake", dir.to_str().unwrap()])
        .env_remove("LEDGER_LAKE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        files(&dir).iter().all(|f| f.contains("/c-")),
        "{:?}",
        files(&dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// rev-s48-cli L9: a compaction killed during a local put leaves the put's
/// partial file (`KEY#N`, `object_store`'s staging name) in the partition,
/// which no reader takes and nothing removed. The next compaction of the
/// partition removes it once it is an hour old (a writer may be at work on
/// a newer one) and says so; a dry run removes nothing.
#[test]
fn a_killed_puts_partial_file_is_removed_by_the_next_compaction() {
    let dir = small_file_lake("partials");
    let lake_arg = dir.to_str().unwrap();
    let first = files(&dir).into_iter().next().unwrap();
    let day = dir.join(Path::new(&first).parent().unwrap());
    let old = day.join(format!("c-{}.parquet#1", "a".repeat(32)));
    let recent = day.join(format!("c-{}.parquet#2", "b".repeat(32)));
    let not_ours = day.join("notes.txt#1");
    let hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    for f in [&old, &recent, &not_ours] {
        std::fs::write(f, b"half a file").unwrap();
        if f != &recent {
            std::fs::File::options()
                .write(true)
                .open(f)
                .and_then(|h| h.set_modified(hours_ago))
                .unwrap();
        }
    }
    let dry = cli(&["--lake", lake_arg, "--dry-run"], &[]);
    assert_eq!(dry.status.code(), Some(0));
    assert!(old.exists(), "a dry run removes nothing");
    let out = cli(&["--lake", lake_arg], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("1 partial write(s) of a killed run removed"),
        "{stderr}"
    );
    assert!(!old.exists() && recent.exists() && not_ours.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// rev-s52-docs L11: an empty directory where the lake should be (a volume
/// not mounted, a mistyped path) is exit 2, not "nothing to do"; a --date
/// that selects no partition of a real lake is still exit 0.
#[test]
fn a_lake_without_partitions_is_an_error_and_an_empty_selection_is_not() {
    let empty = tempfile::tempdir().unwrap();
    let out = cli(&["--lake", empty.path().to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no partition under events/") && stderr.contains("mounted"),
        "{stderr}"
    );
    let dir = small_file_lake("no-such-day");
    let before = files(&dir);
    let out = cli(
        &["--lake", dir.to_str().unwrap(), "--date", "2031-03-01"],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("nothing to do"), "{stderr}");
    assert_eq!(files(&dir), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// rev-s52-diff L6: a file a newer writer wrote (a lake layout this
/// compactor does not know) leaves its partition untouched as a damaged
/// file does, but it is not counted as damaged: exit 2 (upgrade), not 1
/// (what the nightly job reads as tampering), the others compacted. A
/// damaged file elsewhere still makes it 1.
#[test]
fn a_newer_writers_file_is_an_upgrade_exit_2_not_a_damaged_file() {
    let dir = small_file_lake("newer-writer");
    let all = files(&dir);
    let newer = all
        .iter()
        .find(|f| f.starts_with("events/transfer/"))
        .unwrap()
        .clone();
    layout::rewrite_in_layout(&dir, &newer, "lake-v9");
    let lake = dir.to_str().unwrap();
    let run = cli(&["--lake", lake], &[]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(
        err.contains("1 left untouched because a newer writer wrote a file there")
            && err.contains("upgrade ledger-compact")
            && !err.contains("damaged file"),
        "{err}"
    );
    assert!(files(&dir).contains(&newer), "left as it was");
    // And a damaged file in another partition: 1.
    let damaged = files(&dir)
        .into_iter()
        .find(|f| f.starts_with("events/account/"))
        .unwrap();
    let path = dir.join(&damaged);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let run = cli(&["--lake", lake, "--recheck"], &[]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// rev-s54-diff L6: a newer writer's file does not hide a damaged file of
/// the same partition read after it: the partition is damaged (exit 1),
/// whichever of the two comes first.
#[test]
fn a_damaged_file_after_a_newer_writers_one_in_its_partition_is_still_exit_1() {
    let dir = small_file_lake("newer-then-damaged");
    let mut in_partition: Vec<String> = files(&dir)
        .into_iter()
        .filter(|f| f.starts_with("events/transfer/"))
        .collect();
    in_partition.sort();
    let dir_of = |f: &str| f.rsplit_once('/').unwrap().0.to_owned();
    let partition = dir_of(&in_partition[0]);
    in_partition.retain(|f| dir_of(f) == partition);
    assert!(in_partition.len() >= 2, "{in_partition:?}");
    let (first, last) = (&in_partition[0], in_partition.last().unwrap());
    layout::rewrite_in_layout(&dir, first, "lake-v9");
    let path = dir.join(last);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let run = cli(&["--lake", dir.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(
        err.contains("because of a damaged file") && err.contains(last.as_str()),
        "{err}"
    );
    let after = files(&dir);
    assert!(
        in_partition.iter().all(|f| after.contains(f)),
        "the partition is left as it was: {after:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// rev-s57-ingest 7: a partition with no file (emptied since it was listed,
/// or named by a caller) is compact as it is: no manifest of nothing.
#[tokio::test]
async fn an_empty_partition_writes_no_manifest() {
    let dir = small_file_lake("empty-partition");
    let lake = lake_of(&dir);
    let partition = parse_object_key(&files(&dir)[0]).unwrap().partition;
    for f in files(&dir) {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let r = compact_partition(&lake, &partition, &Options::default())
        .await
        .unwrap();
    assert!(
        r.already_compact && r.manifest.is_none() && r.outputs.is_empty(),
        "{r}"
    );
    assert!(!dir.join("manifests").exists(), "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}

/// rev-s57-ingest 8: the partitions of some tables on some dates, found by
/// listing only their prefixes, are those a listing of the lake selects.
#[tokio::test]
async fn the_partitions_of_tables_and_dates_are_the_lakes_selected() {
    let dir = small_file_lake("partitions-of");
    let lake = lake_of(&dir);
    let all = lake.partitions(None).await.unwrap();
    let tables: std::collections::BTreeSet<Table> = all.iter().map(|p| p.table).collect();
    assert!(tables.len() >= 2, "{all:?}");
    for p in &all {
        let one = lake
            .partitions_of(&[p.table], std::slice::from_ref(&p.date))
            .await
            .unwrap();
        assert_eq!(one, vec![p.clone()]);
        let of_table: Vec<_> = all.iter().filter(|q| q.table == p.table).cloned().collect();
        assert_eq!(lake.partitions_of(&[p.table], &[]).await.unwrap(), of_table);
        let on_date: Vec<_> = all.iter().filter(|q| q.date == p.date).cloned().collect();
        assert_eq!(
            lake.partitions_of(&[], std::slice::from_ref(&p.date))
                .await
                .unwrap(),
            on_date
        );
    }
    assert_eq!(lake.partitions_of(&[], &[]).await.unwrap(), all);
    let none = lake
        .partitions_of(&[all[0].table], &["1999-01-01".to_owned()])
        .await
        .unwrap();
    assert!(none.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
