//! Replays simulation seeds: `sim --seed 42 --verbose` prints every action of
//! one seed; `sim --seeds 10000` sweeps a range and stops at the first failure.

use std::process::ExitCode;

use ledger_sim::{run, Config, Stats};

fn usage() -> ExitCode {
    eprintln!("usage: sim [--seed N | --seeds COUNT [--from N]] [--steps N] [--accounts N] [--no-faults] [--verbose]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut cfg = Config::default();
    let (mut from, mut count) = (0u64, 1_000u64);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Option<u64> {
            let v = args.next().and_then(|v| v.parse().ok());
            if v.is_none() {
                eprintln!("{name} needs a number");
            }
            v
        };
        match a.as_str() {
            "--seed" => match num("--seed") {
                Some(s) => (from, count) = (s, 1),
                None => return usage(),
            },
            "--seeds" => match num("--seeds") {
                Some(n) => count = n,
                None => return usage(),
            },
            "--from" => match num("--from") {
                Some(n) => from = n,
                None => return usage(),
            },
            "--steps" => match num("--steps") {
                Some(n) => cfg.steps = n as usize,
                None => return usage(),
            },
            "--accounts" => match num("--accounts") {
                Some(n) if n >= 2 => cfg.accounts = n as usize,
                _ => return usage(),
            },
            "--no-faults" => cfg.faults = false,
            "--verbose" => cfg.verbose = true,
            "-h" | "--help" => {
                usage();
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}");
                return usage();
            }
        }
    }
    let mut total = Stats::default();
    for seed in from..from + count {
        match run(seed, &cfg) {
            Ok(s) => total.add(&s),
            Err(f) => {
                eprintln!("{f}");
                return ExitCode::from(1);
            }
        }
        if count > 1 && (seed - from + 1) % 1_000 == 0 {
            eprintln!("{} seeds passed", seed - from + 1);
        }
    }
    println!("{count} seeds passed from {from}: {total:?}");
    ExitCode::SUCCESS
}
