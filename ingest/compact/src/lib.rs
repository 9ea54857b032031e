//! Compaction of the event lake (docs/LAKE.md, "Compaction").
//!
//! Merges one partition's files (`events/{table}/date={d}/`, both layers) into
//! `c-` files sorted by stream_key and seq, of at most `PARQUET_FILE_ROWS_MAX`
//! rows, with duplicates removed and every conflicting version kept.
//!
//! What it guarantees, under a crash at any point:
//!
//! ```text
//! list ─▶ read all (any damaged file: stop, change nothing; rows past
//!         SPILL_RUN_ROWS are sorted and spilled to local disk, `merge`)
//!      ─▶ merge (sort, dedup), put each output as it is cut, confirm each with HEAD
//!      ─▶ put the manifest (every version read, every output as listed)
//!      ─▶ only then delete the inputs that are not outputs
//! ```
//!
//! - The manifest (`ledger_ingest::manifest`) lets a reader that proved a file
//!   now gone tell "compaction replaced it" from "it was lost": each input is
//!   read only in the version listed (a conditional GET on its ETag), and a
//!   manifest is never overwritten with other content nor deleted.
//! - Every output is durable (put returned and HEAD sees its full size) before
//!   the first input is deleted, so no event is ever only in a deleted file.
//! - Between the puts and the last delete, inputs and outputs coexist; they
//!   hold the same events, and readers dedup by (event_id, hash), so a reader
//!   at any moment computes the same answer.
//! - Running again after a crash converges: the outputs are a pure function of
//!   the rows, so the same `c-` keys and bytes come out, and the leftover
//!   inputs are deleted. A file written by ingest after the listing is not
//!   touched; a file deleted by a concurrent compaction is not an error.
//!
//! It needs atomic puts (R2/S3 puts are; `object_store`'s local file system
//! writes a temporary file and renames it). On a local directory a put is not
//! fsynced: a power loss (not a process crash) between put and delete could
//! lose the output after the inputs are gone; R2/S3 is the production store.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use ledger_ingest::{
    dedup, manifest_prefix, parse_object_key, read_lake_file_each, Conflict, FileVersion,
    LakeError, Manifest, Partition, Row, Table, LAKE_EVENTS_PREFIX, PARQUET_FILE_ROWS_MAX,
};
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt, PutPayload};

pub mod merge;

pub use merge::{MERGE_FAN_IN, SPILL_RUN_ROWS};

/// The largest manifest read to find whether a partition is as a
/// compaction left it: one line per file, so 64 MiB is ~400,000 files,
/// four times `COMPACT_INPUT_FILES_MAX`.
pub const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// Files one compaction reads.
pub const COMPACT_INPUT_FILES_MAX: usize = 100_000;

/// Timeout of one S3 request, body included (one lake file: tens of MB at
/// most). Connect timeout and retries are [`ledger_s3`]'s, as reconcile's.
pub const S3_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The lake: an object store and a human-readable name for messages.
#[derive(Debug, Clone)]
pub struct Lake {
    pub store: Arc<dyn ObjectStore>,
    pub name: String,
    /// A local lake's directory: its listing passes over a dangling
    /// symbolic link, which [`Lake::lake_files`] refuses by name.
    pub local_root: Option<std::path::PathBuf>,
}

