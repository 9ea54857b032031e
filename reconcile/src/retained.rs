//! Proved rows stay in the lake: what an earlier run proved of a stream is
//! still there, as it was proved.
//!
//! A hash chain shows that no row *before* a stream's last one was removed,
//! altered or reordered, but not that the last ones are still there: a lake
//! that lost a stream's newest rows holds a shorter history that is
//! consistent in itself, and a proof of the lake alone holds on it. What an
//! earlier run proved is the remedy: its checkpoint keeps each stream's
//! *tail* (the last seq proved and the hashes of its versions there), and
//! the lake owes every tail for good.
//!
//! A tail is **held** when the lake has, at the stream's owed seq, rows with
//! every hash the tail names (further versions there are conflicts, which
//! the duplicates check judges). A hash that a row failing its hash
//! recorded, and no run proved, is owed as `crate::unproved` says: left
//! out beside a hash owed there, else owed as the row ingest most likely
//! wrote (held by a row that records that hash, or a damaged row whose
//! content hashes to it). Every row before it is then held too: the same
//! proof checks the chain up to it, so a row removed or changed before it
//! is a `seq_gap` or a `chain_break` there. A tail not held is a
//! completeness finding:
//!
//! - `proved_rows_missing`: the stream now ends before the owed seq (at the
//!   first seq missing), or has rows after it but none at it (at the owed
//!   seq);
//! - `proved_row_changed`: the rows at the owed seq do not have the hashes
//!   it was proved with (the history was rewritten from there back).
//!
//! The chain vouches, through the tail, for one version of each seq before
//! it: the one each next row's `prev_hash` names. A conflict's other
//! versions (one event id, other contents: `conflicting_duplicates`) are
//! outside it, so the lake owes them as it owes a tail: the versions of a
//! conflict an earlier run proved ([`evidence`]) are judged the same way,
//! at the conflict's seq, with the same findings.
//!
//! Which tails a run judges (`crate::owing`): a resumed run that proves
//! the lake from its first event because proved files were lost, and
//! `--full` with a checkpoint, judge every tail the checkpoint kept (and
//! every conflict's versions it proved); a resumed run judges the tails of
//! the streams it re-proved from their first event (and the versions of
//! the conflicts it withdrew with them); every run judges the tails earlier
//! runs found not held (kept in the checkpoint as *owed* until the lake
//! holds them again, say once the lost file is restored). This module
//! decides one tail; reading the lake is the run's.

use std::collections::HashMap;

use ledger_events::event_id;
use ledger_ingest::Table;

use crate::checkpoint::{StreamFinding, StreamId};
use crate::checks::duplicates;
use crate::finding::Finding;
use crate::names::FxMap;
use crate::presence::{self, Fingerprint};
use crate::stream::{LastHashes, Tail};

/// Rows an earlier run proved at one seq of a stream, which the lake owes:
/// the stream's tail (its last seq, the hashes of its versions there), or
/// the versions of a conflict before it ([`evidence`]).
pub type Owed = (StreamId, Tail);

