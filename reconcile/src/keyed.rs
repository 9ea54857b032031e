//! Keyed scans of proved files: a footer that lies cannot hide from them
//! a stretch of rows of a stream they want.
//!
//! Four scans read lake files the proof does not read again by the keys
//! of a few streams (`stream_key IN (…)`): the pull-back of every transfer
//! a reopened account stream's history names (`run::pull_back`), the
//! re-proof of reopened streams (`run::prove_table`, pass 2), and the
//! look-ups of the hashes at proved tails the proof cannot decide and of
//! the proved rows that follow old rows delivered again (`crate::owing`,
//! `run::found_again`; these skip unread a file whose notes hold no
//! wanted stretch, [`Keyed::holds_none`]). DataFusion skips the row groups
//! and pages whose footer statistics (the page index, Bloom filters)
//! exclude every key, whatever `collect_statistics` says (`crate::lake`),
//! so a footer that
//! disagrees with its pages (no honest writer's, but the proof trusts no
//! writer) could hide a wanted stream's rows: a transfer left in the
//! archive while the legs that name it are proved again (a wrong verdict
//! on it), or a tail the lake holds judged missing (a false
//! `proved_rows_missing`).
//!
//! The proof noted, for each file it read whole, the first row of each
//! stretch of each stream there (`crate::presence`: a fingerprint of the
//! stream and that row's seq) and how many rows the stretch holds (every
//! row the proof read of it: a plain duplicate, a second version), and
//! the checkpoint keeps those notes (from version 17). So a keyed scan of
//! a noted file must see, of each stream it wants, the first row of every
//! stretch noted there, and at least as many rows as those stretches hold
//! ([`hidden`]); rows it did not see were hidden by the footer, and the
//! run stops with exit 2 naming the file ([`footer_hid`]), as the split of
//! a full run does (`run::Split::check_rows`). A fingerprint does not say
//! its stream, so the wanted streams' are enumerated ([`Wanted`]): each
//! seq from 0 to the last a stretch the scan needs can start at, each
//! with its stream's, by which the rows noted are added up. Past
//! [`WANTED_STARTS_MAX`] of them, the longest histories (a hot account's)
//! are matched instead: the fingerprint's mix undone with the stream's
//! gives the seq it was noted at, one of that stream's when it is no more
//! than the last wanted (a note of another stream gives one anywhere in
//! `u64`: a false match has the same odds as an enumerated fingerprint
//! taken by chance, kept within [`LONG_MATCH_BUDGET`]).
//!
//! A file with no streams noted (new to the night: no proof has read it
//! whole yet) is not filtered but read whole, so nothing of it is skipped
//! on its footer's word ([`Keyed::filters`]); so is every file when the
//! wanted stretches would be too many to match ([`LONG_STREAMS_MAX`],
//! [`LONG_MATCH_BUDGET`], [`Keyed::whole`]), and then no notes are read: a
//! caller enumerates the wanted stretches before it reads the notes
//! ([`proved_sets`]), but for the budget's count of the notes of the
//! scan's files, made once they are read ([`Keyed::checked`]).
//!
//! Rows a lie hides inside a stretch whose first row it leaves (a stream's
//! rows in one file spanning row groups or pages, a later one skipped on
//! its statistics or the page index's) are seen by the counts. What this
//! cannot see: rows are added up by stream, not attributed to stretches,
//! and more rows seen than noted hide nothing (the rows of a stretch that
//! starts after the last seq wanted, which is not enumerated, are seen
//! too). So a look-up at a proved tail misses a lie in a file whose later
//! stretch of the stream (one past the tail) shows at least as many rows
//! as the lie hides; the pull-back wants every stretch of a proved file
//! (none starts past the proved tail), and sees every lie. Sets without
//! counts (a file of streams before layout 3) are checked by their starts
//! alone; no checkpoint this reconciler resumes from names one (older
//! ones are set aside, `checkpoint::ProofState::older_rules`). The re-proof
//! sees rows in the order of the merge, not file by file, a whole stream at
//! a time (its rows, the plain duplicates dropped included, by file:
//! [`Keyed::see_stream`]): it checks each file it filtered once the merge
//! is done, before anything is judged. A scan keeps of a file only what
//! the check asks ([`Seen`]).
//!
//! Pure, but for [`proved_sets`] (which reads the checkpoint's files of
//! streams): `Lake::scan_keyed` reads the lake, and calls these.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasherDefault;

use datafusion::arrow::record_batch::RecordBatch;
use ledger_events::Stream;

use crate::checkpoint::FULL_HELP;
use crate::lake::{Error, LakeFileInfo, FOOTER_DISAGREES};
use crate::names::FxHasher;
use crate::presence::{at_seq, fingerprint, seq_of_unmixed, unmix, Fingerprint, Presence};
use crate::presence_files::{Sets, Stored};
use crate::stream::StreamRows;

/// At most this many fingerprints of wanted stretches are enumerated (a
/// hash map of about 70 MB: each with its stream's), the streams of the
/// shortest histories first; the rest are matched by undoing each noted
/// fingerprint's mix ([`Wanted`], [`LONG_STREAMS_MAX`]).
pub const WANTED_STARTS_MAX: usize = 1 << 21;

