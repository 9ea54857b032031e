//! An independent model of one account, written from the rules in the
//! documentation and not from the core's code: plain fields, a map of holds,
//! and the operation log keyed by the model's own op names. The simulation
//! feeds every command the real account receives to the model too, and any
//! difference in the answer or the resulting balances is a failure (the
//! model test of sled, applied to the ledger).
//!
//! An account may exist before it is opened (a saga step can reach it first).
//! There the rules are: a command's op record is looked up first (a replay
//! or an idempotency conflict, opened or not); then Open opens it; a
//! transfer's reserve, credit or release is refused `unknown_account` and
//! that refusal is recorded under its op name, so a later delivery gets it
//! again, also once the account is opened; a release also leaves the
//! transfer's hold released with amount 0 (a tombstone, so a reserve landing
//! after the open is refused `hold_released`); every other command is
//! refused `unknown_account` and leaves no record.

use std::collections::BTreeMap;

use ledger_core::account::Command;
use ledger_core::money::AMOUNT_MINOR_MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldSt {
    Held,
    Captured,
    Released,
}

/// The model's prediction: accepted, or rejected with this code.
pub type Answer = Result<(), &'static str>;

#[derive(Debug, Clone)]
pub struct Model {
    /// Whether an Open was accepted; before, the account has no currency.
    pub opened: bool,
    pub currency: String,
    pub limit: i64,
    pub frozen: bool,
    pub balance: i128,
    pub held: i128,
    pub holds: BTreeMap<String, (i128, HoldSt)>,
    /// op name → (the request as the model saw it, the recorded answer)
    ops: BTreeMap<String, (String, Answer)>,
    /// Sum of accepted deposits and withdrawals, for global conservation.
    pub deposited: i128,
    pub withdrawn: i128,
}

impl Model {
    /// An account nobody opened (yet): opening it is an Open applied to it.
    pub fn unopened() -> Model {
        Model {
            opened: false,
            currency: String::new(),
            limit: 0,
            frozen: false,
            balance: 0,
            held: 0,
            holds: BTreeMap::new(),
            ops: BTreeMap::new(),
            deposited: 0,
            withdrawn: 0,
        }
    }

    /// Whether the op named `name` was accepted (for the money-in-flight sum).
    pub fn accepted(&self, name: &str) -> bool {
        matches!(self.ops.get(name), Some((_, Ok(()))))
    }

    /// Whether the op named `name` has a record (accepted or refused).
    pub fn recorded(&self, name: &str) -> bool {
        self.ops.contains_key(name)
    }

    pub fn apply(&mut self, cmd: &Command) -> Answer {
        let (name, amount, currency) = match cmd {
            Command::Open { .. } => ("open".to_owned(), 0, None),
            Command::Freeze | Command::Unfreeze if !self.opened => {
                return Err("unknown_account");
            }
            Command::Freeze => {
                self.frozen = true;
                return Ok(());
            }
            Command::Unfreeze => {
                self.frozen = false;
                return Ok(());
            }
            Command::Deposit {
                entry_id,
                amount,
                currency,
            }
            | Command::Withdraw {
                entry_id,
                amount,
                currency,
            } => (entry_id.clone(), *amount, Some(currency.as_str())),
            Command::Reserve {
                transfer_id,
                amount,
                currency,
                ..
            } => (
                format!("{transfer_id}:reserve"),
                *amount,
                Some(currency.as_str()),
            ),
            Command::Credit {
                transfer_id,
                amount,
                currency,
                ..
            } => (
                format!("{transfer_id}:credit"),
                *amount,
                Some(currency.as_str()),
            ),
            Command::Capture { transfer_id } => (format!("{transfer_id}:debit"), 0, None),
            Command::Release { transfer_id } => (format!("{transfer_id}:release"), 0, None),
        };
        let request = format!("{cmd:?}");
        if let Some((seen, answer)) = self.ops.get(&name) {
            return if *seen == request {
                *answer
            } else {
                Err("idempotency_conflict")
            };
        }
        if !self.opened {
            return self.unopened_apply(cmd, name, request);
        }
        if matches!(cmd, Command::Open { .. }) {
            unreachable!("an opened account has its open record");
        }
        // Refusals on the request's face leave no record.
        if currency.is_some() {
            if amount <= 0 || amount > AMOUNT_MINOR_MAX {
                return Err("amount_out_of_range");
            }
            if currency != Some(self.currency.as_str()) {
                return Err("currency_mismatch");
            }
        }
        let answer = self.effect(cmd, i128::from(amount));
        self.ops.insert(name, (request, answer));
        answer
    }

