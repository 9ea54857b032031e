//! One reconciliation run: list and check the files, stream each table once
//! in (`stream_key`, `seq`) order, feed every stream to the per-stream checks
//! and into the facts, then run the cross-stream checks on the facts.
//!
//! A run may resume from a checkpoint (see `checkpoint`): it then reads only
//! the files the checkpoint has not proved, continues each stream from its
//! tail, and re-proves from the first event any stream whose new rows do not
//! start after its tail. A full run is a resumed run from nothing.
//!
//! The account and transfer tables are proved on two threads; in a full run
//! the account thread, once its table is done, reads and proves the upper
//! part of the transfer table's remaining keys ([`Split`]) and then takes
//! over chunks of transfer streams ([`Handoff`]).
//!
//! ```text
//! lake ─list+footers─▶ files ─DataFusion per file, k-way merge─▶ rows ─dedup/group─▶ streams
//!   streams ─▶ completeness, duplicates, balance, overdraft   (per stream)
//!   streams ─▶ facts ─▶ transfer/global conservation, consistency, convergence
//! ```

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::mpsc::TrySendError;
use std::time::Instant;

use ledger_events::Stream;
use ledger_ingest::Table;

use std::collections::{HashMap, HashSet};

use crate::checkpoint::{ProofState, StreamFinding, StreamId, StreamState};
use crate::checks::*;
use crate::copies::OldRowsAre;
use crate::custody::Custody;
use crate::facts::{AccountFacts, Facts};
use crate::finding::{CheckResult, Finding, Settle};
use crate::keyed::{Keyed, Seen, Wanted};
use crate::lake::{Error, KeyGroup, Lake, LakeFileInfo, Select, FOOTER_DISAGREES};
use crate::names::{FxMap, FxSet};
use crate::owing::{Noted, Owing, Proved};
use crate::presence::{Noter, Presence};
use crate::presence_files::Sets;
use crate::report::{Incremental, Report, REPORT_VERSION};
use crate::rows::{strings, Row};
use crate::stream::{unhex, Grouper, LastHashes, ScanStats, StreamRows, StreamView, Tail, Views};
use ledger_events::event::HashCheck;

#[derive(Debug, Clone)]
pub struct Options {
    /// The instant deadlines are judged against (ms since the epoch).
    pub now_ms: i64,
    /// Progress lines on stderr.
    pub progress: bool,
    /// Let the thread that finishes its table first take over transfer
    /// streams from the other ([`Handoff`]). On in the CLI; off only to
    /// compare the two (the verdicts are the same).
    /// With it, the free thread also takes the upper half of the transfer
    /// table's remaining keys ([`Split`]).
    pub handoff: bool,
    /// Ask for the split before proving the account table rather than after
    /// (tests: a small lake's transfer table is otherwise done by then).
    pub split_first: bool,
    /// Prove a full run's account table one date partition at a time
    /// ([`prove_by_date`]). On in the CLI; off only to compare the two (the
    /// verdicts are the same).
    pub by_date: bool,
    /// The settle window (ms): a finding that rests on a row being absent
    /// and whose youngest row is younger than this is pending, not violated
    /// (the row may still be in delivery: [`crate::settle`]). 0: every
    /// finding is judged on the lake as delivered.
    pub settle_ms: i64,
    /// How many fingerprints of wanted stretches a keyed scan enumerates
    /// before it matches the longest histories instead (`crate::keyed`):
    /// [`crate::keyed::WANTED_STARTS_MAX`] in the CLI. Tests set 0 so that
    /// every history takes the path only a hot account's takes otherwise;
    /// the verdicts are the same.
    pub wanted_starts_max: usize,
}

/// A line of the run's timeline on stderr, with `RECONCILE_TRACE=1`: where
/// a run's time goes, phase by phase and thread by thread (the progress lines
/// say what was read, not when each part ended).
fn trace(started: Instant, what: std::fmt::Arguments<'_>) {
    if crate::lake::trace_enabled() {
        crate::say!(
            "reconcile: trace {:.2} s: {what}",
            started.elapsed().as_secs_f64()
        );
    }
}

/// The per-stream checks, in report order.
const STREAM_CHECKS: [&str; 6] = [
    completeness::NAME,
    duplicates::NAME,
    balance::NAME,
    overdraft::NAME,
    // Its per-row part: a transfer event that changes the transfer's terms.
    transfer_conservation::NAME,
    protocol::NAME,
];

/// The checks that judge each transfer from its state and legs: their
/// findings are keyed by transfer id.
const CROSS_STREAM_CHECKS: [&str; 3] = [
    transfer_conservation::NAME,
    consistency::NAME,
    convergence::NAME,
];

/// The proof under construction: per-stream state and findings, the facts.
/// A transfer stream's state lives with its facts (`facts.transfers`, dense
/// and sorted); every other stream's in `streams`.
struct Proof {
    streams: FxMap<StreamId, StreamState>,
    findings: Vec<StreamFinding>,
    facts: Facts,
    /// Every row's hash is checked here (its buffers reused).
    hashes: HashCheck,
    /// The streams of every lake file read whole (`crate::presence`).
    presence: Presence,
}

/// Whether a `stream` found in `table` is a transfer stream in its own table
/// (whose state lives in `facts.transfers`).
fn is_transfer(table: Table, stream: Stream) -> bool {
    table == Table::Transfer && stream == Stream::Transfer
}

/// The checks every stream gets, continuing from its tail.
fn check_chain(s: &StreamView, tail: &mut Tail, out: &mut [Vec<Finding>; 6]) {
    completeness::check_stream(s, tail, &mut out[0]);
    duplicates::check_stream(s, &mut out[1]);
}

/// How many streams ahead [`Proof::visit_chunk`] prefetches the names a
/// transfer stream interns.
const NAMES_PREFETCH_AHEAD: usize = 4;

impl Proof {
    fn empty() -> Proof {
        Proof {
            streams: Default::default(),
            findings: Vec::new(),
            facts: Facts::default(),
            hashes: HashCheck::default(),
            presence: Presence::default(),
        }
    }

    /// Whether nothing is proved or named yet (a full run's start): the
    /// same as [`Proof::empty`].
    fn is_empty(&self) -> bool {
        self.streams.is_empty()
            && self.findings.is_empty()
            && self.facts.transfers.is_empty()
            && self.facts.legs.is_empty()
            && self.facts.names.list().is_empty()
    }

    /// The last seq proved of the stream `key` of `table`, if any of it has
    /// been proved (a part of only seq-0 rows leaves it at 0).
    fn proved_tail(&self, table: Table, stream: Stream, key: &str) -> Option<u64> {
        self.tail(table, stream, key).map(|t| t.last_seq)
    }

    /// Where the proof of the stream `key` of `table` stopped, if any of it
    /// has been proved.
    fn tail(&self, table: Table, stream: Stream, key: &str) -> Option<&Tail> {
        if is_transfer(table, stream) {
            self.facts.transfers.state(key).map(|t| &t.tail)
        } else {
            let id = (table, stream, key.to_owned());
            self.streams.get(&id).map(|st| &st.tail)
        }
    }

    /// For a stream of `table` whose first new row is at or before its tail:
    /// drops from `s` the rows that are copies of rows already proved and
    /// returns how many ([`crate::copies`]), or what to do instead
    /// ([`Kept`]). Streams in `flagged` (with a finding) are always reopened.
    fn drop_proved_copies(
        &mut self,
        table: Table,
        s: &mut StreamRows,
        cleared: Option<&crate::copies::Cleared>,
        flagged: &HashSet<StreamId>,
    ) -> Result<usize, Kept> {
        let id: StreamId = (table, s.stream, s.key().to_owned());
        if flagged.contains(&id) {
            return Err(Kept::Reopen(false));
        }
        // Only an account stream of the account table answers to the
        // pre-proof scan; a transfer stream is pulled back by id whatever its
        // rows, and any other has no legs: the proof alone decides for them.
        let (mut was_cleared, mut found) = (false, None);
        if table == Table::Account && s.stream == Stream::Account {
            match cleared.map(|c| c.get(&id.2)) {
                Some(None) => return Err(Kept::Reopen(false)), // reopened before the proof, history pulled back
                Some(Some(again)) => (was_cleared, found) = (true, again.as_ref()),
                None => {}
            }
        }
        let tail = self
            .tail(table, s.stream, &id.2)
            .cloned()
            .ok_or(Kept::Reopen(false))?;
        match crate::copies::proved_copies(s, &tail, found, &mut self.hashes) {
            OldRowsAre::Copies(n) => {
                s.skip_first(n);
                Ok(n)
            }
            // An account stream's old rows were looked up before the proof.
            OldRowsAre::MaybeFoundAgain(old) if is_transfer(table, s.stream) => {
                Err(Kept::LookUp(old))
            }
            _ => Err(Kept::Reopen(was_cleared)),
        }
    }

    /// Room for a pass over `rows` rows of `table` (address space: see
    /// [`crate::facts::Transfers::reserve_pass`]).
    fn reserve(&mut self, table: Table, rows: usize) {
        match table {
            Table::Transfer => self.facts.transfers.reserve_pass(rows),
            // From nothing (a full run): log the legs, rows built at the end.
            Table::Account if self.facts.legs.is_empty() => self.facts.legs.start_log(rows),
            Table::Account => self.facts.legs.reserve(rows / 2),
            Table::Subscription => {}
        }
    }

    /// Proves the streams of `chunk` (of `table`), in order.
    fn visit_chunk(&mut self, table: Table, chunk: Vec<StreamRows>) {
        let views = Views::new(&chunk, &mut self.hashes);
        for (i, s) in views.iter().enumerate() {
            if let Some(ahead) = views.get(i + NAMES_PREFETCH_AHEAD) {
                if is_transfer(table, ahead.stream) {
                    self.facts.prefetch_transfer(&ahead);
                }
            }
            self.visit(table, &s);
        }
    }

    fn visit(&mut self, table: Table, s: &StreamView) {
        let mut out: [Vec<Finding>; 6] = Default::default();
        if is_transfer(table, s.stream) {
            let mut st = self
                .facts
                .transfers
                .state(s.key)
                .cloned()
                .unwrap_or_default();
            check_chain(s, &mut st.tail, &mut out);
            let names = &self.facts.names;
            let last =
                (st.facts.last_seq > 0).then(|| (st.facts.last_seq, names.get(st.facts.phase)));
            completeness::check_phases(s, last, &mut out[0]);
            transfer_conservation::check_terms(s, &st.facts, names, &mut out[4]);
            let before = last.map(|(seq, kind)| {
                (
                    seq,
                    ledger_events::TransferKind::parse(kind),
                    st.facts.releasing,
                )
            });
            protocol::check_transfer_stream(s, before, &mut out[5]);
            self.facts.add_transfer(s, &mut st.facts);
            self.facts.transfers.put(s.key, st);
        } else {
            let id: StreamId = (table, s.stream, s.key.to_owned());
            // One finding per stream, on the visit that starts its state (a
            // stream continued from an earlier date or night has it already,
            // whatever seqs its rows have: rows of seq 0 leave the tail at 0;
            // a reopened stream's state and findings are withdrawn together).
            let entry = self.streams.entry(id);
            let first_visit = matches!(entry, std::collections::hash_map::Entry::Vacant(_));
            let st = entry.or_default();
            check_chain(s, &mut st.tail, &mut out);
            if Table::of(s.stream) != table {
                // A misfiled stream's seqs say nothing of the stream of its
                // key in its own table, proved apart: a gap here would name
                // as missing a row that table may well hold (rev-s51-exact
                // F3). Its rows are still judged: validity, hash, chain.
                out[0].retain(|f| f.code != "seq_gap");
                if first_visit {
                    out[0].push(Finding::new(
                        "wrong_table",
                        s.key,
                        format!(
                            "{} stream found in the {} table",
                            s.stream.as_str(),
                            table.as_str()
                        ),
                    ));
                }
            } else if s.stream == Stream::Account {
                let a = st.account.get_or_insert_with(Default::default);
                let last_seq = a.life.map_or(0, |l| l.last_seq);
                completeness::check_account_life(s, &mut a.life, &mut out[0]);
                let mut gaps = Vec::new();
                balance::check_stream(s, &mut a.fold, &mut a.terms, &mut out[2], &mut gaps);
                for g in gaps {
                    // A row after the gap that fails its hash or is not
                    // valid does not tell what the gap moved: its balance
                    // is not the ledger's (rev-s56-pending 2: the money it
                    // made up was owed to the gap, pending).
                    // (The row after the gap is always among this chunk's
                    // rows: the gap is found when it comes. The row before
                    // may be an earlier chunk's or night's, so judging it
                    // here would make a resumed run differ from a full one.)
                    let told = !out[0].iter().any(|f| {
                        completeness::ROW_NOT_THE_LEDGERS.contains(&f.code) && f.seq == Some(g.next)
                    });
                    let gap = out[0]
                        .iter_mut()
                        .find(|f| f.code == "seq_gap" && f.seq == Some(g.first_missing));
                    if let Some(gap) = gap {
                        gap.missing_balance = g.moved.filter(|_| told);
                        if g.impossible && told {
                            // No late row can fill it: decided.
                            gap.youngest_ms = None;
                            gap.detail.push_str(
                                "; no one event moves balance and held as the rows around it say",
                            );
                        }
                    }
                }
                overdraft::check_stream(s, &mut a.limit, &mut out[3]);
                protocol::check_account_stream(s, &mut out[5]);
                self.facts.add_account(s, a, last_seq, &mut out[2]);
            }
        }
        if out.iter().all(Vec::is_empty) {
            return;
        }
        let id: StreamId = (table, s.stream, s.key.to_owned());
        for (check, found) in STREAM_CHECKS.into_iter().zip(out) {
            self.findings
                .extend(found.into_iter().map(|finding| StreamFinding {
                    check,
                    stream: id.clone(),
                    finding,
                }));
        }
    }

