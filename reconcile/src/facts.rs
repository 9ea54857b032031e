//! What the cross-stream checks need, gathered in the one pass over the
//! streams: per transfer its `created` terms and last phase (transfer
//! streams), its legs on the accounts (holds, captures, credits, releases),
//! each account's live holds at the end, and per currency the sums that
//! global conservation compares. Memory is per transfer and per account, not
//! per event, and compact: account keys, currencies and phases are interned
//! ([`Names`]), and a leg's event id is derived from its account and seq.

use std::collections::BTreeMap;
use std::hash::Hasher;

use ledger_events::event::same;
use ledger_events::{AccountKind, EventRef, Stream};
use serde::{Deserialize, Serialize};

use crate::checks::balance::hold_step;
use crate::checks::entries::{self, EntryIds, EntryKey, Posting};
use crate::checks::protocol;
use crate::chunked::Chunked;
use crate::entry_store::EntryStore;
use crate::finding::Finding;
use crate::id::Id;
use crate::names::{FxHasher, FxMap, Names, Sym};
use crate::stream::{StreamView, Tail};

/// One account event that belongs to a transfer. Its event id is
/// `account:{account}:{seq}` ([`Leg::event_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leg {
    pub account: Sym,
    pub amount: i64,
    pub currency: Sym,
    /// The other party the event names (`counterparty`; the empty name when
    /// it names none), which `consistency` compares with the transfer's.
    pub counterparty: Sym,
    pub seq: u64,
    /// When the event was committed, in whole seconds since the epoch
    /// ([`secs`]; in the 4 bytes a leg had spare): what tells a finding
    /// delivery lag could explain from one it cannot (`crate::settle`).
    pub at_s: u32,
}

/// `ms` (since the epoch) in whole seconds, clamped to what a `u32` holds
/// (1970 to 2106): the time legs and transfers keep.
pub fn secs(ms: i64) -> u32 {
    ms.div_euclid(1000).clamp(0, i64::from(u32::MAX)) as u32
}

/// The last millisecond of the second `s` ([`secs`]): the latest a row kept
/// at `s` can have been committed.
pub fn ms_of(s: u32) -> i64 {
    i64::from(s) * 1000 + 999
}

impl Leg {
    pub fn event_id(&self, names: &Names) -> String {
        ledger_events::event_id(Stream::Account, names.get(self.account), self.seq)
    }
}

/// A transfer's legs on the accounts, by kind ([`LegKind`]): its holds; its
/// debits (`captured` account events, −a on the source); its credits
/// (`credited`, +a on the destination); its releases (`hold_released`,
/// amount 0 for a tombstone). Each kind's legs in the order they were added.
///
/// Kept as one list ordered by kind, with each kind's count: a transfer has
/// two or three legs, which fit inline (120 bytes with 32-byte legs; four
/// lists of one inline leg each took more, and a table holds one per
/// transfer: millions). One allocation per transfer instead cost ~1 GB at
/// 50M events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Legs {
    legs: smallvec::SmallVec<[Leg; 3]>,
    counts: [u32; 4],
}

/// A transfer as its own stream shows it.
///
/// 48 bytes: a table holds one per transfer (millions). The terms a stream
/// may lack are kept as values with a bit each in `known` (an absent one is
/// zero, so equality is the fields'), not as `Option`s: those took 80 bytes,
/// 275 MB more at 50M events, every byte of it a fresh page to fault in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferFacts {
    amount: i64,
    deadline_ms: i64,
    pub last_seq: u64,
    currency: Sym,
    source: Sym,
    destination: Sym,
    /// Kind of the last event (the phase entered last).
    pub phase: Sym,
    /// When the stream's last row was committed ([`secs`]): the latest date
    /// any of its rows records (the same on an honest clock).
    pub last_at_s: u32,
    /// Which of the terms are known (the `KNOWN_*` bits) and whether the
    /// phase is terminal ([`TERMINAL`]).
    known: u8,
    /// The last row's reason when that row is `releasing`, which the
    /// `released` after it repeats (`checks::protocol::releasing_code`; 0
    /// for any other row).
    pub releasing: u8,
}

const KNOWN_AMOUNT: u8 = 1;
const KNOWN_DEADLINE: u8 = 1 << 1;
const KNOWN_CURRENCY: u8 = 1 << 2;
const KNOWN_SOURCE: u8 = 1 << 3;
const KNOWN_DESTINATION: u8 = 1 << 4;
/// Not a term: the phase is captured, failed or released.
const TERMINAL: u8 = 1 << 5;

impl Default for TransferFacts {
    fn default() -> TransferFacts {
        TransferFacts::new(Sym(0))
    }
}

impl TransferFacts {
    /// Facts before any `created` event (a stream whose first rows are missing).
    pub fn new(phase: Sym) -> TransferFacts {
        TransferFacts {
            amount: 0,
            deadline_ms: 0,
            last_seq: 0,
            currency: Sym(0),
            source: Sym(0),
            destination: Sym(0),
            phase,
            last_at_s: 0,
            known: 0,
            releasing: 0,
        }
    }

    fn has(&self, bit: u8) -> bool {
        self.known & bit != 0
    }

    /// Sets `bit` when `value` is known, and the field to it (or to
    /// `none`, so that absent fields compare equal).
    fn put<T>(known: &mut u8, bit: u8, field: &mut T, value: Option<T>, none: T) {
        *known &= !bit;
        *field = match value {
            Some(v) => {
                *known |= bit;
                v
            }
            None => none,
        };
    }

    /// From the `created` event: the amount.
    pub fn amount(&self) -> Option<i64> {
        self.has(KNOWN_AMOUNT).then_some(self.amount)
    }

    pub fn currency(&self) -> Option<Sym> {
        self.has(KNOWN_CURRENCY).then_some(self.currency)
    }

    pub fn source(&self) -> Option<Sym> {
        self.has(KNOWN_SOURCE).then_some(self.source)
    }

    pub fn destination(&self) -> Option<Sym> {
        self.has(KNOWN_DESTINATION).then_some(self.destination)
    }

    pub fn deadline_ms(&self) -> Option<i64> {
        self.has(KNOWN_DEADLINE).then_some(self.deadline_ms)
    }

    pub fn set_amount(&mut self, v: Option<i64>) {
        Self::put(&mut self.known, KNOWN_AMOUNT, &mut self.amount, v, 0);
    }

    pub fn set_currency(&mut self, v: Option<Sym>) {
        Self::put(
            &mut self.known,
            KNOWN_CURRENCY,
            &mut self.currency,
            v,
            Sym(0),
        );
    }

    pub fn set_source(&mut self, v: Option<Sym>) {
        Self::put(&mut self.known, KNOWN_SOURCE, &mut self.source, v, Sym(0));
    }

    pub fn set_destination(&mut self, v: Option<Sym>) {
        Self::put(
            &mut self.known,
            KNOWN_DESTINATION,
            &mut self.destination,
            v,
            Sym(0),
        );
    }

    pub fn set_deadline_ms(&mut self, v: Option<i64>) {
        Self::put(&mut self.known, KNOWN_DEADLINE, &mut self.deadline_ms, v, 0);
    }

    /// Whether the phase is captured, failed or released.
    pub fn is_terminal(&self) -> bool {
        self.has(TERMINAL)
    }

    pub fn set_terminal(&mut self, terminal: bool) {
        self.known = if terminal {
            self.known | TERMINAL
        } else {
            self.known & !TERMINAL
        };
    }

    fn remap(&mut self, to: &[Sym]) {
        for (bit, s) in [
            (KNOWN_CURRENCY, &mut self.currency),
            (KNOWN_SOURCE, &mut self.source),
            (KNOWN_DESTINATION, &mut self.destination),
        ] {
            if self.known & bit != 0 {
                *s = to[s.0 as usize];
            }
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
    /// (seq, balance_after, held_after) of the last well-formed row, which
    /// the balance refold continues from.
    pub fold: Option<(u64, i64, i64)>,
    /// The currency and overdraft limit of the last row (no account event
    /// changes them: `opened` sets them), which the next row must repeat.
    pub terms: Option<AccountTerms>,
    /// The overdraft limit the account was opened with (its seq-1 row's),
    /// which `checks::overdraft` judges every row by (or by the row's own,
    /// when lower): a row that records another is `terms_changed`, not a
    /// new limit.
    pub limit: Option<i64>,
    /// Where the account's life stands after its last row, which the next
    /// row must be a step of (see `checks::completeness::check_account_life`).
    pub life: Option<AccountLife>,
    pub currency: Option<String>,
    pub last_balance: Option<i64>,
    pub deposits: i128,
    pub withdrawals: i128,
    /// Holds live after the last event, by transfer id.
    pub live: LiveHolds,
    /// A gap, a conflicting version or a malformed row was read in the
    /// stream since its last row that records no hold (`held_after` 0): a
    /// hold may be live that `live` lacks, so a capture or release without
    /// one is not judged (`checks::balance::hold_step`). Absent in
    /// checkpoints written before it (read as false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holds_unknown: bool,
    /// The deposit and withdrawal entry ids this run added
    /// (`checks::entries`); earlier nights' are in the entry store.
    #[serde(skip)]
    pub entries: EntryIds,
    /// The generation from which the entry store's segments hold this
    /// account's ids (`entry_store`); `None` while they are all in
    /// `entries`, because its state started in this run (a new account, or
    /// one re-proved from its first event). Kept in the checkpoint beside
    /// the account's state.
    #[serde(skip)]
    pub entries_since: Option<u64>,
}

/// An account's live holds, by transfer id. A hold is placed and then
/// captured or released for nearly every transfer, so this map takes an
/// insert and a remove for nearly every transfer (~9M each at 50M events).
/// A hash map: as a `BTreeMap`, each was a walk of string comparisons and
/// a move of the removed leg (~3 % of a 50M proof's samples in the two;
/// 50M, 3 interleaved pairs: 37.9 → 36.7 s of CPU). Written (in a
/// checkpoint) as a map in id order, as the `BTreeMap` was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveHolds(FxMap<String, Leg>);

impl LiveHolds {
    /// Places the hold of transfer `t` (replacing any it had).
    fn insert(&mut self, t: String, leg: Leg) {
        self.0.insert(t, leg);
    }

    /// Removes the hold of transfer `t`; returns its key, to reuse.
    #[cfg(test)]
    fn remove(&mut self, t: &str) -> Option<String> {
        self.take(t).map(|(t, _)| t)
    }

    /// Removes the hold of transfer `t`; returns its key (to reuse) and leg.
    fn take(&mut self, t: &str) -> Option<(String, Leg)> {
        self.0.remove_entry(t)
    }

    /// The amount of transfer `t`'s live hold.
    fn amount(&self, t: &str) -> Option<i64> {
        self.0.get(t).map(|leg| leg.amount)
    }

    /// Every live hold, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Leg)> {
        self.0.iter()
    }
}

impl FromIterator<(String, Leg)> for LiveHolds {
    fn from_iter<I: IntoIterator<Item = (String, Leg)>>(holds: I) -> Self {
        LiveHolds(holds.into_iter().collect())
    }
}

impl Serialize for LiveHolds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut sorted: Vec<(&String, &Leg)> = self.0.iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        s.collect_map(sorted)
    }
}

impl<'de> Deserialize<'de> for LiveHolds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        FxMap::deserialize(d).map(LiveHolds)
    }
}

/// An account's last row's seq, and its status after it when known
/// (`Some(true)`: frozen; `None`: not known, the stream has a gap since its
/// last `opened`, `frozen` or `unfrozen`, or no `opened`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountLife {
    pub last_seq: u64,
    pub frozen: Option<bool>,
}

/// An account row's currency and overdraft limit, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountTerms {
    pub currency: Option<String>,
    pub overdraft_limit: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Facts {
    /// Account keys, currencies and phases the legs and transfers name.
    pub names: Names,
    pub transfers: Transfers,
    pub legs: LegsTable,
    /// Ids that legs name but no transfer stream has, sorted, and for each
    /// transfer stream (in id order) its legs' row: set by
    /// [`Facts::finish_transfers`].
    pub orphan_legs: Vec<String>,
    legs_of: Vec<Option<u32>>,
    /// (transfer id, leg) of every hold still live at its account's last event.
    pub live_holds: Vec<(String, Leg)>,
    pub currencies: BTreeMap<String, CurrencySums>,
    /// The phases and currencies legs and transfers name, looked up again
    /// and again.
    recent: Recent,
    /// Strings of holds no longer live, for the next holds' ids.
    spare_ids: SpareIds,
    /// The deposits and withdrawals of the account being added.
    postings: Vec<Posting>,
    /// The key of the accounts' entry-id fingerprints (`checks::entries`).
    pub entry_key: EntryKey,
    /// The entry ids of earlier nights (`entry_store`), and the first error
    /// reading them (the run stops on it once the table is proved).
    pub entry_store: EntryStore,
    pub entry_store_error: Option<String>,
}

/// How many strings [`SpareIds`] keeps.
const SPARE_IDS: usize = 64;