impl Lake {
    /// `s3://bucket[/prefix]` (credentials and endpoint from the standard
    /// `AWS_*` variables: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_ENDPOINT_URL` or `AWS_ENDPOINT` — for R2
    /// `https://<account>.r2.cloudflarestorage.com` —, `AWS_REGION` (default
    /// `auto`, what R2 expects), `AWS_ALLOW_HTTP`), or a local directory,
    /// which must exist. S3 requests time out ([`ledger_s3::CONNECT_TIMEOUT`],
    /// [`S3_REQUEST_TIMEOUT`]) and retries are bounded ([`ledger_s3::MAX_RETRIES`]
    /// within [`ledger_s3::retry_timeout`]): an unreachable endpoint is an error, not
    /// a hang.
    pub fn open(location: &str) -> Result<Lake, CompactError> {
        let store: Arc<dyn ObjectStore> = if let Some(rest) = location.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(CompactError::Usage(format!(
                    "{location:?} names no bucket\nHelp: use s3://BUCKET or s3://BUCKET/PREFIX"
                )));
            }
            let prefix = prefix.trim_matches('/');
            ledger_s3::check_prefix(location, prefix).map_err(CompactError::Usage)?;
            let s3 = ledger_s3::store(location, bucket, S3_REQUEST_TIMEOUT)
                .map_err(CompactError::Usage)?;
            if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(object_store::prefix::PrefixStore::new(s3, prefix))
            }
        } else {
            let dir = std::path::Path::new(location);
            if !dir.is_dir() {
                return Err(CompactError::Usage(format!(
                    "lake directory {location} does not exist\nHelp: pass --lake DIR of an existing lake (the default is .lake), or s3://BUCKET/PREFIX"
                )));
            }
            Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| CompactError::Usage(format!("cannot open {location}: {e}")))?,
            )
        };
        let local_root = (!location.starts_with("s3://")).then(|| location.into());
        Ok(Lake {
            store,
            name: location.to_owned(),
            local_root,
        })
    }

    /// A lake over any store (tests use this with a local directory).
    pub fn from_store(store: Arc<dyn ObjectStore>, name: &str) -> Lake {
        Lake {
            store,
            name: name.to_owned(),
            local_root: None,
        }
    }

    /// Every lake file under `prefix` as the listing shows it (key, size,
    /// ETag), sorted by key: the versions a manifest names. Other keys are
    /// ignored.
    pub async fn lake_files(&self, prefix: &str) -> Result<Vec<FileVersion>, CompactError> {
        self.unlisted_local(prefix)?;
        let path = Path::from(prefix);
        let metas: Vec<_> = self
            .store
            .list(Some(&path))
            .try_collect()
            .await
            .map_err(|e| CompactError::store("list", prefix, e))?;
        let mut files: Vec<FileVersion> = metas
            .into_iter()
            .map(|m| FileVersion {
                key: m.location.to_string(),
                size: m.size,
                e_tag: m.e_tag,
            })
            .filter(|f| parse_object_key(&f.key).is_some())
            .collect();
        files.sort();
        Ok(files)
    }

    /// For a local lake, an error naming the first entry under `prefix`
    /// (`events`, a table's directory or a partition's) the listing would
    /// pass over: a symbolic link whose target is missing (an unmounted
    /// share) or may not be opened. Without it a day on such a share would
    /// be "nothing to do", or compacted without the files on it.
    fn unlisted_local(&self, prefix: &str) -> Result<(), CompactError> {
        let Some(root) = &self.local_root else {
            return Ok(());
        };
        let rest = prefix
            .trim_end_matches('/')
            .strip_prefix(LAKE_EVENTS_PREFIX);
        let mut parts = rest.unwrap_or_default().trim_start_matches('/').split('/');
        let (table, only) = (parts.next().and_then(Table::parse), parts.next());
        let tables = table.map_or(Table::ALL.to_vec(), |t| vec![t]);
        for table in tables {
            let found = ledger_s3::local::unreadable_entry(root, table.as_str(), only, |key| {
                parse_object_key(key).is_some()
            });
            if let Some((key, e)) = found {
                return Err(CompactError::Store {
                    op: "list",
                    key,
                    why: ledger_s3::local::why_unreadable(&e),
                });
            }
        }
        Ok(())
    }

    /// For a local lake, removes from `partition`'s directory the partial
    /// writes a killed run left: `object_store`'s local put writes a lake
    /// file as `KEY#N` and renames it, so a kill between the two leaves
    /// `KEY#N`, which no reader takes and nothing else removes. Only those
    /// untouched for an hour (a writer may be at work on one). Returns how
    /// many were removed.
    pub fn remove_stale_partials(&self, partition: &Partition) -> usize {
        let Some(root) = &self.local_root else {
            return 0;
        };
        let dir = root.join(partition.prefix());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let partial = name.rsplit_once('#').is_some_and(|(file, n)| {
                !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && parse_object_key(&format!("{}{file}", partition.prefix())).is_some()
            });
            let idle = ledger_s3::local::untouched_for(&e, std::time::Duration::from_secs(3600));
            if partial && idle && std::fs::remove_file(e.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// The partitions of `tables` (every table's when empty) on `dates`
    /// (every date when empty) that hold at least one lake file, listing
    /// only their prefixes: a run for one day of one table pays for that
    /// day's listing, not the lake's (on R2 a list request names a thousand
    /// keys at most).
    pub async fn partitions_of(
        &self,
        tables: &[Table],
        dates: &[String],
    ) -> Result<Vec<Partition>, CompactError> {
        let prefixes: Vec<String> = match (tables.is_empty(), dates.is_empty()) {
            (true, _) => vec![LAKE_EVENTS_PREFIX.to_owned()],
            (false, true) => tables
                .iter()
                .map(|t| format!("{LAKE_EVENTS_PREFIX}/{}", t.as_str()))
                .collect(),
            (false, false) => tables
                .iter()
                .flat_map(|t| {
                    dates
                        .iter()
                        .map(move |d| format!("{LAKE_EVENTS_PREFIX}/{}/date={d}", t.as_str()))
                })
                .collect(),
        };
        let mut set = BTreeSet::new();
        for prefix in prefixes {
            set.extend(
                self.lake_files(&prefix)
                    .await?
                    .iter()
                    .filter_map(|f| parse_object_key(&f.key).map(|p| p.partition))
                    .filter(|p| dates.is_empty() || dates.contains(&p.date)),
            );
        }
        Ok(set.into_iter().collect())
    }

    /// The partitions that hold at least one lake file, optionally of one table.
    pub async fn partitions(&self, table: Option<Table>) -> Result<Vec<Partition>, CompactError> {
        self.partitions_of(table.as_slice(), &[]).await
    }

    /// The bytes of `file`, only in the version listed (a conditional GET
    /// on its ETag): the manifest names the versions compaction read.
    pub async fn read_version(&self, file: &FileVersion) -> Result<Bytes, CompactError> {
        let key = file.key.as_str();
        let path = Path::from(key);
        let options = GetOptions::new().with_if_match(file.e_tag.clone());
        let got = self
            .store
            .get_opts(&path, options)
            .await
            .map_err(|e| match e {
                object_store::Error::Precondition { .. } => CompactError::Store {
                    op: "get",
                    key: key.to_owned(),
                    why: "the file changed between the listing and the read".into(),
                },
                e => CompactError::store("get", key, e),
            })?;
        got.bytes()
            .await
            .map_err(|e| CompactError::store("get", key, e))
    }

    /// The lake files of one partition as listed, bounded by
    /// [`COMPACT_INPUT_FILES_MAX`].
    async fn partition_files(
        &self,
        partition: &Partition,
    ) -> Result<Vec<FileVersion>, CompactError> {
        let files = self.lake_files(&partition.prefix()).await?;
        if files.len() > COMPACT_INPUT_FILES_MAX {
            return Err(CompactError::TooLarge(format!(
                "{} has {} files, more than COMPACT_INPUT_FILES_MAX = {COMPACT_INPUT_FILES_MAX}",
                partition.prefix(),
                files.len()
            )));
        }
        Ok(files)
    }

    /// The key of a manifest whose outputs are exactly `listed` (the
    /// partition's files as listed now, sorted), each in the version it
    /// wrote, in the current layout ([`Manifest::left_as`]): the partition
    /// is as that compaction left it. `None` if no manifest says so: a
    /// manifest that cannot be read or parsed says nothing, and nor does a
    /// prefix that cannot be listed (the partition is then read, which
    /// says what is wrong with the store, if anything). The newest
    /// manifests are read first (the one a skip needs is nearly always the
    /// partition's last), and none larger than [`MANIFEST_BYTES_MAX`].
    async fn compacted_by(&self, partition: &Partition, listed: &[FileVersion]) -> Option<String> {
        // Compaction writes only c- files: a partition holding any other
        // (an ingest file) is no compaction's output, and its manifests
        // need not be read.
        let compacted = |f: &FileVersion| {
            parse_object_key(&f.key).is_some_and(|k| k.layer == ledger_ingest::FileLayer::Compacted)
        };
        if listed.is_empty() || !listed.iter().all(compacted) {
            return None;
        }
        let prefix = manifest_prefix(partition);
        let mut metas: Vec<_> = self
            .store
            .list(Some(&Path::from(prefix.as_str())))
            .try_collect()
            .await
            .ok()?;
        metas.retain(|m| m.size <= MANIFEST_BYTES_MAX);
        metas.sort_by_key(|m| std::cmp::Reverse(m.last_modified));
        for meta in metas {
            let key = meta.location.to_string();
            let Ok(got) = self.store.get(&meta.location).await else {
                continue;
            };
            let Ok(bytes) = got.bytes().await else {
                continue;
            };
            if Manifest::parse(&key, &bytes).is_ok_and(|m| m.left_as(listed)) {
                return Some(key);
            }
        }
        None
    }

    /// Every row of every lake file of one partition, with the key it came
    /// from, and the versions read (as listed; a file rewritten between the
    /// listing and its read is an error, see [`Lake::read_version`]). All
    /// in memory: for checks of a lake (the tests' view of it), not for
    /// compaction, which streams ([`merge`]).
    pub async fn read_partition(
        &self,
        partition: &Partition,
    ) -> Result<(Vec<FileVersion>, Vec<(String, Row)>), CompactError> {
        let files = self.partition_files(partition).await?;
        let mut rows = Vec::new();
        for file in &files {
            let (key, bytes) = (&file.key, self.read_version(file).await?);
            read_lake_file_each(key, bytes, |_, got| {
                rows.extend(got.into_iter().map(|r| (key.clone(), r)));
                Ok::<(), CompactError>(())
            })?;
        }
        Ok((files, rows))
    }
}

/// Where a compaction stops early, to test crash safety: the state it leaves
/// is exactly what a crash at that point leaves (nothing runs in between).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopAt {
    #[default]
    Never,
    /// Outputs written and confirmed, no input deleted yet.
    AfterWrite,
    /// Outputs written, exactly one input deleted.
    AfterFirstDelete,
    /// Every input read (the runs spilled), nothing written: wait there
    /// for good, so that a test can signal the process mid-compaction.
    HoldAfterRead,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Report what would be done; write and delete nothing.
    pub dry_run: bool,
    pub stop_at: StopAt,
    /// Where a partition's rows past [`SPILL_RUN_ROWS`] are spilled (a
    /// temporary directory is made in it and removed after); `None`: the
    /// system's temporary directory (`$TMPDIR`).
    pub spill_dir: Option<PathBuf>,
    /// Rows held in memory before a run is spilled; `None`:
    /// [`SPILL_RUN_ROWS`] (tests make it small to merge many runs).
    pub run_rows: Option<usize>,
    /// Runs merged side by side at most; `None`: [`MERGE_FAN_IN`] (tests
    /// make it small to merge runs of runs).
    pub fan_in: Option<usize>,
    /// Once set (by a signal handler), the merge stops where it is with
    /// [`CompactError::Stopped`]: its work between two waits on the store
    /// can take minutes. The lake is as a crash there would leave it.
    pub stop: Option<&'static std::sync::atomic::AtomicBool>,
    /// Read and merge a partition even when a manifest shows it is as a
    /// compaction left it (which is otherwise not read again): checks
    /// every row of its files once more.
    pub recheck: bool,
}

