//! Lake access: open a local directory or an `s3://` bucket, list the lake
//! files, check each file's footer, and stream a table's rows in
//! (`stream`, `stream_key`, `seq`, `hash`) order: DataFusion reads each file
//! as one ordered stream and [`crate::merge`] merges them.
//!
//! What this module guarantees to the checks:
//!
//! - **Every lake file is read, or the run fails naming it.** Keys that are
//!   not lake files (`ledger_ingest::parse_object_key` says `None`) are
//!   ignored as docs/LAKE.md requires; a lake file whose footer is not
//!   Parquet, or whose layout is not one of `LAKE_LAYOUTS_READABLE`, stops
//!   the run with its key before any verdict is printed ([`Error::File`]);
//!   a damaged page or a file whose rows are out of order found later
//!   during the scan stops it the same way, naming the file (each file is
//!   its own stream).
//! - **Order.** Rows arrive sorted by `stream`, `stream_key`, `seq`, `hash`
//!   across all files and dates of the table, so every copy and every version
//!   of an event is adjacent to the others and a stream is one contiguous run.
//! - **Schema versions.** A row whose `v` this reader does not know stops the
//!   run ([`Error::Schema`]) instead of being miscounted.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::{col, lit, Expr, ParquetReadOptions, SessionConfig, SessionContext};
use futures::TryStreamExt;
use ledger_events::{Stream, FIELDS, SCHEMA_VERSIONS_KNOWN};
use ledger_ingest::parquet_io::{footer_layout, footer_rows, LAYOUT_METADATA_KEY};
use ledger_ingest::{
    manifest_prefix, parse_object_key, Manifest, Partition, Table, LAKE_EVENTS_PREFIX,
    LAKE_LAYOUTS_READABLE,
};

use crate::keyed::{Keyed, Seen, SEEN_COLUMNS};
use crate::merge::{merge, Cursor};
use crate::names::FxSet;
use crate::rows::Row;
use crate::store::Location;
use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

/// Rows per record batch DataFusion hands us: large enough to amortise the
/// per-batch overhead, small enough to keep a batch in cache.
const SCAN_BATCH_ROWS: usize = 8_192;
/// Rows held across all open files during a merge (one batch each).
const MERGE_ROWS_BUDGET: usize = 262_144;
/// A merge of more lake files than this at once warns, naming the cost:
/// each open file holds ~0.2 MB and takes ~1 ms to open (a DataFusion
/// reader, a batch, a mapped row group, whatever its rows;
/// docs/RECONCILE.md "Limits"), so an uncompacted day of ingest files can
/// take more memory than the host has (rev-s60-scale 3). The warning comes
/// before the files are opened, so a run the kernel stops has said why.
/// `RECONCILE_MERGE_FILES_WARN` sets another bound (tests).
pub const MERGE_FILES_WARN: usize = 10_000;
/// Smallest per-file batch, however many files: below this the per-batch
/// overhead dominates.
const MERGE_BATCH_ROWS_MIN: usize = 256;
/// Largest Parquet footer we accept (a lake file's is a few KB): a corrupt
/// length field must not make us allocate gigabytes.
const FOOTER_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Timing lines on stderr (`RECONCILE_TRACE=1`): the merge's, and a run's
/// timeline (`run::trace`).
pub(crate) fn trace_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RECONCILE_TRACE").is_some_and(|v| v == "1"))
}

/// Why a run could not reach a verdict. Each maps to exit code 2.
#[derive(Debug)]
pub enum Error {
    /// The lake location is unusable (missing directory, bad URL, store error).
    Lake(String),
    /// One lake file is unreadable or not in the known layout.
    File { key: String, why: String },
    /// A row of an event schema version this reader does not know.
    Schema {
        key: String,
        event_id: String,
        v: u16,
    },
    /// Anything else DataFusion reported.
    Scan(String),
    /// A table's proof stopped because the run's other table thread failed
    /// (`crate::threads::Cancel`): never the run's error, which is that
    /// failure's.
    Cancelled,
}

/// An error's words without its `Help:` line(s): what a run that goes on
/// past the error says of it, when the help would name that very run (a
/// checkpoint's "run with --full", said by `--full`).
pub fn without_help(said: &str) -> &str {
    said.split("\nHelp:").next().unwrap_or(said)
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Lake(why) => write!(f, "{why}"),
            Error::File { key, why } if why.ends_with(ROWS_CHANGED) => write!(
                f,
                "lake file {key}: {why}\nHelp: run reconcile again once nothing writes to the lake (a \
                 lake file is replaced by writing a new file and renaming it over the old one, docs/LAKE.md); \
                 if it says so again with nothing writing, move the file out of events/ (for example to \
                 quarantine/) and re-deliver or re-compact its events"
            ),
            Error::File { key, why } if why.ends_with(FILE_GONE) => write!(
                f,
                "lake file {key}: {why}\nHelp: nothing needs moving: run reconcile again once nothing \
                 rewrites the lake (the nightly job runs ledger-compact before reconcile, not beside it, \
                 docs/RECONCILE.md)"
            ),
            Error::File { key, why } if why.ends_with(READ_WHOLE_AGAIN) => write!(
                f,
                "lake file {key}: {why}\nHelp: do not move the file yet: run reconcile again (check the \
                 store's health if it fails again); if it names this file as damaged again, move the file \
                 out of events/ (for example to quarantine/) and re-deliver or re-compact its events \
                 (docs/LAKE.md)"
            ),
            Error::File { key, why } if why.ends_with(MISFILED) => write!(
                f,
                "lake file {key}: {why}\nHelp: if every row of the file is of that other date, \
                 move the file to that date's directory (where ledger-ingest writes it: a file \
                 moved out of it, most likely) and run reconcile again; if its rows are of \
                 several dates, move it out of events/ (for example to quarantine/) and re-deliver \
                 its events (docs/LAKE.md). Left where it is, SQL that selects by date misses its \
                 rows"
            ),
            Error::File { key, why } if why.ends_with(LAYOUT_UNKNOWN) => write!(
                f,
                "lake file {key}: {why}\nHelp: upgrade reconcile (and ledger-compact) to a version that \
                 knows the layout, and run again; do not move the file: a writer upgraded before them \
                 writes such files, whole, and each may be the only copy of its events"
            ),
            // A day's or a table's directory behind a link whose target is
            // missing is named as one (rev-s52-docs L12: "lake file").
            Error::File { key, why } if why.ends_with(STORE_FAILED) && !is_parquet_name(key) => write!(
                f,
                "lake directory {key}: {why}\nHelp: do not move it: the file system failed, or refused \
                 the run access (an unmounted share, file permissions for the user the job runs as). \
                 Fix that and run reconcile again"
            ),
            // An S3 refusal whose code says the run's identity changed (a
            // session token expired mid-run, a key revoked) gets the
            // connection check's Help for it (rev-s53-resources L3).
            Error::File { key, why } if why.ends_with(STORE_FAILED) => {
                match crate::store::read_refused_help_in(why) {
                    Some(help) => write!(
                        f,
                        "lake file {key}: {why}\nHelp: do not move the file (it may be whole): {}",
                        help.trim_start_matches("Help: ")
                    ),
                    None => write!(
                        f,
                        "lake file {key}: {why}\nHelp: do not move the file: the store or the file \
                         system failed, or refused the run access (file permissions for the user the \
                         job runs as; the S3 credentials, endpoint and the store's health). Fix that \
                         and run reconcile again; a file that is damaged is named as damaged then"
                    ),
                }
            }
            Error::File { key, why } => write!(
                f,
                "lake file {key}: {why}\nHelp: move the file out of events/ (for example to quarantine/) \
                 and re-deliver or re-compact its events (docs/LAKE.md), then run reconcile again"
            ),
            Error::Schema { key, event_id, v } => write!(
                f,
                "lake file {key}: event {event_id}: schema version {v} is not known to this reconciler (known: {SCHEMA_VERSIONS_KNOWN:?})\n\
                 Help: upgrade reconcile to a version that knows schema v{v}"
            ),
            Error::Scan(why) => write!(f, "scan failed: {why}"),
            Error::Cancelled => write!(f, "the proof stopped: the run's other table thread failed"),
        }
    }
}

impl std::error::Error for Error {}

/// An opened lake: the store for listing and footers, and how DataFusion
/// reaches the same objects.
pub struct Lake {
    pub name: String,
    store: Arc<dyn ObjectStore>,
    /// Prefix of every key inside `store` (S3: the URL's path; local: empty).
    prefix: String,
    /// URL base DataFusion reads objects under (`file:///abs/dir/`, `s3://bucket/`).
    url_base: String,
    /// A local lake's directory, absolute ([`Lake::unlisted_local`]).
    local_root: Option<std::path::PathBuf>,
    ctx: SessionContext,
}

/// One lake file, listed and checked.
#[derive(Debug, Clone)]
pub struct LakeFileInfo {
    pub key: String,
    pub table: Table,
    pub bytes: u64,
    pub rows: i64,
    /// The store's version tag (S3: the ETag; local: derived from inode,
    /// size and mtime): a file rewritten in place gets a new one.
    pub e_tag: Option<String>,
    /// The file's column names, in order: files with the same columns share
    /// one inferred Arrow schema during a scan.
    pub columns: String,
    /// Per row group, from the footer's statistics: the least and greatest
    /// `stream_key` and the rows. Only an estimate of where rows lie (a run
    /// splits a table's remaining keys by it); empty when a row group has
    /// no such statistics.
    pub key_groups: Vec<KeyGroup>,
}

