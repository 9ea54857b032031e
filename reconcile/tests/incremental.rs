//! Incremental runs: night after night, a run that resumes from the previous
//! run's checkpoint reaches exactly the verdicts of a full re-proof of the
//! same lake (every check, every finding in order, the dangling list), while
//! reading only the new files; late redeliveries and rewritten files reopen
//! the streams they touch; unusable checkpoints are errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{runtime, NOW_MS};
use ledger_events::{Event, Stream};
use ledger_ingest::{ingest, Message};
use ledger_reconcile::corrupt::{inject, Class};
use ledger_reconcile::gen::{generate_events, write_object, GenConfig};
use ledger_reconcile::unproved::Owes;
use ledger_reconcile::{reconcile, reconcile_from, Lake, Options, ProofState, Report};

fn opts() -> Options {
    Options {
        now_ms: NOW_MS,
        progress: false,
        handoff: true,
        split_first: false,
        by_date: true,
        settle_ms: 0,
        wanted_starts_max: ledger_reconcile::keyed::WANTED_STARTS_MAX,
    }
}

/// A generated history delivered in order: `operations` on `accounts`
/// accounts, no duplicates.
fn history(seed: u64, accounts: usize, operations: usize) -> Vec<Event> {
    generate_events(&GenConfig {
        seed,
        accounts,
        operations,
        batches: 1,
        duplicates: 0,
        ..common::config()
    })
    .0
}

/// Ingests `events` as one queue batch and writes its files into the lake;
/// returns how many files it wrote.
fn deliver(root: &Path, events: &[&Event], tag: &str) -> usize {
    let bodies: Vec<Vec<u8>> = events
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap())
        .collect();
    let ids: Vec<String> = (0..events.len()).map(|i| format!("{tag}-{i}")).collect();
    let msgs: Vec<Message<'_>> = ids
        .iter()
        .zip(&bodies)
        .map(|(id, body)| Message { id, body })
        .collect();
    let out = ingest(&msgs).unwrap();
    assert!(out.dead_letters.is_empty());
    for f in &out.files {
        write_object(root, &f.key, &f.bytes).unwrap();
    }
    out.files.len()
}

/// One incremental night: load the checkpoint file (if any), run, save it.
fn night(root: &Path, ckpt: &Path) -> Report {
    night_with(root, ckpt, &opts())
}

/// A run with `--full` and the checkpoint `ckpt` (`ProofState::load_for_full`):
/// the lake proved from its first event, what the checkpoint proved judged
/// (saved as [`night_with`] does).
fn full_night_with(root: &Path, ckpt: &Path, opts: &Options) -> Report {
    let name = root.to_str().unwrap();
    runtime().block_on(async {
        let lake = Lake::open(name).unwrap();
        let prior = ProofState::load_for_full(ckpt, name).unwrap();
        let (report, state) = ledger_reconcile::reconcile_full_owing(&lake, opts, prior)
            .await
            .unwrap();
        state.save(ckpt, name, opts.now_ms).unwrap();
        report
    })
}

/// [`night`] with `opts` (the checkpoint saved at its `now_ms`).
fn night_with(root: &Path, ckpt: &Path, opts: &Options) -> Report {
    let name = root.to_str().unwrap();
    runtime().block_on(async {
        let lake = Lake::open(name).unwrap();
        let resume = ckpt.exists().then(|| ProofState::load(ckpt, name).unwrap());
        let (report, state) = reconcile_from(&lake, opts, resume).await.unwrap();
        state.save(ckpt, name, opts.now_ms).unwrap();
        report
    })
}

fn full(root: &Path) -> Report {
    full_with(root, &opts())
}

fn full_with(root: &Path, opts: &Options) -> Report {
    runtime().block_on(async {
        let lake = Lake::open(root.to_str().unwrap()).unwrap();
        reconcile(&lake, opts).await.unwrap()
    })
}

/// The variable `name` as a number, or `default`: a longer or another
/// history for the property tests.
fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The next value of a xorshift64 generator (`state` never 0).
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The CLI on the lake `root`: `reconcile ROOT --quiet --now-ms NOW ARGS…`;
/// its exit code (-1: none) and stderr.
fn cli(root: &Path, args: &[&str]) -> (i32, String) {
    let (code, _, stderr) = cli_out(root, args);
    (code, stderr)
}

/// [`cli`], with the summary on stdout too.
fn cli_out(root: &Path, args: &[&str]) -> (i32, String, String) {
    cli_out_finding(root, args, Stretches::Enumerated)
}

/// How a run's keyed scans find the stretches of the streams they want in
/// the notes (`ledger_reconcile::keyed::Wanted`).
#[derive(Debug, Clone, Copy)]
enum Stretches {
    /// Enumerated, as every history of a small lake is by default.
    Enumerated,
    /// Matched by undoing each note's mix, as only a hot account's history
    /// is by default (`RECONCILE_WANTED_STARTS_MAX=0`).
    Matched,
}

/// [`cli_out`], its keyed scans finding stretches as `stretches` says.
fn cli_out_finding(root: &Path, args: &[&str], stretches: Stretches) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reconcile"));
    cmd.arg(root.to_str().unwrap())
        .args(["--quiet", "--now-ms", &NOW_MS.to_string()])
        .args(args)
        .env_remove("LEDGER_LAKE")
        .env_remove("RECONCILE_WANTED_STARTS_MAX");
    if let Stretches::Matched = stretches {
        // Its trace says how each keyed scan found its stretches.
        cmd.env("RECONCILE_WANTED_STARTS_MAX", "0")
            .env("RECONCILE_TRACE", "1");
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the run with `args` reports it could not judge of an earlier
/// checkpoint's proof: its exit code, the report's `not_judged`, the
/// metric's value, and the summary's lines about it.
fn not_judged(root: &Path, args: &[&str]) -> (i32, Vec<String>, String, Vec<String>) {
    let out = tempfile::tempdir().unwrap();
    let (json, metrics) = (out.path().join("r.json"), out.path().join("m.prom"));
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().unwrap()]);
    all.extend(["--metrics", metrics.to_str().unwrap()]);
    let (code, summary, _) = cli_out(root, &all);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let listed = report["not_judged"].as_array().map_or(Vec::new(), |a| {
        a.iter().map(|w| w.as_str().unwrap().to_owned()).collect()
    });
    let metric = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("reconcile_checkpoint_parts_not_judged "))
        .unwrap()
        .to_owned();
    let lines = summary
        .lines()
        .filter(|l| l.contains("NOT JUDGED") || l.starts_with("verdict"))
        .map(str::to_owned)
        .collect();
    (code, listed, metric, lines)
}

/// The checks `r` finds violated, in report order.
fn violated(r: &Report) -> Vec<&str> {
    r.checks
        .iter()
        .filter(|c| !c.holds)
        .map(|c| c.name)
        .collect()
}

/// The verdicts: per check, holds and every finding in order; the dangling list.
fn verdicts(r: &Report) -> String {
    let checks = serde_json::to_string_pretty(&r.checks).unwrap();
    let dangling = serde_json::to_string_pretty(&r.dangling).unwrap();
    format!(
        "holds {} pending {} decided by {:?}\naccounts {} transfers {}\n{checks}\n{dangling}",
        r.holds, r.pending, r.decided_by_ms, r.accounts, r.transfers
    )
}

fn assert_same(night_no: usize, inc: &Report, full: &Report) {
    assert_eq!(
        verdicts(inc),
        verdicts(full),
        "night {night_no}: the incremental run differs from the full run"
    );
}

/// `events[..half]` delivered to a lake in `dir` and proved by a night,
/// as a full run proves them: the lake and its checkpoint.
fn half_proved(
    dir: &Path,
    events: &[Event],
    half: usize,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (root, ckpt) = (dir.join("lake"), dir.join("checkpoint"));
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    assert_same(0, &night(&root, &ckpt), &full(&root));
    (root, ckpt)
}

#[test]
fn nightly_runs_reach_the_verdicts_of_a_full_run_reading_only_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(21, 10, 360);
    let nights = 5;
    let per_night = events.len().div_ceil(nights);
    for (n, chunk) in events.chunks(per_night).enumerate() {
        let batch: Vec<&Event> = chunk.iter().collect();
        let written = deliver(&root, &batch, &format!("n{n}"));
        let inc = night(&root, &ckpt);
        let fresh = full(&root);
        assert_same(n, &inc, &fresh);
        if n == 0 {
            assert!(inc.incremental.is_none(), "no checkpoint yet: a full run");
        } else {
            let i = inc.incremental.expect("a resumed run says what it read");
            assert_eq!(
                i.files_read, written,
                "night {n}: only the new files are read"
            );
            assert_eq!(i.files_skipped + written, fresh.files);
            assert_eq!(
                i.streams_reopened, 0,
                "night {n}: in-order data reopens nothing"
            );
            assert_eq!(
                i.transfers_pulled, 0,
                "night {n}: in-order data names no settled transfer"
            );
            assert!(
                inc.stats.rows_read < fresh.stats.rows_read,
                "night {n}: the incremental run read {} rows, the full run {}",
                inc.stats.rows_read,
                fresh.stats.rows_read
            );
        }
    }
    // Settled transfers live in archive segments beside the checkpoint: one
    // a night, merged as they accumulate.
    let segments = segment_files(dir.path());
    assert!(
        (1..=3).contains(&segments.len()),
        "{} segments after {nights} nights: {segments:?}",
        segments.len()
    );
    // Mid-history streams end non-terminal on some nights, so the dangling
    // list and convergence were compared while in flight; at the end the
    // whole history holds.
    assert!(full(&root).holds);
}

/// A second `credited` event for the `captured` transfer, appended to its
/// destination account after the last of that account's `events` (a valid
/// event continuing the account's chain: only the cross-stream checks can
/// object to it).
fn late_credit(events: &[Event], captured: &Event) -> Event {
    let dest = captured.destination.clone().unwrap();
    let last = events
        .iter()
        .filter(|e| e.stream == Stream::Account && e.stream_key == dest)
        .max_by_key(|e| e.seq)
        .unwrap();
    let amount = captured.amount.unwrap();
    let mut credit = Event::new(
        Stream::Account,
        &dest,
        last.seq + 1,
        "credited",
        last.occurred_at_ms + 1,
        &last.hash,
    );
    credit.currency = last.currency.clone();
    credit.amount = Some(amount);
    credit.balance_after = Some(last.balance_after.unwrap() + amount);
    credit.held_after = last.held_after;
    credit.overdraft_limit = last.overdraft_limit;
    credit.transfer_id = Some(captured.stream_key.clone());
    credit.entry_id = Some(format!("{}:credit", captured.stream_key));
    credit.counterparty = captured.source.clone();
    let credit = credit.seal();
    credit.validate().unwrap();
    credit
}

#[test]
fn many_nights_of_new_data_and_late_events_match_full_runs_and_keep_the_archive_small() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(33, 8, 900);
    let nights = 14;
    let per_night = events.len().div_ceil(nights);
    let mut delivered: Vec<Event> = Vec::new();
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let (mut pulled, mut most_segments) = (0, 0);
    let mut reopen_pulls: Vec<(u64, u64)> = Vec::new();
    for (n, chunk) in events.chunks(per_night).enumerate() {
        let mut batch: Vec<Event> = chunk.to_vec();
        // Every third night, a late credit for a transfer captured on an
        // earlier night (settled by now, so it comes back from the archive;
        // the account's own later events then conflict with it, reopening
        // the account, which pulls back the whole archive).
        xorshift(&mut rng);
        let captured: Vec<&Event> = delivered
            .iter()
            .filter(|e| e.stream == Stream::Transfer && e.kind == "captured")
            .collect();
        if n % 3 == 2 && !captured.is_empty() {
            let t = captured[(rng % captured.len() as u64) as usize];
            batch.push(late_credit(&delivered, t));
        }
        delivered.extend(batch.iter().cloned());
        deliver(&root, &batch.iter().collect::<Vec<_>>(), &format!("n{n}"));
        let inc = night(&root, &ckpt);
        assert_same(n, &inc, &full(&root));
        let i = inc.incremental.unwrap_or_default();
        pulled += i.transfers_pulled;
        if i.streams_reopened > 0 {
            // A reopened account brings back only what its history names.
            reopen_pulls.push((i.transfers_pulled, inc.transfers));
        }
        most_segments = most_segments.max(segment_files(dir.path()).len());
    }
    assert!(pulled > 0, "late events pulled settled transfers back");
    assert!(
        reopen_pulls
            .iter()
            .any(|&(pulled, total)| pulled > 0 && pulled < total / 4),
        "{reopen_pulls:?}"
    );
    assert!(
        (1..=5).contains(&most_segments),
        "{most_segments} segments at most over {nights} nights"
    );
}

/// Compacts every partition of the lake with the real `ledger-compact`:
/// each partition's ingest files become `c-` files (the inputs deleted).
fn compact_all(root: &Path) {
    for outcome in compact_each(root, ledger_compact::StopAt::Never) {
        outcome.unwrap();
    }
}

/// Compacts each partition of the lake with the real `ledger-compact`, as
/// its CLI does (a partition it refuses is left as it was, and the next one
/// compacted), each stopping where `stop_at` says (what a crash there
/// leaves): each partition's outcome.
fn compact_each(
    root: &Path,
    stop_at: ledger_compact::StopAt,
) -> Vec<Result<(), ledger_compact::CompactError>> {
    runtime().block_on(async {
        let lake = ledger_compact::Lake::open(root.to_str().unwrap()).unwrap();
        let mut outcomes = Vec::new();
        let options = ledger_compact::Options {
            stop_at,
            ..Default::default()
        };
        for p in lake.partitions(None).await.unwrap() {
            let done = ledger_compact::compact_partition(&lake, &p, &options).await;
            outcomes.push(done.map(|_| ()));
        }
        outcomes
    })
}

/// rev-s59-holds 1: a redelivered batch whose rows the compacted file
/// holds already is compacted into that file as it was (its manifest reads
/// and writes the same version); a late batch is then compacted with it
/// into a new file. The night after resumes (it aborted, its stack
/// overflowed walking that manifest for good), and says what a full proof
/// says; so does `--full` with the checkpoint.
#[test]
fn a_redelivery_compacted_into_the_file_that_held_it_then_a_late_batch_compacted_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(29, 4, 160);
    let late_key = events
        .iter()
        .rfind(|e| e.stream == Stream::Account)
        .map(|e| e.stream_key.clone())
        .unwrap();
    let last_seq = events.iter().filter(|e| e.stream_key == late_key).count() as u64;
    let is_late = |e: &&Event| e.stream_key == late_key && e.seq == last_seq;
    let (late, on_time): (Vec<&Event>, Vec<&Event>) = events.iter().partition(is_late);
    deliver(&root, &on_time, "a");
    assert_same(0, &night(&root, &ckpt), &full(&root));
    compact_all(&root);
    // The same batch again: every row in the compacted files already.
    deliver(&root, &on_time, "a");
    compact_all(&root);
    deliver(&root, &late, "late");
    compact_all(&root);
    let fresh = full(&root);
    assert_same(1, &full_night_with(&root, &ckpt, &opts()), &fresh);
    assert_same(2, &night(&root, &ckpt), &fresh);
    assert!(fresh.holds, "{}", verdicts(&fresh));
}

#[test]
fn compacting_proved_partitions_reopens_nothing_the_copies_are_recognised_by_their_chains() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(17, 6, 240);
    let third = events.len() / 3;
    // Night 1 proves the first third, landed as several ingest files.
    for (n, part) in events[..third].chunks(third.div_ceil(4)).enumerate() {
        deliver(&root, &part.iter().collect::<Vec<_>>(), &format!("a{n}"));
    }
    assert_same(0, &night(&root, &ckpt), &full(&root));
    let proved = common::files_under(&root, "events").len();
    // More of the same days lands, then the nightly compaction rewrites
    // every partition: the rows night 1 proved are now in new files only.
    deliver(
        &root,
        &events[third..2 * third].iter().collect::<Vec<_>>(),
        "b",
    );
    compact_all(&root);
    assert!(common::files_under(&root, "events")
        .iter()
        .all(|k| k.contains("/c-")));
    let inc = night(&root, &ckpt);
    assert_same(1, &inc, &full(&root));
    let i = inc.incremental.unwrap();
    assert!(!i.reproved_in_full, "{i:?}");
    assert_eq!(i.streams_reopened, 0, "{i:?}");
    assert_eq!(
        i.files_skipped, 0,
        "every file is new after compaction: {i:?}"
    );
    assert_eq!(
        i.files_gone, proved,
        "compaction deleted every proved file: {i:?}"
    );
    // Exactly the rows night 1 proved, none of the new ones.
    assert_eq!(i.rows_already_proved, third as u64, "{i:?}");
    // And the night after resumes as usual.
    let written = deliver(&root, &events[2 * third..].iter().collect::<Vec<_>>(), "c");
    let next = night(&root, &ckpt);
    assert_same(2, &next, &full(&root));
    let i = next.incremental.unwrap();
    assert_eq!(i.files_read, written, "{i:?}");
    assert_eq!((i.streams_reopened, i.rows_already_proved), (0, 0), "{i:?}");
    assert!(full(&root).holds);
}

/// A lake of several days delivered and proved; then the first day's
/// account file is compacted (as after a late delivery into it: its rows
/// under a new key, with the manifest compaction writes). Its rows, proved
/// in a file now gone, stop before their streams' tails (the
/// later days' proved files hold the rest), so the checkpoint's tail hashes
/// do not vouch for them; the proved row after each stream's rows there
/// does: nothing is reopened, and the night is not a full proof. The same
/// day compacted with one row another version (sealed onto the same
/// predecessor: the row after it names the first) is reopened and reported
/// as a full run reports it.
#[test]
fn an_earlier_day_compacted_again_is_copies_vouched_for_by_the_rows_after_it() {
    // Half an hour a step: five days.
    let events = generate_events(&GenConfig {
        step_ms: 1_800_000,
        ..GenConfig {
            seed: 17,
            accounts: 6,
            operations: 240,
            batches: 1,
            duplicates: 0,
            ..common::config()
        }
    })
    .0;
    let lake = |dir: &Path| {
        let (root, ckpt) = (dir.join("lake"), dir.join("checkpoint"));
        deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
        assert_same(0, &night(&root, &ckpt), &full(&root));
        let days = common::files_under(&root, "events/account");
        assert!(days.len() >= 3, "several days: {days:?}");
        (root, ckpt, days[0].clone())
    };
    // The file that replaced `first`.
    let output = |root: &Path, first: &str| {
        let day = first.rsplit_once('/').unwrap().0;
        let now = common::files_under(root, day);
        assert!(now.len() == 1 && now[0] != first, "{now:?}");
        now[0].clone()
    };
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, first) = lake(dir.path());
    compact_dropping(&root, &first, |_| false);
    let output = output(&root, &first);
    let r = night(&root, &ckpt);
    assert_same(1, &r, &full(&root));
    assert!(r.holds, "{}", r.summary());
    let i = r.incremental.unwrap();
    assert!(
        i.files_gone == 1 && i.files_lost == 0,
        "only that day: {i:?}"
    );
    assert!(!i.reproved_in_full && i.streams_reopened == 0, "{i:?}");
    let rows = rows_of(&root, &output).len() as u64;
    assert_eq!(i.rows_already_proved, rows, "{i:?}");

    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, first) = lake(dir.path());
    // A stream with rows after its third there.
    let rows = rows_of(&root, &first);
    let goes_on = |r: &&ledger_ingest::Row| {
        let e = &r.event;
        e.seq == 3
            && rows
                .iter()
                .any(|o| o.event.stream_key == e.stream_key && o.event.seq == 4)
    };
    let third = rows.iter().find(goes_on).unwrap().event.clone();
    compact_rewriting(&root, &first, |rows| {
        let r = rows
            .iter_mut()
            .find(|r| r.event.event_id == third.event_id)
            .unwrap();
        r.event.occurred_at_ms += 1;
        r.event = r.event.clone().seal();
    });
    let r = night(&root, &ckpt);
    let fresh = full(&root);
    assert_same(1, &r, &fresh);
    assert!(!fresh.holds, "{}", fresh.summary());
    let i = r.incremental.unwrap();
    assert!(i.streams_reopened >= 1, "{i:?}");
}

#[test]
fn a_night_that_reopens_most_accounts_is_proved_in_full_with_the_same_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(17, 6, 240);
    let half = events.len() / 2;
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    night(&root, &ckpt);
    // Another version of the first two events of every account: rows at or
    // before every account's tail that stop short of it and that no proved
    // file holds, so every account reopens.
    let early: Vec<Event> = events[..half]
        .iter()
        .filter(|e| e.stream == Stream::Account && e.seq <= 2)
        .map(|e| {
            let mut other = e.clone();
            other.occurred_at_ms += 1;
            other.seal()
        })
        .collect();
    deliver(&root, &early.iter().collect::<Vec<_>>(), "again");
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
    let inc = night(&root, &ckpt);
    assert_same(1, &inc, &full(&root));
    let i = inc.incremental.unwrap();
    assert!(i.reproved_in_full, "{i:?}");
    assert_eq!(i.files_skipped, 0, "{i:?}");
    assert_eq!(inc.check("conflicting_duplicates").violations, early.len());
    // The next night resumes from the new checkpoint as usual.
    let next = night(&root, &ckpt);
    assert_same(2, &next, &full(&root));
    let i = next.incremental.unwrap();
    assert!(!i.reproved_in_full && i.files_read == 0, "{i:?}");
}

#[test]
fn a_copy_of_proved_rows_altered_under_its_hashes_is_caught_by_a_full_proof() {
    use ledger_ingest::{build_files, read_file, FileLayer};
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(23, 6, 240);
    let half = events.len() / 2;
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    assert!(night(&root, &ckpt).holds);
    // A copy of every account row night 1 proved, as compaction would write
    // it, except that one deposit's amount is 1 more under the same `hash`
    // and `prev_hash`: every stream's copied rows still chain to its tail.
    let mut rows = Vec::new();
    for key in common::files_under(&root, "events/account") {
        let bytes = std::fs::read(root.join(&key)).unwrap();
        rows.extend(read_file(&key, bytes.into()).unwrap());
    }
    let deposit = rows
        .iter_mut()
        .find(|r| r.event.kind == "deposited")
        .expect("a deposit in the first half");
    *deposit.event.amount.as_mut().unwrap() += 1;
    let altered = deposit.event.event_id.clone();
    for f in build_files(rows, FileLayer::Compacted).unwrap() {
        write_object(&root, &f.key, &f.bytes).unwrap();
    }
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
    let inc = night(&root, &ckpt);
    let fresh = full(&root);
    assert!(!fresh.holds);
    assert!(
        serde_json::to_string(&fresh.checks)
            .unwrap()
            .contains(&altered),
        "the full proof names {altered}"
    );
    assert_same(1, &inc, &fresh);
    let i = inc.incremental.unwrap();
    assert!(i.reproved_in_full, "the copies were not copies: {i:?}");
    // The next night resumes from the new checkpoint as usual.
    let next = night(&root, &ckpt);
    assert_same(2, &next, &full(&root));
    assert!(!next.incremental.unwrap().reproved_in_full);
}

#[test]
fn a_proved_file_deleted_from_the_lake_is_lost_and_the_night_proves_the_lake_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("report.json");
    let events = history(29, 6, 240);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    let (ck, js) = (ckpt.to_str().unwrap(), json.to_str().unwrap());
    let run = |extra: &[&str]| {
        let args = [&["--checkpoint", ck, "--json", js][..], extra].concat();
        let (code, stdout, stderr) = cli_out(&root, &args);
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (code, report, stdout + &stderr)
    };
    assert_eq!(run(&[]).0, 0, "the whole history holds");
    // One proved account file deleted, nothing in its place: the resumed
    // run cannot vouch for what it proved there, so it judges the lake as
    // it is, as `--full` does, and names the file.
    let gone = common::files_under(&root, "events/account").remove(0);
    std::fs::remove_file(root.join(&gone)).unwrap();
    let (code, report, stderr) = run(&[]);
    assert_eq!(code, 1, "{report}");
    let i = &report["incremental"];
    assert_eq!(
        (&i["files_gone"], &i["files_lost"]),
        (&1.into(), &1.into()),
        "{report}"
    );
    assert_eq!(i["reproved_in_full"], true, "{report}");
    assert!(
        stderr.contains("reconcile: warning: 1 lake file version(s) the checkpoint proved are gone and not accounted for by compaction")
            && stderr.contains(&format!("first: {gone} is gone and no compaction manifest says it replaced it"))
            && stderr.contains("  LOST      1 lake file version(s)"),
        "{stderr}"
    );
    let (_, full_report, _) = run(&["--full"]);
    // `--full` judges the checkpoint's tails too: the same findings,
    // those of the streams whose proved rows were in the file included.
    assert!(report["checks"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["code"] == "proved_rows_missing"));
    assert_eq!(report["checks"], full_report["checks"]);
    // It read the checkpoint (which no longer names the file): nothing
    // lost since, proved from the first event.
    let i = &full_report["incremental"];
    assert_eq!(
        (
            &i["files_lost"],
            &i["files_skipped"],
            &i["reproved_in_full"],
            &i["full"]
        ),
        (&0.into(), &0.into(), &false.into(), &true.into()),
        "{full_report}"
    );
    // The next night resumes from that proof as usual.
    let (code, report, stderr) = run(&[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["incremental"]["reproved_in_full"], false, "{report}");
    assert_eq!(report["incremental"]["files_lost"], 0, "{report}");
    // No file lost again (the one left is the transfer table's: the empty
    // account table is warned of, as on any run).
    assert!(
        !stderr.contains("are gone") && !stderr.contains("LOST"),
        "{stderr}"
    );
    assert!(stderr.contains("warning: the account table"), "{stderr}");
    // Compaction's deletions are accounted for by its manifests: no
    // warning, no proof in full.
    let proved = common::files_under(&root, "events").len();
    compact_all(&root);
    let (code, report, stderr) = run(&[]);
    assert_eq!(code, 1, "{report}");
    let i = &report["incremental"];
    assert_eq!(i["files_gone"], proved, "{report}");
    assert_eq!(
        (&i["files_lost"], &i["reproved_in_full"]),
        (&0.into(), &false.into()),
        "{report}"
    );
    assert!(
        !stderr.contains("are gone") && !stderr.contains("LOST"),
        "{stderr}"
    );
}

/// `reconcile-testdata rekey` (the benchmark's `recompact` night) leaves what compacting a
/// proved partition leaves: the same rows under new keys, and a manifest for each table's
/// partition, so the next night accounts for every moved file and loses none.
#[test]
fn rekey_moves_a_dates_files_as_compaction_would_and_the_next_night_accounts_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("report.json");
    deliver(&root, &history(31, 6, 240).iter().collect::<Vec<_>>(), "a");
    let (ck, js) = (ckpt.to_str().unwrap(), json.to_str().unwrap());
    let run = || {
        let (code, _, stderr) = cli_out(&root, &["--checkpoint", ck, "--json", js]);
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (code, report, stderr)
    };
    assert_eq!(run().0, 0, "the history holds");
    let before = common::files_under(&root, "events");
    let date = |key: &str| key.split("date=").nth(1).unwrap()[..10].to_owned();
    let day = date(&before[0]);
    let of_day: Vec<&String> = before.iter().filter(|k| date(k) == day).collect();
    let rekey = |day: &str| {
        Command::new(env!("CARGO_BIN_EXE_reconcile-testdata"))
            .args(["rekey", root.to_str().unwrap(), "--date", day])
            .output()
            .unwrap()
    };
    let out = rekey(&day);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = common::files_under(&root, "events");
    assert_eq!(after.len(), before.len());
    let moved: Vec<&String> = after.iter().filter(|k| !before.contains(k)).collect();
    assert_eq!(moved.len(), of_day.len(), "{after:?}");
    assert!(
        moved.iter().all(|k| date(k) == day && k.contains("/c-")),
        "{moved:?}"
    );
    let manifests = common::files_under(&root, "manifests");
    let tables: std::collections::BTreeSet<&str> = of_day
        .iter()
        .map(|k| k.split('/').nth(1).unwrap())
        .collect();
    assert_eq!(manifests.len(), tables.len(), "{manifests:?}");
    let (code, report, stderr) = run();
    assert_eq!(code, 0, "{report}");
    let i = &report["incremental"];
    assert_eq!(
        (&i["files_gone"], &i["files_lost"], &i["reproved_in_full"]),
        (&of_day.len().into(), &0.into(), &false.into()),
        "{report}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");
    // A date with no files is named, not a silent success.
    let out = rekey("1999-01-01");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds no lake file of 1999-01-01"),
        "{out:?}"
    );
}

#[test]
fn a_proved_file_rewritten_and_then_compacted_is_lost_and_the_night_proves_the_lake_in_full() {
    use ledger_ingest::{build_files, read_file, FileLayer};
    for in_place in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
        let events = history(31, 6, 240);
        let half = events.len() / 2;
        deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
        assert!(night(&root, &ckpt).holds);
        // One proved account file rewritten without one of its rows, under
        // its own key or a new ingest key (what a tool editing the lake
        // leaves); then the rest of the history lands and the nightly
        // compaction merges every partition. A rewrite under a new key is
        // merged with the rest (the partition holds only compacted files,
        // as after any compaction); one in place is not the content its key
        // names, which compaction refuses (its partition stays as it is).
        let key = common::files_under(&root, "events/account").remove(0);
        let mut rows = read_file(&key, std::fs::read(root.join(&key)).unwrap().into()).unwrap();
        let dropped = rows.remove(rows.len() / 2).event.event_id;
        std::fs::remove_file(root.join(&key)).unwrap();
        for f in build_files(rows, FileLayer::Ingest).unwrap() {
            let to = if in_place { key.clone() } else { f.key };
            write_object(&root, &to, &f.bytes).unwrap();
        }
        deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
        let refused: Vec<String> = compact_each(&root, ledger_compact::StopAt::Never)
            .into_iter()
            .filter_map(Result::err)
            .map(|e| match e {
                ledger_compact::CompactError::Damaged(l) => l.key,
                other => panic!("{other}"),
            })
            .collect();
        let dir_of = |k: &str| k.rsplit_once('/').unwrap().0.to_owned();
        if in_place {
            assert_eq!(refused, std::slice::from_ref(&key));
        } else {
            assert_eq!(refused, Vec::<String>::new());
        }
        assert!(common::files_under(&root, "events")
            .iter()
            .all(|k| k.contains("/c-") || (in_place && dir_of(k) == dir_of(&key))));
        let inc = night(&root, &ckpt);
        // The full proof judges the lake without the row (the gap it left),
        // and so does the resumed night.
        let fresh = full(&root);
        assert!(!fresh.holds);
        let completeness = serde_json::to_string(&fresh.checks[0]).unwrap();
        assert!(
            completeness.contains("seq_gap") && completeness.contains(&dropped),
            "{dropped}: {completeness}"
        );
        assert_same(1, &inc, &fresh);
        let i = inc.incremental.unwrap();
        assert!(
            i.reproved_in_full && i.files_lost == 1,
            "in place {in_place}: {i:?}"
        );
    }
}

/// The findings of `r`'s completeness check about proved tails the lake no
/// longer holds: (code, stream key, seq), in report order.
fn owed(r: &Report) -> Vec<(&'static str, String, u64)> {
    r.checks[0]
        .findings
        .iter()
        .filter(|f| f.code.starts_with("proved_row"))
        .map(|f| (f.code, f.key.clone(), f.seq.unwrap()))
        .collect()
}

/// `r` without its findings about proved tails (what a proof of the lake
/// alone, which knows of no earlier run, reports).
fn without_owed(r: &Report) -> Report {
    let mut r = r.clone();
    for c in &mut r.checks {
        c.findings.retain(|f| !f.code.starts_with("proved_row"));
        c.violations = c.findings.len();
        c.holds = c.findings.is_empty();
    }
    r.holds = r.checks.iter().all(|c| c.holds);
    r
}

/// The version of the lake file `key` under `root`, as the store lists it
/// (what compaction records in a manifest).
fn version_of(root: &Path, key: &str) -> ledger_ingest::FileVersion {
    use object_store::{local::LocalFileSystem, path::Path as Key, ObjectStoreExt};
    let store = LocalFileSystem::new_with_prefix(root).unwrap();
    let meta = runtime().block_on(store.head(&Key::from(key))).unwrap();
    ledger_ingest::FileVersion {
        key: key.to_owned(),
        size: meta.size,
        e_tag: meta.e_tag,
    }
}

/// The rows of the lake file `key` under `root`.
fn rows_of(root: &Path, key: &str) -> Vec<ledger_ingest::Row> {
    ledger_ingest::read_file(key, std::fs::read(root.join(key)).unwrap().into()).unwrap()
}

/// A lake of one history delivered at once and a checkpoint of it (in
/// `dir`); the first lake file of `table` and its rows.
fn proved_lake(
    dir: &Path,
    table: &str,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    String,
    Vec<ledger_ingest::Row>,
) {
    let (root, ckpt) = (dir.join("lake"), dir.join("checkpoint"));
    let events = history(43, 4, 200);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    assert!(night(&root, &ckpt).holds);
    let input = common::files_under(&root, &format!("events/{table}")).remove(0);
    let rows = rows_of(&root, &input);
    (root, ckpt, input, rows)
}

/// A compactor that lies: it rewrites the lake file `input` into a
/// compacted one without the rows `drop` picks, deletes the input, and
/// writes a manifest that says the output holds the input's rows (it read
/// exactly that version, and its output is as written, so the night
/// accounts for the input). Returns the rows dropped.
fn compact_dropping(root: &Path, input: &str, drop: impl Fn(&Event) -> bool) -> Vec<Event> {
    compact_rewriting(root, input, |rows| {
        let (dropped, kept): (Vec<_>, Vec<_>) = std::mem::take(rows)
            .into_iter()
            .partition(|r| drop(&r.event));
        *rows = kept;
        dropped.into_iter().map(|r| r.event).collect()
    })
}

/// [`compact_dropping`], the rows of the output being what `rewrite` leaves
/// of the input's; returns what `rewrite` returns.
fn compact_rewriting<T>(
    root: &Path,
    input: &str,
    rewrite: impl FnOnce(&mut Vec<ledger_ingest::Row>) -> T,
) -> T {
    let result = compact_keeping_input(root, input, rewrite);
    std::fs::remove_file(root.join(input)).unwrap();
    result
}

/// [`compact_rewriting`] stopped before it deletes `input`: the output and
/// the manifest are written, the input is still in the lake (a compactor
/// that stops there deletes it on its next run).
fn compact_keeping_input<T>(
    root: &Path,
    input: &str,
    rewrite: impl FnOnce(&mut Vec<ledger_ingest::Row>) -> T,
) -> T {
    let mut kept = rows_of(root, input);
    let result = rewrite(&mut kept);
    replace_keeping_input(root, input, vec![kept]);
    result
}

