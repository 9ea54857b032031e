//! I1 per transfer: a captured transfer has exactly one debit −a on its
//! source and exactly one credit +a on its destination, in the transfer's
//! currency, where a is the transfer's amount; a failed or released
//! transfer moved no money; no leg names a transfer the lake does not have.
//!
//! What holding proves: every transfer moved exactly what it said, from
//! where it said, to where it said, or nothing at all.

use crate::facts::{Facts, Leg};
use crate::finding::Finding;

pub const NAME: &str = "transfer_conservation";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str = "each captured transfer is one debit −a on its source and one credit +a on its destination; failed and released transfers moved nothing";

fn one_leg(legs: &[Leg], account: &str, amount: i64, currency: &str) -> Result<(), String> {
    match legs {
        [] => Err("none".into()),
        [l] if l.account == account && l.amount == amount && l.currency == currency => Ok(()),
        [l] => Err(format!(
            "{} {} on {} ({})",
            l.amount, l.currency, l.account, l.event_id
        )),
        many => Err(format!(
            "{} legs: {}",
            many.len(),
            many.iter()
                .map(|l| l.event_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    let none = Default::default();
    for id in f.transfer_ids() {
        let legs = f.legs.get(id).unwrap_or(&none);
        let moved = !legs.debits.is_empty() || !legs.credits.is_empty();
        let Some(t) = f.transfers.get(id).filter(|t| t.amount.is_some()) else {
            if moved || !legs.holds.is_empty() {
                out.push(Finding::new(
                    "leg_without_transfer",
                    id,
                    "account events name this transfer but the lake has no `created` event for it"
                        .into(),
                ));
            }
            continue;
        };
        let amount = t.amount.unwrap_or(0);
        let currency = t.currency.as_deref().unwrap_or("");
        let (src, dst) = (
            t.source.as_deref().unwrap_or(""),
            t.destination.as_deref().unwrap_or(""),
        );
        match t.phase.as_str() {
            "captured" => {
                let debit = one_leg(&legs.debits, src, amount, currency);
                let credit = one_leg(&legs.credits, dst, amount, currency);
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
                    t.phase,
                    legs.debits.len(),
                    legs.credits.len()
                ),
            )),
            _ if !legs.debits.is_empty() && t.phase != "captured" => out.push(Finding::new(
                "debit_before_capture",
                id,
                format!("phase {} but the source was already debited", t.phase),
            )),
            _ => {}
        }
    }
    out
}
