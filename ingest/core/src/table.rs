//! Events ⇄ Arrow record batches.
//!
//! Every table (account, transfer, subscription) has the same columns: the
//! schema v1 fields in [`FIELDS`] order, then `conflict`. Types are exact and
//! integral: money and times are `Int64` (never floats), `v` is `UInt16` like
//! the envelope. `seq` is `Int64`, not `UInt64`: SQL engines subtract seqs to
//! find gaps and unsigned subtraction errors on negative results; a seq above
//! `i64::MAX` is dead-lettered at ingest rather than wrapped.
//!
//! A reader that finds a newer file with extra columns ignores them and
//! checks each row's `v` (a row of an unknown version is an error); a file
//! that lacks a nullable column (written before it existed) reads it as null.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, UInt16Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use ledger_events::{Event, Stream, FIELDS};

use crate::dedup::Row;

/// The extra column: see [`Row::conflict`].
pub const CONFLICT_COLUMN: &str = "conflict";

/// Arrow type and nullability of each column, in order.
fn columns() -> Vec<(&'static str, DataType, bool)> {
    use DataType::*;
    let typed: [(DataType, bool); 21] = [
        (UInt16, false), // v
        (Utf8, false),   // event_id
        (Utf8, false),   // stream
        (Utf8, false),   // stream_key
        (Int64, false),  // seq
        (Utf8, false),   // kind
        (Int64, false),  // occurred_at_ms
        (Utf8, true),    // currency
        (Int64, true),   // amount
        (Int64, true),   // balance_after
        (Int64, true),   // held_after
        (Int64, true),   // overdraft_limit
        (Utf8, true),    // entry_id
        (Utf8, true),    // transfer_id
        (Utf8, true),    // counterparty
        (Utf8, true),    // source
        (Utf8, true),    // destination
        (Int64, true),   // deadline_ms
        (Utf8, true),    // reason
        (Utf8, false),   // prev_hash
        (Utf8, false),   // hash
    ];
    let mut cols: Vec<_> = FIELDS
        .iter()
        .zip(typed)
        .map(|(name, (t, nullable))| (*name, t, nullable))
        .collect();
    cols.push((CONFLICT_COLUMN, Boolean, false));
    cols
}

/// The Arrow schema of every lake table.
pub fn arrow_schema() -> SchemaRef {
    debug_assert_eq!(
        FIELDS.len(),
        21,
        "a new schema field needs a column type here"
    );
    Arc::new(Schema::new(
        columns()
            .into_iter()
            .map(|(name, t, nullable)| Field::new(name, t, nullable))
            .collect::<Vec<_>>(),
    ))
}

/// Builds one record batch from rows (in the given order): rows, or
/// anything that holds one (compaction's spilled rows carry their source).
/// Fails only on a `seq` beyond `i64::MAX`, which ingest dead-letters before
/// getting here.
pub fn rows_to_batch<R: AsRef<Row>>(rows: &[R]) -> Result<RecordBatch, String> {
    fn s<'a, R: AsRef<Row>>(rows: &'a [R], f: impl Fn(&'a Event) -> &'a str) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| f(&r.as_ref().event)),
        ))
    }
    fn os<'a, R: AsRef<Row>>(
        rows: &'a [R],
        f: impl Fn(&'a Event) -> &'a Option<String>,
    ) -> ArrayRef {
        Arc::new(StringArray::from(
            rows.iter()
                .map(|r| f(&r.as_ref().event).as_deref())
                .collect::<Vec<_>>(),
        ))
    }
    fn oi<R: AsRef<Row>>(rows: &[R], f: impl Fn(&Event) -> Option<i64>) -> ArrayRef {
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|r| f(&r.as_ref().event))
                .collect::<Vec<_>>(),
        ))
    }
    let mut seqs = Vec::with_capacity(rows.len());
    for r in rows {
        let r = r.as_ref();
        seqs.push(i64::try_from(r.event.seq).map_err(|_| {
            format!(
                "event {}: seq {} does not fit the Int64 column",
                r.event.event_id, r.event.seq
            )
        })?);
    }
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(UInt16Array::from_iter_values(
            rows.iter().map(|r| r.as_ref().event.v),
        )),
        s(rows, |e| &e.event_id),
        s(rows, |e| e.stream.as_str()),
        s(rows, |e| &e.stream_key),
        Arc::new(Int64Array::from(seqs)),
        s(rows, |e| &e.kind),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.as_ref().event.occurred_at_ms),
        )),
        os(rows, |e| &e.currency),
        oi(rows, |e| e.amount),
        oi(rows, |e| e.balance_after),
        oi(rows, |e| e.held_after),
        oi(rows, |e| e.overdraft_limit),
        os(rows, |e| &e.entry_id),
        os(rows, |e| &e.transfer_id),
        os(rows, |e| &e.counterparty),
        os(rows, |e| &e.source),
        os(rows, |e| &e.destination),
        oi(rows, |e| e.deadline_ms),
        os(rows, |e| &e.reason),
        s(rows, |e| &e.prev_hash),
        s(rows, |e| &e.hash),
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.as_ref().conflict).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(arrow_schema(), arrays).map_err(|e| e.to_string())
}