/// A compaction of `input` into one file per entry of `outputs` and the
/// manifest that says so, `input` left in the lake.
fn replace_keeping_input(root: &Path, input: &str, outputs: Vec<Vec<ledger_ingest::Row>>) {
    use ledger_ingest::{build_files, parse_object_key, FileLayer, Manifest};
    let before = version_of(root, input);
    let mut after = Vec::new();
    for rows in outputs {
        assert!(!rows.is_empty());
        let out = build_files(rows, FileLayer::Compacted).unwrap().remove(0);
        write_object(root, &out.key, &out.bytes).unwrap();
        after.push(version_of(root, &out.key));
    }
    let partition = parse_object_key(input).unwrap().partition;
    let manifest = Manifest::new(&partition, vec![before], after);
    write_object(root, &manifest.key(), &manifest.to_json()).unwrap();
}

/// A compactor that lies and deletes its input a night after it wrote the
/// output: the night the output is new, its rows are old rows the proved
/// input still holds (found again, or re-proved with the input there), so
/// nothing is missing yet; the night after, the input is gone and a chain
/// of manifests accounts for it. The output holds the first row of every
/// stretch of every stream the input held, so only how many rows each
/// stretch held tells: it lacks one transfer's proved tail and another's
/// row in the middle. The input is lost, the lake is proved from its first
/// event, and both are found.
#[test]
fn a_compaction_that_deletes_its_input_a_night_later_is_still_held_to_every_row_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "transfer");
    let rows_of_key = |key: &str| -> Vec<&Event> {
        rows.iter()
            .map(|r| &r.event)
            .filter(|e| e.stream_key == key)
            .collect()
    };
    let mut keys: Vec<&str> = rows.iter().map(|r| r.event.stream_key.as_str()).collect();
    keys.dedup();
    let long: Vec<&str> = keys
        .into_iter()
        .filter(|k| rows_of_key(k).len() >= 3)
        .collect();
    assert!(long.len() >= 2, "two transfers of three rows or more");
    let tail = (*rows_of_key(long[0]).last().unwrap()).clone();
    let middle = rows_of_key(long[1])[1].clone();
    compact_keeping_input(&root, &input, |rows| {
        rows.retain(|r| r.event.event_id != tail.event_id && r.event.event_id != middle.event_id);
    });
    let r = night(&root, &ckpt);
    let i = r.incremental.as_ref().unwrap();
    assert!(r.holds && i.files_gone == 0, "{i:?}\n{}", verdicts(&r));
    let r = input_deleted_and_lost(&root, &ckpt, &input, &middle);
    assert!(
        owed(&r).contains(&("proved_rows_missing", tail.stream_key.clone(), tail.seq)),
        "{}",
        verdicts(&r)
    );
}

/// The night after a lying compaction's `input` is deleted (its output
/// proved the night before): the input is lost, the lake is proved from
/// its first event, and the row `cut` from the middle of its stream is a
/// gap there. The night's report.
fn input_deleted_and_lost(root: &Path, ckpt: &Path, input: &str, cut: &Event) -> Report {
    std::fs::remove_file(root.join(input)).unwrap();
    let r = night(root, ckpt);
    let i = r.incremental.as_ref().unwrap();
    assert!(
        i.files_gone == 1 && i.files_lost == 1 && i.reproved_in_full,
        "{i:?}"
    );
    let gap = r.checks[0]
        .findings
        .iter()
        .any(|f| f.code == "seq_gap" && f.key == cut.stream_key && f.seq == Some(cut.seq));
    assert!(gap, "{}", verdicts(&r));
    r
}

/// As above, but the compactor also writes a second output holding a copy
/// of a row it kept, in the same stretch as the row it cut: the outputs
/// hold as many rows of the stream there as the input did, one of them
/// twice. A row counts once however many files hold it, so the cut is
/// still seen.
#[test]
fn a_row_written_twice_does_not_stand_in_for_a_row_a_compaction_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "transfer");
    let long = rows
        .iter()
        .map(|r| r.event.stream_key.as_str())
        .find(|k| rows.iter().filter(|r| r.event.stream_key == *k).count() >= 3)
        .expect("a transfer of three rows or more")
        .to_owned();
    let of_long: Vec<&ledger_ingest::Row> =
        rows.iter().filter(|r| r.event.stream_key == long).collect();
    let (cut, twice) = (of_long[1].event.clone(), of_long[2].clone());
    let kept: Vec<ledger_ingest::Row> = rows
        .iter()
        .filter(|r| r.event.event_id != cut.event_id)
        .cloned()
        .collect();
    replace_keeping_input(&root, &input, vec![kept, vec![twice]]);
    assert!(night(&root, &ckpt).holds);
    input_deleted_and_lost(&root, &ckpt, &input, &cut);
}

/// A file whose rows of a stream skip seqs (an old row delivered again
/// with the stream's new rows: the seqs between them were proved from
/// other files), compacted honestly and its input deleted: the output
/// holds every row it read, so nothing is lost. Its notes cut the stream's
/// rows there into two stretches where the seq is skipped; one stretch from
/// the old row would claim seqs the file never held, and the output would
/// seem to lack them.
#[test]
fn an_honest_compaction_of_a_file_whose_rows_skip_seqs_loses_nothing() {
    let (dir, events) = (tempfile::tempdir().unwrap(), history(43, 4, 200));
    let half = events.len() / 2;
    let (root, ckpt) = half_proved(dir.path(), &events, half);
    let before = common::files_under(&root, "events/account");
    // Each account's row two before its last proved one, with the rest of
    // the history.
    let mut again: Vec<&Event> = Vec::new();
    for e in &events[..half] {
        let last = events[..half]
            .iter()
            .filter(|o| o.stream == Stream::Account && o.stream_key == e.stream_key)
            .map(|o| o.seq)
            .max()
            .unwrap_or(0);
        if e.stream == Stream::Account && e.seq + 2 == last {
            again.push(e);
        }
    }
    again.extend(&events[half..]);
    deliver(&root, &again, "b");
    assert!(night(&root, &ckpt).holds);
    // A new file that holds an account's old row and its next rows after
    // the proved ones: seqs skipped in between.
    let skips = |key: &str| {
        let rows = rows_of(&root, key);
        rows.windows(2).any(|w| {
            let (a, b) = (&w[0].event, &w[1].event);
            a.stream_key == b.stream_key && b.seq > a.seq + 1
        })
    };
    let input = common::files_under(&root, "events/account")
        .into_iter()
        .find(|k| !before.contains(k) && skips(k))
        .expect("a new file whose rows of an account skip seqs");
    compact_dropping(&root, &input, |_| false);
    let r = night(&root, &ckpt);
    let i = r.incremental.as_ref().unwrap();
    // (The old rows in the output reopen their accounts: with a proved
    // file gone they are not looked up. Here that is every account, so the
    // night may prove the lake from its first event, as cheaper; it is
    // not for a lost file.)
    assert!(i.files_gone == 1 && i.files_lost == 0, "{i:?}");
    assert_same(3, &r, &full(&root));
}

/// A compaction that alters a deposit under its recorded hashes (so its
/// stream's rows still chain to the proved tail, and the pre-proof scan
/// takes them for copies until their hashes are checked) and drops another
/// stream's last proved row: the night proves the lake from its first event
/// once it finds the copies are not, and must still judge every tail the
/// checkpoint proved (a proof of the lake alone sees a shorter, whole
/// stream).
#[test]
fn a_night_that_finds_cleared_copies_altered_still_judges_every_proved_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "account");
    let last = rows.last().unwrap().event.clone();
    let (altered, dropped) = compact_rewriting(&root, &input, |rows| {
        let deposit = rows
            .iter_mut()
            .find(|r| r.event.kind == "deposited" && r.event.stream_key != last.stream_key)
            .expect("a deposit of another account");
        *deposit.event.amount.as_mut().unwrap() += 1;
        let altered = deposit.event.event_id.clone();
        let at = rows
            .iter()
            .position(|r| r.event.event_id == last.event_id)
            .unwrap();
        (altered, rows.remove(at).event)
    });
    let r = night(&root, &ckpt);
    let i = r.incremental.as_ref().unwrap();
    // The dropped row makes the input lost as well: its output holds fewer
    // rows than the stretch of that stream it held (`custody`).
    assert!(i.reproved_in_full && i.files_lost == 1, "{i:?}");
    assert!(
        serde_json::to_string(&r.checks).unwrap().contains(&altered),
        "the altered deposit is named: {}",
        verdicts(&r)
    );
    assert_eq!(
        owed(&r),
        vec![(
            "proved_rows_missing",
            dropped.stream_key.clone(),
            dropped.seq
        )],
        "{}",
        verdicts(&r)
    );
}

#[test]
fn a_compaction_that_drops_proved_rows_loses_its_input_and_the_tail_is_judged() {
    let dir = tempfile::tempdir().unwrap();
    // The last row of one account goes; its other rows stay.
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "account");
    let last = rows.last().unwrap().event.clone();
    let victim = last.stream_key.clone();
    let dropped = compact_dropping(&root, &input, |e| e.event_id == last.event_id);
    assert_eq!(dropped.len(), 1);
    // The output holds fewer rows of the stream than the input's stretch
    // of it held: the input is lost (`custody`), the lake is proved from
    // its first event, and the stream's proof ends before the seq the
    // checkpoint proved.
    let r = night(&root, &ckpt);
    let i = r.incremental.unwrap();
    assert!(i.files_lost == 1 && i.reproved_in_full, "{i:?}");
    assert_eq!(
        owed(&r),
        vec![("proved_rows_missing", victim.clone(), last.seq)],
        "{}",
        verdicts(&r)
    );
    // A proof of the lake alone cannot tell: the stream is shorter, and
    // whole.
    assert!(full(&root).checks[0].holds);
}

/// Old rows are vouched for by the proved row after them on a night that
/// compacted a proved file too: custody held the compaction's outputs to
/// every stretch the checkpoint noted in the file it replaced (a compactor
/// that cut a row is caught there, `a_compaction_that_drops_proved_rows_*`,
/// `a_row_written_twice_does_not_stand_in_for_a_row_a_compaction_cut`), so
/// the row after them is where the proved stream goes on.
#[test]
fn old_rows_are_vouched_for_on_a_night_a_proved_file_is_compacted() {
    // An old row (mid-history) of an account.
    an_old_row_is_vouched_for_while_a_proved_file_is_compacted("account", |events| {
        events
            .iter()
            .filter(|e| e.stream == Stream::Account && e.seq == 2)
            .collect()
    });
}

/// A lake delivered in two halves and proved; then a night on which a file
/// of the second delivery under `events/<table>` is compacted (the same
/// rows, a new file) and an old row is delivered again: the first of
/// `candidates(first half)` whose stream has no row in that file. That
/// night reopens nothing and reaches a full run's verdicts.
fn an_old_row_is_vouched_for_while_a_proved_file_is_compacted(
    table: &str,
    candidates: impl Fn(&[Event]) -> Vec<&Event>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(43, 4, 200);
    let half = events.len() / 2;
    let under = format!("events/{table}");
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    let first = common::files_under(&root, &under);
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
    assert!(night(&root, &ckpt).holds);
    let candidates = candidates(&events[..half]);
    let (later, old) = common::files_under(&root, &under)
        .into_iter()
        .filter(|k| !first.contains(k))
        .find_map(|k| {
            let rows = rows_of(&root, &k);
            let old = candidates
                .iter()
                .find(|e| rows.iter().all(|r| r.event.stream_key != e.stream_key))?;
            Some((k, *old))
        })
        .expect("a file of the second delivery without some stream");
    deliver(&root, &[old], "again");
    let compacted = rows_of(&root, &later).len() as u64;
    compact_dropping(&root, &later, |_| false);
    let r = night(&root, &ckpt);
    let i = r.incremental.as_ref().unwrap();
    assert!(
        i.files_gone == 1 && i.files_lost == 0 && !i.reproved_in_full && i.streams_reopened == 0,
        "{i:?}"
    );
    // The compacted file's rows and the old row: copies.
    assert_eq!(i.rows_already_proved, compacted + 1, "{i:?}");
    assert_same(1, &r, &full(&root));
}

/// The account row at `seq` of a stream of `events` that goes on past
/// `seq + 2`, and a second version of it (another content under the same
/// event id, sealed onto the same predecessor): a conflict whose second
/// version the chain does not follow (the next row's `prev_hash` names the
/// first).
fn second_version(events: &[Event], seq: u64) -> (Event, Event) {
    let goes_on = |key: &str| {
        events
            .iter()
            .any(|e| e.stream == Stream::Account && e.stream_key == key && e.seq > seq + 2)
    };
    let first = events
        .iter()
        .find(|e| e.stream == Stream::Account && e.seq == seq && goes_on(&e.stream_key))
        .expect("an account stream long enough")
        .clone();
    let mut other = first.clone();
    other.occurred_at_ms += 1;
    (first, other.seal())
}

/// A night by the CLI, resumed from the checkpoint `ckpt` (with `extra`
/// arguments): its exit code and its JSON report (written to `json`).
fn cli_night(root: &Path, ckpt: &Path, json: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let (ck, js) = (ckpt.to_str().unwrap(), json.to_str().unwrap());
    let (code, stderr) = cli(
        root,
        &[&["--checkpoint", ck, "--json", js][..], extra].concat(),
    );
    assert!(code == 0 || code == 1, "{stderr}");
    (
        code,
        serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap(),
    )
}

/// Every finding of a JSON report: (code, key, seq, event id), in report
/// order.
fn named_rows(report: &serde_json::Value) -> Vec<(String, String, u64, String)> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap())
        .map(|f| {
            (
                text(&f["code"]),
                text(&f["key"]),
                f["seq"].as_u64().unwrap_or(0),
                text(&f["event_id"]),
            )
        })
        .collect()
}

/// The lake file of `table` holding a row with `hash`.
fn file_holding(root: &Path, table: &str, hash: &str) -> String {
    common::files_under(root, &format!("events/{table}"))
        .into_iter()
        .find(|k| rows_of(root, k).iter().any(|r| r.event.hash == hash))
        .expect("a file holds the row")
}

/// A new file whose footer lies about its `stream_key` range (every key
/// "zzz", past every real one) cannot hide its rows of a reopened stream
/// from their re-proof, which filters the table's files by key: new files
/// are read whole. Here the night's file holds a second version of a proved
/// row (which reopens its stream) and the stream's next rows: the night
/// reports what a full proof does, the conflict included. A re-proof that
/// took the footer's word would see neither.
#[test]
fn a_new_files_footer_cannot_hide_a_reopened_streams_rows_from_its_re_proof() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, events, half) = first_half_proved(dir.path(), 43, 200);
    let (first, other) = second_version(&events[..half], 3);
    let before = common::files_under(&root, "events/account");
    let mut second: Vec<&Event> = vec![&other];
    second.extend(
        events[half..]
            .iter()
            .filter(|e| e.stream_key == first.stream_key),
    );
    assert!(second.len() > 1, "the stream goes on");
    deliver(&root, &second, "b");
    let new: Vec<String> = common::files_under(&root, "events/account")
        .into_iter()
        .filter(|k| !before.contains(k))
        .collect();
    assert!(!new.is_empty());
    for key in &new {
        lie_about_keys(&root, key);
    }
    let r = night(&root, &ckpt);
    let i = r.incremental.as_ref().unwrap();
    assert!(i.streams_reopened >= 1 && !i.reproved_in_full, "{i:?}");
    assert_same(2, &r, &full(&root));
    let conflicts: Vec<_> = r
        .check("conflicting_duplicates")
        .findings
        .iter()
        .map(|f| f.event_id.clone())
        .collect();
    assert_eq!(conflicts, [Some(first.event_id.clone())], "{}", r.summary());
}

/// Rewrites the footer of the lake file `key` under `root` to say that each
/// of its row groups holds the stream key "zzz" alone, past every real one:
/// a scan by key skips the whole file on its word.
fn lie_about_keys(root: &Path, key: &str) {
    common::lie_in_footer(&root.join(key), "stream_key", |_| {
        let z = parquet::data_type::ByteArray::from("zzz");
        parquet::file::statistics::Statistics::byte_array(
            Some(z.clone()),
            Some(z),
            None,
            Some(0),
            false,
        )
    });
}

/// What a test of a lying (or honest) file starts from: the lake, the
/// checkpoint, the history, where it was cut and the file.
type FileProved = (
    std::path::PathBuf,
    std::path::PathBuf,
    Vec<Event>,
    usize,
    String,
);

/// A generated history's first half (cut where nothing is in flight)
/// delivered to a lake in `dir`: the lake, where its checkpoint goes, the
/// history and the cut.
fn first_half_delivered(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<Event>, usize) {
    let (root, ckpt) = (dir.join("lake"), dir.join("checkpoint"));
    let events = history(43, 4, 200);
    let half = quiet_cut(&events, events.len() / 2);
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    (root, ckpt, events, half)
}

/// The first half of a history (`history(43, 4, 200)`, cut where no saga
/// is in flight) delivered, the account file holding the row `pick` picks
/// of it made to lie about its keys ([`lie_about_keys`]), and proved by a
/// night (a lake and a checkpoint in `dir`). A full proof reads every value
/// from the pages, so the lie changes none of its verdicts; it was there
/// when the file was proved, as a buggy writer's would be (rewritten after,
/// the file would be another version, which the next night finds lost).
/// Returns the lake, the checkpoint, the history, where it was cut and the
/// lying file.
fn a_lying_file_proved(dir: &Path, pick: impl Fn(&[Event], usize) -> Event) -> FileProved {
    let (root, ckpt, events, half) = first_half_delivered(dir);
    let lying = file_holding(&root, "account", &pick(&events, half).hash);
    lie_about_keys(&root, &lying);
    assert!(night(&root, &ckpt).holds);
    (root, ckpt, events, half, lying)
}

/// A run by the CLI with the checkpoint `ckpt` (and `extra` arguments) that
/// must stop with exit 2 on the lake file `lying`, whose footer hid rows
/// from the scan by key for `reading`, and leave the checkpoint as it was.
fn night_stopped_by(root: &Path, ckpt: &Path, extra: &[&str], lying: &str, reading: &str) {
    night_finding_stopped_by(root, ckpt, extra, Stretches::Enumerated, lying, reading)
}

/// [`night_stopped_by`], the night's keyed scans finding stretches as
/// `stretches` says.
fn night_finding_stopped_by(
    root: &Path,
    ckpt: &Path,
    extra: &[&str],
    stretches: Stretches,
    lying: &str,
    reading: &str,
) {
    let before = std::fs::read(ckpt).unwrap();
    let args = [&["--checkpoint", ckpt.to_str().unwrap()][..], extra].concat();
    let (code, out, stderr) = cli_out_finding(root, &args, stretches);
    assert_eq!(code, 2, "{out}{stderr}");
    if let Stretches::Matched = stretches {
        // The scan that stopped matched every history it checks.
        let how = format!("keyed scan for {reading}: 0 stretches enumerated, ");
        assert!(
            stderr.contains(&how) && !stderr.contains(&format!("{how}0 histories")),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains(&format!(
            "lake file {lying}: reading it by stream key for {reading}"
        )) && stderr.contains(ledger_reconcile::lake::FOOTER_DISAGREES),
        "{stderr}"
    );
    // One Help line: the file error's own.
    assert_eq!(stderr.matches("Help:").count(), 1, "{stderr}");
    assert_eq!(
        std::fs::read(ckpt).unwrap(),
        before,
        "the checkpoint is kept"
    );
}

/// A proved file whose footer lies about its `stream_key` range cannot hide
/// a reopened account stream's rows from the scan that pulls back from the
/// archive every transfer their history names: that scan reads the proved
/// files by the stream's key, and a row it missed would leave its transfer
/// settled in the archive while its leg is proved again. Each proved file
/// must show every stretch of the stream the checkpoint noted in it: the
/// night stops with exit 2 naming the file.
#[test]
fn a_proved_files_footer_cannot_hide_a_reopened_streams_rows_from_the_pull_back() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, events, half, lying) = a_lying_file_proved(dir.path(), |events, half| {
        second_version(&events[..half], 3).0
    });
    assert!(
        !segment_files(dir.path()).is_empty(),
        "settled transfers archived"
    );
    pull_back_stopped_by(
        &root,
        &ckpt,
        &events[..half],
        Stretches::Enumerated,
        &lying,
        "",
    );
}

/// Delivers a second version of the row of `proved` that `second_version`
/// picks (reopening its account stream): the night resumed from `ckpt` must
/// stop in the pull-back on the lake file `lying`, and a proof of the lake
/// alone finds the conflict, and nothing else. `case` names the case in
/// failures.
fn pull_back_stopped_by(
    root: &Path,
    ckpt: &Path,
    proved: &[Event],
    stretches: Stretches,
    lying: &str,
    case: &str,
) {
    // Both versions of the row: two a seq, not rows to find again in the
    // proved files (`run::found_again`), so the stream is reopened and its
    // history read by the pull-back.
    let (first, other) = second_version(proved, 3);
    deliver(root, &[&first, &other], "b");
    night_finding_stopped_by(
        root,
        ckpt,
        &[],
        stretches,
        lying,
        "the transfers of the account streams it reopens",
    );
    let fresh = full(root);
    assert_eq!(
        violated(&fresh),
        ["conflicting_duplicates"],
        "{case}: {}",
        fresh.summary()
    );
}

/// A proved file whose footer lies about its `stream_key` range cannot hide
/// the row at a proved tail from its look-up: `--full` with a checkpoint
/// judges every tail the checkpoint proved, and the hashes at the tail of a
/// stream that has gone on since are read from the lake by the stream's
/// key. A row missed there would be a `proved_rows_missing` on a lake that
/// holds it. Each file must show every stretch of the stream up to that
/// seq that the proof noted in it: the run stops with exit 2 naming the
/// file.
#[test]
fn a_proved_files_footer_cannot_hide_a_proved_tail_from_its_look_up() {
    let dir = tempfile::tempdir().unwrap();
    // The tail, at the cut, of an account stream that goes on after it.
    let tail = |events: &[Event], half: usize| {
        let goes_on = |key: &str| events[half..].iter().any(|e| e.stream_key == key);
        events[..half]
            .iter()
            .rev()
            .find(|e| e.stream == Stream::Account && goes_on(&e.stream_key))
            .expect("an account stream goes on after the cut")
            .clone()
    };
    let (root, ckpt, events, half, lying) = a_lying_file_proved(dir.path(), tail);
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
    night_stopped_by(
        &root,
        &ckpt,
        &["--full"],
        &lying,
        "the hashes at the proved tails it judges",
    );
    // The lake holds: a proof of it alone says so.
    assert!(full(&root).holds);
}

/// A proved file whose footer lies about its `stream_key` range cannot hide
/// the proved row an old row delivered again copies from the look-up that
/// finds it there (`run::found_again`): that scan reads the proved files by
/// key, checked against the checkpoint's notes, and it is the one that
/// stops the night with exit 2 naming the file (a lie can only hide rows,
/// so at worst the stream would be reopened, and the pull-back's own scan
/// would stop it next).
#[test]
fn a_proved_files_footer_cannot_hide_a_proved_row_from_the_look_up_of_old_rows() {
    let dir = tempfile::tempdir().unwrap();
    // A row before the cut's tail of an account stream that goes on after
    // it: it does not end at the tail, so it is looked up.
    let old = |events: &[Event], half: usize| {
        let goes_on = |key: &str| events[half..].iter().any(|e| e.stream_key == key);
        let tail = |key: &str| {
            events[..half]
                .iter()
                .filter(|e| e.stream == Stream::Account && e.stream_key == key)
                .map(|e| e.seq)
                .max()
                .unwrap()
        };
        events[..half]
            .iter()
            .find(|e| {
                e.stream == Stream::Account && goes_on(&e.stream_key) && e.seq < tail(&e.stream_key)
            })
            .expect("an account stream with a row before its tail")
            .clone()
    };
    let (root, ckpt, events, half, lying) = a_lying_file_proved(dir.path(), old);
    let copy = old(&events, half);
    let mut second: Vec<&Event> = events[half..].iter().collect();
    second.push(&copy);
    deliver(&root, &second, "b");
    night_stopped_by(
        &root,
        &ckpt,
        &[],
        &lying,
        "the proved rows that follow old rows delivered again",
    );
    // The lake holds: a proof of it alone says so.
    assert!(full(&root).holds);
}

/// Where a footer's lie hides the rows of a stretch after its first
/// ([`a_file_hiding_inside_a_stretch_proved`]).
#[derive(Debug, Clone, Copy)]
enum Inside {
    /// A row group of their own, its statistics lying.
    RowGroup,
    /// Pages of their own (one row each), the page index lying.
    Pages,
}

/// As [`a_lying_file_proved`], but the file (of its stream's table)
/// holding the row `pick` picks is first laid out again (every statistic honest) so that its rows
/// of that row's stream after the first there are a row group of their
/// own, or pages of their own (`inside`), and then its footer says that
/// group or those pages hold the stream key "zzz" alone: a scan by the
/// stream's key sees its first row there, and none of the others. Returns
/// the lake, the checkpoint, the history, where it was cut and the lying
/// file.
fn a_file_hiding_inside_a_stretch_proved(
    dir: &Path,
    pick: impl Fn(&[Event], usize) -> Event,
    inside: Inside,
) -> FileProved {
    a_file_laid_out_inside_a_stretch_proved(dir, pick, inside, true)
}

/// [`a_file_hiding_inside_a_stretch_proved`], the footer lying about the
/// stretch's later rows only when `lie`: without, the file is an honest
/// writer's, its stretch across row groups or pages, and a scan by the
/// stream's key sees every row of it.
fn a_file_laid_out_inside_a_stretch_proved(
    dir: &Path,
    pick: impl Fn(&[Event], usize) -> Event,
    inside: Inside,
    lie: bool,
) -> FileProved {
    let (root, ckpt, events, half) = first_half_delivered(dir);
    let picked = pick(&events, half);
    let table = match picked.stream {
        Stream::Transfer => "transfer",
        _ => "account",
    };
    let lying = file_holding(&root, table, &picked.hash);
    let of_stream: Vec<usize> = rows_of(&root, &lying)
        .iter()
        .enumerate()
        .filter(|(_, r)| r.event.stream == picked.stream && r.event.stream_key == picked.stream_key)
        .map(|(i, _)| i)
        .collect();
    let (first, end) = (of_stream[0], of_stream[of_stream.len() - 1] + 1);
    assert!(
        end - first >= 2 && end - first == of_stream.len(),
        "one stretch of two rows or more: {of_stream:?}"
    );
    let path = root.join(&lying);
    let zzz = parquet::data_type::ByteArray::from("zzz");
    match inside {
        Inside::RowGroup => common::relayout(&path, &[first + 1, end], 20_000),
        Inside::Pages => common::relayout(&path, &[], 1),
    }
    match inside {
        _ if !lie => {}
        Inside::RowGroup => {
            common::lie_in_row_groups(&path, "stream_key", |g, _| {
                (g == 1).then(|| {
                    parquet::file::statistics::Statistics::byte_array(
                        Some(zzz.clone()),
                        Some(zzz.clone()),
                        None,
                        Some(0),
                        false,
                    )
                })
            });
        }
        Inside::Pages => {
            common::lie_in_page_index(&path, "stream_key", 0, |rows| {
                rows.start > first && rows.end <= end
            });
        }
    }
    // What a scan by the stream's key sees of the file now: under a lie, its first row.
    let seen = runtime().block_on(async {
        let lake = Lake::open(root.to_str().unwrap()).unwrap();
        let ctx = datafusion::prelude::SessionContext::new();
        let df = ctx
            .read_parquet(
                root.join(&lying).to_str().unwrap(),
                datafusion::prelude::ParquetReadOptions::default(),
            )
            .await
            .unwrap()
            .filter(datafusion::prelude::col("stream_key").in_list(
                vec![datafusion::prelude::lit(picked.stream_key.as_str())],
                false,
            ))
            .unwrap();
        drop(lake);
        df.count().await.unwrap()
    });
    assert_eq!(
        seen,
        if lie { 1 } else { of_stream.len() },
        "{inside:?}: a lie hides all but the stretch's first row; an honest footer none"
    );
    assert!(night(&root, &ckpt).holds);
    (root, ckpt, events, half, lying)
}

/// A proved file whose footer hides a reopened account stream's rows
/// inside its stretch there, its first row left (a row group or pages of
/// its later rows skipped on the footer's word), cannot hide them from the
/// pull-back: the scan must see as many rows of the stream there as the
/// proof noted, not only the first. The night stops with exit 2 naming the
/// file, as for a lie that hides the whole stretch.
#[test]
fn a_proved_files_footer_cannot_hide_rows_inside_a_reopened_streams_stretch_from_the_pull_back() {
    for (inside, stretches) in lies_inside() {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half, lying) = a_file_hiding_inside_a_stretch_proved(
            dir.path(),
            |events, half| second_version(&events[..half], 3).0,
            inside,
        );
        pull_back_stopped_by(
            &root,
            &ckpt,
            &events[..half],
            stretches,
            &lying,
            &format!("{inside:?}, {stretches:?}"),
        );
    }
}

/// Where a lie hides rows inside a stretch, with how the keyed scan finds
/// the stretch it hides from: each layout once, and the hot account's path
/// (matched) for both.
fn lies_inside() -> [(Inside, Stretches); 4] {
    [
        (Inside::RowGroup, Stretches::Enumerated),
        (Inside::Pages, Stretches::Enumerated),
        (Inside::RowGroup, Stretches::Matched),
        (Inside::Pages, Stretches::Matched),
    ]
}

/// A proved file whose footer hides a reopened transfer stream's rows
/// inside its stretch there (its first row left) cannot hide them from the
/// stream's re-proof, which reads the files the checkpoint proved by key:
/// it must see as many rows of the stream there as the proof noted. The
/// night stops with exit 2 naming the file; without the check it reported
/// the hidden rows missing (a violation the lake does not hold).
#[test]
fn a_proved_files_footer_cannot_hide_rows_inside_a_reopened_streams_stretch_from_its_re_proof() {
    // A transfer's row at seq 2, its stream going on after it.
    let second = |events: &[Event], half: usize| a_second_row(Stream::Transfer, events, half);
    for (inside, stretches) in lies_inside() {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half, lying) =
            a_file_hiding_inside_a_stretch_proved(dir.path(), second, inside);
        // Another version of that row: looked up in the proved files first,
        // whose scan meets the lie. Two other versions (two rows at one seq
        // are not looked up) reopen the stream, whose re-proof meets it.
        let other = |later: i64| {
            let mut other = second(&events, half);
            other.occurred_at_ms += later;
            other.seal()
        };
        for (versions, reading) in [
            (1, "the proved rows that follow old rows delivered again"),
            (2, "the re-proof of the streams it reopens"),
        ] {
            let delivered: Vec<Event> = (1..=versions).map(other).collect();
            deliver(
                &root,
                &delivered.iter().collect::<Vec<_>>(),
                &format!("b{versions}"),
            );
            night_finding_stopped_by(&root, &ckpt, &[], stretches, &lying, reading);
        }
        let fresh = full(&root);
        assert!(
            !fresh.check("conflicting_duplicates").holds,
            "{inside:?}, {stretches:?}: {}",
            fresh.summary()
        );
    }
}

/// A proved file whose footer hides the row at a proved tail inside its
/// stream's stretch there (the stretch's first row left) cannot hide it
/// from the tail's look-up (`--full` with a checkpoint): a row missed would
/// be a `proved_rows_missing` on a lake that holds it. The run stops with
/// exit 2 naming the file.
#[test]
fn a_proved_files_footer_cannot_hide_a_proved_tail_inside_its_stretch_from_its_look_up() {
    for (inside, stretches) in lies_inside() {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half, lying) =
            a_file_hiding_inside_a_stretch_proved(dir.path(), a_tail_going_on, inside);
        deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
        night_finding_stopped_by(
            &root,
            &ckpt,
            &["--full"],
            stretches,
            &lying,
            "the hashes at the proved tails it judges",
        );
        assert!(full(&root).holds, "{inside:?}, {stretches:?}");
    }
}

/// A scan by more keys than DataFusion prunes by (20) still prunes a file
/// by the keys its row groups' ranges hold (`lake::ByKey`): a night that
/// reopens more streams reads only the row groups their footers do not
/// rule out, and checks what it saw against the notes
/// (`ledger_reconcile::keyed`). Seen through a footer that lies about the
/// later rows of a stream's stretch: a scan of that stream's key among 25
/// (the others past the file's keys) no longer reads them, while of an
/// honest writer's file it reads every row.
#[test]
fn a_scan_by_many_keys_prunes_by_every_key() {
    use ledger_ingest::Table;
    for lie in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let pick = |events: &[Event], half: usize| a_second_row(Stream::Account, events, half);
        let (root, _, events, half, lying) =
            a_file_laid_out_inside_a_stretch_proved(dir.path(), pick, Inside::RowGroup, lie);
        let key = pick(&events, half).stream_key;
        let in_file = rows_of(&root, &lying)
            .iter()
            .filter(|r| r.event.stream == Stream::Account && r.event.stream_key == key)
            .count();
        let mut keys: Vec<String> = (0..24).map(|i| format!("zz-{i:02}")).collect();
        keys.push(key.clone());
        let seen = runtime().block_on(async {
            let lake = Lake::open(root.to_str().unwrap()).unwrap();
            let files: Vec<_> = lake.files(Table::Account).await.unwrap();
            let file: Vec<_> = files.into_iter().filter(|f| f.key == lying).collect();
            let mut seen = 0;
            lake.scan_columns(&file, &["stream_key"], Some(&keys), |b| {
                use datafusion::arrow::array::AsArray;
                let k = b.column_by_name("stream_key").unwrap().as_string::<i32>();
                seen += k.iter().filter(|k| *k == Some(key.as_str())).count();
            })
            .await
            .unwrap();
            seen
        });
        assert!(in_file >= 2, "{in_file}");
        assert_eq!(seen, if lie { 1 } else { in_file }, "lie: {lie}");
    }
}

/// The row at seq 2 of a `stream` stream of `events[..half]` that goes on
/// to seq 3 there: a stretch of two rows or more in its file.
fn a_second_row(stream: Stream, events: &[Event], half: usize) -> Event {
    let first_half = &events[..half];
    first_half
        .iter()
        .find(|e| {
            e.stream == stream
                && e.seq == 2
                && first_half
                    .iter()
                    .any(|x| x.stream_key == e.stream_key && x.seq == 3)
        })
        .expect("a stream with three rows")
        .clone()
}

/// The tail at the cut `half` of an account stream that goes on after it,
/// with a row before it in the same file.
fn a_tail_going_on(events: &[Event], half: usize) -> Event {
    let goes_on = |key: &str| events[half..].iter().any(|e| e.stream_key == key);
    events[..half]
        .iter()
        .rev()
        .find(|e| e.stream == Stream::Account && e.seq > 1 && goes_on(&e.stream_key))
        .expect("an account stream goes on after the cut")
        .clone()
}

