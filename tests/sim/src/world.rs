//! The simulated deployment: accounts (committed state only, like a Durable
//! Object's SQLite), transfer coordinators (committed state plus the volatile
//! request in flight, lost on a crash), and a network that loses, duplicates
//! and reorders messages. Every action is chosen by the seeded RNG.
//!
//! Some accounts are opened late: they exist (an empty Durable Object) from
//! the start and the workload uses them like any other, but nobody opens them
//! until a random client action does, so saga steps reach them before, and
//! duplicated or re-driven deliveries of the same steps after, the open.

use std::collections::{BTreeMap, VecDeque};

use ledger_core::account::{Command, Decision, Outcome, Status};
use ledger_core::memory::MemAccount;
use ledger_core::transfer::{self, Admission, Advance, Reply, Step, Transfer, TransferSpec};
use ledger_core::{Currency, Event, Rejection};

use crate::model::Model;
use crate::rng::Rng;
use crate::{Config, Stats};

/// How long a transfer may take before it counts as dangling.
pub const TRANSFER_DEADLINE_MS: i64 = 60_000;
/// Trace lines kept for a failure report.
const TRACE_LINES_MAX: usize = 60;

pub struct Coordinator {
    /// What the TransferDO has committed.
    pub t: Transfer,
    pub events: Vec<Event>,
    /// The request it is waiting on: memory only, lost on a crash.
    pub inflight: Option<(u64, Step)>,
}

#[derive(Debug, Clone)]
pub enum Msg {
    Request {
        req: u64,
        transfer: String,
        step: Step,
        account: String,
        cmd: Command,
    },
    Reply {
        req: u64,
        transfer: String,
        step: Step,
        outcome: Outcome,
    },
}

pub struct Client {
    /// Keys used so far and what was sent under them, for retries.
    deposits: Vec<(String, String, Command)>,
    transfers: Vec<TransferSpec>,
    /// The accounts opened late and the Open that opens (or opened) each.
    late: Vec<(String, Command)>,
}

pub struct World {
    pub rng: Rng,
    pub now: i64,
    pub faults: bool,
    pub accounts: BTreeMap<String, MemAccount>,
    pub models: BTreeMap<String, Model>,
    pub transfers: BTreeMap<String, Coordinator>,
    pub net: Vec<Msg>,
    next_req: u64,
    client: Client,
    pub stats: Stats,
    pub trace: VecDeque<String>,
    pub verbose: bool,
}

fn cur(code: &str) -> Currency {
    Currency::parse(code).expect("simulation currencies are valid")
}

impl World {
    pub fn new(seed: u64, cfg: &Config) -> World {
        let mut w = World {
            rng: Rng::new(seed),
            now: 1_700_000_000_000,
            faults: cfg.faults,
            accounts: BTreeMap::new(),
            models: BTreeMap::new(),
            transfers: BTreeMap::new(),
            net: Vec::new(),
            next_req: 0,
            client: Client {
                deposits: Vec::new(),
                transfers: Vec::new(),
                late: Vec::new(),
            },
            stats: Stats::default(),
            trace: VecDeque::new(),
            verbose: cfg.verbose,
        };
        for i in 0..cfg.accounts {
            // Mostly USD, one EUR account (cross-currency transfers must fail
            // cleanly), one with an overdraft limit.
            let currency = if i == cfg.accounts - 1 { "EUR" } else { "USD" };
            let limit = if i == 1 { 200 } else { 0 };
            let id = format!("acc-{i}");
            w.accounts.insert(id.clone(), MemAccount::default());
            w.models.insert(id.clone(), Model::unopened());
            let open = Command::Open {
                currency: cur(currency),
                overdraft_limit: limit,
            };
            let o = w.deliver(&id, &open).expect("the model opens it too");
            assert!(matches!(o, Outcome::Accepted(_)));
        }
        // Sorted after "acc-0", the hot source, which stays an opened account.
        for i in 0..cfg.late_accounts {
            let id = format!("acc-late-{i}");
            let currency = if w.rng.chance(200) { "EUR" } else { "USD" };
            let limit = if w.rng.chance(300) { 100 } else { 0 };
            let open = Command::Open {
                currency: cur(currency),
                overdraft_limit: limit,
            };
            w.accounts.insert(id.clone(), MemAccount::default());
            w.models.insert(id.clone(), Model::unopened());
            w.client.late.push((id, open));
        }
        w
    }

