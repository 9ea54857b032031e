//! What the cross-stream checks need, gathered in the one pass over the
//! streams: per transfer its `created` terms and last phase (transfer
//! streams), its legs on the accounts (holds, captures, credits, releases),
//! each account's live holds at the end, and per currency the sums that
//! global conservation compares. Memory is per transfer and per account, not
//! per event, and compact: account keys, currencies and phases are interned
//! ([`Names`]), and a leg's event id is derived from its account and seq.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use ledger_events::{AccountKind, EventRef, Stream};
use serde::{Deserialize, Serialize};

use crate::stream::StreamView;

/// The FxHash function (rustc's): a multiply-rotate over 8-byte words. The
/// proof's maps are keyed by ids the lake holds, hashed millions of times a
/// run; SipHash's DoS resistance buys nothing against our own files.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// An interned string: an index into [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sym(pub u32);

/// Interned strings: account keys, currencies, phases. A few thousand distinct
/// values name millions of legs and transfers.
#[derive(Debug, Clone, Default)]
pub struct Names {
    list: Vec<Box<str>>,
    ix: FxMap<Box<str>, Sym>,
}

impl Names {
    pub fn id(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.ix.get(s) {
            return id;
        }
        let id = Sym(u32::try_from(self.list.len()).expect("fewer than 2³² distinct names"));
        self.list.push(s.into());
        self.ix.insert(s.into(), id);
        id
    }

    pub fn get(&self, s: Sym) -> &str {
        &self.list[s.0 as usize]
    }

    pub fn list(&self) -> &[Box<str>] {
        &self.list
    }

    pub fn from_list(list: Vec<Box<str>>) -> Names {
        let mut n = Names::default();
        for s in list {
            n.id(&s);
        }
        n
    }

    /// Adds `other`'s names; returns, for each of `other`'s syms, this table's sym.
    pub fn absorb(&mut self, other: &Names) -> Vec<Sym> {
        other.list.iter().map(|s| self.id(s)).collect()
    }
}

/// One account event that belongs to a transfer. Its event id is
/// `account:{account}:{seq}` ([`Leg::event_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leg {
    pub account: Sym,
    pub amount: i64,
    pub currency: Sym,
    pub seq: u64,
}