/// At most this many streams are matched by undoing the mix
/// ([`crate::presence::seq_at`]) rather than enumerated: each costs a step
/// for every note of a checked file that no enumerated stretch matches.
/// With more, a keyed scan reads every file whole.
pub const LONG_STREAMS_MAX: usize = 64;

/// A note of a stream the scan does not want matches a wanted stretch by
/// chance with odds of about (the stretches' seqs) / 2⁶⁴, so checking `n`
/// notes against `s` seqs raises a false alarm with odds about `s · n` /
/// 2⁶⁴. The streams not enumerated may take `s · n` up to this (odds 2⁻¹⁹
/// a scan: what the enumeration's own cap gives a scan of 16M notes),
/// `n` being every note the scan may check; past it, a keyed scan reads
/// every file whole. So against 300,000 notes (10,000 accounts in 30
/// files of a day each) a hot account is checked up to ~100M events, not
/// read whole past 2M.
pub const LONG_MATCH_BUDGET: u128 = 1 << 45;

/// The columns a keyed scan adds to its caller's, to see each row's stream
/// and seq.
pub const SEEN_COLUMNS: [&str; 3] = ["stream", "stream_key", "seq"];

/// Every fingerprint a stretch of a wanted stream that the scan needs can
/// have been noted with in a file: its stream's with each seq from 0 to
/// the last such a stretch can start at, each with its stream's (to add
/// the rows noted up by stream), and (for sets noted before checkpoint
/// version 11, `presence_files::Sets::plain`) its stream's alone.
///
/// Enumerated for the streams of the shortest histories, up to
/// [`WANTED_STARTS_MAX`] fingerprints; a longer one (a hot account's) is
/// kept as its fingerprint and last seq, and a noted fingerprint is its
/// stretch when undoing the mix with it gives a seq up to that last
/// ([`Wanted::noted_in`]).
#[derive(Debug)]
pub struct Wanted {
    starts: HashMap<Fingerprint, Fingerprint, Mix>,
    long: HashMap<Fingerprint, u64, Mix>,
    /// The notes of the long streams' wanted stretches, in every file
    /// checked, each with its stream's ([`Wanted::noted_in`]): the only
    /// rows of theirs a scan keeps ([`Seen`]), so a hot account's rows are
    /// not kept one by one, and what [`hidden`] adds them up by.
    long_noted: HashMap<Fingerprint, Fingerprint, Mix>,
    streams: Fingerprints,
}

/// Fingerprints are well mixed already: FxHash is enough to spread them.
type Mix = BuildHasherDefault<FxHasher>;
type Fingerprints = HashSet<Fingerprint, Mix>;

impl Wanted {
    /// The fingerprints of `streams`: each a kind, a key and the last seq a
    /// stretch of it the scan needs can start at (the greatest given for a
    /// stream counts). `None` when, past the [`WANTED_STARTS_MAX`]
    /// enumerated, more than [`LONG_STREAMS_MAX`] streams are left, or
    /// they span more than [`LONG_MATCH_BUDGET`] seqs.
    pub fn new<'k>(streams: impl IntoIterator<Item = (Stream, &'k str, u64)>) -> Option<Wanted> {
        Wanted::capped(WANTED_STARTS_MAX, streams)
    }

    /// [`Wanted::new`], enumerating at most `starts_max` fingerprints.
    pub fn capped<'k>(
        starts_max: usize,
        streams: impl IntoIterator<Item = (Stream, &'k str, u64)>,
    ) -> Option<Wanted> {
        let mut last: BTreeMap<(Stream, &str), u64> = BTreeMap::new();
        for (kind, key, seq) in streams {
            let at = last.entry((kind, key)).or_default();
            *at = (*at).max(seq);
        }
        // The shortest histories first, each with its fingerprints' count.
        let mut by_length: Vec<(u128, Fingerprint)> = last
            .into_iter()
            .map(|((kind, key), seq)| (u128::from(seq) + 1, fingerprint(kind, key)))
            .collect();
        by_length.sort_unstable();
        let enumerated = by_length
            .iter()
            .scan(0u128, |total, &(n, _)| {
                *total += n;
                Some(*total)
            })
            .take_while(|&total| total <= starts_max as u128)
            .count();
        let (short, long) = by_length.split_at(enumerated);
        if long.len() > LONG_STREAMS_MAX
            || long.iter().map(|&(n, _)| n).sum::<u128>() > LONG_MATCH_BUDGET
        {
            return None;
        }
        let total: u128 = short.iter().map(|&(n, _)| n).sum();
        let mut starts = HashMap::with_capacity_and_hasher(total as usize, Mix::default());
        for &(n, fp) in short {
            starts.extend((0..n as u64).map(|s| (at_seq(fp, s), fp)));
        }
        Some(Wanted {
            starts,
            long: long.iter().map(|&(n, fp)| (fp, (n - 1) as u64)).collect(),
            long_noted: HashMap::default(),
            streams: by_length.iter().map(|&(_, fp)| fp).collect(),
        })
    }

    /// How many seqs the long streams span: with the notes checked, the
    /// odds of a false match ([`LONG_MATCH_BUDGET`]).
    fn long_seqs(&self) -> u128 {
        self.long.values().map(|&last| u128::from(last) + 1).sum()
    }

    /// Takes, of `noted`'s notes of `files` (those a scan may check), those of
    /// the long streams' wanted stretches: each note no enumerated stretch
    /// is, its mix undone once and tried with each long stream, a match
    /// when that gives a seq up to the stream's last.
    fn noted_in<'f>(mut self, files: impl Iterator<Item = &'f str>, noted: &Presence) -> Wanted {
        if self.long.is_empty() {
            return self;
        }
        for file in files {
            for &at in noted.get(file) {
                if self.starts.contains_key(&at) {
                    continue;
                }
                let unmixed = unmix(at);
                if let Some((&stream, _)) = self
                    .long
                    .iter()
                    .find(|&(&stream, &last)| seq_of_unmixed(stream, unmixed) <= last)
                {
                    self.long_noted.insert(at, stream);
                }
            }
        }
        self
    }

    /// The wanted stream whose stretch the noted fingerprint `at` is, if
    /// any: enumerated, or a long stream's ([`Wanted::noted_in`]).
    fn stream_of(&self, at: Fingerprint) -> Option<Fingerprint> {
        self.starts
            .get(&at)
            .or_else(|| self.long_noted.get(&at))
            .copied()
    }

    /// Whether a scan keeps the row of the wanted stream `stream` whose
    /// fingerprint is `at`: when a wanted stretch can start there
    /// (enumerated), or one of a long stream's does ([`Wanted::noted_in`]).
    fn starts_at(&self, stream: Fingerprint, at: Fingerprint) -> bool {
        if self.long.contains_key(&stream) {
            self.long_noted.contains_key(&at)
        } else {
            self.starts.contains_key(&at)
        }
    }
}

