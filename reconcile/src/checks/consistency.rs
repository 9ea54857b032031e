//! Cross-stream consistency: a transfer's phases agree with its legs on the
//! accounts. reserved, credited or captured ⇒ a hold of the transfer's
//! amount on its source; captured ⇒ that hold converted into the debit (same
//! amount); released ⇒ no debit; every credit ⇒ a hold on the source that
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
        if let (Some(h), Some(d)) = (hold, legs.debits().first()) {
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
