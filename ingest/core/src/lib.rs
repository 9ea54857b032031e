//! The ingest core: a batch of raw queue messages in, the lake's Parquet
//! files (with their object keys) and the dead letters out.
//!
//! Pure Rust: no I/O, no clock, no async runtime, no randomness; it builds
//! for the host and for `wasm32-unknown-unknown`, where the queue consumer
//! Worker calls it and does the I/O (R2 put, dead-letter send, ack).
//!
//! What it guarantees, and what the consumer may rely on:
//!
//! - **Nothing is dropped silently.** Every message ends in exactly one of:
//!   a row of some [`LakeFile`], a [`Duplicate`] of such a row, or a
//!   [`DeadLetter`] naming its message id and the exact reason. One bad
//!   message never blocks the others.
//! - **Duplicates are harmless.** Within a batch, copies of an event (same
//!   `event_id`, same `hash`) become one row. The same `event_id` with
//!   different content is *not* a duplicate: every distinct version is kept,
//!   flagged `conflict = true` and listed in [`IngestOutput::conflicts`], so
//!   the reconciler can report it. Across batches, readers dedup (docs/LAKE.md).
//! - **Deterministic, content-addressed output.** The same set of messages, in
//!   any order and any number of times, gives the same files, byte for byte,
//!   under the same keys; so a redelivered batch overwrites its own objects
//!   with identical content and never creates a second copy.
//! - **Bounded.** Batches, messages, row groups and files have named limits.
//!
//! The stages are public so the compactor and the tests can use them alone:
//!
//! ```text
//! messages ─decode─▶ events + dead letters ─dedup─▶ rows (+ duplicates, conflicts)
//!          ─partition (table, UTC date)─▶ sorted chunks ≤ PARQUET_FILE_ROWS_MAX
//!          ─Arrow─▶ RecordBatch ─Parquet─▶ LakeFile { key = partition + digest(ids, hashes), bytes }
//! ```

pub mod batch;
pub mod dedup;
pub mod key;
pub mod manifest;
pub mod parquet_io;
pub mod synth;
pub mod table;

pub use batch::{
    build_files, build_files_sized, decode_batch, ingest, DeadLetter, Decoded, IngestError,
    IngestOutput, LakeFile, Message, Newer, Rejection,
};
pub use dedup::{dedup, lake_order, same_event, sort_rows, Conflict, Deduped, Duplicate, Row};
pub use key::{
    date_of_ms, file_digest, object_key, parse_object_key, FileDigest, FileLayer, KeyParts,
    Partition, Table,
};
pub use manifest::{
    custody, manifest_prefix, stamp, unaccounted, FileVersion, Manifest, Unaccounted,
    MANIFEST_PREFIX,
};
pub use parquet_io::{
    check_row, read_file, read_file_each, read_lake_file, read_lake_file_each, write_file,
    FileRead, FileWriter, LakeError, LakeErrorKind,
};
pub use table::{arrow_schema, rows_from_batch, rows_to_batch};

/// Version of the lake layout (paths, columns, writer settings). Recorded in
/// every file's key-value metadata and mixed into every file digest, so a
/// change of layout can never produce a different file under an existing key.
///
/// A change of the file cut ([`PARQUET_FILE_ROWS_MAX`]) must come with a
/// new layout too: compaction skips a partition that a manifest of the
/// current layout says it left as it is (`Manifest::left_as`), so under a
/// new cut and an old layout, old partitions would keep the old cut.
///
/// - `lake-v1`: every column Snappy-compressed and dictionary-encoded.
/// - `lake-v2`: the same paths, columns and rows; `hash` and `prev_hash`
///   (random hex, which neither compresses nor repeats) are stored plain and
///   uncompressed, and the unique ids `event_id` and `entry_id` without a
///   dictionary (see `parquet_io`).
pub const LAKE_LAYOUT_VERSION: &str = "lake-v2";

/// The layouts whose files readers accept. They differ only in writer
/// settings, which Parquet records per column chunk, so a lake written partly
/// before an upgrade reads as one; compaction rewrites old files in the
/// current layout (their keys differ, so a partition of them is never
/// "already compact").
pub const LAKE_LAYOUTS_READABLE: &[&str] = &["lake-v1", "lake-v2"];

/// Every object of the event lake lives under this prefix of the bucket (R2)
/// or the lake directory (local).
pub const LAKE_EVENTS_PREFIX: &str = "events";

/// Rows per Parquet row group. Small enough that a reader (or the Worker,
/// with 128 MB of memory) decodes one group at a time cheaply; large enough
/// that the per-group statistics prune well on a compacted file.
pub const PARQUET_ROW_GROUP_ROWS_MAX: usize = 65_536;

/// Rows per Parquet file: an ingest batch is far below it; compaction cuts its
/// output at this bound (16 row groups, roughly 50-100 MB of events).
pub const PARQUET_FILE_ROWS_MAX: usize = 1_048_576;

/// Messages per call of [`ingest`]. A Queue delivers at most 100 per batch;
/// the bound guards the Worker's memory against a misconfigured consumer.
pub const INGEST_BATCH_MESSAGES_MAX: usize = 10_000;

/// Bytes per message. A schema v1 event is well under 2 KiB (ids are at most
/// 200 bytes); anything larger is dead-lettered without being parsed.
pub const MESSAGE_BYTES_MAX: usize = 16 * 1024;

/// The Parquet `created_by` written into every file. parquet-rs writes its own
/// version by default, which would change the bytes of a file (under the same
/// key) whenever the crate is upgraded; a fixed value keeps the output a pure
/// function of the rows and the layout version.
pub const PARQUET_CREATED_BY: &str = "ledger-ingest lake-v2";