/// Strings to reuse for the transfer ids of live holds. A hold is placed
/// and then captured or released for nearly every transfer (~9M times at
/// 50M events), each keyed by its transfer id in its account's live holds:
/// a string taken from here and given back costs no allocation.
#[derive(Debug, Default)]
struct SpareIds(Vec<String>);

impl SpareIds {
    /// A string holding `s`.
    fn take(&mut self, s: &str) -> String {
        let mut id = self.0.pop().unwrap_or_default();
        id.clear();
        id.push_str(s);
        id
    }

    /// Keeps the key of a removed entry, if any, for a later `take`.
    fn give(&mut self, removed: Option<String>) {
        if let Some(id) = removed {
            if self.0.len() < SPARE_IDS {
                self.0.push(id);
            }
        }
    }
}

/// How many names [`Recent`] remembers.
const RECENT_NAMES: usize = 8;

/// A few names looked up again and again (the currency of a leg, a
/// transfer's phase and currency: a handful of distinct values for millions
/// of events), each remembered
/// by its symbol and compared with the table's name for it, so a remembered
/// symbol can never be stale.
#[derive(Debug, Default)]
struct Recent {
    syms: [Option<Sym>; RECENT_NAMES],
    /// The slot the next new name takes.
    next: usize,
}

impl Recent {
    fn id(&mut self, names: &mut Names, name: &str) -> Sym {
        if let Some(&s) = self
            .syms
            .iter()
            .flatten()
            .find(|&&s| same(names.get(s).as_bytes(), name.as_bytes()))
        {
            return s;
        }
        let s = names.id(name);
        self.syms[self.next] = Some(s);
        self.next = (self.next + 1) % RECENT_NAMES;
        s
    }
}

/// One transfer stream's proof state: where its chain stopped, and its facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferState {
    pub tail: Tail,
    pub facts: TransferFacts,
}

/// Every transfer stream's state, dense and sorted by id. A table's streams
/// arrive in id order, so a pass appends ([`Transfers::put`]) and its end
/// merges the pass into the sorted rows ([`Transfers::end_pass`]): no hash
/// table of millions of entries to grow and rehash.
#[derive(Debug, Default)]
pub struct Transfers {
    rows: Vec<(Id, TransferState)>,
    /// Each row's id's hash [`prefix`], in step with `rows`: the keys the
    /// join to the legs sorts ([`join_in_hash_order`]), taken as each stream
    /// is put (its id in the cache) instead of from every row's id at the
    /// join (at 50M events a read of ~1.3 GB of rows for 36 MB of keys).
    prefixes: Vec<u32>,
    pass: Vec<(Id, TransferState)>,
    /// The pass's rows' prefixes, in step with `pass`.
    pass_prefixes: Vec<u32>,
    /// Whether a stream was put in the pass at or before the one put
    /// before it (then the pass is sorted at its end). Decided as each
    /// stream is put, when the last id is still in the cache: checked at
    /// the end, over millions of ids, it cost ~0.15 s at 50M events at the
    /// end of the transfer thread's pass.
    pass_out_of_order: bool,
    /// The id of every row put or loaded while not terminal (with repeats,
    /// and ids whose row has since become terminal or been removed):
    /// [`Transfers::open`] re-reads each. Few (the sagas in progress), so
    /// finding them does not walk millions of rows (twice, ~0.14 s at 50M
    /// events, for none).
    maybe_open: Vec<Id>,
}

impl Transfers {
    pub fn from_sorted(mut rows: Vec<(Id, TransferState)>) -> Transfers {
        if !rows.is_sorted_by(|a, b| a.0 < b.0) {
            rows.sort_by(|a, b| a.0.cmp(&b.0));
            rows.dedup_by(|a, b| a.0 == b.0);
        }
        Transfers {
            prefixes: prefixes_of(&rows),
            maybe_open: rows
                .iter()
                .filter(|(_, s)| !s.facts.is_terminal())
                .map(|(id, _)| id.clone())
                .collect(),
            rows,
            pass: Vec::new(),
            pass_prefixes: Vec::new(),
            pass_out_of_order: false,
        }
    }

    /// The rows that are not terminal, in id order, with their places
    /// (the order of [`Transfers::iter`]).
    pub fn open(&self) -> Vec<(usize, &str, &TransferState)> {
        let mut ids: Vec<&str> = self.maybe_open.iter().map(|id| &**id).collect();
        ids.sort_unstable();
        ids.dedup();
        // Every row of each id (a pass that put an id twice leaves two).
        ids.into_iter()
            .flat_map(|id| {
                let from = self.rows.partition_point(|r| *r.0 < *id);
                let same = self.rows[from..].iter().take_while(move |r| *r.0 == *id);
                (from..).zip(same)
            })
            .filter(|(_, (_, s))| !s.facts.is_terminal())
            .map(|(k, (id, s))| (k, &**id, s))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn state(&self, id: &str) -> Option<&TransferState> {
        self.rows
            .binary_search_by(|r| (*r.0).cmp(id))
            .ok()
            .map(|i| &self.rows[i].1)
    }

    pub fn get(&self, id: &str) -> Option<&TransferFacts> {
        self.state(id).map(|s| &s.facts)
    }

    /// In id order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TransferState)> + '_ {
        self.rows.iter().map(|(id, s)| (&**id, s))
    }

    /// Room for a pass of up to `n` streams (address space only: pages are
    /// touched as they fill).
    pub fn reserve_pass(&mut self, n: usize) {
        self.pass.reserve(n);
        self.pass_prefixes.reserve(n);
    }

    /// The new state of the stream `id`, proved in this pass.
    pub fn put(&mut self, id: &str, state: TransferState) {
        if self.pass.last().is_some_and(|(last, _)| **last >= *id) {
            self.pass_out_of_order = true;
        }
        if !state.facts.is_terminal() {
            self.maybe_open.push(id.into());
        }
        self.pass.push((id.into(), state));
        self.pass_prefixes.push(prefix(fx(id)));
    }

    /// Merges the pass into the rows (a stream proved in the pass replaces
    /// its old state).
    pub fn end_pass(&mut self) {
        let mut pass = std::mem::take(&mut self.pass);
        let mut prefixes = std::mem::take(&mut self.pass_prefixes);
        if std::mem::take(&mut self.pass_out_of_order) {
            pass.sort_by(|a, b| a.0.cmp(&b.0));
            prefixes = prefixes_of(&pass);
        }
        debug_assert!(pass.is_sorted_by(|a, b| a.0 <= b.0));
        self.merge_sorted(pass, prefixes);
    }

    /// Merges `pass` (sorted; `prefixes` in step with it) into the rows; a
    /// row of `pass` replaces the row of its id.
    fn merge_sorted(&mut self, mut pass: Vec<(Id, TransferState)>, mut prefixes: Vec<u32>) {
        debug_assert_eq!(pass.len(), prefixes.len());
        if pass.is_empty() {
            return;
        }
        if self.rows.is_empty() {
            self.rows = pass;
            self.prefixes = prefixes;
            return;
        }
        // Merged in place from the back: the rows grow by the pass (not a
        // second copy of millions of rows) and each row moves at most once.
        // [0, old) old rows not yet placed, [old, free) garbage (room, or an
        // old row a new one replaces), [free, len) placed rows.
        // The prefixes move with their rows.
        let mut old = self.rows.len();
        self.rows.resize_with(old + pass.len(), Default::default);
        self.prefixes.resize(old + pass.len(), 0);
        let mut free = self.rows.len();
        while let (Some(new), Some(p)) = (pass.pop(), prefixes.pop()) {
            while old > 0 && self.rows[old - 1].0 > new.0 {
                old -= 1;
                free -= 1;
                self.rows.swap(old, free);
                self.prefixes.swap(old, free);
            }
            if old > 0 && self.rows[old - 1].0 == new.0 {
                old -= 1; // re-proved: the old state is dropped
            }
            free -= 1;
            self.rows[free] = new;
            self.prefixes[free] = p;
        }
        self.rows.drain(old..free);
        self.prefixes.drain(old..free);
    }

    /// Drops the states of the streams `ids` (about to be re-proved).
    pub fn remove(&mut self, ids: &std::collections::HashSet<&str>) {
        let (mut row, mut kept) = (0, 0);
        let prefixes = &mut self.prefixes;
        self.rows.retain(|(id, _)| {
            let keep = !ids.contains(&**id);
            if keep {
                prefixes[kept] = prefixes[row];
                kept += 1;
            }
            row += 1;
            keep
        });
        prefixes.truncate(kept);
    }

    /// Adds `other`'s rows (ids not in these; see [`Transfers::end_pass`]).
    /// They are sorted already (the rows always are): not checked again, a
    /// string comparison per row (~0.1 s at 50M events, on one thread).
    pub fn merge(&mut self, other: Transfers) {
        debug_assert!(other.pass.is_empty(), "a pass not ended");
        self.maybe_open.extend(other.maybe_open);
        self.merge_sorted(other.rows, other.prefixes);
    }

    /// Every row's syms through `to`. Millions of rows on two threads: a
    /// walk of every row (~1.3 GB at 50M events) between the end of the
    /// tables' passes and the checks, when the other core is idle (50M:
    /// 0.27 → 0.14 s).
    fn remap(&mut self, to: &[Sym]) {
        let remap = |rows: &mut [(Id, TransferState)]| {
            for (_, s) in rows {
                s.facts.remap(to);
            }
        };
        if self.rows.len() < REMAP_TWO_THREADS_ROWS {
            return remap(&mut self.rows);
        }
        let half = self.rows.len() / 2;
        let (low, high) = self.rows.split_at_mut(half);
        crate::threads::both(|| remap(low), || remap(high));
    }
}

/// Each row's id's hash [`prefix`].
fn prefixes_of(rows: &[(Id, TransferState)]) -> Vec<u32> {
    rows.iter().map(|(id, _)| prefix(fx(id))).collect()
}

/// From this many rows [`Transfers::remap`] splits its walk over two threads.
const REMAP_TWO_THREADS_ROWS: usize = 65_536;

/// Per transfer id, the legs the account streams hold: dense rows, found
/// through an index-only hash table (4 bytes a slot, so growing it moves
/// little), or, when the rows are in hash order, through their prefixes.
///
/// A table filled from nothing (a full run's account pass) first only logs
/// its legs ([`LegsTable::start_log`]): finding each leg's row as it comes
/// costs a few cache misses per leg in a table of millions of rows, while
/// appending to a log costs none. [`LegsTable::end_log`] then sorts the log
/// by the top 32 bits of its ids' hash (a stable radix sort, so each
/// transfer keeps its legs in the order they came) and builds the rows group
/// by group, in ascending order of that prefix: which lets
/// [`Facts::finish_transfers`] join the transfers to their legs by walking
/// both in hash order instead of a random lookup per transfer. Rows so built
/// are not indexed: a row is found from its prefix ([`PrefixDirectory`]), and
/// the index is built only if a row is added out of order later. Indexing
/// each row as it was built cost a cache miss or two per transfer: ~0.6 s of
/// the account thread's 2.3 s in `end_log` at 50M events.
#[derive(Default)]
pub struct LegsTable {
    /// In chunks ([`Chunked`]): `end_log` builds them as it frees the log,
    /// and a chunk takes the log's freed pages instead of fresh ones.
    rows: Chunked<(Id, Legs)>,
    /// Every row, unless the rows are in prefix order (then empty, and rows
    /// are found through `directory`).
    index: hashbrown::HashTable<u32>,
    log: Option<LegLog>,
    /// When the rows are in ascending order of their ids' hash prefix (as
    /// `end_log` builds them from nothing), each row's prefix; otherwise
    /// empty.
    prefixes: Vec<u32>,
    /// Where the rows of each range of prefixes start, while the rows are
    /// found by prefix (the index empty).
    directory: PrefixDirectory,
    /// Whether every row is known to hold a leg: as `end_log` builds them
    /// (a row for each id with legs); anything else that changes the rows
    /// clears it, and [`LegsTable::rows_with_legs`] then counts.
    every_row_has_legs: bool,
}

/// For rows in ascending order of prefix: the first row of each value of the
/// prefixes' top `bits` bits (and one past the last row), so that a row is
/// found in a range of a few rows (two to four on average) rather than by a
/// binary search of millions.
#[derive(Debug, Default)]
struct PrefixDirectory {
    bits: u32,
    starts: Vec<u32>,
}

impl PrefixDirectory {
    /// The directory of `prefixes` (ascending).
    fn of(prefixes: &[u32]) -> PrefixDirectory {
        // More than a quarter and at most half as many ranges as rows (two
        // to four rows a range); 4 bytes each, so at most half the size of
        // the prefixes themselves (17 MB for 9M transfers).
        let bits = (usize::BITS - (prefixes.len() / 4).leading_zeros()).clamp(1, 24);
        let shift = 32 - bits;
        let mut starts = Vec::with_capacity((1 << bits) + 1);
        for (i, &p) in prefixes.iter().enumerate() {
            let top = (p >> shift) as usize;
            while starts.len() <= top {
                starts.push(i as u32);
            }
        }
        starts.resize((1 << bits) + 1, prefixes.len() as u32);
        PrefixDirectory { bits, starts }
    }

