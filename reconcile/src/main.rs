//! `reconcile`: the nightly proof. See `reconcile --help` and docs/RECONCILE.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use ledger_reconcile::output::{
    alert::{AlertConfig, ALERT_TIMEOUT_DEFAULT_S, ALERT_TIMEOUT_MAX_S},
    sweep::{SweepConfig, SWEEP_MAX_DEFAULT},
    Outputs,
};
use ledger_reconcile::store::Location;
use ledger_reconcile::threads::THREADS_HELP;
use ledger_reconcile::{
    reconcile_from, CheckpointLock, Error, Lake, LockError, Options, ProofState, EXIT_ERROR,
    EXIT_HELD, EXIT_VIOLATED,
};

/// Proves the ledger's invariants from the event lake alone.
///
/// Reads every lake file under LAKE/events/ (account, transfer and subscription tables,
/// all dates, both layers; a .parquet object not named as a lake file is not
/// read, and the summary, the report and the metrics name it), dedups rows
/// by (event_id, hash) and checks, from the lake alone:
///
///   completeness             per stream: seqs 1..n without gaps, every hash recomputed, every prev_hash link
///   conflicting_duplicates   no event id with two different contents (plain duplicates are only counted)
///   balance_integrity   I1   refolding each account reproduces every balance_after / held_after;
///                            no deposit or withdrawal entry id posted twice
///   no_overdraft        I2   balance − held ≥ −overdraft_limit after every event
///   transfer_conservation I1 captured = one debit −a on the source + one credit +a on the destination
///   global_conservation I1   per currency: Σ balances = deposits − withdrawals + credits in flight
///   cross_stream_consistency I1 transfer phases agree with holds, debits and credits
///                            (a failed transfer never held money; nothing held or released
///                            on the source after its hold's end, nor released elsewhere)
///   terminal_convergence I4  no transfer non-terminal past its deadline, no leaked hold
///   protocol_values          every amount, overdraft limit and reason one the ledger core writes
///
/// Exit status: 0 every invariant holds (findings rows still in delivery may explain are
/// listed as pending: see --settle-ms), 1 at least one is violated (the summary names
/// the rows), 2 no verdict (missing lake, corrupt file — named —, unknown schema or layout,
/// S3 bucket missing, credentials refused, endpoint unreachable or variables unset,
/// unusable checkpoint) or an output failed (a file not written, an alert not delivered,
/// a re-drive refused): the summary still prints, the error says which output and why.
///
/// LAKE is a directory or s3://BUCKET[/PREFIX] on any S3-compatible store (R2 in
/// production), configured from the environment: AWS_ACCESS_KEY_ID and
/// AWS_SECRET_ACCESS_KEY (required), AWS_ENDPOINT_URL (R2:
/// https://<account>.r2.cloudflarestorage.com), AWS_REGION (default auto),
/// AWS_ALLOW_HTTP=true for a plain-http endpoint. See docs/RECONCILE.md.
///
/// Examples:
///   reconcile                                   # the local lake ($LEDGER_LAKE, then .lake)
///   reconcile /var/lake --json report.json      # full report for dashboards and alerts
///   AWS_ENDPOINT_URL=https://<account>.r2.cloudflarestorage.com \
///   AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… reconcile s3://ledger-lake   # the lake in R2
///   reconcile --dangling dangling.json          # the sweeper's list (docs/SWEEPER.md)
///   reconcile --publish-dangling                # the same list into the lake, for the sweeper cron
///   reconcile --checkpoint .lake-checkpoint       # nightly: prove only what is new since the last run
///   reconcile --checkpoint .lake-checkpoint --full   # weekly: re-prove everything, refresh the checkpoint
///   reconcile --checkpoint .lake-checkpoint --settle-wait   # decide pending findings in the same job
///   reconcile --violations bad.csv              # every offending row for auditors (or bad.parquet)
///   reconcile --metrics /var/lib/node_exporter/textfile/reconcile.prom   # Prometheus, atomic
///   reconcile --alert-webhook https://hooks.example/x --alert-state /var/lib/reconcile/alert.json
///                                               # POST only violations the last run did not have
///   LEDGER_ADMIN_KEY=... reconcile --sweep-url https://ledger.example.com   # re-drive dangling now
///   reconcile-testdata generate /tmp/lake && reconcile /tmp/lake   # try it on a generated lake
///
/// Outputs (formats: docs/RECONCILE.md) are written after the verdict, each on its own;
/// one that fails makes the exit 2 even when every invariant holds. A file path whose
/// directory does not exist is exit 2 before the lake is read.
#[derive(Parser, Debug)]
#[command(name = "reconcile", version, verbatim_doc_comment)]
struct Cli {
    /// The lake root: a directory, or s3://BUCKET[/PREFIX] (the prefix holding events/).
    /// An empty one is an error (an unset variable), not the default.
    #[arg(env = "LEDGER_LAKE", default_value = ".lake")]
    lake: String,
    /// Write the full JSON report (format: docs/RECONCILE.md) to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the dangling-transfer list in the sweeper's format v1 (docs/SWEEPER.md) to FILE,
    /// as the sweeper reads it: at most 1 MiB and ids the edge takes, the bytes
    /// --publish-dangling puts (every dangling transfer is in the --json report).
    #[arg(long, value_name = "FILE")]
    dangling: Option<PathBuf>,
    /// Put the dangling list into the lake at reconcile/dangling/latest.json, the
    /// object the edge's sweeper cron reads (docs/SWEEPER.md), replacing it; past the
    /// sweeper's 1 MiB limit, as many as fit, in a window of the list (most overdue
    /// first) that moves by its length each day, wrapping around.
    #[arg(long)]
    publish_dangling: bool,
    /// Judge deadlines and the settle window at this instant (ms since the
    /// epoch) instead of now; makes a run over an old lake reproducible. From
    /// 0 to 4102444800000 (2100-01-01): the proof keeps dates in whole
    /// seconds, to 2106, and a later instant would misjudge rows dated after.
    #[arg(long, value_name = "MS", allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(0..=NOW_MS_MAX))]
    now_ms: Option<i64>,
    /// The settle window (ms): a finding that rests on a row being absent (a
    /// seq gap, a saga step another row already shows, a transfer not
    /// terminal past its deadline) is reported as pending, not violated,
    /// while the youngest row it rests on is younger than this: the absent
    /// row may still be in an outbox or the queue. Set it above the
    /// pipeline's worst delivery delay; 0 judges the lake as delivered. At most
    /// 31536000000 (a year).
    #[arg(long, value_name = "MS", default_value_t = 600_000, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(0..=31_536_000_000))]
    settle_ms: i64,
    /// When findings are pending, wait until the window has passed over
    /// their rows (at most --settle-ms) and run once more (resumed from the
    /// checkpoint when there is one, else in full), so one invocation
    /// decides every finding on the rows the first run read; the outputs
    /// are the second run's. SIGINT, SIGTERM or SIGHUP during the wait ends
    /// it with the first run's outputs (exit 2).
    #[arg(long)]
    settle_wait: bool,
    /// Resume from the checkpoint FILE when it exists (read only the lake
    /// files it has not proved; same verdicts as a full run: rows compaction
    /// copied are recognised by their hash chain, and a proved file that left
    /// the lake otherwise, which compaction's manifests do not account for,
    /// makes the run prove the lake in full), then write the new checkpoint
    /// there. Files beside it belong to it (keep them with FILE, back them
    /// up and restore them together): settled transfers in archive segments
    /// (FILE.*.seg), the accounts' entry ids in entry-store segments
    /// (FILE.*.ent), the streams of each proved lake file (FILE.*.prs); and
    /// FILE.lock keeps a second run off it. Format and guarantees: docs/RECONCILE.md.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// Re-prove the lake from the first event instead of resuming, and
    /// still judge that it holds every stream's tail the checkpoint proved
    /// (completeness: proved_rows_missing, proved_row_changed), including
    /// the proved files lost since (deleted or rewritten other than by
    /// compaction: a row of theirs the lake lacks is decided); the
    /// checkpoint is written afterwards. A checkpoint, or a part of it, that
    /// cannot be read is named (report: not_judged) and rebuilt: keep a copy
    /// from before the run to judge it later; one written for another lake
    /// or by a newer reconciler is refused. An error reading the lake stops
    /// it (exit 2), as it stops a resumed run.
    #[arg(long, requires = "checkpoint")]
    full: bool,
    /// Write every finding of every violated check, one row each, to FILE:
    /// `.csv` (RFC 4180, header line) or `.parquet`. A clean run writes zero rows.
    #[arg(long, value_name = "FILE")]
    violations: Option<PathBuf>,
    /// Write the run's metrics in the Prometheus text format to FILE, atomically
    /// (for the node_exporter textfile collector).
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// POST a JSON alert to URL when a violation appears that the last run did not
    /// have; 3 attempts (each given --alert-timeout), then exit 2. Needs --alert-state.
    /// Prefer the variable to the flag when the URL carries a token (flags show in
    /// process lists).
    #[arg(
        long,
        value_name = "URL",
        env = "LEDGER_ALERT_WEBHOOK",
        hide_env_values = true
    )]
    alert_webhook: Option<String>,
    /// The previous run's violation fingerprints (JSON; created on the first run,
    /// advanced only after a delivered alert). One file per lake.
    #[arg(long, value_name = "FILE", env = "LEDGER_ALERT_STATE")]
    alert_state: Option<PathBuf>,
    /// With --alert-webhook: give each attempt of the alert's POST SECONDS to answer (1 to
    /// 300; connecting has half of it, at most 10 s). A receiver slower than that may still act on the
    /// request: the alert is sent again (the next attempt, the next run) with the same
    /// dedup_key in its body, to deduplicate on.
    #[arg(long, value_name = "SECONDS", env = "LEDGER_ALERT_TIMEOUT",
          default_value_t = ALERT_TIMEOUT_DEFAULT_S as i64, allow_negative_numbers = true,
          // Parsed as i64, so a negative value is answered with the range.
          value_parser = clap::value_parser!(i64).range(1..=ALERT_TIMEOUT_MAX_S as i64))]
    alert_timeout: i64,
    /// Send no alert and leave the alert state as it is, even with LEDGER_ALERT_WEBHOOK and
    /// LEDGER_ALERT_STATE set: for an ad-hoc replay (--now-ms, --settle-ms) run where the
    /// nightly job's environment is, which would page on-call and move its state.
    #[arg(long)]
    no_alert: bool,
    /// POST the dangling transfers, most overdue first, to URL/v1/admin/transfers/redrive
    /// (10 ids a request, each request given 110 s: the edge waits up to 10 s a re-drive); the
    /// admin key comes from the environment variable LEDGER_ADMIN_KEY, never a flag.
    #[arg(long, value_name = "URL")]
    sweep_url: Option<String>,
    /// With --sweep-url: re-drive at most N dangling transfers this run. With more than N, a
    /// window of N that moves by N a day (no transfer waits for good behind N stuck ones); the
    /// rest are left to the sweeper's cron, --publish-dangling, or a later run.
    #[arg(long, value_name = "N", default_value_t = SWEEP_MAX_DEFAULT as u32,
          requires = "sweep_url", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    sweep_max: u32,
    /// No progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Writes `value` as JSON to `path`, atomically (a reader, or a full disk,
