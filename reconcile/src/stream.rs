//! From sorted rows to streams: dedup by (`event_id`, `hash`) and group.
//!
//! Input rows arrive sorted by `stream_key`, `seq`, `hash` (see `lake`), so
//! every copy of an event is adjacent to the others. A copy equal to the kept
//! row in every column is a plain duplicate (a redelivery) and is counted and
//! dropped; two rows with the same (`event_id`, `hash`) but different content
//! are both kept, because one of them does not hash to its recorded hash and
//! the completeness check must name it (the one that does is read first,
//! whichever file each came from: [`copies_order`]). Rows with the same seq and different
//! hashes are the versions of a conflict and are all kept.

use std::ops::Range;
use std::sync::Arc;

use ledger_events::event::{same, HashCheck};
use ledger_events::{Event, EventRef, Stream};

use crate::rows::{Cols, Row};

/// Rows `start..end` of one batch: some of a stream's rows, consecutive in
/// their file.
#[derive(Clone)]
struct Run {
    cols: Arc<Cols>,
    start: u32,
    end: u32,
}

/// One stream's distinct rows (at least one), sorted by seq then hash, kept
/// as runs of their batches: the merge takes a file's rows in runs, so a
/// transfer stream is nearly always one run (one reference count for its
/// rows, and no allocation) and an account stream one run per file it spans.
/// Only [`Grouper`] makes them, each with its first row.
pub struct StreamRows {
    pub stream: Stream,
    runs: smallvec::SmallVec<[Run; 1]>,
    len: usize,
    /// Whether two of its rows have one seq and one hash but not the same
    /// content (a copy changed since it was hashed, or a null written as
    /// an empty text, which the hash does not tell apart): [`Views::new`]
    /// orders them by content, not by file ([`copies_order`]).
    changed_copies: bool,
    /// The plain duplicates dropped ([`Grouper::push`]), for the notes'
    /// counts of rows per file (`crate::presence`) and a re-proof's check
    /// (`crate::keyed`): each after how many runs, its file and seq. Rare:
    /// empty, it allocates nothing.
    dropped: Vec<(u32, u32, u64)>,
}

/// Copies of one row (one seq, one hash) past which a row is looked up among
/// them by its content's fingerprint instead of compared with each: 16,000
/// damaged copies of one row that keep its hash took 8 s compared pairwise.
const SAME_SCANNED_MAX: u32 = 32;

/// The last rows of a stream that share a seq and a hash, each as (run,
/// row) under its content's fingerprint.
type Copies = crate::names::FxMap<u64, smallvec::SmallVec<[(u32, u32); 1]>>;

/// The copies at the end of the stream [`Grouper`] is grouping: how many of
/// its last rows have its last row's seq and hash ([`StreamRows::copy_of`]
/// compares a row with those), and those rows by their content once there
/// are more than [`SAME_SCANNED_MAX`]. Kept by the grouper, not by every
/// stream's rows (a proof holds millions of those).
#[derive(Default)]
struct SameCopies {
    same: u32,
    copies: Option<Box<Copies>>,
}

/// A row's content fingerprint, under a key drawn once a run (SipHash-1-3,
/// std's `RandomState`): rows come from outside, and under a known function
/// copies could be made to share one fingerprint, each then compared with
/// all the others (rev-s62-copies M1: an unkeyed FxHash, 64,000 copies
/// built to collide took 72 s). Only copies past [`SAME_SCANNED_MAX`] are
/// fingerprinted, so its speed does not matter.
fn content_print(row: &EventRef<'_>) -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEY.get_or_init(Default::default).hash_one(row)
}

impl StreamRows {
    fn new(stream: Stream) -> StreamRows {
        StreamRows {
            stream,
            runs: smallvec::SmallVec::new(),
            len: 0,
            changed_copies: false,
            dropped: Vec::new(),
        }
    }

    /// The stream key (every row has the same).
    pub fn key(&self) -> &str {
        let first = &self.runs[0];
        first.cols.key(first.start as usize)
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The scan's files its rows are from, a run at a time in the scan's
    /// order (a file may come again), each as its file, the seqs of its
    /// first and last rows, and its rows: the rows of a run step by at
    /// most one seq from one row to the next (a run is cut where a seq is
    /// skipped, so its rows lie in its first seq and the `rows - 1` after
    /// it; a run that holds seq 0 holds nothing else, as seq 0 is no
    /// row of a chain); the plain duplicates dropped among them, each a run of one row
    /// right after the run of kept rows it was dropped behind (even when
    /// that run goes on past it), so every row the scan read of the stream
    /// is in one.
    pub fn file_runs(&self) -> impl Iterator<Item = (u32, u64, u64, u32)> + '_ {
        let mut dropped = self.dropped.iter().peekable();
        self.runs.iter().enumerate().flat_map(move |(i, r)| {
            let (cols, end) = (&r.cols, r.end as usize);
            let mut at = r.start as usize;
            let kept = std::iter::from_fn(move || {
                if at >= end {
                    return None;
                }
                let (start, first) = (at, cols.seq(at));
                let mut last = first;
                at += 1;
                // A batch's rows are sorted: the seqs of a run never go down.
                // Seq 0 is outside every chain (seqs start at 1), so a run
                // that holds it ends there: the rows from seq 1 on are a
                // run of their own, which a gap from 1 can name.
                while at < end && {
                    let step = cols.seq(at).saturating_sub(last);
                    step == 0 || (step == 1 && last != 0)
                } {
                    last = cols.seq(at);
                    at += 1;
                }
                // `at - start` ≤ the run's rows, under 2³².
                Some((cols.file, first, last, (at - start) as u32))
            });
            let mut after = Vec::new();
            while let Some(&&(at, file, seq)) = dropped.peek() {
                if at as usize > i + 1 {
                    break;
                }
                after.push((file, seq, seq, 1));
                dropped.next();
            }
            kept.chain(after)
        })
    }