/// What [`Lake::check_footer`] reads from a file's footer for its
/// [`LakeFileInfo`].
struct Footer {
    rows: i64,
    columns: String,
    key_groups: Vec<KeyGroup>,
}

/// The columns of the lake layout that hold integers, all `Int64` but `v`
/// (docs/LAKE.md); every other of [`ledger_events::FIELDS`] holds strings.
const INT64_FIELDS: [&str; 7] = [
    "seq",
    "occurred_at_ms",
    "amount",
    "balance_after",
    "held_after",
    "overdraft_limit",
    "deadline_ms",
];

/// Whether every column of `schema` (a file's, as its footer describes it
/// to an Arrow reader) that the lake layout names has the layout's type:
/// `v` UInt16, [`INT64_FIELDS`] Int64, the others strings (Utf8, or the
/// large strings or views another Arrow writer may ask for: the same
/// Parquet column). Every scan then reads the file alike: the proof's
/// sorted scan, which takes the Arrow schema of the first file of a column
/// list for every later one and would cast a later file's other types to
/// it (a dictionary, unannotated bytes, a 32-bit `seq`), and the column
/// scans, which take each file's own (`rows::as_utf8`). Other columns are
/// ignored, as readers of the lake ignore them ([`lake_columns`] says which
/// are missing).
fn lake_types(schema: &arrow_schema::Schema) -> Result<(), String> {
    use arrow_schema::DataType;
    let layout = ledger_ingest::arrow_schema();
    for f in schema.fields() {
        let name = f.name().as_str();
        if !ledger_events::FIELDS.contains(&name) {
            continue;
        }
        let t = f.data_type();
        let ok = match name {
            "v" => *t == DataType::UInt16,
            _ if INT64_FIELDS.contains(&name) => *t == DataType::Int64,
            _ => matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View),
        };
        if !ok {
            return Err(format!(
                "column `{name}` is read as {t}, not the lake layout's type (docs/LAKE.md)"
            ));
        }
        // A column the layout lets rows leave empty, declared REQUIRED: the
        // sorted scan takes the first file's schema for every later one,
        // and would refuse an honest later file's nulls, naming it.
        if !f.is_nullable() && layout.field_with_name(name).is_ok_and(|l| l.is_nullable()) {
            return Err(format!(
                "column `{name}` is declared REQUIRED (no nulls), where the lake layout lets rows \
                 leave it empty (docs/LAKE.md): not a file ledger-ingest or ledger-compact writes"
            ));
        }
    }
    Ok(())
}

/// Whether a file of a layout this reconciler reads has every column of the
/// layout (rev-s51-exact F2: one without passed the footer check, the scan's
/// projection failed on it, and the second look, whose read needs no column,
/// took that for the store's failure, every night).
fn lake_columns(schema: &arrow_schema::Schema) -> Result<(), String> {
    match ledger_events::FIELDS
        .iter()
        .find(|name| schema.field_with_name(name).is_err())
    {
        Some(name) => Err(format!(
            "column `{name}` of the lake layout is missing (docs/LAKE.md): not a file \
             ledger-ingest or ledger-compact writes"
        )),
        None => Ok(()),
    }
}

impl Footer {
    /// What a decoded footer says of its file, or why the file is not one
    /// this reconciler reads (its lake layout). No I/O: [`Lake::check_footer`]
    /// reads and decodes the footer first.
    fn of(meta: &parquet::file::metadata::ParquetMetaData) -> Result<Footer, String> {
        let fm = meta.file_metadata();
        let layout = footer_layout(fm);
        footer_rows(meta)?;
        // The scan's planner decodes the Arrow schema embedded in the
        // footer, and a damaged one can make the decoder panic: decoded here
        // first, the file is named.
        let arrow = std::panic::catch_unwind(|| {
            parquet::arrow::parquet_to_arrow_schema(fm.schema_descr(), fm.key_value_metadata())
        });
        let arrow = match arrow {
            Ok(Ok(schema)) => schema,
            Ok(Err(e)) => return Err(format!("corrupt Parquet footer: its Arrow schema: {e}")),
            Err(_) => return Err(
                "corrupt Parquet footer: its Arrow schema does not decode (the decoder panicked)"
                    .into(),
            ),
        };
        lake_types(&arrow)?;
        match layout {
            Some(l) if LAKE_LAYOUTS_READABLE.contains(&l) => {
                lake_columns(&arrow)?;
                let columns: Vec<&str> = fm
                    .schema_descr()
                    .columns()
                    .iter()
                    .map(|c| c.name())
                    .collect();
                let key_col = columns.iter().position(|c| *c == "stream_key");
                let key_groups = key_col.map_or_else(Vec::new, |k| {
                    meta.row_groups()
                        .iter()
                        .filter_map(|rg| {
                            let st = rg.column(k).statistics()?;
                            Some(KeyGroup {
                                min: String::from_utf8_lossy(st.min_bytes_opt()?).into_owned(),
                                max: String::from_utf8_lossy(st.max_bytes_opt()?).into_owned(),
                                rows: rg.num_rows(),
                            })
                        })
                        .collect()
                });
                Ok(Footer {
                    rows: fm.num_rows(),
                    columns: columns.join(","),
                    key_groups,
                })
            }
            Some(other) => Err(format!(
                "written in lake layout {other:?} (this reconciler knows {LAKE_LAYOUTS_READABLE:?}): \
                 {LAYOUT_UNKNOWN}"
            )),
            None => Err(format!(
                "has no {LAYOUT_METADATA_KEY} metadata: not written by ledger-ingest"
            )),
        }
    }
}

/// One row group's `stream_key` range and size ([`LakeFileInfo::key_groups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGroup {
    pub min: String,
    pub max: String,
    pub rows: i64,
}

/// Which rows of a table a sorted scan reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Select<'a> {
    /// Only the rows whose `stream_key` is one of these.
    pub keys: Option<&'a [String]>,
    /// Only the rows at or after (`stream`, `stream_key`) in the lake's order.
    pub from: Option<(Stream, &'a str)>,
    /// Files (by key) read whole even with `keys`: no filter, so nothing of
    /// them is skipped on their footer's word; rows of other streams are
    /// the caller's to drop. A set, looked up once per file: every file of
    /// a table (~30k small ones before compaction) can be in it.
    pub whole: Option<&'a FxSet<&'a str>>,
}

impl Select<'_> {
    /// Whether the file `key` is read whole ([`Select::whole`]).
    pub fn reads_whole(&self, key: &str) -> bool {
        self.whole.is_some_and(|w| w.contains(key))
    }
}

impl LakeFileInfo {
    /// What a checkpoint remembers to know the file is unchanged, in the
    /// form compaction manifests name versions (`ledger_ingest::stamp`).
    pub fn stamp(&self) -> String {
        ledger_ingest::stamp(self.bytes, self.e_tag.as_deref())
    }

    /// Whether a checkpoint proved the file as it is now (`proved`: key →
    /// stamp of the files it proved).
    pub fn proved_in(&self, proved: &std::collections::BTreeMap<String, String>) -> bool {
        proved.get(&self.key) == Some(&self.stamp())
    }
}

impl Lake {
    /// A local directory, which must exist, or `s3://BUCKET[/PREFIX]`
    /// configured from the environment (see [`crate::store`]). Only the
    /// configuration is checked: [`Lake::connect`] also asks the store.
    pub fn open(location: &str) -> Result<Lake, Error> {
        let mut config = SessionConfig::new().with_batch_size(SCAN_BATCH_ROWS);
        // Every value is read from the pages, never from a file's footer
        // statistics: with statistics collected, DataFusion reads a column
        // whose statistics give one value (least = greatest, no null) or
        // only nulls as that literal, without decoding its pages. A footer
        // that disagrees with its pages (no honest writer's, but the proof
        // trusts no writer) would then be proved as the footer describes
        // it, while an auditor's SQL reads the pages. The footers still
        // serve the listing (rows, columns, key ranges) and let a keyed scan
        // skip row groups (`scan_sorted_where`).
        config.options_mut().execution.collect_statistics = false;
        // The lake's strings are Utf8, and column scans (`scan_columns`)
        // hand Utf8 batches to their callers; only the proof's sorted scan
        // reads views (see `scan_sorted_where`).
        config
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = false;
        let ctx = SessionContext::new_with_config(config);
        let parsed = Location::parse(location).map_err(Error::Lake)?;
        if let Location::S3 { bucket, .. } = &parsed {
            // One store for our listing and footer reads and for DataFusion's
            // scan of s3://BUCKET/… paths.
            let store = crate::store::s3_store(location, bucket).map_err(Error::Lake)?;
            let url = ObjectStoreUrl::parse(format!("s3://{bucket}"))
                .map_err(|e| Error::Lake(format!("{location}: {e}")))?;
            ctx.register_object_store(url.as_ref(), Arc::clone(&store));
            return Ok(Lake {
                name: location.to_owned(),
                store,
                prefix: parsed.key_prefix(),
                url_base: format!("s3://{bucket}/"),
                local_root: None,
                ctx,
            });
        }
        let dir = std::path::Path::new(location);
        if !dir.is_dir() {
            let what = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            return Err(Error::Lake(format!(
                "lake directory {location} {what}\nHelp: pass the lake directory (reconcile's default \
                 is $LEDGER_LAKE, then .lake) or s3://BUCKET/PREFIX; `reconcile-testdata generate DIR` makes a test lake"
            )));
        }
        let abs = dir
            .canonicalize()
            .map_err(|e| Error::Lake(format!("cannot open {location}: {e}")))?;
        // The store names each file by its whole path, and a control
        // character is not allowed in a name: every file would be refused,
        // and the error would blame the store (rev-s52-contracts L4).
        if abs.to_string_lossy().chars().any(char::is_control) {
            return Err(Error::Lake(format!(
                "lake directory {:?}: its path holds a control character (a tab, a line feed…), \
                 which the object store cannot name its files by\nHelp: rename the directory (or the \
                 one it is in) to a name without one",
                abs.display().to_string()
            )));
        }
        // DataFusion's scans of local files read row groups through maps
        // (`crate::mapped`); our own listing and footer reads stay plain.
        crate::mapped::read_local_files_mapped(&ctx);
        let store = object_store::local::LocalFileSystem::new_with_prefix(&abs)
            .map_err(|e| Error::Lake(format!("cannot open {location}: {e}")))?;
        Ok(Lake {
            name: location.to_owned(),
            store: Arc::new(store),
            prefix: String::new(),
            // A file:// URL, not a plain path: DataFusion reads `?`, `*` or
            // `[` in a path as a glob (a lake under `/data/lake[1]` found no
            // file, and the error blamed the first lake file).
            url_base: url::Url::from_directory_path(&abs)
                .map_err(|()| Error::Lake(format!("cannot open {location}: not an absolute path")))?
                .to_string(),
            local_root: Some(abs),
            ctx,
        })
    }