/// never leaves half a report in place of the last good one).
fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n";
    ledger_reconcile::output::write_atomic(path, text.as_bytes())
}

/// Where `path` (in a directory that exists) really is: its directory's
/// canonical path and its name, so `./x`, `x` and `link/x` compare equal.
fn placed(path: &std::path::Path) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(path.file_name()?))
}

/// Every file the run will write can be placed: its directory exists and
/// the path is not a directory. Checked before the lake is read, so a typo in
/// an output path does not cost a night's proof (whether the directory is
/// writable is only known by writing, at the end).
fn output_files_placeable(cli: &Cli) -> Result<(), String> {
    // --no-alert writes no alert state: a replay elsewhere need not have
    // the nightly job's state directory.
    let alert_state = cli.alert_state.clone().filter(|_| !cli.no_alert);
    let files = [
        ("--json", &cli.json),
        ("--dangling", &cli.dangling),
        ("--checkpoint", &cli.checkpoint),
        ("--violations", &cli.violations),
        ("--metrics", &cli.metrics),
        ("--alert-state", &alert_state),
    ];
    // Each flag's file as written: a link's target for a link.
    let mut written: Vec<(&str, PathBuf)> = Vec::new();
    for (flag, path) in files {
        let Some(path) = path else { continue };
        if path.as_os_str() == "-" {
            return Err(format!(
                "{flag} -: names the file to write (stdout carries the summary); name a file"
            ));
        }
        if path.is_dir() {
            return Err(format!(
                "{flag} {}: is a directory; it names the file to write",
                path.display()
            ));
        }
        // Written by replacing the file (a temporary one renamed over it):
        // a FIFO, a socket or a device would be replaced by a regular file
        // without a word, its reader left waiting (rev-s50-ops F6).
        if path.exists() && !path.is_file() {
            return Err(format!(
                "{flag} {}: is not a regular file (a FIFO, a socket or a device); the output is \
                 written by replacing the file\nHelp: name a regular file",
                path.display()
            ));
        }
        let link = path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink());
        if link && flag == "--checkpoint" {
            return Err(format!(
                "{flag} {}: is a symbolic link; the checkpoint's files of state are written beside \
                 the name given, and the link would be replaced by the file\nHelp: name the file itself",
                path.display()
            ));
        }
        // A link's target is what is written (`output::write_atomic`).
        let target = ledger_reconcile::output::link_target(path)
            .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if !dir.is_dir() {
            return Err(format!(
                "{flag} {}: the directory {} does not exist\nHelp: create it, or name a file in an existing directory",
                path.display(),
                dir.display()
            ));
        }
        written.push((flag, target));
    }
    // No two outputs on one file (one would silently replace the other,
    // the metrics a checkpoint), and none inside a local lake (a file
    // there is lake data to a reader, or replaces some): the files written,
    // a link's target for a link (rev-s50-diff F1: a metrics file linked to
    // the checkpoint replaced it).
    let lake_root = match Location::parse(&cli.lake) {
        Ok(Location::Local(dir)) => std::path::Path::new(&dir).canonicalize().ok(),
        _ => None,
    };
    let checkpoint = cli.checkpoint.as_deref().and_then(placed);
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for (flag, target) in written {
        let Some(at) = placed(&target) else {
            continue;
        };
        if let Some((other, _)) = seen.iter().find(|(_, p)| *p == at) {
            return Err(format!(
                "{flag} and {other} name the same file {}: each output needs its own",
                at.display()
            ));
        }
        if let Some(ck) = checkpoint
            .as_ref()
            .filter(|ck| flag != "--checkpoint" && is_companion(ck, &at))
        {
            return Err(format!(
                "{flag} {}: is a file of the checkpoint {} (its lock, its temporary file or a \
                 file of its state: `{}.*`), which the run replaces or relies on\n\
                 Help: name another file",
                at.display(),
                ck.display(),
                ck.display()
            ));
        }
        if let Some(root) = lake_root.as_ref().filter(|r| at.starts_with(r)) {
            return Err(format!(
                "{flag} {}: is inside the lake {}; a file there is read as lake data, or replaces some\n\
                 Help: write it outside the lake directory",
                at.display(),
                root.display()
            ));
        }
        seen.push((flag, at));
    }
    Ok(())
}

