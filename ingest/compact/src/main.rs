//! `ledger-compact`: compact the event lake's partitions (docs/LAKE.md).
//!
//! Exit codes: 0 every selected partition is compact (or there was nothing to
//! do); 1 some partition was left as it was because one of its files is
//! damaged (named on stderr; the others were compacted), even when a store
//! error then stopped the run; 2 an error (bad
//! arguments, unreachable store, failed put or delete, a bound exceeded, or
//! a partition left as it was because a newer writer wrote one of its
//! files: an upgrade, with none damaged);
//! 128 + the signal's number when SIGINT, SIGTERM or SIGHUP stopped the run
//! (130, 143, 129): it stops at its next wait on the store or within a few
//! thousand rows of a merge, removes its spill directory and leaves the lake
//! as a crash there would (re-running converges); a second signal kills it
//! at once.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use ledger_compact::{
    compact_partition_with_progress, CompactError, Lake, Options, Progress, StopAt,
};
use ledger_ingest::Table;

/// How often a partition's progress is said while it is compacted.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// A line on stderr; a stderr that is gone (a closed pipe) does not stop
/// the work (`eprintln!` would panic, exit 101, mid-run).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

#[derive(Parser, Debug)]
#[command(
    name = "ledger-compact",
    version,
    about = "Merge each lake partition's small Parquet files into large sorted files without duplicates",
    long_about = "Merge each lake partition (events/{table}/date={day}/) into c- files sorted by stream_key \
and seq, duplicates removed, conflicting versions kept. Crash-safe: outputs are durable before any input \
is deleted, and re-running after a crash converges. Before deleting, each compaction records the file \
versions it replaced and its outputs in manifests/{table}/date={day}/m-<digest>.json, which lets a resumed \
reconcile tell a file compaction replaced from one that was lost. A partition listed exactly as a compaction \
left it is skipped unread (--recheck reads it); a partition of any size is merged in bounded memory, sorted \
on local disk past 524,288 rows (--spill-dir). See docs/LAKE.md.\n\n\
Exit codes: 0 done, 1 a partition has a damaged file (left untouched; also when an error then stopped the \
run), 2 error (also: a file a newer \
writer wrote, left untouched: upgrade), 128 + N stopped by \
signal N (SIGINT 130, SIGTERM 143, SIGHUP 129: the spill directory removed, the lake as a crash leaves it, \
re-running converges).",
    after_help = "Examples:\n  ledger-compact --lake .lake\n  ledger-compact --lake .lake --table account --date 2026-01-01 --dry-run\n  \
AWS_ENDPOINT_URL=https://ACCOUNT.r2.cloudflarestorage.com AWS_REGION=auto ledger-compact --lake s3://ledger-lake"
)]
struct Cli {
    /// The lake: a local directory, or s3://BUCKET[/PREFIX] (credentials and
    /// endpoint from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL (or
    /// AWS_ENDPOINT), AWS_REGION, AWS_ALLOW_HTTP). An empty one is an error (an unset
    /// variable), not the default.
    #[arg(long, env = "LEDGER_LAKE", default_value = ".lake")]
    lake: String,
    /// Only this table (account, transfer, subscription); repeatable. Default: all.
    #[arg(long, value_parser = parse_table)]
    table: Vec<Table>,
    /// Only this day (YYYY-MM-DD, UTC); repeatable. Default: every day present.
    #[arg(long)]
    date: Vec<String>,
    /// Print what would be done; write and delete nothing in the lake (a partition of
    /// more than 524,288 rows is still sorted on local disk: --spill-dir).
    #[arg(long)]
    dry_run: bool,
    /// Where a big partition's rows are sorted on local disk: a partition of more
    /// than 524,288 rows is spilled in sorted runs (about the partition's size in
    /// Parquet, and up to 64 runs' worth more past 33M rows while runs are merged
    /// into longer ones) into a temporary directory made here and removed after, also on
    /// SIGINT, SIGTERM or SIGHUP (one killed outright is removed by the next run that
    /// spills here). Default: $TMPDIR, else /tmp.
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<std::path::PathBuf>,
    /// Read every selected partition, also those listed exactly as a compaction left
    /// them (its manifest's outputs, in the versions it wrote), which are otherwise
    /// skipped unread: checks every row of their files again (a scrub).
    #[arg(long)]
    recheck: bool,
}

