//! A local lake's files read through memory maps.
//!
//! DataFusion fetches a Parquet row group as one byte range per column chunk
//! (`ObjectStore::get_ranges`). `object_store`'s local store answers each range
//! with a fresh zeroed buffer and a `read` into it: per row group ~11 MB of
//! anonymous memory zeroed, faulted in page by page and copied into from the
//! page cache, and the merge holds one row group of every file at once. That
//! was the largest single source of the proof's page faults (perf, a third of
//! them; docs/BENCHMARKS.md).
//!
//! [`MappedStore`] answers `get_ranges` with slices of one read-only map of the
//! ranges' span instead, populated in one call (`MAP_POPULATE`): no zeroing, no
//! copy, no per-page faults. The map lives as long as the last slice of it
//! (the column chunks of that row group) and is then unmapped. Every other call
//! goes to `object_store`'s local store unchanged, and S3 lakes do not use it.
//!
//! The lake's files are immutable: every writer (ingest, compaction, the test
//! data tools) writes a file under a temporary name and renames it into place,
//! and compaction replaces files by writing new ones and deleting the old.
//! Deleting a mapped file is harmless (its pages live until unmapped); only a
//! file truncated in place while mapped could fault, and nothing of the
//! project's does that. A copy onto a lake file by hand does: the fault
//! (SIGBUS) is the run's exit 2 with a line that says why (`main`), and a file
//! cut before it is mapped reads as fewer rows than its footer, which is an
//! error naming it (`Lake::scan_sorted_where`); docs/LAKE.md says how to
//! restore a file.

use std::fmt;
use std::fs::File;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// `object_store`'s local file system, with `get_ranges` served from memory
/// maps (see the module doc).
#[derive(Debug)]
pub struct MappedStore {
    local: LocalFileSystem,
}

impl MappedStore {
    /// The whole local file system, as DataFusion's default `file://` store.
    pub fn new() -> MappedStore {
        MappedStore {
            local: LocalFileSystem::new(),
        }
    }
}

/// Makes `ctx` read local files (`file://`, the paths a local lake's scans
/// use) through a [`MappedStore`].
pub fn read_local_files_mapped(ctx: &datafusion::prelude::SessionContext) {
    ctx.register_object_store(
        datafusion::execution::object_store::ObjectStoreUrl::local_filesystem().as_ref(),
        std::sync::Arc::new(MappedStore::new()),
    );
}

impl Default for MappedStore {
    fn default() -> Self {
        MappedStore::new()
    }
}

impl fmt::Display for MappedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MappedStore({})", self.local)
    }
}

/// The slices of `file` that `ranges` name, all backed by one map of their
/// span. Empty ranges give empty slices; a range past the end of the file is
/// an error naming the file, as the local store's own reads report it.
pub fn map_ranges(
    file: &File,
    path: &std::path::Path,
    ranges: &[Range<u64>],
) -> Result<Vec<Bytes>> {
    let wanted = ranges.iter().filter(|r| r.start < r.end);
    let (Some(lo), Some(hi)) = (
        wanted.clone().map(|r| r.start).min(),
        wanted.map(|r| r.end).max(),
    ) else {
        return Ok(ranges.iter().map(|_| Bytes::new()).collect());
    };
    let err = |source: std::io::Error| object_store::Error::Generic {
        store: "MappedStore",
        source: format!("{}: {source}", path.display()).into(),
    };
    let len = file.metadata().map_err(err)?.len();
    if let Some(r) = ranges.iter().find(|r| r.start > r.end || r.end > len) {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "range {}..{} is not within the file's {len} bytes",
                r.start, r.end
            ),
        )));
    }
    // A map starts on a page boundary: 64 KiB is a multiple of every page
    // size in use (4, 16 and 64 KiB).
    let page = 64 * 1024;
    let start = lo / page * page;
    let span = usize::try_from(hi - start).map_err(|e| err(std::io::Error::other(e)))?;
    // SAFETY: the map is read-only and private, and lake files are never
    // modified or truncated in place once written (module doc), so its bytes
    // stay valid and unchanged for as long as it lives.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(start)
            .len(span)
            .populate()
            .map(file)
    }
    .map_err(err)?;
    let whole = Bytes::from_owner(map);
    Ok(ranges
        .iter()
        .map(|r| {
            if r.start >= r.end {
                return Bytes::new();
            }
            whole.slice((r.start - start) as usize..(r.end - start) as usize)
        })
        .collect())
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for MappedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.local.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.local.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.local.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let path = self.local.path_to_filesystem(location)?;
        let file = File::open(&path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => object_store::Error::NotFound {
                path: path.display().to_string(),
                source: source.into(),
            },
            _ => object_store::Error::Generic {
                store: "MappedStore",
                source: format!("{}: {source}", path.display()).into(),
            },
        })?;
        map_ranges(&file, &path, ranges)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.local.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.local.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.local.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.local.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.local.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.local.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    /// The mapped slices are the file's bytes at those ranges, for ranges in
    /// any order, overlapping, empty, at the start and end, and across page
    /// and map boundaries; the same as the local store's own reads.
    #[tokio::test]
    async fn ranges_are_the_files_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(dir.path().join("f.bin"), &data).unwrap();
        let path = Path::from_filesystem_path(dir.path().join("f.bin")).unwrap();
        let mapped = MappedStore::new();
        let local = LocalFileSystem::new();
        let sets: Vec<Vec<Range<u64>>> = vec![
            vec![0..1, 19_999..20_000],
            vec![5000..9000, 4095..4097, 12_288..20_000, 7..7],
            vec![8192..8193],
            vec![3..3],
            vec![],
            vec![100..4096, 100..4096, 0..20_000],
            // Spans that start past the first map boundary (64 KiB), on it,
            // and across the next one, up to the file's last byte.
            vec![70_000..70_010, 65_536..65_537, 131_000..131_100],
            vec![199_999..200_000, 131_071..131_073],
        ];
        for ranges in sets {
            let got = mapped.get_ranges(&path, &ranges).await.unwrap();
            assert_eq!(got.len(), ranges.len());
            for (r, b) in ranges.iter().zip(&got) {
                assert_eq!(&b[..], &data[r.start as usize..r.end as usize], "{r:?}");
                if r.start < r.end {
                    assert_eq!(b, &local.get_range(&path, r.clone()).await.unwrap());
                }
            }
        }
        // The rest goes to the local store.
        assert_eq!(mapped.head(&path).await.unwrap().size, 200_000);
    }

    /// A range past the end of the file, or of a missing file, is an error
    /// that names the file; nothing is mapped.
    #[tokio::test]
    async fn bad_ranges_and_missing_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.bin"), [1u8; 100]).unwrap();
        let path = Path::from_filesystem_path(dir.path().join("f.bin")).unwrap();
        let store = MappedStore::new();
        let e = store
            .get_ranges(&path, &[0..10, 50..101])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.bin") && e.contains("50..101"), "{e}");
        let missing = Path::from_absolute_path(dir.path().join("gone.bin")).unwrap();
        let e = store
            .get_ranges(&missing, &[0..10, 20..30])
            .await
            .unwrap_err();
        assert!(matches!(e, object_store::Error::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("gone.bin"), "{e}");
    }
}
