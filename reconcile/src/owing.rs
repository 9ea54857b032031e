//! Which proved tails a run judges, and the reads of the lake that decide
//! them ([`crate::retained`] decides each one).
//!
//! A run judges the tails its checkpoint owes (found not held by an earlier
//! run); the checkpoint's tails of the streams it re-proved from their
//! first event (a stream reopened by a late or altered row: its proof
//! could end short of what was proved, if rows left the lake), and the
//! versions of the conflicts it withdrew with them
//! ([`retained::evidence`]); and, when it set its checkpoint's proof aside
//! to prove the lake from its first event (proved files lost, a checkpoint
//! of older rules, most account streams to reopen, rows taken for copies
//! that were not, or `--full` with a checkpoint), every tail that proof
//! kept: its streams', its open transfers', and its archived transfers'
//! (walked in id order, one block of each segment at a time), and the
//! versions of every conflict it found; when that was for lost files, the
//! seqs in its gaps that a lost file held as the first row of a stretch
//! ([`lost_starts`]). Each seq of a stream is judged once: a tail owed
//! stands over the checkpoint's tail at the same seq, and either over a
//! lost file's start (no hash).
//! Most are decided by this run's tail of the stream; a stream that now
//! ends after its owed seq is decided by the hashes of its rows at that
//! seq, read from the lake in one scan of four columns per table (only the
//! streams concerned, by their keys; [`hashes_at`] also looks up, for
//! `run::found_again`, the proved rows that old rows delivered again may
//! copy). Two seqs of one stream that the lake
//! misses from the same seq on (the stream now ends before both) are one
//! finding, the one of the later seq (whose detail spans the other's).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::record_batch::RecordBatch;
use ledger_events::Stream;
use ledger_ingest::Table;

use crate::checkpoint::{ProofState, StreamFinding, StreamId, StreamState};
use crate::checks::completeness;
use crate::facts::Transfers;
use crate::keyed::{Keyed, Wanted};
use crate::lake::{Error, Lake, LakeFileInfo};
use crate::names::FxMap;
use crate::presence::Presence;
use crate::presence_files::Stored;
use crate::retained::{self, Held, Owed};
use crate::rows::strings;
use crate::stream::{LastHashes, Tail};
use crate::unproved::Marks;

/// At most this many keys go into a scan's filter; with more, every row is
/// read and the keys are matched here. As many as a footer prunes by: a
/// longer list would filter without pruning (tests size themselves by it).
const FILTER_KEYS_MAX: usize = crate::lake::PRUNING_KEYS_MAX;

/// What the lake owes this run's proof: the tails to judge.
#[derive(Clone, Copy)]
pub struct Owing<'a> {
    /// Tails, and conflicts' versions, earlier runs found not held (the
    /// checkpoint's `owed`).
    pub owed: &'a [Owed],
    /// The checkpoint's proof, set aside because proved files were lost.
    pub set_aside: Option<&'a ProofState>,
    /// The marks of the checkpoint's `hash_mismatch` findings: a hash such
    /// a row records is owed, in the tails and conflicts' versions judged
    /// from the checkpoint, as the mark says ([`crate::unproved`]).
    pub marks: &'a Marks,
    /// The run is `--full`, the remedy a damaged checkpoint's help names:
    /// a damaged block of the set-aside proof's archive is warned of and
    /// its transfers left unjudged, not an error (an error here would
    /// leave no way out but deleting the checkpoint, and every tail owed
    /// with it).
    pub full: bool,
}

/// The streams noted in each lake file (`crate::presence`), which the
/// look-up of hashes at proved tails checks the files it reads by key
/// against (`crate::keyed`).
#[derive(Clone, Copy)]
pub enum Noted<'a> {
    /// This run's: it read every file whole (it proved the lake from its
    /// first event).
    Run(&'a Presence),
    /// The checkpoint's (its files of streams), for the files it proved
    /// (key → stamp) as they are now: a resumed night, whose new files have
    /// none and are read whole, as its re-proof reads them.
    Proved(&'a Stored, &'a BTreeMap<String, String>),
}

/// The proof's streams, to look a stream's tail up in.
pub struct Proved<'a> {
    pub streams: &'a FxMap<StreamId, StreamState>,
    pub transfers: &'a Transfers,
}