/// What the lake owes of the finding `f` an earlier run proved, when a
/// proof of the lake's rows alone could lose it without a trace: the
/// versions of a `conflict`, as a tail at the conflict's seq with each
/// version's hash. `None` for any other finding.
///
/// A stream whose findings a run withdraws (reopened, or its checkpoint's
/// proof set aside) is proved again from the lake's rows, and a finding
/// the new proof does not make is gone from the report. That is right when
/// rows came that resolve it (a gap filled by a late row, a saga's missing
/// step delivered), so such findings are not kept. It is wrong when rows
/// the earlier proof rested on left the lake; before the tail, the chain
/// sees every such loss but one:
///
/// - a row on the chain removed leaves a `seq_gap`, one changed a
///   `chain_break` or `hash_mismatch`, or a changed tail
///   (`proved_row_changed`): the new proof reports a loss itself, never
///   a stream clean;
/// - a `hash_mismatch` of the only row at a seq before the tail is
///   resolved only by a row the next row's `prev_hash` names, which the
///   chain vouches for: a repair, withdrawn;
/// - a conflict's other version is on no chain: remove it (a compaction
///   that lies, a lost file) and the stream is whole, the `conflict` gone,
///   and with it any finding that version alone made (its `hash_mismatch`,
///   `invalid_event`, or, when it was the seq's first version by hash,
///   what the folds found of it, there or later). So its versions are
///   owed: the finding the owed seq gives names the row all those rested
///   on.
///
/// Owed, not kept as it was: a `conflict` kept would name two versions the
/// lake no longer has, and an auditor who looks finds one and no violation.
/// What the lake now shows is that a row an earlier run proved is gone:
/// `proved_row_changed` at the conflict's seq, naming every version proved
/// and what is there (`proved_rows_missing` when none is), the finding the
/// tail check gives when a conflict's version at the tail is gone: one rule
/// for a lost version, whatever its seq. It stays owed in the checkpoint
/// (its format unchanged: owed seqs are tails) and is judged every run
/// until the lake holds every version again, when the conflict is found
/// again by the proof. Rows of seq 0 are outside the chain too, but no
/// finding about one records its hash, so they are not owed (a limit).
pub fn evidence(f: &StreamFinding) -> Option<Owed> {
    if f.check == crate::checks::completeness::NAME {
        // A damaged row whose content was proved (`crate::unproved`).
        return crate::unproved::evidence(f);
    }
    if f.check != duplicates::NAME {
        return None;
    }
    let seq = f.finding.seq.filter(|&s| s > 0)?;
    let versions = duplicates::versions(&f.finding)?;
    Some((
        f.stream.clone(),
        Tail {
            last_seq: seq,
            last_hashes: LastHashes::of(versions),
        },
    ))
}

/// How many seqs of the gaps [`lost_starts`] lists at once, at least, to be
/// looked up note by note (~40 bytes each): past it (or past the notes'
/// count, when larger), the spans go in further rounds, each reading the
/// notes again.
pub const LOST_SEQS_MAX: u64 = 1 << 20;

