//! I2, no overdraft: after every account event,
//! `balance_after − held_after ≥ −limit` (exact i128 arithmetic on the
//! recorded values, so no row can hide behind an overflow), where `limit` is
//! the overdraft limit the account was opened with: its first row's (the
//! first that records one), kept in the account's checkpointed state
//! ([`crate::facts::AccountFacts::limit`]).
//!
//! Not the limit each row records: no account event changes it, and a row
//! that records another is `balance_integrity`'s `terms_changed`, once, where
//! it changed. A limit raised on a harmless row and kept by every row after
//! it would otherwise hide each later overdraft, from this check and from
//! the alerts.
//!
//! What holding proves: no account ever had less available than the limit
//! it was opened with allows, at any point of its history the lake holds.

use crate::finding::Finding;
use crate::stream::StreamView;

pub const NAME: &str = "no_overdraft";
pub const INVARIANT: &str = "I2";
pub const PROVES: &str =
    "after every account event, balance − held ≥ −overdraft_limit (the limit the account was opened with)";

/// Checks `s`, continuing from `limit`, the account's overdraft limit (its
/// first row's; `None` until a row records one), which it sets from the
/// first row that records one when it is unknown.
pub fn check_stream(s: &StreamView, limit: &mut Option<i64>, out: &mut Vec<Finding>) {
    for ev in s.primary() {
        if limit.is_none() {
            *limit = ev.overdraft_limit;
        }
        let (Some(bal), Some(held), Some(lim)) = (ev.balance_after, ev.held_after, *limit) else {
            // Structurally invalid: completeness reports it (invalid_event).
            continue;
        };
        let available = i128::from(bal) - i128::from(held);
        if available < -i128::from(lim) {
            let own = match ev.overdraft_limit {
                Some(l) if l == lim => String::new(),
                Some(l) => format!("; the row records {l}"),
                None => "; the row records none".to_owned(),
            };
            out.push(
                Finding::new(
                    "overdraft",
                    s.key,
                    format!(
                        "{}: balance {bal} − held {held} = {available} < −{lim} (the account's overdraft limit{own})",
                        ev.kind
                    ),
                )
                .at(ev.seq, ev.event_id),
            );
        }
    }
}
