//! Which hashes a row that fails its hash records were ever proved: the
//! lake owes a proved tail, and a proved conflict's versions, with the
//! hashes they were proved with (`crate::retained`), but not a hash no run
//! proved.
//!
//! A row whose content does not hash to its recorded hash is a
//! `hash_mismatch`. What it records is one of several things, and the
//! lake alone cannot say which:
//!
//! - a hash no run proved there: the row arrived damaged (in its `hash`
//!   column or its content, a copy damaged on its way), or a proved row's
//!   `hash` column was damaged at rest. docs/LAKE.md's repair (the file as
//!   ingest wrote it put back, or the damaged copy moved out) leaves a row
//!   with another recorded hash, or none, at that seq. Owing the damaged
//!   hash would report that repair as `proved_row_changed` every night
//!   after (rev-s60-nights 1, 2);
//! - a hash an earlier run proved at that seq, on a row since altered
//!   under it (its content changed, its hash kept), or a hash an intact
//!   row at the same seq records (a copy altered beside it). Not owing it
//!   would let the row be resealed with its new content a night later,
//!   the proved row gone without a finding (rev-s60-diff 1).
//!
//! So each `hash_mismatch` keeps what is owed of its row ([`Owes`];
//! `Finding::hash_owed`, in the checkpoint beside the finding, not in
//! reports: a proof without a checkpoint cannot know it, and a resumed
//! night reports what a full proof does), decided the night that makes it
//! ([`mark`]):
//!
//! - its recorded hash when another row at the seq records it and hashes
//!   to it (the completeness check, which sees the rows, says so: a copy
//!   altered beside the intact row);
//! - else what the previous checkpoint's `hash_mismatch` of the same row
//!   (the same recorded hash and content) owed;
//! - else its recorded hash when that checkpoint proved it at that seq
//!   (its tail there, a conflict's versions there, a tail it owed there,
//!   as proved or as owed): a proved row altered under its hash;
//! - else its content when that checkpoint proved what the content hashes
//!   to there: a proved row whose `hash` column alone was damaged at rest
//!   (rev-s61-diff2 2, rev-s61-red4 F2, L1);
//! - else its recorded hash when that checkpoint proved the stream up to
//!   that seq or past it and no row there is intact: the chain proved one
//!   row there, now altered (rev-s61-diff 2: on the night the rows after
//!   it were lost);
//! - else the row as it was most likely written ([`as_written`]): it
//!   arrived damaged, and no run proved a hash there. What its content
//!   hashes to when its recorded hash is a damaged copy of that (most of
//!   its digits in place, or not a hash at all), else its recorded hash
//!   (its content damaged: rev-s61-diff2 1);
//! - and its content beside any of the above when that checkpoint proved
//!   what the content hashes to there ([`Owes::Both`]): the proved row is
//!   this one, its hash column overwritten, with a forgery's hash beside
//!   it or a conflict's other version's (rev-s61-red5 M1, M2, C4). Such a
//!   row is owed at its seq in its own right ([`evidence`]).
//!
//! A finding of a checkpoint written before, with no mark, owes its
//! recorded hash: such a checkpoint owes as it did.
//!
//! The tails and conflicts' versions a run judges from its checkpoint
//! ([`Marks::owed`]) owe a hash such rows record as they owe (rev-s61-red3
//! T1, T2, C1: a hash dropped while another was owed there let a forged
//! version beside the damaged row stand for the proved one). The damaged
//! row left as it is holds what it owes (its `hash_mismatch` says what its
//! content hashes to: [`Marks::contents`]), and so does the row as ingest
//! wrote it put back: the repair holds. A row of other content in its place, resealed
//! or not, does not, nor a stream rewritten from its previous proved tail
//! on, the damaged row resealed with the rest (rev-s61-red 1: nothing
//! after a tail chains to it).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::checkpoint::{StreamFinding, StreamId};
use crate::checks::{completeness, duplicates};
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

/// The hash a `hash_mismatch` finding records, and what its row's content
/// hashes to. `None` for any other finding, or a detail not of
/// [`detail`]'s form.
pub fn recorded(f: &Finding) -> Option<(&str, &str)> {
    if f.code != CODE {
        return None;
    }
    let rest = f.detail.strip_prefix(RECORDED)?;
    // The content's hash is 64 hex digits, so the split from the right is
    // exact whatever the recorded hash holds.
    let (recorded, content) = rest.rsplit_once(CONTENT)?;
    let hex = content.len() == 64 && content.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then_some((recorded, content))
}

