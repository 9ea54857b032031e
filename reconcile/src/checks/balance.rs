//! Balance integrity: refolding each account's events in seq order
//! reproduces the recorded `balance_after` and `held_after` of every event.
//!
//! The fold is local: each event is checked against the *recorded* state of
//! the event before it plus the event's own effect (docs/EVENTS.md, account
//! kinds), then the fold resyncs to the recorded values. So one bad row is
//! one finding, not a cascade, and a balance that changed without an entry
//! (a deposit-less change) is named at the exact row where it happened. The
//! first row after a seq gap is not judged (completeness reports the gap).
//!
//! No account event changes the account's currency or overdraft limit
//! (`opened` sets them), so every row must repeat the previous row's: a row
//! that does not is `terms_changed`, once, where it changed (a limit raised
//! under a withdrawal would otherwise hide an overdraft from `no_overdraft`,
//! which judges each row by the limit it records).
//!
//! What holding proves, with completeness: every balance the lake shows is
//! the sum of the account's postings, every `held` is the sum of its
//! placed minus captured and released holds, and every event carries the
//! currency and limit the account was opened with.

use ledger_events::AccountKind;

use super::{same_text, shown};
use crate::facts::AccountTerms;
use crate::finding::Finding;
use crate::stream::StreamView;

pub const NAME: &str = "balance_integrity";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str =
    "refolding each account's events reproduces every recorded balance_after and held_after, and every event keeps the currency and overdraft limit the account was opened with";

/// The state change of one account event: (balance delta, held delta).
pub fn effect(kind: AccountKind, amount: i64) -> (i64, i64) {
    match kind {
        AccountKind::Opened | AccountKind::Frozen | AccountKind::Unfrozen => (0, 0),
        AccountKind::Deposited | AccountKind::Credited => (amount, 0),
        AccountKind::Withdrawn => (-amount, 0),
        AccountKind::HoldPlaced => (0, amount),
        AccountKind::Captured => (-amount, -amount),
        AccountKind::HoldReleased => (0, -amount),
    }
}

/// Checks `s`, continuing the refold from `fold` (the previous run's last
/// row: seq, balance, held) and the terms from `terms` (the previous run's
/// last row's), and leaves the new last row's in both. For each seq gap
/// (which completeness reports), appends to `gaps` its first missing seq
/// and how much the missing events moved the balance, when the rows around
/// it tell (see [`crate::finding::Finding::missing_balance`]).
pub fn check_stream(
    s: &StreamView,
    fold: &mut Option<(u64, i64, i64)>,
    terms: &mut Option<AccountTerms>,
    out: &mut Vec<Finding>,
    gaps: &mut Vec<(u64, Option<i64>)>,
) {
    // (seq, balance, held) of the previous event.
    let mut prev: Option<(u64, i64, i64)> = *fold;
    // The previous event's seq, whatever it recorded.
    let mut prev_seq = fold.map_or(0, |f| f.0);
    for ev in s.primary() {
        let after_gap = ev.seq > prev_seq + 1;
        let first_missing = prev_seq + 1;
        prev_seq = ev.seq;
        let kept = terms.as_ref().is_some_and(|t| {
            t.overdraft_limit == ev.overdraft_limit && same_text(t.currency.as_deref(), ev.currency)
        });
        if !kept {
            if let Some(t) = terms {
                out.push(
                    Finding::new(
                        "terms_changed",
                        s.key,
                        format!(
                            "{}: currency {} overdraft_limit {}, the previous event's are {} and {}",
                            ev.kind,
                            shown(ev.currency),
                            shown(ev.overdraft_limit),
                            shown(t.currency.as_deref()),
                            shown(t.overdraft_limit)
                        ),
                    )
                    .at(ev.seq, ev.event_id),
                );
            }
            *terms = Some(AccountTerms {
                currency: ev.currency.map(str::to_owned),
                overdraft_limit: ev.overdraft_limit,
            });
        }
        let (Some(bal), Some(held), Some(kind)) =
            (ev.balance_after, ev.held_after, AccountKind::parse(ev.kind))
        else {
            prev = None;
            continue;
        };
        if after_gap && kind != AccountKind::Opened {
            // The balance before this row's own effect, less the last one
            // recorded before the gap (0 before seq 1).
            let before = match prev {
                Some((pseq, pbal, _)) if pseq + 1 == first_missing => Some(pbal),
                None if first_missing == 1 => Some(0),
                _ => None,
            };
            let (db, _) = effect(kind, ev.amount.unwrap_or(0));
            let moved = before.and_then(|b| bal.checked_sub(db).and_then(|x| x.checked_sub(b)));
            gaps.push((first_missing, moved));
        }
        let expected = if kind == AccountKind::Opened {
            Some((0i128, 0i128))
        } else {
            match prev {
                Some((pseq, pbal, pheld)) if pseq + 1 == ev.seq => {
                    let (db, dh) = effect(kind, ev.amount.unwrap_or(0));
                    Some((
                        i128::from(pbal) + i128::from(db),
                        i128::from(pheld) + i128::from(dh),
                    ))
                }
                // After a gap (or a first row that is not `opened`): unjudged.
                _ => None,
            }
        };
        if let Some((eb, eh)) = expected {
            if (eb, eh) != (i128::from(bal), i128::from(held)) {
                out.push(
                    Finding::new(
                        "balance_mismatch",
                        s.key,
                        format!(
                            "{}: refold gives balance {eb} held {eh}, the row records balance {bal} held {held}",
                            ev.kind
                        ),
                    )
                    .at(ev.seq, ev.event_id),
                );
            }
        }
        prev = Some((ev.seq, bal, held));
    }
    *fold = prev;
}