/// Whether `at` is one of the files of the checkpoint `ck` (both as
/// [`placed`]), beside it (`ledger_reconcile::archive::is_checkpoint_file`).
fn is_companion(ck: &std::path::Path, at: &std::path::Path) -> bool {
    let (Some(name), Some(other)) = (ck.file_name(), at.file_name()) else {
        return false;
    };
    let (Some(name), Some(other)) = (name.to_str(), other.to_str()) else {
        return false;
    };
    ck.parent() == at.parent() && ledger_reconcile::archive::is_checkpoint_file(name, other)
}

/// The run: resumes from the checkpoint when there is a usable one.
async fn reconcile_with(
    cli: &Cli,
    lake: &Lake,
    opts: &Options,
) -> Result<(ledger_reconcile::Report, ProofState), Error> {
    let started = std::time::Instant::now();
    let mut not_judged = None;
    // A first save stopped before it wrote the checkpoint: what it wrote is
    // removed, and this is a first run (a marker beside a checkpoint that
    // is there is only removed).
    if let Some(path) = &cli.checkpoint {
        match ledger_reconcile::checkpoint::clear_killed_first_save(path) {
            Some(Ok(n)) => ledger_reconcile::say!(
                "reconcile: warning: the first run to write checkpoint {} was stopped before it \
                 wrote it: the {n} file(s) of state it left are removed, and this run proves the \
                 lake from its first event",
                path.display()
            ),
            Some(Err(e)) => {
                return Err(Error::Lake(format!(
                    "checkpoint {}: the first run to write it was stopped before it wrote it, and \
                     what it left cannot be removed: {e}\nHelp: check that the directory is \
                     writable, and run again",
                    path.display()
                )))
            }
            None => {}
        }
    }
    let resume = match &cli.checkpoint {
        Some(path) if !cli.full && path.exists() => {
            let state =
                ProofState::load(path, &cli.lake).map_err(|e| Error::Lake(e.to_string()))?;
            clock_not_behind(cli, opts, path)?;
            Some(state)
        }
        Some(path) if path.exists() => {
            // `--full`: the proof is from the first event, and the lake
            // still owes what the checkpoint proved. A checkpoint that
            // cannot be read (what `--full` is also for) owes nothing.
            match ProofState::load_for_full(path, &cli.lake) {
                Ok(prior) => {
                    if opts.progress {
                        ledger_reconcile::say!(
                            "reconcile: full proof from the first event; the tails checkpoint {} proved are judged too \
                             (checkpoint read in {:.1} s)",
                            path.display(),
                            started.elapsed().as_secs_f64()
                        );
                    }
                    return ledger_reconcile::reconcile_full_owing(lake, opts, prior).await;
                }
                // Another lake's checkpoint: this run would replace it, and
                // that lake's tails with it.
                Err(e) if e.other_lake() => return Err(Error::Lake(e.to_string())),
                Err(e) => {
                    // Its help says to run with --full: this is that run.
                    let e = e.to_string();
                    let why = ledger_reconcile::lake::without_help(&e);
                    ledger_reconcile::say!(
                        "reconcile: warning: {why}\nThis full proof does not judge whether the lake still holds what \
                         that checkpoint proved; it writes a new one"
                    );
                    not_judged = Some(why.to_owned());
                    None
                }
            }
        }
        Some(path) => {
            // No checkpoint file, yet the files of one's state beside it:
            // it was lost (a restore that missed it, a typo in the path), and
            // a first run would forget every tail it proved and owed. With
            // `--full`, what the lost checkpoint proved is not judged, said
            // as for one that does not read (rev-s57-checkpoint 2: this run
            // removed them without a word).
            let left = ledger_reconcile::archive::state_files(path);
            if let Some(first) = left.first() {
                let why = format!(
                    "checkpoint {}: the file is missing, yet {} file(s) of a checkpoint's state are \
                     beside it ({first}{})",
                    path.display(),
                    left.len(),
                    if left.len() > 1 { ", …" } else { "" }
                );
                if !cli.full {
                    return Err(Error::Lake(format!(
                        "{why}: it was lost (a restore that missed it), the path is mistyped, or a \
                         first run of an older reconciler (one that wrote no FILE.first-save) was \
                         stopped before it wrote it\n\
                         Help: restore the checkpoint file (or correct the path); if none was ever written \
                         here, run with --full: it proves the lake from the first event and writes a new \
                         checkpoint, without judging what a lost one proved and was owed"
                    )));
                }
                ledger_reconcile::say!(
                    "reconcile: warning: {why}\nThis full proof does not judge whether the lake still holds what \
                     that checkpoint proved; it writes a new one, and those files go with the old state"
                );
                not_judged = Some(why);
            }
            None
        }
        None => None,
    };
    if opts.progress {
        match (&cli.checkpoint, &resume) {
            (Some(p), Some(state)) => ledger_reconcile::say!(
                "reconcile: resuming from checkpoint {} ({} open transfers, {} settled in {} archive segments; read in {:.1} s)",
                p.display(),
                state.transfers.len(),
                state.archive.live,
                state.archive.refs().len(),
                started.elapsed().as_secs_f64()
            ),
            (Some(p), None) => ledger_reconcile::say!(
                "reconcile: full proof from the first event (checkpoint {} will be written)",
                p.display()
            ),
            _ => {}
        }
    }
    let (mut report, state) = reconcile_from(lake, opts, resume).await?;
    report.not_judged.extend(not_judged);
    Ok((report, state))
}