/// The hash a row that fails its hash most likely had as ingest wrote it
/// (`recorded`, and `content`: what its content hashes to): its
/// content's when its recorded hash is a damaged copy of that (not a
/// hash's form, or at least half of its 64 digits in place: a flipped bit
/// changes one digit, while an unrelated hash keeps about 4 in place);
/// else the recorded one, its content damaged. Either pins the row whole:
/// a row of other content, resealed, holds neither.
pub fn as_written<'a>(recorded: &'a str, content: &'a str) -> &'a str {
    let (r, c) = (recorded.as_bytes(), content.as_bytes());
    let hash_form = crate::stream::unhex(recorded).is_some();
    let in_place = r.iter().zip(c).filter(|(a, b)| a == b).count();
    if !hash_form || in_place >= 32 {
        content
    } else {
        recorded
    }
}

/// What the lake owes of a row that fails its hash, where a tail or a
/// conflict's versions are judged from a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owes {
    /// No hash a run proved: the row as it was most likely written
    /// ([`as_written`]).
    AsWritten,
    /// What its content hashes to: a hash a run proved there (its `hash`
    /// column alone was damaged).
    Content,
    /// The hash it records: one a run proved there, or one an intact row
    /// there records.
    Recorded,
    /// Both: its recorded hash is owed, and its content is a row a run
    /// proved there (rev-s61-red5 M1, M2, C4: owing the recorded hash alone
    /// let the proved content go with the damaged row).
    Both,
}

impl Owes {
    /// What a row that records `recorded`, whose content hashes to
    /// `content`, owes.
    pub fn hashes<'a>(self, recorded: &'a str, content: &'a str) -> Vec<&'a str> {
        match self {
            Owes::AsWritten => vec![as_written(recorded, content)],
            Owes::Content => vec![content],
            Owes::Recorded => vec![recorded],
            Owes::Both => vec![recorded, content],
        }
    }

    /// Whether it owes what its content hashes to as proved.
    pub fn content(self) -> bool {
        matches!(self, Owes::Content | Owes::Both)
    }

    /// What two findings of one row owe: all either does.
    pub fn and(self, other: Owes) -> Owes {
        use Owes::*;
        let recorded = |o| matches!(o, Recorded | Both);
        match (
            recorded(self) || recorded(other),
            self.content() || other.content(),
        ) {
            (true, true) => Both,
            (true, false) => Recorded,
            (false, true) => Content,
            (false, false) => AsWritten,
        }
    }

    /// This, and the content too.
    fn with_content(self) -> Owes {
        self.and(Owes::Content)
    }
}

/// The `hash_mismatch` findings of a proof, by stream and seq: at each, by
/// the hash each row records, what the row's content hashes to and what is
/// owed of it. Of a checkpoint, the marks a run judges its tails by
/// ([`Marks::owed`]); of this run's proof, the rows that fail their hash,
/// whose content a tail may be owed as ([`Marks::contents`]).
#[derive(Debug, Default)]
pub struct Marks(HashMap<(Table, Stream), HashMap<String, BySeq>>);

/// A stream's `hash_mismatch` findings, by seq, then by recorded hash:
/// each row's content hash and what is owed of it.
type BySeq = BTreeMap<u64, HashMap<String, Rows>>;

/// The rows at one seq recording one hash: what each one's content hashes
/// to, with what it owes (by content: a row among thousands of damaged
/// copies is found with one look-up).
type Rows = BTreeMap<String, Owes>;

