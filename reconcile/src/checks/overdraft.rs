//! I2, no overdraft: after every account event,
//! `balance_after − held_after ≥ −overdraft_limit` (exact i128 arithmetic on
//! the recorded values, so no row can hide behind an overflow).
//!
//! What holding proves: no account ever had less available than its limit
//! allows, at any point of its history the lake holds.

use crate::finding::Finding;
use crate::stream::StreamView;

pub const NAME: &str = "no_overdraft";
pub const INVARIANT: &str = "I2";
pub const PROVES: &str = "after every account event, balance − held ≥ −overdraft_limit";

pub fn check_stream(s: &StreamView, out: &mut Vec<Finding>) {
    for ev in s.primary() {
        let (Some(bal), Some(held), Some(limit)) =
            (ev.balance_after, ev.held_after, ev.overdraft_limit)
        else {
            // Structurally invalid: completeness reports it (invalid_event).
            continue;
        };
        let available = i128::from(bal) - i128::from(held);
        if available < -i128::from(limit) {
            out.push(
                Finding::new(
                    "overdraft",
                    s.key,
                    format!(
                        "{}: balance {bal} − held {held} = {available} < −{limit} (overdraft limit)",
                        ev.kind
                    ),
                )
                .at(ev.seq, ev.event_id),
            );
        }
    }
}
