//! Which hashes a row that fails its hash records were ever proved: the
//! lake owes a proved tail, and a proved conflict's versions, with the
//! hashes they were proved with (`crate::retained`), but not a hash no run
//! proved.
//!
//! A row whose content does not hash to its recorded hash is a
//! `hash_mismatch`. What it records is one of two things, and the lake
//! alone cannot say which:
//!
//! - a hash no run saw proved there: the row arrived damaged (a flipped
//!   bit in its `hash` column, a copy damaged on its way). docs/LAKE.md's
//!   repair (the file as ingest wrote it put back, or the damaged copy
//!   moved out) leaves a row with another recorded hash, or none, at that
//!   seq. Owing the damaged hash would report that repair as
//!   `proved_row_changed` every night after;
//! - a hash an earlier run proved at that seq, on a row since altered
//!   under it (its content changed, its hash kept), or a hash an intact
//!   row at the same seq records (a copy altered beside it). Not owing it
//!   would let the row be resealed with its new content a night later,
//!   the proved row gone without a finding (rev-s60-diff 1).
//!
//! So each `hash_mismatch` keeps which (`Finding::hash_owed`, in the
//! checkpoint beside the finding, not in reports: a proof without a
//! checkpoint cannot know it, and a resumed night reports what a full
//! proof does), decided the night that makes it ([`mark`]): owed when
//! another row at the seq records the hash and hashes to it (the
//! completeness check, which sees the rows, says so), else as the previous
//! checkpoint's `hash_mismatch` of the same hash there said, else when that
//! checkpoint proved the hash at that seq (its tail there, its conflict's
//! versions there, a tail it owed there). A finding of a checkpoint written
//! before, with no mark, is owed: such a checkpoint owes as it did.
//!
//! The tails and conflicts' versions a run judges from its checkpoint
//! ([`Marks::owed`]) leave out the hashes its `hash_mismatch` findings at
//! that seq marked unproved. A tail left with no hash is owed as a lost
//! file's row is: any row at its seq holds it, and the chain checks what
//! that row is.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::checkpoint::{StreamFinding, StreamId};
use crate::checks::completeness;
use crate::finding::Finding;
use crate::stream::{LastHashes, Tail};
use ledger_events::Stream;
use ledger_ingest::Table;

/// A `hash_mismatch`'s code.
pub const CODE: &str = "hash_mismatch";

const RECORDED: &str = "recorded hash ";
const CONTENT: &str = " but the row's content hashes to ";

/// A `hash_mismatch`'s detail: the hash `recorded`, and what the row's
/// content hashes to (`content`).
pub fn detail(recorded: &str, content: &str) -> String {
    format!("{RECORDED}{recorded}{CONTENT}{content}")
}

/// The hash a `hash_mismatch` finding records. `None` for any other
/// finding, or a detail not of [`detail`]'s form.
pub fn recorded(f: &Finding) -> Option<&str> {
    if f.code != CODE {
        return None;
    }
    let rest = f.detail.strip_prefix(RECORDED)?;
    // The content's hash is 64 hex digits, so the split from the right is
    // exact whatever the recorded hash holds.
    let (recorded, content) = rest.rsplit_once(CONTENT)?;
    let hex = content.len() == 64 && content.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then_some(recorded)
}

/// The marks of a checkpoint's `hash_mismatch` findings: by stream, each
/// seq and recorded hash, `true` when owed.
#[derive(Debug, Default)]
pub struct Marks(HashMap<(Table, Stream), HashMap<String, Vec<SeqMark>>>);

/// A seq, the hash recorded there, and whether it is owed.
type SeqMark = (u64, String, bool);

impl Marks {
    /// The marks of `findings` (a finding with none is owed).
    pub fn of(findings: &[StreamFinding]) -> Marks {
        let mut marks = Marks::default();
        for f in findings.iter().filter(|f| f.check == completeness::NAME) {
            let (Some(h), Some(seq)) = (recorded(&f.finding), f.finding.seq) else {
                continue;
            };
            let owed = f.finding.hash_owed != Some(false);
            let (table, stream, key) = &f.stream;
            let at = marks
                .0
                .entry((*table, *stream))
                .or_default()
                .entry(key.clone())
                .or_default();
            match at.iter_mut().find(|(s, x, _)| *s == seq && x == h) {
                // Two findings of one hash at a seq (two damaged copies):
                // owed if either says so.
                Some(m) => m.2 |= owed,
                None => at.push((seq, h.to_owned(), owed)),
            }
        }
        marks
    }

