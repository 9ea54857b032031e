//! Which streams have rows in which lake file: what lets a resumed run see a
//! compaction whose outputs hold no row of a stream that one of its inputs
//! held.
//!
//! A resumed run finds the rows of a compacted file again as copies of
//! proved rows (`crate::copies`); a stream with *some* rows in the outputs
//! but not all of them is re-proved from its first event, and its gap or its
//! missing tail is found. A stream with *no* row left in the outputs leaves
//! nothing to re-prove: the run would never look at it. So the checkpoint
//! keeps, per lake file it proved, the fingerprint of every stream with a row
//! in it, and a run that finds a proved file replaced by compaction reads the
//! `stream` and `stream_key` columns of the files that replaced it: a stream
//! of the file absent from them makes the file lost ([`crate::custody`]), and
//! the run proves the lake from its first event, judging every tail its
//! checkpoint proved. (Per file, not per partition: a partition's other
//! files may hold other rows of the stream.)
//!
//! A run notes the streams of every file it reads (a full run: all of them;
//! a resumed run: the new ones, added to its checkpoint's) and keeps those
//! of the files the lake lists: per stretch of a stream's rows in a file,
//! the stream with the seq the stretch starts at ([`fingerprint_at`]) and
//! how many rows the stretch holds ([`Noter`]; every row, a plain duplicate
//! the proof drops or a second version too), which the keyed scans check
//! (`crate::keyed`): 12 bytes a note (a parallel `u32`, not a pair, which
//! would take 16). Notes read from a file of streams before layout 3
//! (checkpoint version 17) hold no counts.
//!
//! A stretch is a run of that file's rows of the stream in the proof's
//! merged order, cut wherever the rows skip a seq, and after seq 0 (no
//! row of a chain: a stretch that holds it holds nothing else): one that
//! starts at `s` with `n` rows holds seqs `s..s + n` only, which
//! `crate::custody` holds a compaction's outputs to (notes written by
//! earlier builds were not cut at a skipped seq, and before checkpoint
//! version 21 not after seq 0). The plain duplicates the proof drops are the
//! exception to the merged order: each comes right after the run of kept
//! rows it was dropped behind, even when that run goes on past it
//! (`stream::StreamRows::file_runs`), so a stretch's bounds may be off the
//! merged order's by such a row. How many rows each file holds of each
//! stream, the sum over its stretches, is exact, and
//! that is what the keyed scans check.
//!
//! A fingerprint is 64 bits of a fixed hash of the stream kind and key
//! ([`fingerprint`], stable across builds: it is written to checkpoints). A
//! stream missing from a compaction's outputs goes unseen only if its
//! fingerprint equals another's there: about n / 2⁶⁴ for n streams there.
//! Pure: no I/O.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ledger_events::Stream;

use crate::codec::Reader;
#[cfg(test)]
use crate::codec::Writer;

/// A stream's fingerprint ([`fingerprint`]).
pub type Fingerprint = u64;

/// The fingerprint of the stream `key` of kind `stream`: a multiply-xorshift
/// hash of the kind's name and the key, eight bytes at a time, each with its
/// length (so no two (kind, key) pairs are the same bytes), and a final
/// mix. Written to checkpoints: never change it without a format version.
pub fn fingerprint(stream: Stream, key: &str) -> Fingerprint {
    const M: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0x6C65_6467_6572_2D70; // "ledger-p"
    for part in [stream.as_str().as_bytes(), key.as_bytes()] {
        h = (h ^ part.len() as u64).wrapping_mul(M);
        for chunk in part.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            h = (h ^ u64::from_le_bytes(w)).wrapping_mul(M);
            h ^= h >> 32;
        }
    }
    // The finalizer of SplitMix64.
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// The fingerprint of the stream `key` of kind `stream` starting, in one
/// lake file, at `seq` (the first of its rows there): [`fingerprint`]
/// mixed with the seq. A compaction output that holds the stream but not
/// that row cut the start of what the file held (the copies after it
/// still chain to the proved tail, so only this tells). Written to
/// checkpoints: never change it without a format version.
pub fn fingerprint_at(stream: Stream, key: &str, seq: u64) -> Fingerprint {
    at_seq(fingerprint(stream, key), seq)
}

