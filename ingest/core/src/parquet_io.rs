//! Parquet bytes ⇄ rows, with the lake's fixed writer settings.
//!
//! Writing is deterministic: the same rows give the same bytes (fixed
//! `created_by`, fixed properties, no timestamps in the metadata), which is
//! what lets a redelivered batch overwrite its own object harmlessly.
//!
//! Reading never trusts a file: a truncated or corrupt file, a file with the
//! wrong columns, or a row that is not a valid event whose hash matches its
//! content is a [`LakeError`] naming the object key, never a panic and never
//! a silently wrong row.

use bytes::Bytes;
use ledger_events::DecodeError;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::{FileMetaData, KeyValue, ParquetMetaData, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::dedup::Row;
use crate::key::{parse_object_key, FileDigest, Partition};
use crate::table::{arrow_schema, rows_from_batch, rows_to_batch};
use crate::{
    LAKE_LAYOUTS_READABLE, LAKE_LAYOUT_VERSION, PARQUET_CREATED_BY, PARQUET_FILE_ROWS_MAX,
    PARQUET_ROW_GROUP_ROWS_MAX,
};

/// Key-value metadata entry naming the layout a file was written with.
pub const LAYOUT_METADATA_KEY: &str = "ledger.lake.layout";

/// Rows per record batch when reading.
const READ_BATCH_ROWS: usize = 8_192;

fn writer_properties() -> WriterProperties {
    // Column indexes of stream_key and seq in FIELDS order: the sort order,
    // declared so that engines which honour it can skip a sort.
    let sorted = |column_idx| SortingColumn {
        column_idx,
        descending: false,
        nulls_first: false,
    };
    WriterProperties::builder()
        .set_created_by(PARQUET_CREATED_BY.to_owned())
        // Snappy: pure Rust (the `snap` crate), so the wasm consumer needs no
        // C toolchain; see docs/LAKE.md for why not zstd (yet).
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS_MAX))
        // Min/max/null counts per row group and per page (the page index), so
        // readers prune by stream_key, seq, occurred_at_ms, amount...
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_sorting_columns(Some(vec![sorted(3), sorted(4)]))
        // SHA-256 hex: random, so Snappy saves ~2 % of it and a dictionary
        // nothing, while readers pay to decompress and to decode a dictionary
        // page of values used once. Stored plain, a reader can point into the
        // page instead of copying it (lake-v2).
        .set_column_compression(ColumnPath::from("hash"), Compression::UNCOMPRESSED)
        .set_column_compression(ColumnPath::from("prev_hash"), Compression::UNCOMPRESSED)
        .set_column_dictionary_enabled(ColumnPath::from("hash"), false)
        .set_column_dictionary_enabled(ColumnPath::from("prev_hash"), false)
        // Unique per row: a dictionary would only be filled and abandoned.
        .set_column_dictionary_enabled(ColumnPath::from("event_id"), false)
        .set_column_dictionary_enabled(ColumnPath::from("entry_id"), false)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            LAYOUT_METADATA_KEY.to_owned(),
            LAKE_LAYOUT_VERSION.to_owned(),
        )]))
        .build()
}

/// Writes rows (already deduplicated and sorted) as one Parquet file.
pub fn write_file(rows: &[Row]) -> Result<Vec<u8>, String> {
    let mut w = FileWriter::new()?;
    w.write(rows)?;
    w.finish()
}

/// One lake file written a piece at a time, so that a writer holds one row
/// group's rows, not the file's (for a streaming compaction; today's holds
/// a partition and writes with [`write_file`]). Pieces of exactly
/// [`PARQUET_ROW_GROUP_ROWS_MAX`] rows (the last one shorter) give the same
/// bytes as [`write_file`] of all the rows at once: the Arrow writer cuts
/// a large batch at the same row-group bounds.
pub struct FileWriter {
    writer: ArrowWriter<Vec<u8>>,
    rows: usize,
}

impl FileWriter {
    pub fn new() -> Result<FileWriter, String> {
        let writer = ArrowWriter::try_new(Vec::new(), arrow_schema(), Some(writer_properties()))
            .map_err(|e| e.to_string())?;
        Ok(FileWriter { writer, rows: 0 })
    }

