//! Checkpoints: where a run's proof stopped, so the next run reads only the
//! lake files it has not proved yet and reaches the same verdicts as a full
//! re-proof from the first event.
//!
//! A checkpoint holds, per stream, its [`Tail`] (last seq, the hashes at it,
//! the balance refold's last row) and, per account, its [`AccountFacts`]
//! (the refold's last row, the last row's currency and limit, the limit the
//! account was opened with, where its life stands, currency, last balance,
//! deposits, withdrawals, live holds and whether they may be incomplete,
//! the entry store's generation its entry ids count from); per open
//! transfer its [`TransferFacts`] and [`Legs`] (settled transfers are in the
//! archive's segments beside the file, see `archive`); every per-stream
//! finding so far; the tails (and conflicts' versions) earlier runs proved
//! that the lake no longer holds (`owed`, see [`crate::retained`]: a
//! conflict's versions are kept as a tail at its seq, so the format is the
//! same); and the lake files already read
//! (key → size and the store's version tag: keys are content-derived, and a
//! file rewritten in place gets a new tag, so it is read again).
//!
//! How a run resumes (see `run`): the transfers the new files name are pulled
//! back from the archive; files not in the checkpoint are merged in stream
//! order; a stream whose new rows start after its tail continues from the
//! tail; a stream with a new row at or before its tail (a late redelivery, a
//! conflicting version, a compacted file holding old rows) is *reopened*:
//! everything it contributed is withdrawn and it is re-proved from its first
//! event over every file. Cross-stream checks run on the open transfers
//! (a settled one cannot change its verdict until a new event names it). So
//! the verdicts are those of a full run, and the cost is the new rows, the
//! reopened streams and the open transfers.
//!
//! The file: `LDGRCKPT`, the format version ([`CHECKPOINT_VERSION`], u32
//! LE), the length (u64 LE) of a JSON header (the lake, files, names,
//! findings, the archive's segments, the entry store's segments and
//! generation), the binary records of every open transfer stream and its
//! legs and of every other stream, each account with the entry store's
//! generation its ids count from ([`crate::codec`]), and the SHA-256 of
//! everything before it: a truncated or altered checkpoint is refused (exit
//! 2), never half-used. It is read through a map, never whole in memory
//! (`FileBytes`). It is written to a temporary name, fsynced and
//! renamed, so a crash never leaves half a checkpoint; the archive's and the
//! entry store's segments and the files of streams it names
//! (`crate::presence_files`) are written and fsynced before it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ledger_events::Stream;
use ledger_ingest::Table;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;

use crate::archive::{self, Archive, Beside, SegmentRef};
use crate::codec::{self, Rows};

use crate::checks::entries::{EntryIds, EntryKey};
use crate::entry_store::{self, EntrySegmentRef, EntryStore};
use crate::facts::{
    prefetch, prefetch_whole, AccountFacts, Legs, LegsTable, TransferState, Transfers,
};
use crate::finding::Finding;
use crate::names::{FxMap, Names};
use crate::presence::Presence;
use crate::presence_files::{self, Stored, StreamsRef};
use crate::retained::Owed;
use crate::stream::Tail;

/// Version of the checkpoint format: a reconciler refuses any other. 4: an
/// account's state keeps its last row's currency and overdraft limit. 5:
/// every leg keeps the counterparty its event names. 6: legs and transfers
/// keep when they were committed, and findings when their youngest row was
/// (the settle window, `crate::settle`). 7: the tails owed
/// (`crate::retained`). 8: the files of the streams of each lake file
/// (`crate::presence_files`). 9: those files name their index's SHA-256
/// (layout version 2, read by the set). 10: an account's live holds follow
/// `checks::balance::hold_step` (a second placement leaves the first live, a
/// release of nothing leaves a live hold live) and it knows whether they
/// may be incomplete (`AccountFacts::holds_unknown`). 11: the files of
/// streams it writes note each stream with the seq its stretch of rows in
/// the lake file starts at (`StreamsRef::starts`). 12: each account's
/// deposit and withdrawal entry ids (`checks::entries`), in a third binary
/// section. 13: those ids in the entry store's segments beside the file
/// (`entry_store`), each account's state naming the generation they count
/// from; no third section. 14: each open transfer's record ends with the
/// reason its `released` must repeat (`TransferFacts::releasing`), and its
/// findings include `protocol_values` and a failed transfer's hold. 15: the
/// same layout; its findings include a failed transfer's release
/// (`failed_with_release`). 16: the same layout; its findings include a hold
/// or a release on the source after its hold's end (`hold_after_end`,
/// `release_after_end`) and a release off the source
/// (`hold_on_wrong_account`). 17: the same layout; the files of streams it
/// names are in layout 3, each stretch noted with how many rows it holds
/// (`crate::keyed` checks a keyed scan saw them all). 18: the same layout;
/// each open transfer's `last_at_s` is the latest date its rows record, not
/// its last row's (`checks::convergence` judges a row dated after the run's
/// now by it: a version-17 one may have forgotten an earlier row's). 19:
/// each account's state keeps the overdraft limit it was opened with
/// (`AccountFacts::limit`), which `checks::overdraft` judges every row by.
/// 20: the same layout; of copies of a row with one hash, the folds read
/// the one that hashes to it, not the first file's (`stream::copies_order`),
/// and a stream in the wrong table has no `seq_gap` (rev-s51-diff M2: a
/// version-19 checkpoint keeps what those rules no longer report). 21: the
/// same layout; an account's holds are known again after a row that
/// records it holding nothing (`AccountFacts::holds_unknown`: a version-20
/// one may keep them unknown for good after a gap), and a lake file's
/// stretch of a stream that holds seq 0 holds nothing else
/// (`presence::Noter`: a version-20 one noted the rows after it at seq 0,
/// which no gap names, rev-s57-lost 6). 22: the same rules; every stream
/// but a transfer's (each account's state with it) is in a binary section
/// after the legs, not in the JSON header (`codec`: at a million accounts
/// the header was ~400 MB, parsed and written again every night in ~4 s
/// each way).
pub const CHECKPOINT_VERSION: u32 = 22;

/// The first version written by this reconciler's rules: an older one is
/// set aside (`ProofState::older_rules`); a version-21 one differs only in
/// where it keeps its streams.
const RULES_VERSION: u32 = 21;

/// Versions this reconciler reads: a version-6 checkpoint is a version-7
/// one that owes nothing, a version-7 one a version-8 one that knows no
/// lake file's streams, a version-8 one a version-9 one whose files of
/// streams are in the first layout (read whole), a version-9 one a
/// version-10 one whose every account's live holds may be incomplete
/// (built by the earlier rules: a capture or release without a live hold
/// is not judged on those streams until a `--full` run re-proves them), a
/// version-10 one a version-11 one whose files of streams hold streams
/// alone (a compaction that cuts a stream's start in a file they cover is
/// found by the stream's re-proof or by `--full`, not by them). A
/// version-12 one is a version-13 one whose accounts' entry ids are all in
/// memory, as if proved from their first event in this run, a version-13
/// one a version-14 one whose open transfers' `releasing` reasons are
/// unknown, a version-14 or 15 one a version-16 one, a version-16 one a
/// version-17 one whose files of streams (layout 2) count no stretch's
/// rows, a version-17 one a version-18 one whose open transfers' dates are
/// their last rows', a version-18 one a version-19 one whose accounts'
/// limits are their last rows', a version-19 one a version-20 one, a
/// version-20 one a version-21 one, a version-21 one a version-22 one
/// whose streams are in its header. Versions 6–20 are read to be set aside
/// (`ProofState::older_rules`): their tails judged, the lake proved from
/// its first event once (before 14, no row's amount, limit or reason and
/// no failed transfer's hold was judged; before 15, no failed transfer's
/// release; before 16, no hold or release after a hold's end and no
/// release off the source; before 17, no keyed scan could see rows a
/// footer hid inside a stretch whose first row it left; before 18, no open
/// transfer's row dated after the run's now but its last; before 19, no
/// row was judged by a limit but its own; before 20, copies with one hash
/// were folded in file order and misfiled streams' gaps reported; before
/// 21, an account's holds stayed unknown for good after a gap, and a
/// stretch from seq 0 went on past it), and every lake file's notes written
/// again, counted.
const CHECKPOINT_VERSIONS_READ: [u32; 17] = [
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    RULES_VERSION,
    CHECKPOINT_VERSION,
];

/// Which stream, as the proof keys it: the table it was found in (a stream
/// in the wrong table is proved apart from its namesake), its kind and key.
pub type StreamId = (Table, Stream, String);

/// The proof state of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamState {
    pub tail: Tail,
    /// Account streams only (boxed: most streams are transfers).
    pub account: Option<Box<AccountFacts>>,
}

/// A per-stream finding, tagged with its check and stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFinding {
    pub check: &'static str,
    pub stream: StreamId,
    pub finding: Finding,
}

/// Everything a run proved, in memory.
#[derive(Debug, Default)]
pub struct ProofState {
    pub streams: FxMap<StreamId, StreamState>,
    /// What the legs' and transfers' syms name.
    pub names: Names,
    /// Transfer streams: tail and facts, by id.
    pub transfers: Transfers,
    pub legs: LegsTable,
    pub findings: Vec<StreamFinding>,
    /// Lake files proved: key → stamp (bytes and the store's version tag).
    pub files: BTreeMap<String, String>,
    /// Settled transfers not in `transfers` (see `archive`).
    pub archive: Archive,
    /// Transfers a cross-stream check has a finding on: never settled.
    pub flagged: HashSet<String>,
    /// Tails earlier runs proved that the lake did not hold at this run
    /// (sorted by stream): judged again by every run until it does.
    pub owed: Vec<Owed>,
    /// The streams of each lake file this run read (`crate::presence`):
    /// the next checkpoint's files of streams add those not yet stored.
    pub presence: Presence,
    /// The files of streams the checkpoint names
    /// (`crate::presence_files`; none before version 8).
    pub stored: Stored,
    /// Parts of the archive [`ProofState::load_for_full`] left out, each
    /// with why (not saved: the report's `not_judged`).
    pub left_out: Vec<String>,
    /// Written before version 21: proved by older rules (before 11, a hold
    /// of another amount judged only from `reserved` on and deadlines
    /// unbounded; before 12, no account's entry ids kept; before 14, no
    /// row's amount, limit or reason judged, nor a failed transfer's hold;
    /// before 15, no failed transfer's release; before 16, no hold or
    /// release after a hold's end and no release off the source; before
    /// 17, no stretch's rows counted, so a footer could hide rows inside a
    /// stretch from a keyed scan; before 18, an open transfer's date was its
    /// last row's, not its latest; before 19, each row judged by the
    /// overdraft limit it records; before 20, copies with one hash folded in
    /// file order, misfiled streams' gaps reported; before 21, holds unknown
    /// for good after a gap, stretches from seq 0 noted past it), so the next run proves the lake from its
    /// first event, with this proof set aside (its tails judged), and notes
    /// every file's stretches with their rows.
    pub older_rules: bool,
    /// The key its accounts' entry ids are fingerprinted under.
    pub entry_key: EntryKey,
    /// The entry ids of earlier nights (`entry_store`).
    pub entry_store: EntryStore,
    /// The checkpoint file it was loaded from and the lake it was loaded
    /// for (not saved): a run that must prove the lake from its first event
    /// after all reads it again, to judge its tails (`run`).
    pub source: Option<(std::path::PathBuf, String)>,
}