    /// Whether the finding of `stream` at `seq` recording `hash` was marked
    /// owed (`None`: there was none).
    pub fn get(&self, stream: &StreamId, seq: u64, hash: &str) -> Option<bool> {
        self.of_stream(stream.0, stream.1, &stream.2)?
            .iter()
            .find(|(s, h, _)| *s == seq && h == hash)
            .map(|m| m.2)
    }

    fn of_stream(&self, table: Table, stream: Stream, key: &str) -> Option<&[SeqMark]> {
        Some(self.0.get(&(table, stream))?.get(key)?.as_slice())
    }

    /// What the lake owes of `tail`, proved of the stream `key` of `table`:
    /// its hashes but those a `hash_mismatch` there marked unproved.
    /// Borrowed, with nothing allocated, for a stream with no mark.
    pub fn owed<'t>(
        &self,
        (table, stream, key): (Table, Stream, &str),
        tail: &'t Tail,
    ) -> Cow<'t, Tail> {
        let seq = tail.last_seq;
        let Some(marks) = self.of_stream(table, stream, key) else {
            return Cow::Borrowed(tail);
        };
        let unproved = |h: &str| {
            marks
                .iter()
                .any(|(s, x, owed)| *s == seq && x == h && !owed)
        };
        if !marks
            .iter()
            .any(|(s, x, owed)| *s == seq && !owed && tail.last_hashes.contains(x))
        {
            return Cow::Borrowed(tail);
        }
        let hashes: Vec<String> = tail.last_hashes.clone().into();
        Cow::Owned(Tail {
            last_seq: seq,
            last_hashes: LastHashes::of(hashes.iter().map(String::as_str).filter(|h| !unproved(h))),
        })
    }

    /// [`Marks::owed`], taking the tail.
    pub fn owe(&self, at: (Table, Stream, &str), tail: Tail) -> Tail {
        let changed = match self.owed(at, &tail) {
            Cow::Owned(t) => Some(t),
            Cow::Borrowed(_) => None,
        };
        changed.unwrap_or(tail)
    }
}

/// The (stream, seq) of every `hash_mismatch` in `findings` not marked yet.
pub fn unmarked_at(findings: &[StreamFinding]) -> Vec<(&StreamId, u64)> {
    findings
        .iter()
        .filter(|f| f.check == completeness::NAME)
        .filter(|f| f.finding.hash_owed.is_none() && recorded(&f.finding).is_some())
        .filter_map(|f| Some((&f.stream, f.finding.seq?)))
        .collect()
}