    /// The rows whose prefix may be `p`.
    fn range(&self, p: u32) -> std::ops::Range<usize> {
        let top = (p >> (32 - self.bits)) as usize;
        self.starts[top] as usize..self.starts[top + 1] as usize
    }
}

/// Which list of a transfer's [`Legs`] a leg goes to (in the order the
/// lists are kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegKind {
    Hold = 0,
    Debit = 1,
    Credit = 2,
    Release = 3,
}

impl LegKind {
    pub const ALL: [LegKind; 4] = [
        LegKind::Hold,
        LegKind::Debit,
        LegKind::Credit,
        LegKind::Release,
    ];
}

impl Legs {
    /// No legs: what a transfer no account event names has.
    pub const NONE: &'static Legs = &Legs {
        legs: smallvec::SmallVec::new_const(),
        counts: [0; 4],
    };

    /// The legs of each kind, in [`LegKind`] order.
    pub fn from_lists<L: IntoIterator<Item = Leg>>(lists: [L; 4]) -> Legs {
        let mut l = Legs::default();
        for (kind, list) in LegKind::ALL.into_iter().zip(lists) {
            for leg in list {
                l.push(kind, leg);
            }
        }
        l
    }

    /// Where the legs of `kind` are in `legs`.
    fn range(&self, kind: LegKind) -> std::ops::Range<usize> {
        let k = kind as usize;
        let start: u32 = self.counts[..k].iter().sum();
        start as usize..(start + self.counts[k]) as usize
    }

    /// The legs of `kind`, in the order added.
    pub fn of(&self, kind: LegKind) -> &[Leg] {
        &self.legs[self.range(kind)]
    }

    /// Every leg, by kind.
    pub fn all(&self) -> &[Leg] {
        &self.legs
    }

    pub fn holds(&self) -> &[Leg] {
        self.of(LegKind::Hold)
    }

    pub fn debits(&self) -> &[Leg] {
        self.of(LegKind::Debit)
    }

    pub fn credits(&self) -> &[Leg] {
        self.of(LegKind::Credit)
    }

    pub fn releases(&self) -> &[Leg] {
        self.of(LegKind::Release)
    }

    /// Adds `leg` after the others of its kind.
    pub fn push(&mut self, kind: LegKind, leg: Leg) {
        let end = self.range(kind).end;
        // Nearly always the last kind so far: an append (`insert` would
        // call memmove even to move nothing).
        if end == self.legs.len() {
            self.legs.push(leg);
        } else {
            self.legs.insert(end, leg);
        }
        self.counts[kind as usize] += 1;
    }

    /// These legs with each kind's in the order of their accounts' names,
    /// then seq: the order the checks judge them in. The order they were
    /// added in depends on the order accounts were proved (a resumed run
    /// re-proves some accounts after others), and no finding, nor the order
    /// of a transfer's findings, may. Borrowed when already so (a transfer
    /// has at most one leg of a kind unless it is damaged).
    pub fn canonical(&self, names: &Names) -> std::borrow::Cow<'_, Legs> {
        // Nearly every transfer: at most one leg of each kind.
        if self.counts.iter().all(|&c| c <= 1) {
            return std::borrow::Cow::Borrowed(self);
        }
        let key = |l: &Leg| (names.get(l.account), l.seq);
        let ordered = LegKind::ALL
            .into_iter()
            .all(|kind| self.of(kind).windows(2).all(|w| key(&w[0]) <= key(&w[1])));
        if ordered {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut sorted = self.clone();
        for kind in LegKind::ALL {
            let range = sorted.range(kind);
            sorted.legs[range].sort_by(|a, b| key(a).cmp(&key(b)));
        }
        std::borrow::Cow::Owned(sorted)
    }

    /// Keeps only the legs `keep` accepts.
    fn retain(&mut self, keep: impl Fn(&Leg) -> bool) {
        let mut at = 0;
        for count in &mut self.counts {
            let end = at + *count as usize;
            // The kept legs of this kind move forward, in order.
            let mut kept = at;
            for r in at..end {
                if keep(&self.legs[r]) {
                    self.legs.swap(kept, r);
                    kept += 1;
                }
            }
            self.legs.drain(kept..end);
            *count = (kept - at) as u32;
            at = kept;
        }
    }
}

/// Legs not yet in rows, in [`LOG_BUCKETS`] buckets by the top bits of
/// their ids' hash prefix.
///
/// [`LegsTable::end_log`] reads the legs in hash order, which is a random
/// read of a log entry and of its id for each leg. In one log of millions
/// (~800 MB at 50M events) each was a miss to memory and to the TLB; a
/// bucket holds a 256th of the log (~3 MB at 50M), so the reads of one
/// bucket stay in the cache.
struct LegLog {
    buckets: Vec<LogBucket>,
}

/// Buckets of a [`LegLog`] (a power of two; a bucket is chosen by the top
/// bits of the prefix).
const LOG_BUCKETS: usize = 256;

/// One bucket of a [`LegLog`]: its legs, each with its transfer id's place
/// in `ids`.
#[derive(Default)]
struct LogBucket {
    entries: Vec<Logged>,
    ids: IdArena,
}

impl LegLog {
    /// Room for about `legs` legs in all.
    fn with_capacity(legs: usize) -> LegLog {
        // A little over an even share each: a bucket grown by doubling near
        // its end would copy what it holds.
        let each = legs / LOG_BUCKETS + legs / LOG_BUCKETS / 16;
        LegLog {
            buckets: (0..LOG_BUCKETS)
                .map(|_| LogBucket {
                    entries: Vec::with_capacity(each),
                    ids: IdArena::default(),
                })
                .collect(),
        }
    }

    /// The bucket of the prefix `p`.
    fn bucket(&mut self, p: u32) -> &mut LogBucket {
        &mut self.buckets[(p >> (32 - LOG_BUCKETS.trailing_zeros())) as usize]
    }
}

/// One logged leg (48 bytes: a log holds one per leg of a full run, ~20M
/// at 50M events).
#[derive(Clone, Copy)]
struct Logged {
    leg: Leg,
    /// [`prefix`] of the transfer id's hash: the order rows are built in.
    prefix: u32,
    /// Where the transfer id is in the log's [`IdArena`], and its length.
    at: u32,
    len: u32,
    kind: LegKind,
}

/// Bytes of one [`IdArena`] chunk (as a power of two): 64 KiB, as a log
/// has one arena per bucket.
const ARENA_CHUNK_BITS: u32 = 16;

/// Strings appended into chunks that never move. A growing `String` copies
/// everything it holds at each doubling: at 50M events the leg log's ~300 MB
/// of ids touched about three times as much fresh memory, and fresh pages
/// are what the proof's page faults cost (docs/BENCHMARKS.md). A place is
/// the chunk's index (16 bits) and the offset in it (16 bits); an id longer
/// than a chunk gets a chunk of its own.
#[derive(Default)]
struct IdArena {
    chunks: Vec<String>,
}

impl IdArena {
    /// Appends `s`; returns its place.
    fn push(&mut self, s: &str) -> u32 {
        // Each place's offset is under 2²⁰: a chunk takes strings only while
        // its length is (an oversized chunk is full with its one string).
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.len() < 1 << ARENA_CHUNK_BITS && c.capacity() - c.len() >= s.len());
        if !fits {
            self.chunks
                .push(String::with_capacity(s.len().max(1 << ARENA_CHUNK_BITS)));
        }
        let chunk = self.chunks.len() - 1;
        let c = &mut self.chunks[chunk];
        let at = c.len();
        c.push_str(s);
        let chunk = u32::try_from(chunk)
            .ok()
            .filter(|&n| n < 1 << (32 - ARENA_CHUNK_BITS))
            .expect("a leg log under 4 GiB of ids");
        chunk << ARENA_CHUNK_BITS | at as u32
    }

    fn split(place: u32) -> (usize, usize) {
        (
            (place >> ARENA_CHUNK_BITS) as usize,
            (place & ((1 << ARENA_CHUNK_BITS) - 1)) as usize,
        )
    }

    /// The `len` bytes at `place` (from [`IdArena::push`]).
    fn get(&self, place: u32, len: u32) -> &str {
        let (chunk, at) = IdArena::split(place);
        &self.chunks[chunk][at..at + len as usize]
    }

    /// The address of `place`, to prefetch.
    fn ptr(&self, place: u32) -> *const u8 {
        let (chunk, at) = IdArena::split(place);
        self.chunks[chunk].as_ptr().wrapping_add(at)
    }
}

/// How many legs ahead [`LegsTable::end_log`] prefetches a leg's id (and
/// twice as many, its log entry).
const LOG_PREFETCH_AHEAD: usize = 8;

/// How many rows ahead [`Facts::add_account`] prefetches the name slot of a
/// leg's counterparty.
const COUNTERPARTY_PREFETCH_AHEAD: usize = 8;

/// How many transfers ahead [`Facts::transfer_ids_in`] prefetches the row of
/// a transfer's legs.
const LEGS_PREFETCH_AHEAD: usize = 8;

/// Hints that the memory at `at` will be read soon (a no-op off x86_64).
#[inline(always)]
pub(crate) fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86_64's baseline, and a prefetch only
        // hints the cache: it reads nothing and never faults, whatever the
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// [`prefetch`] of every cache line `value` spans: a row of a few dozen
/// bytes or more, at any offset, straddles two or three lines, and
/// prefetching its first byte alone left the rest a miss at the read (at 50M
/// events, two thirds of `transfer_conservation::check_transfer`'s samples
/// were one load of a legs row's second line). A slice's every line too.
#[inline(always)]
pub(crate) fn prefetch_whole<T: ?Sized>(value: &T) {
    let at = (value as *const T).cast::<u8>();
    let size = std::mem::size_of_val(value);
    let mut offset = 0;
    while offset < size {
        prefetch(at.wrapping_add(offset));
        offset += 64;
    }
    // The last line, when the value does not start on a line.
    if size > 0 {
        prefetch(at.wrapping_add(size - 1));
    }
}

/// Sorts `keys` by `key`, stably: least significant byte first, one
/// counting pass per byte (the four bytes' counts taken in one read).
fn radix_sort<T: Copy>(keys: &mut Vec<T>, key: impl Fn(&T) -> u32) {
    radix_sort_with(keys, &mut Vec::new(), key);
}

/// [`radix_sort`] with `scratch` as its second buffer (its contents are
/// overwritten; its room is kept for the next sort).
fn radix_sort_with<T: Copy>(keys: &mut Vec<T>, scratch: &mut Vec<T>, key: impl Fn(&T) -> u32) {
    let mut counts = [[0usize; 256]; 4];
    for k in keys.iter() {
        let v = key(k);
        for (byte, c) in counts.iter_mut().enumerate() {
            c[((v >> (byte * 8)) & 0xff) as usize] += 1;
        }
    }
    let out = scratch;
    out.clear();
    out.extend_from_slice(keys);
    for (byte, c) in counts.iter().enumerate() {
        if c.contains(&keys.len()) {
            continue; // one value of this byte: the pass would move nothing
        }
        let shift = byte * 8;
        let mut at = [0usize; 256];
        for i in 1..256 {
            at[i] = at[i - 1] + c[i - 1];
        }
        for k in keys.iter() {
            let b = ((key(k) >> shift) & 0xff) as usize;
            out[at[b]] = *k;
            at[b] += 1;
        }
        std::mem::swap(keys, out);
    }
}

impl std::fmt::Debug for LegsTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LegsTable({} transfers)", self.rows.len())
    }
}

fn fx(s: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(s.as_bytes());
    h.finish()
}

/// The top 32 bits of an id's [`fx`] hash: the order [`LegsTable::end_log`]
/// builds rows in, and [`Facts::finish_transfers`] joins in.
fn prefix(hash: u64) -> u32 {
    (hash >> 32) as u32
}

impl LegsTable {
    /// The table of `rows`, whose ids are distinct (a checkpoint's, written
    /// from a table): each is indexed without first being looked up.
    pub fn from_rows(rows: Vec<(Id, Legs)>) -> LegsTable {
        let mut index = hashbrown::HashTable::with_capacity(rows.len());
        for (i, (id, _)) in rows.iter().enumerate() {
            let i = u32::try_from(i).expect("fewer than 2³² transfers");
            index.insert_unique(fx(id), i, |&j| fx(&rows[j as usize].0));
        }
        LegsTable {
            rows: rows.into_iter().collect(),
            index,
            log: None,
            prefixes: Vec::new(),
            directory: PrefixDirectory::default(),
            every_row_has_legs: false,
        }
    }

    /// Logs the legs added from now on instead of finding their rows (see
    /// the type's docs); only for an empty table. Nothing may be read from
    /// the table until [`LegsTable::end_log`].
    pub fn start_log(&mut self, legs: usize) {
        // `end_log` builds the rows in prefix order from nothing.
        assert!(self.rows.is_empty(), "a legs table logs only from empty");
        self.log = Some(LegLog::with_capacity(legs));
    }

    /// Adds a leg of the transfer `id`.
    pub fn add(&mut self, id: &str, kind: LegKind, leg: Leg) {
        match &mut self.log {
            Some(log) => {
                let len = u32::try_from(id.len()).expect("a transfer id under 4 GiB");
                let prefix = prefix(fx(id));
                let bucket = log.bucket(prefix);
                bucket.entries.push(Logged {
                    leg,
                    prefix,
                    at: bucket.ids.push(id),
                    len,
                    kind,
                });
            }
            None => self.entry(id).push(kind, leg),
        }
    }

