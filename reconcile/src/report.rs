//! The run's outputs: the JSON report (versioned, docs/RECONCILE.md), the
//! human summary, and the sweeper's dangling list (docs/SWEEPER.md, v1).

use serde::Serialize;

use crate::checks::convergence::Dangling;
use crate::finding::{CheckResult, Finding};
use crate::stream::ScanStats;

/// Version of the JSON report format. Adding members keeps it; changing the
/// meaning of one bumps it. 2: `holds` leaves out findings pending in the
/// settle window (`pending`, per check and in all). 3: `incremental` is
/// present on a `--full` run past a readable checkpoint too (`full` says
/// which), so its presence no longer means the run resumed.
pub const REPORT_VERSION: u32 = 3;
/// Offending rows the human summary shows per check (the JSON has them all).
pub const SUMMARY_ROWS_MAX: usize = 5;
/// Version of the sweeper's dangling-list format (docs/SWEEPER.md).
pub const DANGLING_LIST_VERSION: u32 = 1;

/// `ms` since the epoch as UTC, `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        ledger_ingest::key::date_of_ms(ms),
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub version: u32,
    /// The lake as given on the command line.
    pub lake: String,
    /// The lake as the checkpoint and the alert state know it, however it
    /// was spelled: a local directory's absolute path with links resolved,
    /// `s3://BUCKET[/PREFIX]` with ` at ENDPOINT` when the environment names
    /// one (`crate::store::Location::identity`; rev-s55-blackbox F13: an
    /// archived report of `.lake` did not say which lake).
    pub lake_identity: String,
    /// The instant deadlines were judged against.
    pub now_ms: i64,
    /// The settle window (ms): findings that rest on an absent row younger
    /// than this are pending, not violations (`crate::settle`).
    pub settle_ms: i64,
    /// Every check holds: no violation (pending findings aside).
    pub holds: bool,
    /// Findings pending across the checks (each check lists its own).
    pub pending: usize,
    /// When every pending finding will be decided: a run after this instant
    /// judges them on rows older than the window (absent: none pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by_ms: Option<i64>,
    pub files: usize,
    /// Objects under `events/` ending in `.parquet` that are not named as
    /// lake files (`events/TABLE/date=YYYY-MM-DD/{i,c}-<32 hex>.parquet`,
    /// docs/LAKE.md), every table's, sorted (absent: none). The proof does
    /// not read them, so the verdicts cover the lake files as named: a file
    /// of events under another name is not proved. Neither `holds` nor the
    /// exit code counts them: a stray export beside the lake (a query
    /// engine's output, a copy made by hand) must not stop the night's proof
    /// of the lake files, and this list, the summary's `IGNORED` line and
    /// the metric `reconcile_files_ignored` carry them to whoever reads the
    /// verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files_ignored: Vec<String>,
    pub stats: ScanStats,
    pub accounts: u64,
    pub transfers: u64,
    /// Wall time: of the proof, as `run::reconcile` returns it; the CLI's
    /// report says the run's up to its verdict (its checkpoint read, the
    /// proof, a settle wait).
    pub elapsed_ms: u64,
    pub checks: Vec<CheckResult>,
    /// The sweeper's list, most overdue first: the dangling transfers (also
    /// in `terminal_convergence`) and the transfers known only by a live hold
    /// 30 days old (`hold_only`; their finding is the `leaked_hold`).
    pub dangling: Vec<Dangling>,
    /// Present when the run read a checkpoint: it resumed from one, or
    /// proved the lake from its first event (`--full`) judging one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incremental: Option<Incremental>,
    /// Parts of an earlier checkpoint's proof this run could not judge
    /// against the lake, each with why (absent: none): a `--full` run past
    /// a checkpoint, an archive segment, an archive block or a file of
    /// streams' notes (`FILE.*.prs`: which rows lost or replaced files held)
    /// it cannot read. Whether the lake still holds the rows proved there is not
    /// known; the verdicts cover the lake as read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_judged: Vec<String>,
}

