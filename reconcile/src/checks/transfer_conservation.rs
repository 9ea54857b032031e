//! I1 per transfer: a captured transfer has exactly one debit −a on its
//! source and exactly one credit +a on its destination, in the transfer's
//! currency, where a is the transfer's amount; a failed or released
//! transfer moved no money; no leg names a transfer the lake does not have.
//!
//! What holding proves: every transfer moved exactly what it said, from
//! where it said, to where it said, or nothing at all.

use crate::facts::{Leg, Legs, TransferFacts};
use crate::finding::Finding;
use crate::names::{Names, Sym};

pub const NAME: &str = "transfer_conservation";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str = "each captured transfer is one debit −a on its source and one credit +a on its destination; failed and released transfers moved nothing";

/// Whether `legs` is exactly one leg of `amount` `currency` on `account`
/// (syms of `names`; `None`: the transfer does not name one).
fn one_leg(
    names: &Names,
    legs: &[Leg],
    account: Option<Sym>,
    amount: i64,
    currency: Option<Sym>,
) -> Result<(), String> {
    match legs {
        [] => Err("none".into()),
        [l] if Some(l.account) == account && l.amount == amount && Some(l.currency) == currency => {
            Ok(())
        }
        [l] => Err(format!(
            "{} {} on {} ({})",
            l.amount,
            names.get(l.currency),
            names.get(l.account),
            l.event_id(names)
        )),
        many => Err(format!(
            "{} legs: {}",
            many.len(),
            many.iter()
                .map(|l| l.event_id(names))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Checks one transfer (its facts when it has a stream, and its legs),
/// appending its findings to `out` ([`super::per_transfer`] runs it on every
/// transfer).
pub fn check_transfer(
    n: &Names,
    id: &str,
    t: Option<&TransferFacts>,
    legs: &Legs,
    out: &mut Vec<Finding>,
) {
    let moved = !legs.debits().is_empty() || !legs.credits().is_empty();
    let Some(t) = t.filter(|t| t.amount.is_some()) else {
        if moved || !legs.holds().is_empty() {
            out.push(Finding::new(
                "leg_without_transfer",
                id,
                "account events name this transfer but the lake has no `created` event for it"
                    .into(),
            ));
        }
        return;
    };
    let amount = t.amount.unwrap_or(0);
    let name = |s: Option<Sym>| s.map_or("", |s| n.get(s));
    let (currency, src, dst) = (name(t.currency), name(t.source), name(t.destination));
    let phase = n.get(t.phase);
    match phase {
        "captured" => {
            let debit = one_leg(n, legs.debits(), t.source, amount, t.currency);
            let credit = one_leg(n, legs.credits(), t.destination, amount, t.currency);
            if debit.is_err() || credit.is_err() {
                let show = |r: Result<(), String>| r.err().unwrap_or_else(|| "ok".into());
                out.push(Finding::new(
                    "captured_legs_mismatch",
                    id,
                    format!(
                        "captured {amount} {currency} {src} → {dst}; debit: {}; credit: {}",
                        show(debit),
                        show(credit)
                    ),
                ));
            }
        }
        "failed" | "released" if moved => out.push(Finding::new(
            "money_moved_without_capture",
            id,
            format!(
                "{} transfer has {} debit(s) and {} credit(s)",
                phase,
                legs.debits().len(),
                legs.credits().len()
            ),
        )),
        _ if !legs.debits().is_empty() => out.push(Finding::new(
            "debit_before_capture",
            id,
            format!("phase {phase} but the source was already debited"),
        )),
        _ => {}
    }
}