/// The tails this run's proof adds to those `Owing` names.
pub struct ThisRun {
    /// The checkpoint's tails of the streams it re-proved from their first
    /// event, with the versions of the conflicts withdrawn with them.
    pub reopened: Vec<Owed>,
    /// The first rows of lost files' stretches in its gaps ([`lost_starts`]).
    pub lost_starts: Vec<Owed>,
    /// Its proof's rows that fail their hash (its `hash_mismatch`
    /// findings): a tail owed as a damaged row's content is held by that
    /// row ([`Marks::owed`]).
    pub damaged: Marks,
    /// What its proof owes beside its tails: its conflicts' versions and
    /// its damaged rows whose content was proved ([`retained::evidence`]
    /// of its findings). A tail still owed is owed with them where they are
    /// at its seq (rev-s61-red6 O1).
    pub evidence: Vec<Owed>,
}

/// Whether `id` is a transfer stream in its own table (its state is with
/// the transfers').
fn is_transfer(id: &StreamId) -> bool {
    id.0 == Table::Transfer && id.1 == ledger_events::Stream::Transfer
}

impl Proved<'_> {
    fn tail(&self, id: &StreamId) -> Option<&Tail> {
        if is_transfer(id) {
            self.transfers.state(&id.2).map(|s| &s.tail)
        } else {
            self.streams.get(id).map(|s| &s.tail)
        }
    }
}

