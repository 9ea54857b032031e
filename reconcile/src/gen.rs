//! Test lakes from the real ledger: seeded, deterministic.
//!
//! The generator drives the real account state machine ([`MemAccount`]) and
//! the real transfer saga (`ledger_core::transfer`) with a seeded workload —
//! deposits, withdrawals, transfers that capture, fail (insufficient funds)
//! or are released (credit refused by a frozen or foreign-currency
//! destination), freezes and unfreezes — and writes every emitted event
//! through the real ingest writer (`ledger_ingest::ingest`, queue batches of
//! JSON messages) into a lake directory in the current layout (`lake-v2`). Plain
//! duplicates are a partial redelivery: a later batch repeating some events.
//!
//! Guarantee: the same [`GenConfig`] gives the same events, the same files
//! and the same bytes. Every transfer ends terminal, so a generated lake
//! satisfies every invariant (the tests rely on it).

use std::path::Path;

use ledger_core::account::{Command, HoldState, Outcome};
use ledger_core::memory::MemAccount;
use ledger_core::transfer::{self, Admission, Advance, Reply, TransferSpec};
use ledger_core::{Currency, Event};
use ledger_ingest::{ingest, Message, INGEST_BATCH_MESSAGES_MAX};

/// Commit time of the first generated event: 2026-01-01T00:00:00Z.
pub const GEN_START_MS: i64 = 1_767_225_600_000;
/// Time between two generated operations. Chosen so that a few thousand
/// operations span several UTC days, i.e. several date partitions.
pub const GEN_STEP_MS: i64 = 97_000;
/// A generated transfer's deadline, after its creation (one left in
/// progress, [`GenConfig::in_flight`]: the ledger's longest, 30 days).
pub const GEN_TRANSFER_DEADLINE_MS: i64 = 300_000;
/// Tenant of every generated account and transfer.
pub const GEN_TENANT: &str = "gen";

#[derive(Debug, Clone)]
pub struct GenConfig {
    pub seed: u64,
    pub accounts: usize,
    /// Operations after the accounts are opened (deposits, withdrawals,
    /// transfers, freezes); each emits one or more events.
    pub operations: usize,
    /// Ingest batches the event log is cut into (each at most
    /// `INGEST_BATCH_MESSAGES_MAX` messages; more are made if needed).
    pub batches: usize,
    /// Events delivered a second time in an extra batch (plain duplicates).
    pub duplicates: usize,
    /// Time between two operations (default [`GEN_STEP_MS`]): sets how many
    /// events a UTC day, i.e. a date partition, holds.
    pub step_ms: i64,
    /// The transfers among the last `in_flight` operations stop mid-saga, as
    /// a lake read while sagas are in progress shows them ([`Stop`]): a live
    /// ledger's state, not a violation (until their deadlines pass).
    pub in_flight: usize,
}

/// Where a transfer left in progress stops: after `recorded` saga steps the
/// transfer recorded, and, if `committed`, the next step committed on its
/// account but its reply not yet recorded by the transfer (the account
/// commits before the transfer does, so every step passes through that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stop {
    recorded: usize,
    committed: bool,
}

/// The stops cycled through: reserved; reserved with the credit committed
/// (money in flight); credited (money in flight); credited with the
/// capture committed on the source. A transfer whose credit was refused
/// stops in `releasing` at the last two (its hold live until the release).
const STOPS: [Stop; 4] = [
    Stop {
        recorded: 1,
        committed: false,
    },
    Stop {
        recorded: 1,
        committed: true,
    },
    Stop {
        recorded: 2,
        committed: false,
    },
    Stop {
        recorded: 2,
        committed: true,
    },
];

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 1,
            accounts: 20,
            operations: 400,
            batches: 4,
            duplicates: 10,
            step_ms: GEN_STEP_MS,
            in_flight: 0,
        }
    }
}