/// [`fingerprint_at`] from the stream's [`fingerprint`].
pub fn at_seq(stream: Fingerprint, seq: u64) -> Fingerprint {
    let mut h = stream ^ seq.wrapping_mul(SEQ_MUL);
    h = (h ^ (h >> 30)).wrapping_mul(MIX_1);
    h = (h ^ (h >> 27)).wrapping_mul(MIX_2);
    h ^ (h >> 31)
}

const SEQ_MUL: u64 = 0x9E37_79B9_7F4A_7C15;
const MIX_1: u64 = 0xBF58_476D_1CE4_E5B9;
const MIX_2: u64 = 0x94D0_49BB_1331_11EB;

/// The seq at which `at` is the fingerprint of the stream `stream`
/// ([`at_seq`] undone: every step of its mix is a bijection of `u64`).
/// Any fingerprint gives some seq for any stream; one noted for another
/// stream gives a seq spread over all of `u64`, so a small one (at most
/// the stream's last) is a false match with odds of about last / 2⁶⁴.
pub fn seq_at(stream: Fingerprint, at: Fingerprint) -> u64 {
    seq_of_unmixed(stream, unmix(at))
}

/// The part of [`seq_at`] that does not depend on the stream: `at` with
/// its final mix undone (to match one fingerprint against many streams).
pub fn unmix(at: Fingerprint) -> u64 {
    let h = unshift(at, 31).wrapping_mul(INVERSE_MIX_2);
    unshift(unshift(h, 27).wrapping_mul(INVERSE_MIX_1), 30)
}

/// [`seq_at`] from [`unmix`]'s value.
pub fn seq_of_unmixed(stream: Fingerprint, unmixed: u64) -> u64 {
    (unmixed ^ stream).wrapping_mul(INVERSE_SEQ_MUL)
}

const INVERSE_SEQ_MUL: u64 = inverse(SEQ_MUL);
const INVERSE_MIX_1: u64 = inverse(MIX_1);
const INVERSE_MIX_2: u64 = inverse(MIX_2);

/// `x` from `x ^ (x >> s)`.
const fn unshift(y: u64, s: u32) -> u64 {
    let mut x = y;
    let mut k = s;
    while k < 64 {
        x = y ^ (x >> s);
        k += s;
    }
    x
}

/// The inverse of the odd `m` modulo 2⁶⁴ (Newton's iteration: each step
/// doubles the bits that are right, from the 3 that `m` itself gets).
const fn inverse(m: u64) -> u64 {
    let mut x = m;
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// Per lake file (key), the fingerprints of the streams with a row in it
/// (a run appends; repeats are dropped when it is written), and how many
/// rows each such stretch holds ([`Noter`]; none for sets read from a file
/// of streams before layout 3, checkpoint version 17).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Presence {
    parts: BTreeMap<String, Part>,
}

/// One file's notes: fingerprints, and the rows of each (a parallel vector,
/// so a note costs 12 bytes, not the 16 a pair would; `None`: not counted).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    fps: Vec<Fingerprint>,
    rows: Option<Vec<u32>>,
}

/// One file's notes sorted by fingerprint, each once ([`Presence::counted`]):
/// a repeated fingerprint's rows are the sum of its repeats' (saturating at
/// `u32::MAX`, which so reads "at least that many").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counted {
    pub fps: Vec<Fingerprint>,
    /// As many as `fps`; `None` when the notes hold no counts.
    pub rows: Option<Vec<u32>>,
}

impl Presence {
    /// Notes the streams `fps` as having rows in `file`, each with as many
    /// rows as `rows` says at its index (`None`: not counted, as the sets of
    /// a file of streams before layout 3; a file's notes are counted only
    /// while every one added is, and are never counted and not: a debug
    /// build asserts it, [`Part::extend`]).
    pub fn add(&mut self, file: &str, fps: &[Fingerprint], rows: Option<&[u32]>) {
        if fps.is_empty() {
            return;
        }
        if let Some(r) = rows {
            assert_eq!(r.len(), fps.len(), "one count per fingerprint");
        }
        match self.parts.get_mut(file) {
            Some(p) => p.extend(fps, rows),
            None => {
                self.parts.insert(
                    file.to_owned(),
                    Part {
                        fps: fps.to_vec(),
                        rows: rows.map(<[u32]>::to_vec),
                    },
                );
            }
        }
    }

