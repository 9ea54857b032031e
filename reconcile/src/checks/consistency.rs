//! Cross-stream consistency: a transfer's phases agree with its legs on the
//! accounts. reserved, credited or captured ⇒ a hold of the transfer's
//! amount on its source; captured ⇒ that hold converted into the source's
//! debit (same amount); released ⇒ no debit; every credit ⇒ a hold on the source that
//! was not released (mid-saga, I1: every credit is matched by a live hold);
//! holds only on the transfer's source.
//!
//! Holds that outlive their transfer are `convergence`'s (leaked holds), so
//! one defect is reported by one check.

use crate::facts::{Legs, TransferFacts};
use crate::finding::Finding;
use crate::names::Names;

pub const NAME: &str = "cross_stream_consistency";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str =
    "every transfer's phase agrees with the holds, debits and credits on its accounts";

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
    let Some(t) = t.filter(|t| t.amount.is_some()) else {
        return; // transfer_conservation reports legs without a transfer
    };
    let src = t.source.map_or("", |s| n.get(s));
    let phase = n.get(t.phase);
    let amount = t.amount.unwrap_or(0);
    let mut bad = |code: &'static str, detail: String| {
        out.push(Finding::new(code, id, detail));
    };
    if let Some(h) = legs.holds().iter().find(|h| Some(h.account) != t.source) {
        bad(
            "hold_on_wrong_account",
            format!(
                "hold {} is on {}, the source is {src}",
                h.event_id(n),
                n.get(h.account)
            ),
        );
    }
    let hold = legs.holds().iter().find(|h| Some(h.account) == t.source);
    let needs_hold = matches!(phase, "reserved" | "credited" | "captured");
    match hold {
        None if needs_hold => bad(
            "phase_without_hold",
            format!("phase {phase} but no hold on the source {src}"),
        ),
        Some(h) if needs_hold && h.amount != amount => bad(
            "hold_amount_mismatch",
            format!(
                "hold {} of {} for a transfer of {amount}",
                h.event_id(n),
                h.amount
            ),
        ),
        _ => {}
    }
    if phase == "captured" {
        // The capture of the source's hold is the source's debit (the first
        // by seq, the order one account's legs are added in): not the first
        // debit added, which depends on the order accounts were read (a
        // debit on another account is transfer_conservation's).
        let debit = legs.debits().iter().find(|d| Some(d.account) == t.source);
        if let (Some(h), Some(d)) = (hold, debit) {
            if d.amount != h.amount {
                bad(
                    "capture_not_hold",
                    format!("hold of {} captured as a debit of {}", h.amount, d.amount),
                );
            }
        }
    }
    if !legs.credits().is_empty() {
        let released = legs.releases().iter().any(|r| r.amount > 0);
        if hold.is_none() || released {
            bad(
                "credit_without_live_hold",
                format!(
                    "credited {} but the source hold was {}",
                    legs.credits()[0].event_id(n),
                    if released { "released" } else { "never placed" }
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Leg;

    /// The capture is judged on the source's debit, whatever order the
    /// accounts' legs were added in: a debit on another account (added
    /// first, as reading that account's date first would) is not the
    /// capture of the hold (transfer_conservation reports it).
    #[test]
    fn the_capture_is_the_sources_debit_not_the_first_debit_added() {
        let mut n = Names::default();
        let (src, other, usd) = (n.id("src"), n.id("other"), n.id("USD"));
        let mut t = TransferFacts::new(n.id("captured"));
        (t.amount, t.currency, t.source) = (Some(100), Some(usd), Some(src));
        let leg = |account, amount, seq| Leg {
            account,
            amount,
            currency: usd,
            seq,
        };
        let judge = |debits: Vec<Leg>| {
            let legs = Legs::from_lists([vec![leg(src, 100, 1)], debits, vec![], vec![]]);
            let mut out = Vec::new();
            check_transfer(&n, "t", Some(&t), &legs, &mut out);
            out.iter().map(|f| f.code).collect::<Vec<_>>()
        };
        assert!(judge(vec![leg(other, 7, 9), leg(src, 100, 2)]).is_empty());
        assert_eq!(
            judge(vec![leg(other, 100, 9), leg(src, 99, 2)]),
            ["capture_not_hold"]
        );
        assert!(judge(vec![leg(src, 100, 2)]).is_empty());
    }
}
