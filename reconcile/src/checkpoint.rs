//! Checkpoints: where a run's proof stopped, so the next run reads only the
//! lake files it has not proved yet and reaches the same verdicts as a full
//! re-proof from the first event.
//!
//! A checkpoint holds, per stream, its [`Tail`] (last seq, the hashes at it,
//! the balance refold's last row) and, per account, its [`AccountFacts`]
//! (currency, last balance, deposits, withdrawals, live holds); per transfer
//! its [`TransferFacts`] and [`Legs`]; every per-stream finding so far; and
//! the lake files already read (key → size and the store's version tag: keys
//! are content-derived, and a file rewritten in place gets a new tag, so it
//! is read again).
//!
//! How a run resumes (see `run`): files not in the checkpoint are merged in
//! stream order; a stream whose new rows start after its tail continues from
//! the tail; a stream with a new row at or before its tail (a late
//! redelivery, a conflicting version, a compacted file holding old rows) is
//! *reopened*: everything it contributed is withdrawn and it is re-proved
//! from its first event over every file. Cross-stream checks always run on
//! the complete facts. So the verdicts are those of a full run, and the cost
//! is the new rows plus the reopened streams.
//!
//! The file is JSON (versioned by [`CHECKPOINT_VERSION`]), written to a
//! temporary name, fsynced and renamed, so a crash never leaves half a
//! checkpoint. It grows with the number of streams and transfers (951 MB for
//! the 10M-event benchmark lake, docs/BENCHMARKS.md): a compact binary
//! encoding and pruning settled transfers are the next steps.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use ledger_events::Stream;
use ledger_ingest::Table;
use serde::{Deserialize, Serialize};

use crate::facts::{AccountFacts, FxMap, Legs, LegsTable, Names, TransferState, Transfers};
use crate::finding::Finding;
use crate::stream::Tail;

/// Version of the checkpoint format: a reconciler refuses any other.
pub const CHECKPOINT_VERSION: u32 = 2;

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
}

// ---- the file format -------------------------------------------------------

// One shape for both directions: written from borrowed state (a checkpoint
// is as large as the proof's state, so it is not copied to be written), read
// back owned.

#[derive(Serialize, Deserialize)]
struct FileV2<'a> {
    version: u32,
    /// The lake the checkpoint belongs to (as given on the command line).
    lake: Cow<'a, str>,
    layout: Cow<'a, str>,
    /// The run that wrote it: its `now_ms`.
    written_at_ms: i64,
    files: Cow<'a, BTreeMap<String, String>>,
    /// The interned names, in sym order.
    names: Vec<Cow<'a, str>>,
    streams: Vec<StreamRec<'a>>,
    /// Transfer streams (not in `streams`), in id order.
    transfers: Vec<(Cow<'a, str>, Cow<'a, TransferState>)>,
    /// Per transfer id, in the order first seen.
    legs: Vec<(Cow<'a, str>, Cow<'a, Legs>)>,
    findings: Vec<FindingRec<'a>>,
}

#[derive(Serialize, Deserialize)]
struct StreamRec<'a> {
    table: Cow<'a, str>,
    stream: Stream,
    key: Cow<'a, str>,
    tail: Cow<'a, Tail>,
    account: Option<Cow<'a, AccountFacts>>,
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

