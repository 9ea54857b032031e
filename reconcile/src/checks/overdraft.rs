//! I2, no overdraft: after every account event,
//! `balance_after − held_after ≥ −limit` (exact i128 arithmetic on the
//! recorded values, so no row can hide behind an overflow), where `limit` is
//! the smaller of the overdraft limit the account was opened with (its
//! seq-1 row's, kept in the account's checkpointed state,
//! [`crate::facts::AccountFacts::limit`]) and the one the row records.
//!
//! Not the limit each row records alone: no account event changes it, and a
//! row that records another is `balance_integrity`'s `terms_changed`, once,
//! where it changed. A limit raised on a harmless row and kept by every row
//! after it would otherwise hide each later overdraft, from this check and
//! from the alerts. Only the seq-1 row opens the account: a row outside the
//! chain (seq 0, `invalid_event`) sets no limit for the rows after it, and a
//! second version of seq 1 (a `conflict`) that raises it is still undercut
//! by each row's own. Without the seq-1 row (a gap), each row is judged by
//! its own limit.
//!
//! Every version of a seq is judged, not only the one the folds read (the
//! first by hash): of two conflicting versions, the one that overdraws is
//! named whichever hash sorts first (rev-s48-redteam L3: the overdraft of
//! the second version was reported or not by the order of two hashes). The
//! account's limit is still its seq-1 row's first version.
//!
//! What holding proves: no account ever had less available than the limit
//! it was opened with allows, at any point of its history the lake holds.

use crate::finding::Finding;
use crate::stream::StreamView;

pub const NAME: &str = "no_overdraft";
pub const INVARIANT: &str = "I2";
pub const PROVES: &str = "after every account event, balance − held ≥ −overdraft_limit (the limit the account was opened with, or the row's when lower)";

