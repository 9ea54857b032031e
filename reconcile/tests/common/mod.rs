//! Setup shared by the reconcile integration tests: the instant deadlines are
//! judged at, the generated lake most tests start from, and a library run.

// Each test crate uses a subset of these.
#![allow(dead_code)]

use std::path::Path;

use ledger_reconcile::gen::{GenConfig, GEN_START_MS, GEN_STEP_MS};
use ledger_reconcile::{reconcile, Error, Lake, Options, Report};

/// Deadlines are judged a year after the generated history.
pub const NOW_MS: i64 = GEN_START_MS + 365 * 86_400_000;

/// The generated lake of the end-to-end tests: small, every outcome present,
/// a few plain duplicates.
pub fn config() -> GenConfig {
    GenConfig {
        seed: 7,
        accounts: 12,
        operations: 300,
        batches: 3,
        duplicates: 8,
        step_ms: GEN_STEP_MS,
        in_flight: 0,
    }
}

/// The instant of the first operation of `cfg` that may leave a transfer
/// in progress ([`GenConfig::in_flight`]): every such transfer's deadline is
/// later, so a lake judged then is a live ledger, not a dangling one.
pub fn first_in_flight_ms(cfg: &GenConfig) -> i64 {
    GEN_START_MS + (cfg.accounts + cfg.operations - cfg.in_flight) as i64 * GEN_STEP_MS
}

/// Every file under `root/under` as a key relative to `root`, sorted.
pub fn files_under(root: &Path, under: &str) -> Vec<String> {
    fn walk(root: &Path, d: &Path, keys: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, keys);
            } else {
                keys.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut keys = Vec::new();
    walk(root, &root.join(under), &mut keys);
    keys.sort();
    keys
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A full run of the library on the lake directory `dir`, at [`NOW_MS`].
pub fn run_lib(dir: &Path) -> Result<Report, Error> {
    run_lib_at(dir, NOW_MS)
}

/// A full run of the library on the lake directory `dir`, deadlines judged
/// at `now_ms`.
pub fn run_lib_at(dir: &Path, now_ms: i64) -> Result<Report, Error> {
    run_lib_settled(dir, now_ms, 0)
}

/// [`run_lib_at`] with a settle window of `settle_ms`.
pub fn run_lib_settled(dir: &Path, now_ms: i64, settle_ms: i64) -> Result<Report, Error> {
    runtime().block_on(async {
        let lake = Lake::open(dir.to_str().unwrap())?;
        reconcile(
            &lake,
            &Options {
                now_ms,
                progress: false,
                handoff: true,
                split_first: false,
                by_date: true,
                settle_ms,
            },
        )
        .await
    })
}

/// The decoded footer of the Parquet file at `path`.
pub fn footer_of(path: &Path) -> parquet::file::metadata::ParquetMetaData {
    parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&std::fs::File::open(path).unwrap())
        .unwrap()
}

/// The index of the column `name` in the file `meta` describes.
pub fn column_of(meta: &parquet::file::metadata::ParquetMetaData, name: &str) -> usize {
    meta.file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|d| d.name() == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// Rewrites the footer of the lake file at `path` so that column `column`'s
/// statistics in every row group are `lie(rows of the group)`; the pages,
/// their page indexes and everything else the footer says stay as written.
/// No honest writer does this: it stands for a buggy or hostile one.
pub fn lie_in_footer(
    path: &Path,
    column: &str,
    lie: impl Fn(i64) -> parquet::file::statistics::Statistics,
) {
    use parquet::file::metadata::ParquetMetaDataWriter;
    let bytes = std::fs::read(path).unwrap();
    let meta = footer_of(path);
    let n = bytes.len();
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let c = column_of(&meta, column);
    let mut b = meta.into_builder();
    let groups = b
        .take_row_groups()
        .into_iter()
        .map(|rg| {
            let mut cols = rg.columns().to_vec();
            cols[c] = cols[c]
                .clone()
                .into_builder()
                .set_statistics(lie(rg.num_rows()))
                .build()
                .unwrap();
            rg.into_builder().set_column_metadata(cols).build().unwrap()
        })
        .collect();
    let meta = b.set_row_groups(groups).build();
    let mut out = bytes[..n - 8 - footer].to_vec();
    ParquetMetaDataWriter::new(&mut out, &meta)
        .finish()
        .unwrap();
    std::fs::write(path, out).unwrap();
}