    pub fn log(&mut self, line: String) {
        if self.verbose {
            eprintln!("[{}] {line}", self.now);
        }
        if self.trace.len() == TRACE_LINES_MAX {
            self.trace.pop_front();
        }
        self.trace.push_back(line);
    }

    fn account_ids(&self) -> Vec<String> {
        self.accounts.keys().cloned().collect()
    }

    /// Delivers `cmd` to an account: the real machine and the model must give
    /// the same answer and leave the same balances.
    pub fn deliver(&mut self, account: &str, cmd: &Command) -> Result<Outcome, String> {
        let Some(real) = self.accounts.get_mut(account) else {
            self.log(format!("{account} <- {cmd:?}: no such account"));
            return Ok(Outcome::Rejected(ledger_core::Rejection::UnknownAccount));
        };
        let decision = real.execute(account, cmd, self.now);
        let outcome = decision.outcome();
        let model = self.models.get_mut(account).expect("model per account");
        let predicted = model.apply(cmd);
        let got = match &outcome {
            Outcome::Accepted(_) => Ok(()),
            Outcome::Rejected(r) => Err(r.code()),
        };
        if got != predicted {
            return Err(format!(
                "{account}: {cmd:?} answered {got:?}, the model says {predicted:?}"
            ));
        }
        let replayed_unknown = matches!(
            &decision,
            Decision::Replay(Outcome::Rejected(Rejection::UnknownAccount))
        );
        let Some(h) = real.header.clone() else {
            // Nobody opened it: no stream, no entries, nothing held or owned.
            if model.opened {
                return Err(format!(
                    "{account}: after {cmd:?} it is not open, the model says it is"
                ));
            }
            if !real.entries.is_empty() || !real.events.is_empty() {
                return Err(format!(
                    "{account}: not open, yet it has {} entries and {} events after {cmd:?}",
                    real.entries.len(),
                    real.events.len()
                ));
            }
            if matches!(decision, Decision::Replay(_)) {
                self.stats.replays += 1;
            }
            self.log(format!("{account} (not open) <- {cmd:?} => {got:?}"));
            return Ok(outcome);
        };
        if !model.opened {
            return Err(format!(
                "{account}: after {cmd:?} it is open, the model says it is not"
            ));
        }
        if h.currency.as_str() != model.currency || h.overdraft_limit != model.limit {
            return Err(format!(
                "{account}: opened in {} with limit {}, the model says {} with {}",
                h.currency, h.overdraft_limit, model.currency, model.limit
            ));
        }
        if i128::from(h.balance) != model.balance || i128::from(h.held) != model.held {
            return Err(format!(
                "{account}: after {cmd:?} balance/held are {}/{}, the model says {}/{}",
                h.balance, h.held, model.balance, model.held
            ));
        }
        if (h.status == Status::Frozen) != model.frozen {
            return Err(format!(
                "{account}: status {:?}, the model says frozen={}",
                h.status, model.frozen
            ));
        }
        if matches!(decision, Decision::Replay(_)) {
            self.stats.replays += 1;
        }
        // Only an account nobody opened records unknown_account: this step
        // reached it before its open and is delivered again after.
        if replayed_unknown {
            self.stats.unopened_replays += 1;
        }
        self.log(format!("{account} <- {cmd:?} => {got:?}"));
        Ok(outcome)
    }

    /// One random action.
    pub fn step(&mut self) -> Result<(), String> {
        self.now += self.rng.range(0, 1_500);
        match self.rng.below(100) {
            0..=13 => self.client_money(true),
            14..=20 => self.client_money(false),
            21..=35 => self.client_transfer(),
            36..=39 => match self.rng.below(20) {
                0..=2 => self.client_open(),
                3..=4 => self.client_conflict(),
                _ => self.client_freeze(),
            },
            40..=74 => self.network(),
            75..=91 => self.alarm(),
            _ => {
                if self.faults {
                    self.crash()
                }
                Ok(())
            }
        }
    }

