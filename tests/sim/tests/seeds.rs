//! The simulation as a test: `SIM_SEEDS` seeds (default 1,000) from
//! `SIM_SEED_FROM` (default 0) with faults on. A deeper run:
//! `SIM_SEEDS=100000 cargo test -p ledger-sim --release`.

use ledger_sim::{run, Config, Stats};

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

#[test]
fn every_seed_keeps_every_invariant_under_faults() {
    let from = env_u64("SIM_SEED_FROM", 0);
    let count = env_u64("SIM_SEEDS", 1_000);
    let cfg = Config::default();
    let mut total = Stats::default();
    for seed in from..from + count {
        match run(seed, &cfg) {
            Ok(s) => total.add(&s),
            Err(f) => panic!("{f}"),
        }
    }
    eprintln!("{count} seeds from {from}: {total:?}");
    // A workload that stopped exercising a path would pass vacuously: every
    // outcome and every fault must actually have happened across the seeds.
    if count >= 100 {
        for (what, n) in [
            ("captured", total.captured),
            ("failed", total.failed),
            ("released", total.released),
            ("replays", total.replays),
            ("stale replies", total.stale),
            ("crashes", total.crashes),
            ("lost replies", total.lost_replies),
            ("duplicates", total.duplicates),
            ("timeouts", total.timeouts),
            ("late opens", total.late_opens),
            (
                "replays of a refusal recorded before the open",
                total.unopened_replays,
            ),
        ] {
            assert!(
                n > 0,
                "no {what} in {count} seeds: the workload no longer covers it"
            );
        }
    }
}

#[test]
fn a_seed_replays_identically() {
    let cfg = Config::default();
    for seed in [7, 1_234, 99_999] {
        assert_eq!(
            run(seed, &cfg).unwrap(),
            run(seed, &cfg).unwrap(),
            "seed {seed}"
        );
    }
}

#[test]
fn without_faults_every_transfer_settles_too() {
    let cfg = Config {
        faults: false,
        ..Config::default()
    };
    let mut total = Stats::default();
    for seed in 0..100 {
        total.add(&run(seed, &cfg).unwrap_or_else(|f| panic!("{f}")));
    }
    assert_eq!(
        (total.crashes, total.lost_replies, total.duplicates),
        (0, 0, 0)
    );
    assert!(total.captured > 0);
}
