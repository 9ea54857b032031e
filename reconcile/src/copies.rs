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
//! Anything else is reopened as before: a stream with a finding (its rows
//! were not all there, or not all sound), rows that stop before the tail
//! (a redelivery of an old batch: nothing the checkpoint kept vouches for
//! them), two versions of a seq, a break in the chain, a row that does not
//! hash to its recorded hash.
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

/// How many of the first rows of `s` are copies of rows its checkpointed
/// `tail` proved (see the module docs): all its rows at or before the tail,
/// when they are one row a seq, linked by `prev_hash`, each hashing to its
/// recorded hash, and end at the tail's seq with the tail's hash. `None`:
/// the stream must be reopened. Only for a stream with no finding, whose
/// first row is at or before its tail.
pub fn proved_copies(s: &StreamRows, tail: &Tail, hashes: &mut HashCheck) -> Option<usize> {
    if !matches!(tail.last_hashes, LastHashes::One(_)) {
        return None;
    }
    let views = Views::new(std::slice::from_ref(s), hashes);
    let v = views.get(0)?;
    let n = v.rows.iter().take_while(|r| r.seq <= tail.last_seq).count();
    let (rows, ok) = (&v.rows[..n], &v.hash_ok[..n]);
    let last = rows.last()?;
    let chained = rows
        .windows(2)
        .all(|w| w[1].seq == w[0].seq + 1 && w[1].prev_hash == w[0].hash);
    (last.seq == tail.last_seq
        && tail.last_hashes.contains(last.hash)
        && chained
        && ok.iter().all(|&ok| ok))
    .then_some(n)
}

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
    /// chain can tell.
    fn chains_to_tail(self) -> bool {
        let (Some(tail_hash), Some(mut links)) = (self.tail_hash, self.links) else {
            return false;
        };
        links.sort_unstable();
        links.dedup();
        let linked = links
            .windows(2)
            .all(|w| w[1].0 == w[0].0 + 1 && w[1].2 == w[0].1);
        let at_tail = links
            .last()
            .is_some_and(|l| l.0 == self.tail_seq && l.1 == tail_hash);
        linked && at_tail
    }
}

impl ChainScan {
    /// A row of the account stream `key` at or before its checkpointed tail
    /// (a seq above 0); `tail` gives the tail and whether the stream had no
    /// finding, asked once a stream.
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
    /// proof), and the others (to be reopened).
    pub fn finish(self) -> (HashSet<String>, HashSet<String>) {
        let (mut cleared, mut reopened) = (HashSet::new(), HashSet::new());
        for (key, c) in self.streams {
            if c.chains_to_tail() {
                cleared.insert(key);
            } else {
                reopened.insert(key);
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
        let mut c = ChainScan::default();
        for &(key, seq, v) in rows {
            let t = tails.iter().find(|t| t.0 == key).copied().unwrap();
            let tail = Tail {
                last_seq: t.1,
                last_hashes: LastHashes::of([h(t.1, 0).as_str()]),
            };
            let prev = if seq == 1 {
                "0".repeat(64)
            } else {
                h(seq - 1, 0)
            };
            c.row(key, || (tail, t.2), seq, &h(seq, v), &prev);
        }
        let (a, b) = c.finish();
        let (mut a, mut b): (Vec<_>, Vec<_>) = (a.into_iter().collect(), b.into_iter().collect());
        a.sort();
        b.sort();
        (a, b)
    }

    #[test]
    fn rows_that_chain_to_the_tail_are_cleared_and_anything_else_reopens() {
        let tails = [
            ("a", 3, true),
            ("b", 3, true),
            ("c", 3, true),
            ("d", 3, false),
        ];
        // a: 1..=3; b: stops short of its tail; c: a version of seq 3 that is
        // not the tail's; d: had a finding.
        let rows = [
            ("a", 1, 0),
            ("a", 2, 0),
            ("a", 3, 0),
            ("b", 1, 0),
            ("b", 2, 0),
            ("c", 2, 0),
            ("c", 3, 1),
            ("d", 3, 0),
        ];
        let reopened = ["b", "c", "d"].map(String::from).to_vec();
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