    /// [`Lake::open`], then for S3 one listing request, so that a missing
    /// bucket, refused credentials or an unreachable endpoint is reported as
    /// such before any work starts.
    pub async fn connect(location: &str) -> Result<Lake, Error> {
        let lake = Lake::open(location)?;
        let parsed = Location::parse(location).map_err(Error::Lake)?;
        crate::store::probe_s3(lake.store.as_ref(), &parsed)
            .await
            .map_err(Error::Lake)?;
        Ok(lake)
    }

    /// The prefix every key of the lake has inside its bucket (`prod/` for
    /// `s3://bucket/prod`), empty for a whole bucket or a local directory.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Writes `bytes` at `key` under the lake's root (or prefix), replacing
    /// any object there. The store makes it atomic: a local file is written
    /// to a temporary name and renamed; an S3 PUT is all or nothing. The
    /// error ends with a Help (rev-s53-resources M6): the store's (expired
    /// token, refused credentials) and the write access a PUT needs, or a
    /// local directory's room and permissions.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), String> {
        let full = format!("{}{key}", self.prefix);
        self.store
            .put(&Path::from(full.as_str()), bytes.into())
            .await
            .map(|_| ())
            .map_err(|e| {
                let help = match self.local_root {
                    Some(_) => format!("\n{}", crate::output::WRITE_HELP),
                    None => format!(
                        "{}\nThe credentials must allow writing the object (R2: an API token with \
                         Object Read & Write, not Object Read only).",
                        crate::store::help_line(&e)
                    ),
                };
                format!("cannot write {key} to the lake {}: {e}{help}", self.name)
            })
    }

    /// Every lake file of `table`, sorted by key, each footer checked.
    pub async fn files(&self, table: Table) -> Result<Vec<LakeFileInfo>, Error> {
        self.files_and_ignored(table).await.map(|(files, _)| files)
    }

    /// [`Lake::files`], and the keys under the table's prefix that end in
    /// `.parquet` but are not named as lake files are (docs/LAKE.md), sorted:
    /// the proof does not read them, so a misnamed file of events would
    /// otherwise go unproved without a word. Other keys (temporary uploads,
    /// other tools' files) are ignored silently.
    pub async fn files_and_ignored(
        &self,
        table: Table,
    ) -> Result<(Vec<LakeFileInfo>, Vec<String>), Error> {
        let prefix = format!("{}{LAKE_EVENTS_PREFIX}/{}/", self.prefix, table.as_str());
        let metas = self.list(&prefix).await?;
        self.unlisted_local(table)?;
        let (mut files, mut ignored) = (Vec::new(), Vec::new());
        for m in metas {
            let key = self.key_of(&m.location);
            if parse_object_key(&key).is_none() {
                if is_parquet_name(&key) {
                    ignored.push(key);
                }
                continue;
            }
            let footer = self.check_footer(&m.location, &key, m.size).await?;
            files.push(LakeFileInfo {
                key,
                table,
                bytes: m.size,
                rows: footer.rows,
                e_tag: m.e_tag.clone(),
                columns: footer.columns,
                key_groups: footer.key_groups,
            });
        }
        files.sort_by(|a, b| a.key.cmp(&b.key));
        ignored.sort();
        Ok((files, ignored))
    }

    /// For a local lake, an error naming the first entry of `table`'s
    /// directory that would be a partition or a lake file (or ends in
    /// `.parquet`) but cannot be read: a symbolic link whose target is
    /// missing (an unmounted share), or one the run may not open.
    /// `object_store`'s local listing leaves such entries out without a
    /// word, so the proof would pass over them as if they were not there.
    fn unlisted_local(&self, table: Table) -> Result<(), Error> {
        let Some(root) = &self.local_root else {
            return Ok(());
        };
        let found = ledger_s3::local::unreadable_entry(root, table.as_str(), None, |key| {
            parse_object_key(key).is_some()
        });
        match found {
            Some((key, e)) => Err(Error::File {
                key,
                why: format!("{} {STORE_FAILED}", ledger_s3::local::why_unreadable(&e)),
            }),
            None => Ok(()),
        }
    }

    /// The keys under `events/` but outside the tables' directories
    /// (`events/{account,transfer,subscription}/`) whose names end in
    /// `.parquet` (any case), sorted: a table's directory misspelled
    /// (`events/Account/`, `events/accounts/`) or a file put directly in
    /// `events/`. No proof lists them, so without this a day uploaded under a
    /// wrong directory would vanish from the proof without a word.
    pub async fn ignored_outside_tables(&self) -> Result<Vec<String>, Error> {
        let events = format!("{}{LAKE_EVENTS_PREFIX}/", self.prefix);
        let top = self
            .store
            .list_with_delimiter(Some(&Path::from(events.as_str())))
            .await
            .map_err(|e| self.store_failed("list", &events, e))?;
        let tables: Vec<String> = Table::ALL
            .iter()
            .map(|t| format!("{events}{}", t.as_str()))
            .collect();
        let mut metas = top.objects;
        for dir in top.common_prefixes {
            if !tables.iter().any(|t| *t == dir.as_ref()) {
                metas.extend(self.list(&format!("{dir}/")).await?);
            }
        }
        let mut out: Vec<String> = metas
            .into_iter()
            .map(|m| self.key_of(&m.location))
            .filter(|key| is_parquet_name(key))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The lake key of an object of the store (its location less the lake's
    /// prefix).
    fn key_of(&self, location: &Path) -> String {
        let full = location.to_string();
        full.strip_prefix(&self.prefix).unwrap_or(&full).to_owned()
    }

    /// A key under the lake as an error names it: the lake, `/`, the key
    /// (`key` may start with the lake's own prefix).
    fn shown(&self, key: &str) -> String {
        let key = key.strip_prefix(&self.prefix).unwrap_or(key);
        format!("{}/{key}", self.name.trim_end_matches('/'))
    }

    /// Every object under `prefix` (the full key prefix, the lake's own
    /// prefix included).
    async fn list(&self, prefix: &str) -> Result<Vec<object_store::ObjectMeta>, Error> {
        self.store
            .list(Some(&Path::from(prefix)))
            .try_collect()
            .await
            .map_err(|e| self.store_failed("list", prefix, e))
    }

    /// The store's error `e` when it was asked to `op` (list, read) `key`,
    /// named as the lake shows it; on an S3 lake with the `Help:` line the
    /// connection check gives the same error, on a local lake the file
    /// system's.
    fn store_failed(&self, op: &str, key: &str, e: object_store::Error) -> Error {
        let help = match self.local_root {
            // rev-s55-blackbox F6: a refused listing had no Help.
            Some(_) => "\nHelp: do not move anything: the file system failed, or refused the run \
                        access (file permissions for the user the job runs as, a share not \
                        mounted). Fix that and run reconcile again"
                .to_owned(),
            None if op == "read" => crate::store::read_help_line(&e),
            None => crate::store::help_line(&e),
        };
        // The store's words cut and escaped: an S3 error quotes the
        // endpoint's answer, a proxy's HTML page say (rev-s55-diff2 L6).
        let said = crate::output::http::excerpt(&e.to_string());
        Error::Lake(format!("cannot {op} {}: {said}{help}", self.shown(key)))
    }

    /// The compaction manifests of `partitions` (docs/LAKE.md, "Compaction
    /// manifests"), and for each object there that is not a manifest this
    /// build reads, its key and why. A store error is an error: a run must
    /// not decide what was lost from a listing it could not finish.
    pub async fn manifests(
        &self,
        partitions: &std::collections::BTreeSet<Partition>,
    ) -> Result<(Vec<Manifest>, Vec<String>), Error> {
        let (mut manifests, mut unreadable) = (Vec::new(), Vec::new());
        for p in partitions {
            let prefix = format!("{}{}", self.prefix, manifest_prefix(p));
            for m in self.list(&prefix).await? {
                let key = self.key_of(&m.location);
                let bytes = async { self.store.get(&m.location).await?.bytes().await }
                    .await
                    .map_err(|e| self.store_failed("read", &key, e))?;
                match Manifest::parse(&key, &bytes) {
                    Ok(manifest) => manifests.push(manifest),
                    Err(why) => unreadable.push(why),
                }
            }
        }
        Ok((manifests, unreadable))
    }

    /// Reads and decodes the footer: a truncated or foreign file, or one of
    /// another layout, is named here before any row is read.
    async fn check_footer(&self, loc: &Path, key: &str, size: u64) -> Result<Footer, Error> {
        let file_err = |why: String| Error::File {
            key: key.to_owned(),
            why,
        };
        if size < 12 {
            return Err(file_err(format!(
                "{size} bytes: too short to be a Parquet file"
            )));
        }
        // Deleted since the listing (a compaction that merged it), or the
        // store failed: neither says the file is damaged.
        let read_err = |e: object_store::Error| {
            let tail = match e {
                object_store::Error::NotFound { .. } => FILE_GONE,
                _ => STORE_FAILED,
            };
            let said = crate::output::http::excerpt(&ledger_s3::with_cause(&e));
            file_err(format!("cannot read: {said} {tail}"))
        };
        let tail = self
            .store
            .get_range(loc, size - 8..size)
            .await
            .map_err(read_err)?;
        if &tail[4..8] != b"PAR1" {
            return Err(file_err(
                "not a Parquet file (no PAR1 magic at the end: truncated or overwritten)".into(),
            ));
        }
        let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if len + 8 > size || len > FOOTER_BYTES_MAX {
            return Err(file_err(format!(
                "Parquet footer length {len} does not fit in a file of {size} bytes"
            )));
        }
        let buf = self
            .store
            .get_range(loc, size - 8 - len..size - 8)
            .await
            .map_err(read_err)?;
        let meta = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&buf)
            .map_err(|e| file_err(format!("corrupt Parquet footer: {e}")))?;
        Footer::of(&meta).map_err(file_err)
    }

    /// The URL DataFusion reads the lake file `key` from.
    fn file_url(&self, key: &str) -> String {
        format!("{}{}{key}", self.url_base, self.prefix)
    }

    /// Reads only the `columns` of `files` (a column a file lacks is left
    /// out of its batches; strings as Utf8 whatever the file's writer asked
    /// for, `rows::as_utf8`), a batch at a time, in no particular order; with
    /// `keys`, only the rows whose `stream_key` is one of them (row groups
    /// and pages whose statistics exclude every key are not read: on the
    /// footer's word, so [`Lake::scan_keyed`] for files a proof has read).
    pub async fn scan_columns(
        &self,
        files: &[LakeFileInfo],
        columns: &[&str],
        keys: Option<&[String]>,
        mut visit: impl FnMut(&RecordBatch),
    ) -> Result<(), Error> {
        let by = keys.map(|keys| ByKey::new(keys, &self.ctx.state()));
        for f in files {
            let have: Vec<&str> = columns
                .iter()
                .copied()
                .filter(|c| f.columns.split(',').any(|x| x == *c))
                .collect();
            if have.is_empty() {
                continue;
            }
            let path = self.file_url(&f.key);
            let file_err = unreadable(&f.key);
            let (filter, ctx) = file_by_key(f, by.as_ref(), &self.ctx);
            let mut stream = ctx
                .read_parquet(path, ParquetReadOptions::default())
                .await
                .and_then(|df| match filter {
                    Some(filter) => df.filter(filter),
                    None => Ok(df),
                })
                .and_then(|df| df.select_columns(&have))
                .map_err(file_err)?
                .execute_stream()
                .await
                .map_err(file_err)?;
            while let Some(batch) = stream.try_next().await.map_err(file_err)? {
                let batch = crate::rows::as_utf8(&batch).map_err(|why| Error::File {
                    key: f.key.clone(),
                    why,
                })?;
                visit(&batch);
            }
        }
        Ok(())
    }

    /// [`Lake::scan_columns`] of the rows of `keyed`'s keys in `files`, that a
    /// footer which lies cannot hide a wanted stream from (`crate::keyed`):
    /// a file `keyed` filters is read by key (with [`SEEN_COLUMNS`] too) and
    /// then checked, and one whose scan lacks a stretch of a wanted stream
    /// noted in it stops the scan, naming it; any other file is read whole
    /// (no filter, so nothing of it is skipped on its footer's word), its
    /// rows of other keys `visit`'s to drop.
    pub async fn scan_keyed(
        &self,
        files: &[LakeFileInfo],
        columns: &[&str],
        keyed: &Keyed<'_>,
        mut visit: impl FnMut(&RecordBatch),
    ) -> Result<(), Error> {
        let mut checked = columns.to_vec();
        for c in SEEN_COLUMNS {
            if !checked.contains(&c) {
                checked.push(c);
            }
        }
        for f in files {
            let file = std::slice::from_ref(f);
            if keyed.filters(&f.key) {
                let mut seen = Seen::default();
                self.scan_columns(file, &checked, Some(keyed.keys), |b| {
                    keyed.see_batch(&mut seen, b);
                    visit(b);
                })
                .await?;
                keyed.check(&f.key, &seen)?;
            } else {
                self.scan_columns(file, columns, None, &mut visit).await?;
            }
        }
        Ok(())
    }

    /// `e` after a second look at the file it names, when the run's read of
    /// it failed: the store's own word, not DataFusion's, on what became of
    /// it. The proof's top (`run::start`) looks at every error its reads
    /// return. A file no longer in the store left the lake during the run
    /// ([`FILE_GONE`]). A read that failed as if the file were damaged (`not
    /// readable as Parquet`: a 5xx mid-scan shows so, its cause kept only as
    /// text) is damaged only if the file, read again through the store, does
    /// not decode ([`READ_WHOLE_AGAIN`], [`DAMAGED_AGAIN`]). A file that gave
    /// fewer rows than its footer or a proof counted (a deleted file reads as
    /// none) and is gone is [`FILE_GONE`] too. Any other error is `e`, as is
    /// an error looked at already.
    pub(crate) async fn second_look(&self, e: Error) -> Error {
        let Error::File { key, why } = &e else {
            return e;
        };
        let looked = why.ends_with(FILE_GONE)
            || why.ends_with(READ_WHOLE_AGAIN)
            || why.ends_with(DAMAGED_AGAIN)
            || why.contains("; read again, it failed too: ");
        let damaged = why.starts_with("not readable as Parquet");
        let short = [STORE_FAILED, ROWS_CHANGED, FOOTER_DISAGREES]
            .iter()
            .any(|tail| why.ends_with(tail));
        if looked || !(damaged || short) {
            return e;
        }
        let loc = Path::from(format!("{}{key}", self.prefix));
        // Whether it is still there first: a HEAD (all a short read asks,
        // rev-s50-diff F5); then, for a read that failed as if damaged,
        // the file read again through the store in ranges as a scan reads
        // it, never whole (rev-s50-diff F3: a big file read whole on a slow
        // link timed out, and a damaged file was called the store's).
        let head = self.store.head(&loc).await;
        // On a local lake, an entry the store cannot find may still be
        // there: a symbolic link whose target is missing is no file gone.
        let entry_left = |root: &std::path::PathBuf| root.join(key).symlink_metadata().is_ok();
        let why = match head {
            Err(object_store::Error::NotFound { .. })
                if self.local_root.as_ref().is_some_and(entry_left) =>
            {
                return e
            }
            Err(object_store::Error::NotFound { .. }) => {
                // The cause the error guessed (a rewrite, a footer that
                // lies, the store) is not the cause.
                let said = [STORE_FAILED, ROWS_CHANGED, FOOTER_DISAGREES]
                    .iter()
                    .find_map(|tail| why.strip_suffix(tail))
                    .unwrap_or(why);
                format!("{} {FILE_GONE}", said.trim_end_matches([' ', ':']))
            }
            _ if !damaged => return e,
            // The store fails it still: its failure, not the file's.
            Err(failed) => format!("{why}; read again, it failed too: {failed} {STORE_FAILED}"),
            Ok(_) => match self.decodes_through_store(&loc).await {
                Err(failed) => format!("{why}; read again, it failed too: {failed} {STORE_FAILED}"),
                Ok(true) => format!("{why} {READ_WHOLE_AGAIN}"),
                // Damaged, read twice: not looked at again (a later look
                // whose read failed would call it the store's).
                Ok(false) => format!("{why} {DAMAGED_AGAIN}"),
            },
        };
        Error::File {
            key: key.clone(),
            why,
        }
    }

    /// Whether the file at `loc` decodes, every row of every column (the
    /// page index too, which DataFusion's reads use), read through the
    /// store in ranges: `Ok(false)` when it does not (an error or a panic of
    /// the decoder), `Err` with the store's error when a read failed (told
    /// by type: parquet's object-store reader keeps the store's error).
    /// (`ParquetObjectReader` is deprecated for a reader of one's own; it
    /// reads the same ranges through the same store.)
    #[allow(deprecated)]
    async fn decodes_through_store(&self, loc: &Path) -> Result<bool, String> {
        use futures::{FutureExt, StreamExt};
        use parquet::arrow::arrow_reader::ArrowReaderOptions;
        use parquet::arrow::async_reader::{ParquetObjectReader, ParquetRecordBatchStreamBuilder};
        use parquet::errors::ParquetError;
        use parquet::file::metadata::PageIndexPolicy;
        let reader = ParquetObjectReader::new(self.store.clone(), loc.clone());
        let read = async {
            let options =
                ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
            let mut batches = ParquetRecordBatchStreamBuilder::new_with_options(reader, options)
                .await?
                .build()?;
            while let Some(batch) = batches.next().await {
                batch?;
            }
            Ok::<(), ParquetError>(())
        };
        match std::panic::AssertUnwindSafe(read).catch_unwind().await {
            Ok(Ok(())) => Ok(true),
            Ok(Err(ParquetError::External(e))) if e.is::<object_store::Error>() => {
                Err(e.to_string())
            }
            Ok(Err(_)) | Err(_) => Ok(false),
        }
    }

    /// Streams the rows of `files` (one table) in the lake's order
    /// (`stream`, `stream_key`, `seq`, `hash`), calling `visit` with each row
    /// in order: a k-way merge of the files, each read by DataFusion as
    /// one ordered stream (see [`crate::merge`]). Only the rows `select`
    /// selects (row groups whose statistics exclude them all are not read).
    /// `visit` may stop the scan ([`ControlFlow::Break`]). Returns how many
    /// rows of each file it handed to `visit` (the row it stopped at not
    /// among them).
    pub async fn scan_sorted_where(
        &self,
        files: &[LakeFileInfo],
        select: Select<'_>,
        mut visit: impl FnMut(Row<'_>) -> Result<ControlFlow<()>, Error>,
    ) -> Result<Vec<u64>, Error> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let warn_over = std::env::var("RECONCILE_MERGE_FILES_WARN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MERGE_FILES_WARN);
        if files.len() > warn_over {
            crate::say!(
                "reconcile: warning: {} lake files merged at once (the first in {}; ~0.2 MB and ~1 ms \
                 each: ~{} MB, ~{} s to open): the lake is not compacted there\nHelp: run \
                 ledger-compact on the lake before the proof (docs/LAKE.md); a partition it \
                 refused names its damaged file",
                files.len(),
                files[0].key.split('/').take(3).collect::<Vec<_>>().join("/"),
                files.len() / 5,
                files.len() / 1000
            );
        }
        // One batch per open file is the merge's memory: keep the total near
        // MERGE_ROWS_BUDGET rows however many files the table has.
        let batch_rows =
            (MERGE_ROWS_BUDGET / files.len()).clamp(MERGE_BATCH_ROWS_MIN, SCAN_BATCH_ROWS);
        let mut state = self.ctx.state();
        let options = state.config_mut().options_mut();
        options.execution.batch_size =
            datafusion::common::config::ConfigNonZeroUsize::try_new(batch_rows)
                .map_err(|e| Error::Scan(e.to_string()))?;
        // One partition per file: DataFusion must not split a file into byte
        // ranges read in parallel, or the file's order would be lost.
        options.execution.target_partitions = 1;
        options.optimizer.repartition_file_scans = false;
        // Strings as Utf8View (`rows::Cols`): the Parquet reader builds views
        // into the decoded pages and dictionaries instead of copying every
        // value into an offset buffer.
        options.execution.parquet.schema_force_view_types = true;
        // A scan by key prunes each file by its own keys, or reads it whole
        // (`ByKey`).
        let by = select.keys.map(|keys| ByKey::new(keys, &state));
        let ctx = SessionContext::new_with_state(state);
        let started = std::time::Instant::now();
        // Inferring a schema reads the footer again: once per distinct
        // column list (one while every file has the same columns), not once per file.
        let mut schemas: std::collections::HashMap<&str, datafusion::arrow::datatypes::Schema> =
            Default::default();
        let mut cursors = Vec::with_capacity(files.len());
        for (i, f) in files.iter().enumerate() {
            let path = self.file_url(&f.key);
            let file_err = unreadable(&f.key);
            let schema = schemas.get(f.columns.as_str());
            let known = schema.is_some();
            let read = ParquetReadOptions {
                schema,
                ..Default::default()
            };
            let (filter, ctx) = match select.reads_whole(&f.key) {
                true => (None, &ctx),
                false => file_by_key(f, by.as_ref(), &ctx),
            };
            let mut df = ctx.read_parquet(path, read).await.map_err(file_err)?;
            if !known {
                schemas.insert(f.columns.as_str(), df.schema().as_arrow().clone());
            }
            if let Some(filter) = filter {
                df = df.filter(filter).map_err(file_err)?;
            }
            df = only_from(df, select.from).map_err(file_err)?;
            let stream = df
                .select_columns(FIELDS)
                .map_err(file_err)?
                .execute_stream()
                .await
                .map_err(file_err)?;
            let i = u32::try_from(i)
                .map_err(|_| Error::Scan("more than 2³² files in one scan".into()))?;
            cursors.push(Cursor::open(f.key.clone(), i, stream).await?);
        }
        if trace_enabled() {
            crate::say!(
                "reconcile: opened {} files for the merge in {:.1} s ({batch_rows}-row batches)",
                files.len(),
                started.elapsed().as_secs_f64()
            );
        }
        // Every file read without a filter gave all its footer's rows, once
        // the scan ran to its end: a file emptied, cut or replaced while the
        // run read it (DataFusion reads it apart from the listing that
        // checked its footer, and skips one that is empty by then), or
        // pages that disagree with their footer, must not leave rows out.
        let mut stopped = false;
        let read = merge(cursors, &mut |row| {
            let flow = visit(row)?;
            stopped |= flow.is_break();
            Ok(flow)
        })
        .await?;
        if !stopped && select.from.is_none() {
            for (f, &n) in files.iter().zip(&read) {
                let unfiltered = select.keys.is_none() || select.reads_whole(&f.key);
                if unfiltered && i64::try_from(n).ok() != Some(f.rows) {
                    return Err(Error::File {
                        key: f.key.clone(),
                        why: format!(
                            "its footer counts {} rows, but reading it whole gave {n}: {ROWS_CHANGED}",
                            f.rows
                        ),
                    });
                }
            }
        }
        Ok(read)
    }
}

pub use ledger_s3::local::is_parquet_name;

/// Why a file read whole gave another count of rows than its footer.
pub const ROWS_CHANGED: &str = "the file changed while the run read it (written again in place, \
     a copy onto it say), or its pages disagree with its footer";

/// At most this many keys are looked for in a file's footer statistics
/// (row groups and pages), each a term of the pruning predicate of the
/// file; with more, a scan by key reads every row group of it and filters.
pub const PRUNING_KEYS_MAX: usize = 1_000;

/// A list this short always prunes: DataFusion's own default bound.
const PRUNING_KEYS_ALWAYS: usize = 20;

/// A file prunes by a longer list of `n` keys only when it has at least
/// `n² ×` this many rows: the predicate's planning (~n² steps of ~0.2 µs)
/// then costs at most ~10 ns a row, less than reading the row's columns.
/// Measured (10M events, compacted, a redelivery night, the account
/// look-up): 332 keys, 1.8 s pruned by every key, 0.3 s read whole; 66
/// keys, within 0.06 s either way (docs/BENCHMARKS.md, sixtieth session).
const PRUNING_PLAN_ROWS: u128 = 16;

/// How a scan by keys reads each file (rev-s60-scale 1). DataFusion turns
/// a file's `IN` list into a pruning predicate of one term per key, nested
/// one in the next, and its planning of that predicate walks the nest at
/// every level: the cost per file grows with the square of the list (at
/// 840 keys, ~0.1 s a file; a redelivery night that looked up 844 account
/// streams over a 3M-event lake's 600 files took 25 s, a full proof 3.4 s).
/// So each file is given only the keys its row groups' key ranges hold
/// (from its footer, [`LakeFileInfo::key_groups`]: as DataFusion's pruning
/// itself, on the footer's word, which the keyed scans check against the
/// proof's notes, `crate::keyed`), and prunes by them only while
/// few (DataFusion's default bound) or their square is small beside the
/// file's rows ([`PRUNING_PLAN_ROWS`]: the planning then costs less than
/// reading the file whole); otherwise the file's row groups are all read
/// and its rows filtered by every key (a hash set: its cost does not grow
/// with the list).
pub(crate) struct ByKey<'k> {
    all: &'k [String],
    /// `all`, sorted, each once.
    sorted: Vec<&'k str>,
    /// The scan's context, set to prune by a list of up to
    /// [`PRUNING_KEYS_MAX`] keys: the files pruned by their keys are read
    /// with it; the others with the scan's own, whose default bound
    /// ([`PRUNING_KEYS_ALWAYS`]) leaves their longer list to filter rows
    /// only, while a split's list of streams (`only_from`) still prunes.
    pruning: SessionContext,
}

