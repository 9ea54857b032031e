//! Lake files as another writer of the lake would write them (shared by
//! reconcile's and ledger-compact's tests).

use std::path::Path;

/// Rewrites the lake file `key` with the same rows as the writer of another
/// layout would: every column Snappy-compressed and dictionary-encoded (the
/// settings of `lake-v1`), `ledger.lake.layout` = `layout`.
pub fn rewrite_in_layout(dir: &Path, key: &str, layout: &str) {
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    let path = dir.join(key);
    let rows = ledger_ingest::read_file(key, std::fs::read(&path).unwrap().into()).unwrap();
    let batch = ledger_ingest::rows_to_batch(&rows).unwrap();
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ledger_ingest::PARQUET_ROW_GROUP_ROWS_MAX))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "ledger.lake.layout".to_owned(),
            layout.to_owned(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut out, ledger_ingest::arrow_schema(), Some(props))
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    std::fs::write(path, out).unwrap();
}