    /// Appends rows (in the lake's order, after those written before).
    pub fn write(&mut self, rows: &[Row]) -> Result<(), String> {
        self.rows += rows.len();
        assert!(
            self.rows <= PARQUET_FILE_ROWS_MAX,
            "callers cut files at PARQUET_FILE_ROWS_MAX"
        );
        let batch = rows_to_batch(rows)?;
        self.writer.write(&batch).map_err(|e| e.to_string())
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn finish(self) -> Result<Vec<u8>, String> {
        self.writer.into_inner().map_err(|e| e.to_string())
    }
}

/// The lake layout a footer names (its `ledger.lake.layout`), if any.
pub fn footer_layout(meta: &FileMetaData) -> Option<&str> {
    meta.key_value_metadata()?
        .iter()
        .find(|e| e.key == LAYOUT_METADATA_KEY)?
        .value
        .as_deref()
}

/// The rows a lake file's footer counts, checked: each of its row groups
/// holds at least one row and together they count the same, and there is at
/// least one (the writers never write an empty file or row group; a count
/// damaged to 0 would read as one, and a negative group, or a sum that
/// overflows, could make a damaged footer's groups add up). Every reader of
/// the lake checks it before trusting a footer (this crate's and the
/// reconciler's).
pub fn footer_rows(meta: &ParquetMetaData) -> Result<usize, String> {
    let footer = meta.file_metadata().num_rows();
    let groups: Option<i64> =
        meta.row_groups()
            .iter()
            .map(|g| g.num_rows())
            .try_fold(
                0i64,
                |sum, n| if n >= 1 { sum.checked_add(n) } else { None },
            );
    match (usize::try_from(footer), groups) {
        (Ok(rows), Some(groups)) if rows >= 1 && groups == footer => Ok(rows),
        _ => Err(format!(
            "corrupt Parquet footer: it counts {footer} rows and its row groups {}; a lake file holds at \
             least one row, each row group at least one, and both count the same",
            meta.row_groups()
                .iter()
                .map(|g| g.num_rows().to_string())
                .collect::<Vec<_>>()
                .join(" + ")
        )),
    }
}

/// A lake file that cannot be read. Always names the object key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LakeError {
    pub key: String,
    pub kind: LakeErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LakeErrorKind {
    /// Not a readable Parquet file: truncated, corrupt, or not Parquet.
    Parquet(String),
    /// Readable, but its columns are not the lake's.
    Layout(String),
    /// Its metadata names a lake layout this reader does not know: a
    /// newer writer's file, whole (not damaged: the Help is an upgrade).
    UnknownLayout(String),
    /// A row of an event schema version this reader does not know (newer
    /// than its own): a newer writer's row, whole (the Help is an upgrade).
    NewerSchema {
        row: usize,
        event_id: String,
        v: u16,
    },
    /// More rows than any lake file may hold.
    TooManyRows { rows_min: usize },
    /// A row that is not a valid event, or whose hash does not match it.
    BadRow { row: usize, why: String },
    /// Valid rows that are not what the file's key names: a row of another
    /// partition, or rows whose digest is not the key's (the key is the
    /// content's address, `key::file_digest`).
    NotItsKey(String),
}

impl LakeErrorKind {
    /// Whether a newer writer wrote it (an unknown layout, a newer event
    /// schema): whole, not damaged, and the remedy is an upgrade.
    pub fn is_newer(&self) -> bool {
        matches!(
            self,
            LakeErrorKind::UnknownLayout(_) | LakeErrorKind::NewerSchema { .. }
        )
    }
}

/// The Help of a file or a row a newer writer wrote (an unknown layout, a
/// newer event schema): whole, so an upgrade, never the quarantine.
const NEWER_WRITER_HELP: &str = "Help: upgrade ledger-compact (and reconcile) to a version that \
     knows it; do not move the file: a writer upgraded first writes it whole, and it may be the \
     only copy of its events.";

impl std::fmt::Display for LakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = &self.key;
        match &self.kind {
            LakeErrorKind::Parquet(e) => write!(f, "lake file {key}: not readable as Parquet: {e}")?,
            LakeErrorKind::Layout(e) => write!(f, "lake file {key}: not in the lake layout {LAKE_LAYOUT_VERSION}: {e}")?,
            LakeErrorKind::TooManyRows { rows_min } => write!(
                f,
                "lake file {key}: holds at least {rows_min} rows, more than PARQUET_FILE_ROWS_MAX = {PARQUET_FILE_ROWS_MAX}"
            )?,
            LakeErrorKind::UnknownLayout(l) => {
                // Whole, and maybe the only copy of its events: an upgrade,
                // not the quarantine (rev-s52-docs M1).
                return write!(
                    f,
                    "lake file {key}: written in lake layout {l:?}, which this reader does not know \
                     (readable: {LAKE_LAYOUTS_READABLE:?})\n{NEWER_WRITER_HELP}"
                );
            }
            LakeErrorKind::NewerSchema { row, event_id, v } => {
                return write!(
                    f,
                    "lake file {key}: row {row}: event {event_id}: schema version {v} is not known to \
                     this reader (known: {:?})\n{NEWER_WRITER_HELP}",
                    ledger_events::SCHEMA_VERSIONS_KNOWN
                );
            }
            LakeErrorKind::BadRow { row, why } => {
                // A row that fails its check is evidence, and in a compacted
                // partition the file may be its rows' only copy
                // (rev-s52-docs M2: the Help said to move it, unconditionally).
                return write!(
                    f,
                    "lake file {key}: row {row}: {why}\nHelp: run reconcile, which names the row as a \
                     finding. If another file holds the file's rows (a redelivery, or the ingest files a \
                     c- file was made from), move it out of events/ (for example to quarantine/); if it \
                     is their only copy, restore it from its source (docs/LAKE.md) and keep the damaged \
                     one as evidence, outside events/."
                );
            }
            LakeErrorKind::NotItsKey(why) => write!(f, "lake file {key}: not the file its key names: {why}")?,
        }
        write!(
            f,
            "\nHelp: the file is damaged or was not written by ledger-ingest. Move it out of events/ \
             (for example to quarantine/) and re-deliver or re-compact its events; docs/LAKE.md explains \
             why removing one file never loses an event that another file holds."
        )
    }
}

