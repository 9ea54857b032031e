//! DataFusion record batches → rows the proof reads in place.
//!
//! A [`Cols`] holds one batch's columns, found by name and typed once (docs/LAKE.md: files
//! are read by name, a missing nullable column reads as null, extra columns are ignored). A
//! [`Row`] is a batch and a row index, borrowed (a stream keeps its rows as runs of a
//! shared batch: [`crate::stream::StreamRows`]); [`Row::view`] borrows the row as an
//! [`EventRef`] straight from the Arrow buffers. No row is copied into owned strings: the
//! proof reads 10⁷ rows a night, and building ~12 `String`s per row cost more than reading
//! the Parquet. Strings are read as Utf8View ([`crate::Lake::scan_sorted_where`] asks
//! DataFusion for view types): the Parquet reader then points each value into the
//! decompressed page or dictionary instead of copying it into an offset buffer.
//!
//! DataFusion 55.2 is built on arrow 59, the lake writer (`ledger-ingest`) on arrow 60, so
//! `ledger_ingest::rows_from_batch` cannot take DataFusion's batches; this is the same
//! mapping over DataFusion's re-exported arrow.

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, StringArray, StringViewArray, UInt16Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use ledger_events::event::same;
use ledger_events::{EventRef, Stream, SCHEMA_VERSIONS_KNOWN};

/// One record batch's columns, typed, with the per-row values every comparison needs
/// (stream and seq) decoded once.
pub struct Cols {
    v: UInt16Array,
    event_id: StringViewArray,
    stream: Vec<Stream>,
    stream_key: StringViewArray,
    seq: Vec<u64>,
    kind: StringViewArray,
    occurred: Int64Array,
    currency: Option<StringViewArray>,
    amount: Option<Int64Array>,
    balance_after: Option<Int64Array>,
    held_after: Option<Int64Array>,
    overdraft_limit: Option<Int64Array>,
    entry_id: Option<StringViewArray>,
    transfer_id: Option<StringViewArray>,
    counterparty: Option<StringViewArray>,
    source: Option<StringViewArray>,
    destination: Option<StringViewArray>,
    deadline_ms: Option<Int64Array>,
    reason: Option<StringViewArray>,
    prev_hash: StringViewArray,
    hash: StringViewArray,
    /// Which of the scan's files the batch is from (its index in the files
    /// the scan was given; 0 unless the merge sets it).
    pub(crate) file: u32,
}

/// Why a batch cannot be read as lake rows.
#[derive(Debug)]
pub enum BatchError {
    /// Not in the lake layout (a column missing, mistyped or null).
    Layout(String),
    /// A row of a schema version this reader does not know.
    Version { event_id: String, v: u16 },
}

pub(crate) fn col<T: Array + Clone + 'static>(
    b: &RecordBatch,
    name: &str,
) -> Result<Option<T>, BatchError> {
    match b.column_by_name(name) {
        None => Ok(None),
        Some(c) => c
            .as_any()
            .downcast_ref::<T>()
            .cloned()
            .map(Some)
            .ok_or_else(|| {
                BatchError::Layout(format!(
                    "column `{name}` has type {}, not the lake's type",
                    c.data_type()
                ))
            }),
    }
}

/// The string column `name` of `b` (as [`crate::lake::Lake::scan_columns`]
/// hands it over: every string type the proof takes as Utf8,
/// [`as_utf8`]), if it has one. A lake file's columns of the layout have
/// its types (its footer is refused otherwise, `crate::lake`): `None` is a
/// column the file lacks.
pub(crate) fn strings(b: &RecordBatch, name: &str) -> Option<StringArray> {
    col(b, name).ok().flatten()
}

/// Whether the proof reads a column of type `t` as strings: Utf8, and the
/// large strings and views another Arrow writer's schema may ask for (the
/// same Parquet column, which `Lake::scan_sorted_where` reads as views
/// alike).
fn proof_strings(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// `b` with every column the proof reads as strings ([`proof_strings`]) as
/// Utf8, so a column scan takes every file the proof takes, whatever
/// strings its writer asked for; any other column as it is. The error says
/// why a column could not be cast (large strings of more than 2 GiB in one
/// batch).
pub(crate) fn as_utf8(b: &RecordBatch) -> Result<RecordBatch, String> {
    let schema = b.schema();
    let other = |t: &DataType| proof_strings(t) && *t != DataType::Utf8;
    if !schema.fields().iter().any(|f| other(f.data_type())) {
        return Ok(b.clone());
    }
    let mut fields = Vec::with_capacity(b.num_columns());
    let mut columns = Vec::with_capacity(b.num_columns());
    for (f, c) in schema.fields().iter().zip(b.columns()) {
        if other(f.data_type()) {
            let utf8 = cast(c, &DataType::Utf8).map_err(|e| {
                format!("column `{}` ({}) as strings: {e}", f.name(), f.data_type())
            })?;
            fields.push(f.as_ref().clone().with_data_type(DataType::Utf8));
            columns.push(utf8);
        } else {
            fields.push(f.as_ref().clone());
            columns.push(Arc::clone(c));
        }
    }
    let schema =
        datafusion::arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| e.to_string())
}