/// Judges every tail `owing` names, and those `this_run` adds (the
/// checkpoint's tails of the streams it reopened, re-proved from their
/// first event: their rows were read again, with the versions of the
/// conflicts withdrawn with them, [`retained::evidence`]; the first rows of
/// lost files' stretches in its gaps), against the proof `now`, reading the lake's
/// `files` (every table's, as the run listed them) where the proof cannot
/// decide (a file read by key checked against the streams `noted` in it):
/// the completeness findings of the tails not held, in stream order, those
/// tails (still owed), and the archive blocks a `--full` run could not read
/// (their transfers not judged).
pub async fn judge(
    lake: &Lake,
    files: &[LakeFileInfo],
    noted: Noted<'_>,
    owing: &Owing<'_>,
    this_run: ThisRun,
    now: &Proved<'_>,
    opts: &crate::run::Options,
) -> Result<(Vec<StreamFinding>, Vec<Owed>, Vec<String>), Error> {
    // By stream and owed seq: a lost file's start first, so that any tail
    // with hashes at the same seq stands over it.
    let ThisRun {
        reopened,
        lost_starts,
        damaged,
        evidence,
    } = this_run;
    let contents = |id: &StreamId, seq| damaged.contents((id.0, id.1, &id.2), seq);
    let mut tails: BTreeMap<(StreamId, u64), Tail> = lost_starts
        .into_iter()
        .map(|(id, tail)| ((id, tail.last_seq), tail))
        .collect();
    // What the checkpoint proved, as owed ([`Marks::owed`]).
    // Two at one seq (a tail, a conflict's versions, a damaged row's
    // content) owe what both do.
    each_proved(owing, &reopened, |at, tail| {
        let tail = owing.marks.owed(at, tail).into_owned();
        let seq = tail.last_seq;
        match tails.entry(((at.0, at.1, at.2.to_owned()), seq)) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(tail);
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                owe_also(o.get_mut(), tail.last_hashes.into());
            }
        }
    });
    // Owed as decided (as owed already).
    for (id, tail) in owing.owed.iter().cloned() {
        tails.insert((id, tail.last_seq), tail);
    }
    let mut decided: Vec<(StreamId, Tail, Held)> = Vec::new();
    let mut left_out = Vec::new();
    let mut look: Vec<(StreamId, Tail)> = Vec::new();
    let mut decide = |id: StreamId, tail: Tail, at: Option<&[String]>| {
        if tail.last_seq == 0 {
            return; // nothing of it was proved
        }
        match retained::judge(&tail, now.tail(&id), at, &contents(&id, tail.last_seq)) {
            Held::Yes => {}
            Held::Look => look.push((id, tail)),
            held => decided.push((id, tail, held)),
        }
    };
    if let Some(p) = owing.set_aside {
        // Millions of settled transfers: nothing allocated for those held.
        // A settled transfer's tail is judged here unless `tails` holds it
        // already (at the same seq); a tail of it at another seq there (a
        // conflict's versions, owed) does not stand for its own
        // (rev-s56 deep incremental run: a settled transfer with a
        // conflict at seq 1 and its tail at seq 2, both gone, was judged at
        // seq 1 only, and its missing tail went unreported).
        let mut owed: HashMap<&str, Vec<u64>> = HashMap::new();
        for (id, seq) in tails.keys().filter(|(id, _)| is_transfer(id)) {
            owed.entry(id.2.as_str()).or_default().push(*seq);
        }
        let open = |id: &str| p.is_open(id);
        let judge = |id: &str, st: &crate::facts::TransferState| {
            if owed
                .get(id)
                .is_some_and(|seqs| seqs.contains(&st.tail.last_seq))
            {
                return;
            }
            let now = now.transfers.state(id).map(|s| &s.tail);
            let at = (Table::Transfer, ledger_events::Stream::Transfer, id);
            let tail = owing.marks.owed(at, &st.tail);
            let contents = damaged.contents(at, tail.last_seq);
            if retained::judge(&tail, now, None, &contents) != Held::Yes {
                decide(transfer(id), tail.into_owned(), None);
            }
        };
        if owing.full {
            for e in p.archive.each_readable(&open, judge) {
                crate::checkpoint::warn_archive_left_out(&e);
                left_out.push(e);
            }
        } else {
            p.archive
                .each(&open, judge)
                .map_err(crate::checkpoint::archive_unreadable)?;
        }
    }
    for ((id, _), tail) in tails {
        decide(id, tail, None);
    }
    let reading = "the hashes at the proved tails it judges";
    let found = hashes_at(
        lake,
        files,
        noted,
        &look,
        opts.wanted_starts_max,
        reading,
        "hash",
    )
    .await?;
    for (id, tail) in &look {
        let at = found
            .get(&(id.0, id.1.as_str(), id.2.as_str(), tail.last_seq))
            .map_or(&[][..], Vec::as_slice);
        let held = retained::judge(tail, now.tail(id), Some(at), &contents(id, tail.last_seq));
        if held != Held::Yes {
            decided.push((id.clone(), tail.clone(), held));
        }
    }
    // A stream's later seqs first, so that of two found missing from the
    // same seq on, the later one's finding is kept (both stay owed).
    decided.sort_by(|a, b| (&a.0, b.1.last_seq).cmp(&(&b.0, a.1.last_seq)));
    let mut findings: Vec<StreamFinding> = decided
        .iter()
        .filter_map(|(id, tail, held)| {
            retained::finding(id, tail, held).map(|finding| StreamFinding {
                check: completeness::NAME,
                stream: id.clone(),
                finding,
            })
        })
        .collect();
    findings.dedup_by(|a, b| {
        (&a.stream, a.finding.code, a.finding.seq) == (&b.stream, b.finding.code, b.finding.seq)
    });
    // Still owed, with the evidence this run proved at the same seq (a
    // conflict's versions, a damaged row's content): a tail owed since an
    // earlier night stands over the checkpoint's at its seq every night
    // after, so versions proved there since would otherwise be owed by
    // nothing once the conflict goes (rev-s61-red6 O1). Not with the
    // stream's tail there: a row that replaced the one owed is what the
    // finding names, and the repair (the owed row put back, that one
    // moved out) must hold.
    let mut proved_now: HashMap<(&StreamId, u64), Vec<String>> = HashMap::new();
    for (id, tail) in &evidence {
        proved_now
            .entry((id, tail.last_seq))
            .or_default()
            .extend(Vec::<String>::from(tail.last_hashes.clone()));
    }
    let owed = decided
        .into_iter()
        .map(|(id, mut tail, _)| {
            // (A lost file's start, no hash: any row holds it.)
            if tail.last_hashes != LastHashes::None {
                if let Some(more) = proved_now.get(&(&id, tail.last_seq)) {
                    owe_also(&mut tail, more.clone());
                }
            }
            (id, tail)
        })
        .collect();
    Ok((findings, owed, left_out))
}

/// `tail` owing `more` hashes at its seq too, each once.
fn owe_also(tail: &mut Tail, more: Vec<String>) {
    let mut all: Vec<String> = tail.last_hashes.clone().into();
    all.extend(more);
    all.sort_unstable();
    all.dedup();
    tail.last_hashes = LastHashes::from(all);
}