    /// Every row the scan read of the stream, as its file and seq: the rows
    /// kept, then the plain duplicates dropped.
    pub fn file_rows(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let kept = self
            .runs
            .iter()
            .flat_map(|r| (r.start as usize..r.end as usize).map(|i| (r.cols.file, r.cols.seq(i))));
        kept.chain(self.dropped.iter().map(|&(_, file, seq)| (file, seq)))
    }

    /// The seq of the first row.
    pub fn first_seq(&self) -> u64 {
        let first = &self.runs[0];
        first.cols.seq(first.start as usize)
    }

    /// How `row` stands to the rows at the end of the stream with its seq
    /// (the copies of a seq are the stream's last rows): one equal to it in
    /// every column, one with its hash only, or none with its hash.
    ///
    /// The rows of a seq arrive in hash order (the merge's: every lake file
    /// is sorted by (`stream`, `stream_key`, `seq`, `hash`), `crate::merge`),
    /// so those with `row`'s hash are the last ones (`same` of them), and
    /// only they are compared: K versions of one seq with K hashes cost K
    /// comparisons, not K² (64,000 damaged copies of one row took ~10 s).
    /// Past [`SAME_SCANNED_MAX`] copies with one hash, `row` is looked up
    /// among them by its content.
    fn copy_of(&self, row: Row<'_>, at: &mut SameCopies) -> CopyOf {
        let last = self.runs.last().expect("a stream has a row");
        let i = last.end as usize - 1;
        let hash = last.cols.hash(i);
        if last.cols.seq(i) != row.seq() || hash != row.hash() {
            debug_assert!(
                last.cols.seq(i) != row.seq() || hash < row.hash(),
                "rows of one seq out of hash order"
            );
            // The row starts a new stretch of copies.
            *at = SameCopies::default();
            return CopyOf::Neither;
        }
        let view = row.view();
        let is_row = |&(r, i): &(u32, u32)| self.runs[r as usize].cols.view(i as usize) == view;
        let plain = if at.same > SAME_SCANNED_MAX {
            let copies = at.copies.get_or_insert_with(|| {
                let mut copies = Copies::default();
                for (r, i) in self.last_rows(at.same as usize) {
                    let print = content_print(&self.runs[r as usize].cols.view(i as usize));
                    copies.entry(print).or_default().push((r, i));
                }
                Box::new(copies)
            });
            copies
                .get(&content_print(&view))
                .is_some_and(|at| at.iter().any(is_row))
        } else {
            self.last_rows(at.same as usize).any(|at| is_row(&at))
        };
        if plain {
            CopyOf::Plain
        } else {
            CopyOf::HashOnly
        }
    }

    /// The last `n` rows, last first, as (run, row).
    fn last_rows(&self, n: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.runs
            .iter()
            .enumerate()
            .rev()
            .flat_map(|(r, run)| (run.start..run.end).rev().map(move |i| (r as u32, i)))
            .take(n)
    }

    /// Drops the first `n` rows (all of them if there are fewer): what is
    /// left starts at the row after them, in the same order. The plain
    /// duplicates dropped are forgotten: only the notes and a re-proof's
    /// check read them ([`StreamRows::file_runs`], [`StreamRows::file_rows`]),
    /// and both take a stream before any of its rows is skipped (copies of
    /// proved rows, `run::Proof::drop_proved_copies`).
    pub fn skip_first(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        let mut whole = 0;
        for r in self.runs.iter_mut() {
            let here = (r.end - r.start) as usize;
            if n < here {
                r.start += n as u32; // n < here ≤ u32::MAX
                break;
            }
            n -= here;
            whole += 1;
        }
        self.runs.drain(..whole);
        self.dropped.clear();
    }

    /// Appends `row`: to the last run when it is the row after it.
    fn push(&mut self, row: Row<'_>) {
        let (cols, i) = row.batch();
        let i = u32::try_from(i).expect("a record batch has fewer than 2³² rows");
        match self.runs.last_mut() {
            Some(last) if last.end == i && Arc::ptr_eq(&last.cols, cols) => last.end += 1,
            _ => self.runs.push(Run {
                cols: Arc::clone(cols),
                start: i,
                end: i + 1,
            }),
        }
        self.len += 1;
    }
}

/// How a row stands to the rows of its seq before it ([`StreamRows::copy_of`]).
enum CopyOf {
    /// One equal to it in every column: a plain duplicate.
    Plain,
    /// One with its hash, none with its content.
    HashOnly,
    /// None with its hash.
    Neither,
}