/// Calls `row` with the fingerprint of each row's stream
/// ([`crate::presence::fingerprint`]), its seq and its index in `b`, for
/// every row of `b`
/// (its `stream`, `stream_key` and `seq` columns, as
/// [`crate::lake::Lake::scan_columns`] reads them) that names a known
/// stream; nothing when `b` lacks one of them (not the lake layout: the
/// proof says so). Rows come grouped by stream: each stream's fingerprint
/// is computed once.
pub(crate) fn stream_fingerprints(
    b: &RecordBatch,
    mut row: impl FnMut(crate::presence::Fingerprint, Option<i64>, usize),
) {
    let (Some(stream), Some(keys), Some(seqs)) = (
        strings(b, "stream"),
        strings(b, "stream_key"),
        col::<Int64Array>(b, "seq").ok().flatten(),
    ) else {
        return;
    };
    let mut last: Option<(&str, &str, crate::presence::Fingerprint)> = None;
    for (i, ((s, k), seq)) in stream.iter().zip(keys.iter()).zip(seqs.iter()).enumerate() {
        let (Some(s), Some(k)) = (s, k) else { continue };
        let fp = match last {
            Some((ls, lk, fp)) if (ls, lk) == (s, k) => fp,
            _ => {
                let Some(kind) = Stream::parse(s) else {
                    continue;
                };
                let fp = crate::presence::fingerprint(kind, k);
                last = Some((s, k, fp));
                fp
            }
        };
        row(fp, seq, i);
    }
}

fn req<T: Array + Clone + 'static>(b: &RecordBatch, name: &str) -> Result<T, BatchError> {
    let c = col::<T>(b, name)?.ok_or_else(|| {
        BatchError::Layout(format!(
            "column `{name}` is missing; it is required in every lake file"
        ))
    })?;
    if c.null_count() > 0 {
        return Err(BatchError::Layout(format!(
            "column `{name}` has nulls; it is required in every row"
        )));
    }
    Ok(c)
}

fn opt_str(c: &Option<StringViewArray>, i: usize) -> Option<&str> {
    c.as_ref().filter(|c| c.is_valid(i)).map(|c| c.value(i))
}

fn opt_i64(c: &Option<Int64Array>, i: usize) -> Option<i64> {
    c.as_ref().filter(|c| c.is_valid(i)).map(|c| c.value(i))
}