/// A run on the host's clock (no `--now-ms`) must not be behind the run
/// that wrote the checkpoint it loaded (rev-s50-ops F5: a clock moved back
/// 40 days paged every transfer in flight as committed in the future, and
/// one ahead would call them dangling and re-drive them): behind by more
/// than the settle window (at least a minute) is an error. A --now-ms given
/// is the caller's to choose, and `--full` is the way out when the clock is
/// right and the run before had one ahead (rev-s50-diff F6): it proves from
/// the first event and replaces the checkpoint.
fn clock_not_behind(cli: &Cli, opts: &Options, path: &std::path::Path) -> Result<(), Error> {
    if cli.now_ms.is_some() {
        return Ok(());
    }
    let before = ledger_reconcile::checkpoint::written_at_ms(path);
    match before.filter(|&b| b - opts.now_ms > cli.settle_ms.max(60_000)) {
        Some(before) => Err(Error::Lake(format!(
            "the clock says {}, {} s before the run that wrote the checkpoint {} ({}): a clock \
             that moved back would judge every row after it as committed in the future\n\
             Help: if this host's clock is wrong, fix it (NTP) and run again; if it is right, the run \
             that wrote the checkpoint judged the lake at a later instant: a replay given --now-ms \
             with this checkpoint (a checkpoint is written as of its run's instant: replay on \
             a copy of it), or a host whose clock was ahead. Then run with \
             --full, which proves the lake from its first event and writes a new checkpoint (to \
             judge the lake at a chosen instant, pass --now-ms)",
            ledger_reconcile::report::utc(opts.now_ms),
            (before - opts.now_ms) / 1000,
            path.display(),
            ledger_reconcile::report::utc(before)
        ))),
        None => Ok(()),
    }
}

/// `e` as said: a lake file named by its full key (an S3 object's
/// `s3://BUCKET/PREFIX/…`, the one to move).
fn shown_error(e: Error, lake: &str) -> Error {
    match (e, Location::parse(lake)) {
        (Error::File { key, why }, Ok(loc)) => Error::File {
            key: loc.display_key(&key),
            why,
        },
        (e, _) => e,
    }
}

/// What `--settle-wait` leaves for the night's outputs: the report, the
/// state to checkpoint (none when the checkpoint holds it already), and
/// what kept the second run from judging again, if anything did.
struct Settled {
    report: ledger_reconcile::Report,
    state: Option<ProofState>,
    failed: Option<String>,
}