/// The seqs of the spans `spans` (stream, first, last, inclusive; this
/// run's gaps) that a note of `files` (a lost file's table and notes,
/// fingerprints at its stretches' first seqs) names in its own table:
/// owed with no hash, in the order of the spans, then of seq, each once.
///
/// They are the first rows of the stretches of streams that the lake files
/// a run found lost held (their notes, `crate::presence`): rows an earlier
/// run saw in the lake, so one missing now is proved evidence gone, not a
/// row still to be delivered (a redelivery of it, as the file restored,
/// brings it back). A run that lost proved files proves the lake from its
/// first event, and a row in the middle of a stream that went with them
/// comes back as a `seq_gap`, which, alone, is pending while the row after
/// it is young: what a row not delivered yet looks like. The checkpoint
/// knows better for the rows its notes name: each lost file's notes give,
/// per stretch of a stream's rows there, the seq it starts at (as a
/// fingerprint of the stream and seq, [`presence::fingerprint_at`]). Such a
/// seq inside a gap of this run's proof is a proved row gone: owed as a
/// tail with no hash (any row at that seq holds it; the chain checks what
/// that row is), found `proved_rows_missing` there, decided, and judged
/// every night until the lake holds a row there again. Only a stretch's
/// first seq is known to have been in the file (its count of rows may
/// include a conflict's second version), so a lost row after it in the
/// same stretch, with the first still in the lake (a copy in another
/// file), stays a gap alone: a limit.
///
/// A span shorter than its table's notes is listed seq by seq and each
/// note looked up, in rounds of `seqs_max` seqs or the notes' count,
/// whichever is larger; a longer one is matched note by note, each note's
/// seq computed in its stream ([`presence::seq_of_unmixed`]). So the work
/// is at most the gaps' seqs plus the notes once a round, and the memory
/// the notes as given plus a round's seqs, not a set of the lake's notes (a
/// lake copied whole has every file lost).
pub fn lost_starts(
    spans: &[(&StreamId, u64, u64)],
    files: &[(Table, &[Fingerprint])],
    seqs_max: u64,
) -> Vec<(StreamId, Tail)> {
    let mut notes: HashMap<Table, u64> = HashMap::new();
    for (t, n) in files {
        *notes.entry(*t).or_default() += n.len() as u64;
    }
    // A round lists as many seqs as there are notes, at least: each
    // round's look-ups then cost no more than its listing, and its
    // memory no more than a set of the notes would.
    let seqs_max = seqs_max.max(notes.values().sum());
    let mut found: Vec<(usize, u64)> = Vec::new();
    let mut by_note: FxMap<(Table, Fingerprint), (usize, u64)> = FxMap::default();
    let mut listed = 0u64;
    // A round: each note looked up among the seqs listed so far.
    let round = |by_note: &mut FxMap<(Table, Fingerprint), (usize, u64)>,
                 found: &mut Vec<(usize, u64)>| {
        if by_note.is_empty() {
            return;
        }
        for (t, ns) in files {
            found.extend(ns.iter().filter_map(|&at| by_note.get(&(*t, at)).copied()));
        }
        by_note.clear();
    };
    for (i, &(id, first, last)) in spans.iter().enumerate() {
        if first > last {
            continue;
        }
        let stream = presence::fingerprint(id.1, &id.2);
        let table_notes = notes.get(&id.0).copied().unwrap_or(0);
        if last - first >= table_notes {
            // Longer than the notes: each note's seq, in this stream.
            for (_, ns) in files.iter().filter(|(t, _)| *t == id.0) {
                for &at in *ns {
                    let s = presence::seq_of_unmixed(stream, presence::unmix(at));
                    if (first..=last).contains(&s) {
                        found.push((i, s));
                    }
                }
            }
            continue;
        }
        let mut from = first;
        loop {
            let room = seqs_max.saturating_sub(listed).max(1);
            let to = last.min(from.saturating_add(room - 1));
            for s in from..=to {
                // A fingerprint two seqs share (a 2⁻⁶⁴ chance) keeps
                // the first.
                by_note
                    .entry((id.0, presence::at_seq(stream, s)))
                    .or_insert((i, s));
            }
            listed += to - from + 1;
            if listed >= seqs_max {
                round(&mut by_note, &mut found);
                listed = 0;
            }
            if to == last {
                break;
            }
            from = to + 1;
        }
    }
    round(&mut by_note, &mut found);
    found.sort_unstable();
    found.dedup();
    found
        .into_iter()
        .map(|(i, s)| {
            let tail = Tail {
                last_seq: s,
                last_hashes: LastHashes::None,
            };
            (spans[i].0.clone(), tail)
        })
        .collect()
}

/// Whether the lake holds an owed tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Rows with every hash of the tail are at its seq.
    Yes,
    /// No row at the owed seq: the stream now ends at `ends` (0: no row of
    /// it at all), or (`None`) has rows after the owed seq but not at it.
    Missing { ends: Option<u64> },
    /// Rows at the owed seq, without every hash it was proved with: the
    /// hashes found there, each once, sorted.
    Changed { found: Vec<String> },
    /// The stream now ends after the owed seq: the hashes of its rows at
    /// the owed seq must be read to decide.
    Look,
}