/// What one partition's compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReport {
    pub partition: Partition,
    pub input_files: usize,
    pub input_rows: usize,
    pub outputs: Vec<String>,
    pub output_rows: usize,
    pub duplicates_removed: usize,
    pub conflicts: Vec<Conflict>,
    /// The key of the manifest written (docs/LAKE.md, "Compaction
    /// manifests"); `None` when nothing was rewritten.
    pub manifest: Option<String>,
    pub deleted: usize,
    /// The partition already was exactly its compacted form.
    pub already_compact: bool,
    pub stopped_early: bool,
    /// Partial writes a killed run left in the partition's directory (a
    /// local lake's `KEY#N`, untouched for an hour), removed.
    pub partials_removed: usize,
    /// The manifest that shows the partition is as a compaction left it,
    /// when it was not read for that reason (`input_rows` is then 0).
    pub unread_as: Option<String>,
}

impl PartitionReport {
    /// The report of a compaction of `partition`'s `input_files` files
    /// before it has done anything.
    fn begun(partition: &Partition, input_files: usize) -> PartitionReport {
        PartitionReport {
            partition: partition.clone(),
            input_files,
            input_rows: 0,
            outputs: Vec::new(),
            output_rows: 0,
            duplicates_removed: 0,
            conflicts: Vec::new(),
            manifest: None,
            deleted: 0,
            already_compact: false,
            stopped_early: false,
            partials_removed: 0,
            unread_as: None,
        }
    }
}