    fn client_money(&mut self, deposit: bool) -> Result<(), String> {
        let retry = !self.client.deposits.is_empty() && self.rng.chance(250);
        let (account, cmd) = if retry {
            let (_, account, cmd) =
                self.client.deposits[self.rng.below(self.client.deposits.len())].clone();
            // A retry with other parameters must be refused and change nothing.
            let cmd = if self.rng.chance(300) {
                alter_amount(cmd)
            } else {
                cmd
            };
            (account, cmd)
        } else {
            let account = self.rng.pick(&self.account_ids()).clone();
            let key = format!("k{}", self.client.deposits.len());
            let currency = cur(if self.rng.chance(50) { "EUR" } else { "USD" });
            let amount = match self.rng.below(40) {
                0 => 0,
                1 => -self.rng.range(1, 100),
                _ => self.rng.range(1, if deposit { 1_000 } else { 400 }),
            };
            let cmd = if deposit {
                Command::Deposit {
                    entry_id: format!("dep.{key}"),
                    amount,
                    currency,
                }
            } else {
                Command::Withdraw {
                    entry_id: format!("wd.{key}"),
                    amount,
                    currency,
                }
            };
            self.client
                .deposits
                .push((key, account.clone(), cmd.clone()));
            (account, cmd)
        };
        self.deliver(&account, &cmd)?;
        Ok(())
    }

    fn client_transfer(&mut self) -> Result<(), String> {
        let ids = self.account_ids();
        let spec = if !self.client.transfers.is_empty() && self.rng.chance(250) {
            let mut s = self.client.transfers[self.rng.below(self.client.transfers.len())].clone();
            if self.rng.chance(400) {
                s.amount += 1;
            }
            s
        } else {
            // A hot source account makes transfers race for the same funds.
            let source = if self.rng.chance(350) {
                ids[0].clone()
            } else {
                self.rng.pick(&ids).clone()
            };
            let destination = match self.rng.below(30) {
                0 => source.clone(),
                1 => "acc-ghost".to_owned(),
                _ => self.rng.pick(&ids).clone(),
            };
            let amount = if self.rng.chance(30) {
                0
            } else {
                self.rng.range(1, 600)
            };
            let spec = TransferSpec {
                id: format!("t.sim.{}", self.client.transfers.len()),
                source,
                destination,
                amount,
                currency: cur(if self.rng.chance(60) { "EUR" } else { "USD" }),
            };
            self.client.transfers.push(spec.clone());
            spec
        };
        let existing = self.transfers.get(&spec.id).map(|c| &c.t);
        match transfer::admit(
            existing,
            spec.clone(),
            self.now,
            self.now + TRANSFER_DEADLINE_MS,
        ) {
            Admission::Start(t, event) => {
                self.log(format!("create {} {:?}", spec.id, spec));
                self.stats.transfers += 1;
                let id = t.spec.id.clone();
                self.transfers.insert(
                    id.clone(),
                    Coordinator {
                        t: *t,
                        events: vec![event],
                        inflight: None,
                    },
                );
                self.drive(&id);
            }
            Admission::Existing(t) => {
                if t.spec != spec {
                    return Err(format!(
                        "key {} replayed a transfer with other parameters: {:?}",
                        spec.id, t.spec
                    ));
                }
                self.stats.replays += 1;
                self.log(format!(
                    "create {} again: replay in phase {:?}",
                    spec.id, t.phase
                ));
            }
            Admission::Refuse(r) => {
                let conflict = existing.is_some() && existing.map(|t| &t.spec) != Some(&spec);
                let invalid = spec.validate().is_err();
                let expected = if conflict {
                    "idempotency_conflict"
                } else if invalid {
                    spec.validate().unwrap_err().code()
                } else {
                    "none"
                };
                if r.code() != expected {
                    return Err(format!(
                        "create {}: refused with {}, expected {expected}",
                        spec.id,
                        r.code()
                    ));
                }
                self.log(format!("create {} refused: {}", spec.id, r.code()));
            }
        }
        Ok(())
    }

