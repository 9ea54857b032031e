//! From sorted rows to streams: dedup by (`event_id`, `hash`) and group.
//!
//! Input rows arrive sorted by `stream_key`, `seq`, `hash` (see `lake`), so
//! every copy of an event is adjacent to the others. A copy equal to the kept
//! row in every column is a plain duplicate (a redelivery) and is counted and
//! dropped; two rows with the same (`event_id`, `hash`) but different content
//! are both kept, because one of them does not hash to its recorded hash and
//! the completeness check must name it. Rows with the same seq and different
//! hashes are the versions of a conflict and are all kept.

use std::borrow::Cow;

use ledger_events::{Event, EventRef, Stream};

use crate::rows::Row;

/// One stream's distinct rows, sorted by seq then hash, with each row's
/// recomputed-hash verdict.
pub struct StreamRows {
    pub stream: Stream,
    pub key: String,
    pub rows: Vec<Row>,
    /// `hash_ok[i]`: `rows[i].hash` is the SHA-256 of its canonical encoding.
    pub hash_ok: Vec<bool>,
}

impl StreamRows {
    /// The stream's rows borrowed from their batches: what the checks read.
    pub fn view(&self) -> StreamView<'_> {
        StreamView {
            stream: self.stream,
            key: &self.key,
            rows: self.rows.iter().map(Row::view).collect(),
            hash_ok: Cow::Borrowed(&self.hash_ok),
        }
    }
}

/// One stream as the per-stream checks and the facts read it.
pub struct StreamView<'a> {
    pub stream: Stream,
    pub key: &'a str,
    pub rows: Vec<EventRef<'a>>,
    pub hash_ok: Cow<'a, [bool]>,
}

impl<'a> StreamView<'a> {
    /// A stream from owned events (tests, tools): the hashes are checked here.
    pub fn of_events(stream: Stream, key: &'a str, events: &'a [Event]) -> StreamView<'a> {
        let mut scratch = Vec::new();
        let rows: Vec<EventRef<'a>> = events.iter().map(Event::view).collect();
        let hash_ok = rows.iter().map(|r| r.hash_matches(&mut scratch)).collect();
        StreamView {
            stream,
            key,
            rows,
            hash_ok: Cow::Owned(hash_ok),
        }
    }

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

    /// One row per seq (the first version, by hash order): what the folds
    /// read. The other versions of a conflict are reported by `duplicates`.
    pub fn primary(&self) -> impl Iterator<Item = &EventRef<'a>> + '_ {
        self.by_seq().map(|(_, r)| &self.rows[r.start])
    }
}

/// Where a stream's proof stopped: what the per-stream checks need to go on
/// from the next event (an incremental run resumes here, see `checkpoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tail {
    /// The last seq proved (0: nothing yet, the next is seq 1).
    pub last_seq: u64,
    /// The hashes of the versions at `last_seq` (one unless a conflict).
    pub last_hashes: Vec<String>,
    /// Account streams: (seq, balance_after, held_after) of the last
    /// well-formed row, which the balance refold continues from.
    pub fold: Option<(u64, i64, i64)>,
}

/// Delivery statistics of a scan.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ScanStats {
    pub rows_read: u64,
    /// Extra copies of an event dropped by the (event_id, hash) dedup.
    pub plain_duplicates: u64,
    pub distinct_rows: u64,
    pub streams: u64,
}

/// Groups a sorted row sequence into [`StreamRows`], checking each distinct
/// row's hash.
#[derive(Default)]
pub struct Grouper {
    current: Option<StreamRows>,
    /// The canonical encoding's buffer, reused for every row.
    scratch: Vec<u8>,
    pub stats: ScanStats,
}

impl Grouper {
    /// Adds one row; returns the previous stream when this row starts a new one.
    pub fn push(&mut self, row: Row) -> Option<StreamRows> {
        self.stats.rows_read += 1;
        let done = match &mut self.current {
            Some(cur) if cur.stream == row.stream() && cur.key == row.key() => {
                // Every copy of this seq is at the end of the group (rows
                // arrive in seq order); a copy equal to any is a redelivery.
                let seq = row.seq();
                let mut same_seq = cur.rows.iter().rev().take_while(|r| r.seq() == seq);
                if same_seq.any(|r| r.hash() == row.hash() && r.view() == row.view()) {
                    self.stats.plain_duplicates += 1;
                    return None;
                }
                None
            }
            _ => self.current.take(),
        };
        let cur = self.current.get_or_insert_with(|| StreamRows {
            stream: row.stream(),
            key: row.key().to_owned(),
            rows: Vec::new(),
            hash_ok: Vec::new(),
        });
        cur.hash_ok.push(row.view().hash_matches(&mut self.scratch));
        cur.rows.push(row);
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