/// What a generation produced, for the caller's checks and logs.
#[derive(Debug, Clone, Default)]
pub struct GenSummary {
    pub events: usize,
    pub files: usize,
    pub duplicates: usize,
    pub transfers_captured: usize,
    pub transfers_failed: usize,
    pub transfers_released: usize,
    /// Transfers left in progress ([`GenConfig::in_flight`]).
    pub transfers_in_flight: usize,
}

/// A small deterministic generator (splitmix64 over a counter).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        ledger_core::retry::splitmix64(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct World<'s> {
    accounts: Vec<(String, MemAccount)>,
    /// Account id → index in `accounts` (a saga step names its account).
    index: std::collections::HashMap<String, usize>,
    /// Every event, in commit order, as it is emitted.
    sink: &'s mut dyn FnMut(Event),
    now: i64,
    summary: GenSummary,
}

impl World<'_> {
    fn emit(&mut self, ev: Event) {
        self.summary.events += 1;
        (self.sink)(ev);
    }

    fn run(&mut self, idx: usize, cmd: &Command) -> Outcome {
        let now = self.now;
        let (id, acc) = &mut self.accounts[idx];
        let out = acc.run(id, cmd, now);
        // Memory flat however long the history: the outbox goes to the sink,
        // and the op records (idempotency: every generated op id is new),
        // entries (statements: never read here) and settled holds are not kept.
        let events = std::mem::take(&mut acc.events);
        acc.ops.clear();
        acc.entries.clear();
        // A settled hold is never asked for again (every saga step runs once).
        acc.holds.retain(|_, h| h.state == HoldState::Held);
        for ev in events {
            self.emit(ev);
        }
        out
    }

    fn index_of(&self, id: &str) -> usize {
        *self
            .index
            .get(id)
            .expect("generated transfers name generated accounts")
    }

    /// Runs one transfer's saga to a terminal phase, every step answered, or
    /// to `stop`.
    fn transfer(
        &mut self,
        key: &str,
        (src, dst): (usize, usize),
        amount: i64,
        currency: Currency,
        stop: Option<Stop>,
    ) {
        let spec = TransferSpec {
            id: format!("t.{GEN_TENANT}.{key}"),
            source: self.accounts[src].0.clone(),
            destination: self.accounts[dst].0.clone(),
            amount,
            currency,
        };
        let now = self.now;
        // One left in progress has the longest deadline the ledger allows:
        // a lake judged after its last operation is then a live ledger, its
        // sagas still within their deadlines.
        let deadline = match stop {
            Some(_) => ledger_events::TRANSFER_DEADLINE_MS_MAX,
            None => GEN_TRANSFER_DEADLINE_MS,
        };
        let mut t = match transfer::admit(None, spec, now, now + deadline) {
            Admission::Start(t, ev) => {
                self.emit(ev);
                t
            }
            Admission::Existing(_) | Admission::Refuse(_) => return,
        };
        let mut recorded = 0;
        while let Some(step) = t.next_step() {
            let (account, cmd) = t.request(step);
            let idx = self.index_of(account);
            if let Some(stop) = stop.filter(|s| s.recorded == recorded) {
                if stop.committed {
                    self.run(idx, &cmd);
                }
                self.summary.transfers_in_flight += 1;
                return;
            }
            recorded += 1;
            let outcome = self.run(idx, &cmd);
            match t.on_reply(step, &Reply::Outcome(outcome), self.now) {
                Advance::Moved(ev) => self.emit(ev),
                other => panic!("a saga answered every step cannot stall: {other:?}"),
            }
        }
        match t.phase {
            transfer::Phase::Captured => self.summary.transfers_captured += 1,
            transfer::Phase::Failed => self.summary.transfers_failed += 1,
            transfer::Phase::Released => self.summary.transfers_released += 1,
            p => unreachable!("non-terminal after the saga loop: {p:?}"),
        }
    }
}