/// What a keyed scan saw of one file, of the streams it wants: how many
/// rows of each, and the fingerprint of each of their rows at its seq
/// that a wanted stretch can start at. Nothing else: [`hidden`] asks
/// nothing else of it, and a scan can see many rows a file holds past the
/// stretches it wants (a re-proof keeps a file's until the merge ends).
#[derive(Debug, Default)]
pub struct Seen {
    rows: Fingerprints,
    streams: HashMap<Fingerprint, u64, Mix>,
}

impl Seen {
    /// Notes a row of the wanted stream `stream` (its [`fingerprint`]) at
    /// `seq`.
    fn saw(&mut self, wanted: &Wanted, stream: Fingerprint, seq: u64) {
        *self.streams.entry(stream).or_default() += 1;
        let at = at_seq(stream, seq);
        if wanted.starts_at(stream, at) {
            self.rows.insert(at);
        }
    }
}

/// How many rows of the streams `wanted` wants a keyed scan of a file did
/// not see (`seen`) that a proof noted there (`noted`: the stretches, in
/// any order, perhaps repeated; `rows`: how many rows each holds, when
/// counted; of streams alone when `plain`): rows its footer hid, at
/// least. Per wanted stream, the more of: the rows its stretches noted
/// there hold past those seen (none when not counted), and its stretches
/// whose first row was not seen (each once). A stream alone (`plain`)
/// counts one when none of its rows was seen. More rows seen than noted
/// hide nothing: a stretch that starts after the last seq wanted is not
/// enumerated ([`Wanted`]), and its rows are seen too.
pub fn hidden(
    noted: &[Fingerprint],
    rows: Option<&[u32]>,
    plain: bool,
    wanted: &Wanted,
    seen: &Seen,
) -> u64 {
    if plain {
        let mut gone: Vec<Fingerprint> = noted
            .iter()
            .copied()
            .filter(|fp| wanted.streams.contains(fp) && !seen.streams.contains_key(fp))
            .collect();
        gone.sort_unstable();
        gone.dedup();
        return gone.len() as u64;
    }
    // By stream: the rows noted, and the first rows not seen.
    let mut by_stream: BTreeMap<Fingerprint, (u64, Vec<Fingerprint>)> = BTreeMap::new();
    for (i, fp) in noted.iter().enumerate() {
        let Some(stream) = wanted.stream_of(*fp) else {
            continue;
        };
        let (n, gone) = by_stream.entry(stream).or_default();
        *n += rows.map_or(0, |r| u64::from(r[i]));
        if !seen.rows.contains(fp) {
            gone.push(*fp);
        }
    }
    by_stream
        .into_iter()
        .map(|(stream, (n, mut gone))| {
            gone.sort_unstable();
            gone.dedup();
            let saw = seen.streams.get(&stream).copied().unwrap_or(0);
            n.saturating_sub(saw).max(gone.len() as u64)
        })
        .sum()
}

/// What a keyed scan reads by key, and what it checks each file it filters
/// against.
pub struct Keyed<'a> {
    /// The keys of the rows wanted (every kind's).
    pub keys: &'a [String],
    /// What the scan is for, as its error says it.
    pub reading: &'static str,
    /// `None`: the wanted stretches too many to enumerate; every file is
    /// read whole, none checked.
    check: Option<Check<'a>>,
}

/// The wanted stretches, and the streams noted in each file.
struct Check<'a> {
    wanted: Wanted,
    /// The files the scan may check: the only ones whose notes of long
    /// streams were matched ([`Wanted::noted_in`]).
    files: HashSet<String>,
    /// The streams noted in each file (`crate::presence`).
    noted: &'a Presence,
    /// The files whose sets hold streams alone (noted before checkpoint
    /// version 11).
    plain: &'a HashSet<String>,
}

