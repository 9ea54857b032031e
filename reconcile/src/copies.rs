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

use crate::stream::{LastHashes, StreamRows, Tail, Views};

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

/// The pre-proof half of an account stream's decision: over the new files'
/// rows, each file's in its order (`stream_key`, `seq`, `hash`), a stream's
/// rows at or before its tail must form chains that each end at the tail's
/// seq with the tail's hash (one chain a file, or one across two files: a
/// chain is a chain wherever its rows are). Rows are fed one at a time, as
/// the files hold them, one file after another.
#[derive(Default)]
pub struct ChainScan {
    /// The stream of the row before, and where its current chain stands.
    at: Option<(String, Chain)>,
    /// Streams with a row at or before their tail, and whether every chain
    /// of theirs so far reached the tail.
    seen: HashMap<String, bool>,
}

/// A stream's rows at or before its tail, as they come.
struct Chain {
    /// The stream's tail seq (0: nothing proved).
    tail_seq: u64,
    /// The hash at its tail; `None` when the stream had a finding or its
    /// tail is not one well-formed hash (then old rows reopen it).
    tail_hash: Option<LastHashes>,
    /// The seq and hash of the current chain's last row.
    last: Option<(u64, String)>,
}

impl Chain {
    /// Whether the current chain, if any, ends at the tail with its hash.
    fn at_tail(&self) -> bool {
        self.last.as_ref().is_none_or(|(seq, hash)| {
            *seq == self.tail_seq && self.tail_hash.as_ref().is_some_and(|h| h.contains(hash))
        })
    }
}

impl ChainScan {
    /// The next row: of the account stream `key`; `tail` gives the stream's
    /// checkpointed tail (seq 0: none) and whether it had no finding.
    pub fn row(
        &mut self,
        key: &str,
        tail: impl FnOnce() -> (Tail, bool),
        seq: u64,
        hash: &str,
        prev_hash: &str,
    ) {
        if self.at.as_ref().is_none_or(|(k, _)| k != key) {
            self.end_stream();
            let (tail, clean) = tail();
            let one = matches!(tail.last_hashes, LastHashes::One(_));
            let chain = Chain {
                tail_seq: tail.last_seq,
                tail_hash: (clean && one).then_some(tail.last_hashes),
                last: None,
            };
            self.at = Some((key.to_owned(), chain));
        }
        let Some((key, chain)) = &mut self.at else {
            return;
        };
        if chain.tail_seq == 0 || seq > chain.tail_seq {
            return; // a new row: the proof continues the stream with it
        }
        let whole = self.seen.entry(key.clone()).or_insert(true);
        let linked = chain
            .last
            .as_ref()
            .is_some_and(|(s, h)| seq == s + 1 && prev_hash == h);
        // A row that does not go on from the one before starts a new chain,
        // which it may only do once the chain before reached the tail.
        if chain.tail_hash.is_none() || (!linked && !chain.at_tail()) {
            *whole = false;
        }
        chain.last = Some((seq, hash.to_owned()));
    }

    fn end_stream(&mut self) {
        if let Some((key, chain)) = self.at.take() {
            if !chain.at_tail() {
                if let Some(w) = self.seen.get_mut(&key) {
                    *w = false;
                }
            }
        }
    }

    /// The streams with rows at or before their tails: those whose rows all
    /// chain to their tails (to be checked again by [`proved_copies`] in the
    /// proof), and the others (to be reopened).
    pub fn finish(mut self) -> (HashSet<String>, HashSet<String>) {
        self.end_stream();
        let (mut cleared, mut reopened) = (HashSet::new(), HashSet::new());
        for (key, whole) in self.seen {
            if whole {
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
        format!("{:062x}{v:02x}", seq)
    }

    fn tail(seq: u64) -> Tail {
        Tail {
            last_seq: seq,
            last_hashes: LastHashes::of([h(seq, 0).as_str()]),
        }
    }

    /// Feeds `rows` (key, seq, version) with the tails `tails` (key → seq,
    /// clean) and returns (cleared, reopened), each sorted.
    fn scan(rows: &[(&str, u64, u8)], tails: &[(&str, u64, bool)]) -> (Vec<String>, Vec<String>) {
        let mut c = ChainScan::default();
        for &(key, seq, v) in rows {
            let t = tails.iter().find(|t| t.0 == key).copied();
            let prev = if seq == 1 {
                "0".repeat(64)
            } else {
                h(seq - 1, 0)
            };
            c.row(
                key,
                || t.map_or((Tail::default(), true), |t| (tail(t.1), t.2)),
                seq,
                &h(seq, v),
                &prev,
            );
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
        // a: 1..=3 then new rows; b: stops short of its tail; c: a version of
        // seq 3 that is not the tail's; d: had a finding; e: nothing proved.
        let rows = [
            ("a", 1, 0),
            ("a", 2, 0),
            ("a", 3, 0),
            ("a", 4, 0),
            ("b", 1, 0),
            ("b", 2, 0),
            ("c", 2, 0),
            ("c", 3, 1),
            ("d", 3, 0),
            ("e", 1, 0),
        ];
        assert_eq!(
            scan(&rows, &tails),
            (vec!["a".into()], vec!["b".into(), "c".into(), "d".into()])
        );
    }

    #[test]
    fn chains_in_several_files_each_to_the_tail_are_cleared() {
        let tails = [("a", 3, true), ("b", 3, true), ("z", 9, true)];
        // File 1: a 2..=3, z; file 2: a 3, then b 1..=2 (short); file 3: b 3.
        // b's rows chain across files 2 and 3 to its tail: a chain wherever
        // its rows are.
        let rows = [
            ("a", 2, 0),
            ("a", 3, 0),
            ("z", 10, 0),
            ("a", 3, 0),
            ("b", 1, 0),
            ("b", 2, 0),
            ("b", 3, 0),
        ];
        assert_eq!(scan(&rows, &tails), (vec!["a".into(), "b".into()], vec![]));
        // A chain that stops short, then one that reaches the tail: reopened.
        let rows = [("a", 1, 0), ("z", 10, 0), ("a", 2, 0), ("a", 3, 0)];
        assert_eq!(scan(&rows, &tails), (vec![], vec!["a".into()]));
        // A break inside a chain (seq 2 missing): reopened.
        let rows = [("a", 1, 0), ("a", 3, 0)];
        assert_eq!(scan(&rows, &tails).1, ["a"]);
        // Only new rows: neither.
        assert_eq!(scan(&[("a", 4, 0)], &tails), (vec![], vec![]));
    }
}