/// The order of two rows of one stream with one seq and one hash, each with
/// whether it hashes to its recorded hash: the one that does first (the
/// event the hash vouches for, which the folds then read), then by their
/// columns in field order, an absent value before any. Not by the file
/// each came from: what a lake's report says never depends on how its
/// files are named (rev-s51-exact F1). `checks.sql` orders them alike.
fn copies_order(a: (&EventRef<'_>, bool), b: (&EventRef<'_>, bool)) -> std::cmp::Ordering {
    let ((a, a_ok), (b, b_ok)) = (a, b);
    b_ok.cmp(&a_ok)
        .then_with(|| a.v.cmp(&b.v))
        .then_with(|| a.event_id.cmp(b.event_id))
        .then_with(|| a.kind.cmp(b.kind))
        .then_with(|| a.occurred_at_ms.cmp(&b.occurred_at_ms))
        .then_with(|| a.currency.cmp(&b.currency))
        .then_with(|| a.amount.cmp(&b.amount))
        .then_with(|| a.balance_after.cmp(&b.balance_after))
        .then_with(|| a.held_after.cmp(&b.held_after))
        .then_with(|| a.overdraft_limit.cmp(&b.overdraft_limit))
        .then_with(|| a.entry_id.cmp(&b.entry_id))
        .then_with(|| a.transfer_id.cmp(&b.transfer_id))
        .then_with(|| a.counterparty.cmp(&b.counterparty))
        .then_with(|| a.source.cmp(&b.source))
        .then_with(|| a.destination.cmp(&b.destination))
        .then_with(|| a.deadline_ms.cmp(&b.deadline_ms))
        .then_with(|| a.reason.cmp(&b.reason))
        .then_with(|| a.prev_hash.cmp(b.prev_hash))
}

/// Puts each set of `rows` with one seq and one hash in [`copies_order`],
/// with their verdicts `ok`.
fn order_changed_copies(rows: &mut [EventRef<'_>], ok: &mut [bool]) {
    let mut start = 0;
    while start < rows.len() {
        let (seq, hash) = (rows[start].seq, rows[start].hash);
        let mut end = start + 1;
        while end < rows.len() && rows[end].seq == seq && rows[end].hash == hash {
            end += 1;
        }
        if end - start > 1 {
            let mut set: Vec<(EventRef<'_>, bool)> = rows[start..end]
                .iter()
                .copied()
                .zip(ok[start..end].iter().copied())
                .collect();
            set.sort_by(|a, b| copies_order((&a.0, a.1), (&b.0, b.1)));
            for (i, (row, row_ok)) in set.into_iter().enumerate() {
                rows[start + i] = row;
                ok[start + i] = row_ok;
            }
        }
        start = end;
    }
}

/// A chunk's streams borrowed from their batches, every row's hash
/// recomputed: all of the chunk's rows at once ([`HashCheck`]), so a chunk of
/// short transfer streams is hashed as one batch rather than a few rows at a
/// time. The rows and verdicts of every stream are in one vector each (no
/// allocation per stream).
pub struct Views<'c> {
    rows: Vec<EventRef<'c>>,
    hash_ok: Vec<bool>,
    /// Per stream: its kind, key and rows' range.
    streams: Vec<(Stream, &'c str, Range<usize>)>,
}

impl<'c> Views<'c> {
    pub fn new(chunk: &'c [StreamRows], check: &mut HashCheck) -> Views<'c> {
        let total = chunk.iter().map(StreamRows::len).sum();
        let mut rows = Vec::with_capacity(total);
        let mut streams = Vec::with_capacity(chunk.len());
        for s in chunk {
            let start = rows.len();
            for r in &s.runs {
                view_rows(&r.cols, r.start as usize..r.end as usize, &mut rows);
            }
            streams.push((s.stream, s.key(), start..rows.len()));
        }
        let all: Vec<&EventRef<'c>> = rows.iter().collect();
        let mut hash_ok = Vec::with_capacity(all.len());
        check.check(&all, &mut hash_ok);
        drop(all);
        for (s, (_, _, range)) in chunk.iter().zip(&streams) {
            if s.changed_copies {
                order_changed_copies(&mut rows[range.clone()], &mut hash_ok[range.clone()]);
            }
        }
        Views {
            rows,
            hash_ok,
            streams,
        }
    }

    /// How many streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Stream `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<StreamView<'_>> {
        self.streams.get(i).map(|(stream, key, r)| StreamView {
            stream: *stream,
            key,
            rows: &self.rows[r.clone()],
            hash_ok: &self.hash_ok[r.clone()],
        })
    }

    /// Every stream, in order.
    pub fn iter(&self) -> impl Iterator<Item = StreamView<'_>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// Rows `range` of `cols`, borrowed, appended to `out`: each written where
/// it stays. An `EventRef` is ~300 bytes; collected from an iterator, each
/// was built aside and then copied in (`memmove` was 4.6 % of the proof's
/// CPU at 10M events, 2.8 % after).
fn view_rows<'c>(cols: &'c Cols, range: Range<usize>, out: &mut Vec<EventRef<'c>>) {
    let n = range.len();
    out.reserve(n);
    for (slot, i) in out.spare_capacity_mut().iter_mut().zip(range) {
        cols.view_into(i, slot);
    }
    // SAFETY: the loop initialised the `n` slots after the current length,
    // all within the capacity reserved above.
    unsafe { out.set_len(out.len() + n) };
}

/// One stream as the per-stream checks and the facts read it.
#[derive(Clone, Copy)]
pub struct StreamView<'a> {
    pub stream: Stream,
    pub key: &'a str,
    pub rows: &'a [EventRef<'a>],
    /// `hash_ok[i]`: `rows[i].hash` is the SHA-256 of its canonical encoding.
    pub hash_ok: &'a [bool],
}