/// Every tail the checkpoint proved that a run judges, but those it owed
/// and those of settled transfers (in its archive): when its proof is set
/// aside, every stream's, open transfer's and conflict's versions; the
/// streams this run `reopened`, and their conflicts' versions.
fn each_proved(
    owing: &Owing<'_>,
    reopened: &[Owed],
    mut f: impl FnMut((Table, Stream, &str), &Tail),
) {
    // The evidence of findings, and the reopened streams' tails with
    // theirs, each seq's at once: thousands may be at one seq (damaged
    // copies of one row, each owing its content), and each call owes what
    // the marks there do (64,000 such copies took minutes one by one, and
    // the memory of the host).
    let mut at_seq: BTreeMap<(&StreamId, u64), Option<BTreeSet<String>>> = BTreeMap::new();
    let mut evidence = Vec::new();
    if let Some(p) = owing.set_aside {
        for (id, st) in &p.streams {
            f(key(id), &st.tail);
        }
        for (id, st) in p.transfers.iter() {
            f((Table::Transfer, Stream::Transfer, id), &st.tail);
        }
        evidence = p.findings.iter().filter_map(retained::evidence).collect();
    }
    for (id, tail) in evidence.iter().chain(reopened) {
        let hashes = at_seq.entry((id, tail.last_seq)).or_insert(None);
        // A tail of no hash (a lost file's start) alone stays one.
        if tail.last_hashes != LastHashes::None || hashes.is_some() {
            hashes
                .get_or_insert_with(BTreeSet::new)
                .extend(Vec::<String>::from(tail.last_hashes.clone()));
        }
    }
    for ((id, seq), hashes) in at_seq {
        let last_hashes = hashes.map_or(LastHashes::None, |h| {
            LastHashes::of(h.iter().map(String::as_str))
        });
        f(
            key(id),
            &Tail {
                last_seq: seq,
                last_hashes,
            },
        );
    }
}

/// What the checkpoint proved of the streams where this run's
/// `hash_mismatch` findings are not marked yet ([`proved_at`]).
#[derive(Debug, Default)]
pub struct ProvedAt {
    /// The hashes at each (stream, seq) of them, as proved and as owed.
    hashes: HashMap<(StreamId, u64), HashSet<String>>,
    /// The last seq proved of each such stream.
    reach: HashMap<StreamId, u64>,
    /// Settled transfers whose record `--full` could not read: not known,
    /// so counted as proved (their tails are not judged either).
    unknown: HashSet<StreamId>,
}

impl crate::unproved::Proved for ProvedAt {
    fn hash_at(&self, stream: &StreamId, seq: u64, hash: &str) -> bool {
        self.unknown.contains(stream)
            || self
                .hashes
                .get(&(stream.clone(), seq))
                .is_some_and(|hs| hs.contains(hash))
    }

    fn reaches(&self, stream: &StreamId, seq: u64) -> bool {
        self.reach.get(stream).is_some_and(|&last| last >= seq)
    }
}