/// The generated events in commit order (what the outboxes would deliver).
pub fn generate_events(cfg: &GenConfig) -> (Vec<Event>, GenSummary) {
    let mut log = Vec::new();
    let summary = generate_with(cfg, &mut |ev| log.push(ev));
    (log, summary)
}

/// Generates the events of `cfg` in commit order into `sink`; memory does
/// not grow with the number of events.
pub fn generate_with(cfg: &GenConfig, sink: &mut dyn FnMut(Event)) -> GenSummary {
    let mut rng = Rng(cfg.seed);
    let usd = Currency::parse("USD").expect("USD is ISO 4217");
    let eur = Currency::parse("EUR").expect("EUR is ISO 4217");
    let mut w = World {
        accounts: Vec::new(),
        index: Default::default(),
        sink,
        now: GEN_START_MS,
        summary: GenSummary::default(),
    };
    let accounts = cfg.accounts.max(2);
    for i in 0..accounts {
        let id = format!("{GEN_TENANT}.acc-{i}");
        w.index.insert(id.clone(), i);
        w.accounts.push((id, MemAccount::default()));
        // One account in five is in euros (so some transfers are refused for
        // the currency), one in four may overdraw a little.
        let currency = if i % 5 == 4 { eur } else { usd };
        let overdraft_limit = if i % 4 == 3 { 5_000 } else { 0 };
        w.run(
            i,
            &Command::Open {
                currency,
                overdraft_limit,
            },
        );
        w.now += cfg.step_ms.max(1);
    }
    for op in 0..cfg.operations {
        let a = rng.below(accounts as u64) as usize;
        let currency = w.accounts[a].1.header().currency;
        match rng.below(100) {
            0..=29 => {
                let amount = 1_000 + rng.below(50_000) as i64;
                let entry_id = format!("dep:{}:op{op}", w.accounts[a].0);
                w.run(
                    a,
                    &Command::Deposit {
                        entry_id,
                        amount,
                        currency,
                    },
                );
            }
            30..=39 => {
                let amount = 500 + rng.below(20_000) as i64;
                let entry_id = format!("wd:{}:op{op}", w.accounts[a].0);
                w.run(
                    a,
                    &Command::Withdraw {
                        entry_id,
                        amount,
                        currency,
                    },
                );
            }
            40..=93 => {
                let mut b = rng.below(accounts as u64) as usize;
                if b == a {
                    b = (a + 1) % accounts;
                }
                // Sometimes more than the source holds: the reserve fails.
                let amount = 100 + rng.below(30_000) as i64;
                let stop = (op + cfg.in_flight >= cfg.operations).then(|| STOPS[op % STOPS.len()]);
                w.transfer(&format!("op{op}"), (a, b), amount, currency, stop);
            }
            94..=97 => {
                w.run(a, &Command::Freeze);
            }
            _ => {
                w.run(a, &Command::Unfreeze);
            }
        }
        // Unfreeze now and then so frozen accounts do not pile up.
        if op % 17 == 0 {
            let c = rng.below(accounts as u64) as usize;
            w.run(c, &Command::Unfreeze);
        }
        w.now += cfg.step_ms.max(1);
    }
    w.summary
}

/// Generates a lake under `root` (created if needed): the events of
/// [`generate_events`] cut into `cfg.batches` queue batches, plus batches
/// repeating `cfg.duplicates` events (one, up to the ingest maximum of
/// messages), each batch through `ledger_ingest::ingest`.
///
/// Streams: the events are generated twice (generation is deterministic),
/// once to count them and once to write them a batch at a time, so memory is
/// one batch and the duplicates, not the history (50M events fit).
pub fn generate_lake(cfg: &GenConfig, root: &Path) -> Result<GenSummary, String> {
    generate_lake_with_progress(cfg, root, |_, _| {})
}