// ---- the file format -------------------------------------------------------

// One shape for both directions: written from borrowed state (a checkpoint
// is as large as the proof's state, so it is not copied to be written), read
// back owned.

#[derive(Serialize, Deserialize)]
struct Header<'a> {
    version: u32,
    /// The lake the checkpoint belongs to (as given on the command line).
    lake: Cow<'a, str>,
    layout: Cow<'a, str>,
    /// The run that wrote it: its `now_ms`.
    written_at_ms: i64,
    files: Cow<'a, BTreeMap<String, String>>,
    /// The interned names, in sym order.
    names: Vec<Cow<'a, str>>,
    /// Streams other than transfer streams before version 22 (since, they
    /// are in the binary part, as transfer streams always were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    streams: Option<Vec<StreamRec<'a>>>,
    findings: Vec<FindingRec<'a>>,
    /// The settled archive's segments, oldest first, and how many transfers
    /// it holds.
    archive: Vec<SegmentRef>,
    archived: u64,
    /// Tails owed, as streams without an account's state (absent before
    /// version 7).
    #[serde(default)]
    owed: Vec<StreamRec<'a>>,
    /// The files of streams (absent before version 8).
    #[serde(default)]
    streams_files: Cow<'a, [StreamsRef]>,
    /// The key of the accounts' entry-id fingerprints, 32 hex digits (a
    /// string: JSON tools read large integers as doubles); absent before
    /// version 12, which kept none.
    #[serde(default)]
    entry_key: Option<Cow<'a, str>>,
    /// The entry store's segments, oldest first, and the generation of
    /// this checkpoint (absent before version 13).
    #[serde(default)]
    entry_segments: Vec<EntrySegmentRef>,
    #[serde(default)]
    entry_generation: u64,
}

#[derive(Serialize, Deserialize)]
struct StreamRec<'a> {
    table: Cow<'a, str>,
    stream: Stream,
    key: Cow<'a, str>,
    tail: Cow<'a, Tail>,
    account: Option<Cow<'a, AccountFacts>>,
    /// An account's `AccountFacts::entries_since` (from version 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entries_since: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct FindingRec<'a> {
    check: Cow<'a, str>,
    table: Cow<'a, str>,
    stream: Stream,
    stream_key: Cow<'a, str>,
    code: Cow<'a, str>,
    key: Cow<'a, str>,
    seq: Option<u64>,
    event_id: Option<Cow<'a, str>>,
    detail: Cow<'a, str>,
    youngest_ms: Option<i64>,
    missing_balance: Option<i64>,
    /// `Finding::hash_owed` when not its recorded hash (absent before it
    /// was kept, and when it is the recorded hash); `false` from this
    /// format's first marks is `as_written`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hash_owed: Option<StoredOwes>,
}

/// A `FindingRec`'s `hash_owed`: a name, or the boolean of the first
/// marks (`true` the recorded hash, `false` as written).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum StoredOwes {
    Old(bool),
    Owes(crate::unproved::Owes),
}

/// Check names and finding codes are `&'static str` in memory; the few
/// distinct ones read back from a checkpoint are interned once.
fn intern(s: String) -> &'static str {
    static SET: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = SET
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(&known) = set.get(s.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.into_boxed_str());
    set.insert(leaked);
    leaked
}

fn table_of(name: &str) -> Result<Table, String> {
    Table::ALL
        .iter()
        .copied()
        .find(|t| t.as_str() == name)
        .ok_or_else(|| format!("unknown table {name:?}"))
}

/// Held by a run from before it reads its checkpoint until after it has
/// written the next one: a second run on the same checkpoint would delete
/// the archive segments the first is about to name.
#[derive(Debug)]
pub struct CheckpointLock {
    _file: std::fs::File,
}

/// Why [`CheckpointLock::take`] did not take the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another run holds it: its outputs are its own to write.
    Held(CheckpointError),
    /// The lock file cannot be created, opened or locked.
    Failed(CheckpointError),
    /// The volume cannot lock it (a network file system refusing a lock):
    /// whether another run holds it cannot be told, so, as with `Held`,
    /// the outputs are not this run's to write.
    Unlockable(CheckpointError),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held(e) | LockError::Failed(e) | LockError::Unlockable(e) => e.fmt(f),
        }
    }
}

/// The Help of a lock file that cannot be created, opened or locked.
const LOCK_HELP: &str = "Help: the checkpoint's directory must be writable by the job's user and have room \
     (a free inode too: `df -i`); a read-only volume, another owner's directory or a full one stops \
     the run before its proof. Do not run --full for this: the checkpoint is whole";

impl CheckpointLock {
    /// Takes the lock `FILE.lock` beside the checkpoint `FILE`, or says which
    /// run holds it. A lock file already there that this run may not write
    /// (a read-only volume, another owner's file) is locked read-only, which
    /// locks as well: the run proves and writes its outputs, and its save
    /// then fails with its own Help (rev-s53-resources M2).
    pub fn take(path: &Path) -> Result<CheckpointLock, LockError> {
        use std::io::ErrorKind;
        let (dir, stem) = archive::place(path);
        let lock = dir.join(format!("{stem}.lock"));
        let err =
            |why: String| CheckpointError::new(format!("checkpoint {}: {why}", path.display()));
        let failed = |e: std::io::Error, what: &str| {
            LockError::Failed(err(format!("{what} {}: {e}\n{LOCK_HELP}", lock.display())))
        };
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock);
        let file = match opened {
            Ok(file) => file,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                ) && lock.is_file() =>
            {
                std::fs::File::open(&lock).map_err(|e| failed(e, "cannot open its lock file"))?
            }
            Err(e) => return Err(failed(e, "cannot open its lock file")),
        };
        match file.try_lock() {
            Ok(()) => Ok(CheckpointLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held(err(format!(
                "another reconcile run is using it (it holds {})\nHelp: wait for that run to end; \
                 two runs must not share a checkpoint",
                lock.display()
            )))),
            // A network file system (NFS, CIFS) locks through byte-range
            // locks, which refuse a file opened read-only (EBADF) or have
            // no lock service (ENOLCK): not the directory's permissions
            // (rev-s53-diff L4).
            Err(std::fs::TryLockError::Error(e))
                if matches!(e.raw_os_error(), Some(libc::EBADF | libc::ENOLCK)) =>
            {
                Err(LockError::Unlockable(err(format!(
                    "cannot lock {}: {e}\nHelp: the checkpoint's volume does not lock this file: a \
                     network file system (NFS, CIFS) locks only a file the job may write, and needs its \
                     lock service running; give the job's user write access to the lock file, or keep \
                     the checkpoint on a local volume. Do not run --full for this: the checkpoint is whole",
                    lock.display()
                ))))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(failed(e, "cannot lock")),
        }
    }
}

/// A state split for writing: see [`ProofState::split`].
struct Split<'a> {
    settled_rows: Vec<(&'a str, &'a TransferState, &'a Legs)>,
    open_rows: Vec<(&'a str, &'a TransferState)>,
    open_legs: Vec<(&'a str, &'a Legs)>,
}

/// What to do when a checkpoint or a file beside it cannot be used.
pub(crate) const FULL_HELP: &str = "Help: run with --full to re-prove the lake from its first \
     event (a new checkpoint and its files are written)";

/// An entry segment a lookup could not read (the run stops: exit 2, naming
/// `--full`).
pub(crate) fn entries_unreadable(e: String) -> crate::lake::Error {
    crate::lake::Error::Lake(format!("checkpoint entry store: {e}\n{FULL_HELP}"))
}

/// A run that needs a block of the checkpoint's archive and cannot read it:
/// exit 2, naming `--full`.
pub(crate) fn archive_unreadable(e: String) -> crate::lake::Error {
    crate::lake::Error::Lake(format!("checkpoint archive: {e}\n{FULL_HELP}"))
}

/// A part of the checkpoint's archive `--full` leaves out (a segment that
/// does not open, a block that does not read), warned of on stderr: the
/// transfers settled there are not judged against the lake.
pub(crate) fn warn_archive_left_out(why: &str) {
    crate::say!(
        "reconcile: warning: checkpoint archive: {why}\nThe transfers the checkpoint settled there are not judged \
         against the lake in this full proof (every other tail it proved is); the new checkpoint is rebuilt from \
         the lake"
    );
}

/// Why a checkpoint cannot be used. Exit code 2: a run must not silently
/// fall back to a full proof (or worse, resume from the wrong state).
#[derive(Debug)]
pub struct CheckpointError {
    said: String,
    /// Another lake's or a newer reconciler's, or no checkpoint at all:
    /// `--full` refuses it too.
    not_ours: bool,
}

/// How the refusal of a checkpoint written for another lake begins
/// ([`CheckpointError::other_lake`]).
const OTHER_LAKE: &str = "written for the lake ";

/// The Help of a checkpoint of another lake: the path is the likely
/// mistake, and `--full` would replace that lake's checkpoint, with every
/// tail it proved and is owed (rev-s52-docs H1: following "run with
/// --full" here wiped a lake's record of lost rows, and its nights then
/// passed).
const OTHER_LAKE_HELP: &str = "Help: give this lake its own checkpoint (--checkpoint with \
     another path: one checkpoint per lake); --full does not replace another lake's. If this \
     lake is that one moved to a new path, make the old path a symbolic link to the new one \
     (ln -s NEW OLD): the checkpoint then resumes, with every tail it proved and is owed";

/// How the refusal of a file that is no checkpoint at all begins: the path
/// is the likely mistake (`--checkpoint` given another output's path, a
/// typo), and `--full` would overwrite that file (rev-s55-blackbox F1).
const FOREIGN: &str = "another kind of file, not a checkpoint: ";

/// The Help of a file that is no checkpoint: `--full` refuses it too.
const FOREIGN_HELP: &str = "Help: check the --checkpoint path: it names this lake's \
     checkpoint, which each run reads and rewrites, and this file is something else; --full does \
     not replace it. If it is this lake's checkpoint damaged at its start, move it aside and run \
     with --full";

/// How the refusal of a checkpoint a newer reconciler wrote begins (a
/// format version or a lake layout this one does not know).
const NEWER: &str = "written by a newer reconciler: ";

/// Why a checkpoint whose digest does not hold is refused (`--full`
/// replaces it).
const DAMAGED: &str = "damaged: its SHA-256 does not match (truncated or altered)";

/// The Help of a checkpoint a newer reconciler wrote (a rollback): `--full`
/// would replace it, with every tail it proved and is owed (rev-s52-diff
/// L3).
const NEWER_HELP: &str = "Help: run the reconciler that wrote it, or a newer one (a rollback of \
     the job's reconciler?); --full does not replace it. To go on with this one, move the \
     checkpoint's files aside (the checkpoint and every file named after it) and run with --full: \
     what they proved and are owed is then not judged";

impl CheckpointError {
    fn new(said: String) -> CheckpointError {
        CheckpointError {
            said,
            not_ours: false,
        }
    }