/// `--settle-wait`: the first run left findings pending until `by`; waits
/// until then (at most the window: a row dated ahead of the clock does not
/// hold the job) and runs again, its `now` that much later, resumed from
/// the first run's checkpoint when there is one. When the first run's
/// checkpoint cannot be written, or the second run fails, the night's
/// outputs are the first run's, with the failure (exit 2): its decided
/// violations are still reported and alerted (rev-s50-ops F3: the night
/// ended with no summary, report, metrics or alert).
async fn settle_wait(
    cli: &Cli,
    lake: &Lake,
    opts: &Options,
    (first, state): (ledger_reconcile::Report, ProofState),
    by: i64,
) -> Settled {
    // Caught from here (the save before the wait included) until the wait
    // ends, whichever way: see below.
    let caught = waiting::catch();
    let wait_ms = (by - opts.now_ms + 1).clamp(0, opts.settle_ms + 1);
    // A wait over a minute is said even with --quiet: a job that sleeps
    // for hours with a long window must not look hung.
    if opts.progress || wait_ms > 60_000 {
        ledger_reconcile::say!(
            "reconcile: {} finding(s) pending until {}; waiting {:.1} s to decide them (--settle-wait)",
            first.pending,
            ledger_reconcile::report::utc(by),
            wait_ms as f64 / 1000.0
        );
    }
    let waited = std::time::Instant::now();
    let only_first = |first, state, why: String| {
        Settled {
        report: first,
        state,
        failed: Some(format!(
            "--settle-wait: the findings pending after the first run were not judged again, and the \
             outputs are the first run's: {why}"
        )),
    }
    };
    // The first run's checkpoint is written before the wait, so that a
    // signal in it loses nothing the first run proved.
    let resume = match &cli.checkpoint {
        Some(path) => {
            if let Err(e) = state.save(path, &cli.lake, opts.now_ms) {
                // Not saved again at the end: it would fail alike.
                return only_first(first, None, e.to_string());
            }
            std::mem::forget(state);
            match ProofState::load(path, &cli.lake) {
                Ok(resume) => Some(resume),
                Err(e) => return only_first(first, None, e.to_string()),
            }
        }
        None => {
            std::mem::forget(state);
            None
        }
    };
    // A signal in the wait (a node drained, a job runner's deadline) ends it
    // with the first run's outputs, not with none (rev-s51-ops2 F3: the
    // finished first run, its decided violations and their alert were lost).
    let signal = tokio::select! {
        () = tokio::time::sleep(std::time::Duration::from_millis(wait_ms as u64)) => None,
        signal = waiting::received() => Some(signal),
    };
    drop(caught);
    // Or one that came as the wait ended, up to the actions put back
    // (rev-s51-diff L4, rev-s51-late L5).
    if let Some(signal) = signal.or_else(waiting::signal) {
        let why = format!("{} received during the wait", waiting::name(signal));
        return only_first(first, None, why);
    }
    let later = Options {
        now_ms: opts.now_ms + waited.elapsed().as_millis() as i64,
        ..opts.clone()
    };
    // What the first run could not judge, this one does not either.
    let (mut report, state) = match reconcile_from(lake, &later, resume).await {
        Ok(ran) => ran,
        // The checkpoint holds the first run's state (there is none to
        // save without one). A file named by its full key, as below.
        Err(e) => return only_first(first, None, shown_error(e, &cli.lake).to_string()),
    };
    report.not_judged.splice(0..0, first.not_judged);
    // What the first run found gone or lost, this one, resumed from the
    // checkpoint the first wrote (which lists the files as they are now),
    // does not see again: the night's outputs say it all the same.
    if let (Some(was), Some(now)) = (first.incremental, report.incremental.as_mut()) {
        now.files_gone += was.files_gone;
        now.files_lost += was.files_lost;
        now.reproved_in_full |= was.reproved_in_full;
    }
    // A `--full` night reads as one whatever the wait (its counts of files
    // are the second run's; rev-s58-fixes 3).
    if let (true, Some(now)) = (cli.full, report.incremental.as_mut()) {
        now.full = true;
    }
    Settled {
        report,
        state: Some(state),
        failed: None,
    }
}

/// SIGINT, SIGTERM and SIGHUP while `--settle-wait` waits ([`settle_wait`]):
/// the first is recorded and ends the wait, and a second of any of them
/// kills, as outside the wait. One the run was started ignoring (`nohup`,
/// a background job's SIGINT) stays ignored, and each gets back the action
/// it had (rev-s51-diff M1).
mod waiting {
    use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

    /// The signal received, 0 before any.
    static RECEIVED: AtomicI32 = AtomicI32::new(0);

    /// Which of [`SIGNALS`] are caught (bit `i` for `SIGNALS[i]`): the
    /// handler sets those to their default action.
    static CAUGHT: AtomicU8 = AtomicU8::new(0);

    /// How often [`received`] looks at the signal recorded.
    const POLL: std::time::Duration = std::time::Duration::from_millis(50);

    #[cfg(target_os = "linux")]
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    /// The three caught: until this is dropped, which puts back the
    /// actions they had.
    pub struct Caught {
        #[cfg(target_os = "linux")]
        before: [Option<libc::sigaction>; 3],
    }

    impl Drop for Caught {
        fn drop(&mut self) {
            #[cfg(target_os = "linux")]
            for (signal, before) in SIGNALS.iter().zip(&self.before) {
                if let Some(before) = before {
                    // SAFETY: `before` is the action sigaction(2) returned.
                    unsafe {
                        libc::sigaction(*signal, before, std::ptr::null_mut());
                    }
                }
            }
            CAUGHT.store(0, Ordering::SeqCst);
        }
    }

    /// Catches those of the three the run was not started ignoring, until
    /// what it returns is dropped.
    pub fn catch() -> Caught {
        #[cfg(target_os = "linux")]
        {
            extern "C" fn on_signal(signal: libc::c_int) {
                RECEIVED.store(signal, Ordering::SeqCst);
                let caught = CAUGHT.load(Ordering::SeqCst);
                for (i, other) in SIGNALS.iter().enumerate() {
                    if caught & (1 << i) != 0 {
                        // SAFETY: signal(2) is async-signal-safe; setting a
                        // default action touches no memory.
                        unsafe {
                            libc::signal(*other, libc::SIG_DFL);
                        }
                    }
                }
            }
            let mut before = [None; 3];
            for (i, signal) in SIGNALS.into_iter().enumerate() {
                // SAFETY: zeroed sigactions are valid (the mask emptied
                // below); sigaction(2) fills `old`; the handler stores to
                // atomics and calls signal(2), all async-signal-safe.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                        || old.sa_sigaction == libc::SIG_IGN
                    {
                        continue;
                    }
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction =
                        on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    libc::sigemptyset(&mut action.sa_mask);
                    CAUGHT.fetch_or(1 << i, Ordering::SeqCst);
                    if libc::sigaction(signal, &action, std::ptr::null_mut()) == 0 {
                        before[i] = Some(old);
                    }
                }
            }
            Caught { before }
        }
        #[cfg(not(target_os = "linux"))]
        Caught {}
    }

    /// The signal received, if one was.
    pub fn signal() -> Option<i32> {
        Some(RECEIVED.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }

    /// Resolves with the first signal's number once one is caught.
    pub async fn received() -> i32 {
        loop {
            match signal() {
                None => tokio::time::sleep(POLL).await,
                Some(signal) => return signal,
            }
        }
    }

    /// The signal's name, for the message.
    pub fn name(signal: i32) -> String {
        match signal {
            1 => "SIGHUP".into(),
            2 => "SIGINT".into(),
            15 => "SIGTERM".into(),
            n => format!("signal {n}"),
        }
    }
}

/// Where the edge's sweeper reads the dangling list (docs/SWEEPER.md).
const DANGLING_LIST_KEY: &str = ledger_api::sweep::DANGLING_KEY;