    /// Builds the rows of the logged legs (the table is empty: see
    /// [`LegsTable::start_log`]), in ascending order of their ids' hash
    /// prefix, recorded in `prefixes`; the rows are then found by prefix, not
    /// indexed (the type's docs).
    pub fn end_log(&mut self) {
        let Some(log) = self.log.take() else {
            return;
        };
        let legs: usize = log.buckets.iter().map(|b| b.entries.len()).sum();
        let mut prefixes = Vec::with_capacity(legs / 2);
        let (mut keys, mut scratch) = (Vec::new(), Vec::new());
        // Rows of the current prefix (almost always one id; more on a
        // collision of the top 32 bits).
        let mut group: Vec<u32> = Vec::new();
        // Bucket by bucket, in ascending order of prefix; each bucket's legs
        // are freed once in rows.
        for bucket in log.buckets {
            let LogBucket { entries, ids } = bucket;
            keys.clear();
            keys.extend(
                entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e.prefix, i as u32)),
            );
            radix_sort_with(&mut keys, &mut scratch, |k| k.0);
            let mut current = None;
            for (j, &(p, i)) in keys.iter().enumerate() {
                // In hash order, each leg's entry and id are random reads in
                // the bucket: prefetched, the entry first (the id's place is
                // in it).
                if let Some(&(_, ahead)) = keys.get(j + 2 * LOG_PREFETCH_AHEAD) {
                    prefetch(&entries[ahead as usize]);
                }
                if let Some(&(_, ahead)) = keys.get(j + LOG_PREFETCH_AHEAD) {
                    prefetch(ids.ptr(entries[ahead as usize].at));
                }
                let e = &entries[i as usize];
                let id = ids.get(e.at, e.len);
                if current != Some(p) {
                    current = Some(p);
                    group.clear();
                }
                let row = match group.iter().find(|&&r| &*self.rows[r as usize].0 == id) {
                    Some(&r) => r,
                    None => {
                        let r = u32::try_from(self.rows.len()).expect("fewer than 2³² transfers");
                        self.rows.push((id.into(), Legs::default()));
                        group.push(r);
                        prefixes.push(p);
                        r
                    }
                };
                self.rows[row as usize].1.push(e.kind, e.leg);
            }
        }
        self.directory = PrefixDirectory::of(&prefixes);
        self.prefixes = prefixes;
        self.every_row_has_legs = true;
    }

    /// How many rows hold a leg: at 50M events, counting them was a walk
    /// of ~1.2 GB of rows on one thread (~55 ms) between the passes and the
    /// checks, for a number a table built from its log knows.
    pub fn rows_with_legs(&self) -> usize {
        if self.every_row_has_legs {
            debug_assert!(self.rows.iter().all(|(_, l)| *l != Legs::default()));
            return self.rows.len();
        }
        self.rows
            .iter()
            .filter(|(_, l)| *l != Legs::default())
            .count()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&Legs> {
        self.find(id).map(|i| &self.rows[i as usize].1)
    }

    /// The row of `id`'s legs.
    pub fn find(&self, id: &str) -> Option<u32> {
        self.find_hashed(id, fx(id))
    }

    /// [`LegsTable::find`], given `id`'s [`fx`] hash.
    fn find_hashed(&self, id: &str, hash: u64) -> Option<u32> {
        let rows = &self.rows;
        if !self.indexed() {
            let p = prefix(hash);
            return self
                .directory
                .range(p)
                .find(|&i| self.prefixes[i] == p && &*rows[i].0 == id)
                .map(|i| i as u32);
        }
        self.index
            .find(hash, |&i| &*rows[i as usize].0 == id)
            .copied()
    }

    /// Whether every row is in the index (otherwise the rows are in prefix
    /// order and found through the directory).
    fn indexed(&self) -> bool {
        self.index.len() == self.rows.len()
    }

    /// Indexes every row (the rows are about to leave prefix order).
    fn index_all(&mut self) {
        let rows = &self.rows;
        let mut index = hashbrown::HashTable::with_capacity(rows.len());
        for (i, (id, _)) in rows.iter().enumerate() {
            index.insert_unique(fx(id), i as u32, |&j| fx(&rows[j as usize].0));
        }
        self.index = index;
    }

    /// The legs of `id`, added empty if new.
    pub fn entry(&mut self, id: &str) -> &mut Legs {
        debug_assert!(self.log.is_none(), "the legs table is logging");
        self.every_row_has_legs = false; // the caller may leave the row empty
        let hash = fx(id);
        let i = match self.find_hashed(id, hash) {
            Some(i) => i,
            None => self.push_row(id, hash),
        };
        &mut self.rows[i as usize].1
    }

    /// Appends an empty row for `id` (not in the table; `hash` is its
    /// [`fx`]) and indexes it. The rows are then in no known order: `prefixes`
    /// is dropped (only `end_log`, which builds a table from empty, sets it).
    fn push_row(&mut self, id: &str, hash: u64) -> u32 {
        if !self.indexed() {
            self.index_all();
        }
        if !self.prefixes.is_empty() {
            self.prefixes = Vec::new();
            self.directory = PrefixDirectory::default();
        }
        let i = u32::try_from(self.rows.len()).expect("fewer than 2³² transfers");
        self.rows.push((id.into(), Legs::default()));
        let rows = &self.rows;
        self.index
            .insert_unique(hash, i, |&j| fx(&rows[j as usize].0));
        i
    }

    /// The id and legs of row `i` (from [`LegsTable::find`]).
    pub fn at(&self, i: u32) -> (&str, &Legs) {
        let (id, legs) = &self.rows[i as usize];
        (id, legs)
    }

    /// In the order first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Legs)> + '_ {
        self.rows.iter().map(|(id, l)| (&**id, l))
    }

    /// Room in the index for `n` more transfers (the rows take a chunk at
    /// a time as they grow).
    pub fn reserve(&mut self, n: usize) {
        if !self.indexed() {
            self.index_all();
        }
        let rows = &self.rows;
        self.index.reserve(n, |&j| fx(&rows[j as usize].0));
    }

    /// Keeps only the legs `keep` accepts (a transfer left with none keeps
    /// an empty entry, which every check reads as no legs).
    pub fn retain_legs(&mut self, keep: impl Fn(&Leg) -> bool) {
        self.every_row_has_legs = false;
        for (_, l) in self.rows.iter_mut() {
            l.retain(&keep);
        }
    }
}

impl Facts {
    /// Folds the account stream `s` into its facts `a` (empty for a new
    /// account; `last_seq` is the seq of the last row folded before, 0 for
    /// none) and its legs into the per-transfer legs; each hold leg is
    /// judged against the account's live holds (balance integrity's
    /// findings, into `out`).
    pub fn add_account(
        &mut self,
        s: &StreamView,
        a: &mut AccountFacts,
        mut last_seq: u64,
        out: &mut Vec<Finding>,
    ) {
        let account = self.names.id(s.key);
        // A leg interns its counterparty, a random one of the accounts: at
        // 50M events (10,000 accounts) the lookup missed the cache on its
        // slot nearly every time (~3 % of the proof's CPU), so the slot of a
        // row a few ahead is fetched meanwhile (the visit's first rows' at
        // its start).
        for cp in s
            .rows
            .iter()
            .take(COUNTERPARTY_PREFETCH_AHEAD)
            .filter_map(|r| r.counterparty)
        {
            self.names.prefetch(cp);
        }
        // The entry ids are fetched at the visit's first posting, which
        // `EntryIds::add` reads them for at its end.
        let mut entries_fetched = false;
        for (i, ev) in s.rows.iter().enumerate() {
            if let Some(cp) = s
                .rows
                .get(i + COUNTERPARTY_PREFETCH_AHEAD)
                .and_then(|r| r.counterparty)
            {
                self.names.prefetch(cp);
            }
            if ev.seq != last_seq + 1 {
                // A gap, or the same seq again: a conflicting version, whose
                // other content the facts never read (only the first is).
                a.holds_unknown = true;
                if i > 0 && ev.seq == last_seq {
                    continue;
                }
            }
            last_seq = ev.seq;
            let Some(kind) = AccountKind::parse(ev.kind) else {
                a.holds_unknown = true;
                continue;
            };
            if let Some(c) = ev.currency {
                if !a
                    .currency
                    .as_deref()
                    .is_some_and(|a| same(a.as_bytes(), c.as_bytes()))
                {
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
            if let (AccountKind::Deposited | AccountKind::Withdrawn, Some(e)) = (kind, ev.entry_id)
            {
                if !entries::names_its_account(kind, e, s.key) {
                    out.push(entries::not_the_accounts(
                        s.key,
                        kind,
                        e,
                        ev.seq,
                        ev.event_id,
                    ));
                }
                if !entries_fetched {
                    a.entries.prefetch();
                    entries_fetched = true;
                }
                self.postings.push(Posting {
                    fp: self.entry_key.fingerprint(e),
                    seq: ev.seq,
                    row: i as u32, // a stream's rows are a batch's: fewer than 2³²
                });
            }
            use AccountKind::{Captured, Credited, HoldPlaced, HoldReleased};
            // A row that records that the account holds nothing says no hold
            // is live, hidden or not: what a gap, an unread version or a
            // malformed row may have hidden is known again after it (a
            // capture or a release is judged against the holds before it,
            // so it clears them only once judged). Only a row that hashes to
            // its recorded hash says so: one that does not is not the
            // ledger's (its `held_after` may be what changed), and an honest
            // capture whose hold is still in delivery would be named
            // (rev-s59-holds 3).
            let holds_none = ev.held_after == Some(0) && s.hash_ok[i];
            if !matches!(kind, HoldPlaced | Captured | Credited | HoldReleased) {
                a.holds_unknown &= !holds_none;
                continue;
            }
            let Some(t) = ev.transfer_id else {
                a.holds_unknown = !holds_none;
                continue;
            };
            let leg = Leg {
                account,
                amount,
                // An account's legs nearly always share one currency.
                currency: self
                    .recent
                    .id(&mut self.names, ev.currency.unwrap_or_default()),
                counterparty: self.names.id(ev.counterparty.unwrap_or_default()),
                seq: ev.seq,
                at_s: secs(ev.occurred_at_ms),
            };
            // The live holds follow what the account holds: a second hold
            // of a live transfer leaves the first; a release that records
            // no hold leaves a live one live. Each step is judged against
            // the hold live before it.
            let live = match kind {
                HoldPlaced => {
                    let live = a.live.amount(t);
                    if live.is_none() {
                        a.live.insert(self.spare_ids.take(t), leg);
                    }
                    live
                }
                HoldReleased if amount == 0 => a.live.amount(t),
                Captured | HoldReleased => a.live.take(t).map(|(t, held)| {
                    self.spare_ids.give(Some(t));
                    held.amount
                }),
                _ => None,
            };
            if let Some((code, detail)) = hold_step(kind, t, amount, live, !a.holds_unknown) {
                out.push(Finding::new(code, s.key, detail).at(ev.seq, ev.event_id));
            }
            a.holds_unknown &= !holds_none;
            let kind = match kind {
                HoldPlaced => LegKind::Hold,
                Captured => LegKind::Debit,
                Credited => LegKind::Credit,
                _ => LegKind::Release,
            };
            self.legs.add(t, kind, leg);
        }
        let (store, error) = (&mut self.entry_store, &mut self.entry_store_error);
        let stored = |fp| {
            let since = a.entries_since?;
            store.first_seq(s.key, since, fp).unwrap_or_else(|e| {
                error.get_or_insert(e);
                None
            })
        };
        for (p, first_seq) in a.entries.add(&mut self.postings, stored) {
            let ev = &s.rows[p.row as usize];
            out.push(entries::posted_twice(
                s.key,
                ev.kind,
                ev.entry_id.unwrap_or_default(),
                ev.seq,
                ev.event_id,
                first_seq,
            ));
        }
    }

    /// Withdraws every leg the accounts in `accounts` contributed (their
    /// streams are about to be re-proved from their first event).
    pub fn remove_legs_of(&mut self, accounts: &std::collections::HashSet<String>) {
        let syms: Vec<Sym> = accounts.iter().filter_map(|a| self.names.find(a)).collect();
        self.legs.retain_legs(|leg| !syms.contains(&leg.account));
    }

    /// Live holds and per-currency sums from every account's facts: the
    /// inputs of convergence and global conservation. Each account's facts
    /// are on the heap, a random place each: they and their currency are
    /// hinted [`ACCOUNTS_AHEAD`] and half as many accounts on (at 4M
    /// accounts the walk was 1.5 s of misses taken one at a time).
    pub fn finish_accounts(&mut self, accounts: &[&AccountFacts]) {
        self.live_holds.clear();
        self.currencies.clear();
        for (i, a) in accounts.iter().enumerate() {
            if let Some(ahead) = accounts.get(i + ACCOUNTS_AHEAD) {
                prefetch_whole(*ahead);
            }
            if let Some(c) = accounts
                .get(i + ACCOUNTS_AHEAD / 2)
                .and_then(|a| a.currency.as_deref())
            {
                prefetch(c.as_ptr());
            }
            for (t, leg) in a.live.iter() {
                self.live_holds.push((t.clone(), *leg));
            }
            // Looked up by reference: a key is made once per currency, not
            // once per account (millions).
            let currency = a.currency.as_deref().unwrap_or_default();
            if !self.currencies.contains_key(currency) {
                self.currencies
                    .insert(currency.to_owned(), CurrencySums::default());
            }
            let sums = self.currencies.get_mut(currency).expect("inserted above");
            sums.balances += i128::from(a.last_balance.unwrap_or(0));
            sums.deposits += a.deposits;
            sums.withdrawals += a.withdrawals;
            sums.accounts += 1;
        }
    }

    /// Hints that the transfer stream `s` will be added soon
    /// ([`Facts::add_transfer`]): the names its `created` event interns are
    /// fetched into the cache meanwhile (`Proof::visit_chunk` hints a few
    /// streams ahead).
    pub fn prefetch_transfer(&self, s: &StreamView) {
        for ev in s.rows.iter().filter(|ev| ev.kind == "created") {
            for name in [ev.source, ev.destination].into_iter().flatten() {
                self.names.prefetch(name);
            }
        }
    }

    /// Folds the transfer stream `s` into its facts `f` (the ones a
    /// previous run left, or new).
    pub fn add_transfer(&mut self, s: &StreamView, f: &mut TransferFacts) {
        let mut last: Option<&EventRef> = None;
        // The latest date its rows record: its last row's on an honest
        // clock, and a row dated ahead of the rest is not forgotten
        // (`convergence` judges it).
        let mut latest = f.last_at_s;
        for ev in s.primary() {
            latest = latest.max(secs(ev.occurred_at_ms));
            if ev.kind == "created" {
                let names = &mut self.names;
                f.set_amount(ev.amount);
                f.set_currency(ev.currency.map(|c| self.recent.id(names, c)));
                let mut sym = |v: Option<&str>| v.map(|v| names.id(v));
                f.set_source(sym(ev.source));
                f.set_destination(sym(ev.destination));
                // Judged dangling by the ledger's bound at the latest (a
                // deadline past it is `deadline_out_of_range`; a row with
                // none is not valid, and is judged by the bound).
                let bound = ev
                    .occurred_at_ms
                    .saturating_add(ledger_events::TRANSFER_DEADLINE_MS_MAX);
                f.set_deadline_ms(Some(ev.deadline_ms.map_or(bound, |d| d.min(bound))));
            }
            last = Some(ev);
        }
        if let Some(last) = last {
            f.phase = self.recent.id(&mut self.names, last.kind);
            f.set_terminal(matches!(last.kind, "captured" | "failed" | "released"));
            f.releasing = protocol::releasing_code(last.kind, last.reason);
            f.last_seq = last.seq;
            f.last_at_s = latest;
        }
    }

    /// Takes `other`'s transfers (proved with its own names, ids not in
    /// these) into these facts.
    pub fn absorb_transfers(&mut self, other: Facts) {
        let to = self.names.absorb(&other.names);
        let mut transfers = other.transfers;
        transfers.remap(&to);
        self.transfers.merge(transfers);
    }

    /// Finds the legs that name a transfer no transfer stream has. Almost
    /// always none: counting the transfers with legs settles it without a
    /// search per leg.
    pub fn finish_transfers(&mut self) {
        let legs = &self.legs;
        let rows = &self.transfers.rows;
        // Rows built in hash order (a full run): joined in that order.
        // Otherwise (rows added since, or loaded): a lookup each.
        self.legs_of = if legs.prefixes.len() == legs.rows.len() {
            join_in_hash_order(rows, &self.transfers.prefixes, legs)
        } else {
            find_each(rows, legs)
        };
        let with_legs = self.legs_of.iter().flatten().count();
        let nonempty = self.legs.rows_with_legs();
        self.orphan_legs = if with_legs == nonempty {
            Vec::new()
        } else {
            let mut v: Vec<String> = self
                .legs
                .iter()
                .filter(|(id, l)| **l != Legs::default() && self.transfers.get(id).is_none())
                .map(|(id, _)| id.to_owned())
                .collect();
            v.sort_unstable();
            v
        };
    }

    /// Every transfer id with its facts and legs: those with a transfer
    /// stream (in id order), then those only legs name. The checks sort their
    /// findings by id.
    pub fn transfer_ids(&self) -> impl Iterator<Item = (&str, Option<&TransferFacts>, &Legs)> + '_ {
        self.transfer_ids_in(0..usize::MAX)
    }

    /// How many ids [`Facts::transfer_ids`] and [`Facts::transfer_ids_in`]
    /// yield.
    pub fn transfer_ids_len(&self) -> usize {
        self.transfers.len() + self.orphan_legs.len()
    }

    /// Whether `legs_of` is current (it is after `finish_transfers`).
    fn legs_of_current(&self) -> bool {
        self.legs_of.len() == self.transfers.len()
    }

    /// The legs in row `i` of the legs table (none: no legs).
    fn legs_row(&self, i: Option<u32>) -> &Legs {
        i.map_or(Legs::NONE, |i| &self.legs.rows[i as usize].1)
    }

    /// The legs of the transfer stream at position `k`, `id`: through
    /// `legs_of` when it is `current`, else looked up.
    fn legs_at(&self, current: bool, k: usize, id: &str) -> &Legs {
        self.legs_row(if current {
            self.legs_of[k]
        } else {
            self.legs.find(id)
        })
    }

    /// The transfers whose stream is not terminal, with their legs, in id
    /// order (few: the sagas in progress at the lake's end).
    pub fn in_progress(&self) -> impl Iterator<Item = (&str, &TransferFacts, &Legs)> + '_ {
        let current = self.legs_of_current();
        self.transfers
            .open()
            .into_iter()
            .map(move |(k, id, s)| (id, &s.facts, self.legs_at(current, k, id)))
    }