fn parse_table(s: &str) -> Result<Table, String> {
    Table::parse(s).ok_or_else(|| {
        format!("unknown table {s:?}; the tables are account, transfer, subscription")
    })
}

/// Whether `d` (`YYYY-MM-DD`, digits checked) is a day of the calendar:
/// month 1 to 12, day 1 to the month's last (February's 29th in leap years).
fn is_calendar_day(d: &str) -> bool {
    let num = |r: std::ops::Range<usize>| d.get(r).and_then(|s| s.parse::<u32>().ok());
    let (Some(y), Some(m), Some(day)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let last = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=last).contains(&day)
}

/// Test hooks: `LEDGER_COMPACT_RUN_ROWS=N` spills every N rows instead of
/// every `SPILL_RUN_ROWS`, so that the tests' small lakes merge from runs;
/// `LEDGER_COMPACT_FAN_IN=N` merges N runs side by side at most instead of
/// `MERGE_FAN_IN`, so that they merge runs of runs.
fn test_hook(name: &str, least: usize) -> Option<usize> {
    std::env::var(name)
        .ok()?
        .parse()
        .ok()
        .filter(|&n| n >= least)
}

/// Test hook: `LEDGER_COMPACT_CRASH=after-write` aborts the process (no
/// cleanup, like a kill) once the outputs are written and before any delete;
/// `after-first-delete` once one input is deleted; `hold-after-read` waits
/// for good once a partition's inputs are read, for a signal to stop it.
fn crash_point() -> StopAt {
    match std::env::var("LEDGER_COMPACT_CRASH").as_deref() {
        Ok("after-write") => StopAt::AfterWrite,
        Ok("after-first-delete") => StopAt::AfterFirstDelete,
        Ok("hold-after-read") => StopAt::HoldAfterRead,
        _ => StopAt::Never,
    }
}

/// SIGINT, SIGTERM and SIGHUP stop a run at its next wait (a read, put or
/// delete on the store), or within a few thousand rows of a merge between
/// two ([`ledger_compact::Options::stop`]), instead of killing it where it
/// stands: the run's future is dropped there, which removes its spill
/// directory; what it has put stays, as a crash there would leave it. The
/// handler only records the signal and restores the default action, so a
/// second signal kills.
mod stop {
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    /// The signal received, 0 before any.
    static RECEIVED: AtomicI32 = AtomicI32::new(0);

    /// Set with [`RECEIVED`]: the merge's flag.
    pub static STOP: AtomicBool = AtomicBool::new(false);

    /// How often [`received`] looks at the signal recorded.
    const POLL: std::time::Duration = std::time::Duration::from_millis(50);

    #[cfg(unix)]
    pub fn install() {
        extern "C" fn on_signal(signal: libc::c_int) {
            RECEIVED.store(signal, Ordering::SeqCst);
            STOP.store(true, Ordering::SeqCst);
            // A second signal of any of the three kills (rev-s50-diff F9:
            // SA_RESETHAND resets only the one received). `signal` is
            // async-signal-safe.
            // SAFETY: setting a signal's default action touches no memory.
            unsafe {
                for other in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(other, libc::SIG_DFL);
                }
            }
        }
        // A write past the file-size limit (`ulimit -f`, systemd's
        // `LimitFSIZE=`) fails with EFBIG, an error with its message and
        // exit 2, instead of SIGXFSZ killing the run without a word (exit
        // 153: rev-s51-ops2 F2).
        // SAFETY: setting a signal's disposition to SIG_IGN touches no memory.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction is valid (its mask emptied below);
            // the handler only stores to an atomic, which is
            // async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                action.sa_flags = libc::SA_RESETHAND;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    #[cfg(not(unix))]
    pub fn install() {}