/// The latest `--now-ms`: 2100-01-01. The proof keeps dates in whole seconds
/// of 32 bits (`facts::secs`, to 2106-02-07), so a row dated later is kept as
/// of 2106: still more than the settle window (at most a year) and an hour
/// after any instant up to this one (`committed_in_future`), and a deadline
/// reckoned from it still after that instant. A replay at a later instant
/// would judge such rows wrongly (rev-s51-exact F4).
const NOW_MS_MAX: i64 = 4_102_444_800_000;

/// Transparent huge pages off for this process. The proof decodes and frees
/// a Parquet batch's worth of memory thousands of times a run; with THP every
/// 2 MB page the allocator takes back from the kernel is zeroed whole, which
/// cost a quarter of the run's CPU (perf: `clear_page_erms` under
/// `do_huge_pmd_anonymous_page`; docs/BENCHMARKS.md). Only a hint: failure
/// changes nothing else.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments only and
    // touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Exit 2, with a line that says why, when a local lake file or the
/// checkpoint is cut short while the run reads it through a memory map
/// (`ledger_reconcile::mapped`, the checkpoint's `FileBytes`):
/// the first access past its new end raises SIGBUS, whose default action
/// kills the process (exit 135, not a word). Lake files are never written in
/// place (docs/LAKE.md); a copy onto one does that.
fn exit_2_on_sigbus() {
    #[cfg(target_os = "linux")]
    {
        /// `si_code` of a SIGBUS raised by an access to a mapped page past
        /// its file's end (Linux's `BUS_ADRERR`, asm-generic/siginfo.h).
        const BUS_ADRERR: libc::c_int = 2;
        extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
            const CUT: &[u8] = b"error: a lake file or the checkpoint was cut short while this run read it \
(SIGBUS): it was written again in place, a copy onto it say. Each is replaced only by writing a new file and \
renaming it over the old one (docs/LAKE.md). Run again once nothing writes to the lake or the checkpoint.\n";
            const OTHER: &[u8] =
                b"error: the run received SIGBUS, not from a mapped file cut short: a \
hardware memory error, an I/O error under a mapped file, or a signal sent to it; no verdict.\n";
            // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO;
            // write(2) and _exit(2) are async-signal-safe; the lines are static.
            unsafe {
                let line = if !info.is_null() && (*info).si_code == BUS_ADRERR {
                    CUT
                } else {
                    OTHER
                };
                libc::write(2, line.as_ptr().cast(), line.len());
                libc::_exit(EXIT_ERROR);
            }
        }
        // SAFETY: a zeroed sigaction is valid (the mask emptied below); the
        // handler only makes async-signal-safe calls.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    }
}

/// A write past the file-size limit (`ulimit -f`, systemd's `LimitFSIZE=`)
/// fails with EFBIG ("File too large") instead of killing the process with
/// SIGXFSZ (exit 153, not a word, and every output after that file skipped:
/// rev-s51-ops2 F2): it is then an output's or the checkpoint's error like
/// any other, exit 2 with its `error:` line, the other outputs still written.
fn file_size_limit_is_an_error() {
    #[cfg(target_os = "linux")]
    // SAFETY: setting a signal's disposition to SIG_IGN touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Whether fd 1 was closed, or open for reading only, when the process
/// started (`reconcile … >&-` or `1</dev/null`, a wrapper that closes it).
/// Rust's runtime opens `/dev/null` on a closed standard descriptor before
/// `main`, and its stdout takes a write that fails with EBADF as written,
/// so the summary would vanish without an error (rev-s55-blackbox F7,
/// rev-s60-diff 3); [`probe_stdout`] looks first. Linux only (elsewhere
/// the summary is written as before).
#[cfg(target_os = "linux")]
static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Run by the C runtime before `main` (an `.init_array` entry, like glibc's
/// own constructors), so before Rust's runtime reopens a closed fd 1.
#[cfg(target_os = "linux")]
extern "C" fn probe_stdout() {
    // SAFETY: fcntl(F_GETFL) on a descriptor number reads no memory of ours.
    let flags = unsafe { libc::fcntl(1, libc::F_GETFL) };
    if flags == -1 || flags & libc::O_ACCMODE == libc::O_RDONLY {
        STDOUT_CLOSED_AT_START.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static PROBE_STDOUT: extern "C" fn() = probe_stdout;

/// Why the summary cannot be written, when stdout was closed at start.
fn stdout_closed_at_start() -> Option<&'static str> {
    #[cfg(target_os = "linux")]
    if STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed) {
        return Some("stdout was closed, or not open for writing, when the run started");
    }
    None
}

/// Exit 2 on a panic too (a bug; its message is on stderr): a wrapper that
/// tells a verdict (0, 1) from an error (2) must not see Rust's 101; nor
/// the signal of a lake file cut short under the run ([`exit_2_on_sigbus`]),
/// nor one of a file grown past the size limit ([`file_size_limit_is_an_error`]).
fn main() -> ExitCode {
    exit_2_on_sigbus();
    file_size_limit_is_an_error();
    std::panic::catch_unwind(run).unwrap_or(ExitCode::from(EXIT_ERROR as u8))
}

/// Exit 2 before a verdict: the metrics say the run failed
/// ([`Outputs::write_failed`]), beside the last verdict's. Only once the
/// output paths are known to be placeable (a --metrics path that names the
/// checkpoint or a file in the lake is never written) and this run holds
/// the checkpoint's lock.
fn failed(outputs: &Outputs, lake: &str) -> ExitCode {
    if let Some(e) = outputs.write_failed(lake, wall_clock_ms()) {
        ledger_reconcile::say!("error: {e}");
    }
    ExitCode::from(EXIT_ERROR as u8)
}

/// The runtime, or the run's exit (2, its failure in the metrics). Tokio's
/// `build()` panics when the OS refuses a worker thread, and unwinding out
/// of it waits for ever on the worker that did start (rev-s53-resources
/// M1: a run hung holding its checkpoint's lock, and every later night was
/// refused). So a panic hook says why and ends the process there while it
/// builds. Its blocking pool (the store's file reads) panics too when the
/// OS refuses it a thread and it has none (rev-s53-diff M1), so one is
/// started here and kept for the run: a thread refused later queues the
/// work for it. The proof's own threads are errors or work done here
/// instead ([`ledger_reconcile::threads`]). Any other refusal's panic (a
/// table thread's own runtime's blocking pool, which has no thread kept)
/// is said with the Help and unwinds as any panic does: the run's error
/// follows (exit 2), and a verdict already reached keeps its outputs
/// (rev-s54-diff L1).
fn runtime(outputs: &Outputs, lake: &str) -> Result<tokio::runtime::Runtime, ExitCode> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static BUILDING: AtomicBool = AtomicBool::new(true);
    let (o, l) = (outputs.clone(), lake.to_owned());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let why = info.payload_as_str().unwrap_or("a panic");
        if BUILDING.load(Ordering::Relaxed) {
            ledger_reconcile::say!("error: cannot start the runtime: {why}\n{THREADS_HELP}");
            failed(&o, &l);
            std::process::exit(EXIT_ERROR);
        }
        if ledger_reconcile::threads::refusal(why) {
            // Said instead of the panic's location and backtrace note:
            // the run's own error follows.
            ledger_reconcile::say!(
                "error: cannot start a thread: {why}{}",
                ledger_reconcile::threads::help_printed()
            );
        } else {
            previous(info);
        }
    }));
    let built = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        // Idle blocking threads stay for the run (the one started below).
        .thread_keep_alive(std::time::Duration::from_secs(u64::from(u32::MAX)))
        .build()
        .inspect(|rt| {
            rt.block_on(rt.spawn_blocking(|| {}))
                .expect("an empty task")
        });
    BUILDING.store(false, Ordering::Relaxed);
    built.map_err(|e| {
        ledger_reconcile::say!("error: cannot start the runtime: {e}\n{THREADS_HELP}");
        failed(outputs, lake)
    })
}

