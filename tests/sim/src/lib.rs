//! Deterministic simulation of the ledger core (TigerBeetle's VOPR,
//! FoundationDB's buggify, sled's model test).
//!
//! A seed drives a random workload over a few accounts (deposits,
//! withdrawals, transfers racing on a hot account, retries with the same key
//! and the same or other parameters, freezes) and random faults: coordinator
//! crashes at step boundaries (in-memory state lost, committed state kept),
//! lost replies, duplicated and reordered deliveries, timeouts. After every
//! step an auditor checks I1 and I2 and an independent model checks every
//! answer; at the end every transfer must be terminal (I4), every transfer's
//! legs and the global sums must balance, no hold may be left behind, and
//! every stream's sequence and hash chain must verify. A failure names its
//! seed, and `cargo run -p ledger-sim -- --seed N --verbose` replays it.
//!
//! Besides the accounts opened up front, some are opened late: they exist
//! unopened from the start, the workload picks them like any other (source
//! and destination of transfers, deposits, freezes), and a random client
//! action opens each at most once, so a saga step refused at an account
//! nobody opened may be delivered again (a duplicate, a re-drive) after the
//! open: it must get the recorded refusal again, and a release there must
//! leave a tombstone that refuses a later reserve. The model predicts those
//! answers too; an unopened account must have no header, entries, events or
//! live holds, and counts as 0 in the global sums. `unopened_replays` counts
//! the deliveries that hit the race.

pub mod check;
pub mod model;
pub mod rng;
pub mod world;

use std::panic::{catch_unwind, AssertUnwindSafe};

use ledger_core::transfer::Phase;

/// Rounds of delivery and alarms allowed for a run to settle after the
/// workload; a run that does not settle has a transfer that does not converge.
const QUIESCE_ROUNDS_MAX: usize = 2_000;

/// Accounts in a default run: enough for races and cross-currency, few enough to collide often.
pub const ACCOUNTS_DEFAULT: u16 = 6;
/// Accounts opened late in a default run (in addition to `ACCOUNTS_DEFAULT`).
pub const LATE_ACCOUNTS_DEFAULT: u16 = 1;

#[derive(Debug, Clone)]
pub struct Config {
    /// Accounts opened up front.
    pub accounts: usize,
    /// Accounts that exist unopened and are opened by a random action, if ever.
    pub late_accounts: usize,
    pub steps: usize,
    pub faults: bool,
    pub verbose: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            accounts: ACCOUNTS_DEFAULT.into(),
            late_accounts: LATE_ACCOUNTS_DEFAULT.into(),
            steps: 400,
            faults: true,
            verbose: false,
        }
    }
}

/// What a run exercised; summed over seeds it shows the faults really fired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub transfers: u64,
    pub captured: u64,
    pub failed: u64,
    pub released: u64,
    pub replays: u64,
    pub stale: u64,
    pub crashes: u64,
    pub lost_replies: u64,
    pub duplicates: u64,
    pub timeouts: u64,
    /// Late accounts opened.
    pub late_opens: u64,
    /// Saga steps refused at an account nobody opened, delivered again after
    /// its open and answered with the recorded refusal.
    pub unopened_replays: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.transfers += o.transfers;
        self.captured += o.captured;
        self.failed += o.failed;
        self.released += o.released;
        self.replays += o.replays;
        self.stale += o.stale;
        self.crashes += o.crashes;
        self.lost_replies += o.lost_replies;
        self.duplicates += o.duplicates;
        self.timeouts += o.timeouts;
        self.late_opens += o.late_opens;
        self.unopened_replays += o.unopened_replays;
    }
}

#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub step: usize,
    pub message: String,
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "simulation seed {} failed at step {}: {}",
            self.seed, self.step, self.message
        )?;
        writeln!(f, "last actions:")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        write!(
            f,
            "replay: cargo run -p ledger-sim -- --seed {} --verbose",
            self.seed
        )
    }
}

/// Runs one seed. Panics inside the core (its assertions) are failures of
/// the seed too.
pub fn run(seed: u64, cfg: &Config) -> Result<Stats, Failure> {
    let mut w = world::World::new(seed, cfg);
    let mut step = 0;
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
        for i in 0..cfg.steps {
            step = i;
            w.step()?;
            check::step_invariants(&w)?;
        }
        step = cfg.steps;
        quiesce(&mut w)?;
        check::final_invariants(&w)
    }));
    let message = match result {
        Ok(Ok(())) => None,
        Ok(Err(m)) => Some(m),
        Err(panic) => Some(format!(
            "panic: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    };
    if let Some(message) = message {
        return Err(Failure {
            seed,
            step,
            message,
            trace: w.trace.into_iter().collect(),
        });
    }
    for c in w.transfers.values() {
        match c.t.phase {
            Phase::Captured => w.stats.captured += 1,
            Phase::Failed => w.stats.failed += 1,
            Phase::Released => w.stats.released += 1,
            _ => {}
        }
    }
    Ok(w.stats)
}

/// Faults off: deliver everything and fire alarms until every transfer is
/// terminal and the network is empty.
fn quiesce(w: &mut world::World) -> Result<(), String> {
    w.faults = false;
    for _ in 0..QUIESCE_ROUNDS_MAX {
        while !w.net.is_empty() {
            w.network()?;
            check::step_invariants(w)?;
        }
        let open = w.open_transfers();
        if open.is_empty() {
            return Ok(());
        }
        w.now += 1_000;
        for id in open {
            w.alarm_one(&id)?;
        }
    }
    Err(format!(
        "I4: transfers still open after {QUIESCE_ROUNDS_MAX} rounds without faults"
    ))
}