impl std::fmt::Display for PartitionReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let partials = match self.partials_removed {
            0 => String::new(),
            n => format!(", {n} partial write(s) of a killed run removed"),
        };
        if let (true, Some(manifest)) = (self.already_compact, &self.unread_as) {
            return write!(
                f,
                "{}: already compact ({} files as {manifest} left them; not read again, --recheck reads them){partials}",
                self.partition.prefix(),
                self.input_files,
            );
        }
        if self.already_compact {
            let recorded = match &self.manifest {
                Some(key) => format!(", recorded in {key}"),
                None => String::new(),
            };
            return write!(
                f,
                "{}: already compact ({} files, {} rows){recorded}{partials}",
                self.partition.prefix(),
                self.input_files,
                self.input_rows
            );
        }
        write!(
            f,
            "{}: {} files ({} rows) -> {} files ({} rows), {} duplicates removed, {} conflicts kept, {} inputs deleted",
            self.partition.prefix(),
            self.input_files,
            self.input_rows,
            self.outputs.len(),
            self.output_rows,
            self.duplicates_removed,
            self.conflicts.len(),
            self.deleted
        )?;
        if let Some(key) = &self.manifest {
            write!(f, ", recorded in {key}")?;
        }
        write!(f, "{partials}")?;
        if self.stopped_early {
            write!(f, " (stopped early)")?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub enum CompactError {
    /// Bad arguments or configuration.
    Usage(String),
    /// The store refused an operation.
    Store {
        op: &'static str,
        key: String,
        why: String,
    },
    /// An input file is damaged: the partition is left untouched.
    Damaged(LakeError),
    /// A bound was exceeded.
    TooLarge(String),
    /// The local disk a merge spills to failed (full, not writable), while
    /// the inputs were read: nothing in the lake changed.
    Spill(String),
    /// A run spilled to local disk could not be read back, or reads back
    /// other rows than were written: outputs may have been put, no input
    /// was deleted.
    SpillRead(String),
    /// A put returned but the object is not there in full. `removed`: the
    /// object under the key was deleted (a short one would be a damaged
    /// lake file, which the next compaction and every reconcile refuse).
    NotDurable {
        key: String,
        expected: usize,
        found: Option<u64>,
        removed: bool,
    },
    /// [`Options::stop`] was set: the merge stopped where it was.
    Stopped,
}

impl CompactError {
    /// The error, naming the partition it stopped (the lake's own errors
    /// name a key already).
    fn in_partition(self, partition: &Partition) -> CompactError {
        let prefix = partition.prefix();
        let at = |m: String| {
            if m.starts_with(&prefix) {
                m
            } else {
                format!("{prefix}: {m}")
            }
        };
        match self {
            CompactError::TooLarge(m) => CompactError::TooLarge(at(m)),
            CompactError::Spill(m) => CompactError::Spill(at(m)),
            CompactError::SpillRead(m) => CompactError::SpillRead(at(m)),
            other => other,
        }
    }

    /// The store's error with its innermost cause, which its own words
    /// ("error sending request") do not name: a refused connection, an
    /// untrusted certificate. Cut and escaped: the body an endpoint's error
    /// quotes (a proxy's HTML page) cannot write lines of the job's log.
    fn store(op: &'static str, key: &str, e: object_store::Error) -> CompactError {
        let why = ledger_s3::text::excerpt(&ledger_s3::with_cause(&e));
        CompactError::Store {
            op,
            key: key.to_owned(),
            why,
        }
    }
}

impl std::fmt::Display for CompactError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompactError::Usage(m) => write!(f, "{m}"),
            CompactError::Store { op, key, why } => write!(
                f,
                "{op} {key} failed: {why}\nHelp: check the lake location and credentials{}; compaction is safe to re-run",
                // A local lake's write past the job's file-size limit
                // (rev-s51-diff L3).
                if why.contains("File too large") {
                    ", and the job's file-size limit (ulimit -f)"
                } else {
                    ""
                }
            ),
            CompactError::Damaged(e) => write!(f, "{e}\n(the partition was left as it was)"),
            CompactError::TooLarge(m) => write!(f, "{m}"),
            CompactError::Spill(m) => write!(
                f,
                "spilling rows to local disk failed: {m}\nHelp: a partition of more than {SPILL_RUN_ROWS} rows is sorted in runs on local disk, about the partition's size in Parquet; give compaction a writable directory with room (--spill-dir, or TMPDIR); nothing in the lake was changed"
            ),
            CompactError::SpillRead(m) => write!(
                f,
                "reading back a run spilled to local disk failed: {m}\nHelp: the local disk lost or changed it (or too many files are open: one per run); outputs put so far hold copies of the inputs' events, and no input was deleted, so the lake reads the same; fix the disk (--spill-dir) and re-run, which converges"
            ),
            CompactError::NotDurable {
                key,
                expected,
                found,
                removed,
            } => {
                let shown = found.map_or("no object".to_owned(), |n| format!("{n} bytes"));
                write!(f, "{key}: put returned but the store shows {shown}, not {expected} bytes; no input was deleted")?;
                if *removed {
                    write!(f, " and the short object was removed\nHelp: re-run compaction (check the store, or what stands between it and this host, if it happens again)")
                } else if found.is_some() {
                    write!(f, "\nHelp: the object under {key} is short (its key is its whole content's digest): delete it, then re-run compaction")
                } else {
                    write!(f, "\nHelp: nothing was deleted (the store did not confirm the object; another compaction may rely on it); re-run compaction, which converges")
                }
            }
            CompactError::Stopped => write!(
                f,
                "stopped on request mid-merge; the lake is as a crash there would leave it\nHelp: re-run compaction, which converges"
            ),
        }
    }
}