/// [`generate_lake`], calling `progress(events written, events in all)`
/// after each queue batch the writer lands. `root` must not hold anything
/// yet: two lakes written into one directory are one lake of conflicts.
pub fn generate_lake_with_progress(
    cfg: &GenConfig,
    root: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<GenSummary, String> {
    if std::fs::read_dir(root).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "{} is not empty: generate writes a new lake (remove it first, or name another \
             directory)",
            root.display()
        ));
    }
    let mut total = 0usize;
    generate_with(cfg, &mut |_| total += 1);
    let per_batch = total
        .div_ceil(cfg.batches.max(1))
        .clamp(1, INGEST_BATCH_MESSAGES_MAX);
    // A partial redelivery: seeded picks, delivered again in their own batch.
    let mut rng = Rng(cfg.seed ^ 0x5eed_d0b1e);
    let dup_at: Vec<usize> = (0..cfg.duplicates.min(total))
        .map(|_| rng.below(total as u64) as usize)
        .collect();
    let mut dup_bodies: std::collections::HashMap<usize, Vec<u8>> =
        dup_at.iter().map(|&at| (at, Vec::new())).collect();
    let mut files = std::collections::BTreeSet::new();
    let mut batch: Vec<(String, Vec<u8>)> = Vec::with_capacity(per_batch);
    let mut failed: Option<String> = None;
    let mut index = 0usize;
    let mut summary = generate_with(cfg, &mut |ev| {
        if failed.is_some() {
            return;
        }
        let body = match serde_json::to_vec(&ev) {
            Ok(b) => b,
            Err(e) => return failed = Some(e.to_string()),
        };
        if let Some(slot) = dup_bodies.get_mut(&index) {
            slot.clone_from(&body);
        }
        batch.push((format!("m{index}"), body));
        index += 1;
        if batch.len() == per_batch {
            if let Err(e) = ingest_batch(root, &batch, &mut files) {
                failed = Some(e);
            }
            batch.clear();
            progress(index, total);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    ingest_batch(root, &batch, &mut files)?;
    let dups: Vec<(String, Vec<u8>)> = dup_at
        .iter()
        .enumerate()
        .map(|(i, at)| (format!("r{i}"), dup_bodies[at].clone()))
        .collect();
    summary.duplicates = dups.len();
    for chunk in dups.chunks(INGEST_BATCH_MESSAGES_MAX) {
        ingest_batch(root, chunk, &mut files)?;
    }
    summary.files = files.len();
    Ok(summary)
}

/// One queue batch through the real ingest writer, its files into the lake.
fn ingest_batch(
    root: &Path,
    batch: &[(String, Vec<u8>)],
    files: &mut std::collections::BTreeSet<String>,
) -> Result<(), String> {
    if batch.is_empty() {
        return Ok(());
    }
    let msgs: Vec<Message<'_>> = batch
        .iter()
        .map(|(id, body)| Message { id, body })
        .collect();
    let out = ingest(&msgs).map_err(|e| e.to_string())?;
    if let Some(d) = out.dead_letters.first() {
        return Err(format!(
            "generated event dead-lettered by ingest: {}",
            d.reason()
        ));
    }
    for f in out.files {
        write_object(root, &f.key, &f.bytes)?;
        files.insert(f.key);
    }
    Ok(())
}

/// Puts one object into a local lake: a temporary file renamed into place,
/// like `object_store`'s local store, so a reader never sees half a file.
pub fn write_object(root: &Path, key: &str, bytes: &[u8]) -> Result<(), String> {
    let path = root.join(key);
    let dir = path.parent().expect("lake keys have a directory");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_covers_every_outcome() {
        let cfg = GenConfig::default();
        let (a, s) = generate_events(&cfg);
        let (b, _) = generate_events(&cfg);
        assert_eq!(a, b);
        assert!(s.transfers_captured > 10, "{s:?}");
        assert!(s.transfers_failed > 0, "{s:?}");
        assert!(s.transfers_released > 0, "{s:?}");
        assert!(a.iter().any(|e| e.kind == "frozen"));
        assert!(a.iter().any(|e| e.kind == "withdrawn"));
    }
}
