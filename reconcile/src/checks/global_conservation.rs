//! I1 globally: per currency, Σ final balances = Σ deposits − Σ withdrawals
//! plus money in flight (i128 sums over the last recorded `balance_after` of
//! every account).
//!
//! Money in flight: a saga credits the destination before it captures the
//! source's hold, so between the two the credit is in the balances and the
//! debit is not yet. I1 says how that is still conserved: mid-saga, every
//! credit is matched by a live hold. So the credits of transfers in
//! progress whose source's hold is still live (placed, neither captured nor
//! released) are counted as in flight; any other credit or debit must
//! balance. A run at any instant of the ledger's life (a nightly cut)
//! therefore holds, and a credit of a finished transfer that no debit
//! matches does not.
//!
//! What holding proves: no money was created or destroyed inside the
//! ledger; only deposits and withdrawals moved money across its boundary.

use std::collections::BTreeMap;

use crate::facts::{Facts, Legs, TransferFacts};
use crate::finding::Finding;

pub const NAME: &str = "global_conservation";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str = "per currency, the sum of final balances equals deposits minus withdrawals plus the credits in flight (mid-saga credits whose source hold is live)";

/// The credits of the transfer in progress `t` that its source's live hold
/// still covers (empty when the hold was captured or released, or never
/// placed).
fn in_flight<'a>(t: &TransferFacts, legs: &'a Legs) -> &'a [crate::facts::Leg] {
    let on_source = |l: &crate::facts::Leg| Some(l.account) == t.source;
    let live = legs.holds().iter().any(on_source)
        && !legs.debits().iter().any(on_source)
        && !legs.releases().iter().any(|r| on_source(r) && r.amount > 0);
    if live && t.amount.is_some() {
        legs.credits()
    } else {
        &[]
    }
}

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut flight: BTreeMap<&str, i128> = BTreeMap::new();
    for (_, t, legs) in f.in_progress() {
        for c in in_flight(t, legs) {
            *flight.entry(f.names.get(c.currency)).or_default() += i128::from(c.amount);
        }
    }
    let mut out = Vec::new();
    let mut currencies: Vec<&str> = f.currencies.keys().map(String::as_str).collect();
    currencies.extend(flight.keys().filter(|c| !f.currencies.contains_key(**c)));
    currencies.sort_unstable();
    for currency in currencies {
        let s = f.currencies.get(currency).copied().unwrap_or_default();
        let moving = flight.get(currency).copied().unwrap_or(0);
        let expected = s.deposits - s.withdrawals + moving;
        if s.balances != expected {
            out.push(Finding::new(
                "not_conserved",
                currency,
                format!(
                    "Σ balances {} over {} accounts ≠ deposits {} − withdrawals {} + in flight {moving} = {expected} (difference {})",
                    s.balances,
                    s.accounts,
                    s.deposits,
                    s.withdrawals,
                    s.balances - expected
                ),
            ));
        }
    }
    out
}