fn run() -> ExitCode {
    // The run's own time: what the summary, the report and the metrics say
    // it took (the checkpoint's read is part of a night, and at millions of
    // accounts most of it: rev-s60-scale 5).
    let run_started = std::time::Instant::now();
    no_transparent_huge_pages();
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if cli.lake.is_empty() {
        // An empty argument is an unset variable in the job's command line
        // (`reconcile "$LAKE"`), not the default: proved, whatever lake is
        // in the working directory would pass for the night's
        // (rev-s55-blackbox F2). LEDGER_LAKE set to nothing is the default,
        // as documented.
        if matches.value_source("lake") == Some(clap::parser::ValueSource::CommandLine) {
            ledger_reconcile::say!(
                "error: the lake argument is empty (an unset variable in the job's command?)\n\
                 Help: give the lake's directory or s3://BUCKET[/PREFIX], or no argument for \
                 $LEDGER_LAKE, then .lake"
            );
            return ExitCode::from(EXIT_ERROR as u8);
        }
        cli.lake = ".lake".into();
    }
    let outputs = Outputs {
        violations: cli.violations.clone(),
        metrics: cli.metrics.clone(),
        alert: cli
            .alert_webhook
            .clone()
            .zip(cli.alert_state.clone())
            .filter(|_| !cli.no_alert)
            .map(|(webhook, state)| {
                AlertConfig::new(webhook, state, cli.alert_timeout.unsigned_abs())
            }),
        sweep: cli
            .sweep_url
            .clone()
            .map(|url| SweepConfig::from_env(url, cli.sweep_max as usize)),
        quiet: cli.quiet,
    };
    // The webhook and its state go together, unless --no-alert turns the
    // alert off (checked here, not by clap: either may come from the
    // environment, and --no-alert is for a replay in the job's environment).
    if !cli.no_alert {
        let given = |flag: &str, var: &str| {
            if std::env::var_os(var).is_some() {
                format!("{var} (or {flag})")
            } else {
                flag.to_owned()
            }
        };
        let missing = match (&cli.alert_webhook, &cli.alert_state) {
            (Some(_), None) => Some((
                given("--alert-webhook", "LEDGER_ALERT_WEBHOOK"),
                "--alert-state FILE (or LEDGER_ALERT_STATE)",
            )),
            (None, Some(_)) => Some((
                given("--alert-state", "LEDGER_ALERT_STATE"),
                "--alert-webhook URL (or LEDGER_ALERT_WEBHOOK)",
            )),
            _ => None,
        };
        if let Some((set, needed)) = missing {
            ledger_reconcile::say!(
                "error: {set} is set, but not {needed}: the alert needs both (one state file per lake)\n\
                 Help: give both, or --no-alert to send no alert"
            );
            return ExitCode::from(EXIT_ERROR as u8);
        }
    }
    // A timeout on the command line with no webhook anywhere is a job that
    // meant to alert and will not (rev-s55-blackbox F10); the variable alone
    // is the environment's setting, kept for the runs that alert.
    if cli.alert_webhook.is_none()
        && matches.value_source("alert_timeout") == Some(clap::parser::ValueSource::CommandLine)
    {
        ledger_reconcile::say!(
            "error: --alert-timeout is given, but no webhook (--alert-webhook or \
             LEDGER_ALERT_WEBHOOK): no alert would be sent\n\
             Help: give the webhook and --alert-state, or drop --alert-timeout"
        );
        return ExitCode::from(EXIT_ERROR as u8);
    }
    if cli.no_alert && cli.alert_webhook.is_some() && !cli.quiet {
        ledger_reconcile::say!("alert: off (--no-alert)");
    }
    if let Err(e) = outputs
        .validate(&cli.lake)
        .and_then(|()| output_files_placeable(&cli))
    {
        ledger_reconcile::say!("error: {e}");
        return ExitCode::from(EXIT_ERROR as u8);
    }
    // Held until the new checkpoint is written (the end of main).
    let _lock = match cli
        .checkpoint
        .as_deref()
        .map(CheckpointLock::take)
        .transpose()
    {
        Ok(lock) => lock,
        Err(e @ (LockError::Held(_) | LockError::Unlockable(_))) => {
            // Another run holds the checkpoint (or may: a volume that
            // cannot lock): its metrics are its own to write (rev-s52-diff
            // M1: this run's failure replaced them; rev-s54-diff L4).
            ledger_reconcile::say!("error: {e}");
            return ExitCode::from(EXIT_ERROR as u8);
        }
        Err(e @ LockError::Failed(_)) => {
            ledger_reconcile::say!("error: {e}");
            return failed(&outputs, &cli.lake);
        }
    };
    // After the lock: a run that cannot start its runtime writes the
    // failure metrics, which another run's lock would make its own
    // (rev-s53-diff L1: a retry refused threads because the nightly run
    // holds them overwrote its fresh metrics with the last night's).
    let rt = match runtime(&outputs, &cli.lake) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // Tests and comparisons only (docs/RECONCILE.md): how many stretches a
    // keyed scan enumerates before it matches the longest histories.
    let most = ledger_reconcile::keyed::WANTED_STARTS_MAX;
    let wanted_starts_max = match std::env::var_os("RECONCILE_WANTED_STARTS_MAX") {
        None => most,
        Some(v) => match v.to_str().and_then(|v| v.parse::<usize>().ok()) {
            Some(n) if n <= most => n,
            _ => {
                ledger_reconcile::say!(
                    "error: RECONCILE_WANTED_STARTS_MAX={v:?}: not a number from 0 to {most}"
                );
                return failed(&outputs, &cli.lake);
            }
        },
    };
    let now_ms = cli.now_ms.unwrap_or_else(wall_clock_ms);
    let opts = Options {
        now_ms,
        progress: !cli.quiet,
        handoff: std::env::var_os("RECONCILE_NO_HANDOFF").is_none_or(|v| v != "1"),
        split_first: false,
        by_date: std::env::var_os("RECONCILE_MERGE_ALL_DATES").is_none_or(|v| v != "1"),
        settle_ms: cli.settle_ms,
        wanted_starts_max,
    };
    let result = rt.block_on(async {
        let lake = Lake::connect(&cli.lake).await?;
        if cli.publish_dangling && !lake.prefix().is_empty() {
            // The edge's ingest writes at its bucket's root, and its sweeper
            // reads the list only there.
            ledger_reconcile::say!(
                "reconcile: warning: --publish-dangling writes {}{DANGLING_LIST_KEY}, under the lake's \
                 prefix; the edge's sweeper cron reads only {DANGLING_LIST_KEY} at its bucket's root, \
                 so it will not see this list (the production lake is the whole bucket: s3://BUCKET)",
                lake.prefix()
            );
        }
        let ran = reconcile_with(&cli, &lake, &opts).await?;
        let ran = match ran.0.decided_by_ms {
            Some(by) if cli.settle_wait => settle_wait(&cli, &lake, &opts, ran, by).await,
            _ => Settled {
                report: ran.0,
                state: Some(ran.1),
                failed: None,
            },
        };
        Ok((lake, ran))
    });
    let (
        lake,
        Settled {
            mut report,
            state,
            failed,
        },
    ) = match result {
        Ok(r) => r,
        Err(e) => {
            let e = shown_error(e, &cli.lake);
            ledger_reconcile::say!("error: {e}");
            return failed(&outputs, &cli.lake);
        }
    };
    // Each output runs even when one before it failed; any failure is exit 2.
    let mut errors: Vec<String> = failed.into_iter().collect();
    // The summary and the report: the run up to its verdict (the
    // checkpoint read, the proof, a settle wait); the metrics, written
    // last: all of it but their own write (the checkpoint written too).
    report.elapsed_ms = run_started.elapsed().as_millis() as u64;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let written = match stdout_closed_at_start() {
            Some(why) => Err(std::io::Error::other(why)),
            None => out
                .write_all(report.summary().as_bytes())
                .and_then(|()| out.flush()),
        };
        if let Err(e) = written {
            // A reader that went away (`| head`) must not stop the report,
            // the checkpoint or the alert.
            errors.push(format!(
                "cannot write the summary to stdout: {e}\nHelp: stdout is where the job sends it \
                 (a file on a full or read-only volume, a pipe closed early, a descriptor closed \
                 by what started the run: give it `> /dev/null` to discard it); the other \
                 outputs do not depend on it"
            ));
        }
    }
    if let Some(path) = &cli.json {
        if let Err(e) = write_json(path, &report) {
            errors.push(e);
        }
    }
    // One document for the file and the lake: the sweeper's, as it reads
    // it (at most 1 MiB, ids it takes); the whole list is the report's.
    let sweeper_list = (cli.dangling.is_some() || cli.publish_dangling).then(|| {
        let (bytes, listed) = report.dangling_document(
            wall_clock_ms(),
            ledger_api::sweep::DANGLING_BYTES_MAX as usize,
        );
        let not_listed = report.dangling.len() - listed;
        // Said even with --quiet, as the other warnings on what an output
        // covers: the sweeper will not re-drive the rest (rev-s55-blackbox
        // F11).
        if not_listed > 0 {
            let others = report.dangling.len() - report.sweepable().len();
            ledger_reconcile::say!(
                "reconcile: warning: dangling list: {listed} of {} transfers listed ({} past the \
                 sweeper's 1 MiB, {others} not ids the edge takes); every one is in the report's \
                 `dangling`",
                report.dangling.len(),
                not_listed - others,
            );
        }
        (bytes, listed)
    });
    if let (Some(path), Some((bytes, _))) = (&cli.dangling, &sweeper_list) {
        if let Err(e) = ledger_reconcile::output::write_atomic(path, bytes) {
            errors.push(e);
        }
    }
    if let (true, Some((bytes, listed))) = (cli.publish_dangling, sweeper_list) {
        match rt.block_on(lake.put(DANGLING_LIST_KEY, bytes)) {
            Ok(()) if !cli.quiet => ledger_reconcile::say!(
                "reconcile: dangling list ({listed} of {} transfers) published at {DANGLING_LIST_KEY}",
                report.dangling.len()
            ),
            Ok(()) => {}
            Err(e) => errors.push(e),
        }
    }
    if let (Some(path), Some(state)) = (&cli.checkpoint, &state) {
        let started = std::time::Instant::now();
        match state.save(path, &cli.lake, report.now_ms) {
            Ok(()) if !cli.quiet => ledger_reconcile::say!(
                "reconcile: checkpoint {} written in {:.1} s",
                path.display(),
                started.elapsed().as_secs_f64()
            ),
            Ok(()) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    let failed = errors.len();
    report.elapsed_ms = run_started.elapsed().as_millis() as u64;
    errors.extend(outputs.write(&report, &rt, wall_clock_ms(), failed));
    // Millions of small allocations: the process exit frees them at once.
    std::mem::forget(state);
    if !errors.is_empty() {
        for e in &errors {
            ledger_reconcile::say!("error: {e}");
        }
        return ExitCode::from(EXIT_ERROR as u8);
    }
    ExitCode::from(if report.holds {
        EXIT_HELD
    } else {
        EXIT_VIOLATED
    } as u8)
}