/// Typed access to one column by name; `None` when the file lacks it.
fn column<'a, T: 'static>(
    batch: &'a RecordBatch,
    name: &str,
    want: &DataType,
) -> Result<Option<&'a T>, String> {
    let Some(col) = batch.column_by_name(name) else {
        return Ok(None);
    };
    if col.data_type() != want {
        return Err(format!(
            "column `{name}` is {} but the lake layout says {want}",
            col.data_type()
        ));
    }
    Ok(Some(
        col.as_any().downcast_ref::<T>().expect("checked data type"),
    ))
}

/// Reads rows back from a record batch of a lake file. Structural problems
/// (a required column missing, a wrong type, a null where the schema forbids
/// it, an unknown stream) are errors naming the column or the row, counted in
/// the file (`first_row` is the batch's first row's index there: a file is
/// read a batch at a time, and a row named by its place in the batch sends
/// the reader to the wrong one); the caller adds the object key. The events
/// are *not* re-validated here (see `parquet_io::read_file`, which does).
pub fn rows_from_batch(batch: &RecordBatch, first_row: usize) -> Result<Vec<Row>, String> {
    use DataType::*;
    let n = batch.num_rows();
    let need =
        |name: &str| format!("column `{name}` is missing; it is required in every lake file");
    let str_col = |name: &str| column::<StringArray>(batch, name, &Utf8);
    let i64_col = |name: &str| column::<Int64Array>(batch, name, &Int64);

    let v = column::<UInt16Array>(batch, "v", &UInt16)?.ok_or_else(|| need("v"))?;
    let seq = i64_col("seq")?.ok_or_else(|| need("seq"))?;
    let occurred = i64_col("occurred_at_ms")?.ok_or_else(|| need("occurred_at_ms"))?;
    let mut req_str = Vec::new();
    for name in [
        "event_id",
        "stream",
        "stream_key",
        "kind",
        "prev_hash",
        "hash",
    ] {
        req_str.push(str_col(name)?.ok_or_else(|| need(name))?);
    }
    let [event_id, stream, stream_key, kind, prev_hash, hash] = req_str[..] else {
        unreachable!()
    };
    let opt_str: Vec<Option<&StringArray>> = [
        "currency",
        "entry_id",
        "transfer_id",
        "counterparty",
        "source",
        "destination",
        "reason",
    ]
    .iter()
    .map(|n| str_col(n))
    .collect::<Result<_, _>>()?;
    let opt_i64: Vec<Option<&Int64Array>> = [
        "amount",
        "balance_after",
        "held_after",
        "overdraft_limit",
        "deadline_ms",
    ]
    .iter()
    .map(|n| i64_col(n))
    .collect::<Result<_, _>>()?;
    let conflict = column::<BooleanArray>(batch, CONFLICT_COLUMN, &Boolean)?;

    let required: [(&str, &dyn Array); 9] = [
        ("v", v),
        ("seq", seq),
        ("occurred_at_ms", occurred),
        ("event_id", event_id),
        ("stream", stream),
        ("stream_key", stream_key),
        ("kind", kind),
        ("prev_hash", prev_hash),
        ("hash", hash),
    ];
    for (name, col) in required {
        if col.null_count() > 0 {
            return Err(format!(
                "column `{name}` has nulls; it is required in every row"
            ));
        }
    }
    let gs = |c: &Option<&StringArray>, i: usize| {
        c.filter(|c| c.is_valid(i)).map(|c| c.value(i).to_owned())
    };
    let gi = |c: &Option<&Int64Array>, i: usize| c.filter(|c| c.is_valid(i)).map(|c| c.value(i));

    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        let stream_v = Stream::parse(stream.value(i)).ok_or_else(|| {
            format!(
                "row {}: unknown stream {:?}",
                first_row + i,
                stream.value(i)
            )
        })?;
        let seq_v = u64::try_from(seq.value(i))
            .map_err(|_| format!("row {}: negative seq {}", first_row + i, seq.value(i)))?;
        rows.push(Row {
            event: Event {
                v: v.value(i),
                event_id: event_id.value(i).to_owned(),
                stream: stream_v,
                stream_key: stream_key.value(i).to_owned(),
                seq: seq_v,
                kind: kind.value(i).to_owned(),
                occurred_at_ms: occurred.value(i),
                currency: gs(&opt_str[0], i),
                amount: gi(&opt_i64[0], i),
                balance_after: gi(&opt_i64[1], i),
                held_after: gi(&opt_i64[2], i),
                overdraft_limit: gi(&opt_i64[3], i),
                entry_id: gs(&opt_str[1], i),
                transfer_id: gs(&opt_str[2], i),
                counterparty: gs(&opt_str[3], i),
                source: gs(&opt_str[4], i),
                destination: gs(&opt_str[5], i),
                deadline_ms: gi(&opt_i64[4], i),
                reason: gs(&opt_str[6], i),
                prev_hash: prev_hash.value(i).to_owned(),
                hash: hash.value(i).to_owned(),
            },
            conflict: conflict.is_some_and(|c| c.is_valid(i) && c.value(i)),
        });
    }
    Ok(rows)
}