    /// Keeps only the files `keep` keeps (those the lake lists).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.parts.retain(|k, _| keep(k));
    }

    /// Adds everything `other` notes.
    pub fn absorb(&mut self, other: Presence) {
        for (f, part) in other.parts {
            match self.parts.get_mut(&f) {
                Some(p) => p.extend(&part.fps, part.rows.as_deref()),
                None => {
                    self.parts.insert(f, part);
                }
            }
        }
    }

    /// How many fingerprints, over every file (repeats counted: none once
    /// read back).
    pub fn len(&self) -> u64 {
        self.parts.values().map(|p| p.fps.len() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Whether every file's notes hold counts (what layout 3 writes).
    pub fn is_counted(&self) -> bool {
        self.parts.values().all(|p| p.rows.is_some())
    }

    /// Whether no file's notes hold counts (what layout 2 writes).
    pub fn is_uncounted(&self) -> bool {
        self.parts.values().all(|p| p.rows.is_none())
    }

    /// The files noted.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.parts.keys().map(String::as_str)
    }

    /// The streams noted in `file` (none: not noted, or no stream).
    pub fn get(&self, file: &str) -> &[Fingerprint] {
        self.parts.get(file).map_or(&[], |p| p.fps.as_slice())
    }

    /// How many rows each stream [`Presence::get`] gives for `file` holds
    /// there, at its index (`None`: not counted, or not noted).
    pub fn rows(&self, file: &str) -> Option<&[u32]> {
        self.parts.get(file).and_then(|p| p.rows.as_deref())
    }

    /// How many of the streams noted in `file` are not `present` (in the
    /// files that hold its rows now).
    pub fn missing(&self, file: &str, present: impl Fn(Fingerprint) -> bool) -> usize {
        let mut gone: Vec<Fingerprint> = self
            .get(file)
            .iter()
            .copied()
            .filter(|&fp| !present(fp))
            .collect();
        gone.sort_unstable();
        gone.dedup();
        gone.len()
    }

    /// The streams noted in `file`, sorted and distinct (as they are
    /// written).
    pub fn set(&self, file: &str) -> Cow<'_, [Fingerprint]> {
        let fps = self.get(file);
        if fps.is_sorted_by(|a, b| a < b) {
            fps.into()
        } else {
            let mut v = fps.to_vec();
            v.sort_unstable();
            v.dedup();
            v.into()
        }
    }

    /// The notes of `file` as they are written: sorted, each fingerprint
    /// once with the sum of its repeats' rows.
    pub fn counted(&self, file: &str) -> Counted {
        let Some(p) = self.parts.get(file) else {
            return Counted::default();
        };
        let Some(rows) = &p.rows else {
            return Counted {
                fps: self.set(file).into_owned(),
                rows: None,
            };
        };
        let mut pairs: Vec<(Fingerprint, u32)> =
            p.fps.iter().copied().zip(rows.iter().copied()).collect();
        pairs.sort_unstable_by_key(|&(fp, _)| fp);
        let mut out = Counted {
            fps: Vec::with_capacity(pairs.len()),
            rows: Some(Vec::with_capacity(pairs.len())),
        };
        let counts = out.rows.as_mut().expect("counted");
        for (fp, n) in pairs {
            if out.fps.last() == Some(&fp) {
                let last = counts.last_mut().expect("as many as fps");
                *last = last.saturating_add(n);
            } else {
                out.fps.push(fp);
                counts.push(n);
            }
        }
        out
    }

    /// Appends the sets in the first streams-file layout (version 1,
    /// `count:u64 { file:str n:u64 fp:u64* }*`); returns how many
    /// fingerprints that is. Only tests write it now.
    #[cfg(test)]
    pub fn write(&self, w: &mut Writer) -> u64 {
        let mut total = 0;
        w.count(self.parts.len());
        for p in self.parts.keys() {
            let fps = self.set(p);
            w.str(p);
            w.count(fps.len());
            total += fps.len() as u64;
            for &fp in fps.iter() {
                w.u64(fp);
            }
        }
        total
    }

    /// Reads the first layout ([`Presence::write`]): not counted.
    pub fn read(r: &mut Reader<'_>) -> Result<Presence, String> {
        let n = r.count()?;
        let mut parts = BTreeMap::new();
        for _ in 0..n {
            let p = r.str()?.to_owned();
            let k = r.count()?;
            let fps = read_set(&p, r, k)?;
            if parts.insert(p, Part { fps, rows: None }).is_some() {
                return Err("a file named twice".into());
            }
        }
        Ok(Presence { parts })
    }
}