    /// The ids of [`Facts::transfer_ids`] at the positions `range` (clamped
    /// to their number), without visiting those before it.
    pub fn transfer_ids_in(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (&str, Option<&TransferFacts>, &Legs)> + '_ {
        let current = self.legs_of_current();
        let n = self.transfers.len();
        let (start, end) = (range.start.min(n), range.end.min(n));
        let with_stream =
            self.transfers.rows[start..end]
                .iter()
                .zip(start..)
                .map(move |((id, s), k)| {
                    if current {
                        // The legs rows are in hash order, the transfers in id
                        // order: a random read each, started a few ahead.
                        if let Some(&Some(j)) = self.legs_of.get(k + LEGS_PREFETCH_AHEAD) {
                            prefetch_whole(&self.legs.rows[j as usize].1);
                        }
                    }
                    (&**id, Some(&s.facts), self.legs_at(current, k, id))
                });
        let m = self.orphan_legs.len();
        let orphans = self.orphan_legs
            [range.start.saturating_sub(n).min(m)..range.end.saturating_sub(n).min(m)]
            .iter()
            .map(move |id| (id.as_str(), None, self.legs_row(self.legs.find(id))));
        with_stream.chain(orphans)
    }
}

/// For each of `transfers` (in order), the row of its legs if it has any:
/// a random lookup each, on two threads (one half each).
fn find_each(transfers: &[(Id, TransferState)], legs: &LegsTable) -> Vec<Option<u32>> {
    let find = |rows: &[(Id, TransferState)]| -> Vec<Option<u32>> {
        rows.iter()
            .map(|(id, _)| {
                legs.find(id)
                    .filter(|&i| legs.rows[i as usize].1 != *Legs::NONE)
            })
            .collect()
    };
    let (low, high) = transfers.split_at(transfers.len() / 2);
    let (mut v, second) = crate::threads::both(|| find(low), || find(high));
    v.extend(second);
    v
}

/// What [`find_each`] finds, for legs whose rows are in ascending order of
/// their ids' prefix (`legs.prefixes` holds each row's; `prefixes` each
/// transfer's, by the same function): the transfers sorted by prefix and
/// the rows are walked side by side ([`join_walk`]), so the rows are read in
/// order and only each transfer (its row, then its id) is a random access
/// (prefetched). Two threads, each one half of the transfers from end to
/// end (sorting, walking all the rows): nothing runs on one thread alone.
fn join_in_hash_order(
    transfers: &[(Id, TransferState)],
    prefixes: &[u32],
    legs: &LegsTable,
) -> Vec<Option<u32>> {
    debug_assert_eq!(legs.prefixes.len(), legs.rows.len());
    debug_assert_eq!(prefixes.len(), transfers.len());
    // Each thread writes the rows of its own half of the transfers: no
    // atomics, and no pass to turn them into the result.
    let mut out: Vec<Option<u32>> = vec![None; transfers.len()];
    let half = |part: &[u32], first: usize, out: &mut [Option<u32>]| {
        // 8 bytes a key (the id is read through the transfer's row): the
        // sort moves a third of what (prefix, transfer, &str) keys cost.
        let mut keys: Vec<(u32, u32)> = part
            .iter()
            .zip(first as u32..)
            .map(|(&p, k)| (p, k))
            .collect();
        radix_sort(&mut keys, |k| k.0);
        join_walk(&keys, first, transfers, legs, out);
    };
    let (low, high) = prefixes.split_at(prefixes.len() / 2);
    let (out_low, out_high) = out.split_at_mut(low.len());
    crate::threads::both(|| half(low, 0, out_low), || half(high, low.len(), out_high));
    out
}

/// How many accounts ahead [`Facts::finish_accounts`] hints their facts.
const ACCOUNTS_AHEAD: usize = 16;

/// How many keys ahead [`join_walk`] prefetches a transfer's row (its id
/// inline, [`Id`]), and half as many ahead, the bytes of an id too long to
/// be inline (the row says where they are).
const PREFETCH_AHEAD: usize = 16;