/// The count check against an honest writer's layouts: a proved file whose
/// stream's stretch spans two row groups, or one-row pages, every statistic
/// true, passes the pull-back of a reopened account stream, the re-proof of
/// a reopened transfer stream and the look-up of a proved tail, and each
/// night reaches a full proof's verdicts. No exit 2 on a correct lake.
#[test]
fn an_honest_file_with_a_stretch_across_row_groups_or_pages_passes_every_keyed_scan() {
    for (inside, stretches) in lies_inside() {
        for stream in [Stream::Account, Stream::Transfer] {
            let dir = tempfile::tempdir().unwrap();
            let pick = |events: &[Event], half: usize| a_second_row(stream, events, half);
            let (root, ckpt, events, half, _) =
                a_file_laid_out_inside_a_stretch_proved(dir.path(), pick, inside, false);
            let what = format!("{inside:?} {stream:?} {stretches:?}");
            let proved = &events[..half];
            a_second_version_night(&root, &ckpt, proved, stream, stretches, |_| {}, &what);
        }
        // The tail at the cut of an account stream that goes on after it.
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half, _) =
            a_file_laid_out_inside_a_stretch_proved(dir.path(), a_tail_going_on, inside, false);
        let what = format!("{inside:?} {stretches:?}");
        a_full_night_looking_up_tails(&root, &ckpt, &events, half, stretches, &what);
    }
}

/// A second version of `stream`'s row [`a_second_row`] picks of the
/// `proved` history, delivered to the lake at `root` proved into `ckpt`
/// (its new file then laid out again by `lay_out`): it reopens the stream
/// (the pull-back, the re-proof), and the night finds the conflict and
/// reaches a full proof's verdicts (`what` names the case).
fn a_second_version_night(
    root: &Path,
    ckpt: &Path,
    proved: &[Event],
    stream: Stream,
    stretches: Stretches,
    lay_out: fn(&Path),
    what: &str,
) {
    let mut other = a_second_row(stream, proved, proved.len());
    other.occurred_at_ms += 1;
    let before = common::files_under(root, "events");
    deliver(root, &[&other.seal()], "b");
    for f in common::files_under(root, "events") {
        if !before.contains(&f) {
            lay_out(&root.join(f));
        }
    }
    let wanted_starts_max = match stretches {
        Stretches::Enumerated => opts().wanted_starts_max,
        Stretches::Matched => 0,
    };
    let resumed = night_with(
        root,
        ckpt,
        &Options {
            wanted_starts_max,
            ..opts()
        },
    );
    assert!(
        !resumed.check("conflicting_duplicates").holds,
        "{what}: {}",
        resumed.summary()
    );
    assert_same(1, &resumed, &full(root));
}

/// The history's second half delivered to the lake at `root` proved into
/// `ckpt`, judged by `--full` with the checkpoint (the proved tails' hashes
/// looked up; its report beside the checkpoint): every invariant holds
/// (`what` names the case).
fn a_full_night_looking_up_tails(
    root: &Path,
    ckpt: &Path,
    events: &[Event],
    half: usize,
    stretches: Stretches,
    what: &str,
) {
    deliver(root, &events[half..].iter().collect::<Vec<_>>(), "b");
    let json = ckpt.with_file_name("r.json");
    let args = [
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, _, stderr) = cli_out_finding(root, &[&args[..], &["--full"]].concat(), stretches);
    assert_eq!(code, 0, "{what}: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["holds"], serde_json::json!(true), "{what}: {report}");
}

/// A night by the CLI ([`cli_night`]) that must exit 1 naming exactly
/// `rows` ([`named_rows`]); its report.
fn night_naming(
    root: &Path,
    ckpt: &Path,
    json: &Path,
    extra: &[&str],
    rows: Vec<(String, String, u64, String)>,
) -> serde_json::Value {
    let (code, report) = cli_night(root, ckpt, json, extra);
    assert_eq!(
        (code, named_rows(&report)),
        (1, rows),
        "{extra:?}: {report}"
    );
    report
}

/// The finding `code` on the row of `e` (stream key, seq, event id), as
/// [`named_rows`] names it.
fn named_at(e: &Event, code: &str) -> (String, String, u64, String) {
    (
        code.to_owned(),
        e.stream_key.clone(),
        e.seq,
        e.event_id.clone(),
    )
}

/// A compaction that lies: the account file holding `other` compacted
/// without it (the version kept no longer marked as a conflict), its
/// manifest saying its rows are all in the output.
fn compact_without_version(root: &Path, other: &Event) {
    let input = file_holding(root, "account", &other.hash);
    compact_rewriting(root, &input, |rows| {
        rows.retain(|r| r.event.hash != other.hash);
        rows.iter_mut().for_each(|r| r.conflict = false);
    });
}

/// A compaction that lies drops the second version of a conflict at a seq
/// before its stream's tail and keeps the version the chain follows: the
/// stream's rows are whole, so their proof finds it clean, but the
/// checkpoint proved both versions. The night reports the version gone
/// (`proved_row_changed` at that seq, naming the event), night after
/// night, until the version is back and the conflict is found again.
#[test]
fn a_compaction_that_drops_a_conflicts_version_before_the_tail_is_still_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("report.json");
    let events = history(43, 4, 200);
    let (first, other) = second_version(&events, 3);
    let mut all: Vec<&Event> = events.iter().collect();
    all.push(&other);
    deliver(&root, &all, "a");
    let at = |code: &str| named_at(&first, code);
    night_naming(&root, &ckpt, &json, &[], vec![at("conflict")]);
    compact_without_version(&root, &other);
    let report = night_naming(&root, &ckpt, &json, &[], vec![at("proved_row_changed")]);
    let i = &report["incremental"];
    // The input held both versions, its output one: fewer rows than the
    // input's stretch of the stream, so the input is lost (`custody`) and
    // the lake proved from its first event, which judges the conflict's
    // versions the checkpoint proved.
    assert_eq!(
        (&i["files_lost"], &i["reproved_in_full"]),
        (&1.into(), &true.into())
    );
    let detail = report["checks"][0]["findings"][0]["detail"]
        .as_str()
        .unwrap();
    assert!(
        detail.contains(&other.hash) && detail.ends_with("a version proved there is gone"),
        "{detail}"
    );
    // A proof of the lake alone cannot tell: one version, on the chain.
    assert!(full(&root).holds);
    // Owed: a night with nothing new reports it again.
    night_naming(&root, &ckpt, &json, &[], vec![at("proved_row_changed")]);
    // The version back: the conflict is found again, nothing is owed.
    deliver(&root, &[&other], "b");
    night_naming(&root, &ckpt, &json, &[], vec![at("conflict")]);
    night_naming(&root, &ckpt, &json, &[], vec![at("conflict")]);
}

/// The second version of a conflict is its stream's only row in a file, so
/// a compaction that drops it leaves no row of the stream in its output:
/// the file is lost and the night proves the lake from its first event,
/// its checkpoint's proof set aside. The conflict that proof found is
/// judged as its tails are: the version gone is reported, by the night and
/// by `--full`.
#[test]
fn a_conflicts_version_lost_with_its_file_is_still_reported_by_the_proof_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("report.json");
    let events = history(43, 4, 200);
    let (first, other) = second_version(&events, 3);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    // A later batch: the second version, and another account's row again.
    let again = events
        .iter()
        .find(|e| e.stream == Stream::Account && e.stream_key != first.stream_key)
        .unwrap();
    deliver(&root, &[&other, again], "b");
    let at = |code: &str| named_at(&first, code);
    night_naming(&root, &ckpt, &json, &[], vec![at("conflict")]);
    compact_without_version(&root, &other);
    let report = night_naming(&root, &ckpt, &json, &[], vec![at("proved_row_changed")]);
    let i = &report["incremental"];
    assert_eq!(
        (&i["files_lost"], &i["reproved_in_full"]),
        (&1.into(), &true.into())
    );
    assert!(full(&root).holds);
    // Owed from then on: `--full` with the checkpoint, and the night after.
    for extra in [&["--full"][..], &[]] {
        night_naming(&root, &ckpt, &json, extra, vec![at("proved_row_changed")]);
    }
}

/// `events` written as ingest writes them (no hash checked: a damaged row
/// goes in as it is); the keys written.
fn write_rows(root: &Path, events: &[Event]) -> Vec<String> {
    files_of(events)
        .into_iter()
        .map(|f| {
            write_object(root, &f.key, &f.bytes).unwrap();
            f.key
        })
        .collect()
}

/// A proved tail rewritten over two nights stays owed (rev-s60-diff 1): a
/// stream's newest row, proved clean, has its content altered with its
/// hash kept (`hash_mismatch`: the row still records the hash the tail was
/// proved with), then the altered content written again with the hash of
/// its content. A proof of the lake alone now holds; the checkpoint knows
/// the row it proved is gone: `proved_row_changed`, resumed and with
/// `--full`. (A rule that owed no hash a `hash_mismatch` row records, to
/// spare a tail that arrived damaged its false alarm after a repair, let
/// this pass unreported: the hash was the ledger's.)
#[test]
fn a_proved_tail_altered_then_resealed_is_still_owed() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(43, 4, 200);
    let last = events
        .iter()
        .rev()
        .find(|e| e.stream == Stream::Account && e.seq > 2)
        .unwrap()
        .clone();
    let keep: Vec<&Event> = events
        .iter()
        .filter(|e| e.event_id != last.event_id)
        .collect();
    deliver(&root, &keep, "a");
    let mut file = write_rows(&root, std::slice::from_ref(&last));
    assert!(night(&root, &ckpt).holds);
    let mut altered = last.clone();
    altered.occurred_at_ms += 1;
    let resealed = altered.clone().seal();
    let changed = named_at(&last, "proved_row_changed");
    for (n, row) in [altered, resealed].into_iter().enumerate() {
        for key in &file {
            std::fs::remove_file(root.join(key)).unwrap();
        }
        file = write_rows(&root, std::slice::from_ref(&row));
        let json = dir.path().join(format!("night{n}.json"));
        let (_, report) = cli_night(&root, &ckpt, &json, &[]);
        let found = named_rows(&report);
        if n == 0 {
            // The row fails its hash; the hash it records is the one proved.
            assert!(
                found.contains(&named_at(&last, "hash_mismatch")),
                "{found:?}"
            );
            assert!(!found.contains(&changed), "{found:?}");
        } else {
            assert!(full(&root).holds);
            assert_eq!(found, vec![changed.clone()], "{report}");
            let (_, with_full) = cli_night(&root, &ckpt, &json, &["--full"]);
            assert_eq!(named_rows(&with_full), vec![changed.clone()]);
        }
    }
}

/// `e` with one digit of its recorded hash changed, its content kept (a
/// bit flipped in the `hash` column).
fn hash_damaged(e: &Event) -> Event {
    let mut d = e.clone();
    let first = if d.hash.starts_with('e') { "f" } else { "e" };
    d.hash.replace_range(..1, first);
    d
}

/// `rows` written with a plain duplicate of another account row of their
/// first row's day (from `events`, delivered already), so that their file
/// is not one with the same rows' hashes, whose key it would take: a copy
/// beside the file, not over it.
fn write_beside(root: &Path, events: &[Event], rows: &[Event]) -> Vec<String> {
    let day = |e: &Event| e.occurred_at_ms.div_euclid(86_400_000);
    let other = events
        .iter()
        .find(|e| {
            e.stream == Stream::Account
                && day(e) == day(&rows[0])
                && rows.iter().all(|r| r.event_id != e.event_id)
        })
        .expect("another account row that day");
    let mut all = [rows, std::slice::from_ref(other)].concat();
    all.sort_by(|a, b| (&a.stream_key, a.seq, &a.hash).cmp(&(&b.stream_key, b.seq, &b.hash)));
    write_rows(root, &all)
}

/// What the checkpoint `ckpt` of the lake at `root` owes of the row its
/// `hash_mismatch` at `e` names (`Finding::hash_owed`; none: its recorded
/// hash).
fn hash_owed(root: &Path, ckpt: &Path, e: &Event) -> Owes {
    let p = ProofState::load(ckpt, root.to_str().unwrap()).unwrap();
    let f = p
        .findings
        .iter()
        .find(|f| {
            f.finding.code == "hash_mismatch" && f.finding.event_id.as_deref() == Some(&e.event_id)
        })
        .unwrap_or_else(|| panic!("no hash_mismatch at {} in the checkpoint", e.event_id));
    f.finding.hash_owed.unwrap_or(Owes::Recorded)
}

/// The newest row of an account stream (past seq 2) and a captured
/// transfer's last row in `events`: a tail, and a tail for good.
fn newest_tails(events: &[Event]) -> [&Event; 2] {
    let newest = |stream, kind: Option<&str>| {
        events
            .iter()
            .rev()
            .find(|e| e.stream == stream && e.seq > 2 && kind.is_none_or(|k| e.kind == k))
            .unwrap()
    };
    [
        newest(Stream::Account, None),
        newest(Stream::Transfer, Some("captured")),
    ]
}

/// A lake in a new directory with every event of `events` delivered but
/// `last`: the directory, the lake, its checkpoint and a report's path.
fn lake_without(
    events: &[Event],
    last: &Event,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("night.json");
    let keep: Vec<&Event> = events
        .iter()
        .filter(|e| e.event_id != last.event_id)
        .collect();
    deliver(&root, &keep, "a");
    (dir, root, ckpt, json)
}

/// Three nights on the lake at `root` (resumed, `--full`, resumed) that
/// each hold, with no finding.
fn holds_for_good(root: &Path, ckpt: &Path, json: &Path, context: &str) {
    for extra in [&[][..], &["--full"], &[]] {
        let (code, report) = cli_night(root, ckpt, json, extra);
        assert_eq!(
            (code, named_rows(&report)),
            (0, vec![]),
            "{context} {extra:?} {report}"
        );
    }
}

/// Three nights on the lake at `root` (resumed, `--full`, resumed) that
/// each name `row` among their findings ([`holds_for_good`]'s twin).
fn names_for_good(
    root: &Path,
    ckpt: &Path,
    json: &Path,
    row: &(String, String, u64, String),
    context: &str,
) {
    for extra in [&[][..], &["--full"], &[]] {
        let (_, report) = cli_night(root, ckpt, json, extra);
        assert!(
            named_rows(&report).contains(row),
            "{context} {extra:?} {report}"
        );
    }
}

/// A copy of `last` altered under its hash delivered beside it (in
/// another file), after a night proved `last` (`proved_first`) or on the
/// night both are new: the hash is owed, so the altered content resealed
/// in place of both is `proved_row_changed`, resumed and with `--full`.
fn altered_copy_then_resealed(events: &[Event], last: &Event, proved_first: bool) {
    let (_dir, root, ckpt, json) = lake_without(events, last);
    let intact = if proved_first {
        let intact = write_rows(&root, std::slice::from_ref(last));
        assert!(night(&root, &ckpt).holds);
        intact
    } else {
        night(&root, &ckpt);
        write_rows(&root, std::slice::from_ref(last))
    };
    let mut altered = last.clone();
    altered.occurred_at_ms += 1;
    let copy = write_beside(&root, events, std::slice::from_ref(&altered));
    assert!(copy.iter().all(|k| !intact.contains(k)));
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    assert!(named_rows(&report).contains(&named_at(last, "hash_mismatch")));
    assert_eq!(hash_owed(&root, &ckpt, last), Owes::Recorded);
    for key in intact.iter().chain(&copy) {
        std::fs::remove_file(root.join(key)).unwrap();
    }
    // (The other row, its copy gone, is in the lake as delivered.)
    write_rows(&root, &[altered.seal()]);
    assert!(full(&root).holds);
    let changed = named_at(last, "proved_row_changed");
    for extra in [&[][..], &["--full"]] {
        let (_, report) = cli_night(&root, &ckpt, &json, extra);
        assert_eq!(named_rows(&report), vec![changed.clone()], "{report}");
    }
}

/// A stream's newest row that arrived damaged records a hash no run
/// proved: a digit of its `hash` column changed (its content intact), or
/// of its content (its `prev_hash`; its hash kept). After the repair
/// docs/LAKE.md gives (the file as ingest wrote it put back) the lake holds
/// what was proved, resumed and with `--full`, as a proof of the lake
/// alone does (rev-s60-nights 1, rev-s61-diff2 1: `proved_row_changed`
/// every night after). An account's tail, and a settled transfer's last
/// row (a tail for good). The tail is owed as the row ingest most likely
/// wrote (what its content hashes to, or its recorded hash): left as it
/// is, it holds; removed, with none put back, it is `proved_rows_missing`
/// until it is back; a row of other content in its place, resealed (the
/// stream rewritten from there back), is `proved_row_changed`.
#[test]
fn a_tail_that_arrived_damaged_is_owed_as_ingest_wrote_it() {
    let events = history(43, 4, 200);
    let [account, transfer] = newest_tails(&events);
    for (last, damage, then) in [
        (account, "hash", "repair"),
        (transfer, "hash", "repair"),
        (account, "content", "repair"),
        (transfer, "content", "repair"),
        (account, "hash", "remove"),
        (account, "content", "remove"),
        (account, "hash", "reseal"),
        (transfer, "hash", "reseal"),
        (account, "content", "reseal"),
    ] {
        let (_dir, root, ckpt, json) = lake_without(&events, last);
        night(&root, &ckpt);
        let arrived = match damage {
            "hash" => hash_damaged(last),
            // A digit of its `prev_hash` changed, its hash kept.
            _ => {
                let mut d = last.clone();
                let first = if d.prev_hash.starts_with('e') {
                    "f"
                } else {
                    "e"
                };
                d.prev_hash.replace_range(..1, first);
                d
            }
        };
        let damaged = write_rows(&root, &[arrived]);
        let mismatch = named_at(last, "hash_mismatch");
        let (_, report) = cli_night(&root, &ckpt, &json, &[]);
        assert!(named_rows(&report).contains(&mismatch));
        assert_eq!(hash_owed(&root, &ckpt, last), Owes::AsWritten);
        // Left as it is, the next night (the stream re-proved with
        // `--full`) holds the tail: only the damage is reported.
        let (_, report) = cli_night(&root, &ckpt, &json, &["--full"]);
        let found = named_rows(&report);
        assert!(found.contains(&mismatch) && !found.iter().any(|f| f.0.starts_with("proved_")));
        for key in &damaged {
            std::fs::remove_file(root.join(key)).unwrap();
        }
        if then == "reseal" {
            let mut other = last.clone();
            other.occurred_at_ms += 1;
            write_rows(&root, &[other.seal()]);
            let changed = named_at(last, "proved_row_changed");
            names_for_good(&root, &ckpt, &json, &changed, &format!("{damage} {then}"));
            continue;
        }
        if then == "remove" {
            // (Its hold, released there, leaks without it.)
            let gone = named_at(last, "proved_rows_missing");
            for extra in [&[][..], &["--full"]] {
                let (_, report) = cli_night(&root, &ckpt, &json, extra);
                assert!(named_rows(&report).contains(&gone), "{report}");
            }
        }
        write_rows(&root, std::slice::from_ref(last));
        assert!(full(&root).holds);
        holds_for_good(&root, &ckpt, &json, &format!("{damage} {then}"));
    }
}

/// A copy of a proved row whose `hash` was damaged on its way (a conflict:
/// one event id, two recorded hashes) is moved out, as docs/LAKE.md says:
/// the lake holds every version proved, since no run proved the damaged
/// one's hash (rev-s60-nights 2). A copy altered under the proved row's own
/// hash beside it marks that hash proved, so the altered copy resealed in
/// its place, the intact row gone, is still the proved row changed
/// (rev-s60-diff B); and so is a proved conflict's version gone with an
/// altered copy of it (rev-s60-diff C).
#[test]
fn a_damaged_copy_beside_a_proved_row_is_owed_only_with_a_proved_hash() {
    let events = history(43, 4, 200);
    let (first, other) = second_version(&events, 3);
    // The damaged copy moved out: clean.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("night.json");
    let all: Vec<&Event> = events.iter().collect();
    deliver(&root, &all, "a");
    assert!(night(&root, &ckpt).holds);
    let copy = write_rows(&root, &[hash_damaged(&first)]);
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    let found = named_rows(&report);
    assert!(found.contains(&named_at(&first, "conflict")), "{found:?}");
    assert!(named_rows(&report).contains(&named_at(&first, "hash_mismatch")));
    assert_eq!(hash_owed(&root, &ckpt, &first), Owes::AsWritten);
    std::fs::remove_file(root.join(&copy[0])).unwrap();
    for extra in [&[][..], &["--full"]] {
        let (code, report) = cli_night(&root, &ckpt, &json, extra);
        assert_eq!((code, named_rows(&report)), (0, vec![]), "{report}");
    }
    // An altered copy under the proved hash, then the intact row and the
    // copy replaced by the altered content resealed (the stream's newest
    // row, so nothing after it chains to it).
    let [last, _] = newest_tails(&events);
    altered_copy_then_resealed(&events, last, true);
    // A proved conflict; a copy of its second version altered under its
    // hash; then that version and the copy gone.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    deliver(&root, &all, "a");
    let second = write_rows(&root, std::slice::from_ref(&other));
    let conflict = named_at(&first, "conflict");
    night_naming(&root, &ckpt, &json, &[], vec![conflict.clone()]);
    let mut altered = other.clone();
    altered.occurred_at_ms += 1;
    let copy = write_beside(&root, &events, &[altered]);
    assert!(copy.iter().all(|k| !second.contains(k)));
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    assert!(named_rows(&report).contains(&named_at(&first, "hash_mismatch")));
    assert_eq!(hash_owed(&root, &ckpt, &first), Owes::Recorded);
    for key in second.iter().chain(&copy) {
        std::fs::remove_file(root.join(key)).unwrap();
    }
    assert!(full(&root).holds);
    let changed = named_at(&first, "proved_row_changed");
    for extra in [&[][..], &["--full"], &[]] {
        let (_, report) = cli_night(&root, &ckpt, &json, extra);
        assert_eq!(named_rows(&report), vec![changed.clone()], "{report}");
    }
}

/// A proved tail whose `hash` column is damaged at rest (its file
/// rewritten with one digit changed, or with an unrelated hash; its
/// content as proved): the night that finds it reports the
/// `hash_mismatch`, and its content, the hash proved, is owed. After the
/// file is put back as ingest wrote it nothing is owed of the damaged hash
/// (rev-s61-diff2 2, rev-s61-red4 F2: `proved_row_changed` every night
/// after). The content then forged under the damaged hash, and resealed
/// the night after, is the proved row changed both nights (rev-s61-red4
/// L1: the damaged hash, owed as written, was held by the forgery). An
/// account's tail and a settled transfer's last row.
#[test]
fn a_proved_tails_hash_damaged_at_rest_is_owed_as_its_content() {
    let events = history(43, 4, 200);
    let [account, transfer] = newest_tails(&events);
    for (last, unrelated, then) in [
        (account, false, "repair"),
        (transfer, false, "repair"),
        (account, true, "repair"),
        (transfer, true, "repair"),
        (account, true, "forge"),
        (transfer, true, "forge"),
    ] {
        let (_dir, root, ckpt, json) = lake_without(&events, last);
        let file = write_rows(&root, std::slice::from_ref(last));
        night(&root, &ckpt);
        let key = &file[0];
        let written = std::fs::read(root.join(key)).unwrap();
        let mut damaged = hash_damaged(last);
        if unrelated {
            damaged.hash = events[0].hash.clone();
        }
        std::fs::write(root.join(key), &files_of(&[damaged.clone()])[0].bytes).unwrap();
        let (_, report) = cli_night(&root, &ckpt, &json, &[]);
        let found = named_rows(&report);
        let context = format!("{} unrelated {unrelated} {then}", last.event_id);
        assert!(
            found.contains(&named_at(last, "hash_mismatch")),
            "{context} {found:?}"
        );
        assert!(
            !found.iter().any(|f| f.0.starts_with("proved_")),
            "{context} {found:?}"
        );
        assert_eq!(hash_owed(&root, &ckpt, last), Owes::Content, "{context}");
        if then == "forge" {
            let mut forged = damaged.clone();
            forged.occurred_at_ms += 1;
            std::fs::write(root.join(key), &files_of(&[forged.clone()])[0].bytes).unwrap();
            let changed = named_at(last, "proved_row_changed");
            let (_, report) = cli_night(&root, &ckpt, &json, &[]);
            assert!(named_rows(&report).contains(&changed), "{context} {report}");
            std::fs::write(root.join(key), &files_of(&[forged.seal()])[0].bytes).unwrap();
            names_for_good(&root, &ckpt, &json, &changed, &context);
            continue;
        }
        std::fs::write(root.join(key), &written).unwrap();
        holds_for_good(&root, &ckpt, &json, &context);
    }
}

/// A proved row whose `hash` column is overwritten with another row's hash
/// at its seq (rev-s61-red5): a forgery of the tail delivered beside it
/// (M2), or the other version of a proved conflict (C4). The night that
/// finds it holds the proved row by its content, and keeps owing that
/// content beside the hash it records, so the damaged row moved out (the
/// repair docs/LAKE.md gives for a damaged copy) is the proved row gone.
#[test]
fn a_proved_row_damaged_to_another_rows_hash_stays_owed_as_its_content() {
    let events = history(43, 4, 200);
    // The tail, and a forgery of it beside.
    let [last, _] = newest_tails(&events);
    let (_dir, root, ckpt, json) = lake_without(&events, last);
    let file = write_rows(&root, std::slice::from_ref(last));
    night(&root, &ckpt);
    let mut forged = last.clone();
    forged.occurred_at_ms += 1;
    let forged = forged.seal();
    let mut damaged = last.clone();
    damaged.hash = forged.hash.clone();
    std::fs::write(root.join(&file[0]), &files_of(&[damaged])[0].bytes).unwrap();
    write_beside(&root, &events, std::slice::from_ref(&forged));
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    let found = named_rows(&report);
    assert!(
        found.contains(&named_at(last, "hash_mismatch")),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|f| f.0.starts_with("proved_")),
        "{found:?}"
    );
    assert_eq!(hash_owed(&root, &ckpt, last), Owes::Both);
    std::fs::remove_file(root.join(&file[0])).unwrap();
    let changed = named_at(last, "proved_row_changed");
    names_for_good(&root, &ckpt, &json, &changed, "");
    // A proved conflict's second version given the first's hash.
    let (first, other) = second_version(&events, 3);
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let all: Vec<&Event> = events.iter().collect();
    deliver(&root, &all, "a");
    let second = write_rows(&root, std::slice::from_ref(&other));
    night_naming(&root, &ckpt, &json, &[], vec![named_at(&first, "conflict")]);
    let mut damaged = other.clone();
    damaged.hash = first.hash.clone();
    std::fs::write(root.join(&second[0]), &files_of(&[damaged])[0].bytes).unwrap();
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    let found = named_rows(&report);
    assert!(
        !found.iter().any(|f| f.0.starts_with("proved_")),
        "{found:?}"
    );
    assert_eq!(hash_owed(&root, &ckpt, &first), Owes::Both);
    std::fs::remove_file(root.join(&second[0])).unwrap();
    let changed = named_at(&first, "proved_row_changed");
    names_for_good(&root, &ckpt, &json, &changed, "");
}

/// Versions proved at a seq already owed (rev-s61-red6 O1): a proved tail
/// removed (owed since), then two new versions of it arrive (a conflict,
/// proved); those versions then leaving the lake, the first row put back,
/// is still the proved rows changed, every night (the tail owed since the
/// earlier night stood in for everything owed at its seq, and they went
/// unreported).
#[test]
fn versions_proved_at_an_owed_seq_are_owed_with_it() {
    let events = history(43, 4, 200);
    let [last, _] = newest_tails(&events);
    let (_dir, root, ckpt, json) = lake_without(&events, last);
    let first = write_rows(&root, std::slice::from_ref(last));
    night(&root, &ckpt);
    std::fs::remove_file(root.join(&first[0])).unwrap();
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    assert!(named_rows(&report).contains(&named_at(last, "proved_rows_missing")));
    let version = |ms: i64| {
        let mut v = last.clone();
        v.occurred_at_ms += ms;
        write_rows(&root, &[v.seal()])
    };
    let (two, three) = (version(1), version(2));
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    assert!(
        named_rows(&report).contains(&named_at(last, "conflict")),
        "{report}"
    );
    write_rows(&root, std::slice::from_ref(last));
    for key in two.iter().chain(&three) {
        std::fs::remove_file(root.join(key)).unwrap();
    }
    let changed = named_at(last, "proved_row_changed");
    names_for_good(&root, &ckpt, &json, &changed, "");
}

/// A proved row altered under its hash on the night the rows after it
/// were lost (rev-s61-diff 2): the checkpoint proved the stream past it,
/// and no row there hashes to its recorded hash, so that hash is owed; the
/// altered content resealed the night after is `proved_row_changed` there,
/// beside the rows still missing. And an altered copy that arrives beside
/// the intact row, on the night both are new (nothing proved there yet):
/// the intact row proves the hash, so the altered content resealed in
/// their place is the proved row changed.
#[test]
fn a_hash_proved_through_the_chain_or_beside_an_intact_row_stays_owed() {
    let events = history(43, 4, 200);
    let key = events
        .iter()
        .rev()
        .find(|e| e.stream == Stream::Account && e.seq > 8)
        .unwrap()
        .stream_key
        .clone();
    let of = |e: &&Event| e.stream == Stream::Account && e.stream_key == key;
    let k = 5;
    let row = events.iter().find(|e| of(e) && e.seq == k).unwrap();
    let after: Vec<Event> = events
        .iter()
        .filter(|e| of(e) && e.seq > k)
        .cloned()
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("night.json");
    let rest: Vec<&Event> = events.iter().filter(|e| !(of(e) && e.seq >= k)).collect();
    deliver(&root, &rest, "a");
    let alone = write_rows(&root, std::slice::from_ref(row));
    let later = write_rows(&root, &after);
    night(&root, &ckpt);
    for key in alone.iter().chain(&later) {
        std::fs::remove_file(root.join(key)).unwrap();
    }
    let mut altered = row.clone();
    altered.amount = altered.amount.map(|a| a + 1000);
    let forged = write_rows(&root, std::slice::from_ref(&altered));
    let (_, report) = cli_night(&root, &ckpt, &json, &[]);
    let found = named_rows(&report);
    assert!(found.contains(&named_at(row, "hash_mismatch")), "{found:?}");
    assert_eq!(hash_owed(&root, &ckpt, row), Owes::Recorded);
    for key in &forged {
        std::fs::remove_file(root.join(key)).unwrap();
    }
    write_rows(&root, &[altered.seal()]);
    let changed = named_at(row, "proved_row_changed");
    names_for_good(&root, &ckpt, &json, &changed, "");

    // The copy beside the intact row, both new.
    let last = after.last().unwrap();
    altered_copy_then_resealed(&events, last, false);
}

/// A finding that new rows of the lake resolve is withdrawn, not owed: a
/// gap filled by a late row reopens its stream, whose proof finds the gap
/// no more. A conflict of the same stream, both versions still in the lake,
/// is found again as it was (not as a version gone).
#[test]
fn a_gap_filled_by_a_late_row_is_withdrawn_while_a_conflict_still_in_the_lake_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let json = dir.path().join("report.json");
    let events = history(43, 4, 200);
    let (first, other) = second_version(&events, 3);
    let late = events
        .iter()
        .find(|e| e.stream == Stream::Account && e.stream_key == first.stream_key && e.seq == 5)
        .unwrap();
    let mut early: Vec<&Event> = events
        .iter()
        .filter(|e| e.event_id != late.event_id)
        .collect();
    early.push(&other);
    deliver(&root, &early, "a");
    let conflict = (
        "conflict".to_owned(),
        first.stream_key.clone(),
        3,
        first.event_id.clone(),
    );
    let gap = (
        "seq_gap".to_owned(),
        first.stream_key.clone(),
        5,
        late.event_id.clone(),
    );
    let (code, report) = cli_night(&root, &ckpt, &json, &[]);
    let found = named_rows(&report);
    assert_eq!(code, 1);
    assert!(
        found.contains(&conflict) && found.contains(&gap),
        "{found:?}"
    );
    deliver(&root, &[late], "b");
    let report = night_naming(&root, &ckpt, &json, &[], vec![conflict]);
    assert!(report["incremental"]["streams_reopened"].as_u64() > Some(0));
    assert_eq!(
        report["checks"],
        serde_json::to_value(&full(&root).checks).unwrap()
    );
}

/// The id of the first transfer of `events` that was captured.
fn first_captured(events: &[Event]) -> String {
    events
        .iter()
        .find(|e| e.stream == Stream::Transfer && e.kind == "captured")
        .unwrap()
        .stream_key
        .clone()
}

#[test]
fn a_stream_in_the_wrong_table_is_one_finding_however_many_nights_bring_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(43, 4, 200);
    let t = first_captured(&events);
    let (mine, others): (Vec<&Event>, Vec<&Event>) = events
        .iter()
        .partition(|e| e.stream == Stream::Transfer && e.stream_key == t);
    assert!(mine.len() >= 3, "{}", mine.len());
    deliver(&root, &others, "a");
    // A writer that puts a transfer's rows under events/account/.
    let misplace = |evs: &[&Event], tag: &str| {
        let elsewhere = dir.path().join(tag);
        deliver(&elsewhere, evs, tag);
        for key in common::files_under(&elsewhere, "events/transfer") {
            let bytes = std::fs::read(elsewhere.join(&key)).unwrap();
            let moved = key.replacen("events/transfer/", "events/account/", 1);
            write_object(&root, &moved, &bytes).unwrap();
        }
    };
    one_wrong_table_over_two_nights(&root, &ckpt, |night| match night {
        0 => misplace(&mine[..2], "m1"),
        _ => misplace(&mine[2..], "m2"),
    });
}

/// Two nights, each after `bring(night)` put rows of one stream in the
/// wrong table: the stream is one `wrong_table` finding on each night's
/// report (found on the first, kept by the second), as `--full` says.
fn one_wrong_table_over_two_nights(root: &Path, ckpt: &Path, mut bring: impl FnMut(usize)) {
    bring(0);
    let first = night(root, ckpt);
    bring(1);
    let second = night(root, ckpt);
    let wrong = |r: &Report| {
        r.checks[0]
            .findings
            .iter()
            .filter(|f| f.code == "wrong_table")
            .count()
    };
    assert_eq!(
        (wrong(&first), wrong(&second)),
        (1, 1),
        "{}",
        verdicts(&second)
    );
    assert_same(2, &second, &full(root));
}