    /// Whether the checkpoint is another lake's or a newer reconciler's, or
    /// the file no checkpoint, or it was written while the run read it:
    /// `--full` refuses it too, where it replaces an unreadable one.
    pub fn other_lake(&self) -> bool {
        self.not_ours
    }
}

/// The refusal of the checkpoint at `path` for `why`, with its Help.
fn refusal(path: &Path, why: String) -> CheckpointError {
    let (help, not_ours) = if why.starts_with(OTHER_LAKE) {
        (OTHER_LAKE_HELP, true)
    } else if why.starts_with(NEWER) {
        (NEWER_HELP, true)
    } else if why.starts_with(FOREIGN) {
        (FOREIGN_HELP, true)
    } else if why.starts_with(CHANGED) {
        (CHANGED_HELP, true)
    } else {
        (FULL_HELP, false)
    };
    CheckpointError {
        said: format!("checkpoint {}: {why}\n{help}", path.display()),
        not_ours,
    }
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.said)
    }
}

impl ProofState {
    /// Whether `id` is in the open state (its stream's state or legs), not
    /// only in the archive.
    pub fn is_open(&self, id: &str) -> bool {
        self.transfers.state(id).is_some()
            || self.legs.get(id).is_some_and(|l| *l != Legs::default())
    }

    /// Settled transfers (terminal, no cross-stream finding: they go to the
    /// archive) apart from the open ones and the legs that stay in the
    /// checkpoint file; each transfer's legs found once, by the table's index.
    fn split(&self) -> Split<'_> {
        let mut settled_rows = Vec::new();
        let mut open_rows = Vec::new();
        let mut archived_legs = vec![false; self.legs.len()];
        for (id, st) in self.transfers.iter() {
            let row = self.legs.find(id);
            if st.facts.is_terminal() && !self.flagged.contains(id) {
                settled_rows.push((id, st, row.map_or(Legs::NONE, |i| self.legs.at(i).1)));
                if let Some(i) = row {
                    archived_legs[i as usize] = true;
                }
            } else {
                open_rows.push((id, st));
            }
        }
        // Legs of open transfers, and legs naming no transfer stream.
        let open_legs = self
            .legs
            .iter()
            .zip(&archived_legs)
            .filter(|((_, l), &archived)| !archived && **l != Legs::default())
            .map(|(row, _)| row)
            .collect();
        Split {
            settled_rows,
            open_rows,
            open_legs,
        }
    }

    /// Reads a checkpoint written for `lake`.
    pub fn load(path: &Path, lake: &str) -> Result<ProofState, CheckpointError> {
        ProofState::load_with(path, lake, false).map(|(p, _)| p)
    }

    /// [`ProofState::load`] for `--full`, whose proof is from the first
    /// event and which only judges the tails the checkpoint proved: an
    /// archive segment that does not open (missing, swapped, its index
    /// damaged) leaves its transfers out, warned of on stderr, instead of
    /// the whole checkpoint (whose own file is intact, with every stream's
    /// tail and every tail owed).
    pub fn load_for_full(path: &Path, lake: &str) -> Result<ProofState, CheckpointError> {
        let (mut p, left_out) = ProofState::load_with(path, lake, true)?;
        left_out.iter().for_each(|why| warn_archive_left_out(why));
        p.left_out = left_out;
        Ok(p)
    }

    fn load_with(
        path: &Path,
        lake: &str,
        full: bool,
    ) -> Result<(ProofState, Vec<String>), CheckpointError> {
        let err = |why: String| {
            CheckpointError::new(format!("checkpoint {}: {why}\n{FULL_HELP}", path.display()))
        };
        let unreadable = |e: std::io::Error| match e.kind() {
            // The file may be whole: `--full` would replace it and forget
            // what it proved and was owed.
            std::io::ErrorKind::PermissionDenied => CheckpointError::new(format!(
                "checkpoint {}: cannot read: {e}\n{ACCESS_HELP}",
                path.display()
            )),
            _ => err(format!("cannot read: {e}")),
        };
        let bytes = FileBytes::open(path).map_err(unreadable)?;
        // The files beside it alike, all named at once (rev-s51-ops2 F1:
        // one the run may not read was a damaged file's `--full`, which set
        // aside everything the archive proved). A full run goes on, saying
        // what it cannot judge, as for any file of the archive it cannot read.
        let denied = if full {
            Vec::new()
        } else {
            denied_beside(path)
        };
        if !denied.is_empty() {
            return Err(CheckpointError::new(format!(
                "checkpoint {}: {} file(s) of its state cannot be read by this user: {}\n{ACCESS_HELP}",
                path.display(),
                denied.len(),
                denied.join(", "),
            )));
        }
        let changed = || refusal(path, CHANGED.into());
        let (content, digest) = match frame(bytes.bytes()) {
            Ok(framed) => framed,
            Err(_) if !bytes.unchanged().map_err(unreadable)? => return Err(changed()),
            Err(why) => return Err(refusal(path, why)),
        };
        // The digest is checked on a second thread while the records are
        // decoded (decoding damaged bytes is safe: every read is checked);
        // a mismatch wins over whatever the decoding made of them.
        let (intact, parsed) = crate::threads::both(
            || bytes.digest(content.len()).map(|d| d.as_slice() == digest),
            || {
                let behind = |at: usize| bytes.decoded(at);
                ProofState::parse(content, lake, &archive::place(path).0, full, &behind)
            },
        );
        // Every read of the map is done (the state owns what it holds): a
        // write in place meanwhile wins over whatever the reads made of it.
        if !bytes.unchanged().map_err(unreadable)? {
            return Err(changed());
        }
        if !intact.map_err(unreadable)? {
            return Err(err(DAMAGED.into()));
        }
        let (mut state, left_out) = parsed.map_err(|why| refusal(path, why))?;
        state.source = Some((path.to_path_buf(), lake.to_owned()));
        Ok((state, left_out))
    }

    /// The state in a checkpoint's `content` (everything before the digest),
    /// and the archive segments left out (`tolerant`: see
    /// [`ProofState::load_for_full`]; otherwise one is an error).
    ///
    /// `behind(at)` is told, now and then, that the bytes before `at` are
    /// decoded ([`FileBytes::decoded`]).
    fn parse(
        content: &[u8],
        lake: &str,
        dir: &Path,
        tolerant: bool,
        behind: &dyn Fn(usize),
    ) -> Result<(ProofState, Vec<String>), String> {
        let (header, body) = split_content(content)?;
        let f: Header =
            serde_json::from_slice(header).map_err(|e| format!("damaged header: {e}"))?;
        if !CHECKPOINT_VERSIONS_READ.contains(&f.version) {
            return Err(format!(
                "format version {} (this reconciler reads {CHECKPOINT_VERSIONS_READ:?})",
                f.version
            ));
        }
        // The layout follows the version the file's first bytes give
        // (`frame`); its header must say the same.
        let framed = u32::from_le_bytes(content[8..12].try_into().expect("4 bytes"));
        if framed != f.version {
            return Err(format!(
                "damaged header: format version {} in the header of a version-{framed} file",
                f.version
            ));
        }
        // The proof state does not depend on the files' encodings: a
        // checkpoint of a lake-v1 lake carries over to its lake-v2 files.
        if !ledger_ingest::LAKE_LAYOUTS_READABLE.contains(&f.layout.as_ref()) {
            // Every older layout is readable: an unknown one is newer.
            return Err(format!("{NEWER}written for lake layout {:?}", f.layout));
        }
        let identity = crate::store::Location::identity(lake);
        if !crate::store::Location::is_same_lake(&f.lake, &identity) {
            return Err(format!(
                "{OTHER_LAKE}{:?}, not {lake:?} ({identity})",
                f.lake
            ));
        }
        let entry_key = match f.entry_key.as_deref() {
            Some(hex) => Some(parse_entry_key(hex).ok_or_else(|| {
                format!("damaged header: entry_key {hex:?} is not 32 hex digits")
            })?),
            None if f.version >= 12 => {
                return Err("damaged header: no entry_key (version 12 keeps one)".into())
            }
            None => None,
        };
        let listed = f.names.len();
        // Every stream but a transfer's goes into the map as it is decoded
        // (millions of accounts: no list of them beside the map).
        let mut streams = FxMap::default();
        // Live holds from before version 10 followed other rules: trusted
        // for what they hold, not for what they lack.
        let holds_known = f.version >= 10;
        let generation = f.entry_generation;
        let check = |id: &StreamId, st: &mut StreamState, since: Option<u64>| {
            if let Some(a) = st.account.as_mut() {
                // Every account's ids count from a generation the store has
                // reached: one outside it would skip them, then drop them.
                if f.version >= 13 && !since.is_some_and(|g| (1..=generation).contains(&g)) {
                    return Err(format!(
                        "the account {} has entries_since {since:?} in a checkpoint of entry generation {generation} \
                         (version 13 keeps one from 1 to that generation)",
                        id.2
                    ));
                }
                a.holds_unknown |= !holds_known;
                a.entries_since = since;
            }
            Ok(())
        };
        let mut sink = StreamSink::new(&mut streams, &check);
        let Body {
            transfers,
            legs,
            entries,
        } = read_body(body, listed, f.version, &mut sink, &|at| {
            behind(FIXED + header.len() + at)
        })
        .map_err(|e| format!("damaged: {e}"))?;
        // Before version 22 the header always held them (`streams` absent
        // there is damage, not a lake of no accounts), since never.
        let header_streams = match (f.version >= 22, f.streams) {
            (false, Some(v)) => v,
            (false, None) => {
                return Err(
                    "damaged header: no streams (versions before 22 keep them there)".into(),
                )
            }
            (true, None) => Vec::new(),
            (true, Some(_)) => {
                return Err(format!(
                    "damaged header: streams in the header of a version-{} checkpoint (version 22 keeps them in its binary part)",
                    f.version
                ))
            }
        };
        let names = Names::from_list(f.names.into_iter().map(|n| n.into_owned().into()).collect());
        // The records' syms are indexes into the list as written: a name
        // listed twice would shift every one after it.
        if names.list().len() != listed {
            return Err("damaged header: a name is listed twice".into());
        }
        // `--full` proves every account from its first event: it reads
        // no entry ids.
        let entry_store = if tolerant {
            EntryStore::default()
        } else {
            EntryStore::open(dir, &f.entry_segments, f.entry_generation)?
        };
        let (archive, left_out) = if tolerant {
            Archive::open_what_opens(dir, &f.archive, f.archived, &names)
        } else {
            (
                Archive::open(dir, &f.archive, f.archived, &names)?,
                Vec::new(),
            )
        };
        // A resumed run's files of streams are opened now (a `--full` run
        // writes new ones, whatever these are).
        if !tolerant {
            crate::presence_files::check(dir, &f.streams_files)?;
        }
        let mut p = ProofState {
            files: f.files.into_owned(),
            names,
            archive,
            transfers: Transfers::from_sorted(transfers),
            legs: LegsTable::from_rows(legs),
            stored: Stored {
                dir: dir.to_path_buf(),
                refs: f.streams_files.into_owned(),
            },
            older_rules: f.version < RULES_VERSION,
            entry_key: entry_key.unwrap_or_default(),
            entry_store,
            ..Default::default()
        };
        sink.map.reserve(header_streams.len());
        for s in header_streams {
            let table = table_of(&s.table)?;
            sink.put(
                (table, s.stream, s.key.into_owned()),
                StreamState {
                    tail: s.tail.into_owned(),
                    account: s.account.map(|a| Box::new(a.into_owned())),
                },
                s.entries_since,
            )
            .map_err(|e| format!("damaged: {e}"))?;
        }
        // The body's, after every check of the whole file (before version
        // 22 the header's, above; never both).
        if let Some(e) = sink.finish() {
            return Err(format!("damaged: {e}"));
        }
        p.streams = streams;
        for (account, e) in entries {
            let id = (Table::Account, Stream::Account, account.to_owned());
            let a = p
                .streams
                .get_mut(&id)
                .and_then(|st| st.account.as_mut())
                .ok_or_else(|| format!("damaged: entry ids of {account}, which has no state"))?;
            a.entries = e;
        }
        for r in f.owed {
            let table = table_of(&r.table)?;
            p.owed
                .push(((table, r.stream, r.key.into_owned()), r.tail.into_owned()));
        }
        for r in f.findings {
            let table = table_of(&r.table)?;
            p.findings.push(StreamFinding {
                check: intern(r.check.into_owned()),
                stream: (table, r.stream, r.stream_key.into_owned()),
                finding: Finding {
                    code: intern(r.code.into_owned()),
                    key: r.key.into_owned(),
                    seq: r.seq,
                    event_id: r.event_id.map(Cow::into_owned),
                    detail: r.detail.into_owned(),
                    youngest_ms: r.youngest_ms,
                    missing_balance: r.missing_balance,
                    hash_owed: r.hash_owed.map(|o| match o {
                        StoredOwes::Old(true) => crate::unproved::Owes::Recorded,
                        StoredOwes::Old(false) => crate::unproved::Owes::AsWritten,
                        StoredOwes::Owes(o) => o,
                    }),
                },
            });
        }
        Ok((p, left_out))
    }

    /// Writes the checkpoint atomically (temporary file, fsync, rename).
    /// The first save (no checkpoint yet) is marked ([`first_save_marker`])
    /// while it writes.
    pub fn save(&self, path: &Path, lake: &str, now_ms: i64) -> Result<(), CheckpointError> {
        let first = !path.exists();
        let marker = first_save_marker(path);
        if first {
            mark(&marker).map_err(|e| {
                CheckpointError::new(format!(
                    "cannot write checkpoint {}: its first save's marker {}: {e}\nHelp: check that the \
                     directory exists, is writable and has room (a free inode too: `df -i`)",
                    path.display(),
                    marker.display()
                ))
            })?;
        }
        let saved = self.save_files(path, lake, now_ms);
        if saved.is_err() && path.exists() {
            // The files this save wrote that the checkpoint on disk does
            // not name: freed now, not left for the next save.
            remove_orphans(path);
        }
        if saved.is_err() && !path.exists() {
            // A first save that failed: the files of its state it wrote
            // are named by no checkpoint, and would make the next run take
            // the checkpoint for one lost (a kill leaves them too: that
            // run's refusal says so).
            let (dir, stem) = archive::place(path);
            for name in archive::state_files(path) {
                let _ = std::fs::remove_file(dir.join(name));
            }
            // And the temporary files (rev-s51-ops2 F2: a segment cut short
            // by the file-size limit stayed as `FILE.seg.tmp`).
            for ext in archive::STATE_FILE_EXTS {
                let _ = std::fs::remove_file(dir.join(format!("{stem}.{ext}.tmp")));
            }
            let _ = std::fs::remove_file(tmp_path(path));
        }
        // Once the checkpoint is there, or nothing of the save is left
        // (rev-s51-diff H1: a save that failed after its rename kept the
        // marker beside a checkpoint, and had that checkpoint been lost
        // later, its files would have been taken for a killed first save's).
        if first && (path.exists() || archive::state_files(path).is_empty()) {
            let _ = std::fs::remove_file(&marker);
        }
        saved
    }

    fn save_files(&self, path: &Path, lake: &str, now_ms: i64) -> Result<(), CheckpointError> {
        let err = |why: String| {
            CheckpointError::new(format!(
                "cannot write checkpoint {}: {why}\nHelp: check that the directory exists, is writable \
                 and has room, and the job's file-size limit (ulimit -f) if the error is \"File too \
                 large\": a save writes the night's new files of state (and its temporary files) \
                 before it removes those the checkpoint no longer names",
                path.display()
            ))
        };
        // Best effort: one that cannot be removed (another user's, a
        // read-only snapshot) must not stop the save (rev-s50-diff F8); the
        // pass after a save that succeeds says so.
        let started = std::time::Instant::now();
        remove_orphans(path);
        let trace = |what: &str| {
            if crate::lake::trace_enabled() {
                crate::say!(
                    "reconcile: trace: checkpoint save {:.2} s: {what}",
                    started.elapsed().as_secs_f64()
                );
            }
        };
        let beside = |e: Beside| match e {
            Beside::Unwritable(why) => err(why),
            Beside::Unreadable(why) => CheckpointError::new(format!(
                "cannot write checkpoint {}: {why}\n{FULL_HELP}",
                path.display()
            )),
        };
        let Split {
            settled_rows,
            open_rows,
            open_legs,
        } = self.split();
        let open_ids: HashSet<&str> = open_rows
            .iter()
            .map(|r| r.0)
            .chain(open_legs.iter().map(|r| r.0))
            .collect();
        let is_open = |id: &str| open_ids.contains(id);
        let archived = self.archive.live + settled_rows.len() as u64;
        let segments = archive::append(
            &self.archive,
            path,
            settled_rows.into_iter(),
            &self.names,
            &is_open,
        )
        .map_err(beside)?;
        let streams_files = presence_files::save(path, &self.stored.refs, &self.presence, &|k| {
            self.files.contains_key(k)
        })
        .map_err(beside)?;
        trace("orphans removed; archive segments and files of streams written");
        let streams = sorted_streams(&self.streams);
        trace("streams sorted");
        // The entry ids this run added, in account order, as a new
        // generation of the entry store.
        let generation = self.entry_store.generation + 1;
        let accounts: Vec<(&str, &AccountFacts)> = streams
            .iter()
            .enumerate()
            .inspect(|&(i, _)| prefetch_walk(&streams, i))
            .map(|(_, s)| s)
            .filter(|(id, _)| id.0 == Table::Account && id.1 == Stream::Account)
            .filter_map(|(id, st)| Some((id.2.as_str(), st.account.as_deref()?)))
            .collect();
        let since_of = |a: &AccountFacts| a.entries_since.unwrap_or(generation);
        let since = |account: &str| {
            accounts
                .binary_search_by_key(&account, |(k, _)| k)
                .ok()
                .map(|i| since_of(accounts[i].1))
        };
        let entry_segments = entry_store::append(
            &self.entry_store,
            path,
            accounts
                .iter()
                .map(|(k, a)| (*k, a.entries.as_slice()))
                .filter(|(_, e)| !e.is_empty()),
            &since,
        )
        .map_err(beside)?;
        trace("entry store written");
        let f = Header {
            version: CHECKPOINT_VERSION,
            // The lake however it was spelled (`crate::store::Location::identity`).
            lake: Cow::Owned(crate::store::Location::identity(lake)),
            layout: Cow::Borrowed(ledger_ingest::LAKE_LAYOUT_VERSION),
            written_at_ms: now_ms,
            files: Cow::Borrowed(&self.files),
            names: self
                .names
                .list()
                .iter()
                .map(|n| Cow::Borrowed(&**n))
                .collect(),
            // In the binary part.
            streams: None,
            findings: self
                .findings
                .iter()
                .map(|f| FindingRec {
                    check: Cow::Borrowed(f.check),
                    table: Cow::Borrowed(f.stream.0.as_str()),
                    stream: f.stream.1,
                    stream_key: Cow::Borrowed(&f.stream.2),
                    code: Cow::Borrowed(f.finding.code),
                    key: Cow::Borrowed(&f.finding.key),
                    seq: f.finding.seq,
                    event_id: f.finding.event_id.as_deref().map(Cow::Borrowed),
                    detail: Cow::Borrowed(&f.finding.detail),
                    youngest_ms: f.finding.youngest_ms,
                    missing_balance: f.finding.missing_balance,
                    hash_owed: f
                        .finding
                        .hash_owed
                        .filter(|o| *o != crate::unproved::Owes::Recorded)
                        .map(StoredOwes::Owes),
                })
                .collect(),
            archive: segments.clone(),
            archived,
            owed: self
                .owed
                .iter()
                .map(|((table, stream, key), tail)| StreamRec {
                    table: Cow::Borrowed(table.as_str()),
                    stream: *stream,
                    key: Cow::Borrowed(key),
                    tail: Cow::Borrowed(tail),
                    account: None,
                    entries_since: None,
                })
                .collect(),
            streams_files: Cow::Borrowed(&streams_files),
            entry_key: Some(Cow::Owned(format!(
                "{:016x}{:016x}",
                self.entry_key.0[0], self.entry_key.0[1]
            ))),
            entry_segments: entry_segments.clone(),
            entry_generation: generation,
        };
        let header = serde_json::to_vec(&f).map_err(|e| err(e.to_string()))?;
        let tmp = tmp_path(path);
        let file = std::fs::File::create(&tmp).map_err(|e| err(e.to_string()))?;
        let mut out = HashingWriter {
            inner: std::io::BufWriter::with_capacity(1 << 20, file),
            sha: Sha256::new(),
        };
        let io = |e: std::io::Error| err(e.to_string());
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&CHECKPOINT_VERSION.to_le_bytes())
            .map_err(io)?;
        out.write_all(&(header.len() as u64).to_le_bytes())
            .map_err(io)?;
        out.write_all(&header).map_err(io)?;
        // The binary part, handed on a megabyte at a time to the thread
        // that hashes and writes it.
        write_beside(&mut out, |hand_on| {
            let mut w = codec::Writer::default();
            w.count(open_rows.len());
            for (id, st) in open_rows {
                w.open_transfer(id, st);
                hand_on(&mut w.buf, false)?;
            }
            w.count(open_legs.len());
            for (id, l) in open_legs {
                w.legs(id, l);
                hand_on(&mut w.buf, false)?;
            }
            w.count(streams.len());
            for (i, &(id, st)) in streams.iter().enumerate() {
                prefetch_walk(&streams, i);
                w.stream(id, st, st.account.as_deref().map(since_of));
                hand_on(&mut w.buf, false)?;
            }
            hand_on(&mut w.buf, true)
        })
        .map_err(io)?;
        trace("streams written");
        let digest = out.sha.finalize();
        let mut inner = out.inner;
        inner.write_all(&digest).map_err(io)?;
        let file = inner.into_inner().map_err(|e| err(e.to_string()))?;
        file.sync_all().map_err(io)?;
        trace("synced");
        // The names of the segments and files of streams written above are
        // durable before the checkpoint that names them (a crash must not
        // leave a checkpoint naming a file the directory lost), and the
        // checkpoint's own name before the old files go.
        let dir = archive::place(path).0;
        let sync_dir = || std::fs::File::open(&dir).and_then(|d| d.sync_all());
        sync_dir().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        trace("in place");
        if let Err(e) = sync_dir() {
            // Written and in place (the next run reads it), but not known to
            // be durable: a crash before the system writes the directory back
            // may bring back the previous checkpoint, so the files only that
            // one names stay until a later save (rev-s57-checkpoint 4: "cannot
            // write checkpoint" was said of one written).
            crate::say!(
                "reconcile: warning: checkpoint {} written, but its directory could not be synced \
                 ({e}): this save leaves the files of state only the previous checkpoint names in \
                 place, in case a crash brings that one back (the next save removes them)\n\
                 Help: check the volume (`dmesg` for I/O errors); the next run goes on from this checkpoint",
                path.display()
            );
            return Ok(());
        }
        // The segments and files of streams the old checkpoint named and
        // this one does not. The checkpoint is written: a file that cannot
        // be removed is a warning, not a failed save (rev-s53-resources M4:
        // "cannot write checkpoint" said of one written), and the next save
        // tries again before it writes ([`remove_orphans`]).
        let left = [
            archive::remove_unreferenced(path, &segments),
            entry_store::remove_unreferenced(path, &entry_segments),
            presence_files::remove_unreferenced(path, &streams_files),
        ];
        trace("files no longer named removed");
        if let Some(why) = left.into_iter().find_map(Result::err) {
            crate::say!(
                "reconcile: warning: checkpoint {} written, but files of its state it no longer names \
                 were left beside it: {why}\n\
                 Help: they are not needed (the checkpoint does not name them) and take room every night \
                 until removed; see why the file cannot be removed (its owner, `lsattr` for the \
                 immutable attribute, the directory's permissions); each run tries again",
                path.display()
            );
        }
        Ok(())
    }
}

