//! `reconcile-testdata`: generated lakes and injected violations, for tests,
//! demos and benchmarks.
//!
//!   reconcile-testdata generate DIR [--seed N --accounts N --operations N --batches N --duplicates N --step-ms MS --in-flight N]
//!   reconcile-testdata corrupt CLEAN DAMAGED --class gap|tamper|conflict|...
//!   reconcile-testdata mutate CLEAN DAMAGED --seed N --count N   # random damage, no expectations
//!   reconcile-testdata scan LAKE      # the floor: every lake column through DataFusion, no sort
//!   reconcile-testdata scan LAKE --verify   # and every row hashed and validated, no checks
//!   reconcile-testdata rekey LAKE --date D  # a date's files moved under new c- keys, with a manifest
//!   reconcile-testdata redeliver LAKE --date D [--every N]  # one row in N of a date delivered again

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ledger_reconcile::corrupt::{damaged_copy, inject, mutate, Class};
use ledger_reconcile::gen::{generate_lake_with_progress, GenConfig};

/// A line on stderr; a stderr that is gone (a closed pipe) does not stop
/// the work (`eprintln!` would panic, exit 101, mid-run).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// A line on stdout; a reader that left (`| head -1`) does not stop the
/// work (`println!` would panic, exit 101).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `corrupt --now-ms` by default: the latest instant `reconcile --now-ms`
/// takes (2100-01-01), after every deadline a generated lake holds and
/// long before the row `future-created` dates in the year 9999 (an instant
/// in 9999 was the default, which reconcile refuses: rev-s52-docs L6).
const NOW_MS_DEFAULT: i64 = 4_102_444_800_000;

/// Test data for reconcile: lakes written by the real ledger core and the
/// real ingest writer, and copies of them with exactly one violation.
#[derive(Parser, Debug)]
#[command(name = "reconcile-testdata", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Generate a valid lake (every invariant holds) into DIR; deterministic per seed.
    Generate {
        dir: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Accounts: at least 2 (a transfer needs two), at most 10,000,000 (each is held
        /// in memory while generating).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..=10_000_000))]
        accounts: u32,
        /// Operations after the accounts are opened (each emits one or more events).
        #[arg(long, default_value_t = 400)]
        operations: usize,
        /// Ingest batches (files per partition grow with it).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
        batches: u32,
        /// Events delivered twice (plain duplicates).
        #[arg(long, default_value_t = 10)]
        duplicates: usize,
        /// Milliseconds between two operations: sets the events per UTC day, i.e. per
        /// date partition (the default gives a few thousand a day); 1 ms to 30 days.
        #[arg(long, default_value_t = ledger_reconcile::gen::GEN_STEP_MS,
              value_parser = clap::value_parser!(i64).range(1..=2_592_000_000))]
        step_ms: i64,
        /// Leave the transfers among the last N operations in progress (stopped
        /// mid-saga at cycling steps: reserved, credit committed, credited, capture
        /// committed), as a lake read while sagas run shows them.
        #[arg(long, default_value_t = 0)]
        in_flight: usize,
    },
    /// Copy the lake CLEAN to DAMAGED (new) and inject one violation class into the copy;
    /// prints the findings the injection adds, which reconcile must report (beside CLEAN's
    /// own: a lake generated with --in-flight has transfers dangling past their deadline).
    Corrupt {
        clean: PathBuf,
        damaged: PathBuf,
        #[arg(long, value_enum)]
        class: Class,
        /// The instant reconcile will judge deadlines at: the findings printed are a run's at
        /// that instant (classes with a deadline or a date: dangling, far-deadline,
        /// future-created, token-hold, credit-lost, credit-while-releasing, cross-tenant,
        /// foreign-id, same-account, created-lost, transfer-lost). The default, 2100-01-01 (the
        /// latest instant reconcile judges at), is past every deadline and before future-created's
        /// row; a class that cannot be judged at the instant given is exit 2 naming both.
        #[arg(long, default_value_t = NOW_MS_DEFAULT)]
        now_ms: i64,
    },
    /// Copy the lake CLEAN to DAMAGED (new) and make COUNT random edits to the copy (seeded):
    /// for differential tests against checks.sql (bench/reconcile/equivalence.sh), which is
    /// the oracle; prints the edits.
    Mutate {
        clean: PathBuf,
        damaged: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 3)]
        count: usize,
    },
    /// Read every column reconcile reads from every lake file of every table through
    /// DataFusion (same session settings as reconcile, no sort, no checks) and print rows/s:
    /// the floor a full proof is measured against (docs/BENCHMARKS.md). Strings are read as
    /// Utf8View, as the proof reads them; RECONCILE_SCAN_UTF8=1 reads plain Utf8.
    Scan {
        lake: String,
        /// Also verify every row as the proof does: its canonical encoding hashed and
        /// compared with its recorded hash, and its schema validated; both cores, no merge,
        /// no grouping, no checks. The floor of any proof that verifies every event with
        /// the current per-event code (docs/BENCHMARKS.md).
        #[arg(long)]
        verify: bool,
    },
    /// Move every lake file of DATE (every table) under a new compacted key, bytes
    /// unchanged, and record each partition's compaction manifest as ledger-compact does
    /// (docs/LAKE.md): what compacting a partition a checkpoint proved leaves, the same
    /// rows in new files (the benchmark's `recompact` night). For reconcile only: the new
    /// keys are not their content's digest, so ledger-compact refuses the files as not the
    /// ones their keys name.
    Rekey {
        lake: PathBuf,
        /// The date partition, YYYY-MM-DD.
        #[arg(long)]
        date: String,
    },
    /// Deliver again one row in EVERY of DATE's lake files (every table): exact copies,
    /// written by the ingest writer as new files of the partition, as a queue that
    /// redelivers a batch does. Each copy at or before a stream's proved tail is looked
    /// up in the proved files (an account's) or reopens its stream (a transfer's): the
    /// benchmark's `redeliver` night.
    Redeliver {
        lake: PathBuf,
        /// The date partition, YYYY-MM-DD.
        #[arg(long)]
        date: String,
        /// One row in this many is delivered again.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        every: u64,
    },
}

