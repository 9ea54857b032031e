//! Rows a checkpoint has already proved, found again in a resumed run's new
//! files, recognised by the hash chain and not re-proved.
//!
//! The nightly flow makes them: compaction rewrites a partition the last run
//! proved in part (the ingest files of the first hours of a day become rows
//! of that day's `c-` file), and a queue may redeliver a batch. Before this
//! module every stream with such a row was *reopened* (re-proved from seq 1
//! over every file of its table), and a re-compacted day reopens nearly every
//! account, which makes the run a full proof.
//!
//! **Why a copy can be recognised without its original.** A stream the
//! checkpoint proved with no finding has rows 1..=t, each hashing to its
//! recorded hash and each `prev_hash` the hash before it, and the checkpoint
//! keeps the hash H at t. New rows a..=t of that stream which are one row a
//! seq, each hashing to its recorded hash, each linked to the one before,
//! and end at seq t with hash H, *are* those rows: the row at t hashes its
//! whole content, `prev_hash` included, so any other row there with hash H
//! would be a SHA-256 collision, and so on down to a. A full run over the same
//! lake sees them as plain duplicates of the rows already there, or (once
//! compaction deleted the files they were first proved in) as those rows: the
//! same verdicts either way, so they are skipped.
//!
//! **Rows found again.** Rows that stop before the tail (a queue that
//! delivered an old batch again, or a partition before the newest compacted
//! again after a late delivery, its first version gone) are not vouched for
//! by the checkpoint's tail hash. They are vouched for by the proved row
//! after them: split into runs that chain (one row a seq, each `prev_hash`
//! the hash before), a run a..=b is copies of proved rows when a proved file
//! holds the row at b + 1 and that row's `prev_hash` is b's hash. The proved
//! row b + 1 names the hash of the proved row b, so a row b with that hash is
//! that row (the argument above), and so on down to a. A full run over the
//! lake sees them as plain duplicates of the rows still there, or, where the
//! files they were proved in are gone, as those rows: the same verdicts.
//! The run looks the `prev_hash`es up by key in the proved files
//! (`run::found_again`, as `crate::owing` looks up tails, each file checked
//! against the checkpoint's notes: `crate::keyed`): an account stream's
//! before the proof, and the proof then recomputes each row's hash
//! ([`proved_copies`]); a transfer stream's after the proof's pass over the
//! new files, which recomputed them ([`OldRowsAre::MaybeFoundAgain`]: its
//! tail is known once its transfer is pulled back). On a night a proved file
//! is gone this relies on `crate::custody` having held each gone version's
//! outputs to every stretch the checkpoint noted in it (its first row and
//! its count of rows): a proved row that was only in a gone file is then in
//! the new files, so a run's successor is not where a cut left the stream.
//!
//! Anything else is reopened as before: a stream with a finding (its rows
//! were not all there, or not all sound), old rows not found again in the
//! proved files, two versions of a seq, a break in the chain, a row that
//! does not hash to its recorded hash.
//!
//! An account stream's decision has two halves, because reopening one pulls
//! the transfers of its whole history back from the archive before the
//! proof starts: [`ChainScan`] reads `seq`, `hash` and `prev_hash` of the new
//! files first and clears the streams whose rows chain to their tails; the
//! proof then recomputes those rows' hashes ([`proved_copies`]). A cleared
//! stream that fails there is a row altered under its recorded hash; the run
//! then proves the lake in full (its report says `reproved_in_full`).

use std::collections::{HashMap, HashSet};

use ledger_events::event::HashCheck;

use crate::stream::{unhex, LastHashes, StreamRows, Tail, Views};

/// What [`proved_copies`] makes of a stream's rows at or before its tail.
#[derive(Debug, PartialEq, Eq)]
pub enum OldRowsAre {
    /// The first `n` rows are copies of rows the tail proved.
    Copies(usize),
    /// Neither the tail nor `found` vouches for them, but the proved rows
    /// after them may (a queue that delivered an old batch again, a
    /// partition compacted again): the rows (one a seq, each hashing to its
    /// recorded hash and valid), to be looked up there ([`OldRows`]).
    MaybeFoundAgain(OldRows),
    /// Anything else: the stream must be reopened.
    Reopened,
}