/// Every stream's state, in [`StreamId`] order. Each key's first 16 bytes
/// are taken once, as a number that orders as they do, so most comparisons
/// read no string: sorting millions of accounts by their keys' bytes
/// chased a pointer at every comparison (~1/4 of a night with nothing new
/// at 4M accounts).
fn sorted_streams(streams: &FxMap<StreamId, StreamState>) -> Vec<(&StreamId, &StreamState)> {
    let prefix = |id: &StreamId| {
        let b = id.2.as_bytes();
        let mut head = [0u8; 16];
        head[..b.len().min(16)].copy_from_slice(&b[..b.len().min(16)]);
        (id.0, id.1, u128::from_be_bytes(head))
    };
    // The map's entries in its own order (one walk over its memory), then
    // each key's bytes, hinted WALK_AHEAD keys on: each is on the heap.
    let entries: Vec<(&StreamId, &StreamState)> = streams.iter().collect();
    let mut keyed = Vec::with_capacity(entries.len());
    for (i, &(id, st)) in entries.iter().enumerate() {
        if let Some((ahead, _)) = entries.get(i + WALK_AHEAD) {
            prefetch(ahead.2.as_ptr());
        }
        keyed.push((prefix(id), id, st));
    }
    drop(entries);
    // Equal prefixes (zero-padded, so "a" and "a\0" too) fall back to the
    // whole key.
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1 .2.cmp(&b.1 .2)));
    keyed.into_iter().map(|(_, id, st)| (id, st)).collect()
}