impl std::error::Error for LakeError {}

/// Reads a lake file back into rows, checking every row: the row must be a
/// valid event of a known schema version and its `hash` must match its
/// content, so a flipped bit that Parquet itself does not notice is caught.
pub fn read_file(key: &str, bytes: Bytes) -> Result<Vec<Row>, LakeError> {
    let mut rows = Vec::new();
    read_file_each(key, bytes, |_, got| {
        rows.extend(got);
        Ok::<(), LakeError>(())
    })?;
    Ok(rows)
}

/// What [`read_file_each`] read: the file's rows and the layout it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    pub rows: usize,
    /// The `ledger.lake.layout` of the file's metadata (one of
    /// [`LAKE_LAYOUTS_READABLE`]), which its key's digest was computed with.
    pub layout: String,
}

/// [`read_file`] a record batch at a time: `each` gets the index of the
/// batch's first row in the file and its rows, every one checked, in file
/// order, so a caller holds one batch instead of the file. A damaged file
/// may have given `each` its first batches before the error: callers that
/// must change nothing on a damaged file act only once every file is read.
///
/// Besides each row, the file as a whole: it names a readable layout, it
/// holds at least one row (the writers never write an empty file), and
/// the rows decoded are exactly the rows its footer and its row groups
/// count (a footer whose count was damaged to 0 would otherwise read as an
/// empty file). A panic of the Parquet or Arrow decoder on damaged bytes
/// is caught and reported as the file's error.
pub fn read_file_each<E: From<LakeError>>(
    key: &str,
    bytes: Bytes,
    mut each: impl FnMut(usize, Vec<Row>) -> Result<(), E>,
) -> Result<FileRead, E> {
    read_checked(key, bytes, |_, first, rows| each(first, rows))
}