    /// The signal received, if one was.
    pub fn signal() -> Option<i32> {
        Some(RECEIVED.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }

    /// Resolves with the first signal's number once one is received.
    pub async fn received() -> i32 {
        loop {
            match RECEIVED.load(Ordering::SeqCst) {
                0 => tokio::time::sleep(POLL).await,
                signal => return signal,
            }
        }
    }

    /// The signal's name, for the message.
    pub fn name(signal: i32) -> String {
        match signal {
            2 => "SIGINT".into(),
            15 => "SIGTERM".into(),
            1 => "SIGHUP".into(),
            n => format!("signal {n}"),
        }
    }
}

async fn run(cli: Cli, doing: &std::cell::RefCell<String>) -> Result<u8, CompactError> {
    for d in &cli.date {
        if ledger_ingest::parse_object_key(&format!(
            "events/account/date={d}/i-00000000000000000000000000000000.parquet"
        ))
        .is_none()
            || !is_calendar_day(d)
        {
            return Err(CompactError::Usage(format!(
                "--date {d:?} is not a day (YYYY-MM-DD): a date no partition can have would compact nothing"
            )));
        }
    }
    if let Some(dir) = &cli.spill_dir {
        if !dir.is_dir() {
            return Err(CompactError::Usage(format!(
                "--spill-dir {} is not a directory\nHelp: pass an existing directory on a local disk with room for a partition's rows",
                dir.display()
            )));
        }
    }
    let lake = Lake::open(&cli.lake)?;
    // Only the prefixes asked for are listed (rev-s57-ingest 8: one day's run
    // listed the whole lake); the whole lake only when none matches.
    let partitions = lake.partitions_of(&cli.table, &cli.date).await?;
    let selected = !cli.table.is_empty() || !cli.date.is_empty();
    if partitions.is_empty() && (!selected || lake.partitions(None).await?.is_empty()) {
        // No partition at all: an empty directory where the lake should be
        // (a volume not mounted, a mistyped path) is not "nothing to do"
        // (rev-s52-docs L11; reconcile refuses it too).
        return Err(CompactError::Usage(format!(
            "no partition under events/ in {}: not a lake, or not yet one\nHelp: check --lake (or \
             LEDGER_LAKE) and that its volume is mounted; a lake with no events yet has nothing to \
             compact",
            lake.name
        )));
    }
    if partitions.is_empty() {
        say!(
            "ledger-compact: no partition in {} matches (looked under events/{{table}}/date={{day}}/); nothing to do",
            lake.name
        );
        return Ok(0);
    }
    let crash = crash_point();
    let options = Options {
        dry_run: cli.dry_run,
        stop_at: crash,
        spill_dir: cli.spill_dir.clone(),
        run_rows: test_hook("LEDGER_COMPACT_RUN_ROWS", 1),
        fan_in: test_hook("LEDGER_COMPACT_FAN_IN", 2),
        stop: Some(&stop::STOP),
        recheck: cli.recheck,
    };
    let started = std::time::Instant::now();
    // Partitions left untouched: for a damaged file, or for one a newer
    // writer wrote (an upgrade, not tampering: rev-s52-diff L6).
    let (mut rows, mut damaged, mut newer) = (0usize, 0usize, 0usize);
    // A partition that failed: how many after it were left untried.
    let mut failed: Option<usize> = None;
    for (i, p) in partitions.iter().enumerate() {
        // A line every PROGRESS_EVERY while a big partition is read or
        // written; a small one only gets its summary line.
        let mut last = std::time::Instant::now();
        let at = format!("[{}/{}] {}", i + 1, partitions.len(), p.prefix());
        doing.replace(at.clone());
        let progress = |step: Progress| {
            if last.elapsed() < PROGRESS_EVERY {
                return;
            }
            last = std::time::Instant::now();
            match step {
                Progress::Reading {
                    files_read,
                    files,
                    rows,
                    runs,
                } => say!(
                    "{at}: read {files_read} of {files} files, {rows} rows ({runs} run(s) spilled)"
                ),
                Progress::Merging { merged, runs } => {
                    say!("{at}: {merged} run(s) merged into longer runs so far ({runs} spilled)")
                }
                Progress::Writing {
                    outputs,
                    rows_out,
                    rows,
                } => {
                    say!("{at}: {outputs} output file(s) cut so far, {rows_out} rows ({rows} read)")
                }
            }
        };
        match compact_partition_with_progress(&lake, p, &options, progress).await {
            Ok(report) => {
                rows += report.input_rows;
                let tag = if cli.dry_run { " (dry run)" } else { "" };
                say!("[{}/{}] {report}{tag}", i + 1, partitions.len());
                for c in &report.conflicts {
                    say!("  conflict kept: {c}");
                }
                if report.stopped_early {
                    say!("ledger-compact: LEDGER_COMPACT_CRASH={crash:?}: aborting now");
                    std::process::abort();
                }
            }
            Err(CompactError::Damaged(e)) => {
                if e.kind.is_newer() {
                    newer += 1;
                } else {
                    damaged += 1;
                }
                say!(
                    "[{}/{}] {}: skipped: {e}",
                    i + 1,
                    partitions.len(),
                    p.prefix()
                );
            }
            Err(CompactError::Stopped) => return Err(CompactError::Stopped),
            Err(e) => {
                // An error (the store's, the spill disk's, a bound): the partitions after
                // it are not tried (they would meet the same store or disk), but what this
                // run found so far is still said, and a damaged file still decides the
                // exit code (rev-s57-ingest 6: the error's exit 2 hid the tampering's 1).
                say!(
                    "ledger-compact: error: [{}/{}] {}: {e}",
                    i + 1,
                    partitions.len(),
                    p.prefix()
                );
                failed = Some(partitions.len() - i - 1);
                break;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    say!(
        "ledger-compact: {} partitions, {rows} rows read in {secs:.2} s ({:.0} rows/s){}",
        partitions.len(),
        rows as f64 / secs.max(1e-9),
        [
            (damaged, "because of a damaged file"),
            (
                newer,
                "because a newer writer wrote a file there (upgrade ledger-compact)"
            )
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("; {n} left untouched {why}"))
        .collect::<String>()
            + &failed.map_or(String::new(), |after| {
                let untried = match after {
                    0 => String::new(),
                    n => format!(", and the {n} after it were not tried"),
                };
                format!(
                    "; one failed (the error above){untried}: run again once what it names is \
                     fixed (a partition done is done)"
                )
            })
    );
    // A damaged file is 1 (what the nightly job alerts on as tampering),
    // whatever else happened; a newer writer's (this compactor must be
    // upgraded) or a failed partition, with none damaged, is 2.
    Ok(match (damaged, newer, failed) {
        (0, 0, None) => 0,
        (0, _, _) => 2,
        _ => 1,
    })
}

fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (m, cli)));
    let (matches, mut cli) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            // --help and --version are not errors.
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if cli.lake.is_empty() {
        // `--lake ""` is an unset variable in the job's command, not the
        // default (rev-s55-blackbox F2: it compacted whatever lake was in
        // the working directory); LEDGER_LAKE set to nothing is the
        // default, as reconcile takes it.
        if matches.value_source("lake") == Some(clap::parser::ValueSource::CommandLine) {
            say!(
                "ledger-compact: error: --lake is empty (an unset variable in the job's command?)\n\
                 Help: give the lake's directory or s3://BUCKET[/PREFIX], or leave --lake out for \
                 $LEDGER_LAKE, then .lake"
            );
            return ExitCode::from(2);
        }
        cli.lake = ".lake".into();
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say!("ledger-compact: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    stop::install();
    let doing = std::cell::RefCell::new(String::new());
    let done = rt.block_on(async {
        tokio::select! {
            done = run(cli, &doing) => Ok(done),
            signal = stop::received() => Err(signal),
        }
    });
    // Stopped mid-merge by the flag the signal set, or at a wait.
    let done = match done {
        Ok(Err(CompactError::Stopped)) => {
            Err(stop::signal().expect("the merge's flag is set with the signal"))
        }
        other => other,
    };
    match done {
        Ok(Ok(code)) => ExitCode::from(code),
        Ok(Err(e)) => {
            say!("ledger-compact: error: {e}");
            ExitCode::from(2)
        }
        Err(signal) => {
            let doing = doing.borrow();
            let at = if doing.is_empty() {
                String::new()
            } else {
                format!(" during {doing}")
            };
            say!(
                "ledger-compact: stopped by {}{at}; its spill directory is removed and the lake is as a crash \
                 there would leave it: a partition already reported is done, and running again converges \
                 (docs/LAKE.md)",
                stop::name(signal)
            );
            ExitCode::from(u8::try_from(128 + signal).unwrap_or(2))
        }
    }
}