#[test]
fn a_compaction_that_cuts_the_start_of_a_stream_is_caught_by_the_night() {
    let dir = tempfile::tempdir().unwrap();
    // The file holds every account's whole stream; one account's first two
    // rows go. The rows left still chain to the tail the checkpoint
    // proved, so they are copies of proved rows: only the stream's start,
    // noted with the file, tells that the output lacks rows.
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "account");
    let victim = rows[0].event.stream_key.clone();
    assert_eq!(rows[0].event.seq, 1);
    let cut: Vec<String> = rows
        .iter()
        .filter(|r| r.event.stream_key == victim && r.event.seq <= 2)
        .map(|r| r.event.event_id.clone())
        .collect();
    assert_eq!(cut.len(), 2);
    compact_dropping(&root, &input, |e| cut.contains(&e.event_id));
    let r = night(&root, &ckpt);
    let fresh = full(&root);
    assert!(
        !fresh.holds,
        "a proof of the lake alone sees the stream start at seq 3"
    );
    let i = r.incremental.unwrap();
    assert!(i.files_lost == 1 && i.reproved_in_full, "{i:?}");
    assert_same(1, &without_owed(&r), &fresh);
    assert!(
        r.checks[0]
            .findings
            .iter()
            .any(|f| f.key == victim && f.code == "seq_gap"),
        "{}",
        verdicts(&r)
    );
}

#[test]
fn a_compaction_that_drops_every_accounts_last_row_still_has_each_tail_judged() {
    let dir = tempfile::tempdir().unwrap();
    // The last row of every account goes (the file holds every account's
    // whole stream): the input is lost (its output holds fewer rows than
    // its stretches, `custody`), so the night proves the lake from its
    // first event, and must still name each tail it lost.
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "account");
    let mut last = std::collections::BTreeMap::<String, Event>::new();
    for r in &rows {
        last.insert(r.event.stream_key.clone(), r.event.clone());
    }
    assert!(last.len() >= 2, "{}", last.len());
    let ids: std::collections::HashSet<String> =
        last.values().map(|e| e.event_id.clone()).collect();
    let dropped = compact_dropping(&root, &input, |e| ids.contains(&e.event_id));
    assert_eq!(dropped.len(), last.len());
    let r = night(&root, &ckpt);
    let i = r.incremental.unwrap();
    assert!(i.reproved_in_full && i.files_lost == 1, "{i:?}");
    let want: Vec<_> = last
        .values()
        .map(|e| ("proved_rows_missing", e.stream_key.clone(), e.seq))
        .collect();
    assert_eq!(owed(&r), want, "{}", verdicts(&r));
    // The next night still owes them (the new checkpoint keeps them owed,
    // not the shortened tails as proved).
    assert_eq!(owed(&night(&root, &ckpt)), want);
}

/// rev-s56-pending 5: a proved row in the middle of a stream, in a file
/// then deleted. The night proves the lake from its first event and finds a
/// `seq_gap` there, pending while the row after it is young, as a row not
/// yet delivered would be; but the lost file's notes say the row was in the
/// lake, so it is not in delivery: `proved_rows_missing` there, decided
/// (the run exits 1), and owed until the file is back. The same when the
/// night of the loss is `--full` with the checkpoint (rev-s57-lost 5: it
/// looked for no lost file, and its new checkpoint forgot the notes).
#[test]
fn a_proved_row_in_the_middle_of_a_stream_lost_with_its_file_is_decided() {
    for full in [false, true] {
        a_proved_row_lost_in_the_middle(full);
    }
}

/// Options that judge `events` right after the last of them, every row in
/// the settle window.
fn young(events: &[Event]) -> Options {
    Options {
        now_ms: events.iter().map(|e| e.occurred_at_ms).max().unwrap() + 1_000,
        settle_ms: 86_400_000,
        ..opts()
    }
}

/// The lake files under `root` that are not in `before`.
fn new_files(root: &Path, before: &[String]) -> Vec<String> {
    common::files_under(root, "events")
        .into_iter()
        .filter(|k| !before.contains(k))
        .collect()
}

/// A lake under `dir` whose account stream `victim` has its seq 3 alone in
/// one file (`lost`, the key), and the options that judge it right after
/// its last event, every row in the settle window: (root, checkpoint path,
/// victim, lost, options).
fn a_row_alone_in_its_file(dir: &Path) -> (PathBuf, PathBuf, String, String, Options) {
    let (root, ckpt) = (dir.join("lake"), dir.join("checkpoint"));
    let events = history(5, 3, 40);
    let victim = events
        .iter()
        .find(|e| e.stream == Stream::Account && e.seq == 4)
        .map(|e| e.stream_key.clone())
        .unwrap();
    let is_lost = |e: &&Event| e.stream_key == victim && e.seq == 3;
    let (alone, rest): (Vec<&Event>, Vec<&Event>) = events.iter().partition(is_lost);
    deliver(&root, &rest, "a");
    let before = common::files_under(&root, "events");
    deliver(&root, &alone, "b");
    let mut lost = new_files(&root, &before);
    assert_eq!(lost.len(), 1, "{lost:?}");
    (root, ckpt, victim, lost.remove(0), young(&events))
}

fn a_proved_row_lost_in_the_middle(full: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, victim, lost, young) = a_row_alone_in_its_file(dir.path());
    let lost = [lost];
    let first = night_with(&root, &ckpt, &young);
    assert!(first.holds && first.pending == 0, "{}", verdicts(&first));
    let bytes = std::fs::read(root.join(&lost[0])).unwrap();
    std::fs::remove_file(root.join(&lost[0])).unwrap();

    let r = if full {
        full_night_with(&root, &ckpt, &young)
    } else {
        night_with(&root, &ckpt, &young)
    };
    let i = r.incremental.unwrap();
    assert!(
        i.files_lost == 1 && i.reproved_in_full != full && i.full == full,
        "{full}: {i:?}"
    );
    // A proof of the lake alone: the gap, pending (exit 0).
    let fresh = full_with(&root, &young);
    assert!(fresh.holds && fresh.pending > 0, "{}", verdicts(&fresh));
    assert!(fresh.checks[0]
        .pending
        .iter()
        .any(|f| (f.code, f.key.as_str(), f.seq) == ("seq_gap", victim.as_str(), Some(3))));
    assert_same(1, &without_owed(&r), &fresh);
    // The night: the row was proved, so the loss is decided.
    let want = vec![("proved_rows_missing", victim.clone(), 3)];
    assert_eq!(owed(&r), want, "{}", verdicts(&r));
    assert!(!r.holds && !r.checks[0].holds, "{}", verdicts(&r));
    let f = &r.checks[0].findings[0];
    assert!(
        f.youngest_ms.is_none() && f.detail.contains("proved evidence left the lake"),
        "{f:?}"
    );
    // The next night (nothing lost any more) still owes it.
    let next = night_with(&root, &ckpt, &young);
    assert_eq!(next.incremental.unwrap().files_lost, 0);
    assert_eq!(owed(&next), want, "{}", verdicts(&next));
    assert!(!next.holds);
    // The file back: the row is there, nothing is owed, the lake holds.
    std::fs::write(root.join(&lost[0]), &bytes).unwrap();
    let back = night_with(&root, &ckpt, &young);
    assert!(back.holds && back.pending == 0, "{}", verdicts(&back));
    assert_eq!(owed(&back), vec![]);
}

/// rev-s57-lost 6: a lost file whose rows of a stream start with an
/// invalid row at seq 0 before seqs 1 to 3. Seq 0 is no row of the chain,
/// so the file's stretch of the stream is noted from seq 1: the night of
/// the loss names the gap from 1 as rows the lake held, decided (exit 1),
/// where the stretch noted at seq 0 (no gap holds 0) left only the gap,
/// pending (exit 0).
#[test]
fn a_lost_files_rows_after_a_seq_0_row_are_decided() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(5, 3, 40);
    let victim = events
        .iter()
        .find(|e| e.stream == Stream::Account && e.seq == 5)
        .map(|e| e.stream_key.clone())
        .unwrap();
    let is_lost = |e: &&Event| e.stream_key == victim && e.seq <= 3;
    let (alone, rest): (Vec<&Event>, Vec<&Event>) = events.iter().partition(is_lost);
    deliver(&root, &rest, "a");
    let before = common::files_under(&root, "events");
    // The lost file: an invalid copy of seq 1 at seq 0, then seqs 1 to 3.
    let mut zero = alone[0].clone();
    (zero.seq, zero.event_id) = (0, format!("account:{victim}:0"));
    let rows: Vec<ledger_ingest::Row> = std::iter::once(zero)
        .chain(alone.iter().map(|e| (*e).clone()))
        .map(|event| ledger_ingest::Row {
            event,
            conflict: false,
        })
        .collect();
    for f in ledger_ingest::build_files(rows, ledger_ingest::FileLayer::Ingest).unwrap() {
        write_object(&root, &f.key, &f.bytes).unwrap();
    }
    let lost = new_files(&root, &before);
    assert_eq!(lost.len(), 1, "{lost:?}");
    let young = young(&events);
    let first = night_with(&root, &ckpt, &young);
    assert!(
        first.checks[0]
            .findings
            .iter()
            .any(|f| f.code == "invalid_event")
            && first.pending == 0,
        "{}",
        verdicts(&first)
    );
    std::fs::remove_file(root.join(&lost[0])).unwrap();
    let r = night_with(&root, &ckpt, &young);
    assert_eq!(r.incremental.as_ref().unwrap().files_lost, 1);
    assert!(
        owed(&r).contains(&("proved_rows_missing", victim.clone(), 1)),
        "{}",
        verdicts(&r)
    );
    assert!(!r.holds && !r.checks[0].holds, "{}", verdicts(&r));
}

/// Damages a byte of the first set of every checkpoint file of streams
/// (`.prs`) in `dir`, leaving its index, at the end, readable: a set reads
/// as damaged only when it is read.
fn damage_notes(dir: &Path) {
    let mut damaged = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "prs") {
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[16] ^= 0xff;
            std::fs::write(&path, bytes).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0, "no file of streams in {}", dir.display());
}

/// `--full` is the remedy for a damaged checkpoint: on the night of a loss,
/// a file of its notes that does not read leaves the lost files' rows
/// unjudged, said in `not_judged`, and the proof goes on (the gap a proof
/// of the lake alone finds, pending); a resumed run stops on it (exit 2).
#[test]
fn a_full_run_past_damaged_notes_leaves_the_lost_rows_unjudged() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, victim, lost, young) = a_row_alone_in_its_file(dir.path());
    assert!(night_with(&root, &ckpt, &young).holds);
    std::fs::remove_file(root.join(&lost)).unwrap();
    let removed = [lost];
    let name = root.to_str().unwrap();
    // The lake's own error (a manifest of the lost file's partition that
    // cannot be read: a store's 403 or 5xx) is no damaged checkpoint: both
    // stop (exit 2), or the loss would pass for unjudged and, the new
    // checkpoint written, be forgotten (rev-s58-full 1).
    let (table, date) = {
        let parts: Vec<&str> = removed[0].split('/').collect();
        (parts[1].to_owned(), parts[2].to_owned())
    };
    let manifests = root.join("manifests").join(&table).join(&date);
    std::fs::create_dir_all(&manifests).unwrap();
    let unreadable = manifests.join(format!("m-{}.json", "0".repeat(31) + "1"));
    std::os::unix::fs::symlink("/proc/1/mem", &unreadable).unwrap();
    let (resumed, full) = runtime().block_on(async {
        let lake = Lake::open(name).unwrap();
        let resumed = reconcile_from(&lake, &young, Some(ProofState::load(&ckpt, name).unwrap()));
        let resumed = resumed.await.map(|(r, _)| r);
        let prior = ProofState::load_for_full(&ckpt, name).unwrap();
        let full = ledger_reconcile::reconcile_full_owing(&lake, &young, prior).await;
        (resumed, full.map(|(r, _)| r))
    });
    let said = |r: Result<Report, ledger_reconcile::Error>| match r {
        Err(e) => e.to_string(),
        Ok(r) => panic!("a verdict past an unreadable manifest: {}", verdicts(&r)),
    };
    for (what, e) in [("resumed", said(resumed)), ("--full", said(full))] {
        assert!(e.contains("m-0000"), "{what}: {e}");
    }
    std::fs::remove_file(&unreadable).unwrap();
    damage_notes(dir.path());
    let resumed = runtime().block_on(async {
        let lake = Lake::open(name).unwrap();
        let prior = ProofState::load(&ckpt, name).unwrap();
        reconcile_from(&lake, &young, Some(prior)).await
    });
    assert!(resumed.is_err(), "a resumed run judges nothing past damage");
    let r = full_night_with(&root, &ckpt, &young);
    assert_eq!(r.incremental.unwrap().files_lost, 1);
    assert!(
        r.not_judged
            .iter()
            .any(|w| w.starts_with("the rows of the lost files the checkpoint noted: ")),
        "{:?}",
        r.not_judged
    );
    assert_eq!(owed(&r), vec![]);
    assert!(r.holds && r.pending > 0, "{}", verdicts(&r));
    assert!(r.checks[0]
        .pending
        .iter()
        .any(|f| (f.code, f.key.as_str(), f.seq) == ("seq_gap", victim.as_str(), Some(3))));
}

/// `--full` past a compacted lake whose checkpoint's notes do not read:
/// which versions compaction replaced is still known (the manifests), and
/// that the files that replaced them hold every row is said not judged; a
/// resumed run stops on it (exit 2).
#[test]
fn a_full_run_past_damaged_notes_of_replaced_files_says_what_it_did_not_judge() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(7, 3, 60);
    let all: Vec<&Event> = events.iter().collect();
    let half = all.len() / 2;
    deliver(&root, &all[..half], "a");
    deliver(&root, &all[half..], "b");
    assert!(night(&root, &ckpt).holds);
    for outcome in compact_each(&root, ledger_compact::StopAt::Never) {
        outcome.unwrap();
    }
    damage_notes(dir.path());
    let name = root.to_str().unwrap();
    let resumed = runtime().block_on(async {
        let lake = Lake::open(name).unwrap();
        let prior = ProofState::load(&ckpt, name).unwrap();
        reconcile_from(&lake, &opts(), Some(prior)).await
    });
    match resumed {
        Err(e) => assert!(e.to_string().contains(".prs"), "{e}"),
        Ok((r, _)) => panic!("a resumed run past damaged notes: {}", verdicts(&r)),
    }
    let r = full_night_with(&root, &ckpt, &opts());
    let i = r.incremental.unwrap();
    assert!(i.files_gone > 0 && i.files_lost == 0 && i.full, "{i:?}");
    assert!(
        r.not_judged.iter().any(|w| w.starts_with(&format!(
            "the checkpoint's notes of the {} file version(s) compaction replaced: ",
            i.files_gone
        ))),
        "{:?}",
        r.not_judged
    );
    assert!(r.holds, "{}", verdicts(&r));
}

/// A compaction that dropped rows is found lost whatever else the night
/// lost: a proved file deleted besides (another table's) used to make
/// custody skip the replaced versions' stretches, so the dropped rows were
/// pending gaps instead of decided, and the compaction never judged
/// (rev-s58-fixes 1).
#[test]
fn a_lying_compaction_is_lost_beside_another_lost_file() {
    let night_after = |delete_another: bool| {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, input, rows) = proved_lake(dir.path(), "account");
        // The first row of each stream the file holds more of: a gap after
        // the compaction, not a tail.
        let mut first: std::collections::BTreeMap<&str, (u64, usize)> = Default::default();
        for r in &rows {
            let e = first.entry(&r.event.stream_key).or_insert((u64::MAX, 0));
            *e = (e.0.min(r.event.seq), e.1 + 1);
        }
        let starts: std::collections::HashSet<(String, u64)> = first
            .iter()
            .filter(|(_, (_, n))| *n > 1)
            .map(|(k, (s, _))| ((*k).to_owned(), *s))
            .collect();
        assert!(!starts.is_empty());
        let dropped = compact_dropping(&root, &input, |e| {
            starts.contains(&(e.stream_key.clone(), e.seq))
        });
        assert_eq!(dropped.len(), starts.len());
        if delete_another {
            let other = common::files_under(&root, "events/transfer").remove(0);
            std::fs::remove_file(root.join(other)).unwrap();
        }
        let r = night(&root, &ckpt);
        let mut missing: Vec<(String, u64)> = owed(&r)
            .into_iter()
            .filter(|o| o.0 == "proved_rows_missing")
            .map(|o| (o.1, o.2))
            .collect();
        missing.sort();
        (r.incremental.unwrap().files_lost, missing, starts)
    };
    let (alone, alone_missing, starts) = night_after(false);
    assert_eq!(alone, 1);
    let mut want: Vec<(String, u64)> = starts.into_iter().collect();
    want.sort();
    assert_eq!(alone_missing, want);
    let (both, both_missing, _) = night_after(true);
    assert_eq!(both, 2, "the compaction and the deleted file");
    assert!(
        want.iter().all(|w| both_missing.contains(w)),
        "{want:?} ⊄ {both_missing:?}"
    );
}

/// rev-s57-lost 1–3: what a lost file's notes cannot speak for decides
/// nothing. Each case a lake whose night after the loss holds a gap that a
/// proof of the lake alone leaves pending; the night must not call any of
/// it a proved row gone.
#[test]
fn a_lost_files_notes_decide_no_gap_they_cannot_speak_for() {
    // The night after `lose` removed files: it found them lost and owes
    // nothing at `seq` of `key` (`what` for the messages).
    let judged = |root: &Path, ckpt: &Path, opts: &Options, key: &str, seq: u64, what: &str| {
        let r = night_with(root, ckpt, opts);
        let i = r.incremental.unwrap();
        assert!(i.files_lost > 0 && i.reproved_in_full, "{what}: {i:?}");
        let fresh = full_with(root, opts);
        assert!(
            fresh.checks[0]
                .pending
                .iter()
                .any(|f| f.code == "seq_gap" && f.key == key),
            "{what}: {}",
            verdicts(&fresh)
        );
        assert_same(1, &without_owed(&r), &fresh);
        let owed = owed(&r);
        assert!(
            !owed
                .iter()
                .any(|o| o.1 == key && (o.2 == seq || o.0 == "proved_rows_missing" && o.2 > 1)),
            "{what}: {owed:?}"
        );
    };

    // Rows written as lake files as they are (none checked).
    let write_rows = |root: &Path, events: &[Event]| {
        for f in files_of(events) {
            write_object(root, &f.key, &f.bytes).unwrap();
        }
    };
    let events = history(5, 3, 40);
    let opts = young(&events);
    let all: Vec<&Event> = events.iter().collect();
    let last = events
        .iter()
        .filter(|e| e.stream == Stream::Account)
        .max_by_key(|e| e.seq)
        .unwrap();
    let mut far = last.clone();
    far.seq = 1 << 62;
    far.event_id = ledger_events::event_id(Stream::Account, &far.stream_key, far.seq);
    let far = far.seal();
    // 1. A file of copies only is lost, and a row forged far ahead of an
    // account's last leaves a gap up to it: no stretch starts there (one
    // matched note by note over the gap found seqs at random). 1b. The same
    // far row, already in the lake when the checkpoint proved the stream:
    // its proved tail is the far row, and the checkpoint's own gap up to it
    // held no row (rev-s57-diff 1).
    for (far_first, what) in [(false, "a forged far row"), (true, "a far row proved")] {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
        deliver(&root, &all, "a");
        let before = common::files_under(&root, "events");
        deliver(&root, &all[..25], "copies");
        let copies = new_files(&root, &before);
        if far_first {
            write_rows(&root, std::slice::from_ref(&far));
        }
        let first = night_with(&root, &ckpt, &opts);
        assert!(far_first || first.holds, "{}", verdicts(&first));
        for k in &copies {
            std::fs::remove_file(root.join(k)).unwrap();
        }
        if !far_first {
            write_rows(&root, std::slice::from_ref(&far));
        }
        judged(&root, &ckpt, &opts, &far.stream_key, last.seq + 1, what);
    }

    // 2. A row that is not the ledger's (it fails its hash) alone in its
    // file, which is then moved out: the ledger's row at that seq may
    // still be in delivery.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let at = |e: &&Event| e.stream == Stream::Account && e.seq == 4;
    let victim = events.iter().find(at).unwrap();
    let rest: Vec<&Event> = events.iter().filter(|e| !at(e)).collect();
    deliver(&root, &rest, "a");
    let mut bad = victim.clone();
    bad.occurred_at_ms += 1; // not resealed
    let before = common::files_under(&root, "events");
    write_rows(&root, &[bad]);
    let first = night_with(&root, &ckpt, &opts);
    assert!(
        first.checks[0]
            .findings
            .iter()
            .any(|f| f.code == "hash_mismatch" && f.seq == Some(4)),
        "{}",
        verdicts(&first)
    );
    for k in new_files(&root, &before) {
        std::fs::remove_file(root.join(k)).unwrap();
    }
    judged(
        &root,
        &ckpt,
        &opts,
        &victim.stream_key,
        4,
        "a row not the ledger's",
    );

    // 3. A transfer's row misfiled under events/account/, its file then
    // deleted: the transfer table's stream never held it.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(43, 4, 200);
    let t = first_captured(&events);
    let opts = young(&events);
    let is_misfiled = |e: &&Event| e.stream == Stream::Transfer && e.stream_key == t && e.seq == 2;
    let misfiled: Vec<Event> = events.iter().filter(is_misfiled).cloned().collect();
    let rest: Vec<&Event> = events.iter().filter(|e| !is_misfiled(e)).collect();
    deliver(&root, &rest, "a");
    let before = common::files_under(&root, "events");
    write_in_table(&root, &misfiled, "account");
    let misplaced = new_files(&root, &before);
    let first = night_with(&root, &ckpt, &opts);
    assert!(
        first.checks[0]
            .findings
            .iter()
            .any(|f| f.code == "wrong_table" && f.key == t),
        "{}",
        verdicts(&first)
    );
    for k in misplaced {
        std::fs::remove_file(root.join(k)).unwrap();
    }
    judged(&root, &ckpt, &opts, &t, 2, "a misfiled row");
}

#[test]
fn a_damaged_streams_file_stops_the_night_that_needs_it_and_full_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, input, _) = proved_lake(dir.path(), "transfer");
    let ck = ckpt.to_str().unwrap();
    let streams = [only_file(dir.path(), "prs")];
    let good = std::fs::read(&streams[0]).unwrap();
    // A byte of the first lake file's set (an account file's: the sets are
    // in key order after a 12-byte header).
    let mut bytes = good.clone();
    bytes[20] ^= 1;
    std::fs::write(&streams[0], &bytes).unwrap();
    // A night with nothing gone does not read it.
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
    // An honest compaction of a transfer file: the night reads that file's
    // set, which is whole, and merges the streams file with its own small
    // one, which reads every set: refused, and nothing is written.
    assert!(compact_dropping(&root, &input, |_| false).is_empty());
    let before = std::fs::read(&ckpt).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("streams file") && err.contains("SHA-256") && err.contains("--full"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ckpt).unwrap(), before);
    // The index damaged instead (its last byte, before the 56-byte
    // footer): the night cannot find the replaced file's set.
    let mut bytes = good.clone();
    let last = bytes.len() - 57;
    bytes[last] ^= 1;
    std::fs::write(&streams[0], &bytes).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("streams file") && err.contains("index's SHA-256") && err.contains("--full"),
        "{err}"
    );
    let (code, err) = cli(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !streams[0].exists(),
        "the damaged file is no longer named, so it is gone"
    );
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
    // A file of streams missing is found when the checkpoint is opened, by
    // a night that would not read it (rev-s48-incremental L3: nights passed
    // and wrote checkpoints naming it until one needed it).
    let now = only_file(dir.path(), "prs");
    std::fs::remove_file(&now).unwrap();
    let before = std::fs::read(&ckpt).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("streams file") && err.contains("--full"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ckpt).unwrap(), before, "nothing written");
    assert_eq!(cli(&root, &["--checkpoint", ck, "--full"]).0, 0);
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
}

/// A damaged block of the entry store: the night whose postings read it
/// stops (exit 2, naming the file, nothing written); `--full`, which reads
/// no entry ids, rebuilds the store, and the nights go on.
#[test]
fn a_damaged_entry_store_block_stops_the_night_that_reads_it_and_full_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, events, half) = first_half_proved(dir.path(), 53, 160);
    let ck = ckpt.to_str().unwrap();
    let stores = [only_file(dir.path(), "ent")];
    let name = stores[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut bytes = std::fs::read(&stores[0]).unwrap();
    bytes[20] ^= 1; // the first block's filter
    std::fs::write(&stores[0], &bytes).unwrap();
    let later: Vec<&Event> = events[half..].iter().collect();
    assert!(later.iter().any(|e| e.kind == "deposited"));
    deliver(&root, &later, "b");
    let before = std::fs::read(&ckpt).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("entry store")
            && err.contains(&name)
            && err.contains("SHA-256")
            && err.contains("--full"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ckpt).unwrap(), before, "nothing written");
    let (code, err) = cli(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !stores[0].exists(),
        "the damaged segment is no longer named"
    );
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
}

/// A damaged block of the checkpoint's archive, walked by a night that
/// proves the lake in full because a proved file was lost: the night stops
/// (exit 2, naming the block and the remedy) rather than drop the tails of
/// the transfers settled there with a warning; `--full`, the explicit
/// remedy, warns of them and rebuilds the checkpoint.
#[test]
fn a_damaged_archive_block_stops_a_night_that_proves_in_full_until_full_is_run() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, input, _) = proved_lake(dir.path(), "transfer");
    let ck = ckpt.to_str().unwrap();
    let segment = only_file(dir.path(), "seg");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[20] ^= 1; // inside the first block
    std::fs::write(&segment, &bytes).unwrap();
    std::fs::remove_file(root.join(&input)).unwrap();
    let before = std::fs::read(&ckpt).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("archive") && err.contains("block 0") && err.contains("--full"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ckpt).unwrap(), before, "nothing written");
    let (code, listed, metric, lines) = not_judged(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 1, "the lost file's tails are owed: {lines:?}");
    assert!(
        listed.len() == 1 && listed[0].contains("block") && metric == "1",
        "{listed:?} {metric}"
    );
    assert!(!segment.exists(), "the new checkpoint does not name it");
    assert_eq!(
        cli(&root, &["--checkpoint", ck]).0,
        1,
        "the tails are still owed"
    );
}

/// A damaged block of the checkpoint's archive: `--full`, the remedy its
/// help names, warns of it and rebuilds the checkpoint (it once failed
/// too, walking the archive for the tails the lake owes, which left no
/// way out but deleting the checkpoint).
#[test]
fn a_damaged_archive_block_is_warned_of_by_full_which_rebuilds_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, _, _) = proved_lake(dir.path(), "transfer");
    let ck = ckpt.to_str().unwrap();
    let segments = [only_file(dir.path(), "seg")];
    let good = std::fs::read(&segments[0]).unwrap();
    let mut bytes = good.clone();
    bytes[20] ^= 1; // inside the first block
    std::fs::write(&segments[0], &bytes).unwrap();
    // A night that reads no archived transfer does not notice (documented).
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
    let spare = dir.path().join("spare");
    std::fs::copy(&ckpt, &spare).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: checkpoint archive")
            && err.contains("damaged")
            && err.contains("rebuilt"),
        "{err}"
    );
    // The report, the metrics and the summary say so too: the verdict
    // covers the lake as read, not what the block's transfers were.
    std::fs::copy(&spare, &ckpt).unwrap();
    std::fs::write(&segments[0], &bytes).unwrap();
    let (code, listed, metric, lines) = not_judged(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0);
    assert!(
        listed.len() == 1 && listed[0].contains("block") && metric == "1",
        "{listed:?} {metric}"
    );
    assert!(
        lines.len() == 2
            && lines[0].contains("NOT JUDGED")
            && lines[1].contains("every invariant holds")
            && lines[1].contains("1 part(s) of an earlier checkpoint's proof not judged"),
        "{lines:?}"
    );
    // The lake settles the same transfers again: the same segment, whole
    // (its name is its index's digest).
    assert_eq!(std::fs::read(&segments[0]).unwrap(), good);
    let (code, listed, metric, lines) = not_judged(&root, &["--checkpoint", ck, "--full"]);
    assert!(
        code == 0 && listed.is_empty() && metric == "0" && lines.len() == 1,
        "{listed:?} {metric} {lines:?}"
    );
    assert_eq!(lines[0], "verdict: every invariant holds");
    let (code, err) = cli(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    // The segment gone: a night cannot read the checkpoint (exit 2, naming
    // --full); --full keeps the rest of it (every stream's tail, every
    // tail owed), warns of the segment, and rebuilds it.
    std::fs::remove_file(&segments[0]).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--full"), "{err}");
    std::fs::copy(&ckpt, &spare).unwrap();
    let (code, listed, metric, _) = not_judged(&root, &["--checkpoint", ck, "--full"]);
    assert!(
        code == 0 && listed.len() == 1 && listed[0].contains("segment") && metric == "1",
        "{listed:?} {metric}"
    );
    std::fs::copy(&spare, &ckpt).unwrap();
    std::fs::remove_file(&segments[0]).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: checkpoint archive")
            && err.contains("not judged")
            && !err.contains("does not judge whether the lake still holds"),
        "the checkpoint's own file is still judged: {err}"
    );
    assert_eq!(std::fs::read(&segments[0]).unwrap(), good);
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
}

#[test]
fn a_compaction_that_drops_every_row_of_a_transfer_loses_its_input_and_the_tail_is_owed() {
    let dir = tempfile::tempdir().unwrap();
    // Every row of one transfer in its first partition goes: nothing of it
    // is left there to be found as a copy, so nothing is reopened.
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "transfer");
    let victim = rows[0].event.stream_key.clone();
    let dropped = compact_dropping(&root, &input, |e| e.stream_key == victim);
    let tail = dropped.iter().map(|e| e.seq).max().unwrap();
    // The partition no longer holds a stream the checkpoint saw there: the
    // input is lost, the night proves the lake from its first event and
    // judges every tail the checkpoint proved.
    let r = night(&root, &ckpt);
    let i = r.incremental.unwrap();
    assert!(i.files_lost == 1 && i.reproved_in_full, "{i:?}");
    assert!(!r.holds);
    assert!(
        owed(&r).contains(&("proved_rows_missing", victim.clone(), tail))
            || owed(&r).contains(&("proved_rows_missing", victim.clone(), 1)),
        "{}",
        verdicts(&r)
    );
    // The next night owes it still, and does not prove in full again.
    let r = night(&root, &ckpt);
    let i = r.incremental.unwrap();
    assert!(i.files_lost == 0 && !i.reproved_in_full, "{i:?}");
    assert!(
        !r.holds && owed(&r).iter().any(|o| o.1 == victim),
        "{}",
        verdicts(&r)
    );
}

/// The checkpoint at `ckpt` and its files of streams rewritten as version 8
/// wrote them: each file in the first layout (`LDGRPRES`, 1, then per lake
/// file its key and fingerprints, then the SHA-256 of all of it, the name
/// and the reference's `sha256` from that digest); sealed again.
fn downgrade_to_8(ckpt: &Path) {
    use sha2::{Digest, Sha256};
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let dir = ckpt.parent().unwrap();
    let mut header = current_header(ckpt);
    header["version"] = 8.into();
    strip_13(&mut header);
    header.as_object_mut().unwrap().remove("entry_key");
    let lake = std::path::PathBuf::from(header["lake"].as_str().unwrap());
    for r in header["streams_files"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("starts");
        let mut fingerprints = 0u64;
        let path = dir.join(r["file"].as_str().unwrap());
        let v2 = std::fs::read(&path).unwrap();
        // The footer names the index; the index each set's place.
        let (at, n) = (
            u64_at(&v2, v2.len() - 56) as usize,
            u64_at(&v2, v2.len() - 48) as usize,
        );
        let index = &v2[at..at + n];
        let mut v1 = b"LDGRPRES".to_vec();
        v1.extend(1u32.to_le_bytes());
        v1.extend(&index[..8]);
        let mut pos = 8;
        for _ in 0..u64_at(index, 0) {
            let k = u32::from_le_bytes(index[pos..pos + 4].try_into().unwrap()) as usize;
            let key = &index[pos..pos + 4 + k];
            // Version 8 noted the streams alone (no seq).
            let fps = plain_streams(&lake, std::str::from_utf8(&key[4..]).unwrap());
            v1.extend(key);
            v1.extend((fps.len() as u64).to_le_bytes());
            for fp in &fps {
                v1.extend(fp.to_le_bytes());
            }
            fingerprints += fps.len() as u64;
            pos += 4 + k + 8 + 8 + 32;
        }
        r["fingerprints"] = fingerprints.into();
        let digest = Sha256::digest(&v1);
        v1.extend(digest);
        let sha = digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        let name = format!("checkpoint.{}.prs", &sha[..16]);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.join(&name), &v1).unwrap();
        r["file"] = name.into();
        r["sha256"] = sha.into();
    }
    reseal(ckpt, 8, &serde_json::to_vec(&header).unwrap());
}

/// The fingerprints of the streams with a row in the lake file `key` under
/// `lake`, sorted: a set of a file of streams before checkpoint version 11.
fn plain_streams(lake: &Path, key: &str) -> Vec<u64> {
    let fps: std::collections::BTreeSet<u64> = rows_of(lake, key)
        .iter()
        .map(|r| ledger_reconcile::presence::fingerprint(r.event.stream, &r.event.stream_key))
        .collect();
    fps.into_iter().collect()
}

/// Writes the checkpoint at `ckpt` again as format `version` with the JSON
/// header `json`, the records as that version wrote them (before version
/// 14, an open transfer's without the reason its `released` repeats),
/// sealed with its SHA-256.
fn reseal(ckpt: &Path, version: u32, json: &[u8]) {
    reseal_with(ckpt, version, json, &[]);
}

/// The JSON header of the checkpoint at `ckpt`.
fn checkpoint_header(ckpt: &Path) -> serde_json::Value {
    let bytes = std::fs::read(ckpt).unwrap();
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[20..20 + len]).unwrap()
}

/// The checkpoint at `ckpt`, which this build wrote (version 22),
/// rewritten as version 21 wrote it: the same state, every stream but a
/// transfer's in the JSON header instead of the binary part's last section;
/// returns that header. The older versions' downgrades start from it.
fn current_header(ckpt: &Path) -> serde_json::Value {
    let mut header = checkpoint_header(ckpt);
    assert_eq!(header["version"], 22);
    let bytes = std::fs::read(ckpt).unwrap();
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    let body = &bytes[20 + len..bytes.len() - 32];
    let mut r = ledger_reconcile::codec::Reader::new(body, usize::MAX);
    for _ in 0..r.count().unwrap() {
        r.open_transfer(true).unwrap();
    }
    for _ in 0..r.count().unwrap() {
        r.legs().unwrap();
    }
    let at = r.position();
    let mut streams = Vec::new();
    for _ in 0..r.count().unwrap() {
        let ((table, stream, key), st, since) = r.stream().unwrap();
        let mut rec = serde_json::json!({
            "table": table.as_str(),
            "stream": stream,
            "key": key,
            "tail": st.tail,
            "account": st.account,
        });
        if let Some(since) = since {
            rec["entries_since"] = since.into();
        }
        streams.push(rec);
    }
    assert!(r.at_end());
    assert!(header.get("streams").is_none(), "{header}");
    header["version"] = 21.into();
    header["streams"] = streams.into();
    let json = serde_json::to_vec(&header).unwrap();
    // The file as version 21 wrote it: that header, the body without its
    // streams.
    use sha2::{Digest, Sha256};
    let mut v21 = bytes[..8].to_vec();
    v21.extend(21u32.to_le_bytes());
    v21.extend((json.len() as u64).to_le_bytes());
    v21.extend(&json);
    v21.extend(&body[..at]);
    let digest = Sha256::digest(&v21);
    v21.extend(digest);
    std::fs::write(ckpt, v21).unwrap();
    header
}