/// Checks `s`, continuing from `limit`, the account's overdraft limit (its
/// seq-1 row's; `None` until that row is read, or when it records none or
/// a negative one), which it sets from that row.
pub fn check_stream(s: &StreamView, limit: &mut Option<i64>, out: &mut Vec<Finding>) {
    let mut last_seq = None;
    for ev in s.rows {
        let first_version = last_seq != Some(ev.seq);
        last_seq = Some(ev.seq);
        if ev.seq == 1 && first_version && limit.is_none() {
            // A negative limit is no limit (`invalid_event`): judged by
            // it, every row after would be an overdraft.
            *limit = ev.overdraft_limit.filter(|&l| l >= 0);
        }
        let (opened, own) = (*limit, ev.overdraft_limit);
        let judged = match (opened, own) {
            (Some(o), Some(r)) => Some(o.min(r)),
            _ => opened.or(own),
        };
        let (Some(bal), Some(held), Some(lim)) = (ev.balance_after, ev.held_after, judged) else {
            // Structurally invalid: completeness reports it (invalid_event).
            continue;
        };
        let available = i128::from(bal) - i128::from(held);
        if available < -i128::from(lim) {
            let whose = match (opened, own) {
                (Some(o), Some(r)) if o == r => "the account's overdraft limit".to_owned(),
                (Some(_), Some(r)) if r > lim => {
                    format!("the account's overdraft limit; the row records {r}")
                }
                (Some(o), Some(_)) => format!("the row's overdraft limit; the account's is {o}"),
                (Some(_), None) => "the account's overdraft limit; the row records none".to_owned(),
                (None, _) => {
                    "the row's overdraft limit; the account's opening limit is not known".to_owned()
                }
            };
            out.push(
                Finding::new(
                    "overdraft",
                    s.key,
                    format!(
                        "{}: balance {bal} − held {held} = {available} < −{lim} ({whose})",
                        ev.kind
                    ),
                )
                .at(ev.seq, ev.event_id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::OwnedView;
    use ledger_events::{Event, Stream};

    /// An account's rows at `seqs`, each (seq, available after it, the
    /// limit it records): balance = available, nothing held.
    fn rows(seqs: &[(u64, i64, Option<i64>)]) -> Vec<Event> {
        seqs.iter()
            .map(|&(seq, available, limit)| {
                let kind = if seq == 1 { "opened" } else { "withdrawn" };
                let mut e = Event::new(Stream::Account, "acme.a", seq, kind, 1_000, "00");
                e.balance_after = Some(available);
                e.held_after = Some(0);
                e.overdraft_limit = limit;
                e.seal()
            })
            .collect()
    }

    /// (seq, the limit that judged it) of each overdraft, continuing from
    /// `limit`, which the run leaves as the account's.
    fn judge(events: &[Event], limit: &mut Option<i64>) -> Vec<(u64, String)> {
        let v = OwnedView::of_events(Stream::Account, "acme.a", events);
        let mut out = Vec::new();
        check_stream(&v.view(), limit, &mut out);
        out.iter()
            .map(|f| {
                let at = f.detail.find(" < ").unwrap();
                (f.seq.unwrap(), f.detail[at + 3..].to_owned())
            })
            .collect()
    }

    /// rev-s48-redteam L3: of two conflicting versions of a withdrawal,
    /// the one that overdraws is named whichever of the two hashes sorts
    /// first (the folds read the first; this check reads both).
    #[test]
    fn every_version_of_a_conflict_is_judged_whichever_hash_sorts_first() {
        let mut orders = std::collections::BTreeSet::new();
        for at in 0..40 {
            let mut evs = rows(&[(1, 0, Some(100)), (2, -50, Some(100)), (3, -60, Some(100))]);
            let mut over = evs[1].clone();
            over.balance_after = Some(-999);
            over.occurred_at_ms += at;
            evs.push(over.seal());
            evs.sort_by(|a, b| (a.seq, &a.hash).cmp(&(b.seq, &b.hash)));
            let over_first = evs[1].balance_after == Some(-999);
            orders.insert(over_first);
            let v = OwnedView::of_events(Stream::Account, "acme.a", &evs);
            let mut out = Vec::new();
            check_stream(&v.view(), &mut None, &mut out);
            let found: Vec<_> = out
                .iter()
                .map(|f| (f.seq, f.detail.contains("-999")))
                .collect();
            assert_eq!(found, [(Some(2), true)], "over first: {over_first}");
        }
        assert_eq!(orders.len(), 2, "both orders of the two hashes were tried");
    }

    /// The limit is the seq-1 row's first version's: a second version of
    /// seq 1 sets none when the first records none.
    #[test]
    fn only_the_first_version_of_seq_1_opens_the_limit() {
        let mut evs = rows(&[(1, 0, None), (2, -50, None)]);
        let mut other = evs[0].clone();
        other.overdraft_limit = Some(10);
        evs.push(other.seal());
        evs.sort_by(|a, b| (a.seq, &a.hash).cmp(&(b.seq, &b.hash)));
        let mut limit = None;
        judge(&evs, &mut limit);
        assert_eq!(limit, evs[0].overdraft_limit.filter(|&l| l >= 0));
    }

    #[test]
    fn each_row_is_judged_by_the_limit_the_account_was_opened_with_or_its_own_when_lower() {
        // Opened with 100; seq 2 raises its own to 1000 and sits at −500;
        // seq 3 lowers its own to 10 and sits at −50; seq 4 records none.
        let evs = rows(&[
            (1, 0, Some(100)),
            (2, -500, Some(1000)),
            (3, -50, Some(10)),
            (4, -101, None),
            (5, -100, Some(100)),
        ]);
        let mut limit = None;
        assert_eq!(
            judge(&evs, &mut limit),
            [
                (
                    2,
                    "−100 (the account's overdraft limit; the row records 1000)".to_owned()
                ),
                (
                    3,
                    "−10 (the row's overdraft limit; the account's is 100)".to_owned()
                ),
                (
                    4,
                    "−100 (the account's overdraft limit; the row records none)".to_owned()
                ),
            ]
        );
        assert_eq!(limit, Some(100));
        // A later night goes on from the kept limit: the raised row alone
        // is still an overdraft.
        let later = rows(&[(6, -500, Some(1000))]);
        assert_eq!(judge(&later, &mut limit).len(), 1);
        assert_eq!(limit, Some(100));
    }

    #[test]
    fn only_the_seq_1_row_opens_the_account() {
        // A seq-0 row (outside the chain) recording a huge limit, read
        // first, sets nothing: the honest rows keep the opened 100.
        let evs = rows(&[
            (0, 0, Some(1_000_000)),
            (1, 0, Some(100)),
            (2, -150, Some(100)),
        ]);
        let mut limit = None;
        assert_eq!(
            judge(&evs, &mut limit),
            [(2, "−100 (the account's overdraft limit)".to_owned())]
        );
        assert_eq!(limit, Some(100));
        // Without the seq-1 row (a gap), each row by its own limit, and no
        // later row becomes the opening one.
        let evs = rows(&[(2, -150, Some(1000)), (3, -150, Some(100))]);
        let mut limit = None;
        assert_eq!(
            judge(&evs, &mut limit),
            [(
                3,
                "−100 (the row's overdraft limit; the account's opening limit is not known)"
                    .to_owned()
            )]
        );
        assert_eq!(limit, None);
        // A negative opening limit (`invalid_event`) is none: the rows
        // after it are judged by their own, not each an overdraft.
        let evs = rows(&[(1, 0, Some(-5)), (2, -50, Some(100))]);
        let mut limit = None;
        assert_eq!(
            judge(&evs, &mut limit),
            [(
                1,
                "−-5 (the row's overdraft limit; the account's opening limit is not known)"
                    .to_owned()
            )]
        );
        assert_eq!(limit, None);
    }
}