impl Leg {
    pub fn event_id(&self, names: &Names) -> String {
        ledger_events::event_id(Stream::Account, names.get(self.account), self.seq)
    }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferFacts {
    /// From the `created` event: amount, currency, source, destination, deadline.
    pub amount: Option<i64>,
    pub currency: Option<Sym>,
    pub source: Option<Sym>,
    pub destination: Option<Sym>,
    pub deadline_ms: Option<i64>,
    /// Kind of the last event (the phase entered last).
    pub phase: Sym,
    /// Whether that phase is captured, failed or released.
    pub terminal: bool,
    pub last_seq: u64,
}

impl TransferFacts {
    /// Facts before any `created` event (a stream whose first rows are missing).
    pub fn new(phase: Sym) -> TransferFacts {
        TransferFacts {
            amount: None,
            currency: None,
            source: None,
            destination: None,
            deadline_ms: None,
            phase,
            terminal: false,
            last_seq: 0,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    fn remap(&mut self, to: &[Sym]) {
        for s in [&mut self.currency, &mut self.source, &mut self.destination]
            .into_iter()
            .flatten()
        {
            *s = to[s.0 as usize];
        }
        self.phase = to[self.phase.0 as usize];
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
    /// Account keys, currencies and phases the legs and transfers name.
    pub names: Names,
    pub transfers: FxMap<String, TransferFacts>,
    pub legs: FxMap<String, Legs>,
    /// (transfer id, leg) of every hold still live at its account's last event.
    pub live_holds: Vec<(String, Leg)>,
    pub currencies: BTreeMap<String, CurrencySums>,
}

impl Facts {
    /// Folds the account stream `s` into its facts `a` (empty for a new
    /// account) and its legs into the per-transfer legs.
    pub fn add_account(&mut self, s: &StreamView, a: &mut AccountFacts) {
        let account = self.names.id(s.key);
        for ev in s.primary() {
            let Some(kind) = AccountKind::parse(ev.kind) else {
                continue;
            };
            if let Some(c) = ev.currency {
                if a.currency.as_deref() != Some(c) {
                    a.currency = Some(c.to_owned());
                }
            }
            if ev.balance_after.is_some() {
                a.last_balance = ev.balance_after;
            }
            let amount = ev.amount.unwrap_or(0);
            match kind {
                AccountKind::Deposited => a.deposits += i128::from(amount),
                AccountKind::Withdrawn => a.withdrawals += i128::from(amount),
                _ => {}
            }
            let Some(t) = ev.transfer_id else {
                continue;
            };
            use AccountKind::{Captured, Credited, HoldPlaced, HoldReleased};
            if !matches!(kind, HoldPlaced | Captured | Credited | HoldReleased) {
                continue;
            }
            let leg = Leg {
                account,
                amount,
                currency: self.names.id(ev.currency.unwrap_or_default()),
                seq: ev.seq,
            };
            let legs = match self.legs.get_mut(t) {
                Some(l) => l,
                None => self.legs.entry(t.to_owned()).or_default(),
            };
            match kind {
                HoldPlaced => {
                    a.live.insert(t.to_owned(), leg);
                    legs.holds.push(leg);
                }
                Captured => {
                    a.live.remove(t);
                    legs.debits.push(leg);
                }
                Credited => legs.credits.push(leg),
                _ => {
                    a.live.remove(t);
                    legs.releases.push(leg);
                }
            }
        }
    }

    /// Withdraws every leg the accounts in `accounts` contributed (their
    /// streams are about to be re-proved from their first event).
    pub fn remove_legs_of(&mut self, accounts: &std::collections::HashSet<String>) {
        let syms: Vec<Sym> = accounts
            .iter()
            .filter_map(|a| self.names.ix.get(a.as_str()).copied())
            .collect();
        self.legs.retain(|_, l| {
            for v in [&mut l.holds, &mut l.debits, &mut l.credits, &mut l.releases] {
                v.retain(|leg| !syms.contains(&leg.account));
            }
            *l != Legs::default()
        });
    }

    /// Live holds and per-currency sums from every account's facts: the
    /// inputs of convergence and global conservation.
    pub fn finish_accounts<'a>(&mut self, accounts: impl Iterator<Item = &'a AccountFacts>) {
        self.live_holds.clear();
        self.currencies.clear();
        for a in accounts {
            for (t, leg) in &a.live {
                self.live_holds.push((t.clone(), *leg));
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
    pub fn add_transfer(&mut self, s: &StreamView) {
        let mut last: Option<&EventRef> = None;
        let mut f = self.transfers.get(s.key).copied();
        for ev in s.primary() {
            if ev.kind == "created" {
                let names = &mut self.names;
                let mut sym = |v: Option<&str>| v.map(|v| names.id(v));
                f = Some(TransferFacts {
                    amount: ev.amount,
                    currency: sym(ev.currency),
                    source: sym(ev.source),
                    destination: sym(ev.destination),
                    deadline_ms: ev.deadline_ms,
                    ..f.unwrap_or_else(|| TransferFacts::new(Sym(0)))
                });
            }
            last = Some(ev);
        }
        let Some(last) = last else { return };
        let mut f = f.unwrap_or_else(|| TransferFacts::new(Sym(0)));
        f.phase = self.names.id(last.kind);
        f.terminal = matches!(last.kind, "captured" | "failed" | "released");
        f.last_seq = last.seq;
        match self.transfers.get_mut(s.key) {
            Some(t) => *t = f,
            None => {
                self.transfers.insert(s.key.to_owned(), f);
            }
        }
    }

    /// Moves `other`'s transfers (proved with its own names) into these facts.
    pub fn absorb_transfers(&mut self, other: Facts) {
        let to = self.names.absorb(&other.names);
        self.transfers.reserve(other.transfers.len());
        for (id, mut t) in other.transfers {
            t.remap(&to);
            self.transfers.insert(id, t);
        }
    }

    /// Every transfer id: those with a transfer stream, then those only legs
    /// name. Unordered: the checks sort their findings by id.
    pub fn transfer_ids(&self) -> impl Iterator<Item = &String> + '_ {
        self.transfers.keys().chain(
            self.legs
                .keys()
                .filter(|id| !self.transfers.contains_key(id.as_str())),
        )
    }
}