impl std::error::Error for CompactError {}

impl From<LakeError> for CompactError {
    fn from(e: LakeError) -> CompactError {
        CompactError::Damaged(e)
    }
}

/// Where a partition's compaction is, for a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Inputs read and checked so far (of `files`), their rows, and the
    /// runs spilled.
    Reading {
        files_read: usize,
        files: usize,
        rows: usize,
        runs: usize,
    },
    /// A partition of more than [`MERGE_FAN_IN`] runs merges runs in a row
    /// into longer ones first: runs merged so far, of `runs` spilled.
    Merging { merged: usize, runs: usize },
    /// Outputs cut (and put, unless a dry run) so far, and their rows, of
    /// the `rows` read.
    Writing {
        outputs: usize,
        rows_out: usize,
        rows: usize,
    },
}

/// The error a partition's read ended with, unless it is a newer writer's
/// file and one of the files after it is damaged: then that damage. The
/// run's exit code tells the two apart (1 damaged, what the nightly job
/// pages on as tampering; 2 upgrade ledger-compact), so a partition with
/// both is damaged whichever file comes first. The rest are only read and
/// checked, in this rare case (one at a time); nothing more is merged.
async fn damage_over_newer(lake: &Lake, rest: &[FileVersion], first: CompactError) -> CompactError {
    fn newer(e: &CompactError) -> bool {
        matches!(e, CompactError::Damaged(e) if e.kind.is_newer())
    }
    if !newer(&first) {
        return first;
    }
    for file in rest {
        let checked = match lake.read_version(file).await {
            Ok(bytes) => read_lake_file_each(&file.key, bytes, |_, _| Ok::<(), CompactError>(())),
            Err(e) => Err(e),
        };
        // Damage replaces it; a store's failure to read one of the rest
        // does not (it says nothing of the file, and as this partition's
        // error it would end the run before the other partitions).
        match checked {
            Err(e @ CompactError::Damaged(_)) if !newer(&e) => return e,
            _ => {}
        }
    }
    first
}