/// What the checkpoint proved where this run's `hash_mismatch` findings
/// not marked yet are (`at`: their streams and seqs): the tails a run
/// judges ([`each_proved`]), those it owed, and, set aside, the archived
/// ones of settled transfers; each with its hashes as proved and as owed
/// (a damaged row's content), and how far it proved each stream. Whether a
/// damaged row's hash was proved ([`crate::unproved::mark`]). An archive
/// block `--full` cannot read leaves its transfers unknown, said.
pub fn proved_at(
    owing: &Owing<'_>,
    reopened: &[Owed],
    at: &[(&StreamId, u64)],
) -> Result<ProvedAt, Error> {
    let mut proved = ProvedAt::default();
    if at.is_empty() {
        return Ok(proved);
    }
    let wanted: HashSet<((Table, Stream, &str), u64)> =
        at.iter().map(|&(id, seq)| (key(id), seq)).collect();
    let streams: HashSet<(Table, Stream, &str)> = at.iter().map(|&(id, _)| key(id)).collect();
    let mut add = |at: (Table, Stream, &str), tail: &Tail| {
        if !streams.contains(&at) {
            return;
        }
        let id = (at.0, at.1, at.2.to_owned());
        let last = proved.reach.entry(id.clone()).or_default();
        *last = (*last).max(tail.last_seq);
        if wanted.contains(&(at, tail.last_seq)) {
            let owed = owing.marks.owed(at, tail);
            let hashes: Vec<String> = tail.last_hashes.clone().into();
            let owed: Vec<String> = owed.last_hashes.clone().into();
            proved
                .hashes
                .entry((id, tail.last_seq))
                .or_default()
                .extend(hashes.into_iter().chain(owed));
        }
    };
    each_proved(owing, reopened, &mut add);
    for (id, tail) in owing.owed {
        add(key(id), tail);
    }
    let Some(p) = owing.set_aside else {
        return Ok(proved);
    };
    let mut archived: Vec<&str> = streams
        .iter()
        .filter(|&&(t, s, id)| t == Table::Transfer && s == Stream::Transfer && !p.is_open(id))
        .map(|at| at.2)
        .collect();
    archived.sort_unstable();
    let mut records = Vec::new();
    match p.archive.find(archived.iter().copied()) {
        Ok(found) => records = found,
        // One by one, each one unread unknown (the walk of the archive in
        // `judge` warns of the block).
        Err(_) if owing.full => {
            for id in archived {
                match p.archive.find([id]) {
                    Ok(found) => records.extend(found),
                    Err(_) => {
                        proved.unknown.insert(transfer(id));
                    }
                }
            }
        }
        Err(e) => return Err(crate::checkpoint::archive_unreadable(e)),
    }
    for (id, state, _) in records {
        add((Table::Transfer, Stream::Transfer, &id), &state.tail);
    }
    Ok(proved)
}

/// The seqs in this run's gaps (`findings`, the proof's) that the lake
/// files custody found `lost` held as the first row of a stretch of their
/// stream, by the notes of the checkpoint's proof the run set aside for
/// them (`set_aside`): rows an earlier run saw in the lake, owed with no
/// hash ([`retained::lost_starts`]). A gap is matched only against the lost
/// files of its stream's own table (a transfer's rows misfiled under
/// `events/account/` are not its transfer stream's), and only up to the
/// last seq the set-aside proof proved of the stream and outside that
/// proof's own gaps: no stretch it noted starts past that, or in a seq it
/// never held (rev-s57-lost 1, rev-s57-diff 1: a gap up to a forged row at
/// a seq near 2⁶³ matched notes of other streams at random seqs). A seq where
/// that proof found a row that is not the ledger's (it fails its hash, or
/// is not an event) is left out: what was lost there was not the ledger's
/// row, which may still be in delivery. Read only when the proof has a
/// gap; then the lost files' notes (every note of the lake when it was
/// copied whole: every file another version, every one lost) are matched
/// against the gaps' seqs as they were read, with no set of them made
/// beside (rev-s57-lost 8; [`retained::lost_starts`]).
pub fn lost_starts(
    findings: &[StreamFinding],
    lost: &[crate::custody::Lost],
    set_aside: Option<&ProofState>,
) -> Result<Vec<Owed>, Error> {
    let gaps: Vec<(&StreamId, u64, u64)> = findings
        .iter()
        .filter(|f| f.check == completeness::NAME)
        .filter_map(|f| completeness::gap_span(&f.finding).map(|(a, b)| (&f.stream, a, b)))
        .collect();
    let (Some(p), false, false) = (set_aside, lost.is_empty(), gaps.is_empty()) else {
        return Ok(Vec::new());
    };
    // The set-aside proof's last seq of each stream with a gap: its open
    // state's, or a settled transfer's archived record's.
    let mut proved: HashMap<StreamId, u64> = HashMap::new();
    let mut archived: Vec<&str> = Vec::new();
    let open = Proved {
        streams: &p.streams,
        transfers: &p.transfers,
    };
    for &(id, _, _) in &gaps {
        match open.tail(id) {
            Some(t) => {
                proved.insert(id.clone(), t.last_seq);
            }
            None if is_transfer(id) => archived.push(&id.2),
            None => {} // not proved: nothing of it was noted
        }
    }
    archived.sort_unstable();
    archived.dedup();
    let records = p
        .archive
        .find(archived)
        .map_err(crate::checkpoint::archive_unreadable)?;
    for (id, state, _) in records {
        proved.insert(transfer(&id), state.tail.last_seq);
    }
    // The gaps the set-aside proof had: seqs it never held, so no note of
    // its files names one (a stream proved up to a far row, forged or a
    // writer's bug, holds a gap up to it; rev-s57-diff 1).
    // And the seqs where it found a row that is not the ledger's.
    let mut unheld: HashMap<&StreamId, Vec<(u64, u64)>> = HashMap::new();
    let mut not_the_ledgers: HashSet<(&StreamId, u64)> = HashSet::new();
    for f in p.findings.iter().filter(|f| f.check == completeness::NAME) {
        if let Some(span) = completeness::gap_span(&f.finding) {
            unheld.entry(&f.stream).or_default().push(span);
        } else if completeness::ROW_NOT_THE_LEDGERS.contains(&f.finding.code) {
            not_the_ledgers.extend(f.finding.seq.map(|s| (&f.stream, s)));
        }
    }
    let keys: std::collections::BTreeSet<&str> = lost.iter().map(|l| l.key()).collect();
    let sets = p
        .stored
        .of(&keys)
        .map_err(|e| Error::Lake(format!("checkpoint: {e}\n{}", crate::checkpoint::FULL_HELP)))?;
    // The gaps' seqs the set-aside proof held, of streams it proved.
    let mut spans: Vec<(&StreamId, u64, u64)> = Vec::new();
    for (id, first, last) in gaps {
        let Some(&proved) = proved.get(id) else {
            continue;
        };
        let unheld = unheld.get(id).map_or(&[][..], Vec::as_slice);
        spans.extend(
            held_within(first, last.min(proved), unheld)
                .into_iter()
                .map(|(a, b)| (id, a, b)),
        );
    }
    // Each lost file's notes matched against its own table's spans. Notes
    // of streams alone (an old checkpoint's) name no seq.
    let files: Vec<(Table, &[crate::presence::Fingerprint])> = keys
        .iter()
        .filter(|k| !sets.plain.contains(**k))
        .filter_map(|k| {
            ledger_ingest::parse_object_key(k).map(|p| (p.partition.table, sets.presence.get(k)))
        })
        .collect();
    let owed = retained::lost_starts(&spans, &files, retained::LOST_SEQS_MAX)
        .into_iter()
        .filter(|(id, t)| !not_the_ledgers.contains(&(id, t.last_seq)))
        .collect();
    Ok(owed)
}