/// [`reseal`], with `extra` after the body (a section the format had).
fn reseal_with(ckpt: &Path, version: u32, json: &[u8], extra: &[u8]) {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(ckpt).unwrap();
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    let mut older = bytes[..8].to_vec();
    older.extend(version.to_le_bytes());
    older.extend((json.len() as u64).to_le_bytes());
    older.extend(json);
    let mut body = bytes[20 + len..bytes.len() - 32].to_vec();
    if version < 14 {
        let mut r = ledger_reconcile::codec::Reader::new(&body, usize::MAX);
        let mut w = ledger_reconcile::codec::Writer::default();
        let n = r.count().unwrap();
        w.count(n);
        for _ in 0..n {
            let (id, s) = r.open_transfer(true).unwrap();
            w.transfer(&id, &s);
        }
        let legs = r.position();
        for _ in 0..r.count().unwrap() {
            r.legs().unwrap();
        }
        assert!(r.at_end());
        w.buf.extend_from_slice(&body[legs..]);
        body = w.buf;
    }
    older.extend(body);
    older.extend(extra);
    let digest = Sha256::digest(&older);
    older.extend(digest);
    std::fs::write(ckpt, older).unwrap();
}

#[test]
fn a_version_8_checkpoint_reads_its_first_layout_streams_files_and_writes_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, input, rows) = proved_lake(dir.path(), "transfer");
    downgrade_to_8(&ckpt);
    let prs = || -> Vec<Vec<u8>> {
        let mut v: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "prs"))
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        v.sort();
        v
    };
    assert!(prs().iter().all(|b| b[8..12] == 1u32.to_le_bytes()));
    // As in the test before: a compaction drops every row of a transfer.
    // The night reads the first-layout file's set of the input and finds
    // the transfer missing from the output.
    let victim = rows[0].event.stream_key.clone();
    compact_dropping(&root, &input, |e| e.stream_key == victim);
    let r = night(&root, &ckpt);
    let i = r.incremental.unwrap();
    assert!(i.files_lost == 1 && i.reproved_in_full, "{i:?}");
    assert!(owed(&r).iter().any(|o| o.1 == victim), "{}", verdicts(&r));
    // The night's full proof wrote a current checkpoint and files of the
    // current layout only.
    let bytes = std::fs::read(&ckpt).unwrap();
    assert_eq!(
        bytes[8..12],
        ledger_reconcile::checkpoint::CHECKPOINT_VERSION.to_le_bytes()
    );
    let files = prs();
    assert!(!files.is_empty());
    assert!(files
        .iter()
        .all(|b| b[8..12] == 3u32.to_le_bytes() && b.ends_with(b"LDGRPRS3")));
}

/// A history of `operations` on 4 accounts (`seed`) cut where no saga is
/// in flight, its first half delivered and proved by a night (a lake and a
/// checkpoint in `dir`); returns the lake, the checkpoint, the history and
/// where it was cut.
fn first_half_proved(
    dir: &Path,
    seed: u64,
    operations: usize,
) -> (std::path::PathBuf, std::path::PathBuf, Vec<Event>, usize) {
    let (root, ckpt) = (dir.join("lake"), dir.join("checkpoint"));
    let events = history(seed, 4, operations);
    let half = quiet_cut(&events, events.len() / 2);
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    assert!(night(&root, &ckpt).holds);
    (root, ckpt, events, half)
}

#[test]
fn a_compaction_that_drops_an_accounts_rows_from_one_file_of_a_day_is_a_gap_the_night_finds() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, events, half) = first_half_proved(dir.path(), 43, 200);
    let first = common::files_under(&root, "events/account");
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
    assert!(night(&root, &ckpt).holds);
    // Every row of one account goes from the first night's file of a
    // date, while the second night's file of that date keeps its later
    // rows: the date still holds the stream, the output does not.
    let second: Vec<String> = common::files_under(&root, "events/account")
        .into_iter()
        .filter(|k| !first.contains(k))
        .collect();
    let keys_of = |key: &str| -> Vec<String> {
        rows_of(&root, key)
            .into_iter()
            .map(|r| r.event.stream_key)
            .collect()
    };
    let (input, victim) = first
        .iter()
        .find_map(|f| {
            let dir = f.rsplit_once('/').unwrap().0;
            let later: Vec<String> = second
                .iter()
                .filter(|s| s.starts_with(dir))
                .flat_map(|s| keys_of(s))
                .collect();
            let victim = keys_of(f).into_iter().find(|k| later.contains(k))?;
            Some((f.clone(), victim))
        })
        .expect("an account with rows in both nights' files of a date");
    let dropped = compact_dropping(&root, &input, |e| e.stream_key == victim);
    let r = night(&root, &ckpt);
    let i = r.incremental.unwrap();
    assert!(i.files_lost == 1 && i.reproved_in_full, "{i:?}");
    // The account's history now misses the rows dropped: the night finds
    // what a proof of the lake alone finds.
    let missing: Vec<u64> = dropped.iter().map(|e| e.seq).collect();
    assert!(
        r.checks[0].findings.iter().any(|f| f.key == victim
            && f.seq
                .is_some_and(|s| missing.contains(&s) || s == missing[missing.len() - 1] + 1)),
        "{}",
        verdicts(&r)
    );
    assert!(!r.holds);
    assert_eq!(verdicts(&without_owed(&r)), verdicts(&full(&root)));
}

/// The checkpoint at `ckpt` rewritten as format `version` (6 or 7) wrote
/// it: its streams in the header, without the members version 8 and later
/// added (`streams_files`, the entry key and store), and for 6 without its
/// `owed` member; sealed with its SHA-256 again.
fn downgrade(ckpt: &Path, version: u32) {
    let mut header = current_header(ckpt);
    header["version"] = version.into();
    let h = header.as_object_mut().unwrap();
    for added in [
        "streams_files",
        "entry_key",
        "entry_segments",
        "entry_generation",
    ] {
        assert!(h.remove(added).is_some(), "{added}");
    }
    if version == 6 {
        assert_eq!(h.remove("owed"), Some(serde_json::json!([])));
    }
    reseal(ckpt, version, &serde_json::to_vec(&header).unwrap());
}

#[test]
fn version_6_and_7_checkpoints_are_read_and_the_night_proves_the_lake_in_full_once() {
    for version in [6, 7] {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half) = first_half_proved(dir.path(), 41, 120);
        downgrade(&ckpt, version);
        // The next night, and a redelivery of a transfer's first event.
        deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
        let first = events
            .iter()
            .find(|e| e.stream == Stream::Transfer)
            .unwrap();
        deliver(&root, &[first], "c");
        // Written before version 17 (older rules for the transfers it
        // kept, no entry ids): proved from the first event once, its tails judged (it
        // owes nothing and saw no file's streams).
        let r = night(&root, &ckpt);
        let i = r.incremental.unwrap();
        assert!(
            r.holds && i.reproved_in_full && i.files_lost == 0,
            "version {version}: {i:?}"
        );
        assert_same(1, &r, &full(&root));
        // It stores the streams of every file a proof from nothing does
        // (a file of copies only notes none), and the next night resumes.
        let stored = stored_keys(&ckpt);
        let fresh = dir.path().join("fresh");
        night(&root, &fresh);
        assert!(!stored.is_empty());
        assert_eq!(stored, stored_keys(&fresh), "version {version}");
        let next = night(&root, &ckpt).incremental.unwrap();
        assert!(!next.reproved_in_full && next.files_read == 0, "{next:?}");
    }
}

/// The lake files the checkpoint at `ckpt` has files of streams for, sorted.
fn stored_keys(ckpt: &Path) -> Vec<String> {
    let header = checkpoint_header(ckpt);
    let mut keys: Vec<String> = header["streams_files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["keys"].as_array().unwrap().clone())
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

/// The first index at or after `near` before which every saga that started
/// has ended (a night cut there leaves nothing in flight).
fn quiet_cut(events: &[Event], near: usize) -> usize {
    let mut open = std::collections::HashSet::new();
    for (i, e) in events.iter().enumerate() {
        if i >= near && open.is_empty() {
            return i;
        }
        if e.stream == Stream::Transfer {
            match e.kind.as_str() {
                "captured" | "failed" | "released" => open.remove(&e.stream_key),
                _ => open.insert(e.stream_key.clone()),
            };
        }
    }
    events.len()
}

#[test]
fn a_lake_that_lost_rows_a_night_proved_is_violated_until_they_are_back() {
    for restored in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
        let events = history(37, 5, 360);
        // Three nights' worth, each cut where no saga is in flight; the
        // third is delivered only later.
        let (half, later) = (
            quiet_cut(&events, events.len() / 3),
            quiet_cut(&events, events.len() * 2 / 3),
        );
        deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
        assert!(night(&root, &ckpt).holds);
        let first = common::files_under(&root, "events");
        deliver(&root, &events[half..later].iter().collect::<Vec<_>>(), "b");
        assert!(night(&root, &ckpt).holds);
        // Every file of the second night vanishes, every table's: what is
        // left is the first night's history, which holds on its own.
        let second: Vec<(String, Vec<u8>)> = common::files_under(&root, "events")
            .into_iter()
            .filter(|k| !first.contains(k))
            .map(|k| (k.clone(), std::fs::read(root.join(&k)).unwrap()))
            .collect();
        for (key, _) in &second {
            std::fs::remove_file(root.join(key)).unwrap();
        }
        assert!(
            full(&root).holds,
            "the first night's history holds on its own"
        );
        // The night knows better: every stream the second night extended
        // lost the rows proved there, named from its first missing seq.
        let mut expected: Vec<(&str, String, u64)> = Vec::new();
        for e in &events[half..later] {
            if !expected.iter().any(|(_, k, _)| *k == e.stream_key) {
                expected.push(("proved_rows_missing", e.stream_key.clone(), e.seq));
            }
        }
        let by_stream = |v: &mut Vec<(&str, String, u64)>| {
            v.sort_by(|a, b| (&a.1, a.2).cmp(&(&b.1, b.2)));
        };
        by_stream(&mut expected);
        let r = night(&root, &ckpt);
        let i = r.incremental.unwrap();
        assert!(i.reproved_in_full && i.files_lost == second.len(), "{i:?}");
        let mut found = owed(&r);
        by_stream(&mut found);
        assert_eq!(found, expected);
        assert!(!r.holds && r.checks[1..].iter().all(|c| c.holds));
        assert_eq!(verdicts(&without_owed(&r)), verdicts(&full(&root)));
        let f = &r.checks[0].findings[0];
        assert!(
            f.detail.contains("were proved by an earlier run")
                && f.detail.contains("now ends at seq"),
            "{}",
            f.detail
        );
        // A night with nothing new: the lake still owes them.
        let r = night(&root, &ckpt);
        assert!(!r.incremental.as_ref().unwrap().reproved_in_full);
        let mut again = owed(&r);
        by_stream(&mut again);
        assert_eq!(again, expected);
        if restored {
            // The third night's rows land without the second's: the streams
            // they extend have rows after their proved seqs but not those
            // (read from the lake to decide), the rest still end before.
            deliver(&root, &events[later..].iter().collect::<Vec<_>>(), "c");
            let mut expected: Vec<(&str, String, u64)> = expected
                .into_iter()
                .map(|(code, key, seq)| {
                    let ours = |e: &&Event| e.stream_key == key;
                    match events[later..].iter().any(|e| ours(&e)) {
                        true => {
                            let proved = events[half..later].iter().filter(ours).map(|e| e.seq);
                            (code, key.clone(), proved.max().unwrap())
                        }
                        false => (code, key, seq),
                    }
                })
                .collect();
            by_stream(&mut expected);
            let r = night(&root, &ckpt);
            let mut found = owed(&r);
            by_stream(&mut found);
            assert_eq!(found, expected);
            assert!(r.checks[0]
                .findings
                .iter()
                .any(|f| f.detail.contains("though rows after it are")));
            assert_eq!(verdicts(&without_owed(&r)), verdicts(&full(&root)));
            // The files come back from a backup: every tail is held again.
            for (key, bytes) in &second {
                write_object(&root, key, bytes).unwrap();
            }
            let r = night(&root, &ckpt);
            assert!(r.holds, "{}", verdicts(&r));
            assert!(night(&root, &ckpt).holds);
            continue;
        }
        // Another history takes their place: one account's rows from the
        // second night re-timed by a millisecond and sealed again, every
        // link re-chained, the rest as they were. The lake's chains are
        // whole, and it holds on its own; but that account's tail is not
        // what was proved.
        let account = expected
            .iter()
            .find(|(_, k, _)| {
                events
                    .iter()
                    .any(|e| e.stream == Stream::Account && e.stream_key == *k)
            })
            .unwrap()
            .1
            .clone();
        let mut prev: Option<String> = None;
        let rewritten: Vec<Event> = events[half..later]
            .iter()
            .map(|e| {
                if e.stream_key != account {
                    return e.clone();
                }
                let mut e = e.clone();
                if prev.is_none() {
                    e.occurred_at_ms += 1;
                } else {
                    e.prev_hash = prev.clone().unwrap();
                }
                let e = e.seal();
                prev = Some(e.hash.clone());
                e
            })
            .collect();
        deliver(&root, &rewritten.iter().collect::<Vec<_>>(), "c");
        assert!(full(&root).holds, "the rewritten history holds on its own");
        let last = events[..later]
            .iter()
            .filter(|e| e.stream_key == account)
            .map(|e| e.seq)
            .max()
            .unwrap();
        for _ in 0..2 {
            let r = night(&root, &ckpt);
            assert_eq!(
                owed(&r),
                vec![("proved_row_changed", account.clone(), last)]
            );
            assert!(r.checks[0].findings[0]
                .detail
                .contains("history was rewritten"));
        }
    }
}

/// The one file `*.{ext}` in `dir` (a checkpoint's segment or streams file).
fn only_file(dir: &Path, ext: &str) -> std::path::PathBuf {
    let found: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_new_event_naming_a_settled_transfer_pulls_it_back_from_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(9, 6, 200);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    let first = night(&root, &ckpt);
    assert!(first.holds);
    assert!(
        !segment_files(dir.path()).is_empty(),
        "settled transfers archived"
    );

    // A second credit for a transfer captured long ago, appended in order
    // to its destination account (no stream is reopened): the transfer is
    // pulled back and its conservation is violated, as a full run says.
    let captured = events
        .iter()
        .filter(|e| e.stream == Stream::Transfer && e.kind == "captured")
        .nth(3)
        .expect("the history captures transfers");
    let credit = late_credit(&events, captured);
    deliver(&root, &[&credit], "b");

    let inc = night(&root, &ckpt);
    let fresh = full(&root);
    assert_same(1, &inc, &fresh);
    assert!(!fresh.holds);
    let conservation = fresh.check("transfer_conservation");
    assert!(
        conservation
            .findings
            .iter()
            .any(|f| f.key == captured.stream_key),
        "{conservation:?}"
    );
    let i = inc.incremental.unwrap();
    assert_eq!(i.streams_reopened, 0);
    assert_eq!(i.transfers_pulled, 1, "only the transfer the credit names");

    // The flagged transfer stays open: the next night (nothing new) reaches
    // the same verdicts without pulling it again.
    let again = night(&root, &ckpt);
    assert_same(2, &again, &fresh);
    assert_eq!(again.incremental.unwrap().transfers_pulled, 0);
}

/// A queue that delivers an old batch again after the night that proved it:
/// each old account row is found again in the files the checkpoint proved
/// (its hash at its seq), so no account stream is reopened (no re-proof
/// from seq 1, no transfer pulled back for it), and the night reaches a
/// full proof's verdicts. A row at an old seq with other content is not
/// found again: its stream is reopened and the conflict found.
/// `new` rows and `old` ones (proved rows delivered again, none chaining
/// to its stream's tail) delivered, and a night that finds every old row
/// in the proved files: no stream reopened, each counted as already proved,
/// the verdicts of a full run.
fn night_finding_every_old_row(root: &Path, ckpt: &Path, new: &[Event], old: &[&Event]) {
    let mut second: Vec<&Event> = new.iter().collect();
    second.extend(old);
    deliver_batches(root, &second, "b");
    let inc = night(root, ckpt);
    assert_same(1, &inc, &full(root));
    let i = inc.incremental.unwrap();
    assert_eq!(
        (
            i.streams_reopened,
            i.rows_already_proved,
            i.reproved_in_full
        ),
        (0, old.len() as u64, false),
        "{i:?}"
    );
}

/// [`deliver`] in queue batches the consumer takes (up to 5,000 messages).
fn deliver_batches(root: &Path, events: &[&Event], tag: &str) {
    for (n, batch) in events.chunks(5_000).enumerate() {
        deliver(root, batch, &format!("{tag}{n}"));
    }
}

#[test]
fn old_account_rows_delivered_again_are_found_in_the_proved_files_not_reopened() {
    let (dir, events) = (tempfile::tempdir().unwrap(), history(5, 8, 300));
    let half = events.len() / 2;
    let (root, ckpt) = half_proved(dir.path(), &events, half);
    // Every seventh account row of the proved half again, with the rest of
    // the history.
    let old: Vec<&Event> = events[..half]
        .iter()
        .filter(|e| e.stream == Stream::Account)
        .step_by(7)
        .collect();
    let tails: std::collections::HashMap<&str, u64> = events[..half]
        .iter()
        .filter(|e| e.stream == Stream::Account)
        .map(|e| (e.stream_key.as_str(), e.seq))
        .collect();
    assert!(
        old.iter()
            .filter(|e| e.seq < tails[e.stream_key.as_str()])
            .count()
            >= 5,
        "rows before their tails, which do not chain to them"
    );
    night_finding_every_old_row(&root, &ckpt, &events[half..], &old);
    // Another version of a proved row: not found again.
    let (_, other) = second_version(&events[..half], 3);
    deliver(&root, &[&other], "c");
    let inc = night(&root, &ckpt);
    assert_same(2, &inc, &full(&root));
    let i = inc.incremental.unwrap();
    assert!(i.streams_reopened >= 1 && !i.reproved_in_full, "{i:?}");
    assert!(!inc.check("conflicting_duplicates").holds);
    // An old row altered under its recorded hash (written as the consumer
    // would not: it checks hashes): its hash is found again, but the proof
    // recomputes it, and the lake is proved in full.
    use ledger_ingest::{build_files, read_file, FileLayer};
    // The row `id` delivered again as `alter` leaves it.
    let again = |id: &str, alter: &dyn Fn(&mut Event)| {
        let mut rows = Vec::new();
        for key in common::files_under(&root, "events/account") {
            let bytes = std::fs::read(root.join(&key)).unwrap();
            // (A file written by an earlier call is not a valid one.)
            rows.extend(read_file(&key, bytes.into()).unwrap_or_default());
        }
        let mut altered = rows.into_iter().find(|r| r.event.event_id == id).unwrap();
        alter(&mut altered.event);
        for f in build_files(vec![altered], FileLayer::Ingest).unwrap() {
            write_object(&root, &f.key, &f.bytes).unwrap();
        }
    };
    let first = old[old.len() / 2];
    again(&first.event_id, &|e| e.occurred_at_ms += 1);
    let inc = night(&root, &ckpt);
    assert_same(3, &inc, &full(&root));
    assert!(inc.incremental.unwrap().reproved_in_full);
    assert!(!inc.check("completeness").holds);
    // An old row (of another account) whose missing reason is now empty:
    // the same recorded hash, which it hashes to (the encoding does not
    // tell the two apart), but a full run keeps it beside the proved row
    // and names it invalid; so it is no copy.
    let other = old
        .iter()
        .find(|e| e.stream_key != first.stream_key && e.reason.is_none())
        .unwrap();
    let mut empty = (*other).clone();
    empty.reason = Some(String::new());
    assert_eq!(empty.view().compute_hash(), other.hash, "hashed alike");
    again(&other.event_id, &|e| e.reason = Some(String::new()));
    let inc = night(&root, &ckpt);
    assert_same(4, &inc, &full(&root));
    assert!(inc.incremental.as_ref().unwrap().reproved_in_full);
    assert!(
        inc.check("completeness")
            .findings
            .iter()
            .any(|f| f.code == "invalid_event"
                && f.event_id.as_deref() == Some(other.event_id.as_str())),
        "{}",
        verdicts(&inc)
    );
}

#[test]
fn old_rows_of_more_accounts_than_a_scan_filters_by_are_all_found_again() {
    // More accounts' old rows than a scan filters by (1,000, as many as a
    // footer prunes by: `lake::PRUNING_KEYS_MAX`): the look-up reads the
    // proved account files whole and matches the keys itself, and finds
    // each row (without that scan, all 1,010 streams were re-proved). Twice
    // as many accounts, so that a look-up that found nothing would re-prove
    // those streams (fewer than half) rather than prove the lake in full:
    // the counts below tell the two apart.
    let wanted = ledger_reconcile::lake::PRUNING_KEYS_MAX + 10;
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(7, 2 * wanted + 2, 16 * wanted);
    let half = events.len() / 2;
    deliver_batches(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    assert_same(0, &night(&root, &ckpt), &full(&root));
    let tails: std::collections::HashMap<&str, u64> = events[..half]
        .iter()
        .filter(|e| e.stream == Stream::Account)
        .map(|e| (e.stream_key.as_str(), e.seq))
        .collect();
    // Each account's last row before its tail (not its first, `opened`,
    // all in the first files): rows across the proved files and dates.
    let mut keys = std::collections::HashSet::new();
    let old: Vec<&Event> = events[..half]
        .iter()
        .rev()
        .filter(|e| {
            e.stream == Stream::Account
                && e.seq < tails[e.stream_key.as_str()]
                && keys.insert(e.stream_key.as_str())
        })
        .take(wanted)
        .collect();
    assert_eq!(
        old.len(),
        wanted,
        "accounts with a proved row before their tail"
    );
    night_finding_every_old_row(&root, &ckpt, &events[half..], &old);
}

/// The proved transfer rows of `events` that are not their stream's last
/// (old rows delivered again that do not chain to their tails).
fn transfer_rows_before_their_tails(events: &[Event]) -> Vec<&Event> {
    let tails: std::collections::HashMap<&str, u64> = events
        .iter()
        .filter(|e| e.stream == Stream::Transfer)
        .map(|e| (e.stream_key.as_str(), e.seq))
        .collect();
    events
        .iter()
        .filter(|e| e.stream == Stream::Transfer && e.seq < tails[e.stream_key.as_str()])
        .collect()
}

#[test]
fn old_transfer_rows_delivered_again_are_found_in_the_proved_files_not_reopened() {
    // A queue that delivers an old batch again: each old transfer row is
    // found again in the proved transfer files (its hash at its seq) once
    // its transfer is pulled back, so no transfer stream is re-proved from
    // seq 1 (before, each was: at 50M events a 1 % redelivery of an old day
    // re-proved 4,055 transfers, as long as a full proof).
    let (dir, events) = (tempfile::tempdir().unwrap(), history(5, 8, 300));
    let half = events.len() / 2;
    let (root, ckpt) = half_proved(dir.path(), &events, half);
    let old: Vec<&Event> = transfer_rows_before_their_tails(&events[..half])
        .into_iter()
        .step_by(5)
        .collect();
    assert!(old.len() >= 5, "{} old transfer rows", old.len());
    night_finding_every_old_row(&root, &ckpt, &events[half..], &old);
}

#[test]
fn old_rows_of_more_transfers_than_a_scan_filters_by_are_all_found_again() {
    // More transfers' old rows than a scan filters by: the look-up reads
    // whole the proved transfer files whose notes hold a wanted stretch
    // (the others not at all) and matches the keys itself.
    let wanted = ledger_reconcile::lake::PRUNING_KEYS_MAX + 10;
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(7, 40, 8 * wanted);
    let half = events.len() / 2;
    deliver_batches(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    assert_same(0, &night(&root, &ckpt), &full(&root));
    // One old row of each transfer, over the proved files.
    let mut keys = std::collections::HashSet::new();
    let old: Vec<&Event> = transfer_rows_before_their_tails(&events[..half])
        .into_iter()
        .filter(|e| keys.insert(e.stream_key.as_str()))
        .take(wanted)
        .collect();
    assert_eq!(
        old.len(),
        wanted,
        "transfers with a proved row before their tail"
    );
    night_finding_every_old_row(&root, &ckpt, &events[half..], &old);
}

#[test]
fn a_transfer_with_old_rows_and_newer_ones_is_reopened_not_looked_up() {
    // A transfer in flight when the history is cut: its first rows proved,
    // the rest new. Its proved row at seq 1 again with the new ones: the
    // old row alone could be found again, but the newer rows must be
    // proved, so the stream is re-proved (looked up and left, its newer
    // rows would never be: it would stay open, dangling).
    let (dir, events) = (tempfile::tempdir().unwrap(), history(5, 8, 300));
    // Cut at a transfer's row at seq 3, past the middle.
    let half = events.len() / 2
        + events[events.len() / 2..]
            .iter()
            .position(|e| e.stream == Stream::Transfer && e.seq == 3)
            .expect("a transfer with three rows");
    let (root, ckpt) = half_proved(dir.path(), &events, half);
    let key = &events[half].stream_key;
    let first = events[..half]
        .iter()
        .find(|e| e.stream == Stream::Transfer && &e.stream_key == key && e.seq == 1)
        .unwrap();
    let mut second: Vec<&Event> = events[half..].iter().collect();
    second.push(first);
    deliver(&root, &second, "b");
    let inc = night(&root, &ckpt);
    let fresh = full(&root);
    assert_same(1, &inc, &fresh);
    assert!(fresh.holds, "{}", fresh.summary());
    let i = inc.incremental.unwrap();
    assert!(i.streams_reopened >= 1 && !i.reproved_in_full, "{i:?}");
}

#[test]
fn old_transfer_rows_are_vouched_for_on_a_night_a_proved_file_is_compacted() {
    // As for accounts: an old row of a transfer, not its stream's last
    // (the look-up's case).
    an_old_row_is_vouched_for_while_a_proved_file_is_compacted(
        "transfer",
        transfer_rows_before_their_tails,
    );
}

#[test]
fn a_transfer_whose_old_rows_are_only_partly_found_again_is_reopened() {
    let (dir, events) = (tempfile::tempdir().unwrap(), history(5, 8, 300));
    let half = events.len() / 2;
    let (root, ckpt) = half_proved(dir.path(), &events, half);
    // A transfer with proved rows at seqs 1..=3: its row at seq 1 again as
    // it was (a proved file holds it), and another version of its row at
    // seq 2 (none does), sealed onto the same predecessor.
    let old = transfer_rows_before_their_tails(&events[..half]);
    let at = |key: &str, seq: u64| {
        events[..half]
            .iter()
            .find(|e| e.stream == Stream::Transfer && e.stream_key == key && e.seq == seq)
    };
    let copy = *old
        .iter()
        .find(|e| e.seq == 1 && at(&e.stream_key, 3).is_some())
        .expect("a transfer with three proved rows");
    let mut other = at(&copy.stream_key, 2).unwrap().clone();
    other.occurred_at_ms += 1;
    let other = other.seal();
    let mut second: Vec<&Event> = events[half..].iter().collect();
    second.extend([copy, &other]);
    deliver(&root, &second, "b");
    let inc = night(&root, &ckpt);
    // Found in part is not found: the transfer is re-proved from its first
    // event and the conflict reported, as a proof of the lake reports it.
    assert_same(1, &inc, &full(&root));
    let i = inc.incremental.unwrap();
    assert!(i.streams_reopened >= 1 && !i.reproved_in_full, "{i:?}");
    assert!(
        inc.check("conflicting_duplicates")
            .findings
            .iter()
            .any(|f| f.key == copy.stream_key && f.seq == Some(2)),
        "{}",
        verdicts(&inc)
    );
}

#[test]
fn a_stream_whose_old_rows_are_only_partly_found_again_is_reopened() {
    let (dir, events) = (tempfile::tempdir().unwrap(), history(5, 8, 300));
    let half = events.len() / 2;
    let (root, ckpt) = half_proved(dir.path(), &events, half);
    // One account's proved row at seq 2 again as it was (a proved file
    // holds it), and another version of its proved row at seq 3 (none
    // does), in the same night.
    let (_, other) = second_version(&events[..half], 3);
    let copy = events[..half]
        .iter()
        .find(|e| e.stream == Stream::Account && e.stream_key == other.stream_key && e.seq == 2)
        .unwrap();
    // And the mirror, on another account: another version at seq 2, the
    // row at seq 3 as it was.
    let row = |key: &str, seq: u64| {
        events[..half]
            .iter()
            .find(|e| e.stream == Stream::Account && e.stream_key == key && e.seq == seq)
    };
    let mirror = events[..half]
        .iter()
        .find(|e| {
            e.stream == Stream::Account
                && e.stream_key != other.stream_key
                && e.seq == 2
                && row(&e.stream_key, 4).is_some()
        })
        .unwrap();
    let mut mirror_other = mirror.clone();
    mirror_other.occurred_at_ms += 1;
    let mirror_other = mirror_other.seal();
    let mirror_copy = row(&mirror.stream_key, 3).unwrap();
    let mut second: Vec<&Event> = events[half..].iter().collect();
    second.extend([copy, &other, &mirror_other, mirror_copy]);
    deliver(&root, &second, "b");
    let inc = night(&root, &ckpt);
    // Found in part is not found: each stream is re-proved from its first
    // event, and each conflict is reported as a proof of the lake reports
    // it (cleared with both rows, the other version would pass for a copy).
    assert_same(1, &inc, &full(&root));
    let i = inc.incremental.unwrap();
    assert!(i.streams_reopened >= 2 && !i.reproved_in_full, "{i:?}");
    let conflicts = &inc.check("conflicting_duplicates").findings;
    for (key, seq) in [(&other.stream_key, 3), (&mirror.stream_key, 2)] {
        assert!(
            conflicts
                .iter()
                .any(|f| &f.key == key && f.seq == Some(seq)),
            "{key} {seq}: {}",
            verdicts(&inc)
        );
    }
}

#[test]
fn late_redeliveries_are_copies_and_violations_in_rewritten_files_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(5, 8, 300);
    let half = events.len() / 2;
    let first: Vec<&Event> = events[..half].iter().collect();
    deliver(&root, &first, "a");
    // Half a history: transfers in flight are dangling a year later.
    assert_same(0, &night(&root, &ckpt), &full(&root));

    // A late redelivery of old events alongside new ones: plain duplicates,
    // so the verdict still holds; each is found in the proved files, so no
    // stream is re-proved.
    let mut second: Vec<&Event> = events[half..].iter().collect();
    let again: Vec<&Event> = events[..half].iter().step_by(37).collect();
    second.extend(&again);
    deliver(&root, &second, "b");
    let inc = night(&root, &ckpt);
    assert_same(1, &inc, &full(&root));
    assert!(inc.holds);
    let i = inc.incremental.unwrap();
    assert_eq!(
        (i.streams_reopened, i.rows_already_proved),
        (0, again.len() as u64),
        "{i:?}"
    );
    // The transfers the redelivered transfer rows name came back.
    assert!(i.transfers_pulled > 0, "{i:?}");
    assert!(!i.reproved_in_full, "{i:?}");
    let mut owing = Owing::default();
    owing.check(&root, &[]).unwrap();

    // Violations injected into already-proved history (the corruption tool
    // rewrites the files it touches): each is caught, exactly as a full run
    // reports it.
    for (n, class) in [
        Class::Overdraft,
        Class::Conflict,
        Class::Gap,
        Class::Leaked,
        Class::HiddenOverdraft,
        Class::RaisedLimit,
        Class::TermsChanged,
        Class::PhaseSkipped,
        Class::FrozenDeposit,
        Class::WrongCounterparty,
        Class::CreditLost,
        // And the sweeper's list: a transfer known only by a live hold.
        Class::TransferLost,
    ]
    .into_iter()
    .enumerate()
    {
        inject(&root, class, NOW_MS).unwrap();
        let inc = night(&root, &ckpt);
        let fresh = full(&root);
        assert!(!fresh.holds, "{class:?} was injected");
        // The same findings as a proof of the lake alone, and those of the
        // proved rows the rewritten files no longer hold (the `gap` drops
        // the conflict's second version, proved the night before).
        assert_same(2 + n, &without_owed(&inc), &fresh);
        let mut found = owed(&inc);
        found.sort();
        owing
            .check(&root, &found)
            .unwrap_or_else(|e| panic!("{class:?}: {e}"));
        if class == Class::Gap {
            assert!(
                found.iter().any(|f| f.0 == "proved_row_changed"),
                "{found:?}"
            );
        }
        if class == Class::TransferLost {
            assert!(
                inc.dangling.iter().any(|d| d.hold_only),
                "{:?}",
                inc.dangling
            );
        }
    }
}

/// Whether the tests run as root: only root can run the binary as another
/// user (`setpriv`), whose limits and permissions bind.
fn root_user() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

/// The binary run as `nobody` under `bash -c "ulimit LIMIT"` (its exit code
/// and stderr), killed and failed after 60 s.
fn as_nobody(limit: &str, args: &[&str]) -> (i32, String) {
    let script = format!("ulimit {limit}; exec \"$0\" \"$@\"");
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "bash",
            "-c",
        ])
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_reconcile"))
        .args(["--quiet", "--now-ms", &NOW_MS.to_string()])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("ulimit {limit}: still running after 60 s (hung)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.code().unwrap_or(-1), err)
}

/// rev-s53-resources M1, M2. A checkpoint directory the job's user may not
/// write, its lock file there: the lock is taken read-only, the run proves
/// and writes its outputs, and its save fails (exit 2) with the checkpoint
/// as it was. Without the lock file: exit 2 before the proof, with a Help
/// and the failure in the metrics. And a run whose second worker thread the
/// OS refuses ends (exit 2), whatever the limit: it used to hang for ever
/// at one, holding the checkpoint's lock. Needs root (to run as another
/// user); skipped, and says so, otherwise.
#[test]
fn a_checkpoint_it_may_not_write_or_no_threads_to_run_is_exit_2_not_a_silent_or_hung_night() {
    if !root_user() {
        eprintln!("skipped: needs root to run the binary as another user");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(dir.path(), 0o755);
    let (root, ck_dir, out) = (
        dir.path().join("lake"),
        dir.path().join("ck"),
        dir.path().join("out"),
    );
    let events = history(3, 4, 60);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "x");
    std::fs::create_dir(&ck_dir).unwrap();
    std::fs::create_dir(&out).unwrap();
    mode(&out, 0o777);
    let ckpt = ck_dir.join("ck");
    let ck = ckpt.to_str().unwrap();
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
    let before = std::fs::read(&ckpt).unwrap();
    mode(&ck_dir, 0o555);
    let (json, metrics) = (out.join("r.json"), out.join("m.prom"));
    let args = [
        root.to_str().unwrap(),
        "--checkpoint",
        ck,
        "--json",
        json.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ];
    let (code, err) = as_nobody("-u unlimited", &args);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot write checkpoint"),
        "the save's error: {err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        report["holds"], true,
        "the proof ran and its report was written"
    );
    assert!(std::fs::read_to_string(&metrics)
        .unwrap()
        .contains("reconcile_verdict"));
    assert_eq!(
        std::fs::read(&ckpt).unwrap(),
        before,
        "the checkpoint as it was"
    );

    mode(&ck_dir, 0o755);
    std::fs::remove_file(ck_dir.join("ck.lock")).unwrap();
    mode(&ck_dir, 0o555);
    std::fs::remove_file(&metrics).unwrap();
    let (code, err) = as_nobody("-u unlimited", &args);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot open its lock file")
            && err.contains("Help: the checkpoint's directory must be writable"),
        "{err}"
    );
    let prom = std::fs::read_to_string(&metrics).unwrap();
    assert!(prom.contains("reconcile_run_failed 1"), "{prom}");
    mode(&ck_dir, 0o755);

    // A checkpoint it may write (a first run): the lock is taken wherever
    // the runtime starts.
    let first = out.join("ck");
    let args = [
        root.to_str().unwrap(),
        "--checkpoint",
        first.to_str().unwrap(),
    ];
    // Every limit from none to more than a run starts: each thread refused
    // (the runtime's, a table's, a check's half: rev-s53-diff M1) is exit 2
    // with the Help, or its work done on another thread (exit 0); never a
    // hang, never a panic's exit 2 without a Help.
    let mut refused = 0;
    for n in 1..=24 {
        let (code, err) = as_nobody(&format!("-u {n}"), &args);
        assert!(code == 2 || code == 0, "ulimit -u {n}: exit {code}: {err}");
        eprintln!(
            "ulimit -u {n}: exit {code}: {}",
            err.lines().next().unwrap_or("")
        );
        if code == 2 || err.contains("cannot start a thread") {
            assert!(
                err.contains("ulimit -u")
                    && !err.contains("panicked at")
                    && !err.contains("a table's proof panicked"),
                "ulimit -u {n}: {err}"
            );
            // Said once, not by the panic's line and again by the run's
            // error.
            assert_eq!(
                err.matches("Help: the reconciler runs two worker threads")
                    .count(),
                1,
                "ulimit -u {n}: {err}"
            );
        }
        if err.contains("error: cannot start the runtime") {
            refused += 1;
        }
    }
    assert!(refused > 0, "some limit refuses the runtime's threads");
    let first = first.to_str().unwrap();
    assert_eq!(
        cli(&root, &["--checkpoint", first]).0,
        0,
        "no lock left held"
    );
    // A date's directory the job's user may not list (rev-s55-blackbox F6:
    // no Help): exit 2, the file system's Help, nothing to move.
    let day = std::fs::read_dir(root.join("events/account"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    mode(&day, 0o311);
    let (code, err) = as_nobody("-n 1024", &[root.to_str().unwrap()]);
    mode(&day, 0o755);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot list")
            && err.contains("Help: do not move anything: the file system failed, or refused"),
        "{err}"
    );
}