/// How many streams ahead a walk of the streams in id order hints what it
/// will read ([`prefetch_walk`]).
const WALK_AHEAD: usize = 16;

/// For a walk of `streams` in id order, at `i`: hints the map's entries
/// 2 × [`WALK_AHEAD`] on (in id order, each is a random place in the map),
/// and the key's bytes and the account's facts [`WALK_AHEAD`] on (on the
/// heap: their addresses are in the entries hinted before). At 4M accounts
/// each stream's reads were three or four misses in a row, taken one
/// stream at a time, on every walk of a save.
fn prefetch_walk(streams: &[(&StreamId, &StreamState)], i: usize) {
    if let Some((id, st)) = streams.get(i + 2 * WALK_AHEAD) {
        prefetch_whole(*id);
        prefetch_whole(*st);
    }
    if let Some((id, st)) = streams.get(i + WALK_AHEAD) {
        prefetch(id.2.as_ptr());
        if let Some(a) = st.account.as_deref() {
            prefetch_whole(a);
        }
    }
    if let Some((_, st)) = streams.get(i + WALK_AHEAD / 2) {
        if let Some(a) = st.account.as_deref() {
            for c in [
                a.currency.as_deref(),
                a.terms.as_ref().and_then(|t| t.currency.as_deref()),
            ]
            .into_iter()
            .flatten()
            {
                prefetch(c.as_ptr());
            }
        }
    }
}

/// A checkpoint's `entry_key`: two u64 as 16 hex digits each.
fn parse_entry_key(hex: &str) -> Option<EntryKey> {
    let word = |h: &str| {
        (h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(h, 16).ok())
            .flatten()
    };
    Some(EntryKey([
        word(hex.get(..16)?)?,
        word(hex.get(16..).filter(|h| h.len() == 16)?)?,
    ]))
}

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"LDGRCKPT";

/// Writes through, hashing what it writes (the file's trailing SHA-256).
struct HashingWriter {
    inner: std::io::BufWriter<std::fs::File>,
    sha: Sha256,
}

impl HashingWriter {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.sha.update(b);
        self.inner.write_all(b)
    }
}

/// What [`write_beside`]'s encoder hands its bytes to: `(buf, last)`
/// takes `buf`'s bytes once they are [`HAND_ON_AT`] or more (or `last`),
/// and leaves `buf` empty.
type HandOn<'h> = dyn FnMut(&mut Vec<u8>, bool) -> std::io::Result<()> + 'h;

/// The bytes an encoder gathers before it hands them on.
const HAND_ON_AT: usize = 1 << 20;

/// Runs `encode`, whose bytes go to `out` on another thread: the hashing
/// and the copy into the page cache of one megabyte overlap the encoding
/// of the next (at 4M accounts a save's ~0.8 GB took 4.3–4.8 s on one
/// thread, half of it the kernel's copy, docs/BENCHMARKS.md "Sixty-fourth
/// session"). The buffers go back to the encoder to be filled again, so
/// no fresh pages are taken per megabyte. The bytes and their order are
/// the same as written on one thread, which is what happens when the OS
/// refuses the thread (with the warning the proof's threads give). The
/// first error of either side is the result.
fn write_beside(
    out: &mut HashingWriter,
    encode: impl FnOnce(&mut HandOn<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::sync::mpsc::sync_channel;
    let slot = Mutex::new(Some(&mut *out));
    let mut encode = Some(encode);
    let piped = std::thread::scope(|scope| {
        let (full_tx, full_rx) = sync_channel::<Vec<u8>>(2);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(4);
        let slot = &slot;
        let writer = std::thread::Builder::new()
            .name("checkpoint-writer".into())
            .spawn_scoped(scope, move || {
                let out = slot
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                    .expect("the writer takes the output once");
                for mut buf in full_rx {
                    out.write_all(&buf)?;
                    buf.clear();
                    // Back to the encoder while it has room for it, else freed.
                    let _ = empty_tx.try_send(buf);
                }
                Ok::<(), std::io::Error>(())
            });
        let writer = writer.map_err(|e| crate::threads::working_alone(&e)).ok()?;
        let encode = encode.take().expect("encoded once");
        let mut hand_on = |buf: &mut Vec<u8>, last: bool| {
            if !due(buf, last) {
                return Ok(());
            }
            let fresh = empty_rx
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(HAND_ON_AT + (HAND_ON_AT >> 2)));
            let full = std::mem::replace(buf, fresh);
            // A writer gone has failed: its error is the result, below.
            full_tx.send(full).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the checkpoint's writer stopped",
                )
            })
        };
        let encoded = encode(&mut hand_on);
        drop(full_tx);
        let written = writer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        // The writer's error first: the encoder's is then only that the
        // writer stopped.
        Some(written.and(encoded))
    });
    match piped {
        Some(done) => done,
        None => write_inline(
            out,
            encode.take().expect("not run when the thread was refused"),
        ),
    }
}

/// Whether an encoder's `buf` is handed on now ([`HandOn`]).
fn due(buf: &[u8], last: bool) -> bool {
    last || buf.len() >= HAND_ON_AT
}

/// [`write_beside`] on this thread alone.
fn write_inline(
    out: &mut HashingWriter,
    encode: impl FnOnce(&mut HandOn<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    encode(&mut |buf: &mut Vec<u8>, last: bool| {
        if due(buf, last) {
            out.write_all(buf)?;
            buf.clear();
        }
        Ok(())
    })
}

/// Checks the frame (magic, version, header length, trailing SHA-256) and
/// returns the JSON header and the binary body.
/// Magic, format version, header length: the bytes before the JSON header.
const FIXED: usize = MAGIC.len() + 4 + 8;

/// A checkpoint file's bytes, as [`ProofState::load_with`] decodes them: a
/// regular file mapped (read-only, private), anything else read whole (its
/// error is then `read`'s own). A mapped file is never in memory whole: the
/// pages decoded are let go as the decoding moves on
/// ([`FileBytes::decoded`]), and the digest is taken from reads of the open
/// file, not from the map ([`FileBytes::digest`]). At 4M accounts the file
/// is ~0.8 GB, and reading it whole put a resumed night's peak memory
/// above a full proof's (docs/BENCHMARKS.md, "Sixty-third session").
enum FileBytes {
    Read(Vec<u8>),
    Mapped {
        file: std::fs::File,
        map: memmap2::Mmap,
        /// The map's pages before this offset are let go.
        let_go: std::sync::atomic::AtomicUsize,
        /// [`LET_GO_EVERY`] (tests: less).
        every: usize,
        /// The file's [`Stamp`] before it was mapped.
        stamp: Stamp,
    },
}

/// What tells a file written in place: its size and change time (every
/// write sets the ctime; since Linux 6.13, to a fine-grained time once it
/// was queried, so a write right after the first look shows too).
#[derive(Debug, PartialEq, Eq)]
struct Stamp(u64, i64, i64);

impl Stamp {
    fn of(file: &std::fs::File) -> std::io::Result<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = file.metadata()?;
        Ok(Stamp(m.len(), m.ctime(), m.ctime_nsec()))
    }
}

/// A mapped checkpoint whose size or change time moved while the run read
/// it: the bytes decoded may not be the bytes digested.
const CHANGED: &str = "it was written while this run read it (in place: a copy onto it, say), so \
    what was read is not known to be what its digest covers";

/// What to do about a checkpoint written while the run read it: it may be
/// whole, so `--full` refuses it too.
const CHANGED_HELP: &str = "Help: a checkpoint is replaced only by renaming a new file over it; \
    run again once nothing else writes to it (--full refuses it too)";

/// How far the decoding moves on between two lets-go: a multiple of
/// [`PAGE`].
const LET_GO_EVERY: usize = 64 << 20;

/// A multiple of every page size in use (4, 16 and 64 KiB).
const PAGE: usize = 64 << 10;