/// A stream's rows and hash verdicts built from owned events (tests, tools):
/// [`OwnedView::view`] lends them as a [`StreamView`].
pub struct OwnedView<'a> {
    stream: Stream,
    key: &'a str,
    rows: Vec<EventRef<'a>>,
    hash_ok: Vec<bool>,
}

impl<'a> OwnedView<'a> {
    /// The stream `key` of `events`; their hashes are checked here.
    pub fn of_events(stream: Stream, key: &'a str, events: &'a [Event]) -> OwnedView<'a> {
        let rows: Vec<EventRef<'a>> = events.iter().map(Event::view).collect();
        let mut hash_ok = Vec::with_capacity(rows.len());
        HashCheck::default().check(&rows.iter().collect::<Vec<_>>(), &mut hash_ok);
        OwnedView {
            stream,
            key,
            rows,
            hash_ok,
        }
    }

    pub fn view(&self) -> StreamView<'_> {
        StreamView {
            stream: self.stream,
            key: self.key,
            rows: &self.rows,
            hash_ok: &self.hash_ok,
        }
    }
}

impl<'a> StreamView<'a> {
    /// The rows grouped by seq: each group holds the versions of one event.
    pub fn by_seq(&self) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> + '_ {
        let mut i = 0;
        std::iter::from_fn(move || {
            if i >= self.rows.len() {
                return None;
            }
            let start = i;
            let seq = self.rows[i].seq;
            while i < self.rows.len() && self.rows[i].seq == seq {
                i += 1;
            }
            Some((seq, start..i))
        })
    }

    /// One row per seq (the first version, by hash order; of rows with that
    /// hash, the first in [`copies_order`]): what the folds read. The other
    /// versions of a conflict are reported by `duplicates`.
    pub fn primary(&self) -> impl Iterator<Item = &EventRef<'a>> + '_ {
        // The rows are in seq order: the first of each seq is the one whose
        // seq differs from the row before it (a filter, not `by_seq`'s
        // ranges: five folds read every stream this way).
        let mut last = None;
        self.rows.iter().filter(move |r| {
            let first = last != Some(r.seq);
            last = Some(r.seq);
            first
        })
    }
}

/// Where a stream's proof stopped: what the per-stream checks need to go on
/// from the next event (an incremental run resumes here, see `checkpoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tail {
    /// The last seq proved (0: nothing yet, the next is seq 1).
    pub last_seq: u64,
    /// The hashes of the versions at `last_seq` (one unless a conflict).
    pub last_hashes: LastHashes,
}

/// The hashes of the versions at a stream's last seq. Nearly always one
/// well-formed SHA-256, kept inline as its 32 bytes (a proof holds one per
/// stream, millions of them); anything else is kept as written. In a
/// checkpoint it is the list of hex strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub enum LastHashes {
    #[default]
    None,
    One([u8; 32]),
    Other(Vec<String>),
}

/// Eight lower-case hex digits (`w`'s bytes, the first digit in the low
/// byte) as the four bytes they spell, and whether every byte is one of
/// `0-9a-f` (if not, the bytes mean nothing). Eight at a time in one
/// register (SWAR): a stream's last hash is decoded once per stream,
/// millions a run, and a digit at a time through a table (each byte stored,
/// the 32 then read back as words) it cost ~0.2 % of a proof's samples more
/// (10M: `check_stream` and `unhex` 2.09 → 1.87 %).
#[inline]
fn unhex8(w: u64) -> (u32, bool) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte: set where the byte is at least `c` (every
    // byte has its high bit forced on first, so no subtraction borrows from
    // the next byte; bytes of 0x80 and up are refused below).
    let at_least = |c: u8| ((w | HIGH).wrapping_sub(u64::from(c) * ONES)) & HIGH;
    let digit = at_least(b'0') & !at_least(b'9' + 1);
    let letter = at_least(b'a') & !at_least(b'f' + 1);
    let valid = w & HIGH == 0 && digit | letter == HIGH;
    // '0'..'9' are 0x30..0x39 and 'a'..'f' 0x61..0x66: the low nibble, plus
    // 9 for a letter.
    let nibbles = (w & (0x0f * ONES)) + (letter >> 7) * 9;
    // Each pair of digits (high nibble first) into the low byte of its
    // 16-bit lane, then the four lanes' bytes packed together.
    const LANE_LOW: u64 = 0x00ff_00ff_00ff_00ff;
    let pairs = ((nibbles & LANE_LOW) << 4) | ((nibbles >> 8) & LANE_LOW);
    let packed = (pairs | (pairs >> 8)) & 0x0000_ffff_0000_ffff;
    (((packed | (packed >> 16)) & 0xffff_ffff) as u32, valid)
}

/// A SHA-256 written as 64 lower-case hex digits, as its 32 bytes (`None`
/// for any other string).
pub(crate) fn unhex(h: &str) -> Option<[u8; 32]> {
    let b: &[u8; 64] = h.as_bytes().try_into().ok()?;
    let mut out = [0u8; 32];
    let mut valid = true;
    for (o, eight) in out.chunks_exact_mut(4).zip(b.chunks_exact(8)) {
        let (bytes, ok) = unhex8(u64::from_le_bytes(eight.try_into().expect("8 bytes")));
        o.copy_from_slice(&bytes.to_le_bytes());
        valid &= ok;
    }
    valid.then_some(out)
}

