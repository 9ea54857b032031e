//! What the cross-stream checks need, gathered in the one pass over the
//! streams: per transfer its `created` terms and last phase (transfer
//! streams), its legs on the accounts (holds, captures, credits, releases),
//! each account's live holds at the end, and per currency the sums that
//! global conservation compares. Memory is per transfer and per account, not
//! per event.

use std::collections::HashMap;

use ledger_events::AccountKind;

use crate::stream::StreamRows;

/// One account event that belongs to a transfer.
#[derive(Debug, Clone)]
pub struct Leg {
    pub account: String,
    pub amount: i64,
    pub currency: String,
    pub seq: u64,
    pub event_id: String,
}

#[derive(Debug, Clone, Default)]
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
#[derive(Debug, Clone, Default)]
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

#[derive(Debug, Default)]
pub struct Facts {
    pub transfers: HashMap<String, TransferFacts>,
    pub legs: HashMap<String, Legs>,
    /// (account, transfer id, leg) of every hold still live at the account's last event.
    pub live_holds: Vec<(String, String, Leg)>,
    pub currencies: std::collections::BTreeMap<String, CurrencySums>,
}

impl Facts {
    pub fn add_account(&mut self, s: &StreamRows) {
        let mut live: std::collections::BTreeMap<String, Leg> = Default::default();
        let mut last_balance: Option<i64> = None;
        let mut currency: Option<String> = None;
        let mut deposits = 0i128;
        let mut withdrawals = 0i128;
        for ev in s.primary() {
            let Some(kind) = AccountKind::parse(&ev.kind) else {
                continue;
            };
            if ev.currency.is_some() {
                currency.clone_from(&ev.currency);
            }
            if ev.balance_after.is_some() {
                last_balance = ev.balance_after;
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
                AccountKind::Deposited => deposits += i128::from(amount),
                AccountKind::Withdrawn => withdrawals += i128::from(amount),
                _ => {}
            }
            let Some(t) = ev.transfer_id.as_deref() else {
                continue;
            };
            match kind {
                AccountKind::HoldPlaced => {
                    live.insert(t.to_owned(), leg());
                    self.legs.entry(t.to_owned()).or_default().holds.push(leg());
                }
                AccountKind::Captured => {
                    live.remove(t);
                    self.legs
                        .entry(t.to_owned())
                        .or_default()
                        .debits
                        .push(leg());
                }
                AccountKind::Credited => {
                    self.legs
                        .entry(t.to_owned())
                        .or_default()
                        .credits
                        .push(leg());
                }
                AccountKind::HoldReleased => {
                    live.remove(t);
                    self.legs
                        .entry(t.to_owned())
                        .or_default()
                        .releases
                        .push(leg());
                }
                _ => {}
            }
        }
        for (t, leg) in live {
            self.live_holds.push((s.key.clone(), t, leg));
        }
        let sums = self
            .currencies
            .entry(currency.unwrap_or_default())
            .or_default();
        sums.balances += i128::from(last_balance.unwrap_or(0));
        sums.deposits += deposits;
        sums.withdrawals += withdrawals;
        sums.accounts += 1;
    }

    pub fn add_transfer(&mut self, s: &StreamRows) {
        let mut f = TransferFacts::default();
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
        self.transfers.insert(s.key.clone(), f);
    }

    /// Transfer ids in a deterministic order: every transfer stream and every
    /// id a leg names.
    pub fn transfer_ids(&self) -> Vec<&String> {
        let mut ids: Vec<&String> = self.transfers.keys().chain(self.legs.keys()).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}