/// Marks every `hash_mismatch` of `findings` not marked yet
/// (`Finding::hash_owed`): as the previous checkpoint's finding of the same
/// hash at the same seq was (`prior`), else owed when `proved_before` (what
/// that checkpoint proved at the stream's seq: its tail's hashes there, its
/// conflict's versions, a tail it owed) names its hash, else not. A row at
/// seq 0 is outside the chain and owed by nothing.
pub fn mark(
    findings: &mut [StreamFinding],
    prior: &Marks,
    proved_before: impl Fn(&StreamId, u64, &str) -> bool,
) {
    for f in findings
        .iter_mut()
        .filter(|f| f.check == completeness::NAME && f.finding.hash_owed.is_none())
    {
        let Some(h) = recorded(&f.finding) else {
            continue;
        };
        let seq = f.finding.seq.unwrap_or(0);
        let owed = seq > 0
            && prior
                .get(&f.stream, seq, h)
                .unwrap_or_else(|| proved_before(&f.stream, seq, h));
        f.finding.hash_owed = Some(owed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(c: char) -> String {
        std::iter::repeat_n(c, 64).collect()
    }

    fn id(key: &str) -> StreamId {
        (Table::Account, Stream::Account, key.to_owned())
    }

    fn mismatch(key: &str, seq: u64, recorded: &str, owed: Option<bool>) -> StreamFinding {
        let mut finding = Finding::new(CODE, key, detail(recorded, &hash('c'))).at(seq, "e");
        finding.hash_owed = owed;
        StreamFinding {
            check: completeness::NAME,
            stream: id(key),
            finding,
        }
    }

    #[test]
    fn a_detail_reads_back_whatever_its_recorded_hash_holds() {
        for h in [
            hash('a'),
            "not hex".to_owned(),
            format!("x{CONTENT}{}", hash('d')),
            String::new(),
        ] {
            let f = mismatch("acme.a", 3, &h, None).finding;
            assert_eq!(recorded(&f), Some(h.as_str()), "{}", f.detail);
        }
        // Another code, or a detail of another form, reads as none.
        let mut other = mismatch("acme.a", 3, &hash('a'), None).finding;
        other.code = "chain_break";
        assert_eq!(recorded(&other), None);
        let garbled = Finding::new(CODE, "acme.a", "recorded hash aa".into());
        assert_eq!(recorded(&garbled), None);
    }

    #[test]
    fn a_night_marks_by_the_previous_mark_then_by_what_was_proved_there() {
        let prior = Marks::of(&[
            mismatch("acme.a", 4, &hash('a'), Some(false)),
            mismatch("acme.b", 4, &hash('b'), Some(true)),
            // Written before marks: owed.
            mismatch("acme.c", 4, &hash('c'), None),
        ]);
        let mut findings = vec![
            mismatch("acme.a", 4, &hash('a'), None),
            mismatch("acme.b", 4, &hash('b'), None),
            mismatch("acme.c", 4, &hash('c'), None),
            // No earlier finding: what was proved there decides.
            mismatch("acme.d", 4, &hash('d'), None),
            mismatch("acme.d", 5, &hash('e'), None),
            // Marked by the proof itself (an intact row beside): kept.
            mismatch("acme.e", 4, &hash('e'), Some(true)),
            // Outside the chain: never owed.
            mismatch("acme.f", 0, &hash('f'), None),
        ];
        // What the previous checkpoint proved: every hash at acme.a's and
        // acme.d's seq 4 (the earlier mark wins over it), acme.f's seq 0.
        let proved = |s: &StreamId, seq: u64, _: &str| {
            (s.2 == "acme.a" || s.2 == "acme.d" || s.2 == "acme.f") && [0, 4].contains(&seq)
        };
        assert_eq!(unmarked_at(&findings).len(), 6);
        mark(&mut findings, &prior, proved);
        let marks: Vec<Option<bool>> = findings.iter().map(|f| f.finding.hash_owed).collect();
        assert_eq!(
            marks,
            [false, true, true, true, false, true, false].map(Some)
        );
        assert!(unmarked_at(&findings).is_empty());
        // Marking again changes nothing.
        let again = findings.clone();
        mark(&mut findings, &prior, |_, _, _| true);
        assert_eq!(findings, again);
    }

    #[test]
    fn a_tail_is_owed_without_the_hashes_marked_unproved_there() {
        let marks = Marks::of(&[
            mismatch("acme.a", 7, &hash('a'), Some(false)),
            mismatch("acme.a", 7, &hash('b'), Some(true)),
            // The same hash at another seq, or of another stream: not this.
            mismatch("acme.a", 6, &hash('c'), Some(false)),
            mismatch("acme.b", 7, &hash('c'), Some(false)),
            // Two findings of one hash, one owed: owed.
            mismatch("acme.c", 7, &hash('d'), Some(false)),
            mismatch("acme.c", 7, &hash('d'), Some(true)),
        ]);
        let tail = |hs: &[char]| Tail {
            last_seq: 7,
            last_hashes: LastHashes::of(
                hs.iter()
                    .map(|&c| hash(c))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str),
            ),
        };
        fn at(key: &str) -> (Table, Stream, &str) {
            (Table::Account, Stream::Account, key)
        }
        let owed = |key: &str, hs: &[char]| marks.owed(at(key), &tail(hs)).into_owned();
        assert_eq!(owed("acme.a", &['a', 'b', 'c']), tail(&['b', 'c']));
        assert_eq!(owed("acme.a", &['a']), tail(&[]));
        assert_eq!(owed("acme.a", &['b']), tail(&['b']));
        assert_eq!(owed("acme.b", &['a', 'c']), tail(&['a']));
        assert_eq!(owed("acme.c", &['d']), tail(&['d']));
        assert_eq!(marks.owe(at("acme.a"), tail(&['a', 'b'])), tail(&['b']));
        assert!(matches!(
            marks.owed(at("acme.d"), &tail(&['a'])),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            marks.owed(at("acme.a"), &tail(&['b'])),
            Cow::Borrowed(_)
        ));
    }
}
