//! `reconcile-testdata`: generated lakes and injected violations, for tests,
//! demos and benchmarks.
//!
//!   reconcile-testdata generate DIR [--seed N --accounts N --operations N --batches N --duplicates N]
//!   reconcile-testdata corrupt CLEAN DAMAGED --class gap|tamper|conflict|...

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ledger_reconcile::corrupt::{copy_lake, inject, Class};
use ledger_reconcile::gen::{generate_lake, GenConfig};

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
        #[arg(long, default_value_t = 20)]
        accounts: usize,
        /// Operations after the accounts are opened (each emits one or more events).
        #[arg(long, default_value_t = 400)]
        operations: usize,
        /// Ingest batches (files per partition grow with it).
        #[arg(long, default_value_t = 4)]
        batches: usize,
        /// Events delivered twice (plain duplicates).
        #[arg(long, default_value_t = 10)]
        duplicates: usize,
    },
    /// Copy the lake CLEAN to DAMAGED (new) and inject one violation class into the copy;
    /// prints what reconcile must report.
    Corrupt {
        clean: PathBuf,
        damaged: PathBuf,
        #[arg(long, value_enum)]
        class: Class,
        /// The instant reconcile will judge deadlines at (for --class dangling).
        #[arg(long, default_value_t = i64::MAX)]
        now_ms: i64,
    },
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
        } => generate_lake(
            &GenConfig {
                seed,
                accounts,
                operations,
                batches,
                duplicates,
            },
            &dir,
        )
        .map(|s| println!("generated {}: {s:?}", dir.display())),
        Cmd::Corrupt {
            clean,
            damaged,
            class,
            now_ms,
        } => copy_lake(&clean, &damaged)
            .and_then(|()| inject(&damaged, class, now_ms))
            .map(|i| {
                println!("{}: {}", damaged.display(), i.description);
                for e in i.expected {
                    println!(
                        "  expect {} {} {} {}",
                        e.check,
                        e.code,
                        e.key,
                        e.event_id.unwrap_or_default()
                    );
                }
            }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
