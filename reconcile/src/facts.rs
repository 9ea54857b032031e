//! What the cross-stream checks need, gathered in the one pass over the
//! streams: per transfer its `created` terms and last phase (transfer
//! streams), its legs on the accounts (holds, captures, credits, releases),
//! each account's live holds at the end, and per currency the sums that
//! global conservation compares. Memory is per transfer and per account, not
//! per event.

use std::collections::{BTreeMap, HashMap};

use ledger_events::AccountKind;
use serde::{Deserialize, Serialize};

use crate::stream::StreamRows;

/// One account event that belongs to a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leg {
    pub account: String,
    pub amount: i64,
    pub currency: String,
    pub seq: u64,
    pub event_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Legs {
    pub holds: Vec<Leg>,
    /// `captured` account events: the debit −a on the source.
    pub debits: Vec<Leg>,
    /// `credited` account events: the credit +a on the destination.
    pub credits: Vec<Leg>,
    /// `hold_released` account events (amount 0 for a tombstone).
    pub releases: Vec<Leg>,
}

/// A transfer as its own stream shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferFacts {
    /// From the `created` event: amount, currency, source, destination, deadline.
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub source: Option<String>,
    pub destination: Option<String>,
    pub deadline_ms: Option<i64>,
    /// Kind of the last event (the phase entered last).
    pub phase: String,
    pub last_seq: u64,
}

impl TransferFacts {
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_str(), "captured" | "failed" | "released")
    }
}

/// Per currency: Σ final balances, Σ deposits, Σ withdrawals (i128: sums
/// across accounts can exceed i64).
#[derive(Debug, Clone, Copy, Default)]
pub struct CurrencySums {
    pub balances: i128,
    pub deposits: i128,
    pub withdrawals: i128,
    pub accounts: u64,
}

/// What one account stream contributes to the cross-stream checks, kept
/// per account so a later run can continue it (or withdraw it and re-prove
/// the account from its first event).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountFacts {
    pub currency: Option<String>,
    pub last_balance: Option<i64>,
    pub deposits: i128,
    pub withdrawals: i128,
    /// Holds live after the last event, by transfer id.
    pub live: BTreeMap<String, Leg>,
}

#[derive(Debug, Default)]
pub struct Facts {
    pub transfers: HashMap<String, TransferFacts>,
    pub legs: HashMap<String, Legs>,
    /// (account, transfer id, leg) of every hold still live at the account's last event.
    pub live_holds: Vec<(String, String, Leg)>,
    pub currencies: std::collections::BTreeMap<String, CurrencySums>,
}

impl Facts {
    /// Folds the account stream `s` into its facts `a` (empty for a new
    /// account) and its legs into the per-transfer legs.
    pub fn add_account(&mut self, s: &StreamRows, a: &mut AccountFacts) {
        for ev in s.primary() {
            let Some(kind) = AccountKind::parse(&ev.kind) else {
                continue;
            };
            if ev.currency.is_some() {
                a.currency.clone_from(&ev.currency);
            }
            if ev.balance_after.is_some() {
                a.last_balance = ev.balance_after;
            }
            let amount = ev.amount.unwrap_or(0);
            let leg = || Leg {
                account: s.key.clone(),
                amount,
                currency: ev.currency.clone().unwrap_or_default(),
                seq: ev.seq,
                event_id: ev.event_id.clone(),
            };
            match kind {
                AccountKind::Deposited => a.deposits += i128::from(amount),
                AccountKind::Withdrawn => a.withdrawals += i128::from(amount),
                _ => {}
            }
            let Some(t) = ev.transfer_id.as_deref() else {
                continue;
            };
            use AccountKind::{Captured, Credited, HoldPlaced, HoldReleased};
            if !matches!(kind, HoldPlaced | Captured | Credited | HoldReleased) {
                continue;
            }
            let legs = self.legs.entry(t.to_owned()).or_default();
            match kind {
                HoldPlaced => {
                    a.live.insert(t.to_owned(), leg());
                    legs.holds.push(leg());
                }
                Captured => {
                    a.live.remove(t);
                    legs.debits.push(leg());
                }
                Credited => legs.credits.push(leg()),
                _ => {
                    a.live.remove(t);
                    legs.releases.push(leg());
                }
            }
        }
    }

    /// Withdraws every leg the accounts in `accounts` contributed (their
    /// streams are about to be re-proved from their first event).
    pub fn remove_legs_of(&mut self, accounts: &std::collections::HashSet<String>) {
        self.legs.retain(|_, l| {
            for v in [&mut l.holds, &mut l.debits, &mut l.credits, &mut l.releases] {
                v.retain(|leg| !accounts.contains(&leg.account));
            }
            *l != Legs::default()
        });
    }

    /// Live holds and per-currency sums from every account's facts (in
    /// account order): the inputs of convergence and global conservation.
    pub fn finish_accounts<'a>(
        &mut self,
        accounts: impl Iterator<Item = (&'a String, &'a AccountFacts)>,
    ) {
        self.live_holds.clear();
        self.currencies.clear();
        for (key, a) in accounts {
            for (t, leg) in &a.live {
                self.live_holds.push((key.clone(), t.clone(), leg.clone()));
            }
            let sums = self
                .currencies
                .entry(a.currency.clone().unwrap_or_default())
                .or_default();
            sums.balances += i128::from(a.last_balance.unwrap_or(0));
            sums.deposits += a.deposits;
            sums.withdrawals += a.withdrawals;
            sums.accounts += 1;
        }
    }

    /// Folds the transfer stream `s` into the transfer's facts (continuing
    /// the ones a previous run left, if any).
    pub fn add_transfer(&mut self, s: &StreamRows) {
        let f = self.transfers.entry(s.key.clone()).or_default();
        for ev in s.primary() {
            if ev.kind == "created" {
                f.amount = ev.amount;
                f.currency.clone_from(&ev.currency);
                f.source.clone_from(&ev.source);
                f.destination.clone_from(&ev.destination);
                f.deadline_ms = ev.deadline_ms;
            }
            f.phase.clone_from(&ev.kind);
            f.last_seq = ev.seq;
        }
    }

    /// Transfer ids in a deterministic order: every transfer stream and every
    /// id a leg names.
    pub fn transfer_ids(&self) -> Vec<&String> {
        let mut ids: Vec<&String> = self.transfers.keys().chain(self.legs.keys()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}