/// What the first rows of `s` are, those at or before its checkpointed
/// `tail` (see the module docs): copies of rows the tail proved when they
/// are one row a seq, linked by `prev_hash`, each hashing to its recorded
/// hash, and end at the tail's seq with the tail's hash. Only for a stream
/// with no finding, whose first row is at or before its tail.
///
/// With `found` (the rows the proved files vouch for, each its seq and
/// hash: `run::found_again`), rows that do not chain to the tail are copies
/// too when each is one of them, one row a seq. Without, such rows may
/// still be vouched for.
pub fn proved_copies(
    s: &StreamRows,
    tail: &Tail,
    found: Option<&Found>,
    hashes: &mut HashCheck,
) -> OldRowsAre {
    let LastHashes::One(tail_hash) = &tail.last_hashes else {
        return OldRowsAre::Reopened;
    };
    let views = Views::new(std::slice::from_ref(s), hashes);
    let Some(v) = views.get(0) else {
        return OldRowsAre::Reopened;
    };
    let n = v.rows.iter().take_while(|r| r.seq <= tail.last_seq).count();
    let (rows, ok) = (&v.rows[..n], &v.hash_ok[..n]);
    let Some(last) = rows.last() else {
        return OldRowsAre::Reopened;
    };
    // A row with the recorded hash of a proved row is that row but for what
    // the hash does not tell apart (a missing text field and an empty one
    // encode alike): a full run keeps such a row beside the proved one and
    // names it invalid, so it is no copy.
    if !ok.iter().all(|&ok| ok) || !rows.iter().all(|r| r.validate().is_ok()) {
        return OldRowsAre::Reopened;
    }
    let chained = rows
        .windows(2)
        .all(|w| w[1].seq == w[0].seq + 1 && w[1].prev_hash == w[0].hash);
    if last.seq == tail.last_seq && tail.last_hashes.contains(last.hash) && chained {
        return OldRowsAre::Copies(n);
    }
    let links: Option<Vec<Link>> = rows
        .iter()
        .map(|r| Some((r.seq, unhex(r.hash)?, unhex(r.prev_hash)?)))
        .collect();
    let old = links.and_then(|links| OldRows::new(links, (tail.last_seq, *tail_hash)));
    match (old, found) {
        (Some(old), Some(found)) if old.rows().all(|r| found.contains(&r)) => OldRowsAre::Copies(n),
        (Some(old), None) => OldRowsAre::MaybeFoundAgain(old),
        _ => OldRowsAre::Reopened,
    }
}

/// Rows the proved files vouch for ([`OldRows::vouched`]): each its seq and
/// hash.
pub type Found = HashSet<(u64, [u8; 32])>;

/// A stream's old rows that do not chain to its tail as a whole, one a seq,
/// in seq order, and the tail: rows the proved rows after them may vouch
/// for (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldRows {
    links: Vec<Link>,
    /// The tail's seq and hash.
    tail: (u64, [u8; 32]),
}