/// rev-s53-resources M4: a file of the checkpoint's state it no longer
/// names that cannot be removed (a directory by that name stands for one
/// whose removal fails) is a warning: the checkpoint was written (exit 0,
/// not "cannot write checkpoint"), and the other such files are removed.
#[test]
fn a_state_file_that_cannot_be_removed_is_a_warning_and_the_others_go() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let events = history(3, 4, 60);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "x");
    let ckpt = dir.path().join("ck");
    let ck = ckpt.to_str().unwrap();
    assert_eq!(cli(&root, &["--checkpoint", ck]).0, 0);
    let stuck = dir.path().join("ck.0123456789abcdef.seg");
    std::fs::create_dir(&stuck).unwrap();
    let orphans = [
        "ck.fedcba9876543210.seg",
        "ck.fedcba9876543210.ent",
        "ck.fedcba9876543210.prs",
    ]
    .map(|n| dir.path().join(n));
    for night in 0..2 {
        for o in &orphans {
            std::fs::write(o, b"left by a killed save").unwrap();
        }
        let (code, err) = cli(&root, &["--checkpoint", ck]);
        assert_eq!(code, 0, "night {night}: {err}");
        assert!(
            err.contains("warning: checkpoint")
                && err.contains("could not be removed")
                && err.contains("0123456789abcdef"),
            "{err}"
        );
        assert!(
            orphans.iter().all(|o| !o.exists()),
            "the others are removed"
        );
        assert!(stuck.exists());
    }
    std::fs::remove_dir(&stuck).unwrap();
    let (code, err) = cli(&root, &["--checkpoint", ck]);
    assert!(code == 0 && !err.contains("warning"), "{err}");
}

#[test]
fn an_unusable_checkpoint_is_an_error_and_full_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let events = history(3, 4, 60);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "x");
    let ckpt = dir.path().join("ck");
    let bin = |args: &[&str]| cli(&root, args);
    let ck = ckpt.to_str().unwrap();
    assert_eq!(bin(&["--checkpoint", ck]).0, 0);
    assert!(ckpt.exists());
    assert_eq!(bin(&["--checkpoint", ck]).0, 0, "the resumed run holds too");

    // Cut short (its start is a checkpoint's): damaged.
    let good = std::fs::read(&ckpt).unwrap();
    let cut = &good[..20];
    std::fs::write(&ckpt, cut).unwrap();
    let (code, err) = bin(&["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a checkpoint") && err.contains("--full"),
        "{err}"
    );

    // --full names the damaged file and writes a good one; its report
    // says what it could not judge.
    let (code, listed, metric, lines) = not_judged(&root, &["--checkpoint", ck, "--full"]);
    assert!(
        code == 0 && listed.len() == 1 && listed[0].contains("not a checkpoint") && metric == "1",
        "{listed:?} {metric}"
    );
    assert!(lines[0].contains("NOT JUDGED"), "{lines:?}");
    std::fs::write(&ckpt, b"").unwrap();
    let (code, err) = bin(&["--checkpoint", ck, "--full"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("reconcile: warning: checkpoint")
            && err.contains("not a checkpoint")
            && err.contains(
                "does not judge whether the lake still holds what that checkpoint proved"
            ),
        "{err}"
    );
    assert_eq!(bin(&["--checkpoint", ck]).0, 0);

    // A checkpoint of the first formats (JSON; a header line of its own):
    // an older checkpoint, which --full replaces.
    for first in [
        &b"{\"version\":1,\"lake\":"[..],
        b"LEDGER-RECONCILE-CHECKPOINT\n1\n",
    ] {
        std::fs::write(&ckpt, first).unwrap();
        let (code, err) = bin(&["--checkpoint", ck]);
        assert!(
            code == 2 && err.contains("a first format") && err.contains("run with --full"),
            "{err}"
        );
        let (code, err) = bin(&["--checkpoint", ck, "--full"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(bin(&["--checkpoint", ck]).0, 0);
    }

    // Another kind of file (a mistyped path, another output's): refused
    // with and without --full, and left as it was (rev-s55-blackbox F1).
    let other = dir.path().join("hook.py");
    std::fs::write(&other, b"#!/usr/bin/env python3\nprint('a job script')\n").unwrap();
    for args in [
        &["--checkpoint", other.to_str().unwrap()][..],
        &["--checkpoint", other.to_str().unwrap(), "--full"],
    ] {
        let (code, err) = bin(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("another kind of file, not a checkpoint")
                && err.contains("check the --checkpoint path")
                && err.contains("--full does not replace it"),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read(&other).unwrap(),
            b"#!/usr/bin/env python3\nprint('a job script')\n"
        );
    }

    // One altered byte anywhere, or a cut tail, and the checkpoint is refused
    // whole (its trailing SHA-256), never half-used.
    let good = std::fs::read(&ckpt).unwrap();
    for at in [20, good.len() / 2, good.len() - 40] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&ckpt, &bad).unwrap();
        let (code, err) = bin(&["--checkpoint", ck]);
        assert_eq!(code, 2, "byte {at}: {err}");
        assert!(err.contains("SHA-256 does not match"), "byte {at}: {err}");
    }
    std::fs::write(&ckpt, &good[..good.len() - 1]).unwrap();
    let (code, err) = bin(&["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    std::fs::write(&ckpt, &good).unwrap();
    assert_eq!(
        bin(&["--checkpoint", ck]).0,
        0,
        "the intact file still resumes"
    );

    // The archive segments beside it are bound to it: one altered or missing
    // is refused too (exit 2), and --full writes them again.
    let segments = segment_files(dir.path());
    assert!(!segments.is_empty());
    let seg = dir.path().join(&segments[0]);
    let good_seg = std::fs::read(&seg).unwrap();
    let mut bad = good_seg.clone();
    let at = bad.len() - 30;
    bad[at] ^= 0x01;
    std::fs::write(&seg, &bad).unwrap();
    let (code, err) = bin(&["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("archive segment") && err.contains("--full"),
        "{err}"
    );
    std::fs::remove_file(&seg).unwrap();
    let (code, err) = bin(&["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot open"), "{err}");
    assert_eq!(bin(&["--checkpoint", ck, "--full"]).0, 0);
    assert_eq!(bin(&["--checkpoint", ck]).0, 0);
    assert!(!segment_files(dir.path()).is_empty());

    // Two runs never share a checkpoint: while one holds it, another is
    // refused (exit 2) and changes nothing.
    let before = std::fs::read(&ckpt).unwrap();
    let held = ledger_reconcile::CheckpointLock::take(&ckpt).unwrap();
    let (code, err) = bin(&["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("another reconcile run"), "{err}");
    assert_eq!(std::fs::read(&ckpt).unwrap(), before);
    drop(held);
    assert_eq!(bin(&["--checkpoint", ck]).0, 0, "free again");

    // A checkpoint of another lake is refused, not silently reused.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_reconcile"))
        .arg(other.to_str().unwrap())
        .args(["--quiet", "--checkpoint", ck])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("written for the lake"), "{err}");
    // rev-s52-docs H1: the Help is the path, not --full, and --full does not
    // replace another lake's checkpoint (its tails owed would be gone).
    assert!(
        err.contains("give this lake its own checkpoint") && !err.contains("run with --full to"),
        "{err}"
    );
    let before = std::fs::read(&ckpt).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_reconcile"))
        .arg(other.to_str().unwrap())
        .args(["--quiet", "--checkpoint", ck, "--full"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("written for the lake"), "{err}");
    assert_eq!(std::fs::read(&ckpt).unwrap(), before, "left as it was");

    // A newer reconciler's checkpoint (a rollback): refused, --full too,
    // left as it was (rev-s52-diff L3).
    let mut newer = before.clone();
    newer[8..12]
        .copy_from_slice(&(ledger_reconcile::checkpoint::CHECKPOINT_VERSION + 1).to_le_bytes());
    // Sealed as its writer seals it: the SHA-256 of all before the digest.
    let flipped = newer.clone();
    let at = newer.len() - 32;
    let digest = {
        use sha2::{Digest, Sha256};
        Sha256::digest(&newer[..at])
    };
    newer[at..].copy_from_slice(&digest);
    std::fs::write(&ckpt, &newer).unwrap();
    for args in [vec!["--checkpoint", ck], vec!["--checkpoint", ck, "--full"]] {
        let (code, err) = bin(&args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("written by a newer reconciler")
                && err.contains("run the reconciler that wrote it"),
            "{err}"
        );
        assert_eq!(std::fs::read(&ckpt).unwrap(), newer, "left as it was");
    }
    // A bit of the version flipped, the digest not resealed: damaged, not a
    // newer reconciler's, and --full replaces it (rev-s57-checkpoint 1).
    std::fs::write(&ckpt, &flipped).unwrap();
    let (code, err) = bin(&["--checkpoint", ck]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("damaged: its SHA-256 does not match") && err.contains("--full"),
        "{err}"
    );
    let (code, err) = bin(&["--checkpoint", ck, "--full"]);
    assert!(code == 0 || code == 1, "{code}: {err}");
    assert_ne!(std::fs::read(&ckpt).unwrap(), flipped, "replaced");
    std::fs::write(&ckpt, &before).unwrap();
}

/// The per-row checks whose state crosses nights (a transfer's last phase and created terms in
/// the facts, an account's last currency and limit in its state) judge the first rows after a
/// checkpoint as a full run does: night 1 proves two transfers up to `reserved` and an account
/// up to its next-to-last event of the first half; in night 2 one transfer's `captured` records
/// another amount, the other goes from `reserved` to `captured`, and the account's next event
/// raises its overdraft limit.
#[test]
fn rows_after_the_checkpoint_are_judged_against_the_state_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(9, 6, 240);
    let (mut first, rest) = events.split_at(events.len() / 2);
    let captured: Vec<String> = first
        .iter()
        .filter(|e| e.stream == Stream::Transfer && e.kind == "captured" && e.seq == 4)
        .map(|e| e.stream_key.clone())
        .take(2)
        .collect();
    let account = first
        .iter()
        .find(|e| e.stream == Stream::Account && e.seq == 3)
        .map(|e| e.stream_key.clone())
        .unwrap();
    let last_of_account = first
        .iter()
        .filter(|e| e.stream_key == account)
        .map(|e| e.seq)
        .max()
        .unwrap();
    // Night 2: what night 1 defers (in stream order), then the rest of the history.
    let deferred = |e: &Event| {
        (e.stream == Stream::Transfer && captured.contains(&e.stream_key) && e.seq >= 3)
            || (e.stream_key == account && e.seq == last_of_account)
    };
    let mut second: Vec<Event> = first.iter().filter(|e| deferred(e)).cloned().collect();
    second.extend(rest.iter().cloned());
    let kept: Vec<Event> = first.iter().filter(|e| !deferred(e)).cloned().collect();
    first = &kept;
    deliver(&root, &first.iter().collect::<Vec<_>>(), "a");
    assert_same(0, &night(&root, &ckpt), &full(&root));

    // Edits the night-2 event of `key` at `seq` and reseals the stream's night-2 rows after it.
    let mut edit = |key: &str, seq: u64, change: &dyn Fn(&mut Event)| -> String {
        let i = second
            .iter()
            .position(|e| e.stream_key == key && e.seq == seq)
            .unwrap();
        change(&mut second[i]);
        second[i] = second[i].clone().seal();
        let mut prev = second[i].hash.clone();
        for e in second[i + 1..].iter_mut().filter(|e| e.stream_key == key) {
            e.prev_hash = prev;
            *e = e.clone().seal();
            prev = e.hash.clone();
        }
        second[i].event_id.clone()
    };
    let amount = edit(&captured[0], 4, &|e| e.amount = e.amount.map(|a| a + 1));
    let skipped = edit(&captured[1], 3, &|e| e.kind = "captured".into());
    let limit = edit(&account, last_of_account, &|e| {
        e.overdraft_limit = e.overdraft_limit.map(|l| l + 50)
    });
    deliver(&root, &second.iter().collect::<Vec<_>>(), "b");
    let inc = night(&root, &ckpt);
    assert_eq!(
        inc.incremental.unwrap().streams_reopened,
        0,
        "rows appended only"
    );
    let fresh = full(&root);
    assert_same(1, &inc, &fresh);
    let found = |check: &str, code: &str, id: &str| {
        inc.checks.iter().any(|c| {
            c.name == check
                && c.findings
                    .iter()
                    .any(|f| f.code == code && f.event_id.as_deref() == Some(id))
        })
    };
    assert!(
        found("transfer_conservation", "terms_changed", &amount),
        "{}",
        inc.summary()
    );
    assert!(
        found("completeness", "phase_order", &skipped),
        "{}",
        inc.summary()
    );
    assert!(
        found("balance_integrity", "terms_changed", &limit),
        "{}",
        inc.summary()
    );
}

/// Every prefix of the commit log is a state the live ledger passes through
/// (each object commits its events in order, and a saga's steps follow one
/// another): a run at that instant, with every committed event delivered,
/// must find nothing wrong. Mid-saga states included: a hold the transfer
/// has not recorded yet, a credit while the source's hold still covers it
/// (money in flight), a capture the transfer has not recorded yet. A full
/// run after each event, judged at the instant of the last; and a run
/// resumed from the previous one's checkpoint, which must say the same
/// (mid-saga state carried across runs: open holds, transfers in progress).
/// 60 operations on 5 accounts (one in euros); `RECONCILE_PREFIX_OPERATIONS`
/// for a longer history, `RECONCILE_PREFIX_SEED` for another.
#[test]
fn every_prefix_of_the_commit_log_holds_mid_saga_states_included() {
    let operations = env_u64("RECONCILE_PREFIX_OPERATIONS", 60) as usize;
    let events = history(env_u64("RECONCILE_PREFIX_SEED", 5), 5, operations);
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let mut mid_saga: std::collections::BTreeMap<&str, usize> = Default::default();
    for (k, e) in events.iter().enumerate() {
        deliver(&root, &[e], &format!("e{k}"));
        let opts = Options {
            now_ms: e.occurred_at_ms,
            ..opts()
        };
        let (report, resumed) = (full_with(&root, &opts), night_with(&root, &ckpt, &opts));
        assert_same(k, &resumed, &report);
        let broken: Vec<String> = report
            .checks
            .iter()
            .flat_map(|c| {
                c.findings
                    .iter()
                    .map(move |f| format!("{} {} {}: {}", c.name, f.code, f.key, f.detail))
            })
            .collect();
        assert!(
            broken.is_empty(),
            "after {} ({} of {}): {broken:#?}",
            e.event_id,
            k + 1,
            events.len()
        );
        if e.stream == Stream::Account {
            *mid_saga.entry(e.kind.as_str()).or_default() += 1;
        }
    }
    // Each account step of a saga was, for one run, the last event: a hold
    // not yet recorded as reserved, a credit in flight, a capture not yet
    // recorded, a release not yet recorded.
    for kind in ["hold_placed", "credited", "captured", "hold_released"] {
        assert!(
            mid_saga.get(kind).is_some_and(|&n| n > 0),
            "{kind}: {mid_saga:?}"
        );
    }
}

/// Delivery lag is pending, never violated. A history whose events each
/// reach the lake up to `lag` after their commit (so a stream's or a saga's
/// later events often arrive first: seq gaps, credits before their holds,
/// `captured` before its debit), one in eight a second time later still,
/// read after every few deliveries at the instant of the last one. With a settle window of at least the lag, no
/// run has a violation and a run resumed from the previous checkpoint says
/// the same as a full run, pending findings included; with no window, some
/// runs are violated (the lag is real). Once everything is delivered and
/// the window has passed, everything holds and nothing is pending.
/// `RECONCILE_LAG_OPERATIONS` (default 60) and `RECONCILE_LAG_SEED`.
#[test]
fn delivery_lag_within_the_settle_window_is_pending_never_violated() {
    let seed = env_u64("RECONCILE_LAG_SEED", 6);
    let events = history(seed, 5, env_u64("RECONCILE_LAG_OPERATIONS", 60) as usize);
    let lag = 3 * common::config().step_ms;
    let settle_ms = lag + 1_000;
    // Each event's delivery instant: its commit plus up to `lag`.
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || xorshift(&mut state);
    // At least once: one event in eight is delivered a second time, up to
    // the lag after its first delivery (a redelivered batch).
    let mut delivered: Vec<(i64, &Event)> = Vec::new();
    for e in &events {
        let first = e.occurred_at_ms + (next() % (lag as u64 + 1)) as i64;
        delivered.push((first, e));
        if next() % 8 == 0 {
            delivered.push((first + (next() % (lag as u64 + 1)) as i64, e));
        }
    }
    delivered.sort_by_key(|&(at, _)| at);
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let run = |now_ms: i64, settle_ms: i64, resume: bool| -> Report {
        let opts = Options {
            now_ms,
            settle_ms,
            ..opts()
        };
        if resume {
            night_with(&root, &ckpt, &opts)
        } else {
            full_with(&root, &opts)
        }
    };
    let (mut pending_codes, mut violated_without_window) = (Vec::new(), 0);
    for (k, batch) in delivered.chunks(3).enumerate() {
        let evs: Vec<&Event> = batch.iter().map(|&(_, e)| e).collect();
        deliver(&root, &evs, &format!("d{k}"));
        let now = batch.last().unwrap().0;
        let full = run(now, settle_ms, false);
        assert_same(k, &run(now, settle_ms, true), &full);
        let violated: Vec<String> = full
            .checks
            .iter()
            .flat_map(|c| {
                c.findings
                    .iter()
                    .map(move |f| format!("{} {}: {}", c.name, f.key, f.detail))
            })
            .collect();
        assert!(violated.is_empty(), "delivery {k} at {now}: {violated:#?}");
        assert!(full.holds);
        for c in &full.checks {
            for f in &c.pending {
                let at = f
                    .youngest_ms
                    .expect("a pending finding names its youngest row");
                assert!(at > now - settle_ms, "{f:?}");
                pending_codes.push(f.code);
            }
        }
        assert_eq!(
            full.pending,
            full.checks.iter().map(|c| c.pending.len()).sum::<usize>()
        );
        assert_eq!(full.decided_by_ms.is_some(), full.pending > 0);
        violated_without_window += usize::from(!run(now, 0, false).holds);
    }
    pending_codes.sort_unstable();
    pending_codes.dedup();
    assert!(violated_without_window > 0, "the lag never showed");
    for code in ["seq_gap", "not_conserved"] {
        assert!(
            pending_codes.contains(&code),
            "{code} never pending: {pending_codes:?}"
        );
    }
    assert!(pending_codes.len() >= 4, "{pending_codes:?}");
    // Everything delivered, the window passed: decided, and all holds.
    let after = delivered.last().unwrap().0 + settle_ms + 1;
    let (full, resumed) = (run(after, settle_ms, false), run(after, settle_ms, true));
    assert_same(usize::MAX, &resumed, &full);
    assert!(full.holds && full.pending == 0, "{}", full.summary());
}

/// A deposit lost for good: while the row after it is within the settle
/// window the gap and the residual it leaves are pending (a resumed run
/// carries them in its checkpoint); a run after the window, with no new
/// file, finds both violated, as a full run does.
#[test]
fn a_gap_no_late_row_fills_is_violated_once_the_window_passes() {
    let events = history(21, 5, 60);
    let lost = events
        .iter()
        .position(|e| {
            e.kind == "deposited"
                && events
                    .iter()
                    .any(|l| l.stream_key == e.stream_key && l.seq == e.seq + 1)
        })
        .expect("a deposit with a later event");
    let next = events
        .iter()
        .find(|l| l.stream_key == events[lost].stream_key && l.seq == events[lost].seq + 1)
        .unwrap();
    let kept: Vec<&Event> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| (i != lost).then_some(e))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    deliver(&root, &kept, "all");
    let last = events.last().unwrap().occurred_at_ms;
    let settle_ms = last - next.occurred_at_ms + 60_000;
    let night = |now_ms: i64| -> (Report, Report) {
        let opts = Options {
            now_ms,
            settle_ms,
            ..opts()
        };
        (night_with(&root, &ckpt, &opts), full_with(&root, &opts))
    };
    let codes = |fs: &[ledger_reconcile::Finding]| fs.iter().map(|f| f.code).collect::<Vec<_>>();
    let (resumed, full) = night(last);
    assert_same(0, &resumed, &full);
    assert!(resumed.holds, "{}", resumed.summary());
    assert_eq!(codes(&resumed.check("completeness").pending), ["seq_gap"]);
    let gap = &resumed.check("completeness").pending[0];
    assert_eq!(
        gap.event_id.as_deref(),
        Some(events[lost].event_id.as_str())
    );
    assert_eq!(gap.youngest_ms, Some(next.occurred_at_ms));
    assert_eq!(gap.missing_balance, events[lost].amount);
    assert_eq!(
        codes(&resumed.check("global_conservation").pending),
        ["not_conserved"]
    );
    // The window passes; no file arrives.
    let (resumed, full) = night(next.occurred_at_ms + settle_ms + 1);
    assert_eq!(resumed.incremental.map(|i| i.files_read), Some(0));
    assert_same(1, &resumed, &full);
    assert!(!resumed.holds);
    assert_eq!(resumed.pending, 0);
    assert_eq!(codes(&resumed.check("completeness").findings), ["seq_gap"]);
    assert_eq!(
        codes(&resumed.check("global_conservation").findings),
        ["not_conserved"]
    );

    // rev-s56-pending 2: the row after the gap records 5000 more than it
    // should, unsealed (it fails its hash): it does not tell what the gap
    // moved, so the money it makes up is violated at once, not owed to the
    // gap while it is young.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    deliver(&root, &kept, "all");
    let mut forged = 0;
    for key in common::files_under(&root, "events") {
        let path = root.join(&key);
        let mut rows =
            ledger_ingest::read_file(&key, std::fs::read(&path).unwrap().into()).unwrap();
        let Some(row) = rows.iter_mut().find(|r| r.event.event_id == next.event_id) else {
            continue;
        };
        row.event.balance_after = row.event.balance_after.map(|b| b + 5_000);
        std::fs::remove_file(&path).unwrap();
        for f in ledger_ingest::build_files(rows, ledger_ingest::FileLayer::Ingest).unwrap() {
            write_object(&root, &f.key, &f.bytes).unwrap();
        }
        forged += 1;
    }
    assert_eq!(forged, 1);
    let opts = Options {
        now_ms: last,
        settle_ms,
        ..opts()
    };
    let (resumed, full) = (night_with(&root, &ckpt, &opts), full_with(&root, &opts));
    assert_same(0, &resumed, &full);
    assert_eq!(codes(&resumed.check("completeness").pending), ["seq_gap"]);
    assert_eq!(
        resumed.check("completeness").pending[0].missing_balance,
        None
    );
    assert!(
        codes(&resumed.check("completeness").findings).contains(&"hash_mismatch"),
        "{}",
        resumed.summary()
    );
    assert!(resumed.check("global_conservation").pending.is_empty());
    assert_eq!(
        codes(&resumed.check("global_conservation").findings),
        ["not_conserved"]
    );

    // rev-s56-pending 7: the row after the one-seq gap, resealed, records
    // held 300 higher as well: no one event raises the balance and held
    // both, so no late row fills the gap: decided while its row is young.
    let mut resealed = next.clone();
    resealed.held_after = resealed.held_after.map(|h| h + 300);
    resealed.balance_after = resealed.balance_after.map(|b| b + 300);
    let resealed = resealed.seal();
    let kept: Vec<&Event> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| (i != lost).then_some(e))
        .map(|e| {
            if e.event_id == next.event_id {
                &resealed
            } else {
                e
            }
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    deliver(&root, &kept, "all");
    let r = full_with(&root, &opts);
    assert!(
        r.check("completeness").pending.is_empty(),
        "{}",
        r.summary()
    );
    let gap = r
        .check("completeness")
        .findings
        .iter()
        .find(|f| f.code == "seq_gap")
        .unwrap_or_else(|| panic!("{}", r.summary()));
    assert!(
        gap.detail.contains("no one event moves balance and held"),
        "{}",
        gap.detail
    );
}

/// The text column `name` of every row of the Parquet file at `path` (read
/// without validating the rows: damaged files hold invalid events).
fn texts(path: &Path, name: &str) -> Vec<Option<String>> {
    use arrow_array::cast::AsArray;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ProjectionMask;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let mask = ProjectionMask::columns(builder.parquet_schema(), [name]);
    let mut out = Vec::new();
    for batch in builder.with_projection(mask).build().unwrap() {
        let batch = batch.unwrap();
        let col = batch.column(0);
        match col.as_string_opt::<i32>() {
            Some(s) => out.extend(s.iter().map(|v| v.map(str::to_owned))),
            None => out.extend(col.as_string_view().iter().map(|v| v.map(str::to_owned))),
        }
    }
    out
}

/// The `event_id` of every row of the Parquet file at `path`.
fn event_ids(path: &Path) -> Vec<String> {
    texts(path, "event_id").into_iter().flatten().collect()
}

/// The keys compaction manifests at `root` name as inputs: files whose rows
/// are in that compaction's outputs.
fn replaced(root: &Path) -> std::collections::HashSet<String> {
    let mut keys = std::collections::HashSet::new();
    if !root.join(ledger_ingest::MANIFEST_PREFIX).exists() {
        return keys;
    }
    for key in common::files_under(root, ledger_ingest::MANIFEST_PREFIX) {
        let m =
            ledger_ingest::Manifest::parse(&key, &std::fs::read(root.join(&key)).unwrap()).unwrap();
        keys.extend(m.inputs.into_iter().map(|f| f.key));
    }
    keys
}

/// A stream as the proof keys it: table (from the file's key), stream, key.
type StreamId = (String, String, String);

/// Every row of every lake file at `root`: its stream, seq and hash.
fn lake_rows(root: &Path) -> Vec<(StreamId, u64, String)> {
    lake_rows_checked(root)
        .into_iter()
        .map(|(id, seq, hash, _)| (id, seq, hash))
        .collect()
}

/// [`lake_rows`], each with what its content hashes to.
fn lake_rows_checked(root: &Path) -> Vec<(StreamId, u64, String, String)> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut rows = Vec::new();
    if !root.join("events").exists() {
        return rows;
    }
    for key in common::files_under(root, "events") {
        let table = key.split('/').nth(1).unwrap().to_owned();
        let file = std::fs::File::open(root.join(&key)).unwrap();
        for batch in ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
        {
            let batch = batch.unwrap();
            let text = |name: &str| -> Vec<Option<String>> {
                let col = batch.column_by_name(name).unwrap();
                match col.as_string_opt::<i32>() {
                    Some(s) => s.iter().map(|v| v.map(str::to_owned)).collect(),
                    None => col
                        .as_string_view()
                        .iter()
                        .map(|v| v.map(str::to_owned))
                        .collect(),
                }
            };
            let (stream, keys, hashes) = (text("stream"), text("stream_key"), text("hash"));
            // The proof's own columns (string views) to hash each row.
            let viewed = {
                use datafusion::arrow::compute::cast;
                use datafusion::arrow::datatypes::DataType;
                let columns = batch
                    .columns()
                    .iter()
                    .map(|c| match c.data_type() {
                        DataType::Utf8 => cast(c, &DataType::Utf8View).unwrap(),
                        _ => c.clone(),
                    })
                    .collect::<Vec<_>>();
                let fields = batch
                    .schema()
                    .fields()
                    .iter()
                    .zip(&columns)
                    .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
                    .collect::<Vec<_>>();
                let schema = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(fields));
                datafusion::arrow::record_batch::RecordBatch::try_new(schema, columns).unwrap()
            };
            let cols = ledger_reconcile::rows::Cols::from_batch(&viewed).unwrap();
            let seqs = batch
                .column_by_name("seq")
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone();
            for i in 0..batch.num_rows() {
                if let (Some(s), Some(k), Some(h), true) =
                    (&stream[i], &keys[i], &hashes[i], seqs.is_valid(i))
                {
                    let id = (table.clone(), s.clone(), k.clone());
                    let content = cols.view(i).compute_hash();
                    rows.push((id, seqs.value(i) as u64, h.clone(), content));
                }
            }
        }
    }
    rows
}

/// The hashes a stream's seq was proved with, by stream and seq.
type Versions = std::collections::BTreeMap<(StreamId, u64), std::collections::BTreeSet<String>>;

/// What the lake owes, kept as the proof keeps it but from the lake's
/// files alone: each stream's last seq and its hashes there after a night,
/// the versions of every seq with more than one (a conflict: the chain
/// follows one), and the seqs a night found the lake no longer holds.
#[derive(Default)]
struct Owing {
    tails: std::collections::BTreeMap<StreamId, (u64, std::collections::BTreeSet<String>)>,
    conflicts: Versions,
    owed: Versions,
    /// Every seq of every stream a night saw in the lake.
    seen: std::collections::BTreeSet<(StreamId, u64)>,
    /// Of each row that failed its hash the last night, by its recorded
    /// hash and what its content hashes to, what is owed of it
    /// (`ledger_reconcile::unproved`): its recorded hash when a row at its
    /// seq that hashes to it records it, or the night before proved that
    /// hash there (as proved, or as owed), or proved the stream up to that
    /// seq or past it with no row there that hashes to its own hash; its
    /// content when the night before proved what that hashes to there;
    /// else as written (`unproved::as_written`); the night before's mark of
    /// the same row first. A tail or conflict judged owes a hash recorded
    /// only by such rows, none owing it, as they owe.
    marks: std::collections::BTreeMap<
        (StreamId, u64, String),
        std::collections::BTreeMap<String, Owes>,
    >,
}

impl Owing {
    /// Checks a night's findings about proved rows (`found`, sorted) on the
    /// lake at `root`: every one [`Owing::night`] names is there, and any
    /// other is a `proved_rows_missing` at a seq an earlier night saw in
    /// the lake that the lake no longer holds, though it holds rows of the
    /// stream after it: the first row of a stretch in a lost file
    /// (`retained::LostStarts`; which of a lost file's rows those are is
    /// the notes', so not modelled here). Returns how many such.
    fn check(
        &mut self,
        root: &Path,
        found: &[(&'static str, String, u64)],
    ) -> Result<usize, String> {
        let seen = std::mem::take(&mut self.seen);
        let rows = lake_rows(root);
        let want = self.night(root);
        if let Some(w) = want.iter().find(|w| !found.contains(w)) {
            return Err(format!("{w:?} not found: {found:?}, want {want:?}"));
        }
        let mut extra = 0;
        for f in found.iter().filter(|f| !want.contains(f)) {
            let (code, key, seq) = (f.0, &f.1, f.2);
            let id = seen
                .iter()
                .map(|(id, _)| id)
                .find(|id| id.2 == *key)
                .ok_or_else(|| format!("{f:?}: no stream {key} was seen"))?;
            let held = |s: u64| rows.iter().any(|r| r.0 == *id && r.1 == s);
            let after = rows.iter().any(|r| r.0 == *id && r.1 > seq);
            if code != "proved_rows_missing"
                || !seen.contains(&(id.clone(), seq))
                || held(seq)
                || !after
            {
                return Err(format!(
                    "{f:?}: not a seq seen before that the lake lacks in the middle of the \
                     stream (found {found:?}, want {want:?})"
                ));
            }
            extra += 1;
        }
        self.seen = seen;
        self.seen
            .extend(rows.into_iter().map(|(id, seq, _)| (id, seq)));
        Ok(extra)
    }

    /// The findings (code, stream key, seq) a night on the lake at `root`
    /// reports about proved rows, sorted: every tail and every conflict's
    /// versions the last night proved that the lake no longer holds, and
    /// every seq owed before that it still does not (two of a stream
    /// missing from the same seq on are one finding). (A run judges only
    /// what it could have lost: all of it after lost files, that of the
    /// streams it re-proved, what is owed; a seq not held is always among
    /// them.) Then moves to the night.
    fn night(&mut self, root: &Path) -> Vec<(&'static str, String, u64)> {
        use std::collections::BTreeSet;
        let checked = lake_rows_checked(root);
        let rows: Vec<(StreamId, u64, String)> = checked
            .iter()
            .map(|(id, seq, h, _)| (id.clone(), *seq, h.clone()))
            .collect();
        // What the last night proved at each seq, as it proved it.
        let proved: Versions = std::mem::take(&mut self.tails)
            .into_iter()
            .map(|(id, (seq, proved))| ((id, seq), proved))
            .chain(std::mem::take(&mut self.conflicts))
            .collect();
        // As it owes it.
        let mut judged = Versions::new();
        for ((id, seq), hashes) in &proved {
            let mark = |h: &String| self.marks.get(&(id.clone(), *seq, h.clone()));
            let owed: BTreeSet<String> = hashes
                .iter()
                .flat_map(|h| match mark(h) {
                    Some(rows) => rows
                        .iter()
                        .flat_map(|(c, owes)| owes.hashes(h, c))
                        .map(str::to_owned)
                        .collect(),
                    None => vec![h.clone()],
                })
                .collect();
            judged.insert((id.clone(), *seq), owed);
        }
        // A damaged row whose content was proved owes it where it is.
        let mut proved = proved;
        for ((id, seq, h), rows) in &self.marks {
            for (c, owes) in rows.iter().filter(|(_, o)| o.content() && *seq > 0) {
                let hashes: Vec<String> =
                    owes.hashes(h, c).into_iter().map(str::to_owned).collect();
                judged
                    .entry((id.clone(), *seq))
                    .or_default()
                    .extend(hashes.clone());
                proved.entry((id.clone(), *seq)).or_default().extend(hashes);
            }
        }
        let mut proved_there = proved.clone();
        for (at, owed) in &judged {
            proved_there
                .get_mut(at)
                .unwrap()
                .extend(owed.iter().cloned());
        }
        let mut reach: std::collections::BTreeMap<StreamId, u64> = Default::default();
        for (at, owed) in std::mem::take(&mut self.owed) {
            proved_there
                .entry(at.clone())
                .or_default()
                .extend(owed.iter().cloned());
            judged.insert(at, owed);
        }
        for (id, seq) in proved_there.keys() {
            let last = reach.entry(id.clone()).or_default();
            *last = (*last).max(*seq);
        }
        // This night's marks.
        let hashes_to_itself = |id: &StreamId, seq: u64, h: Option<&String>| {
            checked
                .iter()
                .any(|r| r.0 == *id && r.1 == seq && r.2 == r.3 && h.is_none_or(|h| r.2 == *h))
        };
        let mut marks: std::collections::BTreeMap<_, std::collections::BTreeMap<String, Owes>> =
            Default::default();
        for (id, seq, h, content) in checked.iter().filter(|r| r.2 != r.3) {
            let key = (id.clone(), *seq, h.clone());
            let there = |x: &String| {
                proved_there
                    .get(&(id.clone(), *seq))
                    .is_some_and(|p| p.contains(x))
            };
            let earlier = self.marks.get(&key).and_then(|rows| rows.get(content));
            let owes = if hashes_to_itself(id, *seq, Some(h)) {
                Owes::Recorded
            } else if *seq == 0 {
                Owes::AsWritten
            } else if let Some(&owes) = earlier {
                owes
            } else if there(h) {
                Owes::Recorded
            } else if there(content) {
                Owes::Content
            } else if reach.get(id).is_some_and(|&last| last >= *seq)
                && !hashes_to_itself(id, *seq, None)
            {
                Owes::Recorded
            } else {
                Owes::AsWritten
            };
            let owes = match *seq > 0 && there(content) {
                true => owes.and(Owes::Content),
                false => owes,
            };
            let m = marks
                .entry(key)
                .or_default()
                .entry(content.clone())
                .or_insert(owes);
            *m = (*m).and(owes);
        }
        self.marks = marks;
        let mut found = Vec::new();
        for ((id, seq), proved) in judged {
            let ends = rows
                .iter()
                .filter(|r| r.0 == id)
                .map(|r| r.1)
                .max()
                .unwrap_or(0);
            // The hashes there, with what each row's content hashes to.
            let at: std::collections::BTreeSet<String> = checked
                .iter()
                .filter(|r| r.0 == id && r.1 == seq)
                .flat_map(|r| [r.2.clone(), r.3.clone()])
                .collect();
            if seq == 0 || (!at.is_empty() && proved.is_subset(&at)) {
                continue;
            }
            found.push(match (at.is_empty(), ends < seq) {
                (true, true) => (id.clone(), "proved_rows_missing", ends + 1),
                (true, false) => (id.clone(), "proved_rows_missing", seq),
                (false, _) => (id.clone(), "proved_row_changed", seq),
            });
            self.owed.insert((id, seq), proved);
        }
        let mut versions = Versions::new();
        for (id, seq, hash) in rows {
            let tail = self.tails.entry(id.clone()).or_default();
            if seq > tail.0 {
                *tail = (seq, Default::default());
            }
            if seq == tail.0 {
                tail.1.insert(hash.clone());
            }
            versions.entry((id, seq)).or_default().insert(hash);
        }
        self.conflicts = versions.into_iter().filter(|(_, h)| h.len() > 1).collect();
        // A seq still owed is owed with the evidence this night proved
        // there: a conflict's versions, a damaged row's content.
        for ((id, seq), owed) in self.owed.iter_mut().filter(|(_, o)| !o.is_empty()) {
            if let Some(versions) = self.conflicts.get(&(id.clone(), *seq)) {
                owed.extend(versions.iter().cloned());
            }
            for ((mid, mseq, h), rows) in &self.marks {
                if mid != id || mseq != seq {
                    continue;
                }
                for (c, owes) in rows.iter().filter(|(_, o)| o.content()) {
                    owed.extend(owes.hashes(h, c).into_iter().map(str::to_owned));
                }
            }
        }
        found.sort();
        found.dedup();
        let mut found: Vec<_> = found
            .into_iter()
            .map(|(id, code, seq)| (code, id.2, seq))
            .collect();
        found.sort();
        found
    }
}

/// Every lake file at `root` with its bytes.
fn lake_files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    common::files_under(root, "events")
        .into_iter()
        .map(|key| {
            let bytes = std::fs::read(root.join(&key)).unwrap();
            (key, bytes)
        })
        .collect()
}

/// Random rounds of the nightly flow on damaged histories: each round a
/// generated history (random size, one or several date partitions, sagas in
/// progress in some) is cut into nights at random points; a few events of a
/// night arrive only the next night (late), a night lands as one to three
/// queue batches (files whose streams overlap), some nights also redeliver
/// earlier events (plain duplicates); random damage (`corrupt::mutate`:
/// changed amounts, balances, kinds, currencies, legs, dropped and resealed
/// events…) is applied either to the history as delivered, each damaged file
/// landing on the night of its newest event, or to the live lake between
/// nights (proved files rewritten), and some nights a proved file is deleted
/// outright; some nights compact the lake first (now and then stopping
/// half-way, as a crash would). Every
/// night the run resumed from the last night's checkpoint must reach exactly
/// the verdicts of a full proof of the same lake (in a random variant of the
/// full proof's scheduling), damage to proved files included: a proved file
/// rewritten is a version lost (no compaction manifest accounts for it), so
/// the night proves the lake in full (docs/RECONCILE.md, "Proved files that
/// are gone"). `RECONCILE_INCR_ROUNDS`
/// (default 20) and `RECONCILE_INCR_SEED` for more or other rounds,
/// `RECONCILE_INCR_OPERATIONS` (default 300) for longer histories; a failure
/// names the round's seed and its damage.
#[test]
fn damaged_histories_delivered_night_by_night_reach_a_full_proofs_verdicts() {
    damaged_rounds(
        env_u64("RECONCILE_INCR_ROUNDS", 20),
        env_u64("RECONCILE_INCR_SEED", 0),
        env_u64("RECONCILE_INCR_OPERATIONS", 300),
    );
}

/// A round a deeper run of the test above found (seed 5965, histories of
/// up to 400 operations): a settled transfer with a second version of its
/// seq 1 (a conflict, whose versions the checkpoint owes) and its proved
/// tail at seq 2, its file then deleted. Its tail went unjudged: the
/// archive's walk passed over it for the conflict owed at another seq, and
/// the night did not say its seq 2 was missing.
#[test]
fn a_settled_transfers_tail_is_judged_beside_a_conflict_it_owes() {
    damaged_rounds(1, 5965, 400);
}

/// Another (seed 100069): a gap right after a row made invalid, the row in
/// a file an earlier night proved and the gap's next row in a later one. A
/// gap's movement judged by the row *before* it (in the chunk, or not)
/// made the resumed run differ from the full one.
#[test]
fn a_gap_after_an_invalid_row_is_the_same_resumed_and_full() {
    damaged_rounds(1, 100069, 350);
}

/// `rounds` rounds of [`damaged_histories_delivered_night_by_night_reach_a_full_proofs_verdicts`]
/// from the seed `first`, with histories of up to `most_operations`.
fn damaged_rounds(rounds: u64, first: u64, most_operations: u64) {
    let (mut reopened, mut late_nights, mut violated_nights) = (0, 0, 0);
    let (mut rewritten, mut deleted, mut lost_nights, mut pending_nights) = (0, 0, 0, 0);
    let (mut owed_nights, mut lost_starts) = (0, 0);
    for seed in first..first + rounds {
        let mut state = ledger_core::retry::splitmix64(seed ^ 0x6e69_6768_7473) | 1;
        let mut rng = |n: u64| xorshift(&mut state) % n.max(1);
        let dir = tempfile::tempdir().unwrap();
        let (staging, root, ckpt) = (
            dir.path().join("staging"),
            dir.path().join("lake"),
            dir.path().join("checkpoint"),
        );
        let operations = 80 + rng(most_operations.saturating_sub(80).max(1)) as usize;
        let events = generate_events(&GenConfig {
            seed: 1_000 + seed,
            accounts: 3 + rng(6) as usize,
            operations,
            batches: 1,
            duplicates: 0,
            // One date, or a history over several days (the proof by date).
            step_ms: [ledger_reconcile::gen::GEN_STEP_MS, 1_800_000][rng(2) as usize],
            in_flight: [0, 0, 6][rng(3) as usize],
        })
        .0;
        // Random cut points: 2 to 5 nights.
        let nights = 2 + rng(4) as usize;
        let mut cuts: Vec<usize> = (1..nights)
            .map(|_| 1 + rng(events.len() as u64 - 1) as usize)
            .collect();
        cuts.sort_unstable();
        cuts.insert(0, 0);
        cuts.push(events.len());
        let mut night_of: std::collections::HashMap<String, usize> = Default::default();
        let mut late: Vec<&Event> = Vec::new();
        for n in 0..nights {
            let mut batch: Vec<&Event> = std::mem::take(&mut late);
            for e in &events[cuts[n]..cuts[n + 1]] {
                // One event in 40 of a night that has a next one arrives then.
                if n + 1 < nights && rng(40) == 0 {
                    late.push(e);
                } else {
                    batch.push(e);
                }
            }
            if n > 0 && rng(3) == 0 {
                // A redelivered slice of earlier nights' events.
                let at = rng(cuts[n] as u64) as usize;
                batch.extend(events[at..cuts[n].min(at + 25)].iter());
            }
            if !late.is_empty() && n + 1 < nights {
                late_nights += 1;
            }
            for e in &batch {
                night_of.entry(e.event_id.clone()).or_insert(n);
            }
            // One to three queue batches a night, each its own files.
            let parts = 1 + rng(3) as usize;
            for (k, part) in batch.chunks(batch.len().div_ceil(parts).max(1)).enumerate() {
                deliver(&staging, part, &format!("s{seed}n{n}b{k}"));
            }
        }
        // Damage to the history before it is delivered (what the edge or the
        // queue might hand the lake), or, in other rounds, to the live lake
        // between nights (files already proved rewritten).
        let in_place = rng(2) == 0;
        let edits = if in_place {
            Vec::new()
        } else {
            ledger_reconcile::corrupt::mutate(&staging, seed, rng(5) as usize).unwrap()
        };
        // Each file of the damaged history lands on the night of its newest
        // event (an event the damage added: the last night).
        let mut landing: Vec<Vec<String>> = vec![Vec::new(); nights];
        for key in common::files_under(&staging, "events") {
            let n = event_ids(&staging.join(&key))
                .iter()
                .map(|id| *night_of.get(id).unwrap_or(&(nights - 1)))
                .max()
                .unwrap_or(nights - 1);
            landing[n].push(key);
        }
        // When each night's last landed event was committed.
        let mut landed_until = vec![0_i64; nights];
        for e in &events {
            if let Some(&n) = night_of.get(&e.event_id) {
                landed_until[n] = landed_until[n].max(e.occurred_at_ms);
            }
        }
        for n in 1..nights {
            landed_until[n] = landed_until[n].max(landed_until[n - 1]);
        }
        let live = rng(2) == 0;
        let settle_ms = [0, 0, 600_000, 3_600_000][rng(4) as usize];
        // How the nights' keyed scans find their stretches: enumerated (the
        // default), every history matched, or both in one scan (a cap of 3
        // leaves most histories to match). By the seed: the draws above stay
        // the seed's.
        let wanted_starts_max = [opts().wanted_starts_max, 0, 3][(seed % 3) as usize];
        let mut context = format!(
            "seed {seed}: {} events, {nights} nights, live {live}, settle {settle_ms} ms, \
             wanted starts max {wanted_starts_max}, damage {edits:?}",
            events.len()
        );
        // Whether the lake was damaged in place since the last night.
        let mut damaged = false;
        let mut owing = Owing::default();
        for (n, keys) in landing.iter().enumerate() {
            for key in keys {
                let to = root.join(key);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(staging.join(key), to).unwrap();
            }
            if n > 0 && rng(4) == 0 {
                // Compaction refuses a partition with a damaged file and
                // leaves it as it was.
                // Now and then a compaction that crashed half-way (outputs
                // and manifest written, no input or one input deleted).
                let stop_at = match rng(6) {
                    0 => ledger_compact::StopAt::AfterWrite,
                    1 => ledger_compact::StopAt::AfterFirstDelete,
                    _ => ledger_compact::StopAt::Never,
                };
                for outcome in compact_each(&root, stop_at) {
                    match outcome {
                        Ok(()) | Err(ledger_compact::CompactError::Damaged(_)) => {}
                        Err(e) => panic!("{context}: compaction: {e}"),
                    }
                }
            }
            if !root.exists() {
                continue; // nothing landed yet
            }
            // Judged a year later, or (a live ledger's night) shortly after
            // the night's last event, with a settle window in some rounds.
            let night_opts = Options {
                now_ms: if live {
                    // Mostly within the window of the night's last rows.
                    landed_until[n] + rng(settle_ms.max(600_000) as u64 * 3 / 2) as i64
                } else {
                    NOW_MS
                },
                settle_ms,
                wanted_starts_max,
                ..opts()
            };
            // `--full` past the same checkpoint (a copy of its files): what
            // the night judges of the proved tails, `--full` judges alike.
            let side = dir.path().join(format!("side{n}"));
            let full_owing = ckpt.exists().then(|| {
                std::fs::create_dir_all(&side).unwrap();
                for e in std::fs::read_dir(dir.path()).unwrap() {
                    let path = e.unwrap().path();
                    let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                    if path.is_file() && name.starts_with("checkpoint") {
                        std::fs::copy(&path, side.join(&name)).unwrap();
                    }
                }
                full_night_with(&root, &side.join("checkpoint"), &night_opts)
            });
            let inc = night_with(&root, &ckpt, &night_opts);
            if let Some(full_owing) = full_owing {
                assert_eq!(
                    verdicts(&full_owing),
                    verdicts(&inc),
                    "{context}: night {n}: --full past the checkpoint differs from the resumed night ({:?})",
                    inc.incremental
                );
                let (f, i) = (full_owing.incremental.unwrap(), inc.incremental.unwrap());
                assert_eq!(
                    (f.files_gone, f.files_lost),
                    (i.files_gone, i.files_lost),
                    "{context}: night {n}: custody"
                );
                std::fs::remove_dir_all(&side).unwrap();
            }
            // The files this night proved.
            let proved_files = common::files_under(&root, "events");
            // The full proof in any of its variants (the CLI's: hand-off on,
            // split asked late, one date at a time) is the same proof.
            let variant = Options {
                handoff: rng(3) != 0,
                split_first: rng(2) == 0,
                by_date: rng(3) != 0,
                ..night_opts
            };
            let fresh = full_with(&root, &variant);
            let i = inc.incremental.unwrap_or_default();
            // What the night found of the proved tails the lake no longer
            // holds is what the lake's files say.
            let mut found = owed(&inc);
            found.sort();
            lost_starts += owing.check(&root, &found).unwrap_or_else(|e| {
                panic!("{context}: night {n}: the proved tails judged ({i:?}): {e}")
            });
            owed_nights += usize::from(!found.is_empty());
            assert_eq!(
                verdicts(&without_owed(&inc)),
                verdicts(&fresh),
                "{context}: night {n}: the resumed run differs from the full proof \
                 (handoff {}, split_first {}, by_date {}; {i:?})",
                variant.handoff,
                variant.split_first,
                variant.by_date
            );
            if std::mem::take(&mut damaged) {
                // Proved files rewritten: their versions are lost, so the
                // night was a proof in full.
                assert!(
                    i.files_lost > 0 && i.reproved_in_full,
                    "{context}: night {n}: {i:?}"
                );
                lost_nights += 1;
            }
            reopened += i.streams_reopened;
            violated_nights += usize::from(!fresh.holds);
            pending_nights += usize::from(fresh.pending > 0);
            if in_place && n + 1 < nights && rng(2) == 0 {
                let before = lake_files(&root);
                // `mutate` refuses a lake once earlier damage left an invalid row.
                if let Ok(more) = ledger_reconcile::corrupt::mutate(
                    &root,
                    seed * 31 + n as u64,
                    1 + rng(3) as usize,
                ) {
                    // A file the night proved is gone or holds other bytes.
                    let after = lake_files(&root);
                    damaged = before
                        .iter()
                        .any(|(k, b)| after.get(k) != Some(b) && !replaced(&root).contains(k));
                    rewritten += 1;
                    context.push_str(&format!("; after night {n}: {more:?}"));
                }
            }
            if n + 1 < nights && rng(12) == 0 {
                // A proved file deleted outright (lost evidence).
                let keys = common::files_under(&root, "events");
                if keys.len() > 1 {
                    let victim = &keys[rng(keys.len() as u64) as usize];
                    std::fs::remove_file(root.join(victim)).unwrap();
                    // Unless the damage above had just added it (the night
                    // never proved it), or a compaction that stopped half-way
                    // had already replaced it: then its rows are in that
                    // compaction's outputs, and the deletion is the one it
                    // would have made.
                    damaged |= proved_files.contains(victim) && !replaced(&root).contains(victim);
                    deleted += 1;
                    context.push_str(&format!("; after night {n}: {victim} deleted"));
                }
            }
        }
    }
    eprintln!(
        "{rounds} rounds: {reopened} streams reopened, {late_nights} nights with late events, \
         {violated_nights} nights violated, {pending_nights} with findings pending, \
         {rewritten} lakes damaged in place, {deleted} proved files deleted ({lost_nights} \
         nights proved in full for a lost file), {owed_nights} nights with proved rows missing \
         ({lost_starts} findings of a lost file's row in the middle of a stream)"
    );
    // The rounds went through the paths they are for.
    if rounds >= 20 {
        assert!(reopened > 0, "no stream was reopened in {rounds} rounds");
        assert!(late_nights > 0 && violated_nights > 0 && rewritten > 0 && pending_nights > 0);
        assert!(
            lost_nights > 0 && owed_nights > 0 && lost_starts > 0,
            "no night lost a proved file, or none lost proved rows, or none in the middle of a \
             stream, in {rounds} rounds"
        );
    }
}

/// The live holds a night resumes from are the checkpoint's: a hold
/// released on a night after the night that proved its release is found at
/// the second release, as a full proof finds it.
#[test]
fn a_hold_released_again_on_a_later_night_is_found_against_the_checkpoints_live_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("ckpt"));
    let cfg = GenConfig {
        in_flight: 40,
        ..common::config()
    };
    ledger_reconcile::gen::generate_lake(&cfg, &root).unwrap();
    // Before the in-flight transfers' deadlines: a live ledger.
    let at = common::live_ms(&cfg);
    let opts = Options {
        now_ms: at,
        ..opts()
    };
    assert!(night_with(&root, &ckpt, &opts).holds);
    // A copy of the checkpoint and its files, made version 9.
    let old = dir.path().join("v9");
    std::fs::create_dir(&old).unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("ckpt") {
            std::fs::copy(e.path(), old.join(e.file_name())).unwrap();
        }
    }
    let injected = inject(&root, Class::ReleasedTwice, at).unwrap();
    // From a version-9 checkpoint (live holds built by the earlier rules,
    // which may lack a hold), the night proves the lake from its first
    // event once, and finds it as a full proof does.
    let v9 = old.join("ckpt");
    downgrade_to_9(&v9);
    let r = night_with(&root, &v9, &opts);
    assert!(r.incremental.as_ref().unwrap().reproved_in_full);
    assert!(!r.holds, "{}", verdicts(&r));
    let r = night_with(&root, &ckpt, &opts);
    let mut found: Vec<(&str, &str, Option<&str>)> = r
        .checks
        .iter()
        .flat_map(|c| {
            c.findings
                .iter()
                .map(move |f| (c.name, f.code, f.event_id.as_deref()))
        })
        .collect();
    found.sort();
    let mut expected: Vec<(&str, &str, Option<&str>)> = injected
        .expected
        .iter()
        .map(|e| (e.check, e.code, e.event_id.as_deref()))
        .collect();
    expected.sort();
    assert_eq!(found, expected, "{}", injected.description);
    let i = r.incremental.unwrap();
    assert!(!i.reproved_in_full && i.streams_reopened == 0, "{i:?}");
    assert_eq!(verdicts(&r), verdicts(&full_with(&root, &opts)));
}