impl<'a> Keyed<'a> {
    /// A scan of the rows of `keys`, for `reading` (its error's words),
    /// that reads every file whole: the stretches it must not miss are too
    /// many to match ([`Wanted::capped`] gave none, or [`Keyed::checked`]
    /// found too many notes to match them against), so it needs no notes.
    pub fn whole(keys: &'a [String], reading: &'static str) -> Keyed<'a> {
        Keyed {
            keys,
            reading,
            check: None,
        }
    }

    /// A scan of the rows of `keys`, for `reading` (its error's words),
    /// that must not miss the stretches `wanted` names; `noted` (and
    /// `plain`) the streams noted in each file. Read whole instead
    /// ([`Keyed::whole`]) when `wanted`'s long streams, matched against
    /// the notes of the scan's `files` (those it may check, not every
    /// file `noted` holds: a full run's notes are every table's), would
    /// pass [`LONG_MATCH_BUDGET`].
    pub fn checked(
        keys: &'a [String],
        reading: &'static str,
        wanted: Wanted,
        files: &[&str],
        noted: &'a Presence,
        plain: &'a HashSet<String>,
    ) -> Keyed<'a> {
        let notes: u128 = files.iter().map(|f| noted.get(f).len() as u128).sum();
        if wanted.long_seqs() * notes > LONG_MATCH_BUDGET {
            trace_check(reading, None);
            return Keyed::whole(keys, reading);
        }
        let wanted = wanted.noted_in(files.iter().copied(), noted);
        trace_check(reading, Some(&wanted));
        Keyed {
            keys,
            reading,
            check: Some(Check {
                wanted,
                files: files.iter().map(|f| (*f).to_owned()).collect(),
                noted,
                plain,
            }),
        }
    }

    /// Whether the scan filters the lake file `file` by key (and then
    /// checks it): only when it is one of the scan's files and streams are
    /// noted in it, else it is read whole, its rows of other keys the
    /// caller's to drop.
    pub fn filters(&self, file: &str) -> bool {
        self.check
            .as_ref()
            .is_some_and(|c| c.files.contains(file) && !c.noted.get(file).is_empty())
    }

    /// Whether the notes of `file`, one of the scan's files, show that it
    /// holds no row the scan wants: streams are noted there (a proof read it
    /// whole, every stretch of every stream noted), by stretches with their
    /// seqs, and none of them is a wanted stream's stretch that can hold a
    /// wanted row (one starting at or before the last seq wanted). Such a
    /// file need not be read at all: a note of another stream that matches
    /// a wanted stretch by chance only makes a file read for nothing.
    pub fn holds_none(&self, file: &str) -> bool {
        let Some(c) = &self.check else {
            return false;
        };
        let notes = c.noted.get(file);
        c.files.contains(file)
            && !c.plain.contains(file)
            && !notes.is_empty()
            && notes.iter().all(|&at| c.wanted.stream_of(at).is_none())
    }

    /// Notes in `seen` the rows of `b` (its [`SEEN_COLUMNS`]; a row that
    /// names no known stream or no seq a proof takes is left to the proof
    /// to name: no proved file holds one), those of wanted streams.
    pub fn see_batch(&self, seen: &mut Seen, b: &RecordBatch) {
        let Some(c) = &self.check else {
            return;
        };
        crate::rows::stream_fingerprints(b, |fp, seq, _| {
            if let Some(seq) = seq.and_then(|s| u64::try_from(s).ok()) {
                if c.wanted.streams.contains(&fp) {
                    seen.saw(&c.wanted, fp, seq);
                }
            }
        });
    }

    /// Notes every row of `s` (one stream's, the plain duplicates the
    /// proof drops too: [`StreamRows::file_rows`]) in the `seen` of its file,
    /// by the scan's index (`None`: a file not checked), when the stream is
    /// wanted: its fingerprint once, not a row at a time (a re-proof sees
    /// rows as the merge gives them, each whole stream at once).
    pub fn see_stream(&self, seen: &mut [Option<Seen>], s: &StreamRows) {
        let Some(c) = &self.check else {
            return;
        };
        let stream = fingerprint(s.stream, s.key());
        if !c.wanted.streams.contains(&stream) {
            return;
        }
        for (file, seq) in s.file_rows() {
            if let Some(seen) = &mut seen[file as usize] {
                seen.saw(&c.wanted, stream, seq);
            }
        }
    }

    /// Whether the keyed scan of `file` that `seen` saw lacks rows of a
    /// wanted stream noted there ([`hidden`]): the error naming the file
    /// when it does.
    pub fn check(&self, file: &str, seen: &Seen) -> Result<(), Error> {
        let Some(c) = &self.check else {
            return Ok(());
        };
        let n = hidden(
            c.noted.get(file),
            c.noted.rows(file),
            c.plain.contains(file),
            &c.wanted,
            seen,
        );
        match n {
            0 => Ok(()),
            n => Err(footer_hid(file, self.reading, n)),
        }
    }
}