impl FileBytes {
    fn open(path: &Path) -> std::io::Result<FileBytes> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.len() == 0 {
            return std::fs::read(path).map(FileBytes::Read);
        }
        let stamp = Stamp::of(&file)?;
        // SAFETY: the map is read-only and private. A checkpoint is replaced
        // by renaming a new file over it (`save`), never written in place,
        // so its bytes stay as they are while mapped. One written in place
        // by hand all the same is refused once read ([`Self::unchanged`]),
        // and one cut short under the map raises SIGBUS, which `main` turns
        // into exit 2.
        let map = unsafe { memmap2::MmapOptions::new().map(&file)? };
        // Only a hint (more read-ahead): the decoding goes front to back.
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(FileBytes::Mapped {
            file,
            map,
            let_go: Default::default(),
            every: LET_GO_EVERY,
            stamp,
        })
    }

    /// Whether the file is as it was when mapped (a file read whole is a
    /// copy: digested and decoded, the same bytes). Asked once nothing
    /// reads the map any more.
    fn unchanged(&self) -> std::io::Result<bool> {
        match self {
            FileBytes::Read(_) => Ok(true),
            FileBytes::Mapped { file, stamp, .. } => Ok(Stamp::of(file)? == *stamp),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            FileBytes::Read(bytes) => bytes,
            FileBytes::Mapped { map, .. } => map,
        }
    }

    /// The SHA-256 of the first `len` bytes; of a mapped file, read a
    /// megabyte at a time from the open file (its pages then stay out of
    /// the process).
    fn digest(&self, len: usize) -> std::io::Result<[u8; 32]> {
        let FileBytes::Mapped { file, .. } = self else {
            return Ok(Sha256::digest(&self.bytes()[..len]).into());
        };
        use std::os::unix::fs::FileExt;
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < len {
            let n = buf.len().min(len - at);
            file.read_exact_at(&mut buf[..n], at as u64)?;
            hash.update(&buf[..n]);
            at += n;
        }
        Ok(hash.finalize().into())
    }

    /// The bytes before `at` are decoded: once [`LET_GO_EVERY`] more are,
    /// their pages leave the process. What the decoded records still borrow
    /// from them (the header's strings) is read again from the file should
    /// anything look at it, unchanged.
    fn decoded(&self, at: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let FileBytes::Mapped {
            map, let_go, every, ..
        } = self
        else {
            return;
        };
        let from = let_go.load(Relaxed);
        let to = at / PAGE * PAGE;
        if to < from + every {
            return;
        }
        // SAFETY: the map is private, read-only and never written, so its
        // pages are the file's: MADV_DONTNEED drops them from the process,
        // and a later access faults them in from the file, as they were.
        if unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        }
        .is_ok()
        {
            let_go.store(to, Relaxed);
        }
    }
}