impl Marks {
    /// The marks of `findings` (a finding with none owes its recorded
    /// hash).
    pub fn of(findings: &[StreamFinding]) -> Marks {
        let mut marks = Marks::default();
        for f in findings.iter().filter(|f| f.check == completeness::NAME) {
            let (Some((h, c)), Some(seq)) = (recorded(&f.finding), f.finding.seq) else {
                continue;
            };
            let owes = f.finding.hash_owed.unwrap_or(Owes::Recorded);
            let (table, stream, key) = &f.stream;
            let rows = marks
                .0
                .entry((*table, *stream))
                .or_default()
                .entry(key.clone())
                .or_default()
                .entry(seq)
                .or_default()
                .entry(h.to_owned())
                .or_default();
            match rows.get_mut(c) {
                // Two findings of one row (copies alike): all either owes.
                Some(row) => *row = row.and(owes),
                None => {
                    rows.insert(c.to_owned(), owes);
                }
            }
        }
        marks
    }

    /// What the finding of `stream` at `seq` of a row recording `hash`
    /// whose content hashes to `content` owed (`None`: there was none).
    pub fn get(&self, stream: &StreamId, seq: u64, hash: &str, content: &str) -> Option<Owes> {
        let rows = self.at((stream.0, stream.1, &stream.2), seq)?.get(hash)?;
        rows.get(content).copied()
    }

    /// The marks at `seq` of the stream `key` of `table`.
    fn at(
        &self,
        (table, stream, key): (Table, Stream, &str),
        seq: u64,
    ) -> Option<&HashMap<String, Rows>> {
        self.0.get(&(table, stream))?.get(key)?.get(&seq)
    }

    /// What the content of the rows at `seq` of the stream `key` of
    /// `table` that fail their hash hashes to: rows the lake holds, as
    /// [`Marks::owed`] may owe them.
    pub fn contents(&self, at: (Table, Stream, &str), seq: u64) -> Vec<&str> {
        self.at(at, seq)
            .into_iter()
            .flat_map(|m| m.values().flat_map(|rows| rows.keys()))
            .map(String::as_str)
            .collect()
    }