/// Compacts one partition (see the module docs for the guarantees).
pub async fn compact_partition(
    lake: &Lake,
    partition: &Partition,
    options: &Options,
) -> Result<PartitionReport, CompactError> {
    compact_partition_with_progress(lake, partition, options, |_| {}).await
}

/// [`compact_partition`], telling `progress` after each input read and
/// each output cut.
pub async fn compact_partition_with_progress(
    lake: &Lake,
    partition: &Partition,
    options: &Options,
    progress: impl FnMut(Progress),
) -> Result<PartitionReport, CompactError> {
    compact(lake, partition, options, progress)
        .await
        .map_err(|e| e.in_partition(partition))
}

async fn compact(
    lake: &Lake,
    partition: &Partition,
    options: &Options,
    mut progress: impl FnMut(Progress),
) -> Result<PartitionReport, CompactError> {
    let inputs = lake.partition_files(partition).await?;
    let input_keys: Vec<String> = inputs.iter().map(|f| f.key.clone()).collect();
    let mut report = PartitionReport::begun(partition, inputs.len());
    if inputs.is_empty() {
        // A partition emptied since it was listed (files moved out during the
        // run), or named by a caller: nothing to compact, and no manifest of
        // nothing (rev-s57-ingest 7).
        report.already_compact = true;
        return Ok(report);
    }
    if !options.recheck {
        if let Some(manifest) = lake.compacted_by(partition, &inputs).await {
            if !options.dry_run {
                report.partials_removed = lake.remove_stale_partials(partition);
            }
            report.outputs = input_keys;
            report.already_compact = true;
            report.unread_as = Some(manifest);
            return Ok(report);
        }
    }
    let run_rows = options.run_rows.unwrap_or(SPILL_RUN_ROWS);
    let mut merge = merge::Merge::new(run_rows, options.spill_dir.clone())
        .with_fan_in(options.fan_in.unwrap_or(MERGE_FAN_IN))
        .with_stop(options.stop);
    // Every input read and checked before anything is written: a damaged
    // file stops here, and only the spill directory (removed) was touched.
    for (i, file) in inputs.iter().enumerate() {
        let bytes = lake.read_version(file).await?;
        let source = u32::try_from(i).expect("COMPACT_INPUT_FILES_MAX fits a u32");
        if let Err(e) = read_lake_file_each(&file.key, bytes, |_, got| merge.push(source, got)) {
            return Err(damage_over_newer(lake, &inputs[i + 1..], e).await);
        }
        progress(Progress::Reading {
            files_read: i + 1,
            files: inputs.len(),
            rows: merge.rows(),
            runs: merge.runs(),
        });
    }
    report.input_rows = merge.rows();
    if options.stop_at == StopAt::HoldAfterRead {
        std::future::pending::<()>().await;
    }
    let mut merged =
        merge.finish_with_progress(partition, PARQUET_FILE_ROWS_MAX, |merged, runs| {
            progress(Progress::Merging { merged, runs })
        })?;
    if !options.dry_run {
        report.partials_removed = lake.remove_stale_partials(partition);
    }

    // 1. Every output durable before anything is deleted, each put as soon
    // as it is cut (one output in memory at a time). An output under an
    // input's key holds the same bytes already (a key is its content's).
    let mut sizes = Vec::new();
    while let Some(f) = merged.next_file()? {
        let size = f.bytes.len();
        if !options.dry_run && !input_keys.contains(&f.key) {
            put_durably(lake, &f.key, f.bytes).await?;
        }
        sizes.push((f.key, size));
        report.output_rows += f.rows;
        progress(Progress::Writing {
            outputs: sizes.len(),
            rows_out: report.output_rows,
            rows: report.input_rows,
        });
    }
    sizes.sort();
    let outputs: Vec<String> = sizes.iter().map(|(k, _)| k.clone()).collect();
    report.outputs = outputs.clone();
    report.duplicates_removed = merged.duplicates();
    report.conflicts = merged.conflicts(&input_keys);
    drop(merged);
    report.already_compact = input_keys == outputs;
    if report.already_compact && !options.dry_run {
        // Compact, but no manifest says so (compacted before manifests
        // recorded their layout, or rechecked): one that does, so the next
        // run need not read it. It lists no inputs: it replaced nothing, and
        // a reader asking what became of a gone file must not find it there.
        // (Not on a store without ETags, where no manifest can say so.)
        let tagged = inputs.iter().all(|f| f.e_tag.is_some());
        let known = options.recheck && lake.compacted_by(partition, &inputs).await.is_some();
        if tagged && !known {
            let manifest = Manifest::of_compaction(partition, Vec::new(), inputs);
            let key = manifest.key();
            put_durably(lake, &key, manifest.to_json()).await?;
            report.manifest = Some(key);
        }
        return Ok(report);
    }
    if options.dry_run {
        return Ok(report);
    }

    // 2. The manifest: every version read and every output as the store
    // lists it now (the versions a reader's checkpoint will hold).
    let listed = lake.lake_files(&partition.prefix()).await?;
    let written: Vec<FileVersion> = listed
        .into_iter()
        .filter(|f| outputs.contains(&f.key))
        .collect();
    if let Some((key, size)) = sizes
        .iter()
        .find(|(key, _)| !written.iter().any(|w| &w.key == key))
    {
        return Err(not_durable(lake, key, *size, None).await);
    }
    let manifest = Manifest::of_compaction(partition, inputs, written);
    let key = manifest.key();
    put_durably(lake, &key, manifest.to_json()).await?;
    report.manifest = Some(key);
    if options.stop_at == StopAt::AfterWrite {
        report.stopped_early = true;
        return Ok(report);
    }

    // 3. Then the inputs that are not outputs.
    for key in input_keys.iter().filter(|k| !outputs.contains(k)) {
        match lake.store.delete(&Path::from(key.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => report.deleted += 1,
            Err(e) => return Err(CompactError::store("delete", key, e)),
        }
        if options.stop_at == StopAt::AfterFirstDelete {
            report.stopped_early = true;
            return Ok(report);
        }
    }
    Ok(report)
}

/// Puts `bytes` at `key` and confirms with HEAD that the store holds all of it.
async fn put_durably(lake: &Lake, key: &str, bytes: Vec<u8>) -> Result<(), CompactError> {
    let path = Path::from(key);
    let expected = bytes.len();
    lake.store
        .put(&path, PutPayload::from(bytes))
        .await
        .map_err(|e| CompactError::store("put", key, e))?;
    let found = lake.store.head(&path).await.ok().map(|m| m.size);
    if found != Some(expected as u64) {
        return Err(not_durable(lake, key, expected, found).await);
    }
    Ok(())
}

/// A put of `expected` bytes at `key` that the store does not hold in full.
/// An output the store shows with another size is deleted, so that no
/// short file stays in the lake (readers and the next compaction would
/// refuse it as damaged: rev-s50-ops F8): a key is its content's digest, so
/// no whole file of any compaction has another size. Nothing is deleted when
/// the store's answer is not a size (a HEAD that failed, an object not
/// listed): a concurrent compaction of the same inputs puts the same key,
/// and may have deleted the inputs on the strength of it (rev-s50-diff F4:
/// rows lost). Nor a manifest, which is never deleted.
async fn not_durable(lake: &Lake, key: &str, expected: usize, found: Option<u64>) -> CompactError {
    let short = found.is_some_and(|n| n != expected as u64);
    let removed = short
        && !key.starts_with(&format!("{}/", ledger_ingest::manifest::MANIFEST_PREFIX))
        && matches!(
            lake.store.delete(&Path::from(key)).await,
            Ok(()) | Err(object_store::Error::NotFound { .. })
        );
    CompactError::NotDurable {
        key: key.to_owned(),
        expected,
        found,
        removed,
    }
}

/// Every lake row of a table, deduplicated by the readers' rule: what any
/// reader must see, whatever state compaction left (tests compare it).
pub async fn read_table_deduplicated(lake: &Lake, table: Table) -> Result<Vec<Row>, CompactError> {
    let mut all = Vec::new();
    for p in lake.partitions(Some(table)).await? {
        let (_, rows) = lake.read_partition(&p).await?;
        all.extend(rows);
    }
    Ok(dedup(all).rows)
}

#[cfg(test)]
mod tests {
    use super::CompactError;

    /// An endpoint that answers with a web page (a proxy, a server that is
    /// not S3): its body is quoted on one line, cut, and the Help follows
    /// on the next (rev-s55-blackbox F9).
    #[test]
    fn a_store_error_quoting_a_page_is_one_line() {
        let page = format!(
            "GET 501 Not Implemented: <!DOCTYPE HTML>\n<html lang=\"en\">\n<body>\n{}\n</body>",
            "x".repeat(5000)
        );
        let e = object_store::Error::Generic {
            store: "S3",
            source: page.into(),
        };
        let shown = CompactError::store("get", "events/account/k.parquet", e).to_string();
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 2, "{shown}");
        assert!(
            lines[0].starts_with("get events/account/k.parquet failed: ")
                && lines[0].contains("<!DOCTYPE HTML>\\n<html")
                && lines[0].contains(" bytes)")
                && lines[0].len() < 2300
                && lines[1].starts_with("Help: check the lake location"),
            "{shown}"
        );
    }
}