impl Cols {
    /// A batch of lake rows, every column read from it (the proof never
    /// takes a column's values from a file's statistics: see
    /// [`crate::lake::Lake::open`]).
    pub fn from_batch(b: &RecordBatch) -> Result<Cols, BatchError> {
        let n = b.num_rows();
        let event_id = req::<StringViewArray>(b, "event_id")?;
        let seq_col = req::<Int64Array>(b, "seq")?;
        let v = req::<UInt16Array>(b, "v")?;
        let stream_col = req::<StringViewArray>(b, "stream")?;
        let stream = (0..n)
            .map(|i| {
                let name = stream_col.value(i);
                // Named by its event id: a row's place in a scan's batch is not its place
                // in the file (rev-s57-diff 7).
                Stream::parse(name).ok_or_else(|| {
                    BatchError::Layout(format!(
                        "the row of event id {:?}: unknown stream {name:?}",
                        event_id.value(i)
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let seq = (0..n)
            .map(|i| {
                let s = seq_col.value(i);
                u64::try_from(s).map_err(|_| {
                    BatchError::Layout(format!(
                        "the row of event id {:?}: negative seq {s}",
                        event_id.value(i)
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A version newer than any this reconciler knows stops the run
        // (its rows may mean what this one cannot judge); one older than
        // any the ledger wrote is a row that is not valid (`invalid_event`,
        // judged with the rest).
        let newest = SCHEMA_VERSIONS_KNOWN.iter().copied().max().unwrap_or(0);
        if let Some(i) = (0..n).find(|&i| v.value(i) > newest) {
            return Err(BatchError::Version {
                event_id: event_id.value(i).to_owned(),
                v: v.value(i),
            });
        }
        Ok(Cols {
            v,
            event_id,
            stream,
            stream_key: req(b, "stream_key")?,
            seq,
            kind: req(b, "kind")?,
            occurred: req(b, "occurred_at_ms")?,
            currency: col(b, "currency")?,
            amount: col(b, "amount")?,
            balance_after: col(b, "balance_after")?,
            held_after: col(b, "held_after")?,
            overdraft_limit: col(b, "overdraft_limit")?,
            entry_id: col(b, "entry_id")?,
            transfer_id: col(b, "transfer_id")?,
            counterparty: col(b, "counterparty")?,
            source: col(b, "source")?,
            destination: col(b, "destination")?,
            deadline_ms: col(b, "deadline_ms")?,
            reason: col(b, "reason")?,
            prev_hash: req(b, "prev_hash")?,
            hash: req(b, "hash")?,
            file: 0,
        })
    }

    pub fn len(&self) -> usize {
        self.seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    pub fn stream(&self, i: usize) -> Stream {
        self.stream[i]
    }

    pub fn key(&self, i: usize) -> &str {
        self.stream_key.value(i)
    }

    /// Every row's `occurred_at_ms`.
    pub fn occurred(&self) -> &[i64] {
        self.occurred.values()
    }

    pub fn seq(&self, i: usize) -> u64 {
        self.seq[i]
    }

    pub fn hash(&self, i: usize) -> &str {
        self.hash.value(i)
    }

    /// The lake's row order (`ledger_ingest::sort_rows`): stream, stream key, seq, hash.
    pub fn order(&self, i: usize, other: &Cols, j: usize) -> Ordering {
        // Keys are compared for equality first, inline: consecutive rows
        // are mostly of one stream.
        let key = |a: &str, b: &str| {
            if same(a.as_bytes(), b.as_bytes()) {
                Ordering::Equal
            } else {
                a.cmp(b)
            }
        };
        self.stream[i]
            .cmp(&other.stream[j])
            .then_with(|| key(self.key(i), other.key(j)))
            .then_with(|| self.seq[i].cmp(&other.seq[j]))
            .then_with(|| self.hash(i).cmp(other.hash(j)))
    }

    /// [`Cols::view`], written into `slot` (built there: the ~300-byte
    /// struct is not first built aside and copied).
    #[inline]
    pub fn view_into<'a>(&'a self, i: usize, slot: &mut std::mem::MaybeUninit<EventRef<'a>>) {
        slot.write(self.build(i));
    }

    /// Row `i`, borrowed.
    pub fn view(&self, i: usize) -> EventRef<'_> {
        self.build(i)
    }

    #[inline(always)]
    fn build(&self, i: usize) -> EventRef<'_> {
        EventRef {
            v: self.v.value(i),
            event_id: self.event_id.value(i),
            stream: self.stream[i],
            stream_key: self.stream_key.value(i),
            seq: self.seq[i],
            kind: self.kind.value(i),
            occurred_at_ms: self.occurred.value(i),
            currency: opt_str(&self.currency, i),
            amount: opt_i64(&self.amount, i),
            balance_after: opt_i64(&self.balance_after, i),
            held_after: opt_i64(&self.held_after, i),
            overdraft_limit: opt_i64(&self.overdraft_limit, i),
            entry_id: opt_str(&self.entry_id, i),
            transfer_id: opt_str(&self.transfer_id, i),
            counterparty: opt_str(&self.counterparty, i),
            source: opt_str(&self.source, i),
            destination: opt_str(&self.destination, i),
            deadline_ms: opt_i64(&self.deadline_ms, i),
            reason: opt_str(&self.reason, i),
            prev_hash: self.prev_hash.value(i),
            hash: self.hash.value(i),
        }
    }
}

/// One lake row, borrowed: its batch and its index. The merge hands rows out
/// this way, so a row costs no reference count; a stream keeps its rows as runs
/// of their batches ([`crate::stream::StreamRows`]).
#[derive(Clone, Copy)]
pub struct Row<'a> {
    cols: &'a Arc<Cols>,
    i: usize,
}

impl<'a> Row<'a> {
    pub fn at(cols: &'a Arc<Cols>, i: usize) -> Row<'a> {
        Row { cols, i }
    }

    /// The batch the row is in, and its index there.
    pub fn batch(&self) -> (&'a Arc<Cols>, usize) {
        (self.cols, self.i)
    }

    pub fn view(&self) -> EventRef<'a> {
        self.cols.view(self.i)
    }

    pub fn stream(&self) -> Stream {
        self.cols.stream(self.i)
    }

    pub fn key(&self) -> &'a str {
        self.cols.key(self.i)
    }

    pub fn seq(&self) -> u64 {
        self.cols.seq(self.i)
    }

    pub fn hash(&self) -> &'a str {
        self.cols.hash(self.i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::ArrayRef;
    use ledger_events::FIELDS;

    /// Every string type the proof reads as strings, a column scan takes as
    /// the same Utf8 values (a file another Arrow writer laid out with large
    /// strings or views is read alike by both); a column of another type is
    /// left as it is, and is no strings (no lake file has one: its footer is
    /// refused first, `lake::lake_types`).
    #[test]
    fn a_column_scan_takes_every_string_type_the_proof_takes() {
        use datafusion::arrow::array::{DictionaryArray, LargeStringArray};
        use datafusion::arrow::datatypes::Int32Type;
        let values = [Some("account"), None, Some("transfer")];
        let of_type: [(DataType, ArrayRef); 3] = [
            (DataType::Utf8, Arc::new(StringArray::from(values.to_vec()))),
            (
                DataType::LargeUtf8,
                Arc::new(LargeStringArray::from(values.to_vec())),
            ),
            (
                DataType::Utf8View,
                Arc::new(StringViewArray::from(values.to_vec())),
            ),
        ];
        let dictionary: DictionaryArray<Int32Type> = values.into_iter().collect();
        for (t, stream) in of_type {
            assert!(proof_strings(&t) && stream.data_type() == &t);
            let b = RecordBatch::try_from_iter([
                ("stream", stream),
                ("seq", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
                ("kind", Arc::new(dictionary.clone()) as ArrayRef),
            ])
            .unwrap();
            let b = as_utf8(&b).unwrap();
            let got = strings(&b, "stream").unwrap();
            assert_eq!(got.iter().collect::<Vec<_>>(), values, "{t}");
            assert_eq!(
                b.column_by_name("seq").unwrap().data_type(),
                &DataType::Int64
            );
            assert!(
                strings(&b, "kind").is_none(),
                "{t}: a dictionary is left as it is"
            );
        }
    }

    /// The columns a row may lack (null), the optional fields of an event
    /// (`currency` to `reason` in [`FIELDS`]' order): a batch without one of them
    /// reads as if it were all null (docs/LAKE.md); every other column is
    /// required in every file and row.
    const ROW_MAY_LACK: &[&str] = FIELDS.split_at(7).1.split_at(12).0;

    /// One row with every column of `names` set, in the types the proof
    /// reads them as.
    fn batch(names: &[&str]) -> RecordBatch {
        let columns: Vec<(&str, ArrayRef)> = names
            .iter()
            .map(|&name| {
                let array: ArrayRef = match name {
                    "v" => Arc::new(UInt16Array::from(vec![1])),
                    "seq" | "occurred_at_ms" | "amount" | "balance_after" | "held_after"
                    | "overdraft_limit" | "deadline_ms" => Arc::new(Int64Array::from(vec![7])),
                    "stream" => Arc::new(StringViewArray::from(vec!["account"])),
                    _ => Arc::new(StringViewArray::from(vec![format!("{name}-value")])),
                };
                (name, array)
            })
            .collect();
        RecordBatch::try_from_iter(columns).unwrap()
    }

    /// The columns a file may lack (`ROW_MAY_LACK`) are exactly those a
    /// batch may lack: leaving out any other is an error, not a row read
    /// with a field missing.
    #[test]
    fn only_the_fields_a_row_may_lack_may_be_left_out_of_a_batch() {
        assert_eq!(
            (ROW_MAY_LACK.len(), ROW_MAY_LACK[0], ROW_MAY_LACK[11]),
            (12, "currency", "reason")
        );
        let all = Cols::from_batch(&batch(FIELDS)).unwrap();
        assert_eq!(all.view(0).amount, Some(7));
        assert_eq!(all.view(0).source, Some("source-value"));
        for &left_out in FIELDS {
            let names: Vec<&str> = FIELDS.iter().copied().filter(|&n| n != left_out).collect();
            match Cols::from_batch(&batch(&names)) {
                Ok(cols) => {
                    assert!(
                        ROW_MAY_LACK.contains(&left_out),
                        "{left_out} was not required"
                    );
                    // Read as null; every other field as before.
                    let (row, full) = (cols.view(0), all.view(0));
                    // The fields the canonical encoding has empty.
                    let absent = |e: &EventRef| {
                        let mut text = Vec::new();
                        e.canonical_into(&mut text);
                        String::from_utf8(text)
                            .unwrap()
                            .lines()
                            .filter_map(|l| l.strip_suffix('='))
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(absent(&row), vec![left_out]);
                    assert!(absent(&full).is_empty());
                }
                Err(BatchError::Layout(why)) => {
                    assert!(!ROW_MAY_LACK.contains(&left_out), "{left_out}: {why}");
                    assert!(why.contains(left_out), "{why}");
                }
                Err(e) => panic!("{left_out}: {e:?}"),
            }
        }
    }
}