/// The checkpoint at `ckpt` as version 9 wrote it (no account flagged
/// `holds_unknown`); sealed again.
fn downgrade_to_9(ckpt: &Path) {
    let mut header = current_header(ckpt);
    header["version"] = 9.into();
    strip_13(&mut header);
    header.as_object_mut().unwrap().remove("entry_key");
    for s in header["streams"].as_array_mut().unwrap() {
        if let Some(a) = s["account"].as_object_mut() {
            a.remove("holds_unknown");
        }
    }
    // Its files of streams noted the streams alone (no seq).
    let lake = std::path::PathBuf::from(header["lake"].as_str().unwrap());
    let mut plain = ledger_reconcile::presence::Presence::default();
    for r in header["streams_files"].as_array().unwrap() {
        for k in r["keys"].as_array().unwrap() {
            let k = k.as_str().unwrap();
            plain.add(k, &plain_streams(&lake, k), None);
        }
    }
    let refs = ledger_reconcile::presence_files::save(ckpt, &[], &plain, &|_| true).unwrap();
    let mut refs = serde_json::to_value(refs).unwrap();
    for r in refs.as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("starts");
    }
    header["streams_files"] = refs;
    reseal(ckpt, 9, &serde_json::to_vec(&header).unwrap());
}

/// Removes what version 13 added to a checkpoint's header: the entry
/// store's segments and generation, and each account's `entries_since`.
fn strip_13(header: &mut serde_json::Value) {
    let h = header.as_object_mut().unwrap();
    h.remove("entry_segments");
    h.remove("entry_generation");
    for s in h["streams"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("entries_since");
    }
}

/// The checkpoint at `ckpt` as version 12 wrote it: every account's entry
/// ids in a third binary section, read from the entry store (whose files
/// are then removed); sealed again.
fn downgrade_to_12(ckpt: &Path) {
    use ledger_reconcile::entry_store::{EntrySegmentRef, EntryStore};
    let mut header = current_header(ckpt);
    uncount_streams_files(ckpt, &mut header);
    let refs: Vec<EntrySegmentRef> =
        serde_json::from_value(header["entry_segments"].clone()).unwrap();
    let dir = ckpt.parent().unwrap();
    let store = EntryStore::open(dir, &refs, header["entry_generation"].as_u64().unwrap()).unwrap();
    let since: std::collections::HashMap<String, u64> = header["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| Some((s["key"].as_str()?.to_owned(), s["entries_since"].as_u64()?)))
        .collect();
    let pairs = store.pairs(&|a| since.get(a).copied()).unwrap();
    assert!(
        !pairs.is_empty(),
        "the store holds the first night's entry ids"
    );
    header["version"] = 12.into();
    strip_13(&mut header);
    let mut w = ledger_reconcile::codec::Writer::default();
    w.count(pairs.len());
    for (account, p) in pairs {
        let ids = ledger_reconcile::checks::entries::EntryIds::from_sorted(p).unwrap();
        w.entries(&account, &ids);
    }
    reseal_with(ckpt, 12, &serde_json::to_vec(&header).unwrap(), &w.buf);
    for r in refs {
        std::fs::remove_file(dir.join(r.file)).unwrap();
    }
}

/// The checkpoint at `ckpt` as version `version` (17 or 18) wrote it (the
/// same layout, its files of streams counted, no account keeping its
/// opened limit); sealed again.
fn downgrade_to_17_or_18(ckpt: &Path, version: u32) {
    let mut header = current_header(ckpt);
    header["version"] = version.into();
    strip_limits(&mut header);
    reseal(ckpt, version, &serde_json::to_vec(&header).unwrap());
}

/// Removes what version 19 added to a checkpoint's header: each account's
/// `limit` (an object with the account state's `fold` and `terms`).
fn strip_limits(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if m.contains_key("fold") && m.contains_key("terms") {
                assert!(
                    m.remove("limit").is_some(),
                    "an account state keeps its limit"
                );
            }
            m.values_mut().for_each(strip_limits);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_limits),
        _ => {}
    }
}

/// The checkpoint at `ckpt` as version `version` (14, 15 or 16) wrote it
/// (the same layout, its files of streams in layout 2: no stretch's rows
/// counted); sealed again.
fn downgrade_to_same_layout(ckpt: &Path, version: u32) {
    let mut header = current_header(ckpt);
    header["version"] = version.into();
    uncount_streams_files(ckpt, &mut header);
    reseal(ckpt, version, &serde_json::to_vec(&header).unwrap());
}

/// The files of streams the checkpoint header `header` names (beside
/// `ckpt`) written again as one in layout 2, as checkpoint versions 9 to
/// 16 wrote them: the same stretches, their rows not counted.
fn uncount_streams_files(ckpt: &Path, header: &mut serde_json::Value) {
    use ledger_reconcile::presence_files::{read, save, StreamsRef};
    let dir = ckpt.parent().unwrap();
    let refs: Vec<StreamsRef> = serde_json::from_value(header["streams_files"].clone()).unwrap();
    let mut uncounted = ledger_reconcile::presence::Presence::default();
    for r in &refs {
        assert!(r.starts);
        let counted = read(dir, r).unwrap();
        for k in counted.files() {
            assert!(counted.rows(k).is_some(), "version 17 counts");
            uncounted.add(k, counted.get(k), None);
        }
        std::fs::remove_file(dir.join(&r.file)).unwrap();
    }
    let written = save(ckpt, &[], &uncounted, &|_| true).unwrap();
    for r in &written {
        let bytes = std::fs::read(dir.join(&r.file)).unwrap();
        assert_eq!(&bytes[8..12], &2u32.to_le_bytes(), "layout 2");
    }
    header["streams_files"] = serde_json::to_value(written).unwrap();
}

/// The checkpoint at `ckpt` as version 13 wrote it (no open transfer's
/// `releasing` reason); sealed again.
fn downgrade_to_13(ckpt: &Path) {
    let mut header = current_header(ckpt);
    header["version"] = 13.into();
    uncount_streams_files(ckpt, &mut header);
    reseal(ckpt, 13, &serde_json::to_vec(&header).unwrap());
}

/// The checkpoint at `ckpt` as version 11 wrote it (no account's entry
/// ids); sealed again.
fn downgrade_to_11(ckpt: &Path) {
    let mut header = current_header(ckpt);
    header["version"] = 11.into();
    uncount_streams_files(ckpt, &mut header);
    strip_13(&mut header);
    let key = header.as_object_mut().unwrap().remove("entry_key").unwrap();
    assert_eq!(key.as_str().unwrap().len(), 32, "{key}");
    reseal(ckpt, 11, &serde_json::to_vec(&header).unwrap());
}

#[test]
fn a_deposit_posted_again_on_a_later_night_is_found_naming_the_first_posting() {
    // Resumed from a current checkpoint, and from ones written by older
    // rules (set aside: the night proves the lake in full once).
    for version in [22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11] {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half) = first_half_proved(dir.path(), 47, 160);
        match version {
            // The same rules, the streams in the header.
            21 => {
                current_header(&ckpt);
            }
            19 | 20 => {
                // The same layout and header: another copies' order (19),
                // holds unknown for good after a gap (19, 20).
                let mut header = current_header(&ckpt);
                header["version"] = version.into();
                reseal(&ckpt, version, &serde_json::to_vec(&header).unwrap());
            }
            17 | 18 => downgrade_to_17_or_18(&ckpt, version),
            14..=16 => downgrade_to_same_layout(&ckpt, version),
            13 => downgrade_to_13(&ckpt),
            12 => downgrade_to_12(&ckpt),
            11 => downgrade_to_11(&ckpt),
            _ => {}
        }
        // A deposit the first night proved, posted again after the
        // account's last event: every balance refolds, deposits add up.
        let first = events[..half]
            .iter()
            .find(|e| e.kind == "deposited")
            .unwrap()
            .clone();
        let last = events
            .iter()
            .rfind(|e| e.stream_key == first.stream_key)
            .unwrap();
        let mut again = Event::new(
            Stream::Account,
            &first.stream_key,
            last.seq + 1,
            "deposited",
            last.occurred_at_ms + 1_000,
            &last.hash,
        );
        again.currency = last.currency.clone();
        again.amount = first.amount;
        again.balance_after = last.balance_after.zip(first.amount).map(|(b, a)| b + a);
        again.held_after = last.held_after;
        again.overdraft_limit = last.overdraft_limit;
        again.entry_id = first.entry_id.clone();
        let again = again.seal();
        let mut second: Vec<&Event> = events[half..].iter().collect();
        second.push(&again);
        deliver(&root, &second, "b");
        let r = night(&root, &ckpt);
        let twice: Vec<(String, Option<String>)> = r
            .checks
            .iter()
            .filter(|c| c.name == "balance_integrity")
            .flat_map(|c| &c.findings)
            .filter(|f| f.code == "entry_posted_twice")
            .map(|f| (f.detail.clone(), f.event_id.clone()))
            .collect();
        assert_eq!(
            twice,
            [(
                format!(
                    "deposited entry {} was already posted at seq {}",
                    first.entry_id.as_deref().unwrap(),
                    first.seq
                ),
                Some(again.event_id.clone())
            )],
            "version {version}: {}",
            r.summary()
        );
        let i = r.incremental.unwrap();
        assert_eq!(i.reproved_in_full, version < 21, "version {version}: {i:?}");
        if version >= 21 {
            assert_eq!(i.streams_reopened, 0, "rows appended only");
            // The first posting is in the entry store only: the night read
            // the block that holds it.
            assert!(i.entry_blocks_read >= 1, "{i:?}");
        }
        assert_same(1, &r, &full(&root));
        // The checkpoint keeps the finding, and the entry: a night with
        // nothing new says the same.
        assert_same(2, &night(&root, &ckpt), &full(&root));
        // A third posting on a later night names the first again; then a
        // second version of the first posting's row reopens the account,
        // whose entries are rebuilt from its first event: still the same
        // as a full proof.
        let mut third = again.clone();
        third.seq += 1;
        third.event_id = ledger_events::event_id(Stream::Account, &first.stream_key, third.seq);
        third.prev_hash = again.hash.clone();
        third.occurred_at_ms += 1_000;
        third.balance_after = again.balance_after.zip(first.amount).map(|(b, a)| b + a);
        let third = third.seal();
        deliver(&root, &[&third], "c");
        let r = night(&root, &ckpt);
        assert_eq!(
            r.check("balance_integrity")
                .findings
                .iter()
                .filter(|f| f.code == "entry_posted_twice"
                    && f.detail.ends_with(&format!("at seq {}", first.seq)))
                .count(),
            2,
            "version {version}: {}",
            r.summary()
        );
        assert_same(3, &r, &full(&root));
        let mut other = first.clone();
        other.occurred_at_ms += 1;
        let other = other.seal();
        deliver(&root, &[&other], "d");
        let r = night(&root, &ckpt);
        assert!(
            r.incremental.unwrap().streams_reopened >= 1,
            "{}",
            r.summary()
        );
        assert_same(4, &r, &full(&root));
        // After the reopening, the account's ids count from that night's
        // generation of the entry store: a fourth posting still names the
        // first, once.
        let mut fourth = third.clone();
        fourth.seq += 1;
        fourth.event_id = ledger_events::event_id(Stream::Account, &first.stream_key, fourth.seq);
        fourth.prev_hash = third.hash.clone();
        fourth.occurred_at_ms += 1_000;
        fourth.balance_after = third.balance_after.zip(first.amount).map(|(b, a)| b + a);
        let fourth = fourth.seal();
        deliver(&root, &[&fourth], "e");
        let r = night(&root, &ckpt);
        assert!(
            r.check("balance_integrity")
                .findings
                .iter()
                .any(|f| f.code == "entry_posted_twice"
                    && f.event_id.as_deref() == Some(&fourth.event_id)),
            "version {version}: {}",
            r.summary()
        );
        assert_eq!(r.incremental.as_ref().unwrap().streams_reopened, 0);
        assert_same(5, &r, &full(&root));
    }
}

#[test]
fn a_stream_of_seq_0_rows_in_the_wrong_table_is_one_finding_however_many_nights_bring_them() {
    // Rows of seq 0 (each an invalid event) leave the stream's tail at 0:
    // the wrong table is still reported on the visit that starts it only.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(44, 3, 40);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    let at = events[0].occurred_at_ms;
    one_wrong_table_over_two_nights(&root, &ckpt, |night| {
        misplace_at_seq_0(&root, at + night as i64 + 1)
    });
}

/// A writer that puts a transfer's row of seq 0 (occurred at `at`) under
/// events/account/.
fn misplace_at_seq_0(root: &Path, at: i64) {
    let e = Event::new(
        Stream::Transfer,
        "t.acme.zero",
        0,
        "created",
        at,
        ledger_events::GENESIS_HASH,
    )
    .seal();
    write_in_table(root, &[e], "account");
}

/// The ingest files of `events` as they are (none checked: ingest's
/// validation is not on this path), in key order.
fn files_of(events: &[Event]) -> Vec<ledger_ingest::LakeFile> {
    let rows = events
        .iter()
        .map(|e| ledger_ingest::Row {
            event: e.clone(),
            conflict: false,
        })
        .collect();
    ledger_ingest::build_files(rows, ledger_ingest::FileLayer::Ingest).unwrap()
}