/// Checks the magic and the version; returns the content and its trailing
/// SHA-256 (not yet compared).
fn frame(bytes: &[u8]) -> Result<(&[u8], &[u8]), String> {
    // The first two formats (2026-11-30, for hours): a JSON document, and
    // a header line of their own. Older checkpoints, not another file:
    // `--full` replaces them (rev-s55-diff2 L2).
    let first_formats = bytes.starts_with(b"LEDGER-RECONCILE-CHECKPOINT")
        || (bytes.starts_with(b"{") && bytes.windows(9).any(|w| w == b"\"version\""));
    if first_formats {
        return Err("a checkpoint of a first format this reconciler no longer reads".into());
    }
    if !MAGIC.starts_with(&bytes[..bytes.len().min(MAGIC.len())]) {
        return Err(format!("{FOREIGN}it does not begin with LDGRCKPT"));
    }
    if bytes.len() < FIXED + 32 {
        return Err(format!(
            "not a checkpoint: {} bytes, too short for one (cut short, or empty)",
            bytes.len()
        ));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if !CHECKPOINT_VERSIONS_READ.contains(&version) {
        // Every version keeps this frame (the magic, the version, the
        // content, the SHA-256 of all before it): a version this build does
        // not read is another build's only when the digest holds; else a bit
        // of the version flipped, and the file is damaged, which --full
        // replaces (rev-s57-checkpoint 1: it was "a newer reconciler's",
        // which --full refuses).
        let (content, digest) = bytes.split_at(bytes.len() - 32);
        if Sha256::digest(content).as_slice() != digest {
            return Err(DAMAGED.into());
        }
        let newer = if version > CHECKPOINT_VERSION {
            NEWER
        } else {
            ""
        };
        return Err(format!(
            "{newer}format version {version} (this reconciler reads {CHECKPOINT_VERSIONS_READ:?})"
        ));
    }
    Ok(bytes.split_at(bytes.len() - 32))
}

/// What to do about a checkpoint, or a file of its state, the run may not
/// read: it may be whole, and `--full` would replace it and forget what it
/// proved and was owed.
const ACCESS_HELP: &str = "Help: give the user the job runs as access to the checkpoint and the \
    files beside it (a run as another user wrote them?), and run again; --full would replace it \
    without judging what it proved";

/// The files of state the checkpoint at `path` names that this user may not
/// open (permission denied), each as the path it is at; none when its
/// header does not read (its load says why).
fn denied_beside(path: &Path) -> Vec<String> {
    let Some(named) = header_part::<NamedFiles>(path) else {
        return Vec::new();
    };
    let dir = archive::place(path).0;
    let files = named.archive.iter().map(|r| &r.file);
    let files = files
        .chain(named.streams_files.iter().map(|r| &r.file))
        .chain(named.entry_segments.iter().map(|r| &r.file));
    files
        .map(|f| dir.join(f))
        .filter(|f| {
            std::fs::File::open(f).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        })
        .map(|f| f.display().to_string())
        .collect()
}

/// The files of state a checkpoint's header names, read from its header
/// alone (its digest is checked when it is loaded).
#[derive(serde::Deserialize)]
struct NamedFiles {
    archive: Vec<SegmentRef>,
    #[serde(default)]
    streams_files: Vec<StreamsRef>,
    #[serde(default)]
    entry_segments: Vec<EntrySegmentRef>,
}

/// Removes, before a save writes anything, the files of state the
/// checkpoint at `path` does not name and the temporary files beside it:
/// what a save killed or failed (a full disk) left. They were removed only
/// after a save succeeded, so on a volume without room for them and a new
/// night's files every later save failed (rev-s50-ops F2). The caller
/// holds the checkpoint's lock. Nothing is removed when there is no
/// checkpoint, or its header cannot be read: which files are its is not
/// known then (a first save cleans up after itself, and a lost checkpoint's
/// files are what the next run's refusal names).
fn remove_orphans(path: &Path) {
    let Some(named) = header_part::<NamedFiles>(path) else {
        return;
    };
    // Best effort, each kind of file apart: what cannot be removed is left
    // to the pass after the save, whose failure is reported.
    let _ = archive::remove_unreferenced(path, &named.archive);
    let _ = entry_store::remove_unreferenced(path, &named.entry_segments);
    let _ = presence_files::remove_unreferenced(path, &named.streams_files);
    let _ = std::fs::remove_file(tmp_path(path));
}

/// `FILE.first-save`: present while the first save of the checkpoint `FILE`
/// writes (made durable before any file of its state, removed once the
/// checkpoint is written, or the save failed and removed what it wrote).
/// Found beside files of state and no checkpoint, it tells a first save that
/// was killed from a checkpoint that was lost: its files are removed and the
/// run is a first run again, where a lost checkpoint is refused (rev-s51-ops2
/// F11: the night after a killed first night waited for a `--full` by hand).
pub fn first_save_marker(path: &Path) -> PathBuf {
    appended(path, ".first-save")
}

/// Creates the marker `marker` durably: the file, then its directory.
fn mark(marker: &Path) -> std::io::Result<()> {
    std::fs::File::create(marker)?.sync_all()?;
    let dir = marker.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

/// What a killed first save of the checkpoint `path` left, when it left
/// its marker ([`first_save_marker`]) and no checkpoint: removed, marker
/// last; how many files of state there were. `None` when there is no such
/// marker (the files beside a missing checkpoint are then a lost one's), or
/// the checkpoint is there: a marker beside it (a first save killed after
/// its rename) is removed, so that the checkpoint's files are never taken
/// for a killed save's should the checkpoint be lost later. The caller
/// holds the checkpoint's lock.
pub fn clear_killed_first_save(path: &Path) -> Option<std::io::Result<usize>> {
    let marker = first_save_marker(path);
    if !marker.exists() {
        return None;
    }
    if path.exists() {
        let _ = std::fs::remove_file(&marker);
        return None;
    }
    let (dir, stem) = archive::place(path);
    let files = archive::state_files(path);
    let removed = (|| {
        for name in &files {
            std::fs::remove_file(dir.join(name))?;
        }
        for ext in archive::STATE_FILE_EXTS {
            match std::fs::remove_file(dir.join(format!("{stem}.{ext}.tmp"))) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match std::fs::remove_file(tmp_path(path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::remove_file(&marker)
    })();
    Some(removed.map(|()| files.len()))
}

/// The temporary file a save of the checkpoint `path` writes, `FILE.tmp`.
fn tmp_path(path: &Path) -> PathBuf {
    appended(path, ".tmp")
}

/// `path` with `suffix` appended to its name: `with_extension` would give
/// the checkpoints `ck` and `ck.b` one temporary file (and one marker), and
/// each has its own lock.
fn appended(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The `now` of the run that wrote the checkpoint at `path` (ms since the
/// epoch), read from its header alone; `None` when it is missing or its
/// header does not read (its load says why).
pub fn written_at_ms(path: &Path) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct WrittenAt {
        written_at_ms: i64,
    }
    header_part::<WrittenAt>(path).map(|w| w.written_at_ms)
}

/// The fields `T` takes from the JSON header of the checkpoint at `path`.
fn header_part<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut fixed = [0u8; FIXED];
    file.read_exact(&mut fixed).ok()?;
    if &fixed[..MAGIC.len()] != MAGIC {
        return None;
    }
    let len = header_len(&fixed);
    let size = file.metadata().ok()?.len();
    if len > size.saturating_sub(FIXED as u64) {
        return None;
    }
    let mut header = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact(&mut header).ok()?;
    serde_json::from_slice(&header).ok()
}

/// The header's length, recorded after the magic and the version in a
/// checkpoint's first [`FIXED`] bytes (`bytes` holds them).
fn header_len(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[12..FIXED].try_into().expect("8 bytes"))
}

/// The JSON header and the binary body of the content.
fn split_content(content: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let len = usize::try_from(header_len(content))
        .ok()
        .filter(|&l| l <= content.len() - FIXED)
        .ok_or("damaged: header length out of range")?;
    Ok((&content[FIXED..FIXED + len], &content[FIXED + len..]))
}

/// Each account's entry ids, by account key.
type Entries<'a> = Vec<(&'a str, EntryIds)>;

/// A checkpoint's binary body, read.
struct Body<'a> {
    transfers: Rows<TransferState>,
    legs: Rows<Legs>,
    /// Version 12 only.
    entries: Entries<'a>,
}

/// Where a checkpoint's streams (but a transfer's) go as they are read:
/// each checked by `check`, then put in `map` (a stream there twice is
/// damage), [`PUT_TOGETHER`] at a time; [`StreamSink::finish`] puts the
/// last ones and says whether one was refused.
struct StreamSink<'m> {
    map: &'m mut FxMap<StreamId, StreamState>,
    check: &'m StreamCheck<'m>,
    /// The first stream that did not go in, and why ([`read_body`] goes
    /// on: the checks of the whole file come first, as when the streams
    /// were put in after it was read).
    refused: Option<String>,
    /// Checked, not yet in the map.
    pending: Vec<(StreamId, StreamState)>,
}

/// Streams decoded before they are put in their map together. Each goes to
/// a random place in a map of millions (at 4M accounts, 8.4M buckets over
/// ~740 MB); put one at a time between decodings, each waited on its own
/// misses, while a run of puts has their misses in flight together: the
/// 4M-account checkpoint's read 6.3–7.0 → 4.1–4.6 s (docs/BENCHMARKS.md,
/// "Sixty-fourth session").
const PUT_TOGETHER: usize = 32;

/// What a stream read is checked by, and completed with (its
/// `entries_since`), before it goes in: [`StreamSink`].
type StreamCheck<'m> = dyn Fn(&StreamId, &mut StreamState, Option<u64>) -> Result<(), String> + 'm;

impl<'m> StreamSink<'m> {
    fn new(map: &'m mut FxMap<StreamId, StreamState>, check: &'m StreamCheck<'m>) -> Self {
        StreamSink {
            map,
            check,
            refused: None,
            pending: Vec::with_capacity(PUT_TOGETHER),
        }
    }

    /// Checks the stream (its error returned) and puts it in the map with
    /// the next ones (one there twice is then refused).
    fn put(&mut self, id: StreamId, mut st: StreamState, since: Option<u64>) -> Result<(), String> {
        (self.check)(&id, &mut st, since)?;
        self.pending.push((id, st));
        if self.pending.len() >= PUT_TOGETHER {
            self.put_pending();
        }
        Ok(())
    }

    fn put_pending(&mut self) {
        for (id, st) in self.pending.drain(..) {
            if self.map.insert(id, st).is_some() {
                self.refused
                    .get_or_insert_with(|| "a stream's state is there twice".into());
            }
        }
    }

    /// Every stream put in the map; the first refused, if one was. The map
    /// is the caller's again only after this.
    fn finish(mut self) -> Option<String> {
        self.put_pending();
        self.refused
    }
}

/// Records decoded between two calls of `read_body`'s `behind`.
const BEHIND_EVERY: usize = 1 << 14;

/// The binary body: every transfer stream's state, then every transfer's
/// legs, then (version 12 only) each account's entry ids, then (version 22
/// on) every other stream's state, put in `streams` (the first refused is
/// left in it). `behind(at)` is called every [`BEHIND_EVERY`] records with
/// how much of `body` is decoded.
fn read_body<'b>(
    body: &'b [u8],
    names: usize,
    version: u32,
    streams: &mut StreamSink<'_>,
    behind: &dyn Fn(usize),
) -> Result<Body<'b>, String> {
    let mut r = codec::Reader::new(body, names);
    let n = r.count()?;
    let mut transfers = Vec::with_capacity(n);
    // Told every BEHIND_EVERY records how far the decoding is.
    let tell = |i: usize, r: &codec::Reader| {
        if i.is_multiple_of(BEHIND_EVERY) {
            behind(r.position());
        }
    };
    for i in 0..n {
        transfers.push(r.open_transfer(version >= 14)?);
        tell(i, &r);
    }
    let n = r.count()?;
    let mut legs = Vec::with_capacity(n);
    for i in 0..n {
        legs.push(r.legs()?);
        tell(i, &r);
    }
    let mut entries = Vec::new();
    if version == 12 {
        let n = r.count()?;
        entries.reserve(n);
        for _ in 0..n {
            entries.push(r.entries()?);
        }
    }
    if version >= 22 {
        let n = r.count()?;
        // A stream's record takes at least 16 bytes (two tags, a key's
        // length, a seq, a hashes tag, an account flag): a damaged count
        // reserves no more than the bytes left could hold.
        streams.map.reserve(n.min((body.len() - r.position()) / 16));
        for i in 0..n {
            let (id, st, since) = r.stream()?;
            if let Err(e) = streams.put(id, st, since) {
                streams.refused.get_or_insert(e);
            }
            tell(i, &r);
        }
    }
    if !r.at_end() {
        return Err("bytes after the last record".into());
    }
    Ok(Body {
        transfers,
        legs,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An encoder of `n` records of every length from 0 to 299 bytes, each
    /// byte its record's and offset's, handing on after each record.
    fn records(n: usize) -> impl FnOnce(&mut HandOn<'_>) -> std::io::Result<()> {
        move |hand_on| {
            let mut buf = Vec::new();
            for i in 0..n {
                buf.extend((0..i % 300).map(|j| (i * 31 + j) as u8));
                hand_on(&mut buf, false)?;
            }
            hand_on(&mut buf, true)
        }
    }

    fn hashing_writer(path: &Path) -> HashingWriter {
        HashingWriter {
            inner: std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap()),
            sha: Sha256::new(),
        }
    }

    /// The writer thread writes and hashes exactly the bytes, in the order,
    /// that one thread does (several megabytes: buffers handed back and
    /// filled again), and its first error is the result, without a hang.
    #[test]
    fn bytes_written_beside_are_the_bytes_written_inline() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("beside"), dir.path().join("inline"));
        let mut written = Vec::new();
        for (path, beside) in [(&a, true), (&b, false)] {
            let mut out = hashing_writer(path);
            if beside {
                write_beside(&mut out, records(40_000)).unwrap();
            } else {
                write_inline(&mut out, records(40_000)).unwrap();
            }
            let digest = out.sha.finalize();
            out.inner.into_inner().unwrap().sync_all().unwrap();
            written.push((std::fs::read(path).unwrap(), digest));
        }
        assert!(
            written[0].0.len() > 5 * HAND_ON_AT,
            "{}",
            written[0].0.len()
        );
        assert_eq!(written[0], written[1]);
        assert_eq!(&written[0].1[..], &Sha256::digest(&written[0].0)[..]);
        // A device that takes nothing: the write's own error, at once.
        if Path::new("/dev/full").exists() {
            let mut out = HashingWriter {
                inner: std::io::BufWriter::with_capacity(
                    1 << 20,
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open("/dev/full")
                        .unwrap(),
                ),
                sha: Sha256::new(),
            };
            let e = write_beside(&mut out, records(40_000)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
        }
    }

    #[test]
    fn an_entry_key_is_32_hex_digits_and_nothing_else() {
        let k = EntryKey([0x0123_4567_89ab_cdef, u64::MAX]);
        let hex = format!("{:016x}{:016x}", k.0[0], k.0[1]);
        assert_eq!(parse_entry_key(&hex), Some(k));
        for bad in [
            "",
            &hex[..31],
            &format!("{hex}0"),
            &hex.replacen('0', "g", 1),
            &format!("+{}", &hex[1..]),
            "0123456789abcdef+123456789abcdef",
        ] {
            assert_eq!(parse_entry_key(bad), None, "{bad:?}");
        }
    }

    fn account_id(key: &str) -> StreamId {
        (Table::Account, Stream::Account, key.to_owned())
    }

    /// Account `key`'s state as a run that proved it from its first event
    /// holds it: all its ids in memory, counting from no generation yet.
    fn proved_from_first(key: &str, ids: &[(u64, u64)]) -> (StreamId, StreamState) {
        let account = AccountFacts {
            entries: EntryIds::from_sorted(ids.to_vec()).unwrap(),
            ..AccountFacts::default()
        };
        let state = StreamState {
            account: Some(Box::new(account)),
            ..StreamState::default()
        };
        (account_id(key), state)
    }

    #[test]
    fn an_account_proved_from_its_first_event_counts_its_ids_from_that_checkpoints_generation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        let lake = "/lake";
        // Night 1 proves a and b from their first event: generation 1.
        let mut p = ProofState::default();
        p.streams.extend([
            proved_from_first("a", &[(10, 1), (20, 2)]),
            proved_from_first("b", &[(10, 3)]),
        ]);
        p.save(&path, lake, 0).unwrap();
        let mut p = ProofState::load(&path, lake).unwrap();
        assert_eq!(p.entry_store.generation, 1);
        for k in ["a", "b"] {
            let a = p.streams[&account_id(k)].account.as_ref().unwrap();
            assert_eq!((a.entries_since, a.entries.len()), (Some(1), 0), "{k}");
        }
        assert_eq!(p.entry_store.first_seq("a", 1, 20).unwrap(), Some(2));
        // Night 2 re-proves a from its first event (its history changed: id
        // 20 is gone, 30 came) and adds id 40 to b, which it continues.
        let (id, st) = proved_from_first("a", &[(10, 1), (30, 2)]);
        p.streams.insert(id, st);
        let b = p.streams.get_mut(&account_id("b")).unwrap();
        b.account.as_mut().unwrap().entries = EntryIds::from_sorted(vec![(40, 4)]).unwrap();
        p.save(&path, lake, 0).unwrap();
        let mut p = ProofState::load(&path, lake).unwrap();
        let since = |k: &str| {
            p.streams[&account_id(k)]
                .account
                .as_ref()
                .unwrap()
                .entries_since
        };
        assert_eq!((since("a"), since("b")), (Some(2), Some(1)));
        let (a, b) = (since("a").unwrap(), since("b").unwrap());
        let store = &mut p.entry_store;
        assert_eq!(
            store.first_seq("a", a, 20).unwrap(),
            None,
            "a's old id no longer counts"
        );
        assert_eq!(store.first_seq("a", a, 30).unwrap(), Some(2));
        assert_eq!(store.first_seq("a", a, 10).unwrap(), Some(1));
        assert_eq!(
            store.first_seq("b", b, 10).unwrap(),
            Some(3),
            "b's first night counts"
        );
        assert_eq!(store.first_seq("b", b, 40).unwrap(), Some(4));
    }

    #[test]
    fn an_entries_since_outside_the_stores_generations_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        let mut p = ProofState::default();
        p.streams.extend([proved_from_first("a", &[(10, 1)])]);
        p.save(&path, "/lake", 0).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let content = &bytes[..bytes.len() - 32];
        // The account is the body's last record, its `entries_since` (1)
        // the last 9 bytes.
        let mut since = vec![1];
        since.extend(1u64.to_le_bytes());
        assert!(content.ends_with(&since));
        let at = content.len() - since.len();
        for bad in [Some(2u64), Some(0), None] {
            let mut sealed = content[..at].to_vec();
            match bad {
                Some(g) => {
                    sealed.push(1);
                    sealed.extend(g.to_le_bytes());
                }
                None => sealed.push(0),
            }
            let digest = Sha256::digest(&sealed);
            sealed.extend(digest);
            std::fs::write(&path, &sealed).unwrap();
            let e = ProofState::load(&path, "/lake").unwrap_err();
            assert!(e.to_string().contains("entries_since"), "{bad:?}: {e}");
        }
        // A damage of the whole file (a byte after the last record) is
        // named before the account's, as when the streams went in after
        // the file was read (rev-s63-red L1).
        let mut sealed = content[..at].to_vec();
        sealed.push(1);
        sealed.extend(2u64.to_le_bytes());
        sealed.push(0);
        let digest = Sha256::digest(&sealed);
        sealed.extend(digest);
        std::fs::write(&path, &sealed).unwrap();
        let e = ProofState::load(&path, "/lake").unwrap_err().to_string();
        assert!(e.contains("bytes after the last record"), "{e}");
        assert!(!e.contains("entries_since"), "{e}");
    }

    /// Streams put together: every one is in the map after `finish` (the
    /// last run too, shorter than PUT_TOGETHER), a check's error is the
    /// put's own, and one there twice is refused by `finish`.
    #[test]
    fn a_sink_puts_every_stream_and_refuses_one_there_twice() {
        let n = 3 * PUT_TOGETHER + 5;
        let ids: Vec<StreamId> = (0..n).map(|i| account_id(&format!("acc-{i}"))).collect();
        let check = |id: &StreamId, _: &mut StreamState, _: Option<u64>| {
            if id.2 == "bad" {
                Err("a bad stream".to_string())
            } else {
                Ok(())
            }
        };
        for twice in [None, Some(PUT_TOGETHER + 1)] {
            let mut map = FxMap::default();
            let mut sink = StreamSink::new(&mut map, &check);
            for (i, id) in ids.iter().enumerate() {
                let st = StreamState {
                    tail: Tail {
                        last_seq: i as u64,
                        ..Tail::default()
                    },
                    account: None,
                };
                sink.put(id.clone(), st, None).unwrap();
                if twice == Some(i) {
                    sink.put(id.clone(), StreamState::default(), None).unwrap();
                }
            }
            let e = sink.put(account_id("bad"), StreamState::default(), None);
            assert_eq!(e.unwrap_err(), "a bad stream");
            let refused = sink.finish();
            match twice {
                None => {
                    assert_eq!(refused, None);
                    assert_eq!(map.len(), n);
                    for (i, id) in ids.iter().enumerate() {
                        assert_eq!(map[id].tail.last_seq, i as u64, "{id:?}");
                    }
                }
                Some(_) => {
                    assert_eq!(refused.as_deref(), Some("a stream's state is there twice"));
                }
            }
        }
    }

    #[test]
    fn streams_are_in_the_binary_part_and_read_back_exactly() {
        use crate::facts::{AccountLife, AccountTerms, Leg, LiveHolds};
        use crate::names::Sym;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        let mut p = ProofState::default();
        let (a, mut st) = proved_from_first("acc.é", &[(10, 1)]);
        let leg = |seq| Leg {
            account: Sym(0),
            amount: i64::MAX,
            currency: Sym(1),
            counterparty: Sym(0),
            seq,
            at_s: u32::MAX,
        };
        let facts = st.account.as_mut().unwrap();
        facts.fold = Some((u64::MAX, i64::MIN, -1));
        facts.terms = Some(AccountTerms {
            currency: Some("EUR".into()),
            overdraft_limit: None,
        });
        facts.limit = Some(5_000);
        facts.life = Some(AccountLife {
            last_seq: 9,
            frozen: Some(true),
        });
        facts.currency = Some(String::new());
        facts.last_balance = Some(-3);
        facts.deposits = i128::MAX;
        facts.withdrawals = i128::MIN;
        facts.live = LiveHolds::from_iter([("t.2".to_owned(), leg(2)), ("t.1".to_owned(), leg(1))]);
        facts.holds_unknown = true;
        st.tail = Tail {
            last_seq: 9,
            last_hashes: crate::stream::LastHashes::Other(vec!["not a hash".into()]),
        };
        p.streams.insert(a.clone(), st.clone());
        let plain = (Table::Subscription, Stream::Account, "misfiled".to_owned());
        let bare = StreamState {
            tail: Tail {
                last_seq: 1,
                last_hashes: crate::stream::LastHashes::One([9; 32]),
            },
            account: None,
        };
        p.streams.insert(plain.clone(), bare.clone());
        p.names = Names::from_list(vec!["acc.é".into(), "EUR".into()]);
        p.save(&path, "/lake", 0).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (header, _) = split_content(&bytes[..bytes.len() - 32]).unwrap();
        let header: serde_json::Value = serde_json::from_slice(header).unwrap();
        assert_eq!(header["version"], CHECKPOINT_VERSION);
        assert!(header.get("streams").is_none(), "{header}");
        let back = ProofState::load(&path, "/lake").unwrap();
        assert_eq!(back.streams.len(), 2);
        assert_eq!(back.streams[&plain], bare);
        let got = &back.streams[&a];
        let want = st.account.as_deref().unwrap();
        let facts = got.account.as_deref().unwrap();
        assert_eq!(got.tail, st.tail);
        // Its ids are in the entry store now, counted from generation 1.
        assert_eq!((facts.entries_since, facts.entries.len()), (Some(1), 0));
        let same = AccountFacts {
            entries: facts.entries.clone(),
            entries_since: facts.entries_since,
            ..want.clone()
        };
        assert_eq!(*facts, same);
    }

    /// The resident size of the mapping that holds `bytes` (Linux's
    /// /proc/self/smaps), in bytes.
    fn resident(bytes: &[u8]) -> usize {
        let at = bytes.as_ptr() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let Some((lo, hi)) = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'))
            else {
                continue;
            };
            let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            else {
                continue;
            };
            if (lo..hi).contains(&at) {
                let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
                let kb: usize = rss.split_whitespace().nth(1).unwrap().parse().unwrap();
                return kb * 1024;
            }
        }
        panic!("no mapping holds {at:#x}");
    }

    #[test]
    fn a_mapped_checkpoint_lets_go_of_what_is_decoded_and_is_digested_from_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        // Not a multiple of the digest's megabyte reads nor of a page.
        let len = 3 * (1 << 20) + 12_345;
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let content: Vec<u8> = (0..len)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect();
        std::fs::write(&path, &content).unwrap();
        let mut bytes = FileBytes::open(&path).unwrap();
        let FileBytes::Mapped { every, .. } = &mut bytes else {
            panic!("a regular file is mapped");
        };
        *every = PAGE * 4;
        assert!(bytes.bytes() == content.as_slice());
        for n in [len, len - 32, 1 << 20, 0] {
            assert_eq!(
                bytes.digest(n).unwrap(),
                <[u8; 32]>::from(Sha256::digest(&content[..n]))
            );
        }
        // Everything was read: the map is resident (the digest's reads are
        // not the map's).
        assert!(resident(bytes.bytes()) >= len / PAGE * PAGE);
        // Less than `every` past the last let-go: nothing goes.
        bytes.decoded(PAGE * 3);
        assert!(resident(bytes.bytes()) >= len / PAGE * PAGE);
        let FileBytes::Mapped { let_go, .. } = &bytes else {
            unreachable!()
        };
        assert_eq!(let_go.load(std::sync::atomic::Ordering::Relaxed), 0);
        // Two megabytes and a bit decoded: their whole pages go.
        bytes.decoded(2 * (1 << 20) + 100);
        assert_eq!(
            let_go.load(std::sync::atomic::Ordering::Relaxed),
            2 * (1 << 20)
        );
        assert!(
            resident(bytes.bytes()) <= len - 2 * (1 << 20) + PAGE,
            "{} bytes resident",
            resident(bytes.bytes())
        );
        // What went is read again from the file, as it was.
        assert!(bytes.bytes() == content.as_slice());
        // A write in place, of the same size, is seen (rev-s63-red M1): a
        // tick later, so a coarse clock tells it too.
        assert!(bytes.unchanged().unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(&[!content[5]], 5).unwrap();
        }
        assert!(!bytes.unchanged().unwrap());
        // Anything but a regular file is read (and refused) as before.
        let err = FileBytes::open(dir.path()).err().unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::IsADirectory, "{err}");
        std::fs::write(&path, b"").unwrap();
        assert!(FileBytes::open(&path).unwrap().bytes().is_empty());
    }

    #[test]
    fn streams_sort_by_their_ids_whatever_their_keys_first_16_bytes() {
        let keys = [
            "",
            "a",
            "a\0",
            "a\0\0",
            "b",
            "acc.0000000000001",
            "acc.0000000000001x",
            "acc.000000000000",
            "acc.0000000000002",
            "acc.00000000000010",
            "é",
            "\u{10ffff}",
        ];
        let mut streams = FxMap::default();
        for key in keys {
            for (table, kind) in [
                (Table::Account, Stream::Account),
                (Table::Account, Stream::Transfer),
                (Table::Subscription, Stream::Account),
            ] {
                streams.insert((table, kind, key.to_owned()), StreamState::default());
            }
        }
        let mut plain: Vec<&StreamId> = streams.keys().collect();
        plain.sort();
        let sorted: Vec<&StreamId> = sorted_streams(&streams)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(sorted, plain);
    }

    /// A checkpoint at `path` framed as `version`, with the header `json`
    /// and the binary `body`, sealed with its SHA-256.
    fn write_sealed(path: &Path, version: u32, json: &str, body: &[u8]) {
        let mut sealed = MAGIC.to_vec();
        sealed.extend(version.to_le_bytes());
        sealed.extend((json.len() as u64).to_le_bytes());
        sealed.extend(json.as_bytes());
        sealed.extend(body);
        let digest = Sha256::digest(&sealed);
        sealed.extend(digest);
        std::fs::write(path, &sealed).unwrap();
    }

    #[test]
    fn a_version_21_header_without_its_streams_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        ProofState::default().save(&path, "/lake", 0).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (header, body) = split_content(&bytes[..bytes.len() - 32]).unwrap();
        // The body's last section: no streams (a count of 0).
        let (body, streams) = body.split_at(body.len() - 8);
        assert_eq!(streams, 0u64.to_le_bytes());
        let header = std::str::from_utf8(header).unwrap();
        assert!(header.starts_with("{\"version\":22,"), "{header}");
        let v21 = |json: &str| {
            write_sealed(&path, 21, json, body);
            ProofState::load(&path, "/lake")
        };
        let bare = header.replacen("{\"version\":22,", "{\"version\":21,", 1);
        let e = v21(&bare).unwrap_err().to_string();
        assert!(e.contains("no streams"), "{e}");
        let with = bare.replacen("{\"version\":21,", "{\"version\":21,\"streams\":[],", 1);
        assert!(v21(&with).is_ok());
    }

    #[test]
    fn a_name_listed_twice_or_a_header_of_another_version_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt");
        let p = ProofState {
            names: Names::from_list(vec!["acc-1".into(), "USD".into()]),
            ..Default::default()
        };
        p.save(&path, "/lake", 0).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (header, body) = split_content(&bytes[..bytes.len() - 32]).unwrap();
        let header = std::str::from_utf8(header).unwrap().to_owned();
        let resealed = |version: u32, json: &str| {
            write_sealed(&path, version, json, body);
            ProofState::load(&path, "/lake")
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(resealed(CHECKPOINT_VERSION, &header), Ok(()));
        let twice = header.replacen("[\"acc-1\",\"USD\"]", "[\"acc-1\",\"acc-1\"]", 1);
        assert_ne!(twice, header);
        let e = resealed(CHECKPOINT_VERSION, &twice).unwrap_err();
        assert!(e.contains("a name is listed twice"), "{e}");
        // Version 21's frame around version 22's header (and its body).
        let e = resealed(21, &header).unwrap_err();
        assert!(
            e.contains("format version 22 in the header of a version-21 file"),
            "{e}"
        );
    }
}