impl LastHashes {
    /// The hashes `hashes` names, each once, sorted (the rows of a seq
    /// hand over theirs once a row: thousands of damaged copies of one row,
    /// each recording its hash, are one hash, which a tail kept thousands
    /// of times and judged at a cost of their square).
    pub fn of<'a>(hashes: impl IntoIterator<Item = &'a str>) -> LastHashes {
        let mut it = hashes.into_iter();
        let Some(first) = it.next() else {
            return LastHashes::None;
        };
        let second = it.next();
        if let (None, Some(one)) = (second, unhex(first)) {
            return LastHashes::One(one);
        }
        let mut all: Vec<&str> = [first].into_iter().chain(second).chain(it).collect();
        all.sort_unstable();
        all.dedup();
        match (all.as_slice(), unhex(all[0])) {
            ([_], Some(one)) => LastHashes::One(one),
            _ => LastHashes::Other(all.into_iter().map(str::to_owned).collect()),
        }
    }

    pub fn contains(&self, h: &str) -> bool {
        match self {
            LastHashes::None => false,
            LastHashes::One(b) => unhex(h).as_ref() == Some(b),
            LastHashes::Other(v) => v.iter().any(|x| x == h),
        }
    }
}

impl From<Vec<String>> for LastHashes {
    fn from(v: Vec<String>) -> LastHashes {
        LastHashes::of(v.iter().map(String::as_str))
    }
}

impl From<LastHashes> for Vec<String> {
    fn from(h: LastHashes) -> Vec<String> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        match h {
            LastHashes::None => Vec::new(),
            LastHashes::One(b) => vec![b
                .iter()
                .flat_map(|x| {
                    [
                        DIGITS[usize::from(x >> 4)] as char,
                        DIGITS[usize::from(x & 15)] as char,
                    ]
                })
                .collect()],
            LastHashes::Other(v) => v,
        }
    }
}

/// Delivery statistics of a scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScanStats {
    pub rows_read: u64,
    /// Extra copies of an event dropped by the (event_id, hash) dedup.
    pub plain_duplicates: u64,
    pub distinct_rows: u64,
    pub streams: u64,
}

/// Groups a sorted row sequence into [`StreamRows`].
#[derive(Default)]
pub struct Grouper {
    current: Option<StreamRows>,
    pub stats: ScanStats,
    /// The copies at the end of `current`.
    at: SameCopies,
}

impl Grouper {
    /// Adds one row; returns the previous stream when this row starts a new one.
    pub fn push(&mut self, row: Row<'_>) -> Option<StreamRows> {
        self.stats.rows_read += 1;
        let done = match &mut self.current {
            Some(cur)
                if cur.stream == row.stream()
                    && same(cur.key().as_bytes(), row.key().as_bytes()) =>
            {
                // Every copy of this seq is at the end of the group (rows
                // arrive in seq order); a copy equal to any is a redelivery.
                match cur.copy_of(row, &mut self.at) {
                    CopyOf::Plain => {
                        self.stats.plain_duplicates += 1;
                        let after = u32::try_from(cur.runs.len()).expect("fewer than 2³² runs");
                        cur.dropped.push((after, row.batch().0.file, row.seq()));
                        return None;
                    }
                    CopyOf::HashOnly => cur.changed_copies = true,
                    CopyOf::Neither => {}
                }
                None
            }
            _ => {
                self.at = SameCopies::default();
                self.current.take()
            }
        };
        let cur = self
            .current
            .get_or_insert_with(|| StreamRows::new(row.stream()));
        cur.push(row);
        self.at.same += 1;
        if let Some(copies) = self.at.copies.as_deref_mut() {
            let last = cur.runs.last().expect("pushed");
            let at = ((cur.runs.len() - 1) as u32, last.end - 1);
            copies
                .entry(content_print(&row.view()))
                .or_default()
                .push(at);
        }
        self.stats.distinct_rows += 1;
        if done.is_some() {
            self.stats.streams += 1;
        }
        done
    }