/// The stretches of seqs `first..=last` outside every span of `unheld`
/// (inclusive, in any order): empty when `first > last`.
fn held_within(first: u64, last: u64, unheld: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut spans = unheld.to_vec();
    spans.sort_unstable();
    let mut out = Vec::new();
    let mut from = first;
    for (a, b) in spans {
        if from > last {
            break;
        }
        if b < from || a > last {
            continue;
        }
        if a > from {
            out.push((from, a - 1));
        }
        from = from.max(b.saturating_add(1));
        if b == u64::MAX {
            return out;
        }
    }
    if from <= last {
        out.push((from, last));
    }
    out
}

/// The stream `id` as a key of it, borrowed.
fn key(id: &StreamId) -> (Table, Stream, &str) {
    (id.0, id.1, id.2.as_str())
}

fn transfer(id: &str) -> StreamId {
    (
        Table::Transfer,
        ledger_events::Stream::Transfer,
        id.to_owned(),
    )
}

/// A wanted key, and its owed seqs with their streams' kinds, by seq.
type OwedAt<'w, 's> = (&'w str, &'s [(u64, &'static str)]);

/// The hashes in `column` (`hash`, or `prev_hash`: the hash a row names as
/// its predecessor's) of the rows of `files` at each `want`ed stream's owed
/// seq, by (table, stream, key, seq): one scan of `stream`, `stream_key`,
/// `seq` and `column` per table with a stream to look at. A scan by key checks each
/// file it filters against the streams `noted` in it ([`Lake::scan_keyed`]):
/// a row at an owed seq that the footer hid would be a false
/// `proved_rows_missing`. `reading` says what for in the error naming such
/// a file (the look-up of old rows delivered again reads this way too,
/// `run::found_again`). A file whose notes show that it holds none of the
/// wanted rows is not read at all ([`Keyed::holds_none`]); past
/// [`FILTER_KEYS_MAX`] keys of a table, the others are read whole, the keys
/// matched here.
pub(crate) async fn hashes_at<'w>(
    lake: &Lake,
    files: &[LakeFileInfo],
    noted: Noted<'_>,
    want: &'w [(StreamId, Tail)],
    starts_max: usize,
    reading: &'static str,
    column: &'static str,
) -> Result<HashMap<(Table, &'static str, &'w str, u64), Vec<String>>, Error> {
    let mut found: HashMap<(Table, &'static str, &'w str, u64), Vec<String>> = HashMap::new();
    for &table in Table::ALL.iter() {
        // By key: each owed seq of that key, with its stream's kind.
        let mut seqs: FxMap<&'w str, Vec<(u64, &'static str)>> = FxMap::default();
        for (id, tail) in want.iter().filter(|(id, _)| id.0 == table) {
            seqs.entry(id.2.as_str())
                .or_default()
                .push((tail.last_seq, id.1.as_str()));
        }
        if seqs.is_empty() {
            continue;
        }
        // Sorted, to look a row up by halves, by its seq (a redelivered day
        // wants many seqs of each key).
        for at in seqs.values_mut() {
            at.sort_unstable();
        }
        let mut keys: Vec<String> = seqs.keys().map(|k| (*k).to_owned()).collect();
        keys.sort_unstable();
        let files: Vec<LakeFileInfo> = files.iter().filter(|f| f.table == table).cloned().collect();
        let columns = ["stream", "stream_key", "seq", column];
        let visit = |b: &RecordBatch| {
            let (Some(stream), Some(key), Some(seq), Some(hash)) = (
                strings(b, "stream"),
                strings(b, "stream_key"),
                crate::rows::col::<Int64Array>(b, "seq").ok().flatten(),
                strings(b, column),
            ) else {
                return; // not the lake layout: the proof has said so
            };
            // A stream's rows come together: its key looked up once.
            let mut last: Option<(&str, Option<OwedAt<'w, '_>>)> = None;
            for i in 0..b.num_rows() {
                if [
                    stream.is_null(i),
                    key.is_null(i),
                    seq.is_null(i),
                    hash.is_null(i),
                ]
                .contains(&true)
                {
                    continue;
                }
                let row_key = key.value(i);
                let at = match last {
                    Some((k, at)) if k == row_key => at,
                    _ => {
                        let at = seqs.get_key_value(row_key).map(|(&k, v)| (k, v.as_slice()));
                        last = Some((row_key, at));
                        at
                    }
                };
                let Some((k, wanted)) = at else {
                    continue;
                };
                let Ok(row_seq) = u64::try_from(seq.value(i)) else {
                    continue;
                };
                let from = wanted.partition_point(|&(owed, _)| owed < row_seq);
                for &(owed, s) in wanted[from..]
                    .iter()
                    .take_while(|&&(owed, _)| owed == row_seq)
                {
                    if s != stream.value(i) {
                        continue;
                    }
                    let at = found.entry((table, s, k, owed)).or_default();
                    let h = hash.value(i);
                    if !at.iter().any(|x| x == h) {
                        at.push(h.to_owned());
                    }
                }
            }
        };
        // The row at an owed seq is in a stretch that starts at or before it.
        let streams = want
            .iter()
            .filter(|(id, _)| id.0 == table)
            .map(|(id, tail)| (id.1, id.2.as_str(), tail.last_seq));
        // The notes are read only for a check that uses them.
        let (loaded, none);
        let keyed = match Wanted::capped(starts_max, streams) {
            None => Keyed::whole(&keys, reading),
            Some(wanted) => {
                let (presence, plain) = match noted {
                    Noted::Run(p) => {
                        none = HashSet::new();
                        (p, &none)
                    }
                    Noted::Proved(stored, proved) => {
                        loaded = crate::keyed::proved_sets(stored, proved, &files)?;
                        (&loaded.presence, &loaded.plain)
                    }
                };
                let files: Vec<&str> = files.iter().map(|f| f.key.as_str()).collect();
                Keyed::checked(&keys, reading, wanted, &files, presence, plain)
            }
        };
        // A file whose notes hold no wanted stretch is not read (a transfer's
        // rows lie in a day or two of a table of many).
        let files: Vec<LakeFileInfo> = files
            .into_iter()
            .filter(|f| !keyed.holds_none(&f.key))
            .collect();
        if keys.len() > FILTER_KEYS_MAX {
            // Too many keys to filter by: the files read whole, the keys
            // matched here.
            lake.scan_columns(&files, &columns, None, visit).await?;
        } else {
            lake.scan_keyed(&files, &columns, &keyed, visit).await?;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::LastHashes;

    /// A stream the night re-proved from its first event (a new row at or
    /// before its proved tail) whose proof now ends short of that tail: the
    /// tail it had proved is judged, without any lost file or set-aside
    /// proof to find it (rev-s58-mutants S12: only custody's full proof
    /// reached it before).
    #[test]
    fn a_reopened_streams_proved_tail_is_judged_on_its_own() {
        let id: StreamId = (
            Table::Account,
            ledger_events::Stream::Account,
            "acme.a".to_owned(),
        );
        let tail = |seq: u64, hash: char| {
            let hash: String = std::iter::repeat_n(hash, 64).collect();
            Tail {
                last_seq: seq,
                last_hashes: LastHashes::of([hash.as_str()]),
            }
        };
        let mut streams = FxMap::default();
        streams.insert(
            id.clone(),
            StreamState {
                tail: tail(8, 'b'),
                account: None,
            },
        );
        let transfers = crate::facts::Transfers::default();
        let now = Proved {
            streams: &streams,
            transfers: &transfers,
        };
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(dir.path().to_str().unwrap()).unwrap();
        let presence = Presence::default();
        let opts = crate::run::Options {
            now_ms: 0,
            progress: false,
            handoff: false,
            split_first: false,
            by_date: false,
            settle_ms: 0,
            wanted_starts_max: 0,
        };
        let marks = Marks::default();
        let owing = Owing {
            owed: &[],
            set_aside: None,
            marks: &marks,
            full: false,
        };
        let judged = |reopened: Vec<Owed>, now: &Proved<'_>| {
            let this_run = ThisRun {
                reopened,
                lost_starts: Vec::new(),
                damaged: Marks::default(),
                evidence: Vec::new(),
            };
            let run = judge(
                &lake,
                &[],
                Noted::Run(&presence),
                &owing,
                this_run,
                now,
                &opts,
            );
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(run)
                .unwrap()
        };
        let (found, owed, left_out) = judged(vec![(id.clone(), tail(10, 'a'))], &now);
        let found: Vec<_> = found
            .iter()
            .map(|f| (f.finding.code, f.finding.seq, f.finding.detail.as_str()))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].0, found[0].1), ("proved_rows_missing", Some(9)));
        assert!(
            found[0]
                .2
                .starts_with("seqs 9..=10 were proved by an earlier run")
                && found[0].2.ends_with("the stream now ends at seq 8"),
            "{}",
            found[0].2
        );
        assert_eq!(owed, vec![(id.clone(), tail(10, 'a'))]);
        assert!(left_out.is_empty());
        // Its proof reaching that tail with the same hash: held, nothing owed.
        let mut held = streams.clone();
        held.get_mut(&id).unwrap().tail = tail(10, 'a');
        let now = Proved {
            streams: &held,
            transfers: &transfers,
        };
        let (found, owed, _) = judged(vec![(id.clone(), tail(10, 'a'))], &now);
        assert!(found.is_empty() && owed.is_empty(), "{found:?} {owed:?}");
    }

    #[test]
    fn held_within_leaves_out_every_unheld_span() {
        assert_eq!(held_within(1, 10, &[]), [(1, 10)]);
        assert_eq!(held_within(5, 4, &[]), []);
        assert_eq!(held_within(1, 10, &[(3, 4), (8, 20)]), [(1, 2), (5, 7)]);
        assert_eq!(held_within(1, 10, &[(8, 20), (3, 4)]), [(1, 2), (5, 7)]);
        assert_eq!(held_within(3, 10, &[(1, 4)]), [(5, 10)]);
        assert_eq!(held_within(3, 10, &[(1, 40)]), []);
        assert_eq!(held_within(3, 10, &[(11, 12), (0, 1)]), [(3, 10)]);
        assert_eq!(held_within(3, u64::MAX, &[(5, u64::MAX)]), [(3, 4)]);
    }
}