/// The local lake at `lake` (its name as given), and a runtime to drive it.
fn open_lake(
    lake: &std::path::Path,
) -> Result<(String, ledger_compact::Lake, tokio::runtime::Runtime), String> {
    let name = lake.to_str().ok_or("the lake path is not UTF-8")?;
    let lake = ledger_compact::Lake::open(name).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    Ok((name.to_owned(), lake, rt))
}

/// See [`Cmd::Rekey`].
fn rekey(lake: &std::path::Path, date: &str) -> Result<(), String> {
    use ledger_ingest::{object_key, FileLayer, Manifest, Table};
    use object_store::{path::Path, ObjectStoreExt};
    use sha2::{Digest, Sha256};

    let (name, lake, rt) = open_lake(lake)?;
    let (name, lake, store) = (name.as_str(), &lake, &lake.store);
    let list =
        |prefix: String| async move { lake.lake_files(&prefix).await.map_err(|e| e.to_string()) };
    rt.block_on(async {
        let mut moved = 0;
        for table in Table::ALL {
            let partition = ledger_ingest::Partition {
                table: *table,
                date: date.to_owned(),
            };
            let inputs = list(partition.prefix()).await?;
            let mut outputs = Vec::new();
            for f in &inputs {
                let digest = Sha256::digest(format!("rekeyed {}", f.key));
                let key = object_key(
                    &partition,
                    FileLayer::Compacted,
                    &ledger_events::event::hex(&digest[..16]),
                );
                store
                    .rename(&Path::from(f.key.as_str()), &Path::from(key.as_str()))
                    .await
                    .map_err(|e| format!("move {}: {e}", f.key))?;
                outputs.push(key);
            }
            if inputs.is_empty() {
                continue;
            }
            let written = list(partition.prefix())
                .await?
                .into_iter()
                .filter(|f| outputs.contains(&f.key))
                .collect();
            let manifest = Manifest::new(&partition, inputs, written);
            store
                .put(&Path::from(manifest.key()), manifest.to_json().into())
                .await
                .map_err(|e| format!("put {}: {e}", manifest.key()))?;
            moved += outputs.len();
        }
        if moved == 0 {
            return Err(format!(
                "{name} holds no lake file of {date}\nHelp: DATE is a partition's date, \
                 YYYY-MM-DD (the date=... directories under events/)"
            ));
        }
        out!("{name}: {moved} files of {date} moved under new keys, with their manifests");
        Ok(())
    })
}