/// What a run that read a checkpoint (resumed, or `--full` past one) read
/// and re-proved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Incremental {
    /// Lake files the checkpoint had already proved (not read).
    pub files_skipped: usize,
    /// Lake files read: new since the checkpoint.
    pub files_read: usize,
    /// File versions the checkpoint proved that are no longer in the lake
    /// (compaction deletes the files it merged; a file rewritten in place
    /// is another version).
    pub files_gone: usize,
    /// Of those, the ones no compaction manifest accounts for
    /// (`crate::custody`): deleted, renamed or rewritten other than by
    /// compaction. Any makes the run prove the lake from its first event.
    pub files_lost: usize,
    /// Streams re-proved from their first event because a new row was at
    /// or before their checkpointed tail and not a copy of a proved row.
    pub streams_reopened: usize,
    /// New rows that are copies of rows the checkpoint proved (a compacted
    /// partition, a redelivered batch): they chain to their streams'
    /// checkpointed hashes, or (account streams) the proved files hold them
    /// at their seqs, and they hash to their recorded hashes, so they were
    /// not proved again (`crate::copies`).
    pub rows_already_proved: u64,
    /// Settled transfers read back from the checkpoint's archive because a
    /// new event names them (all of them when an account stream is
    /// re-proved from its first event).
    pub transfers_pulled: u64,
    /// Blocks of the entry store whose pairs a lookup read: a new deposit
    /// or withdrawal whose fingerprint a block's filter may hold
    /// (`entry_store`; a repeated entry id, or a filter's false positive).
    pub entry_blocks_read: u64,
    /// The run proved the lake from its first event instead (a new
    /// checkpoint is written): a proved file was lost (`files_lost`), or
    /// most account streams had new rows at or before their tails (a
    /// redelivered old day), or rows that chain to their tails do not hash
    /// to their recorded hashes. False for `--full`, which proves it so by
    /// request.
    pub reproved_in_full: bool,
    /// The run was `--full` past a readable checkpoint: it read the
    /// checkpoint to judge what that proved (its tails, the files it proved
    /// that are gone), not to skip files (`files_skipped` 0; with
    /// `--settle-wait`, the counts of files are the second, resumed run's).
    pub full: bool,
}

impl Report {
    /// A report of a run that read `files` files and found nothing, for
    /// the outputs' unit tests.
    #[cfg(test)]
    pub(crate) fn empty(files: usize) -> Report {
        Report {
            version: REPORT_VERSION,
            lake: "lake".into(),
            lake_identity: "/lake".into(),
            now_ms: 0,
            settle_ms: 0,
            holds: true,
            pending: 0,
            decided_by_ms: None,
            files,
            files_ignored: Vec::new(),
            stats: Default::default(),
            accounts: 0,
            transfers: 0,
            elapsed_ms: 0,
            dangling: Vec::new(),
            incremental: None,
            checks: Vec::new(),
            not_judged: Vec::new(),
        }
    }

    pub fn check(&self, name: &str) -> &CheckResult {
        self.checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check named {name}"))
    }

    /// The summary printed on stdout.
    /// A row that does not verify (a hash, a link, the schema) is named by
    /// its event id; tampering and storage damage alike (docs/LAKE.md), the
    /// operator next needs the file that holds it: the DuckDB query that
    /// finds it, for the first such finding whose id a query can be printed
    /// with as it is (one with a hidden character cannot: the next is
    /// taken, rev-s56-outputs 4).
    fn file_of_row_help(&self, findings: &[Finding]) -> Option<String> {
        const ROW_CODES: [&str; 3] = ["hash_mismatch", "chain_break", "invalid_event"];
        let event_id = findings
            .iter()
            .filter(|f| ROW_CODES.contains(&f.code))
            .filter_map(|f| f.event_id.as_deref())
            .find(|id| matches!(plain(id), std::borrow::Cow::Borrowed(_)))?;
        let quoted = |v: &str| v.replace('\'', "''");
        Some(format!(
            "            help: the file that holds a row, in DuckDB (docs/LAKE.md): SELECT filename FROM \
             read_parquet('{}/events/*/date=*/*.parquet', filename = true) WHERE event_id = '{}';\n",
            quoted(self.lake.trim_end_matches('/')),
            quoted(event_id)
        ))
    }