/// How [`ByKey`] reads one file.
enum FileKeys<'k> {
    /// Row groups and pages pruned by these keys (those the file's ranges
    /// hold), rows filtered by them.
    Prune(Vec<&'k str>),
    /// Every row group read, rows filtered by every key.
    Whole,
}

impl<'k> ByKey<'k> {
    /// For a scan of `all` with the context of `state`.
    fn new(all: &'k [String], state: &datafusion::execution::SessionState) -> ByKey<'k> {
        let mut sorted: Vec<&str> = all.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut state = state.clone();
        state
            .config_mut()
            .options_mut()
            .execution
            .parquet
            .max_in_list_size = PRUNING_KEYS_MAX;
        ByKey {
            all,
            sorted,
            pruning: SessionContext::new_with_state(state),
        }
    }

    /// How `f` is read.
    fn of(&self, f: &LakeFileInfo) -> FileKeys<'k> {
        let few = |n: usize| {
            n <= PRUNING_KEYS_ALWAYS
                || (n <= PRUNING_KEYS_MAX
                    && (n as u128).pow(2) * PRUNING_PLAN_ROWS <= f.rows.max(0) as u128)
        };
        match self.held_by(f) {
            Some(keys) if few(keys.len()) => FileKeys::Prune(keys),
            None if few(self.sorted.len()) => FileKeys::Prune(self.sorted.clone()),
            _ => FileKeys::Whole,
        }
    }