impl OldRows {
    /// `links` (in seq order) and the tail's seq and hash, unless two rows
    /// share a seq, a run of them ends at the tail's seq but not with its
    /// hash (no proved row follows that one to vouch for it), or one is at
    /// seq 0: no proved row is (a stream starts at 1), and one whose hash
    /// is the genesis hash would be vouched for by row 1, whose prev_hash
    /// that is, and then fail the proof's own check of its hash, which
    /// re-proves the whole lake instead of its stream (rev-s53-diff L2).
    fn new(links: Vec<Link>, tail: (u64, [u8; 32])) -> Option<OldRows> {
        let old = OldRows { links, tail };
        let one_a_seq = old.links.windows(2).all(|w| w[1].0 > w[0].0);
        let vouchable = old.run_ends().all(|end| end == tail || end.0 < tail.0);
        let from_1 = old.links.first().is_none_or(|l| l.0 > 0);
        (one_a_seq && vouchable && from_1).then_some(old)
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether there is no row (never, for a stream's old rows).
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Each row's seq and hash.
    pub fn rows(&self) -> impl Iterator<Item = (u64, [u8; 32])> + '_ {
        self.links.iter().map(|&(seq, hash, _)| (seq, hash))
    }

    /// The runs of rows that chain (each row's seq one past the one before
    /// and its `prev_hash` that row's hash), each its last row's seq and
    /// hash.
    fn run_ends(&self) -> impl Iterator<Item = (u64, [u8; 32])> + '_ {
        let next = self.links.iter().skip(1).map(Some).chain([None]);
        self.links.iter().zip(next).filter_map(|(l, next)| {
            let chained = next.is_some_and(|n| n.0 == l.0 + 1 && n.2 == l.1);
            (!chained).then_some((l.0, l.1))
        })
    }

    /// The rows a proved file must hold to vouch for these, each as the
    /// seq after a run's last row and that row's hash, which the proved row
    /// at that seq names as its `prev_hash`: one a run, but for a run that
    /// ends at the tail with its hash (the tail vouches for it).
    pub fn successors(&self) -> impl Iterator<Item = (u64, [u8; 32])> + '_ {
        self.run_ends()
            .filter(|&end| end != self.tail)
            .map(|(seq, hash)| (seq + 1, hash))
    }

    /// The rows, when `holds(seq, prev_hash)` says a proved file holds a
    /// row at each of [`Self::successors`] naming that `prev_hash`: each
    /// its seq and hash, for [`proved_copies`].
    pub fn vouched(self, holds: impl Fn(u64, &[u8; 32]) -> bool) -> Option<Found> {
        let ok = self.successors().all(|(seq, prev)| holds(seq, &prev));
        ok.then(|| self.rows().collect())
    }
}

/// Account streams the pre-proof scan cleared, each with how: its old rows
/// chain to its tail (`None`), or the proved rows after them vouch for them
/// (`Some`: those rows).
pub type Cleared = HashMap<String, Option<Found>>;

/// The pre-proof half of an account stream's decision, on `seq`, `hash` and
/// `prev_hash` of the new files' rows (in any order): a stream's rows at or
/// before its tail, copies with the same hash taken once, must be one row a
/// seq, each `prev_hash` the hash before it, ending at the tail's seq with
/// the tail's hash: the check [`proved_copies`] makes on the merged rows,
/// less the recomputed hashes.
#[derive(Default)]
pub struct ChainScan {
    streams: HashMap<String, Candidate>,
}

/// A row's seq, hash and `prev_hash`.
type Link = (u64, [u8; 32], [u8; 32]);

/// One stream's rows at or before its tail (72 bytes a row: a re-compacted
/// day of the 10M-event benchmark lake holds 134K of them).
struct Candidate {
    tail_seq: u64,
    /// The hash at its tail; `None` when the stream had a finding or its
    /// tail is not one well-formed hash (then old rows reopen it).
    tail_hash: Option<[u8; 32]>,
    /// (seq, hash, prev_hash) of each row; `None` once a hash is not 64
    /// lower-case hex digits (then the proof has a finding to make).
    links: Option<Vec<Link>>,
}

impl Candidate {
    /// Whether the rows are copies of the proved rows, as far as their
    /// chain can tell; if not, the rows, when the proved rows after them
    /// may vouch for them ([`ChainScan::finish`]).
    fn chains_to_tail(self) -> Result<(), Option<OldRows>> {
        let (Some(tail_hash), Some(mut links)) = (self.tail_hash, self.links) else {
            return Err(None);
        };
        links.sort_unstable();
        links.dedup();
        let linked = links
            .windows(2)
            .all(|w| w[1].0 == w[0].0 + 1 && w[1].2 == w[0].1);
        let at_tail = links
            .last()
            .is_some_and(|l| l.0 == self.tail_seq && l.1 == tail_hash);
        // A row at seq 0 is no proved row (a stream starts at 1): it
        // reopens the stream, which re-proves it and reports it, instead of
        // chaining to row 1 by the genesis hash and failing the proof's
        // check of its own hash, a full proof (rev-s54-diff L3).
        let from_1 = links.first().is_none_or(|l| l.0 > 0);
        if linked && at_tail && from_1 {
            return Ok(());
        }
        Err(OldRows::new(links, (self.tail_seq, tail_hash)))
    }
}

