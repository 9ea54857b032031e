//! DataFusion record batches → events.
//!
//! DataFusion 55.2 is built on arrow 59, the lake writer (`ledger-ingest`)
//! on arrow 60, so `ledger_ingest::rows_from_batch` cannot take DataFusion's
//! batches; this is the same mapping over DataFusion's re-exported arrow.
//! Columns are found by name (docs/LAKE.md: files are read by name, a
//! missing nullable column reads as null, extra columns are ignored).

use datafusion::arrow::array::{Array, Int64Array, StringArray, UInt16Array};
use datafusion::arrow::record_batch::RecordBatch;
use ledger_events::{Event, Stream};

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<Option<&'a T>, String> {
    match b.column_by_name(name) {
        None => Ok(None),
        Some(c) => c.as_any().downcast_ref::<T>().map(Some).ok_or_else(|| {
            format!(
                "column `{name}` has type {}, not the lake's type",
                c.data_type()
            )
        }),
    }
}

fn req<'a, T: 'static + Array>(b: &'a RecordBatch, name: &str) -> Result<&'a T, String> {
    let c = col::<T>(b, name)?
        .ok_or_else(|| format!("column `{name}` is missing; it is required in every lake file"))?;
    if c.null_count() > 0 {
        return Err(format!(
            "column `{name}` has nulls; it is required in every row"
        ));
    }
    Ok(c)
}

pub fn events_from_batch(b: &RecordBatch) -> Result<Vec<Event>, String> {
    let v = req::<UInt16Array>(b, "v")?;
    let event_id = req::<StringArray>(b, "event_id")?;
    let stream = req::<StringArray>(b, "stream")?;
    let stream_key = req::<StringArray>(b, "stream_key")?;
    let seq = req::<Int64Array>(b, "seq")?;
    let kind = req::<StringArray>(b, "kind")?;
    let occurred = req::<Int64Array>(b, "occurred_at_ms")?;
    let prev_hash = req::<StringArray>(b, "prev_hash")?;
    let hash = req::<StringArray>(b, "hash")?;
    let s = |name| col::<StringArray>(b, name);
    let n = |name| col::<Int64Array>(b, name);
    let (currency, entry_id, transfer_id, counterparty, source, destination, reason) = (
        s("currency")?,
        s("entry_id")?,
        s("transfer_id")?,
        s("counterparty")?,
        s("source")?,
        s("destination")?,
        s("reason")?,
    );
    let (amount, balance_after, held_after, overdraft_limit, deadline_ms) = (
        n("amount")?,
        n("balance_after")?,
        n("held_after")?,
        n("overdraft_limit")?,
        n("deadline_ms")?,
    );
    let gs = |c: Option<&StringArray>, i: usize| {
        c.filter(|c| c.is_valid(i)).map(|c| c.value(i).to_owned())
    };
    let gi = |c: Option<&Int64Array>, i: usize| c.filter(|c| c.is_valid(i)).map(|c| c.value(i));
    let mut out = Vec::with_capacity(b.num_rows());
    for i in 0..b.num_rows() {
        let st = match stream.value(i) {
            "account" => Stream::Account,
            "transfer" => Stream::Transfer,
            "subscription" => Stream::Subscription,
            other => return Err(format!("row {i}: unknown stream {other:?}")),
        };
        let sq = seq.value(i);
        let sq = u64::try_from(sq).map_err(|_| format!("row {i}: negative seq {sq}"))?;
        out.push(Event {
            v: v.value(i),
            event_id: event_id.value(i).to_owned(),
            stream: st,
            stream_key: stream_key.value(i).to_owned(),
            seq: sq,
            kind: kind.value(i).to_owned(),
            occurred_at_ms: occurred.value(i),
            currency: gs(currency, i),
            amount: gi(amount, i),
            balance_after: gi(balance_after, i),
            held_after: gi(held_after, i),
            overdraft_limit: gi(overdraft_limit, i),
            entry_id: gs(entry_id, i),
            transfer_id: gs(transfer_id, i),
            counterparty: gs(counterparty, i),
            source: gs(source, i),
            destination: gs(destination, i),
            deadline_ms: gi(deadline_ms, i),
            reason: gs(reason, i),
            prev_hash: prev_hash.value(i).to_owned(),
            hash: hash.value(i).to_owned(),
        });
    }
    Ok(out)
}