    /// The keys within the key ranges of `f`'s row groups, when every row
    /// of it is in a row group with such a range read whole (`None`
    /// otherwise: a row group without one, or a bound that was not UTF-8,
    /// read lossily, may hold any key).
    fn held_by(&self, f: &LakeFileInfo) -> Option<Vec<&'k str>> {
        let ranged: i64 = f.key_groups.iter().map(|g| g.rows).sum();
        let lossy = |g: &KeyGroup| g.min.contains('\u{fffd}') || g.max.contains('\u{fffd}');
        if ranged != f.rows || f.key_groups.iter().any(lossy) {
            return None;
        }
        let mut held: Vec<&str> = Vec::new();
        for g in &f.key_groups {
            let from = self.sorted.partition_point(|k| *k < g.min.as_str());
            let to = self.sorted.partition_point(|k| *k <= g.max.as_str());
            held.extend(self.sorted.get(from..to.max(from)).unwrap_or_default());
        }
        held.sort_unstable();
        held.dedup();
        Some(held)
    }
}

/// The filter of the file `f` in a scan by `by` (none without keys), and
/// the context that reads it: `by`'s pruning one, or the scan's own `ctx`.
fn file_by_key<'c>(
    f: &LakeFileInfo,
    by: Option<&'c ByKey<'_>>,
    ctx: &'c SessionContext,
) -> (Option<Expr>, &'c SessionContext) {
    match by.map(|by| (by, by.of(f))) {
        None => (None, ctx),
        Some((by, FileKeys::Prune(keys))) => (Some(in_list(keys)), &by.pruning),
        Some((by, FileKeys::Whole)) => (Some(in_list(by.all.iter().map(String::as_str))), ctx),
    }
}