/// [`read_file_each`], `each` also given the file's layout.
fn read_checked<E: From<LakeError>>(
    key: &str,
    bytes: Bytes,
    mut each: impl FnMut(&str, usize, Vec<Row>) -> Result<(), E>,
) -> Result<FileRead, E> {
    let err = |kind| LakeError {
        key: key.to_owned(),
        kind,
    };
    let parquet_err = |e: parquet::errors::ParquetError| err(LakeErrorKind::Parquet(e.to_string()));
    let open = || -> Result<_, LakeError> {
        // The lake's schema is fixed and checked column by column: the
        // Arrow schema embedded in the footer is not needed, and damaged it
        // can make the decoder panic.
        let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes, options)
            .map_err(parquet_err)?;
        let meta = builder.metadata();
        let layout = match footer_layout(meta.file_metadata()) {
            Some(l) if LAKE_LAYOUTS_READABLE.contains(&l) => l.to_owned(),
            Some(l) => return Err(err(LakeErrorKind::UnknownLayout(l.to_owned()))),
            None => {
                return Err(err(LakeErrorKind::Layout(format!(
                    "its metadata names no layout ({LAYOUT_METADATA_KEY}); readable: \
                     {LAKE_LAYOUTS_READABLE:?}"
                ))))
            }
        };
        let footer = footer_rows(meta).map_err(|why| err(LakeErrorKind::Parquet(why)))?;
        if footer > PARQUET_FILE_ROWS_MAX {
            return Err(err(LakeErrorKind::TooManyRows { rows_min: footer }));
        }
        let reader = builder
            .with_batch_size(READ_BATCH_ROWS)
            .build()
            .map_err(parquet_err)?;
        Ok((reader, layout, footer))
    };
    let caught = |what: &str, panic: Box<dyn std::any::Any + Send>| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        err(LakeErrorKind::Parquet(format!(
            "the decoder failed on its {what}: {why}"
        )))
    };
    let (mut reader, layout, footer) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(open))
        .map_err(|p| caught("metadata", p))??;
    let mut read = 0;
    loop {
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next()))
            .map_err(|p| caught("data", p))?;
        let Some(batch) = next else { break };
        let batch = batch.map_err(|e| err(LakeErrorKind::Parquet(e.to_string())))?;
        if read + batch.num_rows() > footer {
            return Err(err(LakeErrorKind::Parquet(format!(
                "holds more rows than its footer counts ({footer})"
            )))
            .into());
        }
        let got = rows_from_batch(&batch, read).map_err(|e| err(LakeErrorKind::Layout(e)))?;
        for (i, row) in got.iter().enumerate() {
            // A row of a schema newer than this reader's is a newer
            // writer's, whole: an upgrade, not the quarantine (rev-s52-diff M6).
            let v = row.event.v;
            if v > 0 && !ledger_events::SCHEMA_VERSIONS_KNOWN.contains(&v) {
                return Err(err(LakeErrorKind::NewerSchema {
                    row: read + i,
                    event_id: row.event.event_id.clone(),
                    v,
                })
                .into());
            }
            check_row(row).map_err(|why| err(LakeErrorKind::BadRow { row: read + i, why }))?;
        }
        let first = read;
        read += got.len();
        each(&layout, first, got)?;
    }
    if read != footer {
        return Err(err(LakeErrorKind::Parquet(format!(
            "{read} rows decoded, its footer counts {footer}"
        )))
        .into());
    }
    Ok(FileRead { rows: read, layout })
}

/// [`read_file`] for a file listed under a lake key: besides each row,
/// the file is the one its key names. Every row is of the key's partition,
/// and the rows' digest is the key's (ingest and compaction name a file by
/// its content, [`crate::key::file_digest`], which also covers the
/// `conflict` flag, the one column no row hash covers). A file altered
/// after it was written, or copied under another name, is damaged:
/// compacting it would write its rows into another partition, or carry
/// over other rows than those the manifest names.
pub fn read_lake_file(key: &str, bytes: Bytes) -> Result<Vec<Row>, LakeError> {
    let mut rows = Vec::new();
    read_lake_file_each(key, bytes, |_, got| {
        rows.extend(got);
        Ok::<(), LakeError>(())
    })?;
    Ok(rows)
}

/// [`read_lake_file`] a record batch at a time, as [`read_file_each`].
pub fn read_lake_file_each<E: From<LakeError>>(
    key: &str,
    bytes: Bytes,
    mut each: impl FnMut(usize, Vec<Row>) -> Result<(), E>,
) -> Result<FileRead, E> {
    let not_its_key = |why: String| LakeError {
        key: key.to_owned(),
        kind: LakeErrorKind::NotItsKey(why),
    };
    let parts = parse_object_key(key).ok_or_else(|| not_its_key("not a lake file key".into()))?;
    let partition = &parts.partition;
    // Begun at the first batch, in the layout the file names (every lake
    // file has a row: read_checked refuses one without).
    let mut digest: Option<FileDigest> = None;
    let read = read_checked(key, bytes, |layout, first, got: Vec<Row>| {
        let digest = digest.get_or_insert_with(|| FileDigest::of_layout(partition, layout));
        for (i, row) in got.iter().enumerate() {
            let of = Partition::of(row);
            if &of != partition {
                return Err(not_its_key(format!(
                    "row {} belongs to {}, the key to {}",
                    first + i,
                    of.prefix(),
                    partition.prefix()
                ))
                .into());
            }
            digest.push(row);
        }
        each(first, got)
    })?;
    let digest = digest.expect("a lake file read has a row").finish();
    if digest != parts.digest {
        return Err(not_its_key(format!(
            "its {} rows digest to {digest}, the key names {}",
            read.rows, parts.digest
        ))
        .into());
    }
    Ok(read)
}

/// What every reader checks of each row: a valid event of a known schema
/// version whose recorded hash is its content's (compaction checks its
/// spilled rows again with it when it reads them back).
pub fn check_row(row: &Row) -> Result<(), String> {
    let ev = &row.event;
    ev.validate()
        .map_err(|e| format!("event {}: {}", ev.event_id, DecodeError::Schema(e)))?;
    let computed = ev.compute_hash();
    if computed != ev.hash {
        return Err(format!(
            "event {}: recorded hash {} but the row's content hashes to {computed}",
            ev.event_id, ev.hash
        ));
    }
    Ok(())
}