/// A foreign writer: `events` written as ingest writes them, each file put
/// under events/`table`/ instead of its own table's directory.
fn write_in_table(root: &Path, events: &[Event], table: &str) {
    for f in files_of(events) {
        let own = f.key.split('/').nth(1).unwrap().to_owned();
        assert_ne!(own, table, "{}", f.key);
        let moved = f
            .key
            .replacen(&format!("events/{own}/"), &format!("events/{table}/"), 1);
        write_object(root, &moved, &f.bytes).unwrap();
    }
}

#[test]
fn a_re_proof_of_a_stream_proved_at_seq_0_alone_reads_the_notes_it_checks() {
    // The account table's only reopened stream, a misplaced transfer stream
    // of seq-0 rows (its proved tail at 0), has a stretch a keyed check
    // wants (from seq 0: a_proved_files_footer_cannot_hide_a_streams_seq_0_rows_from_its_re_proof):
    // the night reads the account files' notes, and stops on an account
    // file's set damaged, as any night that needs them.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(44, 3, 40);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    let at = events[0].occurred_at_ms;
    misplace_at_seq_0(&root, at + 1);
    assert!(!night(&root, &ckpt).holds);
    // A byte of the first lake file's set (an account file's: the sets are
    // in key order after a 12-byte header).
    let streams = only_file(dir.path(), "prs");
    let mut bytes = std::fs::read(&streams).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&streams, &bytes).unwrap();
    misplace_at_seq_0(&root, at + 2);
    let name = root.to_str().unwrap();
    let resumed = runtime().block_on(async {
        let lake = Lake::open(name).unwrap();
        let prior = ProofState::load(&ckpt, name).unwrap();
        reconcile_from(&lake, &opts(), Some(prior)).await
    });
    let Err(e) = resumed else {
        panic!("the night went on without the damaged notes");
    };
    let e = e.to_string();
    assert!(e.contains("streams file") && e.contains("SHA-256"), "{e}");
}

#[test]
fn an_account_row_of_seq_0_delivered_again_is_judged_as_a_full_proof_judges_it() {
    // A deposit at seq 0 (an invalid event: its tail stays at 0) proved by
    // one night, then delivered again: as a plain copy, then as a second
    // version. The night re-proves the stream, as `--full` proves it: no
    // entry posted twice against itself, and the conflict is found.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(45, 3, 40);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    let at = events[0].occurred_at_ms;
    let write = |n: i64, tag: &str| {
        let mut e = Event::new(
            Stream::Account,
            "acme.zero",
            0,
            "deposited",
            at + n,
            ledger_events::GENESIS_HASH,
        );
        e.currency = Some("USD".into());
        e.amount = Some(100);
        e.balance_after = Some(100);
        e.held_after = Some(0);
        e.overdraft_limit = Some(0);
        e.entry_id = Some("dep:acme.zero:k".into());
        let rows = vec![ledger_ingest::Row {
            event: e.seal(),
            conflict: false,
        }];
        for f in ledger_ingest::build_files(rows, ledger_ingest::FileLayer::Ingest).unwrap() {
            // Another key for each delivery (the writer names a file by its
            // content): its first hex digit replaced.
            let at = f.key.find("/i-").unwrap() + 3;
            let key = format!("{}{tag}{}", &f.key[..at], &f.key[at + 1..]);
            write_object(&root, &key, &f.bytes).unwrap();
        }
    };
    let listed = || common::files_under(&root, "events/account").len();
    let before = listed();
    write(1, "a");
    assert_same(0, &night(&root, &ckpt), &full(&root));
    write(1, "b");
    assert_same(1, &night(&root, &ckpt), &full(&root));
    write(2, "c");
    assert_eq!(listed(), before + 3, "three lake files, each read");
    let r = night(&root, &ckpt);
    assert_same(2, &r, &full(&root));
    assert!(
        r.checks[1].findings.iter().any(|f| f.code == "conflict"),
        "{}",
        verdicts(&r)
    );
}

/// Across nights, as a full proof judges them: a `released` row delivered
/// the night after its `releasing` is judged against the reason the
/// checkpoint kept for that row (one repeats it, one gives another); a
/// hold placed and released on a later night for a failed transfer (settled
/// the night before, in the archive) is found when the new rows pull the
/// transfer back, and so is a release of no hold for another; a deposit beyond the ledger's amounts proved on the first
/// night is still reported on the nights after.
/// The transfer streams of `events` by id, each account's last event, and
/// whether an account's stream ends frozen (no hold or deposit then).
struct Streams<'e> {
    transfers: std::collections::BTreeMap<&'e str, Vec<&'e Event>>,
    last_of: std::collections::BTreeMap<&'e str, &'e Event>,
    events: &'e [Event],
}

impl<'e> Streams<'e> {
    fn of(events: &'e [Event]) -> Streams<'e> {
        let mut transfers = std::collections::BTreeMap::<&str, Vec<&Event>>::new();
        let mut last_of = std::collections::BTreeMap::new();
        for e in events {
            match e.stream {
                Stream::Transfer => transfers.entry(&e.stream_key).or_default().push(e),
                _ => {
                    last_of.insert(e.stream_key.as_str(), e);
                }
            }
        }
        Streams {
            transfers,
            last_of,
            events,
        }
    }

    fn frozen(&self, acc: &str) -> bool {
        self.events
            .iter()
            .rfind(|e| e.stream_key == acc && (e.kind == "frozen" || e.kind == "unfrozen"))
            .is_some_and(|e| e.kind == "frozen")
    }

    /// The `created` row of the first transfer whose kinds `fit` and whose
    /// source, not frozen and in its currency, can hold its amount after
    /// its last row, with that row.
    fn holdable(&self, fit: impl Fn(&[&Event]) -> bool) -> Option<(&'e Event, &'e Event)> {
        self.transfers
            .values()
            .filter(|evs| fit(evs))
            .find_map(|evs| {
                let (src, amount) = (evs[0].source.as_deref()?, evs[0].amount?);
                let last = self.last_of[src];
                let room = last.balance_after? - last.held_after? + last.overdraft_limit?;
                (room >= amount && !self.frozen(src) && last.currency == evs[0].currency)
                    .then_some((evs[0], last))
            })
    }
}

/// A hold of the amount of the transfer `created` placed on its source
/// after that account's `last` row, and its release after it.
fn hold_and_release(created: &Event, last: &Event) -> (Event, Event) {
    let leg = |e: &mut Event, held: i64| {
        e.amount = created.amount;
        e.held_after = e.held_after.map(|h| h + held);
        e.transfer_id = Some(created.stream_key.clone());
        e.counterparty = created.destination.clone();
    };
    let amount = created.amount.unwrap();
    let hold = ledger_reconcile::corrupt::next_event(last, "hold_placed", |e| leg(e, amount));
    let release =
        ledger_reconcile::corrupt::next_event(&hold, "hold_released", |e| leg(e, -amount));
    (hold, release)
}

#[test]
fn protocol_values_and_a_failed_transfers_hold_are_judged_across_nights() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(53, 8, 400);
    let streams = Streams::of(&events);
    let (transfers, last_of) = (&streams.transfers, &streams.last_of);
    let kinds = |evs: &[&Event]| evs.iter().map(|e| e.kind.clone()).collect::<Vec<_>>();
    let released: Vec<&Event> = transfers
        .values()
        .filter(|evs| kinds(evs) == ["created", "reserved", "releasing", "released"])
        .map(|evs| evs[3])
        .take(2)
        .collect();
    assert_eq!(released.len(), 2, "the history has two refused credits");
    let right = released[0].clone();
    let mut changed = released[1].clone();
    let other = if changed.reason.as_deref() == Some("account_frozen") {
        "unknown_account"
    } else {
        "account_frozen"
    };
    changed.reason = Some(other.to_owned());
    let changed = changed.seal();
    // A failed transfer whose source can hold its amount after its last row.
    let (failed, source) = streams
        .holdable(|evs| kinds(evs) == ["created", "failed"])
        .expect("the history has a failed transfer whose source can hold its amount");
    let (hold, release) = hold_and_release(failed, source);
    // A deposit beyond the ledger's amounts, on another account.
    let big = ledger_reconcile::checks::protocol::AMOUNT_MINOR_MAX + 1;
    let (_, depositor) = last_of
        .iter()
        .find(|(acc, _)| **acc != source.stream_key && !streams.frozen(acc))
        .unwrap();
    let deposit = ledger_reconcile::corrupt::next_event(depositor, "deposited", |e| {
        e.amount = Some(big);
        e.balance_after = e.balance_after.map(|b| b + big);
        e.entry_id = Some(format!("dep:{}:big", e.stream_key));
    });
    // A release of no hold (a tombstone) for another failed transfer, on a
    // source that none of the rows above is on.
    let (failed2, source2) = transfers
        .values()
        .filter(|evs| kinds(evs) == ["created", "failed"])
        .find_map(|evs| {
            let src = evs[0].source.as_deref()?;
            (src != source.stream_key && src != depositor.stream_key)
                .then(|| (evs[0], last_of[src]))
        })
        .expect("the history has a failed transfer on a third account");
    let tombstone = ledger_reconcile::corrupt::next_event(source2, "hold_released", |e| {
        e.amount = Some(0);
        e.transfer_id = Some(failed2.stream_key.clone());
        e.reason = Some("no_hold".to_owned());
    });

    // Night 1: the history without the two `released` rows, and the deposit.
    let mut first: Vec<&Event> = events
        .iter()
        .filter(|e| e.event_id != right.event_id && e.event_id != changed.event_id)
        .collect();
    first.push(&deposit);
    deliver(&root, &first, "a");
    let r = night(&root, &ckpt);
    assert_same(1, &r, &full(&root));
    let codes = |r: &Report| -> Vec<(&'static str, &'static str, Option<String>)> {
        let mut v: Vec<_> = r
            .checks
            .iter()
            .flat_map(|c| {
                c.findings
                    .iter()
                    .map(|f| (c.name, f.code, f.event_id.clone()))
            })
            .collect();
        v.sort();
        v
    };
    let beyond = (
        "protocol_values",
        "amount_out_of_range",
        Some(deposit.event_id.clone()),
    );
    // The two transfers wait at `releasing`: past their deadlines a year on.
    let mut expected: Vec<_> = [&right, &changed]
        .iter()
        .map(|e| {
            let at = ledger_events::event_id(Stream::Transfer, &e.stream_key, e.seq - 1);
            ("terminal_convergence", "dangling", Some(at))
        })
        .chain([beyond.clone()])
        .collect();
    expected.sort();
    assert_eq!(codes(&r), expected, "{}", r.summary());

    // Night 2: both `released` rows, the failed transfer's hold and its
    // release, and the other failed transfer's tombstone.
    deliver(&root, &[&right, &changed, &hold, &release, &tombstone], "b");
    let r = night(&root, &ckpt);
    expected = vec![
        beyond,
        (
            "protocol_values",
            "reason_changed",
            Some(changed.event_id.clone()),
        ),
        (
            "cross_stream_consistency",
            "failed_with_hold",
            Some(hold.event_id.clone()),
        ),
        (
            "cross_stream_consistency",
            "failed_with_release",
            Some(tombstone.event_id.clone()),
        ),
    ];
    expected.sort();
    assert_eq!(codes(&r), expected, "{}", r.summary());
    let i = r.incremental.unwrap();
    assert!(
        !i.reproved_in_full && i.streams_reopened == 0 && i.transfers_pulled >= 1,
        "rows appended only, the failed transfer pulled back: {i:?}"
    );
    assert_same(2, &r, &full(&root));
    // Nothing new: the same.
    assert_same(3, &night(&root, &ckpt), &full(&root));
}

/// A hold placed again on its source after its transfer was released, and
/// released again (`hold_after_end`, `release_after_end`), and a release of
/// no hold on a captured transfer's destination (`hold_on_wrong_account`),
/// arriving on a later night:
/// each transfer is pulled back from the archive and judged with every leg
/// its accounts hold, as a full proof judges it.
#[test]
fn rows_after_a_holds_end_and_a_release_off_the_source_are_judged_across_nights() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(53, 8, 400);
    let streams = Streams::of(&events);
    let (transfers, last_of) = (&streams.transfers, &streams.last_of);
    let kinds = |evs: &[&Event]| evs.iter().map(|e| e.kind.clone()).collect::<Vec<_>>();
    // A released transfer whose source can hold its amount again.
    let (released, source) = streams
        .holdable(|evs| evs.last().is_some_and(|e| e.kind == "released"))
        .expect("the history has a released transfer whose source can hold its amount");
    let t = released.stream_key.clone();
    let (hold, release) = hold_and_release(released, source);
    // A captured transfer whose destination is another account.
    let (captured, destination) = transfers
        .values()
        .filter(|evs| kinds(evs) == ["created", "reserved", "credited", "captured"])
        .find_map(|evs| {
            let dst = evs[0].destination.as_deref()?;
            (dst != source.stream_key).then(|| (evs[0], last_of[dst]))
        })
        .expect("the history has a captured transfer to another account");
    let tombstone = ledger_reconcile::corrupt::next_event(destination, "hold_released", |e| {
        e.amount = Some(0);
        e.transfer_id = Some(captured.stream_key.clone());
        e.reason = Some("no_hold".to_owned());
    });

    // Night 1: the history, clean.
    let all: Vec<&Event> = events.iter().collect();
    deliver(&root, &all, "a");
    let r = night(&root, &ckpt);
    assert!(
        r.checks.iter().all(|c| c.findings.is_empty()),
        "{}",
        r.summary()
    );

    // Night 2: the rows the account core never writes.
    deliver(&root, &[&hold, &release, &tombstone], "b");
    let r = night(&root, &ckpt);
    let mut found: Vec<_> = r
        .checks
        .iter()
        .flat_map(|c| {
            c.findings
                .iter()
                .map(|f| (c.name, f.code, f.key.clone(), f.event_id.clone()))
        })
        .collect();
    found.sort();
    let mut expected = vec![
        (
            "cross_stream_consistency",
            "hold_after_end",
            t.clone(),
            Some(hold.event_id.clone()),
        ),
        (
            "cross_stream_consistency",
            "release_after_end",
            t.clone(),
            Some(release.event_id.clone()),
        ),
        (
            "cross_stream_consistency",
            "hold_on_wrong_account",
            captured.stream_key.clone(),
            Some(tombstone.event_id.clone()),
        ),
    ];
    expected.sort();
    assert_eq!(found, expected, "{}", r.summary());
    let i = r.incremental.unwrap();
    assert!(
        !i.reproved_in_full && i.streams_reopened == 0 && i.transfers_pulled >= 2,
        "rows appended only, both transfers pulled back: {i:?}"
    );
    assert_same(2, &r, &full(&root));
}

/// A lake laid out with large strings (`LargeUtf8` in each file's Arrow
/// schema: the same Parquet columns, as another Arrow writer lays them out)
/// and proved: a second version of a proved row, delivered in such a file
/// too, reopens its stream (the night's new files read for the streams
/// they touch, the pull-back, the re-proof), and `--full` from the
/// checkpoint looks up the
/// hashes at a proved tail. Each keyed scan reads those files as the proof
/// does, so each night reaches a full proof's verdicts and none stops on a
/// footer.
#[test]
fn a_lake_of_large_strings_passes_every_keyed_scan() {
    let proved = |dir: &Path| {
        let (root, ckpt, events, half) = first_half_delivered(dir);
        for f in common::files_under(&root, "events") {
            common::large_strings(&root.join(f));
        }
        assert!(night(&root, &ckpt).holds);
        (root, ckpt, events, half)
    };
    for stream in [Stream::Account, Stream::Transfer] {
        let dir = tempfile::tempdir().unwrap();
        let (root, ckpt, events, half) = proved(dir.path());
        let what = format!("{stream:?}");
        a_second_version_night(
            &root,
            &ckpt,
            &events[..half],
            stream,
            Stretches::Enumerated,
            common::large_strings,
            &what,
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt, events, half) = proved(dir.path());
    a_full_night_looking_up_tails(
        &root,
        &ckpt,
        &events,
        half,
        Stretches::Enumerated,
        "large strings",
    );
}

#[test]
fn a_proved_files_footer_cannot_hide_a_streams_seq_0_rows_from_its_re_proof() {
    // A misplaced transfer stream of seq-0 rows (its proved tail at 0) in
    // an account file whose footer lies about its keys, proved; then a
    // second version of its row reopens it. The re-proof reads that file by
    // key and must see the row the proof noted there.
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(44, 3, 40);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    let at = events[0].occurred_at_ms;
    let before = common::files_under(&root, "events/account");
    misplace_at_seq_0(&root, at + 1);
    let lying = common::files_under(&root, "events/account")
        .into_iter()
        .find(|k| !before.contains(k))
        .unwrap();
    lie_about_keys(&root, &lying);
    assert!(!night(&root, &ckpt).holds);
    misplace_at_seq_0(&root, at + 2);
    night_stopped_by(
        &root,
        &ckpt,
        &[],
        &lying,
        "the re-proof of the streams it reopens",
    );
}

/// rev-s45-checks M2: a limit raised on a harmless row, and kept by every
/// row after it, hides no later overdraft. Night 1 brings the raise (a
/// deposit of 1 whose row records a limit 1000 higher: `terms_changed`);
/// night 2 brings only a withdrawal that repeats the raised limit and
/// overdraws the one the account was opened with. Night 2 names it, at its
/// row, as a full proof does: the account's checkpointed state keeps the
/// limit it was opened with.
#[test]
fn an_overdraft_within_a_limit_raised_on_an_earlier_night_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(59, 4, 200);
    let streams = Streams::of(&events);
    let (acc, last) = streams
        .last_of
        .iter()
        .find(|(acc, _)| !streams.frozen(acc))
        .map(|(a, e)| (a.to_string(), *e))
        .unwrap();
    let (bal, held, limit) = (
        last.balance_after.unwrap(),
        last.held_after.unwrap(),
        last.overdraft_limit.unwrap(),
    );
    let raise = ledger_reconcile::corrupt::next_event(last, "deposited", |e| {
        e.amount = Some(1);
        e.balance_after = Some(bal + 1);
        e.overdraft_limit = Some(limit + 1000);
        e.entry_id = Some(format!("dep:{acc}:raise"));
    });
    // Available −(limit + 1) after it: within the raised limit.
    let amount = bal + 1 - held + limit + 1;
    let overdraw = ledger_reconcile::corrupt::next_event(&raise, "withdrawn", |e| {
        e.amount = Some(amount);
        e.balance_after = Some(bal + 1 - amount);
        e.entry_id = Some(format!("wd:{acc}:overdraw"));
    });
    assert_eq!(overdraw.overdraft_limit, Some(limit + 1000), "kept");
    let found = |r: &Report| -> Vec<(&'static str, &'static str, Option<String>)> {
        let mut v: Vec<_> = r
            .checks
            .iter()
            .flat_map(|c| {
                c.findings
                    .iter()
                    .map(|f| (c.name, f.code, f.event_id.clone()))
            })
            .collect();
        v.sort();
        v
    };
    let mut first: Vec<&Event> = events.iter().collect();
    first.push(&raise);
    deliver(&root, &first, "a");
    let r = night(&root, &ckpt);
    let changed = (
        "balance_integrity",
        "terms_changed",
        Some(raise.event_id.clone()),
    );
    assert_eq!(found(&r), std::slice::from_ref(&changed), "{}", r.summary());
    assert_same(1, &r, &full(&root));
    deliver(&root, &[&overdraw], "b");
    let r = night(&root, &ckpt);
    let i = r.incremental.as_ref().unwrap();
    assert!(!i.reproved_in_full && i.streams_reopened == 0, "{i:?}");
    let overdraft = ("no_overdraft", "overdraft", Some(overdraw.event_id.clone()));
    assert_eq!(found(&r), [changed, overdraft], "{}", r.summary());
    let detail = &r
        .checks
        .iter()
        .find(|c| c.name == "no_overdraft")
        .unwrap()
        .findings[0]
        .detail;
    assert!(
        detail.ends_with(&format!(
            "< −{limit} (the account's overdraft limit; the row records {})",
            limit + 1000
        )),
        "{detail}"
    );
    assert_same(2, &r, &full(&root));
}

/// rev-s46-incremental M2: a resumed night whose transfer table is split
/// between two threads (the checkpoint has no open transfer, so the
/// transfers start from nothing) still continues a stream of another kind
/// found in that table from its checkpointed state. A foreign writer put a
/// subscription stream's rows under events/transfer/ (subscription streams
/// sort after transfer streams: the split's upper part): night 2 brings
/// its seqs 4–5, and the stream is still one `wrong_table`, with no gap.
#[test]
fn a_split_resumed_night_continues_a_misplaced_stream_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(61, 4, 200);
    let half = quiet_cut(&events, events.len() / 2);
    let mut prev = ledger_events::GENESIS_HASH.to_owned();
    let sub: Vec<Event> = (1..=5)
        .map(|seq| {
            let e = Event::new(
                Stream::Subscription,
                "s.x",
                seq,
                "renewed",
                events[0].occurred_at_ms + seq as i64,
                &prev,
            )
            .seal();
            prev.clone_from(&e.hash);
            e
        })
        .collect();
    // A writer that puts the subscription's rows under events/transfer/.
    let misplace = |evs: &[Event]| write_in_table(&root, evs, "transfer");
    let split = Options {
        split_first: true,
        ..opts()
    };
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "a");
    misplace(&sub[..3]);
    let first = night_with(&root, &ckpt, &split);
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "b");
    misplace(&sub[3..]);
    let second = night_with(&root, &ckpt, &split);
    let codes =
        |r: &Report| -> Vec<&'static str> { r.checks[0].findings.iter().map(|f| f.code).collect() };
    assert!(
        codes(&first).contains(&"wrong_table"),
        "{}",
        first.summary()
    );
    assert_eq!(
        codes(&second)
            .iter()
            .filter(|c| **c == "wrong_table")
            .count(),
        1,
        "{}",
        second.summary()
    );
    assert!(!codes(&second).contains(&"seq_gap"), "{}", second.summary());
    let i = second.incremental.as_ref().unwrap();
    assert!(!i.reproved_in_full, "{i:?}");
    assert_same(2, &second, &full(&root));
}

/// rev-s48-incremental M1 and L2: the checkpoints `ck` and `ck.b` never
/// share a temporary file (`with_extension` gave both `ck.tmp`, and each has
/// its own lock, so two runs saving at once published one lake's checkpoint
/// under the other's name); and a checkpoint file lost while the files of its
/// state are beside it is refused, not taken for a first run that would
/// forget what it proved and was owed.
#[test]
fn checkpoints_keep_to_their_own_files_and_a_lost_one_is_no_first_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let events = history(23, 6, 120);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "n0");
    let (ck, ck_b) = (dir.path().join("ck"), dir.path().join("ck.b"));
    // Another run's checkpoint `ck` being written, its temporary file open.
    let in_progress = dir.path().join("ck.tmp");
    std::fs::write(&in_progress, b"another run's checkpoint, half written").unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", ck_b.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read(&in_progress).unwrap(),
        b"another run's checkpoint, half written",
        "ck.b's save went through ck.tmp"
    );
    assert!(ck_b.is_file() && !dir.path().join("ck.b.tmp").exists());
    std::fs::remove_file(&in_progress).unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", ck.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // `ck` lost, the files of its state left beside it.
    let state = ledger_reconcile::archive::state_files(&ck);
    assert!(!state.is_empty(), "a checkpoint keeps files of its state");
    assert!(state.iter().all(|f| !f.starts_with("ck.b.")), "{state:?}");
    std::fs::remove_file(&ck).unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", ck.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("the file is missing, yet") && stderr.contains(&state[0]),
        "{stderr}"
    );
    assert!(!ck.exists(), "nothing written");
    assert_eq!(
        ledger_reconcile::archive::state_files(&ck),
        state,
        "nothing deleted"
    );
    // `--full` is the way on, and writes a new one, saying that what the
    // lost one proved is not judged (rev-s57-checkpoint 2); `ck.b` was never
    // touched.
    let (code, listed, metric, lines) =
        not_judged(&root, &["--checkpoint", ck.to_str().unwrap(), "--full"]);
    assert_eq!(code, 0, "{lines:?}");
    assert!(
        listed.len() == 1 && listed[0].contains("the file is missing, yet"),
        "{listed:?}"
    );
    assert_eq!(metric, "1");
    assert!(lines.iter().any(|l| l.contains("NOT JUDGED")), "{lines:?}");
    assert!(ck.is_file());
    let (code, stderr) = cli(&root, &["--checkpoint", ck_b.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // A first save that fails (here its temporary file cannot be created)
    // leaves no file of its state behind (rev-s48-diff M2: the next night
    // took the checkpoint for one lost, and refused every night after).
    let ck_c = dir.path().join("ck.c");
    std::fs::create_dir(dir.path().join("ck.c.tmp")).unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", ck_c.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(ledger_reconcile::archive::state_files(&ck_c).is_empty());
    std::fs::remove_dir(dir.path().join("ck.c.tmp")).unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", ck_c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(ck_c.is_file());
}

/// rev-s51-ops2 F11: a first save stopped before it wrote the checkpoint
/// leaves its marker beside the files it wrote; the next night removes them
/// and proves the lake as a first run, saying so, where it waited for a
/// `--full` by hand. Files of state beside a missing checkpoint without the
/// marker are still a lost checkpoint's, refused. A first save that ends,
/// either way, leaves no marker.
#[test]
fn a_first_save_stopped_before_the_checkpoint_is_undone_by_the_next_night() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let events = history(31, 6, 240);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "n0");
    let ck = dir.path().join("ck");
    let arg = ck.to_str().unwrap();
    let marker = ledger_reconcile::checkpoint::first_save_marker(&ck);
    // A first save that fails (its temporary file cannot be made).
    std::fs::create_dir(dir.path().join("ck.tmp")).unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert_eq!(code, 2, "{stderr}");
    assert!(!marker.exists() && ledger_reconcile::archive::state_files(&ck).is_empty());
    std::fs::remove_dir(dir.path().join("ck.tmp")).unwrap();
    let (first_code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert!(first_code <= 1, "{stderr}");
    assert!(ck.exists() && !marker.exists());
    let left = ledger_reconcile::archive::state_files(&ck);
    assert!(!left.is_empty());
    // As a first save stopped before its rename leaves it: its files, its
    // marker, no checkpoint.
    std::fs::remove_file(&ck).unwrap();
    std::fs::write(&marker, b"").unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert_eq!(code, first_code, "{stderr}");
    assert!(
        stderr.contains("was stopped before it wrote it")
            && stderr.contains(&format!(
                "the {} file(s) of state it left are removed",
                left.len()
            )),
        "{stderr}"
    );
    assert!(ck.exists() && !marker.exists());
    // A marker beside a checkpoint that is there (a first save killed after
    // its rename) is only removed: the checkpoint lost later is refused,
    // its files kept (rev-s51-diff H1).
    std::fs::write(&marker, b"").unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert_eq!(code, first_code, "{stderr}");
    assert!(!stderr.contains("was stopped before"), "{stderr}");
    assert!(ck.exists() && !marker.exists());
    let kept = ledger_reconcile::archive::state_files(&ck);
    std::fs::remove_file(&ck).unwrap();
    let (code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the file is missing"), "{stderr}");
    assert_eq!(ledger_reconcile::archive::state_files(&ck), kept);
}

/// rev-s50-ops F2: what a killed or failed save left (files of state the
/// checkpoint does not name, temporary files) is removed before the next
/// save writes anything, under the checkpoint's lock: it was removed only
/// after a save succeeded, so on a volume without room for it and a night's
/// new files every later save failed. A save that fails still frees it; the
/// files the checkpoint names are kept, and it resumes as before.
#[test]
fn a_killed_saves_leftovers_are_removed_before_the_next_save_writes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let events = history(29, 6, 240);
    let half = events.len() / 2;
    deliver(&root, &events[..half].iter().collect::<Vec<_>>(), "n0");
    let ck = dir.path().join("ck");
    let arg = ck.to_str().unwrap();
    // A verdict (half a history may leave sagas mid-way: exit 1).
    let (code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert!(code <= 1, "{stderr}");
    let named = ledger_reconcile::archive::state_files(&ck);
    assert!(!named.is_empty());
    // A save killed after writing its new files, before its rename.
    let orphans: Vec<String> = ["seg", "ent", "prs"]
        .iter()
        .map(|ext| format!("ck.00000000deadbeef.{ext}"))
        .chain(["ck.seg.tmp", "ck.prs.tmp", "ck.ent.tmp"].map(String::from))
        .collect();
    let plant = || {
        for o in &orphans {
            std::fs::write(dir.path().join(o), b"left by a killed save").unwrap();
        }
    };
    plant();
    // A save that then fails (its temporary file cannot be made) frees them.
    std::fs::create_dir(dir.path().join("ck.tmp")).unwrap();
    deliver(&root, &events[half..].iter().collect::<Vec<_>>(), "n1");
    let (code, stderr) = cli(&root, &["--checkpoint", arg]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("has room"), "{stderr}");
    for o in &orphans {
        assert!(!dir.path().join(o).exists(), "{o} removed");
    }
    assert_eq!(
        ledger_reconcile::archive::state_files(&ck),
        named,
        "the named files kept"
    );
    std::fs::remove_dir(dir.path().join("ck.tmp")).unwrap();
    // And one that succeeds, after a killed one left its files and its
    // half-written checkpoint: it resumes and gives the full run's verdict.
    plant();
    std::fs::write(dir.path().join("ck.tmp"), b"half a checkpoint").unwrap();
    let (code, stdout, stderr) = cli_out(&root, &["--checkpoint", arg]);
    assert!(code <= 1, "{stderr}");
    for o in orphans.iter().chain(std::iter::once(&"ck.tmp".to_owned())) {
        assert!(!dir.path().join(o).exists(), "{o} removed");
    }
    let (full_code, full_out, _) = cli_out(&root, &[]);
    assert_eq!(code, full_code);
    let verdict = |s: &str| {
        s.lines()
            .filter(|l| l.starts_with("  "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(verdict(&stdout), verdict(&full_out));
}

/// rev-s48-incremental M2: the state files belong to the lake, not to its
/// spelling: `lake`, `./lake/` and the absolute path resume from one
/// checkpoint and keep one alert state (each was "another lake", exit 2, and
/// the `--full` it asked for forgot every tail the checkpoint proved and
/// owed). Another directory is still another lake.
#[test]
fn a_lake_spelled_another_way_is_the_same_lake() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let events = history(29, 6, 120);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "n0");
    let run = |lake: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_reconcile"))
            .current_dir(dir.path())
            .args([lake, "--now-ms", &NOW_MS.to_string(), "--checkpoint", "ck"])
            .args([
                "--alert-state",
                "alerts.json",
                "--alert-webhook",
                "http://127.0.0.1:9/",
            ])
            .env_remove("LEDGER_LAKE")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run("lake");
    assert_eq!(code, 0, "{stderr}");
    let absolute = root.canonicalize().unwrap();
    for spelling in ["./lake/", "lake/", absolute.to_str().unwrap()] {
        let (code, stderr) = run(spelling);
        assert_eq!(code, 0, "{spelling}: {stderr}");
        assert!(
            stderr.contains("resuming from checkpoint"),
            "{spelling}: {stderr}"
        );
    }
    let other = dir.path().join("other");
    ledger_reconcile::corrupt::copy_lake(&root, &other).unwrap();
    let (code, stderr) = run("other");
    assert_eq!(code, 2, "{stderr}");
    // The alert state is checked first, before the lake is read; its Help
    // is this lake's own state, never deleting that lake's (rev-s52-docs M4).
    assert!(stderr.contains("belongs to the lake"), "{stderr}");
    assert!(
        stderr.contains("give this lake its own state file") && !stderr.contains("delete the file"),
        "{stderr}"
    );
    std::fs::remove_file(dir.path().join("alerts.json")).unwrap();
    let (code, stderr) = run("other");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("written for the lake"), "{stderr}");
}

/// Hundreds of copies of one proved tail row (rev-s61-red3 Q1, and the same
/// with one hash): 150 altered under its hash, 150 with damaged hashes of
/// their own, half of each delivered again in a second file. Copies past
/// the grouping's look-up threshold (`stream::SAME_SCANNED_MAX`), and a
/// tail that holds the hash once, not once a copy: resumed, with nothing
/// new, and with `--full` and the checkpoint, the nights report what a
/// proof of the lake alone does, every copy named once and each copy
/// delivered again a plain duplicate.
#[test]
fn hundreds_of_copies_of_one_row_are_each_named_once_resumed_and_with_full() {
    let dir = tempfile::tempdir().unwrap();
    let (root, ckpt) = (dir.path().join("lake"), dir.path().join("checkpoint"));
    let events = history(61, 4, 80);
    deliver(&root, &events.iter().collect::<Vec<_>>(), "a");
    assert!(night(&root, &ckpt).holds);
    let [last, _] = newest_tails(&events);
    let altered: Vec<Event> = (1..=150)
        .map(|i| {
            let mut e = last.clone();
            e.occurred_at_ms += i;
            e
        })
        .collect();
    let rehashed: Vec<Event> = (0..150u32)
        .map(|i| {
            let mut e = last.clone();
            e.hash = format!("{:064x}", u64::from(i) + 1);
            e
        })
        .collect();
    let copies = [altered.clone(), rehashed.clone()].concat();
    write_beside(&root, &events, &copies);
    let again: Vec<Event> = altered
        .iter()
        .chain(&rehashed)
        .step_by(2)
        .cloned()
        .collect();
    write_beside(&root, &events, &again);
    let alone = full(&root);
    let named = |r: &Report| {
        r.checks
            .iter()
            .flat_map(|c| &c.findings)
            .filter(|f| f.code == "hash_mismatch" && f.event_id.as_deref() == Some(&last.event_id))
            .count()
    };
    assert_eq!(named(&alone), 300, "{}", verdicts(&alone));
    // Each copy delivered again is a plain duplicate, and so is the row
    // of another stream each file holds beside them (delivered already).
    assert_eq!(alone.stats.plain_duplicates, 150 + 2);
    let r = night(&root, &ckpt);
    assert_same(2, &r, &without_owed(&alone));
    let p = ProofState::load(&ckpt, root.to_str().unwrap()).unwrap();
    let id = (
        ledger_ingest::Table::Account,
        Stream::Account,
        last.stream_key.clone(),
    );
    let tail = &p.streams[&id].tail;
    assert_eq!(tail.last_seq, last.seq);
    // The tail holds the hashes of the seq's versions, each once.
    let hashes: Vec<String> = tail.last_hashes.clone().into();
    assert_eq!(hashes.len(), 151, "{}", hashes.len());
    assert!(hashes.contains(&last.hash));
    assert_same(3, &night(&root, &ckpt), &without_owed(&alone));
    let r = full_night_with(&root, &ckpt, &opts());
    assert_same(4, &r, &without_owed(&alone));
}