/// The rows whose `stream_key` is one of `keys` (none: no row).
fn in_list<'a>(keys: impl IntoIterator<Item = &'a str>) -> Expr {
    let list: Vec<Expr> = keys.into_iter().map(lit).collect();
    if list.is_empty() {
        lit(false) // no key of the scan in its ranges: no row read
    } else {
        col("stream_key").in_list(list, false)
    }
}

/// `df`'s rows at or after (`stream`, `key`) in the lake's order (all rows
/// without a bound): that stream's rows from `key` on, and every row of a
/// stream after it.
fn only_from(
    df: datafusion::dataframe::DataFrame,
    from: Option<(Stream, &str)>,
) -> datafusion::error::Result<datafusion::dataframe::DataFrame> {
    let Some((stream, key)) = from else {
        return Ok(df);
    };
    let later: Vec<_> = Stream::ALL
        .into_iter()
        .filter(|s| *s > stream)
        .map(|s| lit(s.as_str()))
        .collect();
    let at = col("stream")
        .eq(lit(stream.as_str()))
        .and(col("stream_key").gt_eq(lit(key)));
    df.filter(if later.is_empty() {
        at
    } else {
        at.or(col("stream").in_list(later, false))
    })
}

/// How an error names a lake file whose footer's statistics left out rows
/// its pages hold (the run's split, a keyed scan): no file ledger-ingest or
/// ledger-compact writes does that. [`Error::File`]'s Help follows it.
pub const FOOTER_DISAGREES: &str = "the footer's statistics disagree with its pages \
     (no file ledger-ingest or ledger-compact writes does that: restore the file from its source, or re-deliver its events)";

/// How the error of a file in a layout this reader does not know ends:
/// its Help is an upgrade, never the quarantine (the file is whole;
/// rev-s52-docs M1: both were given).
pub const LAYOUT_UNKNOWN: &str = "a newer writer's layout, or not a ledger lake file's";

/// What an error on a lake file ends with when the store or the file system
/// failed to read it, or refused the run access (an S3 5xx, 403 or timeout,
/// a local permission denied): the file may be whole, and [`Error::File`]'s
/// Help says to fix access and run again, not to move it out of the lake.
pub const STORE_FAILED: &str =
    "(the store failed or refused the read: the file itself may be whole)";

/// What an error on a lake file ends with when one of its rows is of
/// another date than the `date=` it is filed under. [`Error::File`]'s Help
/// says to move it where its rows belong.
pub const MISFILED: &str = "(the file is filed under another date than its rows')";

/// What an error on a lake file ends with when the file is not in the store
/// once the read failed: a compaction deleted it (after putting the files
/// that hold its rows) while the run read it. [`Error::File`]'s Help says to
/// run again, with nothing to move.
pub const FILE_GONE: &str =
    "(the file is gone from the store now: it left the lake while the run read it, a compaction that merged it say)";

/// What an error on a lake file ends with when the read failed as if the
/// file were damaged, but reading it again through the store decodes:
/// the store failed the first read, most likely (parquet's reader keeps an
/// S3 5xx only as text, so its cause cannot be told by type). [`Error::File`]'s
/// Help says to run again before moving anything.
pub const READ_WHOLE_AGAIN: &str =
    "(read again through the store, every row of it decodes: the store most likely failed the first read)";

/// What an error on a lake file ends with when the file, read again
/// through the store, does not decode either: damaged ([`Error::File`]'s
/// Help says to move it out of the lake).
pub const DAMAGED_AGAIN: &str = "(read again through the store, it does not decode either)";

/// The error of a lake file DataFusion cannot read: a store's failure when
/// one is in its chain of causes ([`STORE_FAILED`]), else the file's.
pub(crate) fn unreadable(
    key: &str,
) -> impl Fn(datafusion::error::DataFusionError) -> Error + Copy + '_ {
    move |e| {
        let first: &(dyn std::error::Error + 'static) = &e;
        let store_failed = std::iter::successors(Some(first), |c| c.source()).any(is_store_cause);
        Error::File {
            key: key.to_owned(),
            why: if store_failed {
                // With the innermost cause: the store's own words (an S3
                // error code) name what to fix.
                format!(
                    "not readable: {} {STORE_FAILED}",
                    crate::output::http::excerpt(&ledger_s3::with_cause(&e))
                )
            } else {
                format!("not readable as Parquet: {e}")
            },
        }
    }
}