    /// The last stream, if any.
    pub fn finish(&mut self) -> Option<StreamRows> {
        let last = self.current.take();
        if last.is_some() {
            self.stats.streams += 1;
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of account rows of the scan's file `file`, each (key, seq,
    /// hash), every other column the same.
    fn cols(file: u32, rows: &[(&str, i64, &str)]) -> Arc<Cols> {
        let rows: Vec<(&str, i64, &str, i64)> =
            rows.iter().map(|&(k, s, h)| (k, s, h, 7)).collect();
        cols_at(file, &rows)
    }

    /// [`cols`], each row with its `occurred_at_ms` (the 4th).
    fn cols_at(file: u32, rows: &[(&str, i64, &str, i64)]) -> Arc<Cols> {
        use datafusion::arrow::array::{ArrayRef, Int64Array, StringViewArray, UInt16Array};
        use datafusion::arrow::record_batch::RecordBatch;
        let n = rows.len();
        let columns: Vec<(&str, ArrayRef)> = ledger_events::FIELDS
            .iter()
            .map(|&name| {
                let array: ArrayRef = match name {
                    "v" => Arc::new(UInt16Array::from(vec![1; n])),
                    "seq" => Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                    "stream_key" => {
                        Arc::new(StringViewArray::from_iter_values(rows.iter().map(|r| r.0)))
                    }
                    "hash" => Arc::new(StringViewArray::from_iter_values(rows.iter().map(|r| r.2))),
                    "stream" => Arc::new(StringViewArray::from(vec!["account"; n])),
                    "occurred_at_ms" => {
                        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3)))
                    }
                    "amount" | "balance_after" | "held_after" | "overdraft_limit"
                    | "deadline_ms" => Arc::new(Int64Array::from(vec![7; n])),
                    _ => Arc::new(StringViewArray::from(vec![format!("{name}-value"); n])),
                };
                (name, array)
            })
            .collect();
        let mut cols = Cols::from_batch(&RecordBatch::try_from_iter(columns).unwrap()).unwrap();
        cols.file = file;
        Arc::new(cols)
    }

    #[test]
    fn copies_of_one_seq_are_told_apart_by_hash_and_content_however_many() {
        // Seq 1 of `a` in hash order, as the merge hands it over: under h1
        // three contents, under h2 200 (past the look-up's threshold), each
        // content of h2 sent twice (the second time after all the others,
        // from another file), and under h3 the contents h2 had. Then seq 2.
        let mut rows: Vec<(&str, i64, &str, i64)> = vec![("a", 1, "h1", 0), ("a", 1, "h1", 1)];
        rows.extend([("a", 1, "h1", 0), ("a", 1, "h1", 2)]);
        rows.extend((0..200).map(|t| ("a", 1, "h2", t)));
        let f0 = cols_at(0, &rows);
        let again: Vec<_> = (0..200).rev().map(|t| ("a", 1, "h2", t)).collect();
        let f1 = cols_at(1, &again);
        let h3: Vec<_> = (0..200)
            .map(|t| ("a", 1, "h3", t))
            .chain([("a", 2, "h4", 0)])
            .collect();
        let f2 = cols_at(2, &h3);
        let mut g = Grouper::default();
        let order = (0..rows.len())
            .map(|i| (&f0, i))
            .chain((0..again.len()).map(|i| (&f1, i)))
            .chain((0..h3.len()).map(|i| (&f2, i)));
        for (c, i) in order {
            assert!(g.push(Row::at(c, i)).is_none(), "one stream");
        }
        let s = g.finish().unwrap();
        // Kept: 3 + 200 + 200 + 1; dropped: h1's repeated content, and
        // every content of h2 sent again.
        assert_eq!((s.len(), g.stats.plain_duplicates), (404, 201));
        assert!(s.changed_copies);
        let kept: std::collections::HashSet<(u64, String, i64)> = s
            .runs
            .iter()
            .flat_map(|r| (r.start as usize..r.end as usize).map(move |i| (r, i)))
            .map(|(r, i)| {
                let v = r.cols.view(i);
                (v.seq, v.hash.to_owned(), v.occurred_at_ms)
            })
            .collect();
        assert_eq!(kept.len(), 404, "no row kept twice");
    }

    #[test]
    fn a_streams_runs_by_file_hold_every_row_the_plain_duplicates_dropped_included() {
        // File 0 holds seqs 1, 2 and 3 of `a`; file 1 a plain duplicate of
        // seq 2 (a redelivery), and file 0 another, merged in that order.
        let f0 = cols(
            0,
            &[
                ("a", 1, "h1"),
                ("a", 2, "h2"),
                ("a", 2, "h2"),
                ("a", 3, "h3"),
            ],
        );
        let f1 = cols(1, &[("a", 2, "h2")]);
        let mut g = Grouper::default();
        for (c, i) in [(&f0, 0), (&f0, 1), (&f1, 0), (&f0, 2), (&f0, 3)] {
            assert!(g.push(Row::at(c, i)).is_none());
        }
        let s = g.finish().unwrap();
        assert_eq!((s.len(), g.stats.plain_duplicates), (3, 2));
        let runs: Vec<(u32, u64, u64, u32)> = s.file_runs().collect();
        assert_eq!(
            runs,
            [(0, 1, 2, 2), (1, 2, 2, 1), (0, 2, 2, 1), (0, 3, 3, 1)]
        );
        // Noted: file 0's two stretches (from 1: two rows; from 2: its
        // duplicate and seq 3), file 1's one; as many rows as each holds.
        let mut n = crate::presence::Noter::new(["f0", "f1"].into_iter());
        n.note(s.stream, s.key(), s.file_runs());
        let p = n.finish();
        let at = |seq| crate::presence::fingerprint_at(Stream::Account, "a", seq);
        assert_eq!(
            (p.get("f0"), p.rows("f0")),
            (&[at(1), at(2)][..], Some(&[2, 2][..]))
        );
        assert_eq!((p.get("f1"), p.rows("f1")), (&[at(2)][..], Some(&[1][..])));
        // The first row skipped (a copy of a proved row): the rows left,
        // from seq 2 on.
        let mut s = s;
        s.skip_first(1);
        assert_eq!((s.len(), s.first_seq()), (2, 2));
        let runs: Vec<(u32, u64, u64, u32)> = s.file_runs().collect();
        assert_eq!(runs, [(0, 2, 2, 1), (0, 3, 3, 1)]);
    }

    #[test]
    fn a_row_at_seq_0_is_a_run_and_a_stretch_of_its_own() {
        // File 0 holds seq 0 (no row of a chain) twice, then seqs 1 to 3.
        let f0 = cols(
            0,
            &[
                ("a", 0, "h0"),
                ("a", 0, "h0"),
                ("a", 1, "h1"),
                ("a", 2, "h2"),
                ("a", 3, "h3"),
            ],
        );
        let mut g = Grouper::default();
        for i in 0..5 {
            assert!(g.push(Row::at(&f0, i)).is_none());
        }
        let s = g.finish().unwrap();
        let runs: Vec<(u32, u64, u64, u32)> = s.file_runs().collect();
        assert_eq!(runs, [(0, 0, 0, 1), (0, 0, 0, 1), (0, 1, 3, 3)]);
        // Noted: the rows at seq 0 one stretch, seqs 1 to 3 another, so a
        // gap from seq 1 finds the second.
        let mut n = crate::presence::Noter::new(["f0"].into_iter());
        n.note(s.stream, s.key(), s.file_runs());
        let p = n.finish();
        let at = |seq| crate::presence::fingerprint_at(Stream::Account, "a", seq);
        assert_eq!(
            (p.get("f0"), p.rows("f0")),
            (&[at(0), at(1)][..], Some(&[2, 3][..]))
        );
    }

    #[test]
    fn a_duplicate_comes_after_the_run_it_was_dropped_behind_and_each_files_rows_add_up() {
        // File 0 holds seqs 1 to 3 of `a` in one batch, file 1 a plain
        // duplicate of seq 2, merged between file 0's 2 and 3: file 0's
        // run goes on past the duplicate, which comes after it.
        let (f0, f1) = (
            cols(0, &[("a", 1, "h1"), ("a", 2, "h2"), ("a", 3, "h3")]),
            cols(1, &[("a", 2, "h2")]),
        );
        let mut g = Grouper::default();
        for (c, i) in [(&f0, 0), (&f0, 1), (&f1, 0), (&f0, 2)] {
            assert!(g.push(Row::at(c, i)).is_none());
        }
        let s = g.finish().unwrap();
        let runs: Vec<(u32, u64, u64, u32)> = s.file_runs().collect();
        assert_eq!(runs, [(0, 1, 3, 3), (1, 2, 2, 1)]);
        // Each file's rows of the stream, over its stretches, are exact.
        let mut n = crate::presence::Noter::new(["f0", "f1"].into_iter());
        n.note(s.stream, s.key(), s.file_runs());
        let p = n.finish();
        let total = |f: &str| p.rows(f).unwrap().iter().sum::<u32>();
        assert_eq!((total("f0"), total("f1")), (3, 1));
    }

    #[test]
    fn a_run_is_cut_where_a_seq_is_skipped_so_each_stretch_spans_only_its_rows() {
        // One batch of file 0 holds seqs 1, 2, 2 (two versions), 3 and 6
        // of `a`: a run from 1 to 3 of four rows, and one at 6.
        let f0 = cols(
            0,
            &[
                ("a", 1, "h1"),
                ("a", 2, "h2"),
                ("a", 2, "h2b"),
                ("a", 3, "h3"),
                ("a", 6, "h6"),
            ],
        );
        let mut g = Grouper::default();
        for i in 0..f0.len() {
            assert!(g.push(Row::at(&f0, i)).is_none());
        }
        let s = g.finish().unwrap();
        let runs: Vec<(u32, u64, u64, u32)> = s.file_runs().collect();
        assert_eq!(runs, [(0, 1, 3, 4), (0, 6, 6, 1)]);
        // Noted as two stretches: seqs 1 to 4 hold the first's four rows,
        // and 6 the second's one (one stretch of five rows from 1 would
        // claim seqs up to 5, which the file does not hold).
        let mut n = crate::presence::Noter::new(["f0"].into_iter());
        n.note(s.stream, s.key(), s.file_runs());
        let p = n.finish();
        let at = |seq| crate::presence::fingerprint_at(Stream::Account, "a", seq);
        assert_eq!(
            (p.get("f0"), p.rows("f0")),
            (&[at(1), at(6)][..], Some(&[4, 1][..]))
        );
    }

    #[test]
    fn a_keyed_re_proof_sees_every_row_of_a_stream_by_file_the_plain_duplicates_included() {
        use crate::keyed::{Keyed, Seen, Wanted};
        use crate::presence::Noter;
        // As above: file 0 holds seqs 1, 2, 2 (a plain duplicate) and 3 of
        // `a`, file 1 a plain duplicate of seq 2; merged in that order.
        let merged = |f0: &[(&str, i64, &str)]| {
            let (f0, f1) = (cols(0, f0), cols(1, &[("a", 2, "h2")]));
            let mut g = Grouper::default();
            let mut order = vec![(&f0, 0), (&f0, 1), (&f1, 0)];
            order.extend((2..f0.len()).map(|i| (&f0, i)));
            for (c, i) in order {
                assert!(g.push(Row::at(c, i)).is_none());
            }
            g.finish().unwrap()
        };
        let f0 = [
            ("a", 1, "h1"),
            ("a", 2, "h2"),
            ("a", 2, "h2"),
            ("a", 3, "h3"),
        ];
        let s = merged(&f0);
        let mut rows: Vec<(u32, u64)> = s.file_rows().collect();
        rows.sort_unstable();
        assert_eq!(rows, [(0, 1), (0, 2), (0, 2), (0, 3), (1, 2)]);
        // The proof's notes of the two files, and a re-proof's check of them.
        let mut n = Noter::new(["f0", "f1"].into_iter());
        n.note(s.stream, s.key(), s.file_runs());
        let noted = n.finish();
        let (keys, plain) = (["a".to_owned()], std::collections::HashSet::new());
        // Its stretches enumerated, and matched by undoing the mix.
        for cap in [crate::keyed::WANTED_STARTS_MAX, 0] {
            let wanted = Wanted::capped(cap, [(Stream::Account, "a", 3)]).unwrap();
            let keyed = Keyed::checked(&keys, "a test", wanted, &["f0", "f1"], &noted, &plain);
            let seen_of = |s: &StreamRows| {
                let mut seen = vec![Some(Seen::default()), Some(Seen::default())];
                keyed.see_stream(&mut seen, s);
                seen.into_iter().map(Option::unwrap).collect::<Vec<_>>()
            };
            let seen = seen_of(&s);
            assert!(keyed.check("f0", &seen[0]).is_ok() && keyed.check("f1", &seen[1]).is_ok());
            // A file not checked (read whole) is skipped.
            let mut one = vec![Some(Seen::default()), None];
            keyed.see_stream(&mut one, &s);
            assert!(keyed.check("f0", one[0].as_ref().unwrap()).is_ok());
            // File 0's duplicate not read (its footer hid it): one row fewer.
            let hid = seen_of(&merged(&[f0[0], f0[1], f0[3]]));
            let err = keyed.check("f0", &hid[0]).unwrap_err().to_string();
            assert!(err.contains("gave at least 1 fewer row(s)"), "{err}");
            assert!(keyed.check("f1", &hid[1]).is_ok());
        }
    }

    /// `unhex` one digit at a time, as the reference.
    fn unhex_by_digit(h: &str) -> Option<[u8; 32]> {
        let b = h.as_bytes();
        if b.len() != 64 {
            return None;
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = digit(b[2 * i])? << 4 | digit(b[2 * i + 1])?;
        }
        Some(out)
    }

    #[test]
    fn unhex_decodes_every_digit_and_refuses_every_other_byte_at_every_place() {
        let good = "0123456789abcdeffedcba98765432100f1e2d3c4b5a69788796a5b4c3d2e1f0";
        let want = unhex_by_digit(good).unwrap();
        assert_eq!(unhex(good), Some(want));
        assert_eq!(want[..3], [0x01, 0x23, 0x45]);
        // Every byte value at every place of the hash (so in every lane of
        // every word): the same answer as the reference.
        let mut h = good.as_bytes().to_vec();
        for place in 0..64 {
            let kept = h[place];
            for byte in 0..=255u8 {
                h[place] = byte;
                let got = std::str::from_utf8(&h).ok().map(unhex);
                let reference = std::str::from_utf8(&h).ok().map(unhex_by_digit);
                assert_eq!(got, reference, "byte {byte:#04x} at {place}");
            }
            h[place] = kept;
        }
        // Raw words (bytes of 0x80 and up too, which no `str` holds alone).
        for lane in 0..8 {
            for byte in 0..=255u8 {
                let mut w = *b"89abcdef";
                w[lane] = byte;
                let reference =
                    unhex_by_digit(&format!("{}{}", String::from_utf8_lossy(&w), &good[8..]))
                        .filter(|_| w.is_ascii())
                        .map(|b| u32::from_le_bytes(b[..4].try_into().unwrap()));
                let (bytes, ok) = unhex8(u64::from_le_bytes(w));
                assert_eq!(ok.then_some(bytes), reference, "{byte:#04x} in lane {lane}");
            }
        }
        // A multi-byte character, and the wrong lengths.
        let wide = format!("{}é{}", &good[..30], &good[32..]);
        assert_eq!(wide.len(), 64);
        assert_eq!(unhex(&wide), None);
        assert_eq!(unhex(&good[..63]), None);
        assert_eq!(unhex(&format!("{good}0")), None);
        assert_eq!(unhex(""), None);
    }

    #[test]
    fn last_hashes_keep_one_hex_hash_inline_and_anything_else_as_written() {
        let h = "0123456789abcdef".repeat(4);
        let one = LastHashes::of([h.as_str()]);
        assert!(matches!(one, LastHashes::One(_)));
        assert!(one.contains(&h));
        assert!(!one.contains(&h.to_uppercase()));
        assert!(!one.contains(&h[..63]));
        let odd = ["not hex", ""];
        for (hashes, want_other) in [(vec![h.as_str(), "x"], true), (odd.to_vec(), true)] {
            let l = LastHashes::of(hashes.iter().copied());
            assert_eq!(matches!(l, LastHashes::Other(_)), want_other);
            for x in &hashes {
                assert!(l.contains(x), "{x:?}");
            }
        }
        assert_eq!(
            LastHashes::of([h.to_uppercase().as_str()]),
            LastHashes::Other(vec![h.to_uppercase()])
        );
        // The checkpoint's form is the list of strings, both ways.
        for l in [one, LastHashes::None, LastHashes::of(odd)] {
            let v: Vec<String> = l.clone().into();
            assert_eq!(LastHashes::from(v), l);
        }
        assert_eq!(
            Vec::<String>::from(LastHashes::of([h.as_str()])),
            std::slice::from_ref(&h)
        );
        // Each once, sorted.
        assert_eq!(
            LastHashes::of([h.as_str(), h.as_str(), h.as_str()]),
            one_of(&h)
        );
        assert_eq!(
            LastHashes::of(["y", "x", "y"]),
            LastHashes::Other(vec!["x".into(), "y".into()])
        );
    }

    fn one_of(h: &str) -> LastHashes {
        LastHashes::One(unhex(h).unwrap())
    }
}