    /// Takes in the streams `other` proved for this table on another
    /// thread (with its own names).
    fn absorb(&mut self, other: Proof) {
        // Account streams are folded by one proof (the account table's):
        // entry ids fingerprinted under another key would never meet.
        debug_assert!(
            other.facts.entry_key == self.facts.entry_key
                || other
                    .streams
                    .values()
                    .all(|st| st.account.as_ref().is_none_or(|a| a.entries.is_empty())),
            "account entries absorbed from a proof under another key"
        );
        self.facts.absorb_transfers(other.facts);
        self.streams.extend(other.streams);
        self.findings.extend(other.findings);
        self.presence.absorb(other.presence);
    }

    /// Ends a pass over a table's files (see [`crate::facts::Transfers`]).
    fn end_pass(&mut self) {
        self.facts.transfers.end_pass();
        self.facts.legs.end_log();
    }

    /// Withdraws everything the streams in `ids` contributed, so they can
    /// be re-proved from their first event.
    fn withdraw(&mut self, ids: &HashSet<StreamId>) {
        let mut accounts = HashSet::new();
        let mut transfers = HashSet::new();
        for id in ids {
            if is_transfer(id.0, id.1) {
                transfers.insert(id.2.as_str());
            } else if let Some(st) = self.streams.remove(id) {
                if st.account.is_some() {
                    accounts.insert(id.2.clone());
                }
            }
        }
        self.facts.transfers.remove(&transfers);
        self.facts.remove_legs_of(&accounts);
        self.findings.retain(|f| !ids.contains(&f.stream));
    }
}

/// A chunk of streams proved together ([`Chunk`]) ends at this many streams
/// or rows; a hand-off message is one chunk. Messages the queue holds.
const CHUNK_STREAMS: usize = 256;
pub const CHUNK_ROWS: usize = 1024;
const HANDOFF_QUEUE: usize = 4;

/// Streams gathered to be proved together: their rows' hashes are checked
/// as one batch (a transfer stream has ~3 rows; see [`views`]).
#[derive(Default)]
struct Chunk {
    streams: Vec<StreamRows>,
    rows: usize,
}

impl Chunk {
    /// Adds `s`; returns the chunk when it is full.
    fn push(&mut self, s: StreamRows) -> Option<Vec<StreamRows>> {
        self.rows += s.len();
        self.streams.push(s);
        (self.streams.len() >= CHUNK_STREAMS || self.rows >= CHUNK_ROWS).then(|| self.take())
    }

    fn take(&mut self) -> Vec<StreamRows> {
        self.rows = 0;
        std::mem::take(&mut self.streams)
    }
}

/// Transfer streams handed from the transfer table's thread to the account
/// table's once that one has proved its own, smaller table, so that neither
/// idles while the other works. Only in a run where the transfer streams
/// start from nothing (no checkpoint state to continue from).
struct Handoff {
    /// Set when the account thread is free to take streams.
    free: AtomicBool,
    tx: std::sync::mpsc::SyncSender<Vec<StreamRows>>,
}

impl Handoff {
    /// Hands `chunk` over if the other thread is free and has room;
    /// otherwise gives it back to be proved here.
    fn offer(&self, chunk: Vec<StreamRows>) -> Vec<StreamRows> {
        if !self.free.load(AtomicOrdering::Relaxed) {
            return chunk;
        }
        match self.tx.try_send(chunk) {
            Ok(()) => Vec::new(),
            Err(TrySendError::Full(c) | TrySendError::Disconnected(c)) => c,
        }
    }

    /// No more chunks: ends the other thread's loop.
    fn close(&self) {
        // A closing message; the receiver also ends when every sender is
        // dropped, but the sender lives as long as the scope.
        self.free.store(false, AtomicOrdering::Relaxed);
        let _ = self.tx.send(Vec::new());
    }
}

/// Closes the hand-off and the split when dropped.
struct Closing<'a>(&'a Handoff, &'a Split);

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.close();
        self.1.close();
    }
}

/// Fewer rows than this ahead of the transfer table's thread: not split.
const SPLIT_ROWS_MIN: i64 = 100_000;

/// The transfer table's remaining rows, split once between the two threads
/// of a full run. The hand-off shares proving, but the transfer table's
/// thread still reads, merges and groups every row of its table, which at
/// 50M events makes it the last to finish. So the account table's thread,
/// once its own table is proved, asks ([`Split::ask`]); the transfer table's
/// thread answers with a key ahead of where it is ([`split_key`]: about half
/// of its remaining rows lie at or after it, by the row groups' statistics),
/// stops before its first row at or after (`transfer`, that key), and the
/// asking thread reads and proves the rows from there on. Streams do not
/// straddle the key, so each is proved whole on one thread, and the
/// hand-off then balances what is left.
struct Split {
    /// Set with `Asked`: read on every row, so the answer costs no lock.
    asked: AtomicBool,
    state: std::sync::Mutex<SplitState>,
    answered: std::sync::Condvar,
    /// The rows of each file the transfer thread read before the key, and
    /// the files the account thread read from it on with the rows it read
    /// of each: together each file's rows ([`Split::check_rows`]).
    rows: std::sync::Mutex<SplitRows>,
}

#[derive(Default)]
struct SplitRows {
    lower: Option<Vec<u64>>,
    upper: Option<(Vec<LakeFileInfo>, Vec<u64>)>,
}

enum SplitState {
    Open,
    Asked,
    /// The key, and the files to read from it on (all of the table's new
    /// files: see [`Watch::answer`]).
    At(String, Vec<LakeFileInfo>),
    Closed,
}