/// Decides whether the lake holds `owed`, from the stream's tail in this
/// run's proof (`now`; `None`: the lake has no row of it) and, when read,
/// the hashes of the lake's rows at the owed seq (`at`), with what the
/// content of those that fail their hash hashes to (`contents`, this
/// proof's `hash_mismatch` findings there: a tail that arrived damaged is
/// owed as its content, `crate::unproved`).
pub fn judge(owed: &Tail, now: Option<&Tail>, at: Option<&[String]>, contents: &[&str]) -> Held {
    let seq = owed.last_seq;
    let ends = now.map_or(0, |t| t.last_seq);
    // The common case, with nothing allocated (millions of settled
    // transfers on a night that sets its checkpoint's proof aside): the
    // proof ends where the tail was proved, with the same hashes.
    if at.is_none()
        && owed.last_hashes != LastHashes::None
        && now.is_some_and(|t| t.last_seq == seq && t.last_hashes == owed.last_hashes)
    {
        return Held::Yes;
    }
    let mut found: Vec<String> = match at {
        Some(at) => at.to_vec(),
        None if ends < seq => return Held::Missing { ends: Some(ends) },
        None if ends == seq => now
            .map(|t| t.last_hashes.clone().into())
            .unwrap_or_default(),
        None => return Held::Look,
    };
    if !found.is_empty() {
        found.extend(contents.iter().map(|&c| c.to_owned()));
    }
    if found.is_empty() {
        return Held::Missing {
            ends: (ends < seq).then_some(ends),
        };
    }
    // Each once, sorted: copies of a row give its hash once a copy, and a
    // finding's detail names them in one order, however the night read them
    // (rev-s62-copies L1: a resumed night and `--full` listed them apart).
    found.sort_unstable();
    found.dedup();
    let proved: Vec<String> = owed.last_hashes.clone().into();
    if proved.iter().all(|h| found.binary_search(h).is_ok()) {
        Held::Yes
    } else {
        Held::Changed { found }
    }
}