    /// A command without a record at an account nobody opened yet.
    fn unopened_apply(&mut self, cmd: &Command, name: String, request: String) -> Answer {
        let answer = match cmd {
            Command::Open {
                currency,
                overdraft_limit,
            } => {
                if !(0..=AMOUNT_MINOR_MAX).contains(overdraft_limit) {
                    return Err("overdraft_limit_out_of_range");
                }
                self.opened = true;
                self.currency = currency.as_str().to_owned();
                self.limit = *overdraft_limit;
                Ok(())
            }
            Command::Release { transfer_id } => {
                self.holds
                    .insert(transfer_id.clone(), (0, HoldSt::Released));
                Err("unknown_account")
            }
            Command::Reserve { .. } | Command::Credit { .. } => Err("unknown_account"),
            _ => return Err("unknown_account"),
        };
        self.ops.insert(name, (request, answer));
        answer
    }

    fn spendable(&self) -> i128 {
        self.balance - self.held + i128::from(self.limit)
    }

    fn effect(&mut self, cmd: &Command, a: i128) -> Answer {
        match cmd {
            Command::Deposit { .. } => {
                if self.frozen {
                    return Err("account_frozen");
                }
                if self.balance + a > i128::from(i64::MAX) {
                    return Err("balance_overflow");
                }
                self.balance += a;
                self.deposited += a;
            }
            Command::Withdraw { .. } => {
                if self.frozen {
                    return Err("account_frozen");
                }
                if self.spendable() < a {
                    return Err("insufficient_funds");
                }
                self.balance -= a;
                self.withdrawn += a;
            }
            Command::Reserve { transfer_id, .. } => {
                if self.holds.contains_key(transfer_id) {
                    return Err("hold_released");
                }
                if self.frozen {
                    return Err("account_frozen");
                }
                if self.spendable() < a {
                    return Err("insufficient_funds");
                }
                self.held += a;
                self.holds.insert(transfer_id.clone(), (a, HoldSt::Held));
            }
            Command::Credit { .. } => {
                if self.frozen {
                    return Err("account_frozen");
                }
                if self.balance + a > i128::from(i64::MAX) {
                    return Err("balance_overflow");
                }
                self.balance += a;
            }
            Command::Capture { transfer_id } => match self.holds.get(transfer_id).copied() {
                None => return Err("unknown_hold"),
                Some((_, HoldSt::Released)) => return Err("hold_released"),
                Some((_, HoldSt::Captured)) => unreachable!("a second capture is a replay"),
                Some((h, HoldSt::Held)) => {
                    self.held -= h;
                    self.balance -= h;
                    self.holds
                        .insert(transfer_id.clone(), (h, HoldSt::Captured));
                }
            },
            Command::Release { transfer_id } => match self.holds.get(transfer_id).copied() {
                None => {
                    self.holds
                        .insert(transfer_id.clone(), (0, HoldSt::Released));
                }
                Some((_, HoldSt::Captured)) => return Err("hold_captured"),
                Some((_, HoldSt::Released)) => unreachable!("a second release is a replay"),
                Some((h, HoldSt::Held)) => {
                    self.held -= h;
                    self.holds
                        .insert(transfer_id.clone(), (h, HoldSt::Released));
                }
            },
            Command::Open { .. } | Command::Freeze | Command::Unfreeze => unreachable!(),
        }
        Ok(())
    }
}