/// Joins `keys` (prefix, transfer), sorted by prefix, to the legs rows (in
/// the same order): stores in `out` the row of each transfer that has legs
/// (`out[0]` is the transfer at `first`, and every key's transfer is in
/// `out`'s range). Within one prefix (nearly always one id each side) the
/// ids are compared.
fn join_walk(
    keys: &[(u32, u32)],
    first: usize,
    transfers: &[(Id, TransferState)],
    legs: &LegsTable,
    out: &mut [Option<u32>],
) {
    let prefixes = &legs.prefixes[..];
    // Rows before `r` have a prefix below the current key's.
    let mut r = 0;
    for (j, &(p, k)) in keys.iter().enumerate() {
        if let Some(ahead) = keys.get(j + 2 * PREFETCH_AHEAD) {
            prefetch_whole(&transfers[ahead.1 as usize].0);
        }
        if let Some(ahead) = keys.get(j + PREFETCH_AHEAD) {
            let id = &transfers[ahead.1 as usize].0;
            if id.on_heap() {
                prefetch(id.as_ptr());
            }
        }
        let id = &*transfers[k as usize].0;
        while r < prefixes.len() && prefixes[r] < p {
            r += 1;
        }
        let mut i = r;
        while i < prefixes.len() && prefixes[i] == p {
            let (row_id, row) = &legs.rows[i];
            if **row_id == *id {
                if *row != *Legs::NONE {
                    out[k as usize - first] = Some(i as u32);
                }
                break;
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a gap a capture without a live hold is not judged (its hold
    /// may be among the missing rows) until a row records that the account
    /// holds nothing: from there every hold is known again.
    #[test]
    fn holds_are_known_again_after_a_row_that_holds_nothing() {
        use ledger_events::{Event, Stream, GENESIS_HASH};
        let key = "acme.a";
        let mut prev = GENESIS_HASH.to_owned();
        let mut row = |seq, kind: &str, t: Option<&str>, amount, balance, held| {
            let mut e = Event::new(Stream::Account, key, seq, kind, 1_000 * seq as i64, &prev);
            (e.amount, e.transfer_id) = (amount, t.map(str::to_owned));
            (e.balance_after, e.held_after) = (Some(balance), Some(held));
            e.currency = Some("USD".into());
            let e = e.seal();
            prev = e.hash.clone();
            e
        };
        // Seqs 3 and 4 (the holds of t1 and t2) are missing.
        let events = [
            row(1, "opened", None, None, 0, 0),
            row(2, "deposited", None, Some(100), 100, 0),
            row(5, "captured", Some("t1"), Some(40), 60, 10),
            row(6, "captured", Some("t2"), Some(10), 50, 0),
            row(7, "captured", Some("t3"), Some(5), 45, -5),
        ];
        let found = |events: &[Event]| {
            let (mut f, mut a, mut out) = (Facts::default(), AccountFacts::default(), Vec::new());
            let v = crate::stream::OwnedView::of_events(Stream::Account, key, events);
            f.add_account(&v.view(), &mut a, 0, &mut out);
            let found: Vec<(&str, Option<u64>)> = out.iter().map(|f| (f.code, f.seq)).collect();
            (found, a.holds_unknown)
        };
        // t1's and t2's captures, with holds still unknown, are not judged;
        // t2's leaves nothing held, so t3's, with no hold, is.
        assert_eq!(
            found(&events),
            (vec![("capture_without_hold", Some(7))], false)
        );
        // Without the row that holds nothing, t3's is not judged either.
        assert_eq!(
            found(&[&events[..3], &events[4..]].concat()),
            (vec![], true)
        );
        // Nor when that row fails its hash: it is not the ledger's, and
        // says nothing of what the account holds (rev-s59-holds 3).
        let mut changed = events.clone();
        changed[3].occurred_at_ms += 1;
        assert_eq!(found(&changed), (vec![], true));
    }

    /// Which rows make an account's holds unknown and which make them known
    /// again, each case a stream that ends in a capture of `tc` with no hold
    /// placed: judged (`capture_without_hold`) only when its holds are known.
    /// (bench/reconcile/checks.sql keeps the same rule; the random rounds of
    /// its equivalence test rarely reach these.)
    #[test]
    fn which_rows_make_holds_unknown_and_which_known_again() {
        use ledger_events::{Event, Stream, GENESIS_HASH};
        // (seq, kind, transfer id, held_after); a seq given twice in a row
        // is a second version of it, chained to the same row before.
        type Spec<'a> = (u64, &'a str, Option<&'a str>, i64);
        let chain = |specs: &[Spec]| -> Vec<Event> {
            let (mut out, mut prev, mut before): (Vec<Event>, String, String) =
                (Vec::new(), GENESIS_HASH.to_owned(), GENESIS_HASH.to_owned());
            for &(seq, kind, t, held) in specs {
                let again = out.last().is_some_and(|e: &Event| e.seq == seq);
                let link = if again { before.clone() } else { prev.clone() };
                let mut e = Event::new(
                    Stream::Account,
                    "acme.h",
                    seq,
                    kind,
                    1_000 * seq as i64,
                    &link,
                );
                (e.amount, e.transfer_id) = (Some(if again { 7 } else { 5 }), t.map(str::to_owned));
                (e.balance_after, e.held_after) = (Some(100), Some(held));
                e.currency = Some("USD".into());
                let e = e.seal();
                if !again {
                    (before, prev) = (link, e.hash.clone());
                }
                out.push(e);
            }
            out
        };
        let judged = |specs: &[Spec]| -> bool {
            let events = chain(specs);
            let (mut f, mut a, mut out) = (Facts::default(), AccountFacts::default(), Vec::new());
            let v = crate::stream::OwnedView::of_events(Stream::Account, "acme.h", &events);
            f.add_account(&v.view(), &mut a, 0, &mut out);
            out.iter().any(|f| f.code == "capture_without_hold")
        };
        let open = (1, "opened", None, 0);
        let dep = |seq, held| (seq, "deposited", None, held);
        let cap = |seq| (seq, "captured", Some("tc"), 0);
        // No gap: judged.
        assert!(judged(&[open, dep(2, 0), dep(3, 5), cap(4)]));
        // A gap, nothing after it holding nothing: not judged; a row after it
        // that holds nothing: judged; the row right after the gap holding
        // nothing makes them known itself; the capture right after a gap is
        // not judged.
        assert!(!judged(&[open, dep(2, 0), dep(4, 5), dep(5, 5), cap(6)]));
        assert!(judged(&[open, dep(2, 0), dep(4, 5), dep(5, 0), cap(6)]));
        assert!(judged(&[open, dep(2, 0), dep(4, 0), cap(5)]));
        assert!(!judged(&[open, dep(2, 0), cap(4)]));
        // A row of no account kind that records holding nothing: unknown
        // after it, whatever it records; a later row that holds nothing
        // makes them known.
        let odd = (2, "refunded", None, 0);
        assert!(!judged(&[open, odd, dep(3, 5), cap(4)]));
        assert!(judged(&[open, odd, dep(3, 0), cap(4)]));
        // A leg without its transfer id: unknown after it, unless it
        // records holding nothing.
        assert!(!judged(&[
            open,
            dep(2, 5),
            (3, "hold_released", None, 5),
            cap(4)
        ]));
        assert!(judged(&[
            open,
            dep(2, 5),
            (3, "hold_released", None, 0),
            cap(4)
        ]));
        // A second version of a seq makes them unknown, even after a first
        // version that holds nothing (the facts read the first).
        assert!(!judged(&[open, dep(2, 0), dep(2, 0), cap(3)]));
        assert!(judged(&[open, dep(2, 0), dep(2, 0), dep(3, 0), cap(4)]));
    }

    /// A transfer's rows keep the latest date any of them records: a
    /// `created` row dated ahead of the rows after it is not forgotten
    /// when they come (`convergence` judges it), on one night or two.
    #[test]
    fn a_transfer_keeps_the_latest_date_of_its_rows_not_only_its_last_rows() {
        use ledger_events::{Event, Stream, GENESIS_HASH};
        let t = "t.acme.k";
        let row = |seq, kind: &str, at: i64, prev: &str| {
            let mut e = Event::new(Stream::Transfer, t, seq, kind, at, prev);
            e.transfer_id = Some(t.into());
            e.seal()
        };
        let created = row(1, "created", 9_000_000_000_000, GENESIS_HASH);
        let reserved = row(2, "reserved", 1_000_000_000_000, &created.hash);
        let events = [created, reserved];
        let (mut f, mut both, mut first, mut then) = (
            Facts::default(),
            TransferFacts::default(),
            TransferFacts::default(),
            TransferFacts::default(),
        );
        let v = crate::stream::OwnedView::of_events(Stream::Transfer, t, &events);
        f.add_transfer(&v.view(), &mut both);
        assert_eq!(both.last_at_s, secs(9_000_000_000_000));
        assert_eq!(both.last_seq, 2);
        // The rows on two nights: the second night's row is older.
        let v = crate::stream::OwnedView::of_events(Stream::Transfer, t, &events[..1]);
        f.add_transfer(&v.view(), &mut first);
        then.clone_from(&first);
        let v = crate::stream::OwnedView::of_events(Stream::Transfer, t, &events[1..]);
        f.add_transfer(&v.view(), &mut then);
        assert_eq!((then.last_at_s, then.last_seq), (both.last_at_s, 2));
    }

    #[test]
    fn live_holds_are_written_in_id_order_and_read_back_whole() {
        let leg = |seq| Leg {
            account: Sym(0),
            amount: 5,
            currency: Sym(1),
            counterparty: Sym(2),
            seq,
            at_s: 7,
        };
        let mut live = LiveHolds::default();
        for (i, t) in ["t-3", "t-1", "t-2", "t-0"].iter().enumerate() {
            live.insert((*t).into(), leg(i as u64));
        }
        assert_eq!(live.remove("t-2"), Some("t-2".into()));
        assert_eq!(live.remove("t-2"), None);
        live.insert("t-3".into(), leg(9)); // a second hold replaces the first
        let json = serde_json::to_string(&live).unwrap();
        let ids: Vec<&str> = json
            .match_indices("\"t-")
            .map(|(i, _)| &json[i + 1..i + 4])
            .collect();
        assert_eq!(ids, ["t-0", "t-1", "t-3"], "{json}");
        let back: LiveHolds = serde_json::from_str(&json).unwrap();
        assert_eq!(back, live);
        assert_eq!(
            back.iter().find(|(t, _)| *t == "t-3").map(|(_, l)| l.seq),
            Some(9)
        );
    }

    fn state(seq: u64) -> TransferState {
        TransferState {
            tail: Tail {
                last_seq: seq,
                ..Default::default()
            },
            facts: TransferFacts::default(),
        }
    }

    /// A seeded xorshift: `next(n)` is in `0..n`.
    fn xorshift(mut rng: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        }
    }

    #[test]
    fn a_remap_reaches_every_row_on_one_thread_or_two() {
        for n in [3, REMAP_TWO_THREADS_ROWS + 3] {
            let mut t = Transfers::default();
            for i in 0..n {
                let mut st = state(1);
                st.facts.phase = Sym(i as u32 % 3);
                st.facts.set_source(Some(Sym(2)));
                t.put(&format!("t-{i:08}"), st);
            }
            t.end_pass();
            t.remap(&[Sym(10), Sym(11), Sym(12)]);
            assert_eq!(t.len(), n);
            for (i, (_, s)) in t.iter().enumerate() {
                assert_eq!(s.facts.phase, Sym(10 + i as u32 % 3), "row {i} of {n}");
                assert_eq!(s.facts.source(), Some(Sym(12)), "row {i} of {n}");
                assert_eq!(s.facts.currency(), None);
            }
        }
    }

    fn seqs(t: &Transfers) -> Vec<(&str, u64)> {
        t.iter().map(|(id, s)| (id, s.tail.last_seq)).collect()
    }

    #[test]
    fn the_id_arena_gives_back_every_string_across_chunks_oversized_and_empty_ones() {
        let mut arena = IdArena::default();
        let chunk = 1usize << ARENA_CHUNK_BITS;
        let mut next = xorshift(7);
        let mut ids: Vec<String> = (0..200_000)
            .map(|i| format!("t.gen.op{i}{}", "x".repeat(next(40) as usize)))
            .collect();
        // One longer than a chunk, one exactly a chunk, empty ones among them
        // (a corrupt lake's transfer ids can be anything).
        ids.insert(1000, "y".repeat(chunk + 5));
        ids.insert(5000, "z".repeat(chunk));
        ids.insert(5001, String::new());
        ids.insert(77_777, String::new());
        let first = arena.push(&ids[0]);
        let first_at = arena.ptr(first);
        let places: Vec<u32> = std::iter::once(first)
            .chain(ids[1..].iter().map(|id| arena.push(id)))
            .collect();
        assert!(arena.chunks.len() > 4, "spans several chunks");
        for (id, &place) in ids.iter().zip(&places) {
            assert_eq!(arena.get(place, id.len() as u32), id);
            assert_eq!(arena.ptr(place), arena.get(place, id.len() as u32).as_ptr());
        }
        // Chunks never move: the first string is where it was put.
        assert_eq!(arena.ptr(first), first_at);
    }

    #[test]
    fn legs_added_in_any_order_of_accounts_are_judged_in_one_order() {
        let mut n = Names::default();
        // Interned "z" first: the order is by name, not by symbol.
        let (z, a, usd) = (n.id("z"), n.id("a"), n.id("USD"));
        let leg = |account, seq| Leg {
            at_s: 0,
            account,
            amount: 1,
            currency: usd,
            counterparty: usd,
            seq,
        };
        let one = Legs::from_lists([
            vec![leg(z, 1), leg(a, 9)],
            vec![leg(a, 3), leg(a, 2), leg(z, 1)],
            vec![leg(z, 4)],
            vec![],
        ]);
        let other = Legs::from_lists([
            vec![leg(a, 9), leg(z, 1)],
            vec![leg(z, 1), leg(a, 2), leg(a, 3)],
            vec![leg(z, 4)],
            vec![],
        ]);
        assert_ne!(one, other);
        let (c1, c2) = (one.canonical(&n), other.canonical(&n));
        assert_eq!(c1, c2);
        let seqs = |l: &[Leg]| {
            l.iter()
                .map(|l| (n.get(l.account), l.seq))
                .collect::<Vec<_>>()
        };
        assert_eq!(seqs(c1.holds()), [("a", 9), ("z", 1)]);
        assert_eq!(seqs(c1.debits()), [("a", 2), ("a", 3), ("z", 1)]);
        assert_eq!(seqs(c1.credits()), [("z", 4)]);
        // Already in that order: borrowed, not copied.
        let ordered = c1.into_owned();
        assert!(matches!(
            ordered.canonical(&n),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn legs_keep_each_kind_in_the_order_added_whatever_the_order_of_kinds() {
        let leg = |seq: u64| Leg {
            at_s: 0,
            account: Sym(seq as u32 % 3),
            amount: seq as i64,
            currency: Sym(9),
            counterparty: Sym(seq as u32 % 5),
            seq,
        };
        // Kinds arrive out of order (a release before a hold of another
        // account, a credit first): each list is still in arrival order.
        let adds = [
            (LegKind::Credit, 1),
            (LegKind::Release, 2),
            (LegKind::Hold, 3),
            (LegKind::Credit, 4),
            (LegKind::Debit, 5),
            (LegKind::Hold, 6),
            (LegKind::Release, 7),
        ];
        let mut l = Legs::default();
        for (kind, seq) in adds {
            l.push(kind, leg(seq));
        }
        let seqs = |v: &[Leg]| v.iter().map(|g| g.seq).collect::<Vec<_>>();
        assert_eq!(seqs(l.holds()), [3, 6]);
        assert_eq!(seqs(l.debits()), [5]);
        assert_eq!(seqs(l.credits()), [1, 4]);
        assert_eq!(seqs(l.releases()), [2, 7]);
        let lists = LegKind::ALL.map(|k| l.of(k).to_vec());
        assert_eq!(Legs::from_lists(lists), l);
        // Dropping the legs of account 1 (seqs 1, 4, 7) keeps the rest in order.
        l.retain(|g| g.account != Sym(1));
        assert_eq!(seqs(l.holds()), [3, 6]);
        assert_eq!(seqs(l.debits()), [5]);
        assert_eq!(seqs(l.credits()), [] as [u64; 0]);
        assert_eq!(seqs(l.releases()), [2]);
        l.retain(|_| false);
        assert_eq!(l, Legs::default());
        assert_eq!(&l, Legs::NONE);
    }

    #[test]
    fn a_transfers_legs_are_120_bytes_with_three_inline() {
        assert_eq!(std::mem::size_of::<Legs>(), 120);
        let mut l = Legs::default();
        for kind in [LegKind::Hold, LegKind::Debit, LegKind::Credit] {
            l.push(
                kind,
                Leg {
                    at_s: 0,
                    account: Sym(0),
                    amount: 1,
                    currency: Sym(0),
                    counterparty: Sym(0),
                    seq: 1,
                },
            );
        }
        assert!(!l.legs.spilled());
    }

    #[test]
    fn recent_names_give_the_tables_symbol_through_evictions() {
        let mut names = Names::default();
        let mut recent = Recent::default();
        let mut next = xorshift(3);
        // More distinct names than it remembers, some alike in their first
        // bytes, in a random order.
        let pool: Vec<String> = (0..3 * RECENT_NAMES)
            .map(|i| format!("captured{}", "d".repeat(i % 3)) + &i.to_string())
            .collect();
        for _ in 0..2_000 {
            let name = &pool[next(pool.len() as u64) as usize];
            let sym = recent.id(&mut names, name);
            assert_eq!(names.get(sym), name);
            assert_eq!(names.find(name), Some(sym));
        }
        assert_eq!(names.list().len(), pool.len());
    }

    #[test]
    fn a_transfers_facts_are_forty_eight_bytes_and_keep_each_term_apart() {
        assert_eq!(std::mem::size_of::<TransferFacts>(), 48);
        assert_eq!(std::mem::size_of::<TransferState>(), 96);
        let mut f = TransferFacts::new(Sym(1));
        assert_eq!(
            (
                f.amount(),
                f.currency(),
                f.source(),
                f.destination(),
                f.deadline_ms()
            ),
            (None, None, None, None, None)
        );
        // Zero is a term like any other, not "absent".
        f.set_amount(Some(0));
        f.set_deadline_ms(Some(i64::MIN));
        f.set_source(Some(Sym(0)));
        f.set_terminal(true);
        assert_eq!(f.amount(), Some(0));
        assert_eq!(f.deadline_ms(), Some(i64::MIN));
        assert_eq!(f.source(), Some(Sym(0)));
        assert_eq!((f.currency(), f.destination()), (None, None));
        assert!(f.is_terminal());
        f.set_currency(Some(Sym(7)));
        f.set_destination(Some(Sym(8)));
        f.set_amount(Some(-3));
        assert_eq!(
            (f.amount(), f.currency(), f.source(), f.destination()),
            (Some(-3), Some(Sym(7)), Some(Sym(0)), Some(Sym(8)))
        );
        // Unset again, every term compares as never set.
        f.set_amount(None);
        f.set_deadline_ms(None);
        f.set_currency(None);
        f.set_source(None);
        f.set_destination(None);
        f.set_terminal(false);
        assert_eq!(f, TransferFacts::new(Sym(1)));
        // Remapped: only the names it knows.
        f.set_source(Some(Sym(2)));
        f.remap(&[Sym(10), Sym(11), Sym(12)]);
        assert_eq!(
            (f.source(), f.currency(), f.phase),
            (Some(Sym(12)), None, Sym(11))
        );
    }

    #[test]
    fn a_logged_leg_is_forty_eight_bytes() {
        assert_eq!(std::mem::size_of::<Logged>(), 48);
    }

    #[test]
    fn a_pass_merges_into_the_sorted_rows_replacing_what_it_proved_again() {
        let mut t = Transfers::default();
        for (id, seq) in [("b", 1), ("d", 1), ("f", 1)] {
            t.put(id, state(seq));
        }
        t.end_pass();
        assert_eq!(seqs(&t), [("b", 1), ("d", 1), ("f", 1)]);
        assert_in_step(&t);
        // A later pass: new ids before, between and after, and one re-proved.
        for (id, seq) in [("a", 2), ("d", 2), ("e", 2), ("g", 2)] {
            t.put(id, state(seq));
        }
        assert_eq!(t.get("a"), None, "not visible before the pass ends");
        t.end_pass();
        assert_eq!(
            seqs(&t),
            [("a", 2), ("b", 1), ("d", 2), ("e", 2), ("f", 1), ("g", 2)]
        );
        assert_eq!(t.state("d").map(|s| s.tail.last_seq), Some(2));
        assert_in_step(&t);
        t.remove(&["b", "g", "zz"].into_iter().collect());
        assert_eq!(seqs(&t), [("a", 2), ("d", 2), ("e", 2), ("f", 1)]);
        assert_in_step(&t);
        // A pass out of order (not what a merge produces) is still sorted in.
        t.put("c", state(3));
        t.put("b", state(3));
        t.end_pass();
        assert_eq!(seqs(&t).iter().map(|x| x.0).collect::<String>(), "abcdef");
        assert_in_step(&t);
        // Another table's rows (another thread's proof) merged in.
        let mut other = Transfers::default();
        for id in ["aa", "ee", "z"] {
            other.put(id, state(4));
        }
        other.end_pass();
        t.merge(other);
        assert_eq!(
            seqs(&t).iter().map(|x| x.0).collect::<String>(),
            "aaabcdeeefz"
        );
        assert_in_step(&t);
        assert_in_step(&Transfers::from_sorted(vec![
            ("y".into(), state(1)),
            ("x".into(), state(1)),
        ]));
    }

    /// Checks that each row's prefix is its id's, row for row, and that
    /// [`Transfers::open`] is every row not terminal, at its place.
    fn assert_in_step(t: &Transfers) {
        assert_eq!(t.prefixes, prefixes_of(&t.rows));
        assert!(t.pass.is_empty() && t.pass_prefixes.is_empty());
        let open: Vec<(usize, &str)> = t.open().iter().map(|&(k, id, _)| (k, id)).collect();
        let want: Vec<(usize, &str)> = t
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| !s.facts.is_terminal())
            .map(|(k, (id, _))| (k, id))
            .collect();
        if open != want {
            let at = open.iter().zip(&want).position(|(a, b)| a != b);
            panic!(
                "open rows: {} against {}; first difference at {at:?}: {:?} against {:?}",
                open.len(),
                want.len(),
                at.map(|i| open[i]),
                at.map(|i| want[i])
            );
        }
    }

    #[test]
    fn merging_a_pass_in_place_is_a_sorted_union_where_the_pass_wins() {
        let mut next = xorshift(7u64);
        for round in 0..300 {
            let mut t = Transfers::default();
            let mut want = BTreeMap::new();
            for pass in 0..3 {
                let n = next(40);
                let mut ids: Vec<u64> = (0..n).map(|_| next(60)).collect();
                ids.sort_unstable();
                ids.dedup();
                for id in ids {
                    let seq = round * 10 + pass;
                    // Terminal or not at random: a saga re-proved may
                    // have ended since, or (a lake re-read) not yet.
                    let mut st = state(seq);
                    st.facts.set_terminal(next(2) == 0);
                    t.put(&format!("t.{id:02}"), st);
                    want.insert(format!("t.{id:02}"), seq);
                }
                t.end_pass();
                let got: Vec<(String, u64)> = seqs(&t)
                    .into_iter()
                    .map(|(id, s)| (id.to_owned(), s))
                    .collect();
                let want: Vec<(String, u64)> = want.iter().map(|(k, v)| (k.clone(), *v)).collect();
                assert_eq!(got, want, "round {round}, pass {pass}");
                assert_in_step(&t);
            }
            // Some rows removed (to be re-proved), then rows of another
            // table merged in; and the rows loaded back as a checkpoint
            // would.
            let gone: Vec<String> = (0..next(10))
                .map(|_| format!("t.{:02}", next(60)))
                .collect();
            t.remove(&gone.iter().map(String::as_str).collect());
            assert_in_step(&t);
            let mut other = Transfers::default();
            for id in 0..next(5) {
                let mut st = state(round);
                st.facts.set_terminal(next(2) == 0);
                other.put(&format!("u.{id}"), st);
            }
            other.end_pass();
            t.merge(other);
            assert_in_step(&t);
            let loaded =
                Transfers::from_sorted(t.iter().map(|(id, s)| (Id::from(id), s.clone())).collect());
            assert_in_step(&loaded);
        }
    }

    #[test]
    fn a_logged_legs_table_holds_what_finding_each_row_holds() {
        let mut next = xorshift(11u64);
        let kinds = [
            LegKind::Hold,
            LegKind::Debit,
            LegKind::Credit,
            LegKind::Release,
        ];
        let (mut found, mut logged) = (LegsTable::default(), LegsTable::default());
        logged.start_log(0);
        for seq in 0..20_000u64 {
            let id = format!("t.{}", next(3_000));
            let leg = Leg {
                at_s: 0,
                account: Sym(next(50) as u32),
                amount: next(1_000) as i64,
                currency: Sym(0),
                counterparty: Sym(next(50) as u32),
                seq,
            };
            let kind = kinds[next(4) as usize];
            found.add(&id, kind, leg);
            logged.add(&id, kind, leg);
        }
        logged.end_log();
        assert_eq!(logged.len(), found.len());
        // Found through the prefix directory: nothing indexed.
        assert!(!logged.indexed() && logged.index.is_empty());
        for (id, legs) in found.iter() {
            // Same legs, in the order they were added.
            assert_eq!(logged.get(id), Some(legs), "{id}");
        }
        assert_eq!(logged.get("t.nope"), None);
        // A row added out of prefix order: every row indexed, all found.
        logged.entry("t.new").push(LegKind::Credit, UNIT_LEG);
        assert!(logged.indexed() && logged.prefixes.is_empty());
        for (id, legs) in found.iter() {
            assert_eq!(logged.get(id), Some(legs), "{id}");
        }
        assert_eq!(logged.get("t.new").map(|l| l.credits().len()), Some(1));
    }

    #[test]
    fn a_prefix_directory_bounds_the_rows_of_every_prefix() {
        let mut next = xorshift(3);
        for n in [0usize, 1, 2, 7, 100, 5_000] {
            let mut prefixes: Vec<u32> = (0..n).map(|_| next(1 << 32) as u32).collect();
            // Extremes and repeats too.
            prefixes.extend([0, 0, u32::MAX, u32::MAX].iter().take(n.min(4)));
            prefixes.sort_unstable();
            let d = PrefixDirectory::of(&prefixes);
            for (i, &p) in prefixes.iter().enumerate() {
                assert!(d.range(p).contains(&i), "n {n}: row {i} ({p:#x})");
            }
            // Rows of a prefix outside a range are not in it.
            for p in [0, 1, 1 << 31, u32::MAX - 1, u32::MAX] {
                let r = d.range(p);
                assert!(prefixes[..r.start].iter().all(|&q| q < p));
                assert!(prefixes[r.end..].iter().all(|&q| q > p));
            }
        }
    }

    #[test]
    fn the_radix_sort_is_a_stable_sort_by_key() {
        let mut next = xorshift(5);
        // Few distinct prefixes (the top 32 bits), spread over their four
        // bytes; the low 32 bits are noise the sort must not look at.
        let mut keys: Vec<(u64, u32)> = (0..10_000u32)
            .map(|i| {
                let top = next(97).wrapping_mul(0x0101_0101) << 32;
                (top | next(1 << 32), i)
            })
            .collect();
        let mut want = keys.clone();
        want.sort_by_key(|k| k.0 >> 32); // stable
        radix_sort(&mut keys, |k| prefix(k.0));
        assert_eq!(keys, want);
        // A byte the same in every key is skipped, and nothing is lost.
        let mut keys: Vec<(u64, u32)> =
            (0..1_000u32).map(|i| (u64::from(i % 7) << 40, i)).collect();
        let mut want = keys.clone();
        want.sort_by_key(|k| k.0 >> 32);
        radix_sort(&mut keys, |k| prefix(k.0));
        assert_eq!(keys, want);
        radix_sort(&mut Vec::<(u64, u32)>::new(), |k| prefix(k.0));
    }

    /// `legs_of` as a lookup per transfer finds it (the reference).
    fn looked_up(f: &Facts) -> Vec<Option<u32>> {
        f.transfers
            .rows
            .iter()
            .map(|(id, _)| {
                f.legs
                    .find(id)
                    .filter(|&i| *f.legs.at(i).1 != Legs::default())
            })
            .collect()
    }

    /// Checks that `f.legs` is built in prefix order (`prefixes` right),
    /// and that both ways of joining the transfers to their legs agree with
    /// a lookup each.
    fn assert_joins(f: &Facts) {
        let legs = &f.legs;
        assert_eq!(legs.prefixes.len(), legs.rows.len());
        for (p, (id, _)) in legs.prefixes.iter().zip(&legs.rows) {
            assert_eq!(*p, prefix(fx(id)), "{id}");
        }
        assert!(legs.prefixes.is_sorted());
        let nonempty = legs.rows.iter().filter(|(_, l)| *l != Legs::default());
        assert_eq!(legs.rows_with_legs(), nonempty.count());
        let want = looked_up(f);
        let rows = &f.transfers.rows;
        assert_in_step(&f.transfers);
        assert_eq!(join_in_hash_order(rows, &f.transfers.prefixes, legs), want);
        assert_eq!(find_each(rows, legs), want);
    }

    fn a_leg(next: &mut dyn FnMut(u64) -> u64, seq: u64) -> Leg {
        Leg {
            at_s: 0,
            account: Sym(next(50) as u32),
            amount: next(1_000) as i64,
            currency: Sym(0),
            counterparty: Sym(next(50) as u32),
            seq,
        }
    }

    const KINDS: [LegKind; 4] = [
        LegKind::Hold,
        LegKind::Debit,
        LegKind::Credit,
        LegKind::Release,
    ];

    /// Pairs of distinct ids whose hashes share their top 32 bits: found
    /// among a few hundred thousand (about n²/2³³ pairs among n ids).
    fn colliding_pairs() -> Vec<(String, String)> {
        let id = |x: u32| format!("t.c{x}");
        let mut keys: Vec<(u32, u32)> = (0..400_000).map(|x| (prefix(fx(&id(x))), x)).collect();
        keys.sort_unstable();
        let pairs: Vec<(String, String)> = keys
            .windows(2)
            .filter(|w| w[0].0 == w[1].0)
            .map(|w| (id(w[0].1), id(w[1].1)))
            .collect();
        assert!(pairs.len() >= 8, "{} pairs", pairs.len());
        pairs
    }

    #[test]
    fn joining_in_hash_order_finds_what_a_lookup_each_finds() {
        let pairs = colliding_pairs();
        let mut next = xorshift(23);
        for round in 0..16 {
            // Random ids: some with a transfer stream, some with legs, some
            // both; plus the colliding pairs, each of its two ids with or
            // without a transfer and legs (every combination over the rounds).
            let mut f = Facts::default();
            let mut transfers = Vec::new();
            let mut logged: Vec<(String, LegKind, Leg)> = Vec::new();
            let mut seq = 0;
            let mut legs_for = |id: &str, logged: &mut Vec<_>, next: &mut dyn FnMut(u64) -> u64| {
                for _ in 0..1 + next(3) {
                    seq += 1;
                    let leg = a_leg(next, seq);
                    logged.push((id.to_owned(), KINDS[next(4) as usize], leg));
                }
            };
            for n in 0..2_000 + next(500) {
                let id = format!("t.{n}");
                let (transfer, legs) = match next(10) {
                    0 => (true, false),
                    1 => (false, true),
                    2 => (false, false),
                    _ => (true, true),
                };
                if transfer {
                    transfers.push(id.clone());
                }
                if legs {
                    legs_for(&id, &mut logged, &mut next);
                }
            }
            for (i, (a, b)) in pairs.iter().enumerate() {
                let combo = (i as u64 + round) % 16;
                for (bit, id) in [(0, a), (2, b)] {
                    if (combo >> bit) & 1 == 1 {
                        transfers.push(id.clone());
                    }
                    if (combo >> (bit + 1)) & 1 == 1 {
                        legs_for(id, &mut logged, &mut next);
                    }
                }
            }
            // The legs arrive in random order (as account streams name them).
            for i in (1..logged.len()).rev() {
                logged.swap(i, next(i as u64 + 1) as usize);
            }
            for id in &transfers {
                f.transfers.put(id, state(1));
            }
            f.transfers.end_pass();
            f.legs.start_log(logged.len());
            for (id, kind, leg) in &logged {
                f.legs.add(id, *kind, *leg);
            }
            f.legs.end_log();
            assert_joins(&f);
            // Legs withdrawn (rows left empty read as none): same order.
            f.legs.retain_legs(|leg| leg.account.0 % 3 != 0);
            assert_joins(&f);
            f.finish_transfers();
            assert_eq!(f.legs_of, looked_up(&f));
            let (a, b) = &pairs[round as usize % pairs.len()];
            for id in [a, b] {
                let k = f.transfers.rows.binary_search_by(|r| (*r.0).cmp(id));
                let Ok(k) = k else { continue };
                let got = f.legs_of[k].map(|i| f.legs.at(i).0);
                let has = f.legs.get(id).is_some_and(|l| *l != *Legs::NONE);
                assert_eq!(got, has.then_some(id.as_str()), "round {round}: {id}");
            }
        }
    }

    #[test]
    fn the_join_walks_groups_of_one_prefix_in_tables_of_any_size() {
        // A hand-made prefix with many collisions (the id's length and first
        // digit), on small tables: groups of many rows and many transfers,
        // in both threads' halves of the transfers, and empty sides.
        let made = |id: &str| ((id.len() as u32) << 8) | u32::from(id.as_bytes()[2]);
        let mut next = xorshift(31);
        for round in 0..400 {
            let n = [0, 1, 2, 3, 40][round % 5] + next(30);
            let mut ids: Vec<String> = (0..n)
                .map(|i| format!("t.{}", next(2 * n + 1) * 7 + i % 2))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            for i in (1..ids.len()).rev() {
                ids.swap(i, next(i as u64 + 1) as usize);
            }
            let mut f = Facts::default();
            let mut rows: Vec<(Id, Legs)> = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                if next(3) != 0 {
                    f.transfers.put(id, state(1));
                }
                if next(3) != 0 && !rows.iter().any(|r| *r.0 == **id) {
                    let mut legs = Legs::default();
                    if next(4) != 0 {
                        legs.push(KINDS[next(4) as usize], a_leg(&mut next, i as u64));
                    }
                    rows.push((id.as_str().into(), legs));
                }
            }
            f.transfers.end_pass();
            rows.sort_by_key(|r| made(&r.0));
            f.legs = LegsTable::from_rows(rows);
            assert!(f.legs.prefixes.is_empty());
            f.legs.prefixes = f.legs.rows.iter().map(|r| made(&r.0)).collect();
            let want = looked_up(&f);
            assert_eq!(
                join_in_hash_order(
                    &f.transfers.rows,
                    &f.transfers
                        .rows
                        .iter()
                        .map(|r| made(&r.0))
                        .collect::<Vec<_>>(),
                    &f.legs
                ),
                want,
                "round {round}"
            );
        }
    }

    #[test]
    fn a_legs_table_built_then_added_to_is_joined_by_lookups() {
        let mut next = xorshift(41);
        let mut f = Facts::default();
        f.legs.start_log(0);
        let mut transfers = std::collections::BTreeSet::new();
        for n in 0..3_000u64 {
            let id = format!("t.{}", next(2_000));
            f.legs
                .add(&id, KINDS[next(4) as usize], a_leg(&mut next, n));
            transfers.insert(format!("t.{}", next(2_500)));
        }
        for id in &transfers {
            f.transfers.put(id, state(1));
        }
        f.transfers.end_pass();
        f.legs.end_log();
        assert_joins(&f);
        // A leg of a transfer the table has: no new row, the order holds.
        let (id, _) = f.legs.at(5);
        let id = id.to_owned();
        f.legs.add(&id, LegKind::Credit, a_leg(&mut next, 1));
        assert_joins(&f);
        // A new row, appended out of prefix order: no prefixes, and
        // `finish_transfers` looks each transfer up.
        for n in 0..500 {
            f.legs
                .entry(&format!("t.new{n}"))
                .push(LegKind::Credit, a_leg(&mut next, n));
            f.transfers.put(&format!("t.new{n}"), state(1));
        }
        f.transfers.end_pass();
        assert!(f.legs.prefixes.is_empty());
        f.finish_transfers();
        assert_eq!(f.legs_of, looked_up(&f));
        assert!(f
            .legs_of
            .iter()
            .flatten()
            .any(|&i| f.legs.at(i).0 == "t.new7"));
        // A checkpoint's rows: no prefixes either.
        let back = LegsTable::from_rows(
            f.legs
                .iter()
                .map(|(id, l)| (id.into(), l.clone()))
                .collect(),
        );
        assert!(back.prefixes.is_empty());
    }

    #[test]
    fn the_legs_table_finds_every_id_and_keeps_first_seen_order() {
        let mut l = LegsTable::default();
        let leg = |a, seq| Leg {
            at_s: 0,
            account: Sym(a),
            amount: 5,
            currency: Sym(0),
            counterparty: Sym(a + 1),
            seq,
        };
        // Enough ids to grow the index several times.
        for i in 0..5_000u64 {
            l.entry(&format!("t.{i}"))
                .push(LegKind::Hold, leg(1, i + 1));
        }
        l.entry("t.7").push(LegKind::Debit, leg(2, 9));
        assert_eq!(l.len(), 5_000);
        assert_eq!(l.get("t.7").unwrap().holds()[..], [leg(1, 8)]);
        assert_eq!(l.get("t.7").unwrap().debits()[..], [leg(2, 9)]);
        assert_eq!(l.get("t.5000"), None);
        assert_eq!(l.iter().nth(4_999).map(|(id, _)| id), Some("t.4999"));
        l.retain_legs(|g| g.account != Sym(1));
        assert!(l.get("t.1").unwrap().holds().is_empty());
        assert_eq!(l.get("t.7").unwrap().debits().len(), 1);
        let back = LegsTable::from_rows(
            l.iter()
                .map(|(id, legs)| (Id::from(id), legs.clone()))
                .collect(),
        );
        assert_eq!(back.get("t.7"), l.get("t.7"));
        assert_eq!(back.len(), l.len());
    }

    /// A leg of 1 on the first account, for tests where only its presence
    /// counts.
    const UNIT_LEG: Leg = Leg {
        at_s: 0,
        account: Sym(0),
        amount: 1,
        currency: Sym(0),
        counterparty: Sym(0),
        seq: 1,
    };

    #[test]
    fn orphan_legs_of_a_logged_table_are_found_until_their_legs_are_withdrawn() {
        let mut f = Facts::default();
        f.transfers.put("t.a", state(1));
        f.transfers.end_pass();
        let other = Leg {
            account: Sym(7),
            ..UNIT_LEG
        };
        f.legs.start_log(3);
        f.legs.add("t.z", LegKind::Credit, other);
        f.legs.add("t.a", LegKind::Hold, UNIT_LEG);
        f.legs.add("t.z", LegKind::Hold, other);
        f.legs.end_log();
        assert_eq!(f.legs.rows_with_legs(), 2);
        f.finish_transfers();
        assert_eq!(f.orphan_legs, ["t.z"]);
        // Its legs withdrawn, t.z keeps an empty row: no longer an orphan.
        f.legs.retain_legs(|leg| leg.account != Sym(7));
        assert_eq!(f.legs.rows_with_legs(), 1);
        f.finish_transfers();
        assert!(f.orphan_legs.is_empty());
        assert!(f.legs_of[0].is_some());
    }

    #[test]
    fn orphan_legs_are_found_only_when_they_exist() {
        let mut f = Facts::default();
        f.transfers.put("t.a", state(1));
        f.transfers.end_pass();
        let leg = UNIT_LEG;
        f.legs.entry("t.a").push(LegKind::Hold, leg);
        f.finish_transfers();
        assert!(f.orphan_legs.is_empty());
        f.legs.entry("t.z").push(LegKind::Credit, leg);
        f.legs.entry("t.b"); // empty: not an orphan
        f.finish_transfers();
        assert_eq!(f.orphan_legs, ["t.z"]);
        let ids: Vec<(&str, bool, usize)> = f
            .transfer_ids()
            .map(|(id, t, l)| (id, t.is_some(), l.holds().len() + l.credits().len()))
            .collect();
        assert_eq!(ids, [("t.a", true, 1), ("t.z", false, 1)]);
    }

    /// `transfer_ids_in` yields exactly the ids at its positions, for every
    /// range over transfers, orphans and past the end.
    #[test]
    fn transfer_ids_in_a_range_are_that_slice_of_all() {
        let mut f = Facts::default();
        let rows = (0..5)
            .map(|i| (format!("t.{i}").into(), TransferState::default()))
            .collect();
        f.transfers = Transfers::from_sorted(rows);
        let leg = UNIT_LEG;
        f.legs.entry("t.1").push(LegKind::Hold, leg);
        for orphan in ["t.x", "t.y", "t.z"] {
            f.legs.entry(orphan).push(LegKind::Credit, leg);
        }
        for finished in [false, true] {
            if finished {
                f.finish_transfers();
            } else {
                f.orphan_legs = vec!["t.x".into(), "t.y".into(), "t.z".into()];
            }
            let key = |(id, t, l): (&str, Option<&TransferFacts>, &Legs)| {
                (
                    id.to_owned(),
                    t.is_some(),
                    l.holds().len() + l.credits().len(),
                )
            };
            let all: Vec<_> = f.transfer_ids().map(key).collect();
            assert_eq!(all.len(), 8);
            assert_eq!(f.transfer_ids_len(), 8);
            assert_eq!(all[1], ("t.1".to_owned(), true, 1));
            assert_eq!(all[7], ("t.z".to_owned(), false, 1));
            for a in 0..=10 {
                for b in a..=10 {
                    let got: Vec<_> = f.transfer_ids_in(a..b).map(key).collect();
                    assert_eq!(got, all[a.min(8)..b.min(8)], "{a}..{b}");
                }
            }
        }
    }
}
