//! Runs and replays simulation seeds.

use std::process::ExitCode;

use clap::Parser;
use ledger_sim::{run, Config, Stats, ACCOUNTS_DEFAULT, LATE_ACCOUNTS_DEFAULT};

/// Deterministic simulation of the ledger core under crashes, lost replies,
/// duplicated and reordered deliveries. Exits 0 when every seed holds every
/// invariant, 1 at the first seed that does not (printing it and how to
/// replay it), 2 on a usage error.
#[derive(Parser)]
#[command(name = "sim", version)]
struct Args {
    /// Run exactly this seed (replay a failure with --verbose).
    #[arg(long, conflicts_with_all = ["seeds", "from"])]
    seed: Option<u64>,
    /// How many consecutive seeds to run.
    #[arg(long, default_value_t = 1_000)]
    seeds: u64,
    /// First seed of the range.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Random steps per seed before the run settles.
    #[arg(long, default_value_t = Config::default().steps)]
    steps: usize,
    /// Accounts per seed (at least 2).
    #[arg(long, default_value_t = ACCOUNTS_DEFAULT, value_parser = clap::value_parser!(u16).range(2..))]
    accounts: u16,
    /// Accounts per seed that start unopened and are opened by a random
    /// action, if ever (in addition to --accounts).
    #[arg(long, default_value_t = LATE_ACCOUNTS_DEFAULT)]
    late_accounts: u16,
    /// Run the workload without faults.
    #[arg(long)]
    no_faults: bool,
    /// Print every action to stderr.
    #[arg(long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = Config {
        accounts: args.accounts.into(),
        late_accounts: args.late_accounts.into(),
        steps: args.steps,
        faults: !args.no_faults,
        verbose: args.verbose,
    };
    let (from, count) = match args.seed {
        Some(s) => (s, 1),
        None => (args.from, args.seeds),
    };
    let mut total = Stats::default();
    let started = std::time::Instant::now();
    for (done, seed) in (from..from + count).enumerate() {
        match run(seed, &cfg) {
            Ok(s) => total.add(&s),
            Err(f) => {
                eprintln!("{f}");
                return ExitCode::from(1);
            }
        }
        if (done + 1) % 1_000 == 0 {
            eprintln!("{} of {count} seeds passed", done + 1);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("{count} seeds passed from {from}: {total:?}");
    eprintln!(
        "{secs:.1} s: {:.0} seeds/s, {:.0} simulated transfers/s",
        count as f64 / secs,
        total.transfers as f64 / secs
    );
    ExitCode::SUCCESS
}
