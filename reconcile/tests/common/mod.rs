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

/// An instant just after the last operation of `cfg`: every row is
/// committed by then, and the deadline of every transfer left in progress
/// ([`GenConfig::in_flight`], 30 days after it began) is later, so a lake
/// judged then is a live ledger, not a dangling one.
pub fn live_ms(cfg: &GenConfig) -> i64 {
    GEN_START_MS + (cfg.accounts + cfg.operations + 1) as i64 * GEN_STEP_MS
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
                wanted_starts_max: ledger_reconcile::keyed::WANTED_STARTS_MAX,
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
    lie_in_row_groups(path, column, |_, rows| Some(lie(rows)));
}

/// [`lie_in_footer`] in the row groups `lie` picks: it is given each row
/// group's index and rows, and says the statistics to write there (`None`:
/// the group's own, kept).
pub fn lie_in_row_groups(
    path: &Path,
    column: &str,
    lie: impl Fn(usize, i64) -> Option<parquet::file::statistics::Statistics>,
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
        .enumerate()
        .map(|(i, rg)| {
            let Some(stats) = lie(i, rg.num_rows()) else {
                return rg;
            };
            let mut cols = rg.columns().to_vec();
            cols[c] = cols[c]
                .clone()
                .into_builder()
                .set_statistics(stats)
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

/// Writes the lake file at `path` again with the same rows, footer metadata
/// and statistics (row groups' and pages'), but its row groups ending after
/// each of the rows `cuts` counts (in order) and its pages holding
/// `page_rows` rows each: an honest writer's file, laid out so that one
/// stream's rows span row groups or pages.
pub fn relayout(path: &Path, cuts: &[usize], page_rows: usize) {
    rewrite(path, cuts, page_rows, |all| all);
}

/// Writes the lake file at `path` again as [`relayout`] does, with every
/// string column large (`LargeUtf8` in its Arrow schema): the same Parquet
/// columns, as another Arrow writer might lay them out.
pub fn large_strings(path: &Path) {
    use datafusion::arrow::datatypes::DataType;
    retype(path, |_, t| match t {
        DataType::Utf8 | DataType::Utf8View => DataType::LargeUtf8,
        t => t.clone(),
    });
}

/// Rewrites the lake file at `path` with each column of the type `to`
/// gives it (by its name and type), its rows and the rest of its footer
/// as they were: another Arrow writer's layout of the same rows, in the
/// file's own Arrow schema.
pub fn retype(
    path: &Path,
    to: impl Fn(&str, &datafusion::arrow::datatypes::DataType) -> datafusion::arrow::datatypes::DataType,
) {
    refield(path, |f| {
        f.clone().with_data_type(to(f.name(), f.data_type()))
    });
}

/// Rewrites the lake file at `path` with its column `column` declared
/// REQUIRED (not nullable): what another writer may declare of a column
/// none of the file's rows leaves empty.
pub fn require(path: &Path, column: &str) {
    refield(path, |f| {
        let nullable = f.is_nullable() && f.name() != column;
        f.clone().with_nullable(nullable)
    });
}

/// Rewrites the lake file at `path` without its column `column`: what a
/// writer of another layout may leave out.
pub fn drop_column(path: &Path, column: &str) {
    let rows = footer_of(path).file_metadata().num_rows() as usize;
    rewrite(path, &[], rows.max(1), |mut all| {
        let at = all.schema().index_of(column).unwrap();
        all.remove_column(at);
        all
    });
}

/// Rewrites the lake file at `path` with each field of its Arrow schema as
/// `to` makes it, each column cast to its field's type.
fn refield(
    path: &Path,
    to: impl Fn(&datafusion::arrow::datatypes::Field) -> datafusion::arrow::datatypes::Field,
) {
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    let rows = footer_of(path).file_metadata().num_rows() as usize;
    rewrite(path, &[], rows.max(1), |all| {
        let schema = all.schema();
        let fields: Vec<Field> = schema.fields().iter().map(|f| to(f)).collect();
        let columns = all
            .columns()
            .iter()
            .zip(&fields)
            .map(|(c, f)| cast(c, f.data_type()).unwrap())
            .collect();
        RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns).unwrap()
    });
}

fn rewrite(
    path: &Path,
    cuts: &[usize],
    page_rows: usize,
    map: impl FnOnce(
        datafusion::arrow::record_batch::RecordBatch,
    ) -> datafusion::arrow::record_batch::RecordBatch,
) {
    use datafusion::arrow::compute::concat_batches;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    let meta = footer_of(path);
    let fm = meta.file_metadata();
    let kv: Vec<_> = fm
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|e| e.key != "ARROW:schema")
        .cloned()
        .collect();
    let props = WriterProperties::builder()
        .set_created_by(fm.created_by().unwrap_or_default().to_owned())
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_sorting_columns(meta.row_group(0).sorting_columns().cloned())
        .set_key_value_metadata(Some(kv))
        .set_data_page_row_count_limit(page_rows)
        .set_write_batch_size(page_rows)
        .set_max_row_group_row_count(None)
        .build();
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
    let all = map(concat_batches(&batches[0].schema(), &batches).unwrap());
    let mut w = ArrowWriter::try_new(Vec::new(), all.schema(), Some(props)).unwrap();
    let mut from = 0;
    for &to in cuts.iter().chain([all.num_rows()].iter()) {
        if to == from {
            continue; // no empty row group
        }
        w.write(&all.slice(from, to - from)).unwrap();
        w.flush().unwrap();
        from = to;
    }
    std::fs::write(path, w.into_inner().unwrap()).unwrap();
}

/// Rewrites the page index of the lake file at `path` so that column
/// `column`'s pages in row group `group` that `lie` picks (by the rows of
/// the group each holds) say their least value is one past every real one
/// (each byte of it made a `z`, so its length stays): a scan that filters
/// on the column skips them. The pages, the row groups' statistics and
/// everything else stay as written, byte for byte. No honest writer does
/// this.
pub fn lie_in_page_index(
    path: &Path,
    column: &str,
    group: usize,
    lie: impl Fn(std::ops::Range<usize>) -> bool,
) {
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    let mut bytes = std::fs::read(path).unwrap();
    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Required)
        .parse_and_finish(&std::fs::File::open(path).unwrap())
        .unwrap();
    let c = column_of(&meta, column);
    let pages = meta.offset_index().unwrap()[group][c].page_locations();
    let rows = meta.row_group(group).num_rows() as usize;
    let page_rows = |p: usize| {
        let end = pages
            .get(p + 1)
            .map_or(rows, |l| l.first_row_index as usize);
        pages[p].first_row_index as usize..end
    };
    let chunk = meta.row_group(group).column(c);
    let at = chunk.column_index_offset().unwrap() as usize;
    let len = chunk.column_index_length().unwrap() as usize;
    // The column index, in Thrift's compact protocol: field 1, a list of
    // booleans (a byte each), then field 2, a list of binaries (a varint
    // length each, then the bytes): the pages' least values.
    let index = &mut bytes[at..at + len];
    let varint = |b: &[u8], i: &mut usize| {
        let (mut v, mut shift) = (0usize, 0);
        loop {
            let byte = b[*i];
            *i += 1;
            v |= ((byte & 0x7f) as usize) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    let list = |b: &[u8], i: &mut usize| {
        assert_eq!(b[*i] & 0x0f, 9, "a list field");
        *i += 1;
        let size = (b[*i] >> 4) as usize;
        *i += 1;
        if size == 15 {
            varint(b, i)
        } else {
            size
        }
    };
    let mut i = 0;
    let nulls = list(index, &mut i);
    i += nulls;
    let mins = list(index, &mut i);
    assert_eq!(mins, pages.len());
    for p in 0..mins {
        let n = varint(index, &mut i);
        if lie(page_rows(p)) {
            index[i..i + n].fill(b'z');
        }
        i += n;
    }
    std::fs::write(path, bytes).unwrap();
}