    /// What the lake owes of `tail`, proved of the stream `key` of `table`
    /// (the module's doc says why): each of its hashes that rows failing it
    /// record as those rows owe ([`Owes::hashes`]; one an intact row
    /// records too is owed by the finding beside it), the others as they
    /// are. Borrowed, with nothing allocated, for a tail with no such mark.
    pub fn owed<'t>(&self, at: (Table, Stream, &str), tail: &'t Tail) -> Cow<'t, Tail> {
        let seq = tail.last_seq;
        let Some(marks) = self.at(at, seq) else {
            return Cow::Borrowed(tail);
        };
        let hashes: Vec<String> = tail.last_hashes.clone().into();
        if !hashes.iter().any(|h| marks.contains_key(h)) {
            return Cow::Borrowed(tail);
        }
        let mut owed: Vec<&str> = Vec::with_capacity(hashes.len());
        for h in &hashes {
            match marks.get(h) {
                Some(rows) => owed.extend(rows.iter().flat_map(|(c, owes)| owes.hashes(h, c))),
                None => owed.push(h),
            }
        }
        owed.sort_unstable();
        owed.dedup();
        // The same hashes (compared sorted: a tail may hold thousands).
        let mut had: Vec<&str> = hashes.iter().map(String::as_str).collect();
        had.sort_unstable();
        had.dedup();
        if owed == had {
            return Cow::Borrowed(tail);
        }
        Cow::Owned(Tail {
            last_seq: seq,
            last_hashes: LastHashes::of(owed),
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

/// The (stream, seq) of every `hash_mismatch` in `findings` not marked yet
/// (or marked by the completeness check alone, [`mark`] adds to it).
pub fn unmarked_at(findings: &[StreamFinding]) -> Vec<(&StreamId, u64)> {
    findings
        .iter()
        .filter(|f| f.check == completeness::NAME)
        .filter(|f| matches!(f.finding.hash_owed, None | Some(Owes::Recorded)))
        .filter(|f| recorded(&f.finding).is_some())
        .filter_map(|f| Some((&f.stream, f.finding.seq?)))
        .collect()
}

/// What the previous checkpoint proved of a stream where this run's
/// `hash_mismatch` findings are ([`mark`]).
pub trait Proved {
    /// Whether it proved `hash` at `seq` (its tail there, a conflict's
    /// versions there, a tail it owed there).
    fn hash_at(&self, stream: &StreamId, seq: u64, hash: &str) -> bool;
    /// Whether it proved the stream up to `seq` or past it.
    fn reaches(&self, stream: &StreamId, seq: u64) -> bool;
}

/// Marks every `hash_mismatch` of `findings` not marked yet
/// (`Finding::hash_owed`; the module's doc gives the rule): as the previous
/// checkpoint's finding of the same row (its recorded hash and its
/// content) was (`prior`); else its recorded hash when that checkpoint
/// proved it there (as proved, or as owed); else its content when that
/// checkpoint proved what the content hashes to there (its `hash` column
/// alone was damaged); else its recorded hash when that checkpoint proved
/// the stream up to the seq or past it and no row there is intact (of this
/// proof's rows: a conflict's version without a `hash_mismatch`, or a copy
/// the completeness check found beside an intact row); else as it was
/// most likely written. A row at seq 0 is outside the chain and owed by
/// nothing.
pub fn mark(findings: &mut [StreamFinding], prior: &Marks, proved: &impl Proved) {
    let intact = intact_at(findings);
    for f in findings.iter_mut().filter(|f| {
        f.check == completeness::NAME && matches!(f.finding.hash_owed, None | Some(Owes::Recorded))
    }) {
        let Some((h, content)) = recorded(&f.finding) else {
            continue;
        };
        let seq = f.finding.seq.unwrap_or(0);
        let id = &f.stream;
        let owes = if let Some(owes) = f.finding.hash_owed {
            // The completeness check's: an intact row beside it.
            owes
        } else if seq == 0 {
            Owes::AsWritten
        } else if let Some(owes) = prior.get(id, seq, h, content) {
            owes
        } else if proved.hash_at(id, seq, h) {
            Owes::Recorded
        } else if proved.hash_at(id, seq, content) {
            Owes::Content
        } else if proved.reaches(id, seq) && !intact.contains(&(id.clone(), seq)) {
            Owes::Recorded
        } else {
            Owes::AsWritten
        };
        // A row whose content was proved there owes it, whatever else.
        let owes = match seq > 0 && proved.hash_at(id, seq, content) {
            true => owes.with_content(),
            false => owes,
        };
        f.finding.hash_owed = Some(owes);
    }
}

/// What the lake owes of a `hash_mismatch` row whose content was proved
/// at its seq, as a tail at that seq: what it owes ([`Owes::hashes`]). A
/// proved conflict's version whose hash column was overwritten with the
/// other version's hash leaves no conflict to owe it (rev-s61-red5 C4):
/// the row is then the only record of it. `None` for any other finding.
pub fn evidence(f: &StreamFinding) -> Option<(StreamId, Tail)> {
    let owes = f.finding.hash_owed.filter(|o| o.content())?;
    let seq = f.finding.seq.filter(|&s| s > 0)?;
    let (h, c) = recorded(&f.finding)?;
    Some((
        f.stream.clone(),
        Tail {
            last_seq: seq,
            last_hashes: LastHashes::of(owes.hashes(h, c)),
        },
    ))
}

/// The seqs of this proof's `hash_mismatch` findings not marked yet where
/// a row hashes to its recorded hash: a conflict there names a version no
/// `hash_mismatch` there records, or the completeness check marked one of
/// them owed (an intact row beside it records its hash; every finding of
/// a seq a run proves is its own, so such a mark is this proof's).
fn intact_at(findings: &[StreamFinding]) -> HashSet<(StreamId, u64)> {
    let wanted: HashSet<(&StreamId, u64)> = unmarked_at(findings).into_iter().collect();
    let mut damaged: HashMap<(&StreamId, u64), HashSet<&str>> = HashMap::new();
    let mut intact = HashSet::new();
    for f in findings {
        let Some(seq) = f.finding.seq.filter(|&s| wanted.contains(&(&f.stream, s))) else {
            continue;
        };
        if let Some((h, _)) = recorded(&f.finding) {
            damaged.entry((&f.stream, seq)).or_default().insert(h);
            if f.finding.hash_owed == Some(Owes::Recorded) {
                intact.insert((f.stream.clone(), seq));
            }
        }
    }
    for f in findings.iter().filter(|f| f.check == duplicates::NAME) {
        let Some(seq) = f.finding.seq.filter(|&s| wanted.contains(&(&f.stream, s))) else {
            continue;
        };
        let failing = damaged.get(&(&f.stream, seq));
        if duplicates::versions(&f.finding)
            .is_some_and(|vs| vs.iter().any(|v| !failing.is_some_and(|d| d.contains(v))))
        {
            intact.insert((f.stream.clone(), seq));
        }
    }
    intact
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

    fn mismatch(key: &str, seq: u64, recorded: &str, owes: Option<Owes>) -> StreamFinding {
        mismatch_of(key, seq, recorded, &hash('c'), owes)
    }

    /// A `hash_mismatch` whose row's content hashes to `content`.
    fn mismatch_of(
        key: &str,
        seq: u64,
        recorded: &str,
        content: &str,
        owes: Option<Owes>,
    ) -> StreamFinding {
        let mut finding = Finding::new(CODE, key, detail(recorded, content)).at(seq, "e");
        finding.hash_owed = owes;
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
            assert_eq!(
                recorded(&f),
                Some((h.as_str(), hash('c').as_str())),
                "{}",
                f.detail
            );
        }
        // Another code, or a detail of another form, reads as none.
        let mut other = mismatch("acme.a", 3, &hash('a'), None).finding;
        other.code = "chain_break";
        assert_eq!(recorded(&other), None);
        let garbled = Finding::new(CODE, "acme.a", "recorded hash aa".into());
        assert_eq!(recorded(&garbled), None);
    }

    #[test]
    fn a_row_is_owed_as_written_unless_one_damaged_column_is_what_was_proved() {
        let (r, c) = (hash('a'), hash('b'));
        // An unrelated recorded hash: the content was damaged.
        assert_eq!(as_written(&r, &c), r);
        // One digit, or half of them, changed; or not a hash: the column.
        let near = format!("f{}", &c[1..]);
        assert_eq!(as_written(&near, &c), c);
        let half = format!("{}{}", &r[..32], &c[32..]);
        assert_eq!(as_written(&half, &c), c);
        for column in ["", "not hex", &c.to_uppercase(), &c[1..]] {
            assert_eq!(as_written(column, &c), c, "{column:?}");
        }
    }

    /// What a checkpoint proved, for [`mark`]: hashes at (stream key,
    /// seq; `None`: any), and how far each stream.
    struct Checkpoint {
        hashes: Vec<(&'static str, u64, Option<String>)>,
        reach: Vec<(&'static str, u64)>,
    }

    impl Proved for Checkpoint {
        fn hash_at(&self, s: &StreamId, seq: u64, hash: &str) -> bool {
            self.hashes
                .iter()
                .any(|(k, at, h)| *k == s.2 && *at == seq && h.as_deref().is_none_or(|h| h == hash))
        }
        fn reaches(&self, s: &StreamId, seq: u64) -> bool {
            self.reach.iter().any(|&(k, last)| k == s.2 && last >= seq)
        }
    }

    fn conflict(key: &str, seq: u64, versions: &[String]) -> StreamFinding {
        let detail = format!(
            "{} versions: hashes {}",
            versions.len(),
            versions.join(", ")
        );
        StreamFinding {
            check: duplicates::NAME,
            stream: id(key),
            finding: Finding::new("conflict", key, detail).at(seq, "e"),
        }
    }

    #[test]
    fn a_night_marks_by_the_previous_mark_then_by_what_was_proved_there() {
        use Owes::*;
        let prior = Marks::of(&[
            mismatch("acme.a", 4, &hash('a'), Some(AsWritten)),
            mismatch("acme.b", 4, &hash('b'), Some(Content)),
            // Written before marks: its recorded hash.
            mismatch("acme.c", 4, &hash('c'), None),
            // The same recorded hash, another content: not this row's.
            mismatch_of("acme.k", 4, &hash('k'), &hash('1'), Some(AsWritten)),
        ]);
        let mut findings = vec![
            mismatch("acme.a", 4, &hash('a'), None),
            mismatch("acme.b", 4, &hash('b'), None),
            mismatch("acme.c", 4, &hash('c'), None),
            mismatch_of("acme.k", 4, &hash('k'), &hash('2'), None),
            // No earlier finding: what was proved there decides.
            mismatch("acme.d", 4, &hash('d'), None),
            mismatch("acme.d", 5, &hash('e'), None),
            // Its content proved there, not its hash: its hash column.
            mismatch_of("acme.l", 4, &hash('x'), &hash('9'), None),
            // Marked by the proof itself (an intact row beside): kept, and
            // its content too where that was proved.
            mismatch("acme.e", 4, &hash('e'), Some(Recorded)),
            mismatch_of("acme.m", 4, &hash('e'), &hash('9'), Some(Recorded)),
            // Its hash and its content proved there: both.
            mismatch_of("acme.n", 4, &hash('n'), &hash('9'), None),
            // Outside the chain: never owed.
            mismatch("acme.f", 0, &hash('f'), None),
            // Proved past it, the only row there: its recorded hash. With
            // an intact version of a conflict beside it, or a copy beside
            // an intact row recording its hash: as written.
            mismatch("acme.g", 3, &hash('g'), None),
            mismatch("acme.h", 3, &hash('h'), None),
            conflict("acme.h", 3, &[hash('h'), hash('i')]),
            mismatch("acme.i", 3, &hash('h'), None),
            mismatch("acme.i", 3, &hash('i'), Some(Recorded)),
            // Two damaged versions of a conflict: the only rows there.
            mismatch("acme.j", 3, &hash('h'), None),
            mismatch("acme.j", 3, &hash('i'), None),
            conflict("acme.j", 3, &[hash('h'), hash('i')]),
        ];
        let proved = Checkpoint {
            // The earlier mark wins over what was proved at acme.a's seq 4.
            hashes: vec![
                ("acme.a", 4, Some(hash('a'))),
                ("acme.d", 4, Some(hash('d'))),
                ("acme.f", 0, None),
                ("acme.k", 4, Some(hash('k'))),
                ("acme.l", 4, Some(hash('9'))),
                ("acme.m", 4, Some(hash('9'))),
                ("acme.n", 4, None),
            ],
            reach: ["acme.f", "acme.g", "acme.h", "acme.i", "acme.j", "acme.l"]
                .map(|k| (k, 9))
                .to_vec(),
        };
        // (Those the completeness check marked are marked again.)
        assert_eq!(unmarked_at(&findings).len(), 17);
        mark(&mut findings, &prior, &proved);
        let marks: Vec<(&str, Option<Owes>)> = findings
            .iter()
            .filter(|f| f.finding.code == CODE)
            .map(|f| (f.stream.2.as_str(), f.finding.hash_owed))
            .collect();
        let want = [
            ("acme.a", AsWritten),
            ("acme.b", Content),
            ("acme.c", Recorded),
            ("acme.k", Recorded),
            ("acme.d", Recorded),
            ("acme.d", AsWritten),
            ("acme.l", Content),
            ("acme.e", Recorded),
            ("acme.m", Both),
            ("acme.n", Both),
            ("acme.f", AsWritten),
            ("acme.g", Recorded),
            ("acme.h", AsWritten),
            ("acme.i", AsWritten),
            ("acme.i", Recorded),
            ("acme.j", Recorded),
            ("acme.j", Recorded),
        ];
        assert_eq!(marks, want.map(|(k, o)| (k, Some(o))));
        assert!(findings
            .iter()
            .all(|f| f.finding.code != CODE || f.finding.hash_owed.is_some()));
        // Marking again changes nothing.
        let again = findings.clone();
        let nothing = Checkpoint {
            hashes: vec![],
            reach: vec![],
        };
        mark(&mut findings, &prior, &nothing);
        assert_eq!(findings, again);
    }

    #[test]
    fn a_tail_owes_each_damaged_row_as_marked() {
        use Owes::*;
        let marks = Marks::of(&[
            // Its content damaged (far from its recorded hash): as written,
            // its recorded hash.
            mismatch_of("acme.a", 7, &hash('a'), &hash('1'), Some(AsWritten)),
            mismatch("acme.a", 7, &hash('b'), Some(Recorded)),
            // The same hash at another seq, or of another stream: not this.
            mismatch("acme.a", 6, &hash('c'), Some(AsWritten)),
            // Two findings of one row: the most owed.
            mismatch("acme.c", 7, &hash('d'), Some(AsWritten)),
            mismatch("acme.c", 7, &hash('d'), Some(Recorded)),
            mismatch_of("acme.e", 7, &hash('e'), &hash('1'), Some(AsWritten)),
            mismatch_of("acme.e", 7, &hash('f'), &hash('2'), Some(AsWritten)),
            // Its content what was proved: that; and both.
            mismatch_of("acme.g", 7, &hash('x'), &hash('9'), Some(Content)),
            mismatch_of("acme.h", 7, &hash('h'), &hash('9'), Some(Both)),
        ]);
        let tail = |hs: &[&str]| Tail {
            last_seq: 7,
            last_hashes: LastHashes::of(hs.iter().copied()),
        };
        let h = |cs: &str| cs.chars().map(hash).collect::<Vec<_>>();
        fn at(key: &str) -> (Table, Stream, &str) {
            (Table::Account, Stream::Account, key)
        }
        let owed = |key: &str, hs: &str| {
            let hs = h(hs);
            let hs: Vec<&str> = hs.iter().map(String::as_str).collect();
            let got: Vec<String> = marks.owed(at(key), &tail(&hs)).last_hashes.clone().into();
            let mut got: Vec<char> = got.iter().map(|x| x.chars().next().unwrap()).collect();
            got.sort_unstable();
            got.into_iter().collect::<String>()
        };
        assert_eq!(owed("acme.a", "abc"), "abc");
        assert_eq!(owed("acme.a", "a"), "a");
        assert_eq!(owed("acme.e", "ef"), "ef");
        assert_eq!(owed("acme.g", "x"), "9");
        assert_eq!(owed("acme.h", "h"), "9h");
        assert_eq!(owed("acme.g", "xq"), "9q");
        // A hash column damaged (one digit, or not a hash): the content.
        let near = format!("f{}", &hash('1')[1..]);
        let column = Marks::of(&[
            mismatch_of("acme.f", 7, &near, &hash('1'), Some(AsWritten)),
            mismatch_of("acme.f", 7, "not hex", &hash('2'), Some(AsWritten)),
            mismatch_of("acme.f", 7, &hash('3'), &hash('4'), Some(Recorded)),
        ]);
        let damaged = tail(&[&near, "not hex", &hash('3'), &hash('5')]);
        let want: Vec<String> = h("1235");
        let got: Vec<String> = column
            .owed(at("acme.f"), &damaged)
            .last_hashes
            .clone()
            .into();
        assert_eq!(got, want);
        // Nothing to change: borrowed.
        for (key, hs) in [("acme.d", "a"), ("acme.a", "b"), ("acme.c", "d")] {
            let hs = h(hs);
            let hs: Vec<&str> = hs.iter().map(String::as_str).collect();
            assert!(matches!(marks.owed(at(key), &tail(&hs)), Cow::Borrowed(_)));
        }
        assert_eq!(
            marks.owe(at("acme.g"), tail(&[&hash('x')])),
            tail(&[&hash('9')])
        );
        // The contents of a proof's damaged rows at a seq.
        let mut contents = marks.contents(at("acme.e"), 7);
        contents.sort_unstable();
        assert_eq!(contents, [hash('1'), hash('2')]);
        assert_eq!(marks.contents(at("acme.e"), 6), Vec::<&str>::new());
        assert_eq!(marks.contents(at("acme.x"), 7), Vec::<&str>::new());
    }

    #[test]
    fn a_row_whose_content_was_proved_is_evidence_in_its_own_right() {
        use Owes::*;
        let at = |owes, seq| evidence(&mismatch_of("acme.a", seq, &hash('a'), &hash('9'), owes));
        let owed = |hs: &[char]| {
            Some((
                id("acme.a"),
                Tail {
                    last_seq: 3,
                    last_hashes: LastHashes::of(
                        hs.iter()
                            .map(|&c| hash(c))
                            .collect::<Vec<_>>()
                            .iter()
                            .map(String::as_str),
                    ),
                },
            ))
        };
        assert_eq!(at(Some(Content), 3), owed(&['9']));
        assert_eq!(at(Some(Both), 3), owed(&['a', '9']));
        for (owes, seq) in [
            (Some(Recorded), 3),
            (Some(AsWritten), 3),
            (None, 3),
            (Some(Content), 0),
        ] {
            assert_eq!(at(owes, seq), None, "{owes:?} {seq}");
        }
    }
}