/// Whether `c`, a cause in the chain of an error, is a store's failure:
/// `object_store`'s own error, DataFusion's variant that wraps one, or a
/// permission denied.
fn is_store_cause(c: &(dyn std::error::Error + 'static)) -> bool {
    use datafusion::error::DataFusionError;
    c.is::<object_store::Error>()
        || c.downcast_ref::<DataFusionError>()
            .is_some_and(|d| matches!(d, DataFusionError::ObjectStore(_)))
        || c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_events::Event;
    use parquet::file::reader::FileReader;

    /// rev-s60-scale 1: a file is pruned by the keys its row groups' ranges
    /// hold, while their square stays small beside its rows (or they are few);
    /// else it is read whole, filtered by every key. A file whose ranges do
    /// not cover every row, or were read lossily, is judged by every key.
    #[test]
    fn a_file_is_pruned_by_its_own_keys_or_read_whole() {
        let group = |min: &str, max: &str, rows: i64| KeyGroup {
            min: min.into(),
            max: max.into(),
            rows,
        };
        let file = |rows: i64, key_groups: Vec<KeyGroup>| LakeFileInfo {
            key: "events/account/date=2026-01-01/i-0.parquet".into(),
            table: Table::Account,
            bytes: 0,
            rows,
            e_tag: None,
            columns: String::new(),
            key_groups,
        };
        let state = SessionContext::new().state();
        let of = |keys: &[String], f: &LakeFileInfo| match ByKey::new(keys, &state).of(f) {
            FileKeys::Prune(k) => Some(k.into_iter().map(str::to_owned).collect::<Vec<_>>()),
            FileKeys::Whole => None,
        };
        let keys: Vec<String> = ["z", "n", "b", "d", "b", "p"].map(String::from).to_vec();
        let two = file(1000, vec![group("a", "c", 500), group("m", "p", 500)]);
        assert_eq!(
            of(&keys, &two),
            Some(vec!["b".into(), "n".into(), "p".into()])
        );
        // None in its ranges: no row is read.
        let none = file(1000, vec![group("e", "f", 1000)]);
        assert_eq!(of(&keys, &none), Some(vec![]));
        // A row group without a range, or a bound read lossily: every key.
        let all: Vec<String> = ["b", "d", "n", "p", "z"].map(String::from).to_vec();
        let unranged = file(1000, vec![group("a", "c", 500)]);
        assert_eq!(of(&keys, &unranged), Some(all.clone()));
        let lossy = file(1000, vec![group("a\u{fffd}", "c", 1000)]);
        assert_eq!(of(&keys, &lossy), Some(all));
        // Many keys in range: pruned by them while their square, times
        // PRUNING_PLAN_ROWS, is within the file's rows, else read whole.
        let many: Vec<String> = (0..100).map(|i| format!("k{i:03}")).collect();
        let small = file(159_999, vec![group("k000", "k099", 159_999)]);
        assert_eq!(of(&many, &small), None);
        let large = file(160_000, vec![group("k000", "k099", 160_000)]);
        assert_eq!(of(&many, &large).map(|k| k.len()), Some(100));
        // A file whose ranges cannot say: pruned by every key, or read whole.
        assert_eq!(of(&many, &file(159_999, vec![])), None);
        assert_eq!(of(&many[..20], &file(1, vec![])).map(|k| k.len()), Some(20));
        // A short list always prunes.
        let twenty = file(1, vec![group("k000", "k099", 1)]);
        assert_eq!(of(&many[..20], &twenty).map(|k| k.len()), Some(20));
        assert_eq!(of(&many[..21], &twenty), None);
    }

    /// rev-s48-cli M1: a store's failure (an S3 5xx or 403, a permission
    /// denied), however DataFusion wraps it, is no damaged file: its Help
    /// says to fix access and run again, never to move the file out of the
    /// lake; a file that does not decode is damaged.
    #[test]
    fn a_stores_failure_is_not_called_a_damaged_file() {
        use datafusion::error::DataFusionError;
        let store = || object_store::Error::Generic {
            store: "S3",
            source: "HEAD 500 Internal Server Error".into(),
        };
        let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        for e in [
            DataFusionError::ObjectStore(Box::new(store())),
            DataFusionError::Context(
                "scan".into(),
                Box::new(DataFusionError::ObjectStore(Box::new(store()))),
            ),
            DataFusionError::External(Box::new(store())),
            DataFusionError::ParquetError(Box::new(parquet::errors::ParquetError::External(
                Box::new(store()),
            ))),
            DataFusionError::IoError(denied),
        ] {
            let shown = format!("{e}");
            let err = unreadable("events/a.parquet")(e).to_string();
            assert!(
                err.contains(STORE_FAILED) && err.contains("do not move the file"),
                "{shown}: {err}"
            );
            assert!(!err.contains("quarantine"), "{err}");
        }
        let damaged = DataFusionError::ParquetError(Box::new(
            parquet::errors::ParquetError::General("invalid page header".into()),
        ));
        let err = unreadable("events/a")(damaged).to_string();
        assert!(
            err.contains("not readable as Parquet") && err.contains("quarantine"),
            "{err}"
        );
        assert!(!err.contains(STORE_FAILED), "{err}");
    }

    /// rev-s53-resources L3: a file's read refused with an S3 code that
    /// says the run's identity changed (a session token that expired
    /// mid-run, a key revoked) gets the Help for that, still not to move
    /// the file; anything else keeps the store's-access Help.
    #[test]
    fn a_read_refused_for_a_named_reason_gets_that_reasons_help() {
        use datafusion::error::DataFusionError;
        let refused = |body: &str| {
            DataFusionError::ObjectStore(Box::new(object_store::Error::Generic {
                store: "S3",
                source: Box::new(std::io::Error::other(body.to_owned())),
            }))
        };
        let key = "events/account/date=2026-01-01/a.parquet";
        let expired = unreadable(key)(refused(
            "GET 400 Bad Request: <Error><Code>ExpiredToken</Code></Error>",
        ))
        .to_string();
        assert!(
            expired.contains("ExpiredToken")
                && expired.contains("do not move the file")
                && expired.contains("refresh AWS_SESSION_TOKEN"),
            "{expired}"
        );
        let revoked = unreadable(key)(refused(
            "GET 403 Forbidden: <Code>InvalidAccessKeyId</Code>",
        ))
        .to_string();
        assert!(
            revoked.contains("do not move the file") && revoked.contains("check AWS_ACCESS_KEY_ID"),
            "{revoked}"
        );
        // One object refused while the rest read (archived, its KMS key, a
        // policy; rev-s55-diff M1), a 5xx: the store's-access Help, not
        // "check the keys".
        for said in [
            "GET 403 Forbidden: <Code>InvalidObjectState</Code>",
            "GET 403 Forbidden: <Code>AccessDenied</Code><Message>KMS</Message>",
            "GET 403 Forbidden: <Code>RequestTimeTooSkewed</Code>",
            "GET 503 Service Unavailable",
        ] {
            let failed = unreadable(key)(refused(said)).to_string();
            assert!(
                failed.contains("the store's health")
                    && !failed.contains("AWS_SESSION_TOKEN")
                    && !failed.contains("check AWS_ACCESS_KEY_ID"),
                "{failed}"
            );
        }
    }

    fn metadata_of(bytes: Vec<u8>) -> parquet::file::metadata::ParquetMetaData {
        parquet::file::serialized_reader::SerializedFileReader::new(bytes::Bytes::from(bytes))
            .expect("a Parquet file")
            .metadata()
            .clone()
    }

    /// An account stream of `n` deposits, as ingest writes it.
    fn account_file(n: u64) -> Vec<u8> {
        let mut prev = ledger_events::GENESIS_HASH.to_owned();
        let rows: Vec<ledger_ingest::Row> = (1..=n)
            .map(|seq| {
                // On 2026-01-01, the date of the tests' keys.
                let at = 1_767_225_600_000 + seq as i64;
                let mut e = Event::new(Stream::Account, "acme.a-1", seq, "deposited", at, &prev);
                e.currency = Some("USD".into());
                e.amount = Some(5);
                e.balance_after = Some(5 * seq as i64);
                e.held_after = Some(0);
                e.overdraft_limit = Some(0);
                let e = e.seal();
                prev = e.hash.clone();
                ledger_ingest::Row {
                    event: e,
                    conflict: false,
                }
            })
            .collect();
        ledger_ingest::parquet_io::write_file(&rows).expect("written")
    }

    /// rev-s50-ops F1: a read that fails is judged again by the store's own
    /// word on the file. A file deleted while the run read it (a
    /// compaction that merged it) left the lake: run again, nothing to
    /// move. A failure that looked like a damaged file (an S3 5xx mid-scan
    /// reaches us only as parquet's text) is damaged only if the file, read
    /// again through the store, does not decode; a file that is damaged
    /// stays so. The scans' errors are looked at as the proof's top does.
    #[test]
    fn a_failed_read_is_judged_again_by_the_stores_word_on_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = |n: u8| {
            format!(
                "events/account/date=2026-01-01/i-{}.parquet",
                format!("{n:x}").repeat(32)
            )
        };
        let (whole, gone, damaged) = (key(1), key(2), key(3));
        std::fs::create_dir_all(dir.path().join(&whole).parent().unwrap()).unwrap();
        for k in [&whole, &gone, &damaged] {
            std::fs::write(dir.path().join(k), account_file(3)).unwrap();
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let lake = Lake::open(dir.path().to_str().unwrap()).unwrap();
            let files = lake.files(Table::Account).await.unwrap();
            let go = |_: Row<'_>| Ok(ControlFlow::Continue(()));
            let scan = |k: &str| {
                let file: Vec<LakeFileInfo> = files.iter().filter(|f| f.key == k).cloned().collect();
                let lake = &lake;
                async move {
                    match lake.scan_sorted_where(&file, Select::default(), go).await {
                        Err(e) => Err(lake.second_look(e).await),
                        read => read,
                    }
                }
            };
            // Deleted after the listing.
            std::fs::remove_file(dir.path().join(&gone)).unwrap();
            let err = scan(&gone).await.unwrap_err();
            let shown = err.to_string();
            assert!(shown.contains(FILE_GONE) && shown.contains("nothing needs moving"), "{shown}");
            assert!(!shown.contains("quarantine"), "{shown}");
            // Damaged after the listing: damaged it stays.
            let mut bytes = account_file(3);
            // The first column chunk's page header (after the magic).
            bytes[4..68].fill(0xff);
            std::fs::write(dir.path().join(&damaged), &bytes).unwrap();
            let err = scan(&damaged).await.unwrap_err();
            let shown = err.to_string();
            assert!(shown.contains("quarantine") && shown.contains(DAMAGED_AGAIN), "{shown}");
            // Confirmed damaged, it is not read again (rev-s50-diff F5).
            std::fs::remove_file(dir.path().join(&damaged)).unwrap();
            assert_eq!(lake.second_look(err).await.to_string(), shown);
            std::fs::write(dir.path().join(&damaged), &bytes).unwrap();
            assert!(!shown.contains(READ_WHOLE_AGAIN) && !shown.contains(FILE_GONE), "{shown}");
            // A store's failure seen as parquet's text, on a whole file.
            let failed = |key: &str| Error::File {
                key: key.to_owned(),
                why: "not readable as Parquet: Parquet error: Failed to fetch metadata: Generic S3 error: 500".into(),
            };
            let shown = lake.second_look(failed(&whole)).await.to_string();
            assert!(shown.contains(READ_WHOLE_AGAIN) && shown.contains("do not move the file yet"), "{shown}");
            let shown = lake.second_look(failed(&damaged)).await.to_string();
            assert!(shown.contains("quarantine") && !shown.contains(READ_WHOLE_AGAIN), "{shown}");
            // Looked at once is enough (the proof's top looks again).
            let once = lake.second_look(failed(&whole)).await.to_string();
            let twice = lake.second_look(lake.second_look(failed(&whole)).await).await;
            assert_eq!(twice.to_string(), once);
            // A keyed scan short of rows a proof found (a file deleted
            // while read gives none): gone, it left the lake; there, the
            // footer is blamed as before.
            let hid = |key: &str| crate::keyed::footer_hid(key, "a resumed night", 3);
            let shown = lake.second_look(hid(&gone)).await.to_string();
            assert!(shown.contains(FILE_GONE) && !shown.contains("restore the file"), "{shown}");
            let shown = lake.second_look(hid(&whole)).await.to_string();
            assert!(shown.contains(FOOTER_DISAGREES) && !shown.contains(FILE_GONE), "{shown}");
            // Errors not about reading a file are left as they are.
            let other = Error::Scan("x".into());
            assert!(matches!(lake.second_look(other).await, Error::Scan(_)));
            // The whole file still reads.
            assert_eq!(scan(&whole).await.unwrap(), [3]);
        });
    }

    /// rev-s47-lake H1: a file DataFusion reads apart from the listing that
    /// checked its footer, emptied in between (a copy onto it, say), gave
    /// no rows and no error; the scan of a whole file must give its
    /// footer's count.
    #[test]
    fn a_file_that_reads_fewer_rows_than_its_footer_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        // Two files: the second is read with the schema the first gave
        // (`schemas`), and an empty one then reads as no rows at all.
        let first = "events/account/date=2026-01-01/i-0123456789abcdef0123456789abcdef.parquet";
        let key = "events/account/date=2026-01-01/i-f123456789abcdef0123456789abcdef.parquet";
        let path = dir.path().join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(dir.path().join(first), account_file(3)).unwrap();
        std::fs::write(&path, account_file(3)).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let lake = Lake::open(dir.path().to_str().unwrap()).unwrap();
            let files = lake.files(Table::Account).await.unwrap();
            assert_eq!((files[1].key.as_str(), files[1].rows), (key, 3));
            let go = |_: Row<'_>| Ok(ControlFlow::Continue(()));
            let whole = Select::default();
            assert_eq!(
                lake.scan_sorted_where(&files, whole, go).await.unwrap(),
                [3, 3]
            );
            // A scan stopped on purpose is not judged.
            let stop = |_: Row<'_>| Ok(ControlFlow::Break(()));
            assert_eq!(
                lake.scan_sorted_where(&files, whole, stop).await.unwrap(),
                [0, 0]
            );
            std::fs::write(&path, b"").unwrap();
            match lake.scan_sorted_where(&files, whole, go).await {
                Err(Error::File { key: k, why }) => {
                    assert_eq!(k, key);
                    assert!(
                        why.contains("its footer counts 3 rows, but reading it whole gave 0"),
                        "{why}"
                    );
                    assert!(why.contains(ROWS_CHANGED), "{why}");
                }
                other => panic!("{other:?}"),
            }
            // Read by key (the footer's statistics choose what is read, and
            // the keyed notes judge it: `crate::keyed`): not judged here.
            let keys = ["acme.a-1".to_owned()];
            let by_key = Select {
                keys: Some(&keys),
                ..Select::default()
            };
            assert!(lake.scan_sorted_where(&files, by_key, go).await.is_ok());
            // But a file a keyed scan reads whole (rev-s47-session L8) is.
            let whole_set: FxSet<&str> = [key].into_iter().collect();
            let keyed_whole = Select {
                whole: Some(&whole_set),
                ..by_key
            };
            match lake.scan_sorted_where(&files, keyed_whole, go).await {
                Err(Error::File { key: k, why }) => {
                    assert_eq!(k, key);
                    assert!(why.contains("reading it whole gave 0"), "{why}");
                }
                other => panic!("{other:?}"),
            }
        });
    }

    #[test]
    fn a_footer_names_rows_columns_and_key_ranges() {
        let f = Footer::of(&metadata_of(account_file(3))).expect("a lake file");
        assert_eq!(f.rows, 3);
        assert!(
            f.columns.starts_with("v,event_id,stream,stream_key,seq,"),
            "{}",
            f.columns
        );
        assert_eq!(f.key_groups.len(), 1);
        assert_eq!(
            (f.key_groups[0].min.as_str(), f.key_groups[0].rows),
            ("acme.a-1", 3)
        );
    }

    /// The footer of `account_file(3)` with its file-level row count set to
    /// `rows` and its key-value metadata replaced by `kv` (when given).
    fn with_footer(
        rows: i64,
        kv: Option<Vec<parquet::file::metadata::KeyValue>>,
    ) -> parquet::file::metadata::ParquetMetaData {
        use parquet::file::metadata::{FileMetaData, ParquetMetaData};
        let meta = metadata_of(account_file(3));
        let fm = meta.file_metadata();
        let fm = FileMetaData::new(
            fm.version(),
            rows,
            fm.created_by().map(str::to_owned),
            kv.or_else(|| fm.key_value_metadata().cloned()),
            fm.schema_descr_ptr(),
            None,
        );
        ParquetMetaData::new(fm, meta.row_groups().to_vec())
    }

    #[test]
    fn a_footer_that_counts_no_rows_or_other_rows_than_its_groups_is_refused() {
        assert!(Footer::of(&with_footer(3, None)).is_ok());
        for rows in [0, 2, 4, -1] {
            let why = Footer::of(&with_footer(rows, None))
                .err()
                .unwrap_or_default();
            assert!(
                why.contains(&format!("it counts {rows} rows and its row groups 3")),
                "{rows}: {why:?}"
            );
        }
    }

    /// rev-s47-lake L5: row groups that add up to the file's count only
    /// through a negative group, or through a sum that wraps, are refused.
    #[test]
    fn a_footer_whose_groups_add_up_only_by_a_negative_or_a_wrap_is_refused() {
        use parquet::file::metadata::ParquetMetaData;
        let with_groups = |file_rows: i64, groups: &[i64]| {
            let meta = with_footer(file_rows, None);
            let group = meta.row_groups()[0].clone();
            let groups = groups
                .iter()
                .map(|&n| {
                    group
                        .clone()
                        .into_builder()
                        .set_num_rows(n)
                        .build()
                        .unwrap()
                })
                .collect();
            ParquetMetaData::new(meta.file_metadata().clone(), groups)
        };
        assert!(Footer::of(&with_groups(3, &[1, 2])).is_ok());
        for (rows, groups, shown) in [
            (3, &[5, -2][..], "5 + -2"),
            (3, &[3, 0][..], "3 + 0"),
            (
                1,
                &[i64::MAX, i64::MAX, 3][..],
                "9223372036854775807 + 9223372036854775807 + 3",
            ),
        ] {
            let why = Footer::of(&with_groups(rows, groups))
                .err()
                .unwrap_or_default();
            assert!(
                why.contains(&format!(
                    "it counts {rows} rows and its row groups {shown};"
                )),
                "{groups:?}: {why:?}"
            );
        }
    }

    #[test]
    fn a_footer_whose_arrow_schema_does_not_decode_is_refused_not_a_panic() {
        let meta = metadata_of(account_file(3));
        let mut kv = meta.file_metadata().key_value_metadata().cloned().unwrap();
        let arrow = kv
            .iter_mut()
            .find(|e| e.key == "ARROW:schema")
            .expect("an Arrow schema");
        // The base64 of an IPC message whose bytes are garbage.
        arrow.value = Some("/////wAAAAA=".into());
        let why = Footer::of(&with_footer(3, Some(kv.clone())))
            .err()
            .unwrap_or_default();
        assert!(why.contains("its Arrow schema"), "{why:?}");
        // Every byte of the real schema's encoding damaged in turn: refused
        // or decoded, never a panic past `Footer::of` (over a hundred of
        // them make the decoder panic).
        let good = meta.file_metadata().key_value_metadata().unwrap().clone();
        let real = good
            .iter()
            .find(|e| e.key == "ARROW:schema")
            .unwrap()
            .value
            .clone()
            .unwrap();
        for i in 0..real.len() {
            let mut b = real.clone().into_bytes();
            b[i] = if b[i] == b'A' { b'/' } else { b'A' };
            let mut kv = good.clone();
            kv.iter_mut()
                .find(|e| e.key == "ARROW:schema")
                .unwrap()
                .value = Some(String::from_utf8(b).unwrap());
            let _ = Footer::of(&with_footer(3, Some(kv)));
        }
    }

    #[test]
    fn a_footer_without_the_lake_layout_or_of_another_is_refused_by_name() {
        let batch = datafusion::arrow::record_batch::RecordBatch::try_from_iter([(
            "seq",
            std::sync::Arc::new(datafusion::arrow::array::Int64Array::from(vec![1]))
                as datafusion::arrow::array::ArrayRef,
        )])
        .unwrap();
        let write = |layout: Option<&str>| {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_key_value_metadata(layout.map(|l| {
                    vec![parquet::file::metadata::KeyValue::new(
                        LAYOUT_METADATA_KEY.to_owned(),
                        l.to_owned(),
                    )]
                }))
                .build();
            let mut out = Vec::new();
            let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props))
                .unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            metadata_of(out)
        };
        let none = Footer::of(&write(None)).err().expect("refused");
        assert!(
            none.contains("has no ledger.lake.layout metadata"),
            "{none}"
        );
        let other = Footer::of(&write(Some("lake-v99"))).err().expect("refused");
        assert!(
            other.contains("\"lake-v99\"") && other.ends_with(LAYOUT_UNKNOWN),
            "{other}"
        );
    }
}