impl ChainScan {
    /// A row of the account stream `key` at or before its checkpointed tail
    /// (one at seq 0 reopens it: [`Candidate::chains_to_tail`],
    /// [`OldRows::new`]); `tail` gives the tail and whether the stream had
    /// no finding, asked once a stream.
    pub fn row(
        &mut self,
        key: &str,
        tail: impl FnOnce() -> (Tail, bool),
        seq: u64,
        hash: &str,
        prev_hash: &str,
    ) {
        if !self.streams.contains_key(key) {
            let (tail, clean) = tail();
            let tail_hash = match tail.last_hashes {
                LastHashes::One(h) if clean => Some(h),
                _ => None,
            };
            let c = Candidate {
                tail_seq: tail.last_seq,
                tail_hash,
                links: Some(Vec::new()),
            };
            self.streams.insert(key.to_owned(), c);
        }
        let Some(c) = self.streams.get_mut(key) else {
            return;
        };
        c.links = match (c.links.take(), unhex(hash), unhex(prev_hash)) {
            (Some(mut links), Some(h), Some(p)) => {
                links.push((seq, h, p));
                Some(links)
            }
            _ => None,
        };
    }

    /// The streams with rows at or before their tails: those whose rows
    /// chain to their tails (to be checked again by [`proved_copies`] in the
    /// proof), and the others (to be reopened unless the proved rows after
    /// their rows vouch for them), with the old rows of those that can be:
    /// no finding, one row a seq, every hash well formed, no row at the
    /// tail's seq but the tail.
    pub fn finish(self) -> (Cleared, HashMap<String, Option<OldRows>>) {
        let (mut cleared, mut reopened) = (HashMap::new(), HashMap::new());
        for (key, c) in self.streams {
            match c.chains_to_tail() {
                Ok(()) => {
                    cleared.insert(key, None);
                }
                Err(rows) => {
                    reopened.insert(key, rows);
                }
            }
        }
        (cleared, reopened)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash of row `seq` of a chain (64 hex digits; `v` tells versions apart).
    fn h(seq: u64, v: u8) -> String {
        format!("{seq:062x}{v:02x}")
    }

    /// Feeds `rows` (key, seq, version) with the tails `tails` (key, seq,
    /// no finding) and returns (cleared, reopened), each sorted.
    fn scan(rows: &[(&str, u64, u8)], tails: &[(&str, u64, bool)]) -> (Vec<String>, Vec<String>) {
        let (cleared, reopened) = scan_rows(rows, tails);
        (cleared, reopened.into_iter().map(|(k, _)| k).collect())
    }

    /// [`scan`], each reopened stream with its rows' seqs and hashes when
    /// they may be found again.
    fn scan_rows(
        rows: &[(&str, u64, u8)],
        tails: &[(&str, u64, bool)],
    ) -> (Vec<String>, Vec<(String, Option<OldRows>)>) {
        let mut c = ChainScan::default();
        for &(key, seq, v) in rows {
            let t = tails.iter().find(|t| t.0 == key).copied().unwrap();
            let tail = Tail {
                last_seq: t.1,
                last_hashes: LastHashes::of([h(t.1, 0).as_str()]),
            };
            let prev = if seq <= 1 {
                "0".repeat(64)
            } else {
                h(seq - 1, 0)
            };
            c.row(key, || (tail, t.2), seq, &h(seq, v), &prev);
        }
        let (a, b) = c.finish();
        assert!(a.values().all(Option::is_none), "cleared by their chains");
        let mut a: Vec<_> = a.into_keys().collect();
        let mut b: Vec<_> = b.into_iter().collect();
        a.sort();
        b.sort_by(|x, y| x.0.cmp(&y.0));
        (a, b)
    }

    /// The rows (seq, version) of a [`scan`]'s stream, each linked to version
    /// 0 of the seq before, and its tail at `tail` (version 0).
    fn chain(rows: &[(u64, u8)], tail: u64) -> OldRows {
        let hash = |seq: u64, v: u8| unhex(&h(seq, v)).unwrap();
        let links = rows.iter().map(|&(seq, v)| {
            let prev = if seq == 1 { [0; 32] } else { hash(seq - 1, 0) };
            (seq, hash(seq, v), prev)
        });
        OldRows {
            links: links.collect(),
            tail: (tail, hash(tail, 0)),
        }
    }

    #[test]
    fn each_run_of_old_rows_is_vouched_for_by_the_proved_row_after_it() {
        let hash = |seq: u64, v: u8| unhex(&h(seq, v)).unwrap();
        // Runs 1..=2 and 4 before a tail at 6: the rows at 3 and 5 must name
        // the hashes of 2 and 4.
        let old = chain(&[(1, 0), (2, 0), (4, 0)], 6);
        let wanted: Vec<_> = old.successors().collect();
        assert_eq!(wanted, [(3, hash(2, 0)), (5, hash(4, 0))]);
        let held = |at: &[(u64, [u8; 32])]| {
            let at = at.to_vec();
            move |seq: u64, prev: &[u8; 32]| at.contains(&(seq, *prev))
        };
        let rows: Found = [(1, hash(1, 0)), (2, hash(2, 0)), (4, hash(4, 0))].into();
        assert_eq!(old.clone().vouched(held(&wanted)), Some(rows));
        // One successor missing, or naming another hash: not vouched for.
        assert_eq!(old.clone().vouched(held(&wanted[..1])), None);
        let other = [wanted[0], (5, hash(4, 1))];
        assert_eq!(old.vouched(held(&other)), None);
        // A run that ends at the tail with its hash needs no successor; seqs
        // one apart whose second does not name the first's hash are two runs.
        let to_tail = chain(&[(2, 0), (5, 0), (6, 0)], 6);
        assert_eq!(to_tail.successors().collect::<Vec<_>>(), [(3, hash(2, 0))]);
        let mut broken = chain(&[(1, 0), (2, 0)], 6);
        broken.links[1].2 = hash(1, 1);
        let ends: Vec<u64> = broken.successors().map(|(seq, _)| seq).collect();
        assert_eq!(ends, [2, 3]);
        // Another version at the tail's seq, or two rows at one seq: never.
        let at_tail = chain(&[(5, 0), (6, 1)], 6);
        assert_eq!(OldRows::new(at_tail.links, at_tail.tail), None);
        let twice = chain(&[(2, 0), (2, 1)], 6);
        assert_eq!(OldRows::new(twice.links, twice.tail), None);
        // A row at seq 0 whose hash is the genesis hash, which row 1 names
        // as its prev_hash: never (no proved row is at 0).
        let mut zero = chain(&[(1, 0), (2, 0)], 6);
        zero.links.insert(0, (0, [0; 32], [0; 32]));
        assert_eq!(zero.successors().next(), Some((3, hash(2, 0))));
        assert_eq!(OldRows::new(zero.links, zero.tail), None);
        let fine = chain(&[(1, 0), (2, 0)], 6);
        assert!(OldRows::new(fine.links, fine.tail).is_some());
    }

    /// `events` as the proof's merge hands them over: one stream's rows,
    /// read from a batch of the lake's columns.
    fn stream_rows(events: &[ledger_events::Event]) -> StreamRows {
        use datafusion::arrow::compute::cast;
        use datafusion::arrow::datatypes::DataType;
        use datafusion::arrow::record_batch::RecordBatch;
        use std::sync::Arc;
        let rows: Vec<ledger_ingest::Row> = events
            .iter()
            .map(|e| ledger_ingest::Row {
                event: e.clone(),
                conflict: false,
            })
            .collect();
        let b = ledger_ingest::rows_to_batch(&rows).unwrap();
        // Strings as the scan reads them: views.
        let schema = b.schema();
        let columns = schema.fields().iter().zip(b.columns()).map(|(f, c)| {
            let c = match f.data_type() {
                DataType::Utf8 => cast(c, &DataType::Utf8View).unwrap(),
                _ => Arc::clone(c),
            };
            (f.name().clone(), c)
        });
        let cols = Arc::new(
            crate::rows::Cols::from_batch(&RecordBatch::try_from_iter(columns).unwrap()).unwrap(),
        );
        let mut g = crate::stream::Grouper::default();
        for i in 0..events.len() {
            assert!(
                g.push(crate::rows::Row::at(&cols, i)).is_none(),
                "one stream"
            );
        }
        g.finish().unwrap()
    }

    /// What [`proved_copies`] makes of `rows` against a tail proved at
    /// `events[tail - 1]`.
    fn old_rows_are(
        events: &[ledger_events::Event],
        rows: &[ledger_events::Event],
        tail: usize,
        found: Option<&Found>,
    ) -> OldRowsAre {
        let t = &events[tail - 1];
        let tail = Tail {
            last_seq: t.seq,
            last_hashes: LastHashes::of([t.hash.as_str()]),
        };
        proved_copies(&stream_rows(rows), &tail, found, &mut HashCheck::default())
    }

    #[test]
    fn old_rows_are_copies_when_they_chain_to_the_tail_or_were_found_and_reopen_otherwise() {
        let (events, _) = crate::gen::generate_events(&crate::gen::GenConfig::default());
        let key = events[0].stream_key.clone();
        let e: Vec<ledger_events::Event> = events
            .into_iter()
            .filter(|e| e.stream == ledger_events::Stream::Account && e.stream_key == key)
            .take(5)
            .collect();
        assert_eq!(e.len(), 5);
        let at = |e: &ledger_events::Event| (e.seq, unhex(&e.hash).unwrap());
        let link = |e: &ledger_events::Event| {
            let (seq, hash) = at(e);
            (seq, hash, unhex(&e.prev_hash).unwrap())
        };
        let old = |rows: &[&ledger_events::Event]| OldRows {
            links: rows.iter().map(|e| link(e)).collect(),
            tail: at(&e[2]),
        };
        // Seqs 1 to 4, the tail at 3: the three up to it chain to it.
        assert_eq!(old_rows_are(&e, &e[..4], 3, None), OldRowsAre::Copies(3));
        // Seqs 1 and 2 stop short of the tail: maybe rows the proved files
        // hold; copies once found there, every one of them.
        let short = &e[..2];
        assert_eq!(
            old_rows_are(&e, short, 3, None),
            OldRowsAre::MaybeFoundAgain(old(&[&e[0], &e[1]]))
        );
        let found: Found = [at(&e[0]), at(&e[1])].into_iter().collect();
        assert_eq!(
            old_rows_are(&e, short, 3, Some(&found)),
            OldRowsAre::Copies(2)
        );
        let one: Found = [at(&e[0])].into_iter().collect();
        assert_eq!(old_rows_are(&e, short, 3, Some(&one)), OldRowsAre::Reopened);
        // A row whose content no longer hashes to its recorded hash, though
        // its chain ends at the tail: reopened (so is one found again).
        let mut altered = e[..3].to_vec();
        altered[1].amount = altered[1].amount.map(|a| a + 1);
        assert_eq!(old_rows_are(&e, &altered, 3, None), OldRowsAre::Reopened);
        assert_eq!(
            old_rows_are(&e, &altered[..2], 3, Some(&found)),
            OldRowsAre::Reopened
        );
        // Rows that skip a seq before the tail: maybe vouched for, not
        // copies by the tail.
        let skipping = [e[0].clone(), e[2].clone()];
        assert_eq!(
            old_rows_are(&e, &skipping, 3, None),
            OldRowsAre::MaybeFoundAgain(old(&[&e[0], &e[2]]))
        );
        // Two versions of one seq: reopened.
        let mut other = e[1].clone();
        other.amount = other.amount.map(|a| a + 1);
        let other = other.seal();
        let mut twice = vec![e[0].clone(), e[1].clone(), other];
        twice.sort_by(|a, b| (a.seq, &a.hash).cmp(&(b.seq, &b.hash)));
        assert_eq!(old_rows_are(&e, &twice, 3, None), OldRowsAre::Reopened);
        // No row at or before the tail, or a tail of several hashes:
        // reopened.
        assert_eq!(old_rows_are(&e, &e[3..], 3, None), OldRowsAre::Reopened);
        let several = Tail {
            last_seq: 3,
            last_hashes: LastHashes::of([e[2].hash.as_str(), e[1].hash.as_str()]),
        };
        let rows = stream_rows(&e[..3]);
        assert_eq!(
            proved_copies(&rows, &several, None, &mut HashCheck::default()),
            OldRowsAre::Reopened
        );
    }

    #[test]
    fn reopened_rows_one_a_seq_of_a_stream_without_a_finding_may_be_vouched_for() {
        let tails = [
            ("b", 3, true),
            ("c", 3, true),
            ("d", 3, false),
            ("e", 3, true),
        ];
        // b: stops short of its tail; c: a version of seq 3 that is not the
        // tail's (no proved row follows it); d: had a finding; e: two
        // versions of seq 2.
        let rows = [
            ("b", 1, 0),
            ("b", 2, 0),
            ("c", 2, 0),
            ("c", 3, 1),
            ("d", 3, 0),
            ("e", 2, 0),
            ("e", 2, 1),
        ];
        let (cleared, reopened) = scan_rows(&rows, &tails);
        assert!(cleared.is_empty());
        assert_eq!(
            reopened,
            [
                ("b".to_owned(), Some(chain(&[(1, 0), (2, 0)], 3))),
                ("c".to_owned(), None),
                ("d".to_owned(), None),
                ("e".to_owned(), None),
            ]
        );
    }

    #[test]
    fn rows_that_chain_to_the_tail_are_cleared_and_anything_else_reopens() {
        let tails = [
            ("a", 3, true),
            ("b", 3, true),
            ("c", 3, true),
            ("d", 3, false),
            ("e", 3, true),
        ];
        // a: 1..=3; b: stops short of its tail; c: a version of seq 3 that is
        // not the tail's; d: had a finding; e: 1..=3 after a row at seq 0
        // whose hash is the genesis hash, which row 1 names (h(0, 0)).
        assert_eq!(h(0, 0), "0".repeat(64));
        let rows = [
            ("a", 1, 0),
            ("a", 2, 0),
            ("a", 3, 0),
            ("b", 1, 0),
            ("b", 2, 0),
            ("c", 2, 0),
            ("c", 3, 1),
            ("d", 3, 0),
            ("e", 0, 0),
            ("e", 1, 0),
            ("e", 2, 0),
            ("e", 3, 0),
        ];
        let reopened = ["b", "c", "d", "e"].map(String::from).to_vec();
        assert_eq!(scan(&rows, &tails), (vec!["a".to_owned()], reopened));
    }

    #[test]
    fn the_rows_of_several_files_in_any_order_are_one_chain() {
        let tails = [("a", 3, true), ("b", 4, true)];
        // Copies in two files, read in any order; a copy read twice counts
        // once.
        let rows = [
            ("a", 3, 0),
            ("b", 4, 0),
            ("a", 2, 0),
            ("a", 3, 0),
            ("b", 2, 0),
            ("b", 3, 0),
        ];
        let both = ["a", "b"].map(String::from).to_vec();
        assert_eq!(scan(&rows, &tails), (both, vec![]));
        // A break in the chain (seq 2 missing), or two versions of a seq: reopened.
        assert_eq!(scan(&[("a", 1, 0), ("a", 3, 0)], &tails).1, ["a"]);
        assert_eq!(
            scan(&[("a", 2, 0), ("a", 2, 1), ("a", 3, 0)], &tails).1,
            ["a"]
        );
    }
}