/// See [`Cmd::Redeliver`].
fn redeliver(lake: &std::path::Path, date: &str, every: u64) -> Result<(), String> {
    use ledger_ingest::{build_files, read_file, FileLayer, Table};
    use object_store::{path::Path, ObjectStoreExt};

    let (name, lake, rt) = open_lake(lake)?;
    let (name, lake, store) = (name.as_str(), &lake, &lake.store);
    rt.block_on(async {
        let (mut read, mut again) = (0u64, Vec::new());
        for table in Table::ALL {
            let partition = ledger_ingest::Partition {
                table: *table,
                date: date.to_owned(),
            };
            for f in lake
                .lake_files(&partition.prefix())
                .await
                .map_err(|e| e.to_string())?
            {
                let key = Path::from(f.key.as_str());
                let read_all = async { store.get(&key).await?.bytes().await };
                let bytes = read_all.await.map_err(|e| format!("read {}: {e}", f.key))?;
                for row in read_file(&f.key, bytes).map_err(|e| e.to_string())? {
                    if read % every == 0 {
                        again.push(row);
                    }
                    read += 1;
                }
            }
        }
        if read == 0 {
            return Err(format!(
                "{name} holds no lake file of {date}\nHelp: DATE is a partition's date, \
                 YYYY-MM-DD (the date=... directories under events/)"
            ));
        }
        // As the writer takes a batch: sorted in the lake's order, one row
        // per (event id, hash) (the day's files are read one after another,
        // and a plain copy in two of them may be picked twice).
        ledger_ingest::sort_rows(&mut again);
        again.dedup_by(|a, b| a.event.event_id == b.event.event_id && a.event.hash == b.event.hash);
        let copies = again.len();
        let files = build_files(again, FileLayer::Ingest).map_err(|e| e.to_string())?;
        for f in &files {
            store
                .put(&Path::from(f.key.as_str()), f.bytes.clone().into())
                .await
                .map_err(|e| format!("put {}: {e}", f.key))?;
        }
        out!(
            "{name}: {copies} of {read} rows of {date} delivered again, in {} new file(s)",
            files.len()
        );
        Ok(())
    })
}

/// The scan floor: decodes every column of every lake file (the columns `reconcile` reads)
/// with DataFusion, unsorted, through the same memory-mapped reads as `reconcile`, touching
/// every value buffer so nothing is skipped.
/// Returns how many rows failed verification (`--verify`; 0 otherwise).
fn scan(location: &str, verify: bool) -> Result<u64, String> {
    use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
    use futures::StreamExt;
    use ledger_ingest::Table;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let started = std::time::Instant::now();
        let lake = ledger_reconcile::Lake::open(location).map_err(|e| e.to_string())?;
        let root = std::path::Path::new(location)
            .canonicalize()
            .map_err(|e| format!("{location}: {e}"))?;
        // Reconcile's sorted scan: 8,192-row batches, strings as Utf8View.
        // RECONCILE_SCAN_UTF8=1 reads plain Utf8 instead, to measure the copy
        // view types avoid.
        let views = std::env::var_os("RECONCILE_SCAN_UTF8").is_none_or(|v| v != "1");
        let mut config = SessionConfig::new().with_batch_size(8_192);
        config
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = views;
        // Every column decoded from its pages, as `reconcile` reads them:
        // with statistics collected, DataFusion reads a column its footer
        // gives one value for as that literal.
        config.options_mut().execution.collect_statistics = false;
        let ctx = SessionContext::new_with_config(config);
        // Row groups read through maps, as reconcile reads a local lake.
        ledger_reconcile::mapped::read_local_files_mapped(&ctx);
        let (mut rows, mut files, mut bytes, mut value_bytes) = (0u64, 0usize, 0u64, 0u64);
        let mut verify_failures = 0u64;
        for table in [Table::Account, Table::Transfer, Table::Subscription] {
            let infos = lake.files(table).await.map_err(|e| e.to_string())?;
            if infos.is_empty() {
                continue;
            }
            files += infos.len();
            bytes += infos.iter().map(|f| f.bytes).sum::<u64>();
            let paths: Vec<String> = infos
                .iter()
                .map(|f| root.join(&f.key).display().to_string())
                .collect();
            let df = ctx
                .read_parquet(paths, ParquetReadOptions::default())
                .await
                .and_then(|df| df.select_columns(ledger_events::FIELDS))
                .map_err(|e| e.to_string())?;
            if verify {
                // One task per partition, on the runtime's two threads.
                let parts = df
                    .execute_stream_partitioned()
                    .await
                    .map_err(|e| e.to_string())?;
                let tasks: Vec<_> = parts.into_iter().map(|p| tokio::spawn(verify_rows(p))).collect();
                for t in tasks {
                    let (r, bad) = t.await.map_err(|e| e.to_string())??;
                    rows += r;
                    verify_failures += bad;
                }
                continue;
            }
            let mut stream = df.execute_stream().await.map_err(|e| e.to_string())?;
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(|e| e.to_string())?;
                rows += batch.num_rows() as u64;
                for col in batch.columns() {
                    let data = col.to_data();
                    value_bytes += data.buffers().iter().map(|b| b.len() as u64).sum::<u64>();
                }
            }
        }
        if files == 0 {
            return Err(format!(
                "{location} holds no lake files under events/: nothing to scan (a floor of 0 s \
                 would be no floor)"
            ));
        }
        let secs = started.elapsed().as_secs_f64();
        if verify {
            out!(
                "verify {location}: {files} files, {bytes} bytes, {rows} rows encoded, hashed and validated ({verify_failures} failed), {secs:.2} s, {:.0} rows/s",
                rows as f64 / secs.max(1e-9)
            );
            return Ok(verify_failures);
        }
        out!(
            "scan {location}: {files} files, {bytes} bytes, {rows} rows, {} columns ({}), {value_bytes} value bytes decoded, {secs:.2} s, {:.0} rows/s",
            ledger_events::FIELDS.len(),
            if views { "Utf8View" } else { "Utf8" },
            rows as f64 / secs.max(1e-9)
        );
        Ok(0)
    })
}