    fn client_freeze(&mut self) -> Result<(), String> {
        let account = self.rng.pick(&self.account_ids()).clone();
        let cmd = if self.rng.chance(500) {
            Command::Freeze
        } else {
            Command::Unfreeze
        };
        self.deliver(&account, &cmd)?;
        Ok(())
    }

    /// Opens a late account (now and then first with an invalid overdraft
    /// limit, refused without effect); once it is open, sends its Open
    /// again, the same (a replay) or with another limit (an idempotency
    /// conflict).
    fn client_open(&mut self) -> Result<(), String> {
        if self.client.late.is_empty() {
            return Ok(());
        }
        let (account, mut cmd) = self.client.late[self.rng.below(self.client.late.len())].clone();
        let was_open = self.models[&account].opened;
        if let Command::Open {
            overdraft_limit, ..
        } = &mut cmd
        {
            if was_open && self.rng.chance(500) {
                *overdraft_limit += 1;
            } else if !was_open && self.rng.chance(100) {
                *overdraft_limit = -1;
            }
        }
        self.deliver(&account, &cmd)?;
        if !was_open && self.models[&account].opened {
            self.stats.late_opens += 1;
        }
        Ok(())
    }

    /// A saga step of an earlier transfer sent again with another amount (a
    /// second driver with other parameters) where the account already
    /// recorded the step: refused idempotency_conflict, changing nothing,
    /// whether or not the account is open.
    fn client_conflict(&mut self) -> Result<(), String> {
        // The spec each coordinator runs (a client's key may have been
        // admitted by a retry with other parameters than its first request).
        if self.transfers.is_empty() {
            return Ok(());
        }
        let i = self.rng.below(self.transfers.len());
        let s = self
            .transfers
            .values()
            .nth(i)
            .expect("in range")
            .t
            .spec
            .clone();
        let (account, op, cmd) = if self.rng.chance(500) {
            (
                s.source.clone(),
                format!("{}:reserve", s.id),
                Command::Reserve {
                    transfer_id: s.id,
                    amount: s.amount + 1,
                    currency: s.currency,
                    destination: s.destination,
                },
            )
        } else {
            (
                s.destination.clone(),
                format!("{}:credit", s.id),
                Command::Credit {
                    transfer_id: s.id,
                    amount: s.amount + 1,
                    currency: s.currency,
                    source: s.source,
                },
            )
        };
        if !self.models.get(&account).is_some_and(|m| m.recorded(&op)) {
            return Ok(());
        }
        match self.deliver(&account, &cmd)? {
            Outcome::Rejected(Rejection::IdempotencyConflict { .. }) => Ok(()),
            other => Err(format!(
                "{account}: {cmd:?} reuses {op} with another amount but answered {other:?}"
            )),
        }
    }

    /// Sends the request for the transfer's current step, unless it is
    /// terminal or already waiting.
    fn drive(&mut self, id: &str) {
        let c = self.transfers.get_mut(id).expect("driven transfers exist");
        let Some(step) = c.t.next_step() else { return };
        if c.inflight.is_some() {
            return;
        }
        let (account, cmd) = c.t.request(step);
        let account = account.to_owned();
        self.next_req += 1;
        let req = self.next_req;
        c.inflight = Some((req, step));
        self.net.push(Msg::Request {
            req,
            transfer: id.to_owned(),
            step,
            account,
            cmd,
        });
    }

