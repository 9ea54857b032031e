//! The k-way merge: every lake file is already sorted by (`stream`,
//! `stream_key`, `seq`, `hash`) (docs/LAKE.md, layout rule 4), so a table in
//! stream order is the merge of its files' row streams, not a sort.
//!
//! Memory is one record batch per open file instead of the whole table, and
//! time is one pass: each file is read by DataFusion as its own
//! single-partition stream (file order preserved), and a binary heap of file
//! cursors, keyed by each cursor's head row, yields the rows in order.
//!
//! A file whose rows go backwards violates the layout contract the merge
//! relies on; it stops the run naming the file rather than producing an order
//! (and therefore a verdict) that could be wrong.

use std::cmp::Ordering;

use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;
use ledger_events::{Event, SCHEMA_VERSIONS_KNOWN};

use crate::batch::events_from_batch;
use crate::lake::Error;

/// The lake's row order (`ledger_ingest::sort_rows`).
pub fn row_order(a: &Event, b: &Event) -> Ordering {
    (a.stream, &a.stream_key, a.seq, &a.hash).cmp(&(b.stream, &b.stream_key, b.seq, &b.hash))
}

/// One file's rows, one record batch at a time, with the next row at `head`.
pub struct Cursor {
    key: String,
    stream: SendableRecordBatchStream,
    rows: std::vec::IntoIter<Event>,
    head: Option<Event>,
}

impl Cursor {
    /// Opens a cursor on `stream` (the rows of the lake file `key`) and reads
    /// its first row.
    pub async fn open(key: String, stream: SendableRecordBatchStream) -> Result<Cursor, Error> {
        let mut c = Cursor {
            key,
            stream,
            rows: Vec::new().into_iter(),
            head: None,
        };
        c.head = c.next_row().await?;
        Ok(c)
    }

    fn file_err(&self, why: String) -> Error {
        Error::File {
            key: self.key.clone(),
            why,
        }
    }

    async fn next_row(&mut self) -> Result<Option<Event>, Error> {
        loop {
            if let Some(ev) = self.rows.next() {
                return Ok(Some(ev));
            }
            let Some(batch) = self.stream.next().await else {
                return Ok(None);
            };
            let batch =
                batch.map_err(|e| self.file_err(format!("not readable as Parquet: {e}")))?;
            let events = events_from_batch(&batch)
                .map_err(|e| self.file_err(format!("not in the lake layout: {e}")))?;
            if let Some(e) = events
                .iter()
                .find(|e| !SCHEMA_VERSIONS_KNOWN.contains(&e.v))
            {
                return Err(Error::Schema {
                    event_id: e.event_id.clone(),
                    v: e.v,
                });
            }
            self.rows = events.into_iter();
        }
    }

    /// Takes the head row and reads the next one, checking the file's order.
    async fn pop(&mut self) -> Result<Event, Error> {
        let ev = self.head.take().expect("pop on an exhausted cursor");
        self.head = self.next_row().await?;
        if let Some(next) = &self.head {
            if row_order(&ev, next) == Ordering::Greater {
                return Err(self.file_err(format!(
                    "rows are not sorted by (stream, stream_key, seq, hash) as layout lake-v1 requires: \
                     {} {} seq {} comes after {} {} seq {}",
                    next.stream.as_str(),
                    next.stream_key,
                    next.seq,
                    ev.stream.as_str(),
                    ev.stream_key,
                    ev.seq
                )));
            }
        }
        Ok(ev)
    }
}

/// A min-heap of cursor indices ordered by their head rows (ties by file
/// order, so the merge is deterministic).
struct Heap {
    idx: Vec<usize>,
}

impl Heap {
    fn less(cursors: &[Cursor], a: usize, b: usize) -> bool {
        let (ha, hb) = (
            cursors[a].head.as_ref().expect("heap holds live cursors"),
            cursors[b].head.as_ref().expect("heap holds live cursors"),
        );
        row_order(ha, hb).then(a.cmp(&b)) == Ordering::Less
    }

    fn sift_down(&mut self, cursors: &[Cursor], mut i: usize) {
        let n = self.idx.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && Self::less(cursors, self.idx[l], self.idx[m]) {
                m = l;
            }
            if r < n && Self::less(cursors, self.idx[r], self.idx[m]) {
                m = r;
            }
            if m == i {
                return;
            }
            self.idx.swap(i, m);
            i = m;
        }
    }

    fn build(cursors: &[Cursor]) -> Heap {
        let mut h = Heap {
            idx: (0..cursors.len())
                .filter(|&i| cursors[i].head.is_some())
                .collect(),
        };
        for i in (0..h.idx.len() / 2).rev() {
            h.sift_down(cursors, i);
        }
        h
    }
}

/// Merges the cursors, calling `visit` with runs of at most `chunk` rows in
/// the lake's order.
pub async fn merge(
    mut cursors: Vec<Cursor>,
    chunk: usize,
    visit: &mut impl FnMut(Vec<Event>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut heap = Heap::build(&cursors);
    let mut out = Vec::with_capacity(chunk);
    while let Some(&top) = heap.idx.first() {
        out.push(cursors[top].pop().await?);
        if cursors[top].head.is_none() {
            let last = heap.idx.pop().expect("non-empty");
            if !heap.idx.is_empty() {
                heap.idx[0] = last;
            }
        }
        heap.sift_down(&cursors, 0);
        if out.len() == chunk {
            visit(std::mem::replace(&mut out, Vec::with_capacity(chunk)))?;
        }
    }
    if !out.is_empty() {
        visit(out)?;
    }
    Ok(())
}