    /// The summary: lake-controlled text (keys, ids, details) is shown
    /// with control and bidirectional-format characters escaped
    /// ([`plain`]), so no row of the lake can write a line of its own (a
    /// stream key holding "\nverdict: every invariant holds").
    pub fn summary(&self) -> String {
        // A resumed run reads only the files new since its checkpoint.
        let read = self
            .incremental
            .map(|i| format!(" ({} read this run)", i.files_read))
            .unwrap_or_default();
        let mut s = format!(
            "reconcile {}: {} files{read}, {} rows read ({} plain duplicates dropped), {} distinct events, \
             {} accounts, {} transfers, {:.1} s\n",
            self.lake,
            self.files,
            self.stats.rows_read,
            self.stats.plain_duplicates,
            self.stats.distinct_rows,
            self.accounts,
            self.transfers,
            self.elapsed_ms as f64 / 1000.0
        );
        if let Some(i) = self.incremental.filter(|i| i.files_lost > 0) {
            s += &format!(
                "  LOST      {} lake file version(s) the checkpoint proved are gone and not accounted for by \
                 compaction (stderr names the first): this run proved the lake from its first event \
                 and judged every stream's tail the checkpoint proved (completeness)\n",
                i.files_lost
            );
        }
        // The first offending rows of `findings` (`label` before each).
        let rows = |s: &mut String, label: &str, findings: &[Finding]| {
            for f in findings.iter().take(SUMMARY_ROWS_MAX) {
                let at = f
                    .event_id
                    .as_deref()
                    .map(|e| format!(" {e}"))
                    .unwrap_or_default();
                *s += &format!(
                    "            {label}{} {}{}: {}\n",
                    f.code,
                    plain(&f.key),
                    plain(&at),
                    plain(&f.detail)
                );
            }
            if findings.len() > SUMMARY_ROWS_MAX {
                *s += &format!(
                    "            … and {} more (all in the --json report)\n",
                    findings.len() - SUMMARY_ROWS_MAX
                );
            }
        };
        for c in &self.checks {
            let pending = c.pending.len();
            if !c.holds {
                s += &format!(
                    "  VIOLATED  {:<26} {:<4} {} offending row(s){}\n",
                    c.name,
                    c.invariant,
                    c.violations,
                    if pending > 0 {
                        format!(", {pending} pending")
                    } else {
                        String::new()
                    }
                );
                rows(&mut s, "", &c.findings);
                if let Some(help) = self.file_of_row_help(&c.findings) {
                    s += &help;
                }
            } else if pending > 0 {
                s += &format!(
                    "  pending   {:<26} {:<4} {pending} finding(s) on rows younger than the settle window\n",
                    c.name, c.invariant
                );
            } else {
                s += &format!(
                    "  held      {:<26} {:<4} {}\n",
                    c.name, c.invariant, c.proves
                );
            }
            rows(&mut s, "pending: ", &c.pending);
        }
        if let Some(first) = self.files_ignored.first() {
            s += &format!(
                "  IGNORED   {} object(s) under events/ end in .parquet but are not named as lake files \
                 (docs/LAKE.md), so were not read (the --json report lists them), first: {}\n",
                self.files_ignored.len(),
                plain(first)
            );
        }
        for why in &self.not_judged {
            s += &format!(
                "  NOT JUDGED  what an earlier checkpoint proved, in part: {}\n",
                plain(why.lines().next().unwrap_or_default())
            );
        }
        s += if self.holds {
            "verdict: every invariant holds"
        } else {
            "verdict: VIOLATED"
        };
        // What the verdict covers, when it is not all the lake might hold.
        let (mut covers, mut left) = (Vec::new(), Vec::new());
        if !self.not_judged.is_empty() {
            covers.push("the lake as read");
            left.push(format!(
                "{} part(s) of an earlier checkpoint's proof not judged: whether the lake still holds \
                 those rows is not known",
                self.not_judged.len()
            ));
        }
        if !self.files_ignored.is_empty() {
            covers.push("the lake files as named");
            left.push(format!(
                "{} object(s) ending in .parquet beside them not read",
                self.files_ignored.len()
            ));
        }
        if !left.is_empty() {
            s += &format!(" (in {}; {})", covers.join(" and "), left.join("; "));
        }
        if let Some(by) = self.decided_by_ms {
            s += &format!(
                "; {} finding(s) pending: they rest on rows absent from the lake, and rows younger \
                 than the settle window ({} s) may still be in delivery; a run after {} decides them",
                self.pending,
                self.settle_ms / 1000,
                utc(by)
            );
        }
        s += "\n";
        s
    }

    /// The dangling transfers the sweeper can re-drive: ids of the form
    /// `t.{tenant}.{key}` (another names no object at the edge, and its
    /// sweeper would skip it with a warning every run: rev-s52-contracts
    /// L2), in the list's order. The report's `dangling` keeps them all.
    pub fn sweepable(&self) -> Vec<&Dangling> {
        self.dangling
            .iter()
            .filter(|d| ledger_api::names::parse_transfer_id(&d.transfer_id).is_ok())
            .collect()
    }