impl Part {
    /// Appends `fps` (with `rows`): counted while both are. Counted notes
    /// and uncounted ones of one file never meet (a file's notes come from
    /// one proof, or from one file of streams: the checkpoints this
    /// reconciler resumes from name only counted ones); should they, the
    /// counted would lose their counts for good once written, so a debug
    /// build stops here.
    fn extend(&mut self, fps: &[Fingerprint], rows: Option<&[u32]>) {
        debug_assert_eq!(
            self.rows.is_some(),
            rows.is_some(),
            "counted and uncounted notes of one lake file mixed: the counted would lose their counts"
        );
        self.fps.extend_from_slice(fps);
        match (&mut self.rows, rows) {
            (Some(have), Some(more)) => have.extend_from_slice(more),
            (have, _) => *have = None,
        }
    }
}

/// Reads the `n` fingerprints of the streams of `file`: they must be sorted
/// and distinct (anything else is damage).
pub fn read_set(file: &str, r: &mut Reader<'_>, n: usize) -> Result<Vec<Fingerprint>, String> {
    let mut fps: Vec<Fingerprint> = Vec::with_capacity(n);
    for _ in 0..n {
        let fp = r.u64()?;
        if fps.last().is_some_and(|&last| last >= fp) {
            return Err(format!("the streams of {file} are not in order"));
        }
        fps.push(fp);
    }
    Ok(fps)
}

/// Notes the streams one scan reads, by the file their rows are from.
pub struct Noter<'a> {
    /// Per file of the scan, in the scan's order: its key, the stretches
    /// noted there and the rows of each.
    files: Vec<(&'a str, Vec<Fingerprint>, Vec<u32>)>,
}