impl Split {
    fn new() -> Split {
        Split {
            asked: AtomicBool::new(false),
            state: std::sync::Mutex::new(SplitState::Open),
            answered: std::sync::Condvar::new(),
            rows: Default::default(),
        }
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, SplitRows> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The rows of each of its files the transfer thread read, up to the key.
    fn note_lower(&self, rows: Vec<u64>) {
        self.rows().lower = Some(rows);
    }

    /// The rows of each of `files` the account thread read, from the key on.
    fn note_upper(&self, files: Vec<LakeFileInfo>, rows: Vec<u64>) {
        self.rows().upper = Some((files, rows));
    }

    /// When the table was split, every file gave its two parts all its rows
    /// between them. The part from the key on is read with a filter, and
    /// DataFusion skips the row groups and pages whose footer statistics (or
    /// Bloom filters) say hold no row at or after it: a footer that
    /// disagrees with its pages would hide rows from both threads. Such a
    /// file is an error naming it, as a damaged one is.
    fn check_rows(&self) -> Result<(), Error> {
        let rows = self.rows();
        let (Some(lower), Some((files, upper))) = (&rows.lower, &rows.upper) else {
            return Ok(());
        };
        for ((f, l), u) in files.iter().zip(lower).zip(upper) {
            let read = l + u;
            if i64::try_from(read).ok() != Some(f.rows) {
                return Err(Error::File {
                    key: f.key.clone(),
                    why: format!(
                        "its footer says it holds {} rows, but reading it in two parts (the transfer table split at a key, \
                         each part's row groups and pages chosen by the footer's statistics) gave {read} ({l} before the key, \
                         {u} from it on): {FOOTER_DISAGREES}",
                        f.rows
                    ),
                });
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SplitState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for the upper part of the transfer table's remaining rows and
    /// waits for the answer: the key they start at and the files that hold
    /// them, or none (the table is done, or too little is left).
    fn ask(&self) -> Option<(String, Vec<LakeFileInfo>)> {
        let mut st = self.lock();
        if !matches!(*st, SplitState::Open) {
            return None;
        }
        *st = SplitState::Asked;
        self.asked.store(true, AtomicOrdering::Release);
        while matches!(*st, SplitState::Asked) {
            st = self.answered.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        match std::mem::replace(&mut *st, SplitState::Closed) {
            SplitState::At(key, files) => Some((key, files)),
            _ => None,
        }
    }

    /// No split from now on; an ask waiting for an answer gets none.
    fn close(&self) {
        let mut st = self.lock();
        if matches!(*st, SplitState::Open | SplitState::Asked) {
            *st = SplitState::Closed;
            self.answered.notify_all();
        }
    }
}

/// The transfer table thread's side of a [`Split`], over its `files`.
struct Watch<'a> {
    split: &'a Split,
    files: &'a [LakeFileInfo],
    rows_min: i64,
    answered: bool,
    /// The key the other thread reads from, once answered with one.
    at: Option<String>,
}

impl Watch<'_> {
    /// Whether the scan stops before `row`: rows at or after (`transfer`,
    /// the split key) are the other thread's.
    fn stop_at(&mut self, row: &Row<'_>) -> bool {
        if !self.answered {
            if !self.split.asked.load(AtomicOrdering::Acquire) {
                return false;
            }
            self.answer(row);
        }
        self.at.as_deref().is_some_and(|key| {
            row.stream() > Stream::Transfer
                || (row.stream() == Stream::Transfer && row.key() >= key)
        })
    }

    /// Answers the ask: `row` is the first row not yet read.
    fn answer(&mut self, row: &Row<'_>) {
        self.answered = true;
        let mut st = self.split.lock();
        if !matches!(*st, SplitState::Asked) {
            return;
        }
        let groups = self.files.iter().flat_map(|f| &f.key_groups);
        let key = (row.stream() == Stream::Transfer)
            .then(|| split_key(groups, row.key(), self.rows_min))
            .flatten();
        *st = match key {
            Some(key) => {
                // Every file: a row group's key range says nothing of its
                // streams (a row of a later stream is the other thread's
                // whatever its key); DataFusion prunes by both columns.
                self.at = Some(key.clone());
                SplitState::At(key, self.files.to_vec())
            }
            None => SplitState::Closed,
        };
        self.split.answered.notify_all();
    }
}

/// A key after `at` that splits the rows still ahead of `at` in two about
/// equal parts, judged by row groups' key ranges (a group that straddles a
/// key counts half on each side); none when fewer than `rows_min` rows are
/// ahead.
fn split_key<'a>(
    groups: impl Iterator<Item = &'a KeyGroup> + Clone,
    at: &str,
    rows_min: i64,
) -> Option<String> {
    let ahead = |key: &str| -> i64 {
        groups
            .clone()
            .map(|g| {
                if g.min.as_str() >= key {
                    2 * g.rows
                } else if g.max.as_str() < key {
                    0
                } else {
                    g.rows
                }
            })
            .sum()
    };
    let total = ahead(at);
    if total < 2 * rows_min.max(1) {
        return None;
    }
    let mut keys: Vec<&str> = groups
        .clone()
        .flat_map(|g| [g.min.as_str(), g.max.as_str()])
        .filter(|k| *k > at)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .min_by_key(|k| (2 * ahead(k) - total).abs())
        .map(str::to_owned)
}

/// Proves the streams of `files` (of `table`) that `select` reads and
/// `keep` keeps into `proof`, in chunks, and returns the scan's statistics
/// and the streams it noted in each file ([`scan_streams`]): the caller
/// keeps them only if `select` read the files whole), and the rows it read
/// of each file.
async fn prove_streams(
    run: &RunCtx<'_>,
    files: &[LakeFileInfo],
    select: Select<'_>,
    table: Table,
    proof: &mut Proof,
    keyed: Option<&Keyed<'_>>,
    keep: impl Fn(&StreamRows) -> bool,
) -> Result<(ScanStats, Presence, Vec<u64>), Error> {
    let mut own = Chunk::default();
    // What the scan saw of each file `keyed` checks (it reads them by key).
    let mut seen: Vec<Option<Seen>> = files
        .iter()
        .map(|f| {
            keyed
                .filter(|k| k.filters(&f.key) && !select.reads_whole(&f.key))
                .map(|_| Seen::default())
        })
        .collect();
    // Seen a stream at a time (nothing a row), so a proof with no check
    // (the split's upper part) pays nothing for it.
    let read = scan_streams(
        run.lake,
        files,
        select,
        run.cancel,
        |_| false,
        |s| {
            if let Some(k) = keyed {
                k.see_stream(&mut seen, &s);
            }
            if keep(&s) {
                if let Some(c) = own.push(s) {
                    proof.visit_chunk(table, c);
                }
            }
        },
    )
    .await?;
    if let Some(k) = keyed {
        for (f, s) in files.iter().zip(&seen) {
            if let Some(s) = s {
                k.check(&f.key, s)?;
            }
        }
    }
    proof.visit_chunk(table, own.take());
    Ok(read)
}

/// Proves the transfer table's rows from (`transfer`, `key`) on, in `files`,
/// into `proof` (the split's upper part, on the account table's thread), and
/// returns the scan's statistics and the rows it read of each file.
async fn prove_upper(
    run: &RunCtx<'_>,
    key: &str,
    files: &[LakeFileInfo],
    proof: &mut Proof,
) -> Result<(ScanStats, Vec<u64>), Error> {
    let from = Select {
        from: Some((Stream::Transfer, key)),
        ..Select::default()
    };
    // With the transfer thread's part, the split reads the files whole.
    let (read, noted, file_rows) =
        prove_streams(run, files, from, Table::Transfer, proof, None, |_| true).await?;
    proof.presence.absorb(noted);
    Ok((read, file_rows))
}

/// A run from nothing: reads every lake file.
pub async fn reconcile(lake: &Lake, opts: &Options) -> Result<Report, Error> {
    reconcile_from(lake, opts, None).await.map(|(r, _)| r)
}

/// One table's part of a run: what it proved and read.
struct TableRun {
    proof: Proof,
    stats: ScanStats,
    inc: Incremental,
    /// The table's files, as listed.
    files: Vec<LakeFileInfo>,
    /// The `.parquet` objects beside them that are not lake files, when
    /// this proof listed the table (a resumed run lists every table before
    /// its proofs: [`Resume::ignored`]).
    ignored: Vec<String>,
    /// An account stream the pre-proof scan cleared (its old rows chain to
    /// its tail) had a row that does not hash to its recorded hash: its
    /// history's transfers were not pulled back, so only a full proof
    /// reaches the verdicts ([`crate::copies`]).
    copies_failed: bool,
    /// The checkpoint's tails of the streams re-proved from their first
    /// event, and the versions of the conflicts their proof had found: the
    /// lake must still hold them ([`crate::retained`]).
    reopened: Vec<crate::retained::Owed>,
}

/// What every table's proof in a run shares.
#[derive(Clone, Copy)]
struct RunCtx<'a> {
    lake: &'a Lake,
    /// Lake files the checkpoint has proved: key → stamp.
    prior_files: &'a std::collections::BTreeMap<String, String>,
    /// The checkpoint's notes of the streams of those files (the keyed
    /// re-proof's check, `crate::keyed`).
    stored: &'a crate::presence_files::Stored,
    /// Account streams whose rows at or before their tails the pre-proof
    /// scan found chained to them ([`crate::copies::ChainScan`]) or found
    /// again in the proved files ([`found_again`]); `None`: no such scan ran
    /// (nothing archived, so nothing to pull back), and the proof decides
    /// alone.
    cleared: Option<&'a crate::copies::Cleared>,
    /// Whether old transfer rows may be looked up in the proved files
    /// ([`found_again`]): not on a night custody could not hold a gone
    /// version to its stretches ([`Custody::uncounted`]).
    find_again: bool,
    opts: &'a Options,
    started: Instant,
    /// Set once the run's other table thread failed: this one stops.
    cancel: &'a crate::threads::Cancel,
}

/// Proves one table: pass 1 over the files the checkpoint has not proved,
/// then the look-up of the old rows of transfer streams delivered again
/// ([`found_again`]), then pass 2 over every file for the streams pass 1
/// reopened and those the look-up did not find (`noted`: the checkpoint's
/// notes of the table's proved files, when the pull-back read them).
async fn prove_table(
    run: &RunCtx<'_>,
    table: Table,
    listed: Option<Vec<LakeFileInfo>>,
    mut proof: Proof,
    handoff: Option<&Handoff>,
    split: Option<&Split>,
    noted: Option<Sets>,
) -> Result<TableRun, Error> {
    let RunCtx {
        lake,
        prior_files,
        stored,
        cleared,
        find_again,
        opts,
        started,
        cancel,
    } = *run;
    // Only streams that start from nothing can be proved elsewhere: no
    // transfer kept from a checkpoint, and no other stream kept in this
    // proof (one of another kind found in this table: a subscription stream
    // sorts after the transfers, into the split's upper part, which starts
    // from nothing; or one of the subscription table, proved after it).
    let handoff = handoff.filter(|_| proof.facts.transfers.is_empty() && proof.streams.is_empty());
    let mut stats = ScanStats::default();
    let mut inc = Incremental::default();
    let (files, ignored) = match listed {
        Some(files) => (files, Vec::new()),
        None => listed_warning_ignored(lake, table).await?,
    };
    let new = new_files(&files, prior_files);
    inc.files_skipped += files.len() - new.len();
    inc.files_read += new.len();
    if opts.progress {
        let rows: i64 = new.iter().map(|f| f.rows).sum();
        crate::say!(
            "reconcile: {}: {} files ({} already proved), {rows} rows to read (footers checked)",
            table.as_str(),
            files.len(),
            files.len() - new.len()
        );
    }
    // Pass 1: the new files. A stream continues from its tail unless a new
    // row is at or before it: then it is reopened.
    let mut reopen: HashSet<StreamId> = HashSet::new();
    // Streams with a finding: their old rows always reopen them.
    let flagged: HashSet<StreamId> = proof.findings.iter().map(|f| f.stream.clone()).collect();
    let (mut copies, mut copies_failed) = (0usize, false);
    // Transfer streams whose old rows may be copies of rows the proved
    // files hold (`Kept::LookUp`), each with their seqs and hashes: looked
    // up after this pass.
    let mut look_up: HashMap<String, crate::copies::OldRows> = HashMap::new();
    let rows = new.iter().map(|f| f.rows.max(0) as usize).sum();
    // A full proof of the account table goes one date at a time while the
    // dates keep each stream's order (see `prove_by_date`).
    let dates = date_groups(&new);
    let dated = if opts.by_date && table == Table::Account && dates.len() > 1 && proof.is_empty() {
        let read = prove_by_date(run, table, &dates, rows, &mut proof).await?;
        if read.is_none() {
            proof = Proof::empty();
        }
        read
    } else {
        None
    };
    let read = match dated {
        Some(read) => read,
        None => {
            proof.reserve(table, rows);
            // Transfer streams that may be handed over, and the others.
            let (mut shared, mut own) = (Chunk::default(), Chunk::default());
            // A full run's transfer table: stop where the other thread takes over.
            let mut watch = split.filter(|_| handoff.is_some()).map(|split| Watch {
                split,
                files: &new,
                rows_min: if opts.split_first { 0 } else { SPLIT_ROWS_MIN },
                answered: false,
                at: None,
            });
            let stop = |row: &Row<'_>| watch.as_mut().is_some_and(|w| w.stop_at(row));
            let (read, noted, file_rows) =
                scan_streams(lake, &new, Select::default(), cancel, stop, |mut s| {
                    // A stream proved before (rows of seq 0 alone leave its tail
                    // at 0) whose new rows start at or before its tail.
                    let tail_seq = proof.proved_tail(table, s.stream, s.key());
                    if tail_seq.is_some_and(|t| s.first_seq() <= t) {
                        match proof.drop_proved_copies(table, &mut s, cleared, &flagged) {
                            Ok(n) => copies += n,
                            // Old rows alone (a row after the tail is proved with
                            // its stream, reopened).
                            Err(Kept::LookUp(old)) if find_again && old.len() == s.len() => {
                                look_up.insert(s.key().to_owned(), old);
                                return;
                            }
                            Err(kept) => {
                                copies_failed |= matches!(kept, Kept::Reopen(true));
                                reopen.insert((table, s.stream, s.key().to_owned()));
                                return;
                            }
                        }
                        if s.is_empty() {
                            return; // nothing but copies: the stream is as proved
                        }
                    }
                    if let Some(h) = handoff.filter(|_| is_transfer(table, s.stream)) {
                        // Each chunk of transfer streams goes to the other thread when it
                        // is free and has room, else is proved here (in order either way).
                        if let Some(c) = shared.push(s) {
                            proof.visit_chunk(table, h.offer(c));
                        }
                    } else if let Some(c) = own.push(s) {
                        proof.visit_chunk(table, c);
                    }
                })
                .await?;
            proof.presence.absorb(noted);
            if let Some(split) = split {
                split.close();
                split.note_lower(file_rows);
            }
            proof.visit_chunk(table, shared.take());
            proof.visit_chunk(table, own.take());
            read
        }
    };
    trace(
        started,
        format_args!("{}: new files proved", table.as_str()),
    );
    proof.end_pass();
    trace(started, format_args!("{}: pass ended", table.as_str()));
    if !look_up.is_empty() {
        let rows: HashMap<String, usize> =
            look_up.iter().map(|(k, r)| (k.clone(), r.len())).collect();
        let kind = (table, Stream::Transfer);
        let again = found_again(lake, kind, prior_files, stored, &files, look_up, opts).await?;
        if opts.progress && !again.is_empty() {
            crate::say!(
                "reconcile: {}: {} transfer stream(s) have old rows the proved rows after them vouch for (delivered again, or compacted again): not reopened ({:.1} s)",
                table.as_str(),
                again.len(),
                started.elapsed().as_secs_f64()
            );
        }
        for (key, n) in rows {
            if again.contains_key(&key) {
                copies += n;
            } else {
                reopen.insert((table, Stream::Transfer, key));
            }
        }
    }
    add_stats(&mut stats, &read);
    inc.rows_already_proved += copies as u64;
    if copies > 0 && opts.progress {
        crate::say!(
            "reconcile: {}: {copies} new rows are copies of rows the checkpoint proved (a compacted or redelivered day): \
             they chain to their streams' checkpointed hashes, or the proved rows after them vouch for them, so they are not proved again",
            table.as_str()
        );
    }
    // Pass 2: reopened streams, re-proved from their first event over every
    // file of the table (row groups outside their keys are pruned).
    let mut reopened = Vec::new();
    if !reopen.is_empty() {
        inc.streams_reopened += reopen.len();
        if opts.progress {
            crate::say!(
                "reconcile: {}: {} stream(s) have new rows at or before their checkpoint: re-proving them from seq 1",
                table.as_str(),
                reopen.len()
            );
        }
        reopened = reopen
            .iter()
            .filter_map(|id| {
                let tail = proof.tail(id.0, id.1, &id.2)?;
                (tail.last_seq > 0).then(|| (id.clone(), tail.clone()))
            })
            .collect();
        // Streams proved at seq 0 alone (invalid rows, each noted): their
        // stretches start at 0.
        let at_zero: Vec<(Stream, String)> = reopen
            .iter()
            .filter(|id| {
                proof
                    .tail(id.0, id.1, &id.2)
                    .is_some_and(|t| t.last_seq == 0)
            })
            .map(|id| (id.1, id.2.clone()))
            .collect();
        // The versions of their conflicts are owed as their tails are: the
        // chain does not vouch for them, so a proof of the lake's rows that
        // lost one would find the stream clean (`retained::evidence`).
        reopened.extend(
            proof
                .findings
                .iter()
                .filter(|f| reopen.contains(&f.stream))
                .filter_map(crate::retained::evidence),
        );
        proof.withdraw(&reopen);
        let mut keys: Vec<String> = reopen.iter().map(|id| id.2.clone()).collect();
        keys.sort();
        keys.dedup();
        // The new files are read whole: a footer statistic that lies could
        // otherwise hide their rows of these streams from this pass, and
        // those past the tail the checkpoint proved would never be proved.
        // The files the checkpoint proved are read by key, and each must
        // show every row of these streams the checkpoint noted in it
        // (`crate::keyed`, as the pull-back's scan): a row a lie hid would
        // be reported missing, a violation the lake does not hold. When a
        // check runs, a proved file with no notes is read whole. The notes
        // are read only once a check will use them (for the account table,
        // the pull-back's serve again).
        //
        // A stretch of a stream in a proved file starts at or before the
        // last seq the checkpoint proved of it.
        let streams = reopened
            .iter()
            .map(|(id, tail)| (id.1, id.2.as_str(), tail.last_seq))
            .chain(at_zero.iter().map(|(kind, key)| (*kind, key.as_str(), 0)));
        let reading = "the re-proof of the streams it reopens";
        let sets;
        let keyed = if reopened.is_empty() && at_zero.is_empty() {
            // No reopened stream has a proved row: no stretch to check, the
            // proved files read by key.
            None
        } else {
            Some(match Wanted::capped(opts.wanted_starts_max, streams) {
                None => Keyed::whole(&keys, reading),
                Some(wanted) => {
                    sets = match noted {
                        Some(sets) => sets,
                        None => crate::keyed::proved_sets(stored, prior_files, &files)?,
                    };
                    let keys_of: Vec<&str> = files.iter().map(|f| f.key.as_str()).collect();
                    Keyed::checked(
                        &keys,
                        reading,
                        wanted,
                        &keys_of,
                        &sets.presence,
                        &sets.plain,
                    )
                }
            })
        };
        let new_keys: FxSet<&str> = new.iter().map(|f| f.key.as_str()).collect();
        let whole: FxSet<&str> = files
            .iter()
            .map(|f| f.key.as_str())
            .filter(|k| new_keys.contains(k) || keyed.as_ref().is_some_and(|c| !c.filters(k)))
            .collect();
        let only = Select {
            keys: Some(&keys),
            from: None,
            whole: Some(&whole),
        };
        // This pass reads some streams of old files: what it notes of them
        // is not their whole set (`crate::presence`), so it is not kept.
        let (read, _, _) =
            prove_streams(run, &files, only, table, &mut proof, keyed.as_ref(), |s| {
                reopen.contains(&(table, s.stream, s.key().to_owned()))
            })
            .await?;
        proof.end_pass();
        add_stats(&mut stats, &read);
    }
    if opts.progress {
        crate::say!(
            "reconcile: {}: {} rows read, {} plain duplicates, {} streams ({:.1} s)",
            table.as_str(),
            stats.rows_read,
            stats.plain_duplicates,
            stats.streams,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(TableRun {
        proof,
        stats,
        inc,
        files,
        ignored,
        copies_failed,
        reopened,
    })
}

/// A group of consecutive dates ([`date_groups`]) takes no further date
/// once it holds this many rows...
const DATE_GROUP_ROWS: i64 = 200_000;
/// ...or when the next date's files would take it past this many files.
const DATE_GROUP_FILES: usize = 8;

/// `files` (sorted by key) cut into groups of consecutive whole date
/// partitions, in date order. A date of a compacted lake (one file of
/// 130K rows and more a day at 10M events over 30 days) is a group or half
/// of one; small dates (a history of a few thousand events a day, still in
/// their ingest files) go together up to [`DATE_GROUP_FILES`] files, so
/// that the merges' fixed costs (planning a scan, opening its files) are
/// paid per group, not per day, while a merge still holds a few files.
fn date_groups(files: &[LakeFileInfo]) -> Vec<&[LakeFileInfo]> {
    // Whole dates first.
    let mut dates: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    for i in 1..=files.len() {
        if i == files.len() || partition_of(&files[i]) != partition_of(&files[start]) {
            dates.push(start..i);
            start = i;
        }
    }
    let mut groups = Vec::new();
    let mut group: Option<std::ops::Range<usize>> = None;
    for d in dates {
        group = match group {
            Some(g)
                if files[g.clone()].iter().map(|f| f.rows.max(0)).sum::<i64>()
                    < DATE_GROUP_ROWS
                    && g.len() + d.len() <= DATE_GROUP_FILES =>
            {
                Some(g.start..d.end)
            }
            Some(g) => {
                groups.push(&files[g]);
                Some(d)
            }
            None => Some(d),
        };
    }
    groups.extend(group.map(|g| &files[g]));
    groups
}

/// The directory of a lake file: its date partition (`events/{table}/date={d}`).
fn partition_of(f: &LakeFileInfo) -> &str {
    f.key.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Pass 1 of a full proof of `table`, one group of dates at a time
/// ([`date_groups`]): each group's files merged alone and each stream
/// continuing from its tail in the dates before, as an incremental run
/// continues from a checkpoint. The merge then holds one group's row groups
/// instead of every date's (a third of the account table's peak memory at
/// 10M events over 30 days, more on a longer history).
///
/// That is the merge of all the dates as long as a stream's rows in a group
/// all come after its rows in the groups before. A stream already proved in
/// part whose first row in a group is at or before its tail (an event that
/// landed in a later date, a copy of one in another date) stops it: it
/// returns `None`, with what it proved left in `proof` for the caller to
/// discard, and the caller merges every date.
/// Otherwise it returns the pass's statistics, the same as the merge's
/// (each stream counted once).
async fn prove_by_date(
    run: &RunCtx<'_>,
    table: Table,
    dates: &[&[LakeFileInfo]],
    rows: usize,
    proof: &mut Proof,
) -> Result<Option<ScanStats>, Error> {
    let behind: std::cell::RefCell<Option<(String, u64)>> = Default::default();
    if run.opts.progress {
        let partitions: std::collections::BTreeSet<&str> = dates
            .iter()
            .flat_map(|g| g.iter().map(partition_of))
            .collect();
        crate::say!(
            "reconcile: {}: {} date partitions, proved in {} groups of consecutive dates",
            table.as_str(),
            partitions.len(),
            dates.len()
        );
    }
    proof.reserve(table, rows);
    let mut read = ScanStats::default();
    for files in dates {
        let mut chunk = Chunk::default();
        let mut streams = 0;
        let (r, noted, _) = scan_streams(
            run.lake,
            files,
            Select::default(),
            run.cancel,
            |_| behind.borrow().is_some(),
            |s| {
                // A stream proved in part continues only after its tail.
                match proof.proved_tail(table, s.stream, s.key()) {
                    None => streams += 1,
                    Some(tail_seq) if s.first_seq() <= tail_seq => {
                        *behind.borrow_mut() = Some((s.key().to_owned(), tail_seq));
                        return;
                    }
                    Some(_) => {}
                }
                if let Some(c) = chunk.push(s) {
                    proof.visit_chunk(table, c);
                }
            },
        )
        .await?;
        proof.presence.absorb(noted);
        if let Some((key, tail_seq)) = behind.take() {
            if run.opts.progress {
                let (first, last) = (
                    partition_of(&files[0]),
                    partition_of(&files[files.len() - 1]),
                );
                let span = if first == last {
                    first.to_owned()
                } else {
                    format!("{first} .. {last}")
                };
                crate::say!(
                    "reconcile: {}: stream {key:?} has a row in {span} at or before seq {tail_seq}, proved from the dates before: merging every date instead",
                    table.as_str(),
                );
            }
            return Ok(None);
        }
        proof.visit_chunk(table, chunk.take());
        read.rows_read += r.rows_read;
        read.plain_duplicates += r.plain_duplicates;
        read.distinct_rows += r.distinct_rows;
        read.streams += streams;
    }
    Ok(Some(read))
}

/// The files of `files` the checkpoint has not proved (new or rewritten).
fn new_files(
    files: &[LakeFileInfo],
    prior_files: &std::collections::BTreeMap<String, String>,
) -> Vec<LakeFileInfo> {
    files
        .iter()
        .filter(|f| !f.proved_in(prior_files))
        .cloned()
        .collect()
}

/// What a resumed run's new files name, read from a few columns before the
/// proof: the transfers to pull back from the archive (transfer streams and
/// the transfers new account events name), the account streams that have a
/// new row at or before their tail which does not chain to it (they will be
/// re-proved from their first event, so every transfer their whole history
/// names comes back too), and those whose such rows all chain to it
/// (copies of proved rows: [`crate::copies`]).
async fn touched(
    lake: &Lake,
    account_files: &[LakeFileInfo],
    transfer_files: &[LakeFileInfo],
    prior: &ProofState,
) -> Result<Touched, Error> {
    use datafusion::arrow::array::{Array, Int64Array};
    let mut ids: HashSet<String> = HashSet::new();
    lake.scan_columns(transfer_files, &["stream_key"], None, |b| {
        if let Some(keys) = strings(b, "stream_key") {
            ids.extend(keys.iter().flatten().map(str::to_owned));
        }
    })
    .await?;
    let flagged: HashSet<&str> = prior
        .findings
        .iter()
        .filter(|f| f.stream.0 == Table::Account && f.stream.1 == Stream::Account)
        .map(|f| f.stream.2.as_str())
        .collect();
    let mut chains = crate::copies::ChainScan::default();
    let columns = [
        "stream",
        "stream_key",
        "seq",
        "transfer_id",
        "hash",
        "prev_hash",
    ];
    lake.scan_columns(account_files, &columns, None, |b| {
        let (Some(stream), Some(keys), Some(seqs), Some(hash), Some(prev)) = (
            strings(b, "stream"),
            strings(b, "stream_key"),
            crate::rows::col::<Int64Array>(b, "seq").ok().flatten(),
            strings(b, "hash"),
            strings(b, "prev_hash"),
        ) else {
            // Not the lake layout: the proof will say so.
            add_transfer_ids(b, None, &mut ids);
            return;
        };
        let transfer = strings(b, "transfer_id");
        // Rows come grouped by stream: look the stream up once per stream.
        let mut at: Option<(&str, Option<&StreamState>)> = None;
        for i in 0..b.num_rows() {
            let new_row = |ids: &mut HashSet<String>| {
                if let Some(t) = transfer.as_ref().filter(|t| t.is_valid(i)) {
                    ids.insert(t.value(i).to_owned());
                }
            };
            if stream.is_null(i)
                || stream.value(i) != Stream::Account.as_str()
                || keys.is_null(i)
                || hash.is_null(i)
                || prev.is_null(i)
            {
                new_row(&mut ids);
                continue;
            }
            let key = keys.value(i);
            if at.is_none_or(|(k, _)| k != key) {
                let id = (Table::Account, Stream::Account, key.to_owned());
                at = Some((key, prior.streams.get(&id)));
            }
            let st = at.and_then(|(_, st)| st);
            let Ok(seq) = u64::try_from(seqs.value(i)) else {
                new_row(&mut ids);
                continue;
            };
            // A stream never proved, or a row after its tail (a stream of
            // seq-0 rows alone has its tail at 0 and is scanned too).
            if st.is_none_or(|s| seq > s.tail.last_seq) {
                new_row(&mut ids);
                continue;
            }
            let stream_tail = || {
                (
                    st.map(|s| s.tail.clone()).unwrap_or_default(),
                    !flagged.contains(key),
                )
            };
            chains.row(key, stream_tail, seq, hash.value(i), prev.value(i));
        }
    })
    .await?;
    let (cleared, reopened) = chains.finish();
    let mut unchained = HashMap::new();
    let mut reopened: Vec<String> = reopened
        .into_iter()
        .map(|(key, rows)| {
            if let Some(rows) = rows {
                unchained.insert(key.clone(), rows);
            }
            key
        })
        .collect();
    reopened.sort_unstable();
    Ok(Touched {
        ids,
        reopened,
        cleared,
        unchained,
    })
}

/// Of the streams `unchained` of `kind` (each with its old rows: at or
/// before its tail, one a seq, not chained to it as a whole), those whose
/// old rows the proved rows after them vouch for, with those rows: each run
/// of them that chains is followed, in a file the checkpoint proved, by the
/// proved row that names its last row's hash as its `prev_hash`
/// ([`crate::copies`]: rows a queue delivered again, or a partition
/// compacted again). Those are copies, not reopened. The `prev_hash`es are
/// looked up in those of `files` the checkpoint proved (never the night's
/// new ones, which hold the copies themselves), by key, as the look-up of
/// proved tails reads them (`crate::owing`: each file checked against the
/// checkpoint's notes, so a footer cannot hide the row). Only on a night
/// custody held every gone version's outputs to its stretches
/// ([`Custody::uncounted`]). Account streams are looked up
/// before the proof (reopening one pulls its history's transfers back),
/// transfer streams after the first pass over the new files (their tails
/// are those of the transfers pulled back).
async fn found_again(
    lake: &Lake,
    kind: (Table, Stream),
    prior_files: &std::collections::BTreeMap<String, String>,
    stored: &crate::presence_files::Stored,
    files: &[LakeFileInfo],
    unchained: HashMap<String, crate::copies::OldRows>,
    opts: &Options,
) -> Result<HashMap<String, crate::copies::Found>, Error> {
    if unchained.is_empty() {
        return Ok(HashMap::new());
    }
    let proved: Vec<LakeFileInfo> = files
        .iter()
        .filter(|f| f.proved_in(prior_files))
        .cloned()
        .collect();
    let want: Vec<(StreamId, Tail)> = unchained
        .iter()
        .flat_map(|(key, rows)| {
            rows.successors().map(move |(seq, _)| {
                let id = (kind.0, kind.1, key.clone());
                let at = Tail {
                    last_seq: seq,
                    last_hashes: LastHashes::default(),
                };
                (id, at)
            })
        })
        .collect();
    let noted = Noted::Proved(stored, prior_files);
    let reading = "the proved rows that follow old rows delivered again";
    let starts_max = opts.wanted_starts_max;
    let held = crate::owing::hashes_at(
        lake,
        &proved,
        noted,
        &want,
        starts_max,
        reading,
        "prev_hash",
    )
    .await?;
    let holds = |key: &str, seq: u64, prev: &[u8; 32]| {
        held.get(&(kind.0, kind.1.as_str(), key, seq))
            .is_some_and(|hs| hs.iter().any(|h| unhex(h).as_ref() == Some(prev)))
    };
    Ok(unchained
        .into_iter()
        .filter_map(|(key, rows)| {
            let found = rows.vouched(|seq, prev| holds(&key, seq, prev))?;
            Some((key, found))
        })
        .collect())
}

/// What [`touched`] found.
struct Touched {
    /// Transfers to pull back.
    ids: HashSet<String>,
    /// Account streams to re-prove from their first event (sorted), unless
    /// found again ([`found_again`]).
    reopened: Vec<String>,
    /// Account streams whose old rows chain to their tails.
    cleared: crate::copies::Cleared,
    /// Of `reopened`, those whose old rows may be found again in the proved
    /// files, with each row's seq and hash.
    unchained: HashMap<String, crate::copies::OldRows>,
}

/// Adds the `transfer_id`s of `b`'s rows to `ids`: of every row, or with
/// `keys` only of the rows of those stream keys.
fn add_transfer_ids(
    b: &datafusion::arrow::record_batch::RecordBatch,
    keys: Option<&HashSet<&str>>,
    ids: &mut HashSet<String>,
) {
    let Some(t) = strings(b, "transfer_id") else {
        return;
    };
    let Some(keys) = keys else {
        ids.extend(t.iter().flatten().map(str::to_owned));
        return;
    };
    let Some(k) = strings(b, "stream_key") else {
        return;
    };
    for (k, t) in k.iter().zip(t.iter()) {
        if let (Some(k), Some(t)) = (k, t) {
            if keys.contains(k) {
                ids.insert(t.to_owned());
            }
        }
    }
}

/// Why [`Proof::drop_proved_copies`] keeps a stream's old rows.
enum Kept {
    /// The stream is reopened; `true` if it is an account stream the
    /// pre-proof scan had cleared (a full proof is then needed: see
    /// [`TableRun::copies_failed`]).
    Reopen(bool),
    /// A transfer stream's first rows, old rows that may be copies of rows
    /// the proved files hold, each its seq and hash: looked up there after
    /// the pass ([`found_again`]).
    LookUp(crate::copies::OldRows),
}

/// What [`pull_back`] did.
enum PullBack {
    /// Pulled back what the run needs; the account and transfer tables'
    /// files, the account streams whose old rows chain to their tails or
    /// were found again, and the checkpoint's notes of the proved account
    /// files when the keyed scan read them (the account table's re-proof
    /// checks against them too).
    Pulled(
        Vec<LakeFileInfo>,
        Vec<LakeFileInfo>,
        crate::copies::Cleared,
        Option<Sets>,
    ),
    /// Nothing: most account streams must be re-proved from their first
    /// event, and a full proof reads less than re-proving each of them over
    /// every file (the verdicts are the same either way). The same files.
    FullIsCheaper(Vec<LakeFileInfo>, Vec<LakeFileInfo>),
}

/// What a `--full` run with a checkpoint says of a part of it it cannot
/// read.
const FULL_LEFT_OUT: &str =
    "This full proof judges what the checkpoint proved without that part (report: not_judged), and \
     the new checkpoint it writes replaces it: to judge it once the cause is fixed, restore the \
     checkpoint and its files (FILE.*) from a copy taken before this run";

/// Warnings on stderr, even without progress (they say what a resumed run
/// could not vouch for): manifests this build cannot read, and proved file
/// versions that compaction does not account for (the run then proves the
/// lake from its first event, as `--full` does).
fn warn_custody(custody: &Custody, full: bool) {
    if let Some(first) = custody.unreadable.first() {
        crate::say!(
            "reconcile: warning: {} object(s) under manifests/ are not compaction manifests this build reads, first: {first}\n\
             Help: they are ignored; files only they would account for count as lost",
            custody.unreadable.len()
        );
    }
    if let Some(first) = custody.lost.first() {
        let so = if full {
            "this run proves the lake from its first event (--full) and judges what the checkpoint proved of them"
        } else {
            "a resumed run does not re-read what it proved, so this run proves the lake from its first event"
        };
        crate::say!(
            "reconcile: warning: {} lake file version(s) the checkpoint proved are gone and not accounted for by compaction \
             ({} gone in all), first: {first}; their rows may have gone with them and {so}\n\
             Help: compaction records what it replaces (manifests/, docs/LAKE.md) and keeps every row; a lake file \
             deleted, renamed or rewritten otherwise, or compacted into files without some of its rows, is lost \
             evidence: find out what removed it",
            custody.lost.len(),
            custody.gone
        );
    }
}

/// The lake files of `table`, and the `.parquet` objects beside them that
/// are not lake files and so are not proved ([`Lake::files_and_ignored`]),
/// for the report's `files_ignored`. A warning on stderr names them too:
/// printed even without progress, since it says what the verdict does not
/// cover.
async fn listed_warning_ignored(
    lake: &Lake,
    table: Table,
) -> Result<(Vec<LakeFileInfo>, Vec<String>), Error> {
    let (files, ignored) = lake.files_and_ignored(table).await?;
    if let Some(first) = ignored.first() {
        crate::say!(
            "reconcile: warning: {}: {} object(s) ending in .parquet are not named as lake files \
             (events/TABLE/date=YYYY-MM-DD/{{i,c}}-<32 hex>.parquet, docs/LAKE.md) and are not read, first {first}\n\
             Help: a file of events under another name is not proved; rename it as the writers do or move it out of events/",
            table.as_str(),
            ignored.len()
        );
    }
    Ok((files, ignored))
}

/// The `.parquet` objects under `events/` outside the tables' directories
/// ([`Lake::ignored_outside_tables`]), for the report's `files_ignored`, and
/// a warning on stderr naming them (printed even without progress).
async fn outside_tables_warning(lake: &Lake) -> Result<Vec<String>, Error> {
    let ignored = lake.ignored_outside_tables().await?;
    if let Some(first) = ignored.first() {
        crate::say!(
            "reconcile: warning: {} object(s) ending in .parquet under events/ are outside the tables' \
             directories (events/account/, events/transfer/, events/subscription/) and are not read, first {first}\n\
             Help: a file of events elsewhere is not proved; move it under its table's directory as the writers name it \
             (docs/LAKE.md), or out of events/",
            ignored.len()
        );
    }
    Ok(ignored)
}

/// Pulls back from `prior`'s archive every transfer the lake's new files
/// name, and every transfer the whole history of a reopened account stream
/// names, into its open state; `uncounted` gone versions custody could not
/// hold to their stretches ([`Custody::uncounted`]) keep old rows from being
/// looked up
/// ([`found_again`]).
async fn pull_back(
    lake: &Lake,
    prior: &mut ProofState,
    a: Vec<LakeFileInfo>,
    t: Vec<LakeFileInfo>,
    uncounted: usize,
    opts: &Options,
    started: Instant,
) -> Result<PullBack, Error> {
    let Touched {
        mut ids,
        mut reopened,
        mut cleared,
        unchained,
    } = touched(
        lake,
        &new_files(&a, &prior.files),
        &new_files(&t, &prior.files),
        prior,
    )
    .await?;
    let accounts = prior
        .streams
        .keys()
        .filter(|id| id.0 == Table::Account && id.1 == Stream::Account)
        .count();
    // Not on a night custody could not hold a gone version's outputs to
    // its stretches (`uncounted`): a proved row only that version held may
    // be missing with the rows around it there, which only a re-proof
    // judges. Nor when the streams reopened whatever it finds make a full
    // proof cheaper anyway.
    let again = if uncounted > 0 || (reopened.len() - unchained.len()) * 2 > accounts {
        HashMap::new()
    } else {
        let account = (Table::Account, Stream::Account);
        found_again(
            lake,
            account,
            &prior.files,
            &prior.stored,
            &a,
            unchained,
            opts,
        )
        .await?
    };
    if !again.is_empty() {
        reopened.retain(|k| !again.contains_key(k));
        if opts.progress {
            crate::say!(
                "reconcile: {} account stream(s) have old rows the proved rows after them vouch for (delivered again, or compacted again): not reopened ({:.1} s)",
                again.len(),
                started.elapsed().as_secs_f64()
            );
        }
        cleared.extend(again.into_iter().map(|(k, rows)| (k, Some(rows))));
    }
    if reopened.len() * 2 > accounts {
        if opts.progress {
            crate::say!(
                "reconcile: {} of {accounts} account streams have new rows at or before their checkpoint \
                 (a re-compacted or redelivered day): a full proof is cheaper than re-proving each",
                reopened.len()
            );
        }
        return Ok(PullBack::FullIsCheaper(a, t));
    }
    let mut noted = None;
    if !reopened.is_empty() {
        // Their legs are withdrawn and re-proved from seq 1: the transfers
        // those legs name must be open. The files the checkpoint proved are
        // read by key (row groups of other streams skipped by their
        // statistics), and each must show every stretch of these streams
        // the checkpoint noted in it (`crate::keyed`): a hidden row would
        // leave its transfer in the archive while its leg is proved again.
        // The night's new files are read whole.
        let tail = |key: &str| {
            let id = (Table::Account, Stream::Account, key.to_owned());
            prior.streams.get(&id).map_or(0, |s| s.tail.last_seq)
        };
        // A stretch of a stream in a proved file starts at or before the
        // last seq the checkpoint proved of it.
        let streams = reopened
            .iter()
            .map(|k| (Stream::Account, k.as_str(), tail(k)));
        let reading = "the transfers of the account streams it reopens";
        // The notes are read only for a check that uses them.
        let keyed = match Wanted::capped(opts.wanted_starts_max, streams) {
            None => Keyed::whole(&reopened, reading),
            Some(wanted) => {
                let sets = crate::keyed::proved_sets(&prior.stored, &prior.files, &a)?;
                let sets = noted.insert(sets);
                let files: Vec<&str> = a.iter().map(|f| f.key.as_str()).collect();
                Keyed::checked(
                    &reopened,
                    reading,
                    wanted,
                    &files,
                    &sets.presence,
                    &sets.plain,
                )
            }
        };
        let wanted: HashSet<&str> = reopened.iter().map(String::as_str).collect();
        let columns = ["stream_key", "transfer_id"];
        lake.scan_keyed(&a, &columns, &keyed, |b| {
            add_transfer_ids(b, Some(&wanted), &mut ids)
        })
        .await?;
    }
    let mut ids: Vec<String> = ids.into_iter().filter(|id| !prior.is_open(id)).collect();
    ids.sort_unstable();
    let pulled = prior
        .archive
        .pull(ids.iter().map(String::as_str))
        .map_err(crate::checkpoint::archive_unreadable)?;
    if opts.progress {
        crate::say!(
            "reconcile: {} transfers pulled back from the checkpoint's archive ({} account streams reopened; {:.1} s)",
            pulled.len(),
            reopened.len(),
            started.elapsed().as_secs_f64()
        );
    }
    for (id, st, legs) in pulled {
        prior.transfers.put(&id, st);
        *prior.legs.entry(&id) = legs;
    }
    prior.transfers.end_pass();
    Ok(PullBack::Pulled(a, t, cleared, noted))
}

/// Scans `files` in stream order (only the streams of `keys` when given),
/// hands each whole stream to `take`, and returns the scan's statistics,
/// the streams it read in each file (`crate::presence`) and the rows it read
/// of each file.
async fn scan_streams(
    lake: &Lake,
    files: &[LakeFileInfo],
    select: Select<'_>,
    cancel: &crate::threads::Cancel,
    mut stop: impl FnMut(&Row<'_>) -> bool,
    mut take: impl FnMut(StreamRows),
) -> Result<(ScanStats, Presence, Vec<u64>), Error> {
    let mut g = Grouper::default();
    let mut noter = Noter::new(files.iter().map(|f| f.key.as_str()));
    let mut take = |s: StreamRows| {
        noter.note(s.stream, s.key(), s.file_runs());
        take(s);
    };
    let file_rows = lake
        .scan_sorted_where(files, select, |row| {
            // One load of a line no core writes until a failure: nothing to
            // measure beside a row's proof.
            cancel.check()?;
            if stop(&row) {
                return Ok(ControlFlow::Break(()));
            }
            if let Some(s) = g.push(row) {
                take(s);
            }
            Ok(ControlFlow::Continue(()))
        })
        .await?;
    if let Some(s) = g.finish() {
        take(s);
    }
    Ok((g.stats, noter.finish(), file_rows))
}

/// Runs `fut` to completion on a runtime of its own (on the calling thread).
fn block_on<T>(fut: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Scan(format!("cannot start a runtime: {e}")))?
        .block_on(fut)
}

/// A run that resumes from `resume` (a loaded checkpoint) when given, and
/// returns the report and the state to checkpoint.
///
/// The account and transfer tables are independent until the cross-stream
/// checks, so they are proved on two threads (each its own merge and fold);
/// their states are joined before the facts are checked.
pub async fn reconcile_from(
    lake: &Lake,
    opts: &Options,
    resume: Option<ProofState>,
) -> Result<(Report, ProofState), Error> {
    start(lake, opts, resume, None).await
}

/// A proof from the first event, as [`reconcile`] (`--full` with a
/// checkpoint), that also judges whether the lake still holds every tail
/// `prior` (the checkpoint's proof) proved and every tail it owed
/// ([`crate::retained`]): re-proving the lake does not forget what it held.
pub async fn reconcile_full_owing(
    lake: &Lake,
    opts: &Options,
    prior: ProofState,
) -> Result<(Report, ProofState), Error> {
    start(lake, opts, None, Some(prior)).await
}

/// [`reconcile_from`], with the proof `set_aside` (its tails owed) when it
/// is [`reconcile_full_owing`]. An error naming a lake file is judged again
/// by the store's word on the file ([`Lake::second_look`]): one a
/// compaction deleted while the run read it is no damaged file.
async fn start(
    lake: &Lake,
    opts: &Options,
    resume: Option<ProofState>,
    set_aside: Option<ProofState>,
) -> Result<(Report, ProofState), Error> {
    match prove(lake, opts, resume, set_aside).await {
        Err(e) => Err(lake.second_look(e).await),
        done => done,
    }
}

async fn prove(
    lake: &Lake,
    opts: &Options,
    resume: Option<ProofState>,
    mut set_aside: Option<ProofState>,
) -> Result<(Report, ProofState), Error> {
    let started = Instant::now();
    let resumed = resume.is_some();
    let full = set_aside.is_some();
    let mut prior = resume.unwrap_or_default();
    let mut reproved_in_full = false;
    // What earlier runs proved that the lake must still hold
    // ([`crate::retained`]): the tails found not held before, and every
    // tail of a proof set aside (a run with a checkpoint that proves the lake
    // from its first event: `crate::owing` lists when).
    let owed = std::mem::take(&mut set_aside.as_mut().unwrap_or(&mut prior).owed);
    // Which hashes its damaged rows record it proved (`crate::unproved`).
    let marks = crate::unproved::Marks::of(&set_aside.as_ref().unwrap_or(&prior).findings);
    // The `.parquet` objects under `events/` outside the tables'
    // directories, and those a resumed run's listing below finds not named
    // as lake files (a full run's tables are listed by their proofs, which
    // report their own).
    let mut ignored = outside_tables_warning(lake).await?;
    // A resumed run lists the lake first and accounts for every version it
    // proved that is gone (`custody`): one that compaction did not replace
    // may have taken rows with it, which only a proof of the lake as it is
    // judges.
    // So does `--full` with a checkpoint, against the files that proof
    // read: a row of a lost file in the middle of a stream is decided on
    // that night too (`owing::lost_starts`; rev-s57-lost 5).
    let (listed, custody) = if resumed || full {
        let (a, a_ignored) = listed_warning_ignored(lake, Table::Account).await?;
        let (t, t_ignored) = listed_warning_ignored(lake, Table::Transfer).await?;
        let (s, s_ignored) = listed_warning_ignored(lake, Table::Subscription).await?;
        ignored.extend([a_ignored, t_ignored, s_ignored].concat());
        let listed = [a, t, s];
        // `--full` is the remedy for a damaged checkpoint: notes of it that
        // cannot be read are left unjudged, said, not an error (the lake's
        // own errors still are: a lost file must not pass for unjudged).
        let checked = set_aside.as_ref().unwrap_or(&prior);
        let custody = crate::custody::check(
            lake,
            &checked.files,
            &checked.stored,
            &[&listed[0], &listed[1], &listed[2]],
            full,
        )
        .await?;
        if let (Some(e), Some(p)) = (&custody.notes_unread, set_aside.as_mut()) {
            let why = format!(
                "the checkpoint's notes of the {} file version(s) compaction replaced: {e}; whether the \
                 files that replaced them hold every row they held is not judged",
                custody.uncounted
            );
            crate::say!("reconcile: warning: {why}\n{FULL_LEFT_OUT}");
            p.left_out.push(why);
        }
        warn_custody(&custody, full);
        // (`--full` proves from the first event whatever custody found.)
        if !full && custody.lost.is_empty() && prior.older_rules {
            crate::say!(
                "reconcile: the checkpoint was written before version 21, by older rules (holds, deadlines, entry ids, \
                 protocol values, failed transfers' holds and releases, rows after a hold's end, rows per stretch of each file, \
                 open transfers' latest dates, accounts' opened limits, copies with one hash, misfiled streams' gaps, \
                 holds known again after a gap, stretches from seq 0): \
                 proving the lake from its first event once (the checkpoint's tails still judged)"
            );
        }
        if !full && (!custody.lost.is_empty() || prior.older_rules) {
            set_aside = Some(std::mem::take(&mut prior));
            reproved_in_full = true;
        }
        (Some(listed), custody)
    } else {
        (None, Custody::default())
    };
    let [mut account_files, mut transfer_files, subscription_files] =
        listed.map_or([None, None, None], |l| l.map(Some));
    // Transfers the new files name come back from the archive first, so the
    // proof below sees every transfer it touches (see `archive`).
    let (mut cleared, mut account_noted) = (None, None);
    // (The files are taken only then: a table's files dropped here would
    // be listed again by its proof, and what it ignores named twice. Both
    // tables were listed, or neither.)
    let taken = match prior.archive.is_empty() {
        true => None,
        false => account_files.take().zip(transfer_files.take()),
    };
    if let Some((a, t)) = taken {
        let (a, t) =
            match pull_back(lake, &mut prior, a, t, custody.uncounted, opts, started).await? {
                PullBack::Pulled(a, t, c, n) => {
                    cleared = Some(c);
                    account_noted = n;
                    (a, t)
                }
                PullBack::FullIsCheaper(a, t) => {
                    // Set aside, not dropped: every tail it proved is judged,
                    // as when files were lost (a night that re-proves the most
                    // must not report less of what left the lake).
                    set_aside = Some(std::mem::take(&mut prior));
                    reproved_in_full = true;
                    (a, t)
                }
            };
        (account_files, transfer_files) = (Some(a), Some(t));
    }
    let listed = (
        account_files.clone(),
        transfer_files.clone(),
        subscription_files.clone(),
    );
    let owing = Owing {
        owed: &owed,
        set_aside: set_aside.as_ref(),
        marks: &marks,
        full,
    };
    let resume = Resume {
        resumed,
        reproved_in_full,
        account_files,
        transfer_files,
        subscription_files,
        custody: &custody,
        ignored: &ignored,
        cleared: cleared.as_ref(),
        account_noted,
        owing,
    };
    let source = std::mem::take(&mut prior.source);
    if let Some(done) = prove_resumed(lake, opts, started, prior, resume).await? {
        return Ok(done);
    }
    // Rows the pre-proof scan took for copies of proved rows are not: the
    // transfers of those streams' histories were not pulled back.
    if opts.progress {
        crate::say!(
            "reconcile: account rows at or before their checkpoint chain to it but do not hash to their recorded hashes: \
             proving the lake from its first event"
        );
    }
    // The checkpoint's proof, as on disk, set aside as for lost files: the
    // proof from the first event sees a stream cut short by the same
    // compaction as a shorter, whole one, so every tail it proved is judged.
    let reloaded = match (&set_aside, source) {
        (None, Some((path, lake))) => {
            Some(ProofState::load(&path, &lake).map_err(|e| Error::Lake(e.to_string()))?)
        }
        _ => None,
    };
    let owing = Owing {
        set_aside: owing.set_aside.or(reloaded.as_ref()),
        ..owing
    };
    let full = Resume {
        resumed,
        reproved_in_full: true,
        account_files: listed.0,
        transfer_files: listed.1,
        subscription_files: listed.2,
        custody: &custody,
        ignored: &ignored,
        cleared: None,
        account_noted: None,
        owing,
    };
    prove_resumed(lake, opts, started, ProofState::default(), full)
        .await?
        .ok_or_else(|| Error::Scan("a full proof found copies to check".into()))
}

/// How [`prove_resumed`] starts.
struct Resume<'a> {
    /// The run resumed from a checkpoint (its report says what it read).
    resumed: bool,
    /// It proves the lake from its first event instead.
    reproved_in_full: bool,
    /// The tables' files, when already listed.
    account_files: Option<Vec<LakeFileInfo>>,
    transfer_files: Option<Vec<LakeFileInfo>>,
    subscription_files: Option<Vec<LakeFileInfo>>,
    /// What became of the files the checkpoint proved.
    custody: &'a Custody,
    /// The `.parquet` objects not named as lake files, found when the
    /// tables were listed before the proofs (a table listed by its own
    /// proof reports them in [`TableRun::ignored`]).
    ignored: &'a [String],
    /// See [`RunCtx::cleared`].
    cleared: Option<&'a crate::copies::Cleared>,
    /// The checkpoint's notes of the proved account files, when the
    /// pull-back read them ([`PullBack::Pulled`]).
    account_noted: Option<Sets>,
    /// The proved tails the lake must still hold.
    owing: Owing<'a>,
}

/// The proof from `prior` (the checkpoint's state, its transfers pulled
/// back): `None` when the account table's proof found that rows cleared as
/// copies are not ([`TableRun::copies_failed`]).
async fn prove_resumed(
    lake: &Lake,
    opts: &Options,
    started: Instant,
    mut prior: ProofState,
    resume: Resume<'_>,
) -> Result<Option<(Report, ProofState)>, Error> {
    let Resume {
        resumed,
        reproved_in_full,
        account_files,
        transfer_files,
        subscription_files,
        custody,
        ignored,
        cleared,
        account_noted,
        owing,
    } = resume;
    let archive = std::mem::take(&mut prior.archive);
    let stored = std::mem::take(&mut prior.stored);
    let prior_files = prior.files;
    // Split the prior state by table: legs come from account streams,
    // transfer facts from transfer streams.
    let (mut acct, mut xfer) = (Proof::empty(), Proof::empty());
    // Nearly all are the account table's (transfer streams are kept apart,
    // in `prior.transfers`): its map is moved whole, not built again.
    acct.streams = prior.streams;
    let elsewhere: Vec<StreamId> = acct
        .streams
        .keys()
        .filter(|id| id.0 != Table::Account)
        .cloned()
        .collect();
    for id in elsewhere {
        let st = acct.streams.remove(&id).expect("listed from the map");
        xfer.streams.insert(id, st);
    }
    for f in prior.findings {
        let p = if f.stream.0 == Table::Account {
            &mut acct
        } else {
            &mut xfer
        };
        p.findings.push(f);
    }
    acct.facts.legs = prior.legs;
    acct.facts.entry_key = prior.entry_key;
    acct.facts.entry_store = std::mem::take(&mut prior.entry_store);
    acct.facts.names = prior.names.fork();
    xfer.facts.transfers = prior.transfers;
    xfer.facts.names = prior.names;
    let cancel = crate::threads::Cancel::default();
    let ctx = &RunCtx {
        lake,
        prior_files: &prior_files,
        stored: &stored,
        cleared,
        // A full proof has no tails to look up from.
        find_again: custody.uncounted == 0 && !reproved_in_full,
        opts,
        started,
        cancel: &cancel,
    };
    let (tx, chunks) = std::sync::mpsc::sync_channel(HANDOFF_QUEUE);
    let handoff = Handoff {
        free: AtomicBool::new(false),
        tx,
    };
    let split = Split::new();
    // Each thread started with `spawn_scoped`: a thread the OS refuses is
    // the run's error (exit 2, its Help), and the other thread is not left
    // waiting on it (rev-s53-diff M1). A thread that fails (or panics)
    // stops the other ([`crate::threads::Cancel`]): the run's error is its.
    let (ra, rx) = std::thread::scope(|scope| {
        let (h, sp) = (&handoff, &split);
        let spawn = std::thread::Builder::new;
        let a = spawn().spawn_scoped(scope, move || {
            let failing = ctx.cancel.on_failure();
            failing.done((|| {
            let mut helped = Proof::empty();
            let mut upper = ScanStats::default();
            let mut take_upper = |helped: &mut Proof| -> Result<(), Error> {
                if let Some((key, files)) = sp.ask() {
                    // Room for the part's streams up front (address space:
                    // see `Proof::reserve`): at most a stream a row of the
                    // row groups that reach past the key.
                    let rows: i64 = files
                        .iter()
                        .flat_map(|f| &f.key_groups)
                        .filter(|g| g.max >= key)
                        .map(|g| g.rows)
                        .sum();
                    helped.reserve(Table::Transfer, rows.max(0) as usize);
                    let file_rows;
                    (upper, file_rows) = block_on(prove_upper(ctx, &key, &files, helped))?;
                    trace(started, format_args!("account thread: the split's upper part proved"));
                    if opts.progress {
                        crate::say!(
                            "reconcile: transfer: {} rows read from key {key:?} on ({} files), {} streams, on the account table's thread ({:.1} s)",
                            upper.rows_read,
                            files.len(),
                            upper.streams,
                            started.elapsed().as_secs_f64()
                        );
                    }
                    sp.note_upper(files, file_rows);
                }
                Ok(())
            };
            if opts.handoff && opts.split_first {
                take_upper(&mut helped)?;
            }
            let run = block_on(prove_table(
                ctx,
                Table::Account,
                account_files,
                acct,
                None,
                None,
                account_noted,
            ))?;
            if opts.handoff && !opts.split_first {
                take_upper(&mut helped)?;
            }
            // The account table is proved: help with the transfer streams
            // until the other thread closes the hand-off.
            trace(started, format_args!("account thread: free to take transfer streams"));
            h.free.store(true, AtomicOrdering::Relaxed);
            while let Ok(chunk) = chunks.recv() {
                if chunk.is_empty() {
                    break; // closed
                }
                helped.visit_chunk(Table::Transfer, chunk);
            }
            helped.end_pass();
            trace(started, format_args!("account thread: done"));
            Ok((run, helped, upper))
            })())
        });
        let a = a.map_err(|e| crate::threads::refused("the account table's thread", &e))?;
        // Closed however the transfer table's thread ends (error or panic
        // included) or if it never starts (dropped with its closure), so
        // the other one never waits for chunks that will not come.
        let closing = Closing(h, sp);
        let x = spawn().spawn_scoped(scope, move || {
            let closing = closing;
            let failing = ctx.cancel.on_failure();
            failing.done(block_on(async {
                let offer = opts.handoff.then_some(h);
                let t = prove_table(
                    ctx,
                    Table::Transfer,
                    transfer_files,
                    xfer,
                    offer,
                    Some(sp),
                    None,
                )
                .await?;
                drop(closing);
                let s = prove_table(
                    ctx,
                    Table::Subscription,
                    subscription_files,
                    t.proof,
                    None,
                    None,
                    None,
                )
                .await?;
                Ok((t.stats, t.inc, t.files, t.ignored, t.reopened, s))
            }))
        });
        match x {
            Ok(x) => Ok((a.join(), x.join())),
            Err(e) => {
                // Its table will not be proved: the other stops too.
                ctx.cancel.stop();
                let _ = a.join();
                Err(crate::threads::refused("the transfer table's thread", &e))
            }
        }
    })?;
    let panicked = crate::threads::table_panicked;
    let ((ra, helped, upper), (xstats, xinc, xfiles, xignored, xreopened, mut rs)) =
        crate::threads::first_failure(
            ra.map_err(panicked).and_then(|r| r),
            rx.map_err(panicked).and_then(|r| r),
        )?;
    split.check_rows()?;
    if let Some(e) = ra.proof.facts.entry_store_error.clone() {
        return Err(crate::checkpoint::entries_unreadable(e));
    }
    if ra.copies_failed {
        return Ok(None);
    }
    if opts.progress && !helped.facts.transfers.is_empty() {
        crate::say!(
            "reconcile: transfer: {} streams proved on the account table's thread once it was done",
            helped.facts.transfers.len()
        );
    }
    trace(started, format_args!("both threads done"));
    rs.proof.absorb(helped);
    let mut stats = ScanStats::default();
    let mut inc = Incremental::default();
    add_stats(&mut stats, &upper);
    for (s, i) in [(&ra.stats, &ra.inc), (&xstats, &xinc), (&rs.stats, &rs.inc)] {
        add_stats(&mut stats, s);
        inc.files_read += i.files_read;
        inc.files_skipped += i.files_skipped;
        inc.streams_reopened += i.streams_reopened;
        inc.rows_already_proved += i.rows_already_proved;
    }
    let listed: Vec<LakeFileInfo> = ra.files.into_iter().chain(xfiles).chain(rs.files).collect();
    // Each table was listed once, by its proof or before the proofs
    // (resumed), so no object is named twice.
    let mut files_ignored: Vec<String> = ignored
        .iter()
        .cloned()
        .chain(ra.ignored)
        .chain(xignored)
        .chain(rs.ignored)
        .collect();
    files_ignored.sort();
    let all_files: std::collections::BTreeMap<String, String> =
        listed.iter().map(|f| (f.key.clone(), f.stamp())).collect();
    if all_files.is_empty() {
        return Err(Error::Lake(format!(
            "{} holds no lake files under events/\nHelp: check the path (the lake root, not events/); \
             an empty lake proves nothing, so it is an error",
            lake.name
        )));
    }
    // One of the two money tables without a file while the other has some:
    // a partial copy, or a prefix or a permission that hides it. Every
    // finding naming the other table's rows may be that; said first.
    let in_table = |t: Table| listed.iter().filter(|f| f.table == t).count();
    let (accounts, transfers) = (in_table(Table::Account), in_table(Table::Transfer));
    // Printed even without progress, as the other warnings on what the
    // verdict covers.
    if (accounts == 0) != (transfers == 0) {
        let (empty, other, n) = if accounts == 0 {
            ("account", "transfer", transfers)
        } else {
            ("transfer", "account", accounts)
        };
        crate::say!(
            "reconcile: warning: the {empty} table (events/{empty}/) holds no lake file while the {other} \
             table holds {n}: if the lake should have {empty} rows (a partial copy; a prefix or a \
             permission that hides events/{empty}/), every finding on the {other} table's rows that \
             names them may be that"
        );
    }
    // The account table's proof is the base; the transfer facts join it
    // (re-keyed to its names).
    let mut proof = ra.proof;
    proof.streams.extend(rs.proof.streams);
    proof.findings.extend(rs.proof.findings);
    proof.facts.absorb_transfers(rs.proof.facts);
    proof.presence.absorb(rs.proof.presence);
    let Proof {
        streams,
        mut findings,
        mut facts,
        presence,
        ..
    } = proof;
    trace(started, format_args!("proofs joined"));
    // The facts' addresses first (one walk over the map's memory), so
    // that the walk of the facts themselves can hint those ahead of it.
    let accounts: Vec<&AccountFacts> = streams
        .values()
        .filter_map(|st| st.account.as_deref())
        .collect();
    facts.finish_accounts(&accounts);
    drop(accounts);
    facts.finish_transfers();
    trace(started, format_args!("transfers joined to their legs"));
    if opts.progress {
        if let Some(p) = owing.set_aside {
            crate::say!(
                "reconcile: judging the tails of {} streams the set-aside checkpoint proved ({:.1} s)",
                p.streams.len() as u64 + p.transfers.len() as u64 + p.archive.live,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let proved = Proved {
        streams: &streams,
        transfers: &facts.transfers,
    };
    let reopened: Vec<_> = [ra.reopened, xreopened, rs.reopened].concat();
    // Each `hash_mismatch` this proof made says whether the hash its row
    // records is owed (`crate::unproved`): as the checkpoint's finding of
    // the row said, else by what the checkpoint proved of the stream.
    let proved_there = {
        let at = crate::unproved::unmarked_at(&findings);
        crate::owing::proved_at(&owing, &reopened, &at)?
    };
    crate::unproved::mark(&mut findings, owing.marks, &proved_there);
    // A resumed night read only its new files; a run that proved the lake
    // from its first event read every file whole, and noted their streams.
    let noted = if resumed && !reproved_in_full {
        Noted::Proved(&stored, &prior_files)
    } else {
        Noted::Run(&presence)
    };
    let mut left_out = Vec::new();
    let lost_starts = match crate::owing::lost_starts(&findings, &custody.lost, owing.set_aside) {
        Ok(starts) => starts,
        // As a damaged part of the checkpoint is for `--full` (above).
        Err(e) if owing.full => {
            let why = format!(
                "the rows of the lost files the checkpoint noted: {}",
                crate::lake::without_help(&e.to_string())
            );
            crate::say!("reconcile: warning: {why}\n{FULL_LEFT_OUT}");
            left_out.push(why);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let this_run = crate::owing::ThisRun {
        reopened,
        lost_starts,
        damaged: crate::unproved::Marks::of(&findings),
        evidence: findings
            .iter()
            .filter_map(crate::retained::evidence)
            .collect(),
    };
    let (owed_findings, owed, blocks_left_out) =
        crate::owing::judge(lake, &listed, noted, &owing, this_run, &proved, opts).await?;
    trace(started, format_args!("proved tails judged"));
    if opts.progress && !owed.is_empty() {
        crate::say!(
            "reconcile: {} stream tail(s) an earlier run proved are not in the lake as proved ({:.1} s)",
            owed.len(),
            started.elapsed().as_secs_f64()
        );
    }
    if opts.progress {
        crate::say!(
            "reconcile: cross-stream checks on {} transfers ({:.1} s)",
            facts.transfers.len(),
            started.elapsed().as_secs_f64()
        );
    }
    // Findings in stream order, then seq (stable: one row's findings keep
    // the order its checks found them in). Each chunk of a stream's rows
    // (a batch, a date, a night) gives its rows' findings, then what the
    // chunk's walk of the stream's life found, so the order in which they
    // were found depends on how the rows were chunked, and a full run's and a
    // resumed run's must not differ.
    findings.sort_by(|a, b| (&a.stream, a.finding.seq).cmp(&(&b.stream, b.finding.seq)));
    let per_check = |name: &str| -> Vec<Finding> {
        findings
            .iter()
            .filter(|f| f.check == name)
            .map(|f| f.finding.clone())
            .collect()
    };
    let f = &facts;
    let [conserved, consistent] = per_transfer(
        f,
        [
            transfer_conservation::check_transfer,
            consistency::check_transfer,
        ],
    );
    trace(started, format_args!("per-transfer checks done"));
    let dangling = convergence::dangling(f, opts.now_ms);
    let converged = convergence::check_with(f, opts.now_ms, opts.settle_ms, &dangling);
    trace(started, format_args!("convergence checked"));
    let window = Settle {
        now_ms: opts.now_ms,
        settle_ms: opts.settle_ms,
    };
    let young = (opts.settle_ms > 0).then(|| {
        let per_transfer = [&conserved[..], &consistent[..], &converged[..]];
        crate::settle::young(&findings, &streams, &per_transfer, window)
    });
    let mut checks = vec![
        CheckResult::new(
            completeness::NAME,
            completeness::INVARIANT,
            completeness::PROVES,
            // With the proved tails the lake no longer holds, in order.
            {
                let mut all: Vec<&StreamFinding> = findings
                    .iter()
                    .filter(|f| f.check == completeness::NAME)
                    .chain(&owed_findings)
                    .collect();
                all.sort_by(|a, b| (&a.stream, a.finding.seq).cmp(&(&b.stream, b.finding.seq)));
                all.into_iter().map(|f| f.finding.clone()).collect()
            },
        ),
        CheckResult::new(
            duplicates::NAME,
            duplicates::INVARIANT,
            duplicates::PROVES,
            per_check(duplicates::NAME),
        ),
        CheckResult::new(
            balance::NAME,
            balance::INVARIANT,
            balance::PROVES,
            per_check(balance::NAME),
        ),
        CheckResult::new(
            overdraft::NAME,
            overdraft::INVARIANT,
            overdraft::PROVES,
            per_check(overdraft::NAME),
        ),
        CheckResult::new(
            transfer_conservation::NAME,
            transfer_conservation::INVARIANT,
            transfer_conservation::PROVES,
            // Per transfer, then the rows that changed a transfer's terms.
            conserved
                .into_iter()
                .chain(per_check(transfer_conservation::NAME))
                .collect(),
        ),
        CheckResult::new(
            global_conservation::NAME,
            global_conservation::INVARIANT,
            global_conservation::PROVES,
            global_conservation::check(f, young.as_ref()),
        ),
        CheckResult::new(
            consistency::NAME,
            consistency::INVARIANT,
            consistency::PROVES,
            consistent,
        ),
        CheckResult::new(
            convergence::NAME,
            convergence::INVARIANT,
            convergence::PROVES,
            converged,
        ),
        CheckResult::new(
            protocol::NAME,
            protocol::INVARIANT,
            protocol::PROVES,
            per_check(protocol::NAME),
        ),
    ];
    trace(started, format_args!("global conservation checked"));
    if opts.settle_ms > 0 {
        for c in &mut checks {
            c.settle(window);
        }
    }
    if opts.progress {
        crate::say!(
            "reconcile: checks done ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }
    let report = Report {
        version: REPORT_VERSION,
        lake: lake.name.clone(),
        lake_identity: crate::store::Location::identity(&lake.name),
        now_ms: opts.now_ms,
        settle_ms: opts.settle_ms,
        holds: checks.iter().all(|c| c.holds),
        pending: checks.iter().map(|c| c.pending.len()).sum(),
        decided_by_ms: checks
            .iter()
            .flat_map(|c| &c.pending)
            .filter_map(|f| f.youngest_ms)
            .max()
            .map(|t| t.saturating_add(opts.settle_ms)),
        files: all_files.len(),
        files_ignored,
        stats,
        accounts: f.currencies.values().map(|c| c.accounts).sum(),
        transfers: f.transfers.len() as u64 + archive.live,
        elapsed_ms: started.elapsed().as_millis() as u64,
        dangling,
        // A run that read a checkpoint: resumed, or `--full` judging it.
        incremental: (resumed || owing.full).then_some(Incremental {
            transfers_pulled: archive.pulled,
            entry_blocks_read: facts.entry_store.blocks_read,
            reproved_in_full,
            full: owing.full,
            files_gone: custody.gone,
            files_lost: custody.lost.len(),
            ..inc
        }),
        checks,
        not_judged: owing
            .set_aside
            .iter()
            .flat_map(|p| p.left_out.iter().cloned())
            .chain(blocks_left_out)
            .chain(left_out)
            .collect(),
    };
    // A transfer with a cross-stream finding, pending or not, stays open
    // (is not archived): the next run judges it again; so does one whose
    // proved tail is owed (its tail is looked up among the open ones).
    let flagged = report
        .checks
        .iter()
        .filter(|c| CROSS_STREAM_CHECKS.contains(&c.name))
        .flat_map(|c| c.findings.iter().chain(&c.pending).map(|f| f.key.clone()))
        .chain(
            owed.iter()
                .filter(|(id, _)| is_transfer(id.0, id.1))
                .map(|(id, _)| id.2.clone()),
        )
        .collect();
    let state = ProofState {
        streams,
        names: facts.names,
        transfers: facts.transfers,
        legs: facts.legs,
        findings,
        files: all_files,
        archive,
        flagged,
        owed,
        presence,
        stored,
        left_out: Vec::new(),
        older_rules: false,
        entry_key: facts.entry_key,
        entry_store: facts.entry_store,
        source: None,
    };
    Ok(Some((report, state)))
}

fn add_stats(total: &mut ScanStats, s: &ScanStats) {
    total.rows_read += s.rows_read;
    total.plain_duplicates += s.plain_duplicates;
    total.distinct_rows += s.distinct_rows;
    total.streams += s.streams;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan of a run whose other table thread failed stops at its next
    /// row with `Error::Cancelled`, proving nothing more; one not cancelled
    /// reads every stream.
    #[test]
    fn a_scan_stops_at_its_next_row_once_the_run_is_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::gen::GenConfig {
            seed: 7,
            accounts: 12,
            operations: 300,
            batches: 3,
            duplicates: 0,
            step_ms: crate::gen::GEN_STEP_MS,
            in_flight: 0,
        };
        crate::gen::generate_lake(&cfg, dir.path()).unwrap();
        block_on(async {
            let lake = Lake::open(dir.path().to_str().unwrap())?;
            let files = lake.files(Table::Transfer).await?;
            let scan = |cancel: crate::threads::Cancel| {
                let files = &files;
                let lake = &lake;
                async move {
                    let mut streams = 0;
                    let r = scan_streams(
                        lake,
                        files,
                        Select::default(),
                        &cancel,
                        |_| false,
                        |_| streams += 1,
                    )
                    .await;
                    (r.map(|(stats, _, _)| stats.rows_read), streams)
                }
            };
            let (read, streams) = scan(crate::threads::Cancel::default()).await;
            assert!(read.unwrap() > 300 && streams > 100, "{streams} streams");
            let cancelled = crate::threads::Cancel::default();
            cancelled.stop();
            let (read, streams) = scan(cancelled).await;
            assert!(
                matches!(read, Err(Error::Cancelled)),
                "{:?}",
                read.map(|_| ())
            );
            assert_eq!(streams, 0);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn the_split_key_halves_the_rows_ahead() {
        // Ten row groups of 100 rows over disjoint key ranges k00..k09, …, k90..k99.
        let groups: Vec<KeyGroup> = (0..10)
            .map(|i| KeyGroup {
                min: format!("k{i}0"),
                max: format!("k{i}9"),
                rows: 100,
            })
            .collect();
        assert_eq!(split_key(groups.iter(), "k00", 0).as_deref(), Some("k50"));
        // From k50, 500 rows ahead: half of group 7 and groups 8 and 9.
        assert_eq!(split_key(groups.iter(), "k50", 0).as_deref(), Some("k79"));
        // Too few rows ahead, or nothing after `at`: no split.
        assert_eq!(split_key(groups.iter(), "k00", 1001), None);
        assert_eq!(split_key(groups.iter(), "k99", 0), None);
        assert_eq!(split_key([].iter(), "k00", 0), None);
    }

    /// Whole dates, in order, together while a group is under
    /// DATE_GROUP_ROWS rows and would stay within DATE_GROUP_FILES files.
    #[test]
    fn date_groups_keep_dates_whole_and_small_dates_together() {
        let file = |date: &str, n: usize, rows: i64| LakeFileInfo {
            key: format!("events/account/date={date}/i-{n:032x}.parquet"),
            table: Table::Account,
            bytes: 0,
            rows,
            e_tag: None,
            columns: String::new(),
            key_groups: Vec::new(),
        };
        let keys = |groups: Vec<&[LakeFileInfo]>| -> Vec<Vec<String>> {
            groups
                .iter()
                .map(|g| g.iter().map(|f| f.key[20..30].to_owned()).collect())
                .collect()
        };
        assert!(date_groups(&[]).is_empty());
        // Large dates: one group each, however few files.
        let big: Vec<LakeFileInfo> = (1..=3)
            .map(|d| file(&format!("2026-01-0{d}"), d, DATE_GROUP_ROWS))
            .collect();
        assert_eq!(
            keys(date_groups(&big)),
            [["2026-01-01"], ["2026-01-02"], ["2026-01-03"]]
        );
        // Small dates of 3 files each: two dates (6 files) a group, since a
        // third would make 9; the last date alone.
        let mut small = Vec::new();
        for d in 1..=5 {
            for n in 0..3 {
                small.push(file(&format!("2026-02-0{d}"), n, 10));
            }
        }
        let groups = date_groups(&small);
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [6, 6, 3]
        );
        assert_eq!(keys(groups)[1][0], "2026-02-03");
        // A date of more files than a group holds is still one group.
        let wide: Vec<LakeFileInfo> = (0..12).map(|n| file("2026-03-01", n, 1)).collect();
        assert_eq!(date_groups(&wide).len(), 1);
        // A small date followed by one that would overflow the files: apart.
        let mixed: Vec<LakeFileInfo> = [file("2026-04-01", 0, 5)]
            .into_iter()
            .chain((0..8).map(|n| file("2026-04-02", n, 5)))
            .collect();
        assert_eq!(
            date_groups(&mixed)
                .iter()
                .map(|g| g.len())
                .collect::<Vec<_>>(),
            [1, 8]
        );
    }
}