    /// The sweeper's list (format v1) of the `n` transfers of `list` from
    /// position `start` on, wrapping around (all of them: `0, len`).
    fn dangling_list_of(
        list: &[&Dangling],
        generated_at_ms: i64,
        start: usize,
        n: usize,
    ) -> serde_json::Value {
        let listed = list.iter().cycle().skip(start).take(n);
        let mut doc = serde_json::json!({
            "version": DANGLING_LIST_VERSION,
            "generated_at_ms": generated_at_ms,
            "transfers": listed.map(|d| serde_json::json!({
                "transfer_id": d.transfer_id,
                "phase": d.phase,
                "deadline_ms": d.deadline_ms,
                "last_seq": d.last_seq,
            })).collect::<Vec<_>>(),
        });
        if n < list.len() {
            // Extra members: the sweeper ignores them (docs/SWEEPER.md).
            doc["dangling_total"] = list.len().into();
            doc["truncated"] = true.into();
            doc["window_start"] = start.into();
        }
        doc
    }

    /// The sweeper's list (`--dangling`, `--publish-dangling`) as the bytes
    /// it reads, at most `max_bytes` (it refuses a larger document whole:
    /// rev-s52-contracts M1, `--dangling` wrote every transfer, pretty):
    /// every [`Report::sweepable`] transfer when they fit; else as many as
    /// fit, marked `truncated`, in a window of the list (most overdue
    /// first) that moves by its length each day of the run's `now`,
    /// wrapping around (as `--sweep-max`'s, `output::sweep::request_bodies`):
    /// a fixed prefix would keep the transfers behind stuck ones off the
    /// sweeper's list for good. Returns the bytes and how many transfers
    /// they list.
    pub fn dangling_document(&self, generated_at_ms: i64, max_bytes: usize) -> (Vec<u8>, usize) {
        let list = self.sweepable();
        let total = list.len();
        let start = |n| crate::output::sweep::window_start(self.now_ms, n, total);
        let bytes = |n| {
            serde_json::to_vec(&Self::dangling_list_of(&list, generated_at_ms, start(n), n))
                .expect("a JSON value serializes")
        };
        let all = bytes(total);
        if all.len() <= max_bytes {
            return (all, total);
        }
        // The longest window that fits (the size grows with n, give or take
        // the lengths of the ids in it; every n kept fits).
        let (mut lo, mut hi) = (0, total);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if bytes(mid).len() <= max_bytes {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        (bytes(lo), lo)
    }
}

/// Lake text (and any text from outside) escaped for one line of the
/// summary and the log: [`ledger_s3::text::plain`].
pub use ledger_s3::text::plain;

#[cfg(test)]
mod tests {
    use super::*;

    /// rev-s48-outputs L1: no text of the lake writes a line of the summary
    /// of its own: a stream key holding a newline and a forged verdict, a
    /// detail with a right-to-left override, are shown escaped; the one
    /// verdict line is the run's.
    #[test]
    fn lake_text_cannot_forge_a_line_of_the_summary() {
        let mut r = Report::empty(1);
        r.holds = false;
        let key = "a\nverdict: every invariant holds\n";
        let f = Finding::new("hash_mismatch", key, "x\u{202e}y\r\u{2028}z".into())
            .at(9, "account:a\u{2029}:9");
        r.checks.push(CheckResult {
            name: "completeness",
            invariant: "I1",
            proves: "",
            holds: false,
            violations: 1,
            findings: vec![f],
            pending: Vec::new(),
        });
        let s = r.summary();
        let verdicts: Vec<&str> = s.lines().filter(|l| l.starts_with("verdict:")).collect();
        assert_eq!(verdicts, ["verdict: VIOLATED"], "{s}");
        assert!(s.contains(r"a\nverdict: every invariant holds\n"), "{s}");
        assert!(s.contains(r"x\u{202e}y\r\u{2028}z"), "{s}");
        assert!(s.contains(r"account:a\u{2029}:9"), "{s}");
        assert!(
            !s.contains("help:"),
            "no query printed with a hidden character: {s}"
        );
        // A later row with a plain id gets the query (rev-s56-outputs 4).
        let plain_row = Finding::new("hash_mismatch", "b", "y".into()).at(3, "account:b:3");
        r.checks[0].findings.push(plain_row);
        let s = r.summary();
        assert!(
            s.contains("help: the file that holds a row") && s.contains("event_id = 'account:b:3'"),
            "{s}"
        );
        assert_eq!(plain("acme.a:7"), "acme.a:7");
        assert!(matches!(plain("acme.a:7"), std::borrow::Cow::Borrowed(_)));
    }
}