/// The completeness finding for a tail of `stream` the lake does not hold
/// (`None` when it holds it, or has not been looked at).
pub fn finding(stream: &StreamId, owed: &Tail, held: &Held) -> Option<Finding> {
    let (_, kind, key) = stream;
    let seq = owed.last_seq;
    let hashes: Vec<String> = owed.last_hashes.clone().into();
    let proved = hashes.join(", ");
    let (code, at, detail) = match held {
        Held::Yes | Held::Look => return None,
        // A stretch's first row in a file since lost ([`lost_starts`]): no
        // hash known. A stream that now ends before it says so through its
        // tail, judged beside it (the one finding of that loss, from the
        // stream's end on); still owed.
        Held::Missing { ends: Some(_) } if hashes.is_empty() => return None,
        Held::Missing { ends: None } if hashes.is_empty() => (
            "proved_rows_missing",
            seq,
            format!(
                "seq {seq} was in a lake file an earlier run proved, which is lost, and is not in \
                 the lake, though rows after it are: proved evidence left the lake (the file \
                 restored, or its rows delivered again, resolves this)"
            ),
        ),
        Held::Missing { ends: Some(0) } => (
            "proved_rows_missing",
            1,
            format!(
                "seqs 1..={seq} were proved by an earlier run (seq {seq} with hash {proved}) \
                 and no row of the stream is in the lake"
            ),
        ),
        Held::Missing { ends: Some(ends) } => (
            "proved_rows_missing",
            ends + 1,
            format!(
                "seqs {}..={seq} were proved by an earlier run (seq {seq} with hash {proved}) \
                 and are not in the lake: the stream now ends at seq {ends}",
                ends + 1
            ),
        ),
        Held::Missing { ends: None } => (
            "proved_rows_missing",
            seq,
            format!(
                "seq {seq} was proved by an earlier run (hash {proved}) and is not in the lake, \
                 though rows after it are"
            ),
        ),
        Held::Changed { found } => {
            let kept = hashes.iter().any(|h| found.binary_search(h).is_ok());
            (
                "proved_row_changed",
                seq,
                format!(
                    "seq {seq} was proved by an earlier run with hash {proved}; the lake's rows at \
                     seq {seq} have hash {}: {}",
                    found.join(", "),
                    if kept {
                        "a version proved there is gone"
                    } else {
                        "the stream's history was rewritten"
                    }
                ),
            )
        }
    };
    Some(Finding::new(code, key, detail).at(at, &event_id(*kind, key, at)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::LastHashes;
    use ledger_events::Stream;
    use ledger_ingest::Table;

    fn hash(c: char) -> String {
        std::iter::repeat_n(c, 64).collect()
    }

    fn tail(seq: u64, hashes: &[char]) -> Tail {
        Tail {
            last_seq: seq,
            last_hashes: LastHashes::of(
                hashes
                    .iter()
                    .map(|&c| hash(c))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str),
            ),
        }
    }

    fn account() -> StreamId {
        (Table::Account, Stream::Account, "acct_a".to_owned())
    }

    #[test]
    fn a_stream_ending_at_its_owed_seq_holds_it_only_with_every_proved_hash() {
        let owed = tail(7, &['a']);
        assert_eq!(judge(&owed, Some(&tail(7, &['a'])), None, &[]), Held::Yes);
        // A second version there is a conflict (the duplicates check's).
        assert_eq!(
            judge(&owed, Some(&tail(7, &['b', 'a'])), None, &[]),
            Held::Yes
        );
        let changed = judge(&owed, Some(&tail(7, &['b'])), None, &[]);
        assert_eq!(
            changed,
            Held::Changed {
                found: vec![hash('b')]
            }
        );
        let f = finding(&account(), &owed, &changed).unwrap();
        assert_eq!((f.code, f.seq), ("proved_row_changed", Some(7)));
        // The hashes found there each once, sorted, however they were read
        // (copies of a row give its hash once a copy).
        let read = [hash('c'), hash('b'), hash('c')];
        assert_eq!(
            judge(&owed, None, Some(&read), &[]),
            Held::Changed {
                found: vec![hash('b'), hash('c')]
            }
        );
        assert_eq!(f.event_id.as_deref(), Some("account:acct_a:7"));
        assert!(
            f.detail.contains(&hash('a')) && f.detail.contains(&hash('b')),
            "{}",
            f.detail
        );
        // Both versions of a conflict were proved: both are owed.
        let both = tail(7, &['a', 'b']);
        let one_gone = judge(&both, Some(&tail(7, &['a'])), None, &[]);
        assert!(matches!(one_gone, Held::Changed { .. }));
        let f = finding(&account(), &both, &one_gone).unwrap();
        assert!(
            f.detail.ends_with("a version proved there is gone"),
            "{}",
            f.detail
        );
        assert_eq!(
            judge(&both, Some(&tail(7, &['b', 'a'])), None, &[]),
            Held::Yes
        );
        // Owed as a damaged row's content (`crate::unproved`): held by that
        // row (its content hashes to it), or by a row that records it.
        let content = tail(7, &['c']);
        let damaged = Some(&tail(7, &['d']));
        assert_eq!(judge(&content, damaged, None, &[&hash('c')]), Held::Yes);
        assert_eq!(
            judge(&content, Some(&tail(7, &['c'])), None, &[]),
            Held::Yes
        );
        assert!(matches!(
            judge(&content, damaged, None, &[&hash('e')]),
            Held::Changed { .. }
        ));
        let now = tail(9, &['z']);
        assert_eq!(
            judge(&content, Some(&now), Some(&[hash('d')]), &[&hash('c')]),
            Held::Yes
        );
        // No row there: what a damaged row's content was says nothing.
        assert_eq!(
            judge(&content, Some(&now), Some(&[]), &[&hash('c')]),
            Held::Missing { ends: None }
        );
    }

    #[test]
    fn a_stream_ending_before_its_owed_seq_is_missing_from_the_first_absent_seq() {
        let owed = tail(7, &['a']);
        let short = judge(&owed, Some(&tail(4, &['c'])), None, &[]);
        assert_eq!(short, Held::Missing { ends: Some(4) });
        let f = finding(&account(), &owed, &short).unwrap();
        assert_eq!((f.code, f.seq), ("proved_rows_missing", Some(5)));
        assert!(
            f.detail.contains("seqs 5..=7") && f.detail.contains("ends at seq 4"),
            "{}",
            f.detail
        );
        let none = judge(&owed, None, None, &[]);
        assert_eq!(none, Held::Missing { ends: Some(0) });
        let f = finding(&account(), &owed, &none).unwrap();
        assert_eq!((f.code, f.seq), ("proved_rows_missing", Some(1)));
        assert!(f.detail.contains("no row of the stream"), "{}", f.detail);
    }

    #[test]
    fn a_lost_files_starts_in_a_gap_are_owed_without_a_hash_whichever_way_they_are_matched() {
        let id = account();
        let other = (Table::Account, Stream::Account, "acct_b".to_owned());
        let misfiled = (Table::Transfer, Stream::Account, id.2.clone());
        let at = |id: &StreamId, s| presence::fingerprint_at(id.1, &id.2, s);
        // Seqs 4 and 9 of the stream, and 5 of another, started stretches
        // in a lost file of the account table; seq 6 of the stream in one
        // of the transfer table, which is another stream's (misfiled).
        let notes = [at(&id, 4), at(&id, 9), at(&other, 5)];
        // A gap's spans (disjoint, as one stream's gaps are).
        let spans = [(1, 2), (3, 5), (6, 8), (9, 100)];
        // Listed seq by seq in one round, in rounds of a few seqs, or by
        // note (a span as long as the notes): the same.
        let files = [
            (Table::Account, &notes[..2]),
            (Table::Account, &notes[2..]),
            (Table::Transfer, &[at(&misfiled, 6)][..]),
        ];
        let find = |spans: &[(u64, u64)], seqs_max| {
            let spans: Vec<(&StreamId, u64, u64)> =
                spans.iter().map(|&(a, b)| (&id, a, b)).collect();
            lost_starts(&spans, &files, seqs_max)
        };
        for seqs_max in [1, 2, 3, 7, LOST_SEQS_MAX] {
            let owed = find(&spans, seqs_max);
            let seqs: Vec<u64> = owed.iter().map(|(_, t)| t.last_seq).collect();
            assert_eq!(seqs, [4, 9], "{seqs_max}");
            assert!(owed
                .iter()
                .all(|(i, t)| i == &id && t.last_hashes == LastHashes::None));
        }
        // Spans as long as the notes (three in the account table), matched
        // note by note, in their own table only.
        let seqs = |owed: Vec<(StreamId, Tail)>| -> Vec<u64> {
            owed.iter().map(|(_, t)| t.last_seq).collect()
        };
        assert_eq!(seqs(find(&[(2, 4), (5, 9)], 1)), [4, 9]);
        assert_eq!(seqs(find(&[(5, 7)], 1)), Vec::<u64>::new());
        let misfiled_span = [(&misfiled, 1, 10)];
        assert_eq!(seqs(lost_starts(&misfiled_span, &files, 4)), [6]);
        let owed = &find(&[(3, 4)], LOST_SEQS_MAX)[0];
        // Any row there holds it; none there, with rows after, is decided
        // and says proved evidence left the lake.
        assert_eq!(
            judge(&owed.1, Some(&tail(12, &['z'])), Some(&[hash('q')]), &[]),
            Held::Yes
        );
        let gone = judge(&owed.1, Some(&tail(12, &['z'])), Some(&[]), &[]);
        let f = finding(&id, &owed.1, &gone).unwrap();
        assert_eq!(
            (f.code, f.seq, f.youngest_ms),
            ("proved_rows_missing", Some(4), None)
        );
        assert!(
            f.detail.contains("proved evidence left the lake"),
            "{}",
            f.detail
        );
        // The stream now ends before it: its tail says so, not this.
        let short = judge(&owed.1, Some(&tail(2, &['z'])), None, &[]);
        assert_eq!(short, Held::Missing { ends: Some(2) });
        assert_eq!(finding(&id, &owed.1, &short), None);
    }

    #[test]
    fn a_stream_past_its_owed_seq_is_decided_by_the_rows_at_that_seq() {
        let owed = tail(7, &['a']);
        let now = tail(12, &['z']);
        assert_eq!(judge(&owed, Some(&now), None, &[]), Held::Look);
        assert_eq!(finding(&account(), &owed, &Held::Look), None);
        assert_eq!(judge(&owed, Some(&now), Some(&[hash('a')]), &[]), Held::Yes);
        let gap = judge(&owed, Some(&now), Some(&[]), &[]);
        assert_eq!(gap, Held::Missing { ends: None });
        let f = finding(&account(), &owed, &gap).unwrap();
        assert_eq!((f.code, f.seq), ("proved_rows_missing", Some(7)));
        assert!(f.detail.contains("rows after it are"), "{}", f.detail);
        assert!(matches!(
            judge(&owed, Some(&now), Some(&[hash('b')]), &[]),
            Held::Changed { .. }
        ));
    }
}