/// Rows of one partition's batches verified as the proof verifies each event (hash and
/// schema), in chunks of the proof's size; (rows, rows that failed either).
async fn verify_rows(
    mut part: datafusion::physical_plan::SendableRecordBatchStream,
) -> Result<(u64, u64), String> {
    use futures::StreamExt;
    use ledger_events::event::HashCheck;
    use ledger_reconcile::rows::Cols;
    use ledger_reconcile::run::CHUNK_ROWS;

    let (mut rows, mut bad) = (0u64, 0u64);
    let mut check = HashCheck::default();
    let mut ok = Vec::with_capacity(CHUNK_ROWS);
    while let Some(batch) = part.next().await {
        let batch = batch.map_err(|e| e.to_string())?;
        let cols = Cols::from_batch(&batch).map_err(|e| format!("{e:?}"))?;
        let mut views = Vec::with_capacity(CHUNK_ROWS);
        for start in (0..cols.len()).step_by(CHUNK_ROWS) {
            views.clear();
            views.extend((start..cols.len().min(start + CHUNK_ROWS)).map(|i| cols.view(i)));
            ok.clear();
            check.check(&views.iter().collect::<Vec<_>>(), &mut ok);
            for (v, hash_ok) in views.iter().zip(&ok) {
                // The proof checks a stream's key once, not per event.
                bad += u64::from(!hash_ok || v.validate_in_checked_stream().is_err());
            }
            rows += views.len() as u64;
        }
    }
    Ok((rows, bad))
}

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::Generate {
            dir,
            seed,
            accounts,
            operations,
            batches,
            duplicates,
            step_ms,
            in_flight,
        } => {
            // Progress on stderr, each tenth of the events (a 50M lake takes
            // half an hour), with the time left at the rate so far.
            let started = std::time::Instant::now();
            let mut shown = 0;
            generate_lake_with_progress(
                &GenConfig {
                    seed,
                    accounts: accounts as usize,
                    operations,
                    batches: batches as usize,
                    duplicates,
                    step_ms,
                    in_flight,
                },
                &dir,
                |done, total| {
                    let tenth = (done * 10).checked_div(total).unwrap_or(10);
                    if tenth > shown && tenth < 10 {
                        shown = tenth;
                        let elapsed = started.elapsed().as_secs_f64();
                        say!(
                            "generate: {}0 % ({done} of {total} events) in {elapsed:.0} s, ~{:.0} s left",
                            tenth,
                            elapsed * (total - done) as f64 / done.max(1) as f64
                        );
                    }
                },
            )
            .map(|s| out!("generated {}: {s:?}", dir.display()))
        }
        Cmd::Corrupt {
            clean,
            damaged,
            class,
            now_ms,
        } => damaged_copy(&clean, &damaged, |copy| inject(copy, class, now_ms)).map(|i| {
            out!("{}: {}", damaged.display(), i.description);
            for e in i.expected {
                out!(
                    "  expect {} {} {} {}",
                    e.check,
                    e.code,
                    e.key,
                    e.event_id.unwrap_or_default()
                );
            }
        }),
        Cmd::Mutate {
            clean,
            damaged,
            seed,
            count,
        } => damaged_copy(&clean, &damaged, |copy| mutate(copy, seed, count)).map(|edits| {
            for e in edits {
                out!("{}: {e}", damaged.display());
            }
        }),
        // Rows that fail verification: exit 1, as a violated proof (the
        // floor was not of a clean lake).
        Cmd::Scan { lake, verify } => match scan(&lake, verify) {
            Ok(0) => Ok(()),
            Ok(failed) => {
                say!("scan: {failed} row(s) failed verification");
                return ExitCode::from(1);
            }
            Err(e) => Err(e),
        },
        Cmd::Rekey { lake, date } => rekey(&lake, &date),
        Cmd::Redeliver { lake, date, every } => redeliver(&lake, &date, every),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("error: {e}");
            ExitCode::from(2)
        }
    }
}