/// With `RECONCILE_TRACE=1`, a line on stderr saying how the keyed scan
/// for `reading` finds the stretches it checks: how many it enumerated and
/// how many histories it matches (`None`: it reads every file whole).
fn trace_check(reading: &str, wanted: Option<&Wanted>) {
    if !crate::lake::trace_enabled() {
        return;
    }
    match wanted {
        Some(w) => crate::say!(
            "reconcile: trace: keyed scan for {reading}: {} stretches enumerated, {} histories matched",
            w.starts.len(),
            w.long.len()
        ),
        None => crate::say!(
            "reconcile: trace: keyed scan for {reading}: too many stretches to match, every file read whole"
        ),
    }
}

/// The error of a lake file whose keyed scan, for `reading`, lacked at
/// least `hidden` rows of the streams it wanted that a proof found in the
/// file.
pub fn footer_hid(file: &str, reading: &str, hidden: u64) -> Error {
    Error::File {
        key: file.to_owned(),
        why: format!(
            "reading it by stream key for {reading} (its row groups and pages chosen by the footer's statistics) \
             gave at least {hidden} fewer row(s) of those streams than a proof found in it: {FOOTER_DISAGREES}"
        ),
    }
}

/// The streams the checkpoint noted (`stored`) in those of `files` it
/// proved (`proved`: key → stamp) as they are now: what a resumed night's
/// keyed scans check those files against (the night's new files have none,
/// so they are read whole). Reads the checkpoint's files of streams (every
/// set of the table's proved files: called only once it is known that a
/// check will use them, [`Keyed::checked`]).
pub fn proved_sets(
    stored: &Stored,
    proved: &BTreeMap<String, String>,
    files: &[LakeFileInfo],
) -> Result<Sets, Error> {
    let keys = files
        .iter()
        .filter(|f| f.proved_in(proved))
        .map(|f| f.key.as_str())
        .collect();
    stored
        .of(&keys)
        .map_err(|e| Error::Lake(format!("checkpoint: {e}\n{FULL_HELP}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presence::Noter;

    /// The notes of one file "f" holding stretches of `a` from seq 1 (three
    /// rows) and 9 (two: a file merged with "g", which held seqs 4 to 8),
    /// of `b` from 4 (one), and of a transfer stream `a` from 1 (one).
    fn noted() -> Presence {
        let mut n = Noter::new(["f", "g"].into_iter());
        n.note(
            Stream::Account,
            "a",
            [(0, 1, 3, 3), (1, 4, 8, 5), (0, 9, 10, 2)].into_iter(),
        );
        n.note(Stream::Account, "b", [(0, 4, 4, 1)].into_iter());
        n.note(Stream::Transfer, "a", [(0, 1, 1, 1)].into_iter());
        n.finish()
    }

    impl Wanted {
        /// [`Wanted::noted_in`] of every file `noted` holds.
        pub(crate) fn noted_in_all(self, noted: &Presence) -> Wanted {
            self.noted_in(noted.files(), noted)
        }
    }

    impl Seen {
        /// Notes a row of the stream `key` of kind `stream` at `seq`, as a
        /// scan that wants `wanted` does.
        fn row(&mut self, wanted: &Wanted, stream: Stream, key: &str, seq: u64) {
            let fp = fingerprint(stream, key);
            if wanted.streams.contains(&fp) {
                self.saw(wanted, fp, seq);
            }
        }
    }

    /// The notes of [`noted`], and the stretches of `a` up to seq 20 wanted
    /// (enumerated within `cap`, else matched).
    fn a_up_to_20(cap: usize) -> (Presence, Wanted) {
        let noted = noted();
        let wanted = Wanted::capped(cap, [(Stream::Account, "a", 20)])
            .unwrap()
            .noted_in_all(&noted);
        (noted, wanted)
    }

    /// [`hidden`] of the notes of `file`, counted or not.
    fn hidden_in(p: &Presence, file: &str, counted: bool, wanted: &Wanted, seen: &Seen) -> u64 {
        let rows = p.rows(file).filter(|_| counted);
        hidden(p.get(file), rows, false, wanted, seen)
    }

    #[test]
    fn a_wanted_stretch_noted_in_a_file_and_not_seen_was_hidden() {
        // Enumerated, and matched by undoing the mix.
        for cap in [WANTED_STARTS_MAX, 0] {
            let (noted, wanted) = a_up_to_20(cap);
            let mut seen = Seen::default();
            // Nothing seen: the five rows of `a`'s two stretches hidden (two
            // first rows, uncounted); `b` and the transfer stream `a` not wanted.
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 5);
            assert_eq!(hidden_in(&noted, "f", false, &wanted, &seen), 2);
            // The rows of the first stretch seen, from its first on.
            (1..=3).for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 2);
            assert_eq!(hidden_in(&noted, "f", false, &wanted, &seen), 1);
            // A row of the second seen, but not its first: still hidden.
            seen.row(&wanted, Stream::Account, "a", 10);
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 1);
            seen.row(&wanted, Stream::Account, "a", 9);
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 0);
            // Another kind's rows of the same key do not stand for them.
            let mut other = Seen::default();
            (1..=20).for_each(|seq| other.row(&wanted, Stream::Transfer, "a", seq));
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &other), 5);
        }
    }

    #[test]
    fn rows_hidden_inside_a_stretch_whose_first_row_was_seen_are_counted() {
        // Enumerated, and matched by undoing the mix.
        for cap in [WANTED_STARTS_MAX, 0] {
            let (noted, wanted) = a_up_to_20(cap);
            // Every stretch's first row seen, the third row of the first not
            // (a later row group or page skipped on the footer's word).
            let mut seen = Seen::default();
            [1, 2, 9, 10]
                .into_iter()
                .for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 1);
            // Without the counts (a set of layout 2), the first rows say nothing.
            assert_eq!(hidden_in(&noted, "f", false, &wanted, &seen), 0);
            // "g"'s one stretch: four of its five rows seen.
            let mut seen = Seen::default();
            (4..=7).for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
            assert_eq!(hidden_in(&noted, "g", true, &wanted, &seen), 1);
            seen.row(&wanted, Stream::Account, "a", 8);
            assert_eq!(hidden_in(&noted, "g", true, &wanted, &seen), 0);
            // More rows seen than noted hide none.
            seen.row(&wanted, Stream::Account, "a", 30);
            assert_eq!(hidden_in(&noted, "g", true, &wanted, &seen), 0);
        }
    }

    #[test]
    fn a_repeated_fingerprints_rows_add_up() {
        // Enumerated, and matched by undoing the mix.
        for cap in [WANTED_STARTS_MAX, 0] {
            // Two stretches of `a` in "f" both from seq 3 (two versions of the
            // row at 3, another file's copy between them): one fingerprint,
            // noted twice, two rows then three.
            let mut n = Noter::new(["f", "g"].into_iter());
            n.note(
                Stream::Account,
                "a",
                [(0, 3, 3, 2), (1, 3, 3, 1), (0, 3, 5, 3)].into_iter(),
            );
            let noted = n.finish();
            let at3 = at_seq(fingerprint(Stream::Account, "a"), 3);
            assert_eq!(
                (noted.get("f"), noted.rows("f")),
                (&[at3, at3][..], Some(&[2, 3][..]))
            );
            let counted = noted.counted("f");
            assert_eq!((counted.fps, counted.rows), (vec![at3], Some(vec![5])));
            let wanted = Wanted::capped(cap, [(Stream::Account, "a", 3)])
                .unwrap()
                .noted_in_all(&noted);
            let mut seen = Seen::default();
            (0..4).for_each(|_| seen.row(&wanted, Stream::Account, "a", 3));
            // The run's own notes (repeated) and the written ones agree.
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 1);
            assert_eq!(hidden(&[at3], Some(&[5]), false, &wanted, &seen), 1);
            seen.row(&wanted, Stream::Account, "a", 4);
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 0);
        }
    }

    #[test]
    fn a_batch_is_seen_row_by_row_by_its_stream_key_and_seq_and_only_what_is_wanted_kept() {
        // Enumerated, and matched by undoing the mix.
        for cap in [WANTED_STARTS_MAX, 0] {
            use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
            use std::sync::Arc;
            let batch = RecordBatch::try_from_iter([
                (
                    "stream",
                    Arc::new(StringArray::from(vec![
                        Some("account"),
                        Some("account"),
                        Some("transfer"),
                        Some("account"),
                        None,
                        Some("other"),
                        Some("account"),
                    ])) as ArrayRef,
                ),
                (
                    "stream_key",
                    Arc::new(StringArray::from(vec!["a", "a", "a", "b", "a", "a", "a"]))
                        as ArrayRef,
                ),
                (
                    "seq",
                    Arc::new(Int64Array::from(vec![1, 9, 4, 4, 9, 9, 9])) as ArrayRef,
                ),
            ])
            .unwrap();
            // The stretches of account `a` up to seq 5 and of transfer `a` up
            // to 4 wanted; account `b` not.
            let wanted =
                || Wanted::capped(cap, [(Stream::Account, "a", 5), (Stream::Transfer, "a", 4)]);
            let (noted, plain, keys) = (Presence::default(), HashSet::new(), ["a".to_owned()]);
            let keyed = Keyed::checked(
                &keys,
                "a test",
                wanted().unwrap(),
                &["f", "g"],
                &noted,
                &plain,
            );
            let mut seen = Seen::default();
            keyed.see_batch(&mut seen, &batch);
            let wanted = wanted().unwrap();
            let mut expected = Seen::default();
            expected.row(&wanted, Stream::Account, "a", 1);
            expected.row(&wanted, Stream::Account, "a", 9);
            expected.row(&wanted, Stream::Transfer, "a", 4);
            expected.row(&wanted, Stream::Account, "b", 4);
            expected.row(&wanted, Stream::Account, "a", 9);
            // Every row of a wanted stream counted; of their first rows, those
            // a wanted stretch can start at (not `a`'s at 9); nothing of `b`.
            let a = fingerprint(Stream::Account, "a");
            let t = fingerprint(Stream::Transfer, "a");
            assert_eq!(
                seen.streams,
                [(a, 3), (t, 1)].into_iter().collect::<HashMap<_, _, Mix>>()
            );
            // (A stream matched, not enumerated, keeps only the rows noted:
            // none here.)
            let kept = if cap == 0 {
                vec![]
            } else {
                vec![at_seq(a, 1), at_seq(t, 4)]
            };
            assert_eq!(seen.rows, kept.into_iter().collect::<Fingerprints>());
            assert_eq!((seen.rows, seen.streams), (expected.rows, expected.streams));
        }
    }

    #[test]
    fn only_stretches_starting_by_the_last_seq_wanted_are_checked() {
        // Enumerated, and matched by undoing the mix.
        for cap in [WANTED_STARTS_MAX, 0] {
            let noted = noted();
            // The scan needs the stretches of `a` that can hold seq 5: the one
            // from 9 is not among them.
            let wanted =
                Wanted::capped(cap, [(Stream::Account, "a", 5), (Stream::Account, "a", 2)])
                    .unwrap()
                    .noted_in_all(&noted);
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &Seen::default()), 3);
            // Its rows seen make up for none of the first's.
            let mut seen = Seen::default();
            [1, 2]
                .into_iter()
                .for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 1);
            seen.row(&wanted, Stream::Account, "a", 3);
            [9, 10]
                .into_iter()
                .for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
            assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 0);
            // Up to seq 9: both.
            let later = Wanted::capped(cap, [(Stream::Account, "a", 9)])
                .unwrap()
                .noted_in_all(&noted);
            assert_eq!(hidden_in(&noted, "f", true, &later, &Seen::default()), 5);
        }
    }

    #[test]
    fn sets_of_streams_alone_are_checked_by_stream() {
        let set = vec![
            fingerprint(Stream::Account, "a"),
            fingerprint(Stream::Account, "b"),
        ];
        let wanted = Wanted::new([(Stream::Account, "a", 0)]).unwrap();
        let mut seen = Seen::default();
        assert_eq!(hidden(&set, None, true, &wanted, &seen), 1);
        seen.row(&wanted, Stream::Account, "a", 7);
        assert_eq!(hidden(&set, None, true, &wanted, &seen), 0);
    }

    #[test]
    fn an_enumerated_and_a_matched_stream_are_checked_together() {
        // `b`'s 5 seqs fit a cap of 5, `a`'s 21 do not: `a` is matched.
        let noted = noted();
        let streams = [(Stream::Account, "a", 20), (Stream::Account, "b", 4)];
        let wanted = Wanted::capped(5, streams).unwrap().noted_in_all(&noted);
        let a = fingerprint(Stream::Account, "a");
        assert_eq!((wanted.starts.len(), wanted.long.len()), (5, 1));
        assert!(wanted.long.contains_key(&a));
        // `a`'s two stretches (five rows) and `b`'s one, in the same file.
        let mut seen = Seen::default();
        assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 6);
        [1, 2, 3, 9, 10]
            .into_iter()
            .for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
        assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 1);
        seen.row(&wanted, Stream::Account, "b", 4);
        assert_eq!(hidden_in(&noted, "f", true, &wanted, &seen), 0);
        // Of `a`'s rows, only its noted first rows are kept (in "f" and "g").
        let kept: Fingerprints = [1, 4, 9].into_iter().map(|s| at_seq(a, s)).collect();
        assert_eq!(
            wanted.long_noted.keys().copied().collect::<Fingerprints>(),
            kept
        );
        assert!(seen.rows.contains(&at_seq(a, 1)) && !seen.rows.contains(&at_seq(a, 2)));
    }

    #[test]
    fn the_longest_histories_past_the_cap_are_matched_not_enumerated() {
        let half = (WANTED_STARTS_MAX / 2) as u64;
        let a = fingerprint(Stream::Account, "a");
        let split = |w: Wanted| {
            let mut long: Vec<_> = w.long.into_iter().collect();
            long.sort_unstable();
            (w.starts.len(), long)
        };
        // Both fit: every fingerprint enumerated.
        let w = Wanted::new([
            (Stream::Account, "a", half - 1),
            (Stream::Account, "b", half - 1),
        ]);
        assert_eq!(split(w.unwrap()), (WANTED_STARTS_MAX, vec![]));
        // One more: the longer history is matched instead, the shorter
        // still enumerated.
        let w = Wanted::new([
            (Stream::Account, "a", half),
            (Stream::Account, "b", half - 1),
        ]);
        assert_eq!(split(w.unwrap()), (WANTED_STARTS_MAX / 2, vec![(a, half)]));
        // A hot account of 50M events is matched, not enumerated.
        let w = Wanted::new([(Stream::Account, "a", 50_000_000)]).unwrap();
        assert_eq!(split(w), (0, vec![(a, 50_000_000)]));
        // Past the budget of seqs, or of streams: none (every file read
        // whole).
        assert!(Wanted::new([(Stream::Account, "a", u64::MAX)]).is_none());
        assert!(Wanted::new([(Stream::Account, "a", LONG_MATCH_BUDGET as u64)]).is_none());
        assert!(Wanted::new([(Stream::Account, "a", LONG_MATCH_BUDGET as u64 - 1)]).is_some());
        let keys: Vec<String> = (0..=LONG_STREAMS_MAX).map(|i| format!("k{i}")).collect();
        let many = |n: usize| {
            Wanted::capped(
                0,
                keys[..n].iter().map(|k| (Stream::Account, k.as_str(), 1)),
            )
        };
        assert!(many(LONG_STREAMS_MAX).is_some());
        assert!(many(LONG_STREAMS_MAX + 1).is_none());
    }

    #[test]
    fn a_check_whose_long_streams_would_match_too_many_notes_by_chance_reads_whole() {
        // Long streams spanning `seqs` seqs, against a file "f" of `notes`
        // notes (a note per stream at seq 1); a file "t" the scan does not
        // read (another table's, in a full run's notes) holds a thousand
        // more, which do not count.
        let keyed_over = |seqs: u64, notes: usize| {
            let mut n = Noter::new(["f", "t"].into_iter());
            for (file, count) in [(0, notes), (1, 1000)] {
                for i in 0..count {
                    let runs = [(file, 1, 1, 1)].into_iter();
                    n.note(Stream::Account, &format!("n{file}-{i}"), runs);
                }
            }
            let noted = n.finish();
            assert_eq!(noted.get("t").len(), 1000);
            let wanted = Wanted::new([(Stream::Account, "hot", seqs - 1)]).unwrap();
            let (plain, keys) = (HashSet::new(), ["hot".to_owned()]);
            Keyed::checked(&keys, "a test", wanted, &["f"], &noted, &plain).filters("f")
        };
        let budget = LONG_MATCH_BUDGET as u64;
        assert!(keyed_over(budget / 4, 4));
        assert!(!keyed_over(budget / 4 + 1, 4));
    }

    #[test]
    fn a_file_holds_none_only_when_its_notes_show_no_stretch_that_can_hold_a_wanted_row() {
        let noted = noted();
        let none = HashSet::new();
        let holds_none = |streams: &[(Stream, &str, u64)], files: &[&str], plain, file| {
            let keys: Vec<String> = streams.iter().map(|s| s.1.to_owned()).collect();
            let wanted = Wanted::new(streams.iter().copied()).unwrap();
            Keyed::checked(&keys, "a test", wanted, files, &noted, plain).holds_none(file)
        };
        let both = ["f", "g", "h"];
        // "f": `a` from 1 and 9, `b` from 4, the transfer `a` from 1; "g":
        // `a` from 4.
        let a_to_20 = [(Stream::Account, "a", 20)];
        assert!(!holds_none(&a_to_20, &both, &none, "f"));
        assert!(!holds_none(&a_to_20, &both, &none, "g"));
        // Rows of `a` up to seq 3 lie in stretches that start by 3: "g"'s
        // starts at 4.
        let a_to_3 = [(Stream::Account, "a", 3)];
        assert!(!holds_none(&a_to_3, &both, &none, "f"));
        assert!(holds_none(&a_to_3, &both, &none, "g"));
        let b = [(Stream::Account, "b", 20)];
        assert!(!holds_none(&b, &both, &none, "f"));
        assert!(holds_none(&b, &both, &none, "g"));
        // The transfer `a` is not the account `a`.
        let t = [(Stream::Transfer, "a", 20), (Stream::Transfer, "c", 20)];
        assert!(!holds_none(&t, &both, &none, "f"));
        assert!(holds_none(&t, &both, &none, "g"));
        // Read, not skipped: a file with no notes, one not among the scan's
        // files, one whose notes hold no seqs (before layout 2), and any
        // file of a scan that reads them whole.
        assert!(!holds_none(&b, &both, &none, "h"));
        assert!(!holds_none(&b, &["f"], &none, "g"));
        let plain: HashSet<String> = ["g".to_owned()].into();
        assert!(!holds_none(&b, &both, &plain, "g"));
        let keys = ["b".to_owned()];
        assert!(!Keyed::whole(&keys, "a test").holds_none("g"));
    }

    #[test]
    fn a_file_without_notes_is_read_whole_and_hidden_rows_name_the_file() {
        let noted = noted();
        let plain = HashSet::new();
        let keys = ["a".to_owned()];
        let wanted = || Wanted::new([(Stream::Account, "a", 20)]).unwrap();
        let keyed = Keyed::checked(&keys, "a test", wanted(), &["f", "g"], &noted, &plain);
        let wanted = wanted();
        assert!(keyed.filters("f") && keyed.filters("g") && !keyed.filters("h"));
        let err = keyed.check("f", &Seen::default()).unwrap_err().to_string();
        assert!(
            err.starts_with("lake file f: reading it by stream key for a test")
                && err.contains(
                    "gave at least 5 fewer row(s) of those streams than a proof found in it"
                )
                && err.contains("the footer's statistics disagree with its pages"),
            "{err}"
        );
        let mut seen = Seen::default();
        (4..=8).for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
        assert!(keyed.check("g", &seen).is_ok());
        // A row inside the stretch hidden.
        let mut seen = Seen::default();
        [4, 5, 6, 8]
            .into_iter()
            .for_each(|seq| seen.row(&wanted, Stream::Account, "a", seq));
        let err = keyed.check("g", &seen).unwrap_err().to_string();
        assert!(err.contains("gave at least 1 fewer row(s)"), "{err}");
        // Too many fingerprints to enumerate: every file is read whole.
        let all = Keyed::whole(&keys, "a test");
        assert!(!all.filters("f") && all.check("f", &Seen::default()).is_ok());
    }
}