/// Why a checkpoint cannot be used. Exit code 2: a run must not silently
/// fall back to a full proof (or worse, resume from the wrong state).
#[derive(Debug)]
pub struct CheckpointError(pub String);

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl ProofState {
    /// Reads a checkpoint written for `lake`.
    pub fn load(path: &Path, lake: &str) -> Result<ProofState, CheckpointError> {
        let err = |why: String| {
            CheckpointError(format!(
                "checkpoint {}: {why}\nHelp: run with --full to re-prove the lake from its first event \
                 (a new checkpoint is written)",
                path.display()
            ))
        };
        let text = std::fs::read(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let f: FileV2 =
            serde_json::from_slice(&text).map_err(|e| err(format!("not a checkpoint: {e}")))?;
        if f.version != CHECKPOINT_VERSION {
            return Err(err(format!(
                "format version {} (this reconciler reads {CHECKPOINT_VERSION})",
                f.version
            )));
        }
        if f.layout != ledger_ingest::LAKE_LAYOUT_VERSION {
            return Err(err(format!("written for lake layout {:?}", f.layout)));
        }
        if f.lake != lake {
            return Err(err(format!(
                "written for the lake {:?}, not {lake:?}",
                f.lake
            )));
        }
        let mut p = ProofState {
            files: f.files.into_owned(),
            names: Names::from_list(f.names.into_iter().map(|n| n.into_owned().into()).collect()),
            transfers: Transfers::from_sorted(owned(f.transfers)),
            legs: LegsTable::from_rows(owned(f.legs)),
            ..Default::default()
        };
        for s in f.streams {
            let table = table_of(&s.table).map_err(err)?;
            p.streams.insert(
                (table, s.stream, s.key.into_owned()),
                StreamState {
                    tail: s.tail.into_owned(),
                    account: s.account.map(|a| Box::new(a.into_owned())),
                },
            );
        }
        for r in f.findings {
            let table = table_of(&r.table).map_err(err)?;
            p.findings.push(StreamFinding {
                check: intern(r.check.into_owned()),
                stream: (table, r.stream, r.stream_key.into_owned()),
                finding: Finding {
                    code: intern(r.code.into_owned()),
                    key: r.key.into_owned(),
                    seq: r.seq,
                    event_id: r.event_id.map(Cow::into_owned),
                    detail: r.detail.into_owned(),
                },
            });
        }
        Ok(p)
    }

    /// Writes the checkpoint atomically (temporary file, fsync, rename).
    pub fn save(&self, path: &Path, lake: &str, now_ms: i64) -> Result<(), CheckpointError> {
        let err = |why: String| {
            CheckpointError(format!(
                "cannot write checkpoint {}: {why}\nHelp: check that the directory exists and is writable",
                path.display()
            ))
        };
        let mut streams: Vec<_> = self.streams.iter().collect();
        streams.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let f = FileV2 {
            version: CHECKPOINT_VERSION,
            lake: Cow::Borrowed(lake),
            layout: Cow::Borrowed(ledger_ingest::LAKE_LAYOUT_VERSION),
            written_at_ms: now_ms,
            files: Cow::Borrowed(&self.files),
            names: self
                .names
                .list()
                .iter()
                .map(|n| Cow::Borrowed(&**n))
                .collect(),
            streams: streams
                .into_iter()
                .map(|((table, stream, key), s)| StreamRec {
                    table: Cow::Borrowed(table.as_str()),
                    stream: *stream,
                    key: Cow::Borrowed(key),
                    tail: Cow::Borrowed(&s.tail),
                    account: s.account.as_deref().map(Cow::Borrowed),
                })
                .collect(),
            transfers: borrowed(self.transfers.iter()),
            legs: borrowed(self.legs.iter().filter(|(_, l)| **l != Legs::default())),
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
                })
                .collect(),
        };
        let tmp = path.with_extension("tmp");
        let file = std::fs::File::create(&tmp).map_err(|e| err(e.to_string()))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        serde_json::to_writer(&mut w, &f).map_err(|e| err(e.to_string()))?;
        let file = w.into_inner().map_err(|e| err(e.to_string()))?;
        file.sync_all().map_err(|e| err(e.to_string()))?;
        std::fs::rename(&tmp, path).map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

/// Borrowed (id, value) pairs for the file.
fn borrowed<'a, T: Clone + 'a>(
    it: impl Iterator<Item = (&'a str, &'a T)>,
) -> Vec<(Cow<'a, str>, Cow<'a, T>)> {
    it.map(|(k, t)| (Cow::Borrowed(k), Cow::Borrowed(t)))
        .collect()
}

fn owned<T: Clone>(v: Vec<(Cow<'_, str>, Cow<'_, T>)>) -> Vec<(Box<str>, T)> {
    v.into_iter()
        .map(|(k, t)| (k.into(), t.into_owned()))
        .collect()
}