impl<'a> Noter<'a> {
    /// For a scan of the files `keys`, in the scan's order.
    pub fn new(keys: impl Iterator<Item = &'a str>) -> Noter<'a> {
        Noter {
            files: keys.map(|k| (k, Vec::new(), Vec::new())).collect(),
        }
    }

    /// Notes the stream `key` of kind `stream`, whose rows are from the
    /// scan's files as `runs` gives them, in the scan's order: (file index,
    /// seqs of the first and last rows of a run from it, rows in the run),
    /// a run at a time (one file may come again, after another's), each
    /// run's rows a seq or none apart (`stream::StreamRows::file_runs`).
    /// Each file's set gets the stream with the seq where each of its
    /// stretches of the stream starts ([`fingerprint_at`]), and the rows of
    /// that stretch: every row, so a seq held twice (two versions, copies)
    /// counts twice. A stretch is the file's runs one after another whose
    /// rows go on from seq to seq without skipping one, and not from seq 0
    /// to seq 1 (seq 0 is no row of a chain): so a stretch that
    /// starts at seq `s` with `n` rows holds rows of seqs `s..s + n` only
    /// (what `crate::custody` holds a compaction's outputs to).
    pub fn note(
        &mut self,
        stream: Stream,
        key: &str,
        runs: impl Iterator<Item = (u32, u64, u64, u32)>,
    ) {
        let fp = fingerprint(stream, key);
        let (mut last, mut to) = (u32::MAX, 0u64);
        for (f, first, end, rows) in runs {
            let (_, fps, counts) = &mut self.files[f as usize];
            // A stretch that holds seq 0 holds nothing else (a run from
            // seq 1 right after it starts a stretch of its own, which a
            // gap from seq 1 finds): seq 0 is no row of a chain.
            if f != last || first > to.saturating_add(1) || (to == 0 && first > 0) {
                fps.push(at_seq(fp, first));
                counts.push(rows);
                (last, to) = (f, end);
            } else {
                let n = counts.last_mut().expect("a stretch noted");
                *n = n.saturating_add(rows);
                to = to.max(end);
            }
        }
    }

    /// What was noted: each file's vectors moved in, not copied (at 50M
    /// events ~9M notes, ~110 MB).
    pub fn finish(self) -> Presence {
        let mut p = Presence::default();
        for (k, fps, rows) in self.files {
            if fps.is_empty() {
                continue;
            }
            match p.parts.get_mut(k) {
                Some(part) => part.extend(&fps, Some(&rows)),
                None => {
                    p.parts.insert(
                        k.to_owned(),
                        Part {
                            fps,
                            rows: Some(rows),
                        },
                    );
                }
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn seq_at_undoes_at_seq() {
        for m in [SEQ_MUL, MIX_1, MIX_2] {
            assert_eq!(m.wrapping_mul(inverse(m)), 1);
        }
        let a = fingerprint(Stream::Account, "acct-1");
        let b = fingerprint(Stream::Transfer, "acct-1");
        for seq in [0, 1, 2, 7, 1 << 21, 1 << 40, u64::MAX - 1, u64::MAX] {
            assert_eq!(seq_at(a, at_seq(a, seq)), seq);
            assert_eq!(seq_at(b, at_seq(b, seq)), seq);
        }
        // Another stream's fingerprint gives a seq nowhere near a history.
        for seq in 0..1_000 {
            assert!(seq_at(a, at_seq(b, seq)) > 1 << 40, "{seq}");
        }
    }

    #[test]
    fn fingerprints_are_fixed_and_tell_kind_and_key_apart() {
        // Pinned: checkpoints hold them.
        assert_eq!(
            fingerprint(Stream::Account, "acme.a-1"),
            fingerprint(Stream::Account, "acme.a-1")
        );
        let all = [
            fingerprint(Stream::Account, "acme.a-1"),
            fingerprint(Stream::Account, "acme.a-2"),
            fingerprint(Stream::Transfer, "acme.a-1"),
            fingerprint(Stream::Account, "acme.a-1\0"),
            fingerprint(Stream::Account, ""),
            fingerprint(Stream::Account, "acme.a-1acme.a-1"),
        ];
        let distinct: HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:x?}");
        assert_eq!(
            fingerprint(Stream::Transfer, "t-0000000000000001"),
            PINNED_TRANSFER
        );
    }

    /// `fingerprint(Transfer, "t-0000000000000001")` as checkpoint version 8
    /// wrote it.
    const PINNED_TRANSFER: u64 = 4191193214889977929;

    #[test]
    fn a_streams_start_is_part_of_its_fingerprint_in_a_file() {
        let at = |k: &str, seq| fingerprint_at(Stream::Account, k, seq);
        let all = [
            at("a", 1),
            at("a", 2),
            at("b", 1),
            at("a", 1 << 32),
            at("a", 0),
        ];
        let distinct: HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:x?}");
        assert_ne!(at("a", 1), fingerprint(Stream::Account, "a"));
        assert_ne!(at("a", 1), fingerprint_at(Stream::Transfer, "a", 1));
        // Pinned: checkpoints hold them.
        assert_eq!(
            fingerprint_at(Stream::Transfer, "t-0000000000000001", 1),
            PINNED_TRANSFER_AT_1
        );
        // A file's stretches of a stream: one fingerprint each, with the
        // rows of its runs (two runs of "f0" one after the other are one
        // stretch, unless a seq between them is skipped: `b`'s 3).
        let mut n = Noter::new(["f0", "f1"].into_iter());
        n.note(
            Stream::Account,
            "a",
            [(0, 1, 3, 3), (0, 4, 5, 2), (1, 6, 8, 3), (0, 9, 9, 1)].into_iter(),
        );
        n.note(
            Stream::Account,
            "b",
            [(0, 1, 2, 2), (0, 2, 2, 1), (0, 4, 4, 1)].into_iter(),
        );
        let p = n.finish();
        assert_eq!(
            p.get("f0"),
            &[at("a", 1), at("a", 9), at("b", 1), at("b", 4)]
        );
        assert_eq!(p.rows("f0"), Some(&[5, 1, 3, 1][..]));
        assert_eq!(p.get("f1"), &[at("a", 6)]);
        assert_eq!(p.rows("f1"), Some(&[3][..]));
    }

    #[test]
    fn a_files_notes_are_counted_while_every_one_added_is() {
        let (a, b) = (
            fingerprint_at(Stream::Account, "a", 1),
            fingerprint_at(Stream::Account, "b", 1),
        );
        let mut p = Presence::default();
        p.add("f", &[b, a], Some(&[2, 7]));
        let mut q = Presence::default();
        q.add("f", &[b], Some(&[u32::MAX]));
        q.add("g", &[a], Some(&[1]));
        p.absorb(q);
        assert!(p.is_counted());
        assert_eq!(
            (p.get("f"), p.rows("f")),
            (&[b, a, b][..], Some(&[2, 7, u32::MAX][..]))
        );
        // Sorted, each once, a repeat's rows added (saturating: at least).
        let c = p.counted("f");
        let mut expected = [(a, 7), (b, u32::MAX)];
        expected.sort_unstable();
        assert_eq!(c.fps, expected.iter().map(|e| e.0).collect::<Vec<_>>());
        assert_eq!(c.rows, Some(expected.iter().map(|e| e.1).collect()));
        assert_eq!(p.counted("h"), Counted::default());
        // Sets read from an older file of streams (no counts).
        let mut q = Presence::default();
        q.add("g", &[b], None);
        q.add("g", &[a], None);
        assert!(q.is_uncounted() && !q.is_counted() && !p.is_uncounted());
        assert_eq!((q.get("g"), q.rows("g")), (&[b, a][..], None));
        assert_eq!(q.counted("g").rows, None);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "counted and uncounted notes of one lake file mixed")]
    fn counted_notes_of_a_file_and_uncounted_ones_are_never_mixed() {
        let a = fingerprint_at(Stream::Account, "a", 1);
        let mut p = Presence::default();
        p.add("f", &[a], Some(&[2]));
        p.add("f", &[a], None);
    }

    const PINNED_TRANSFER_AT_1: u64 = 6932500525478127177;

    #[test]
    fn a_partition_misses_the_streams_noted_there_and_gone_now() {
        let mut p = Presence::default();
        let (a, b, c) = (
            fingerprint(Stream::Account, "a"),
            fingerprint(Stream::Account, "b"),
            fingerprint(Stream::Transfer, "c"),
        );
        p.add("events/account/date=2026-01-01", &[a, b, a], None);
        let mut q = Presence::default();
        q.add("events/account/date=2026-01-01", &[b], None);
        q.add("events/transfer/date=2026-01-01", &[c], None);
        p.absorb(q);
        let now: HashSet<_> = [a, c].into_iter().collect();
        assert_eq!(
            p.missing("events/account/date=2026-01-01", |fp| now.contains(&fp)),
            1
        );
        assert_eq!(
            p.missing("events/transfer/date=2026-01-01", |fp| now.contains(&fp)),
            0
        );
        assert_eq!(
            p.missing("events/account/date=2026-01-02", |fp| now.contains(&fp)),
            0
        );
        // Round trip, and damage refused.
        let mut w = Writer::default();
        assert_eq!(p.write(&mut w), 3);
        let back = Presence::read(&mut Reader::new(&w.buf, 0)).unwrap();
        assert_eq!(back.get("events/account/date=2026-01-01").len(), 2);
        assert_eq!(
            back.missing("events/account/date=2026-01-01", |fp| now.contains(&fp)),
            1
        );
        assert_eq!(back.get("events/transfer/date=2026-01-01"), &[c]);
        let mut damaged = w.buf.clone();
        // The account partition's second fingerprint, made the least.
        let second = 8 + 4 + "events/account/date=2026-01-01".len() + 8 + 8;
        damaged[second..second + 8].copy_from_slice(&0u64.to_le_bytes());
        assert!(Presence::read(&mut Reader::new(&damaged, 0)).is_err());
        for cut in 0..w.buf.len() {
            assert!(Presence::read(&mut Reader::new(&w.buf[..cut], 0)).is_err());
        }
    }
}