    /// Delivers one message chosen at random (the network reorders freely),
    /// sometimes keeping a copy (duplicate) or losing the reply.
    pub fn network(&mut self) -> Result<(), String> {
        if self.net.is_empty() {
            return Ok(());
        }
        let i = self.rng.below(self.net.len());
        let msg = if self.faults && self.rng.chance(80) {
            self.stats.duplicates += 1;
            self.net[i].clone()
        } else {
            self.net.swap_remove(i)
        };
        match msg {
            Msg::Request {
                req,
                transfer,
                step,
                account,
                cmd,
            } => {
                let outcome = self.deliver(&account, &cmd)?;
                if self.faults && self.rng.chance(100) {
                    self.stats.lost_replies += 1;
                    self.log(format!("reply to {transfer} {step:?} lost"));
                } else {
                    self.net.push(Msg::Reply {
                        req,
                        transfer,
                        step,
                        outcome,
                    });
                }
            }
            Msg::Reply {
                req,
                transfer,
                step,
                outcome,
            } => {
                self.on_reply(&transfer, req, step, Reply::Outcome(outcome))?;
            }
        }
        Ok(())
    }

    fn on_reply(&mut self, id: &str, req: u64, step: Step, reply: Reply) -> Result<(), String> {
        let now = self.now;
        let c = self
            .transfers
            .get_mut(id)
            .expect("replies go to existing transfers");
        if c.inflight.map(|(r, _)| r) == Some(req) {
            c.inflight = None;
        }
        let before = c.t.phase;
        match c.t.on_reply(step, &reply, now) {
            Advance::Moved(event) => {
                let phase = c.t.phase;
                c.events.push(event);
                // The new phase is committed; whatever was in flight belongs
                // to the old phase.
                c.inflight = None;
                self.log(format!(
                    "{id}: {before:?} -> {phase:?} on {step:?} {reply:?}"
                ));
                if self.faults && self.rng.chance(60) {
                    self.stats.crashes += 1;
                    self.log(format!(
                        "{id}: crashed after committing {phase:?}, before sending"
                    ));
                } else {
                    self.drive(id);
                }
            }
            Advance::RetryAt(_) => {
                let attempt = c.t.attempt;
                self.log(format!("{id}: {step:?} transient, attempt {attempt}"));
            }
            Advance::Stale => self.stats.stale += 1,
            Advance::Anomaly { rejection, .. } => {
                return Err(format!(
                    "{id}: {step:?} has no rejection branch but was rejected: {rejection:?}"
                ));
            }
        }
        Ok(())
    }

    /// A TransferDO alarm: re-drive a random non-terminal transfer. If it is
    /// waiting on a request, the wait may have timed out (a transient fault).
    pub fn alarm(&mut self) -> Result<(), String> {
        let open = self.open_transfers();
        if open.is_empty() {
            return Ok(());
        }
        let id = self.rng.pick(&open).clone();
        self.alarm_one(&id)
    }

    /// Ids of the transfers that are not terminal yet.
    pub fn open_transfers(&self) -> Vec<String> {
        self.transfers
            .iter()
            .filter(|(_, c)| !c.t.is_terminal())
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn alarm_one(&mut self, id: &str) -> Result<(), String> {
        let c = &self.transfers[id];
        if let Some((req, step)) = c.inflight {
            if self.rng.chance(500) {
                self.stats.timeouts += 1;
                self.on_reply(id, req, step, Reply::Transient)?;
            }
        }
        self.drive(id);
        Ok(())
    }

    /// A coordinator crash: committed state survives, the in-flight wait does not.
    fn crash(&mut self) {
        let busy: Vec<String> = self
            .transfers
            .iter()
            .filter(|(_, c)| c.inflight.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        if busy.is_empty() {
            return;
        }
        let id = self.rng.pick(&busy).clone();
        self.transfers.get_mut(&id).expect("exists").inflight = None;
        self.stats.crashes += 1;
        self.log(format!(
            "{id}: coordinator crashed, in-flight request forgotten"
        ));
    }
}

fn alter_amount(cmd: Command) -> Command {
    match cmd {
        Command::Deposit {
            entry_id,
            amount,
            currency,
        } => Command::Deposit {
            entry_id,
            amount: amount + 1,
            currency,
        },
        Command::Withdraw {
            entry_id,
            amount,
            currency,
        } => Command::Withdraw {
            entry_id,
            amount: amount + 1,
            currency,
        },
        other => other,
    }
}
