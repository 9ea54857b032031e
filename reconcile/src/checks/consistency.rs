//! Cross-stream consistency: a transfer's phases agree with its legs on the
//! accounts. reserved, credited or captured ⇒ a hold on its source; any
//! hold on the source, in every phase, is of the transfer's amount, in its
//! currency; captured ⇒ that hold converted into the source's
//! debit (same amount); released ⇒ no debit; every credit ⇒ a hold on the source that
//! was not released (mid-saga, I1: every credit is matched by a live hold);
//! failed ⇒ no hold was ever placed on its source (`failed_with_hold`: a
//! transfer fails only when its source refused the reserve, and an
//! account answers every delivery of one reserve alike, so a reserve it
//! refused never holds; a reserve given up while it landed ends
//! `releasing`, never `failed`), and nothing was released there, not even
//! a hold never placed (`failed_with_release`: the saga releases only from
//! `releasing`); holds, and releases of holds, only on the transfer's
//! source; a hold's end (its capture or its release, a tombstone included)
//! is final: no hold (`hold_after_end`: the account refuses a reserve that
//! arrives after its compensation) and no release (`release_after_end`) on
//! the source after it; every leg names the transfer's other party as its
//! counterparty.
//!
//! Holds that outlive their transfer are `convergence`'s (leaked holds), so
//! one defect is reported by one check; a failed transfer's hold is wrong
//! as soon as it is placed, released or not: one still live is both (the
//! hold should not exist, and it outlives its transfer). Likewise a hold
//! placed after its hold's end is `hold_after_end` and, by the same row,
//! `leaked_hold` when left live, `hold_placed_twice` while another is live,
//! `failed_with_hold` on a failed transfer; a release of money after it is
//! `release_after_end` and the refold's `release_without_hold`: each rule
//! it breaks reports it.

use super::shown_absent_ms;
use crate::facts::{Leg, LegKind, Legs, TransferFacts};
use crate::finding::Finding;
use crate::names::Names;

pub const NAME: &str = "cross_stream_consistency";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str = "every transfer's phase agrees with the holds, debits and credits on its accounts (a failed transfer never held money; nothing is held or released on the source after its hold's end, nor released elsewhere), and each of them names the transfer's other party";

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
    let Some(t) = t.filter(|t| t.amount().is_some()) else {
        return; // transfer_conservation reports legs without a transfer
    };
    let src = t.source().map_or("", |s| n.get(s));
    let phase = n.get(t.phase);
    let amount = t.amount().unwrap_or(0);
    // A finding on a row that is wrong, or (`absent`: when the first row
    // that shows it was committed, [`shown_absent_ms`]) on a step that is
    // not in the lake: committed before that row, it may still be in
    // delivery while that row is young. With `row`, the account row that
    // shows it (its seq is in that account's stream, which its event id
    // names; the finding's key is the transfer's).
    let mut bad = |code: &'static str, detail: String, absent: Option<i64>, row: Option<&Leg>| {
        let mut f = Finding::new(code, id, detail);
        if let Some(l) = row {
            f = f.at(l.seq, &l.event_id(n));
        }
        out.push(match absent {
            Some(shown_ms) => f.absence(shown_ms),
            None => f,
        });
    };
    // The account rows that show each step: a credit is asked for once the
    // hold is placed, a capture (the source's debit) once the credit is.
    let (credits, debits) = (legs.credits(), legs.debits());
    // Holds, and the releases of holds, only on the source: the saga
    // reserves and releases there alone (a release elsewhere, even of
    // nothing, is one the saga never asked for). Each such row, in the
    // legs' order (their accounts' names, then seq).
    let off_source = |l: &&Leg| Some(l.account) != t.source();
    let holds_off = legs.holds().iter().filter(off_source).map(|l| ("hold", l));
    let releases_off = legs.releases().iter().filter(off_source);
    for (kind, l) in holds_off.chain(releases_off.map(|l| ("release", l))) {
        bad(
            "hold_on_wrong_account",
            format!(
                "{kind} {} is on {}, the source is {src}",
                l.event_id(n),
                n.get(l.account)
            ),
            None,
            Some(l),
        );
    }
    let hold = legs.holds().iter().find(|h| Some(h.account) == t.source());
    let needs_hold = matches!(phase, "reserved" | "credited" | "captured");
    match hold {
        None if needs_hold => bad(
            "phase_without_hold",
            format!("phase {phase} but no hold on the source {src}"),
            Some(shown_absent_ms(Some(t), credits.iter().chain(debits))),
            None,
        ),
        // The core places a hold of the transfer's amount, whatever the
        // phase the lake shows (the transfer's `reserved` may still be in
        // delivery): a hold of another amount is a wrong row in every
        // phase (a token hold would cover a credit in flight it cannot pay).
        Some(h) if h.amount != amount => bad(
            "hold_amount_mismatch",
            format!(
                "hold {} of {} for a transfer of {amount}",
                h.event_id(n),
                h.amount
            ),
            None,
            Some(h),
        ),
        _ => {}
    }
    // The hold is in the transfer's currency, in every phase (a hold of the
    // amount in another currency would cover a mid-saga credit it cannot pay).
    let currency = t.currency().map_or("", |c| n.get(c));
    if let Some(h) = hold.filter(|h| n.get(h.currency) != currency) {
        bad(
            "hold_currency_mismatch",
            format!(
                "hold {} in {} for a transfer in {}",
                h.event_id(n),
                // A row without one says so (rev-s56-outputs 3: "in  for").
                super::or_none(n.get(h.currency)),
                super::or_none(currency)
            ),
            None,
            Some(h),
        );
    }
    // Captured, or being captured (the source's debit committed, the
    // transfer's `captured` not yet: see transfer_conservation).
    if matches!(phase, "credited" | "captured") {
        // The capture of the source's hold is the source's debit (the first
        // by seq, the order one account's legs are added in): not the first
        // debit added, which depends on the order accounts were read (a
        // debit on another account is transfer_conservation's).
        let debit = debits.iter().find(|d| Some(d.account) == t.source());
        if let (Some(h), Some(d)) = (hold, debit) {
            if d.amount != h.amount {
                bad(
                    "capture_not_hold",
                    format!(
                        "hold {} of {} captured as a debit of {} by {}",
                        h.event_id(n),
                        h.amount,
                        d.amount,
                        d.event_id(n)
                    ),
                    None,
                    Some(d),
                );
            }
        }
    }
    if let Some(credit) = credits.first() {
        let released = legs.releases().iter().any(|r| r.amount > 0);
        if hold.is_none() || released {
            // (The first credit in the legs' order.)
            bad(
                "credit_without_live_hold",
                format!(
                    "credited {} but the source hold was {}",
                    credit.event_id(n),
                    if released { "released" } else { "never placed" }
                ),
                // A hold is placed before any credit; a release is final.
                (!released).then(|| {
                    shown_absent_ms(needs_hold.then_some(t), credits.iter().chain(debits))
                }),
                Some(credit),
            );
        }
    } else if phase == "credited" {
        // The transfer records `credited` after the destination's credit
        // commits (in `captured`, transfer_conservation names the legs).
        let dst = t.destination().map_or("", |d| n.get(d));
        bad(
            "phase_without_credit",
            format!("phase credited but no credit on the destination {dst}"),
            Some(shown_absent_ms(Some(t), debits)),
            None,
        );
    }
    // The source refused the reserve of a failed transfer: no hold, placed
    // and left or placed and released, at its first hold on the source (a
    // hold elsewhere is `hold_on_wrong_account`). Nor did it release
    // anything there, not even a hold it never placed (a tombstone,
    // `no_hold`): the saga releases only from `releasing`, which a failed
    // transfer never reaches. At the first release on the source, when no
    // hold already names the transfer.
    if phase == "failed" {
        let wrong = match hold {
            Some(h) => Some((
                "failed_with_hold",
                h,
                format!("placed a hold of {}", h.amount),
            )),
            None => legs
                .releases()
                .iter()
                .find(|r| Some(r.account) == t.source())
                .map(|r| {
                    let what = match r.amount {
                        0 => "released a hold it never placed (a tombstone)".to_owned(),
                        a => format!("released {a} it never held"),
                    };
                    ("failed_with_release", r, what)
                }),
        };
        if let Some((code, leg, what)) = wrong {
            let event = leg.event_id(n);
            out.push(
                Finding::new(
                    code,
                    id,
                    format!("phase failed (the source refused the reserve), but {event} {what} on the source {src}"),
                )
                .at(leg.seq, &event),
            );
        }
    }
    after_the_end(n, id, t, legs, out);
    check_counterparties(n, id, t, legs, out);
}

/// A hold's end is final: once the source captured the transfer's hold or
/// released it (or left the tombstone of a release that found none), it
/// answers a repeated reserve or release from its record, refuses a reserve
/// after a release (`HoldReleased`) and a release after a capture
/// (`HoldCaptured`). So a hold placed on the source after that end
/// (`hold_after_end`) and a release there after it (`release_after_end`) are
/// rows the core never writes: each at the first such row. (A hold placed,
/// released and placed again is money-neutral and passes the refold: each
/// row moves `held` by its own amount; so does a tombstone after the end.)
fn after_the_end(n: &Names, id: &str, t: &TransferFacts, legs: &Legs, out: &mut Vec<Finding>) {
    // The first leg of `of` on the source after the seq `from` (any seq
    // with `None`).
    let first_after = |of: &'_ [Leg], from: Option<u64>| {
        of.iter()
            .filter(|l| Some(l.account) == t.source() && from.is_none_or(|s| l.seq > s))
            .min_by_key(|l| l.seq)
            .copied()
    };
    let (release, capture) = (
        first_after(legs.releases(), None),
        first_after(legs.debits(), None),
    );
    let Some(end) = [release, capture]
        .into_iter()
        .flatten()
        .min_by_key(|l| l.seq)
    else {
        return;
    };
    let ended = match (end.amount, release.is_some_and(|r| r.seq == end.seq)) {
        (_, false) => format!("captured {}", end.amount),
        (0, true) => "released a hold it never placed (a tombstone)".to_owned(),
        (a, true) => format!("released {a}"),
    };
    let src = t.source().map_or("", |s| n.get(s));
    let after = Some(end.seq);
    for (code, leg, what) in [
        (
            "hold_after_end",
            first_after(legs.holds(), after),
            "placed a hold of",
        ),
        (
            "release_after_end",
            first_after(legs.releases(), after),
            "released",
        ),
    ] {
        let Some(leg) = leg else { continue };
        let event = leg.event_id(n);
        out.push(
            Finding::new(
                code,
                id,
                format!(
                    "{event} {what} {} on the source {src} after {} {ended} there (the account answers a repeated \
                     reserve or release from its record and refuses one after the hold's end)",
                    leg.amount,
                    end.event_id(n),
                ),
            )
            .at(leg.seq, &event),
        );
    }
}

/// Every leg names the transfer's other party, as the account core writes
/// it: the destination on the holds, the capture and the releases (on the
/// source), the source on the credit (on the destination); a release of
/// nothing (a tombstone, amount 0) may name none. One finding per leg that
/// does not, with its row: an account's statement would show the money
/// coming from, or going to, someone else.
fn check_counterparties(
    n: &Names,
    id: &str,
    t: &TransferFacts,
    legs: &Legs,
    out: &mut Vec<Finding>,
) {
    for kind in LegKind::ALL {
        let (party, role) = match kind {
            LegKind::Credit => (t.source(), "source"),
            _ => (t.destination(), "destination"),
        };
        for leg in legs.of(kind) {
            // A leg without a counterparty has the empty name (its length
            // is in the names list: no lookup of the text).
            let names_none = n.get(leg.counterparty).is_empty();
            let tombstone = kind == LegKind::Release && leg.amount == 0;
            if party.map_or(names_none, |p| leg.counterparty == p) || (tombstone && names_none) {
                continue;
            }
            let event = leg.event_id(n);
            let named = if names_none {
                "no counterparty".to_owned()
            } else {
                format!("counterparty {}", n.get(leg.counterparty))
            };
            out.push(
                Finding::new(
                    "counterparty_mismatch",
                    id,
                    format!(
                        "{event} names {named}; the transfer's {role} is {}",
                        party.map_or("none", |p| n.get(p))
                    ),
                )
                .at(leg.seq, &event),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The capture is judged on the source's debit, whatever order the
    /// accounts' legs were added in: a debit on another account (added
    /// first, as reading that account's date first would) is not the
    /// capture of the hold (transfer_conservation reports it).
    #[test]
    fn the_capture_is_the_sources_debit_not_the_first_debit_added() {
        let mut n = Names::default();
        let (src, other, usd) = (n.id("src"), n.id("other"), n.id("USD"));
        let mut t = TransferFacts::new(n.id("captured"));
        t.set_amount(Some(100));
        t.set_currency(Some(usd));
        t.set_source(Some(src));
        t.set_destination(Some(other));
        let leg = |account, amount, seq| Leg {
            at_s: 0,
            account,
            amount,
            currency: usd,
            counterparty: other,
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

    /// A hold of the amount in another currency than the transfer's: found
    /// while the saga is in flight (at capture, the debit's currency is
    /// transfer_conservation's).
    #[test]
    fn the_hold_is_in_the_transfers_currency() {
        let mut n = Names::default();
        let (src, dst, usd, eur) = (n.id("src"), n.id("dst"), n.id("USD"), n.id("EUR"));
        let judge = |n: &mut Names, phase: &str, hold_currency| {
            let mut t = TransferFacts::new(n.id(phase));
            t.set_amount(Some(100));
            t.set_currency(Some(usd));
            t.set_source(Some(src));
            t.set_destination(Some(dst));
            let hold = Leg {
                at_s: 0,
                account: src,
                amount: 100,
                currency: hold_currency,
                counterparty: dst,
                seq: 1,
            };
            let legs = Legs::from_lists([vec![hold], vec![], vec![], vec![]]);
            let mut out = Vec::new();
            check_transfer(n, "t", Some(&t), &legs, &mut out);
            out.iter()
                .map(|f| (f.code, f.detail.clone()))
                .collect::<Vec<_>>()
        };
        assert!(judge(&mut n, "reserved", usd).is_empty());
        let found = judge(&mut n, "reserved", eur);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "hold_currency_mismatch");
        assert!(
            found[0].1.ends_with(" in EUR for a transfer in USD"),
            "{found:?}"
        );
        // A hold row without a currency says so, not "in  for".
        let none = n.id("");
        let found = judge(&mut n, "reserved", none);
        assert!(
            found[0].1.ends_with(" in none for a transfer in USD"),
            "{found:?}"
        );
    }

    /// A failed transfer's source refused its reserve: a hold there, live
    /// or released again, is found at its row, and so is a release there
    /// without one; a transfer whose reserve was given up while it landed is
    /// released, and its hold or tombstone is right.
    #[test]
    fn a_failed_transfer_never_held_money_on_its_source() {
        let mut n = Names::default();
        let (src, dst, usd) = (n.id("src"), n.id("dst"), n.id("USD"));
        let none = n.id("");
        let judge = |n: &mut Names,
                     phase: &str,
                     holds: Vec<u64>,
                     releases: Vec<u64>,
                     tombstones: Vec<u64>| {
            let mut t = TransferFacts::new(n.id(phase));
            t.set_amount(Some(100));
            t.set_currency(Some(usd));
            t.set_source(Some(src));
            t.set_destination(Some(dst));
            let leg = |seq, amount| Leg {
                at_s: 0,
                account: src,
                amount,
                currency: usd,
                counterparty: dst,
                seq,
            };
            let holds = holds.into_iter().map(|s| leg(s, 100)).collect();
            let releases = releases
                .into_iter()
                .map(|s| leg(s, 100))
                .chain(tombstones.into_iter().map(|s| Leg {
                    counterparty: none,
                    ..leg(s, 0)
                }))
                .collect();
            let legs = Legs::from_lists([holds, vec![], vec![], releases]);
            let mut out = Vec::new();
            check_transfer(n, "t", Some(&t), &legs, &mut out);
            out.iter()
                .map(|f| (f.code, f.event_id.clone()))
                .collect::<Vec<_>>()
        };
        assert!(judge(&mut n, "failed", vec![], vec![], vec![]).is_empty());
        let found = vec![("failed_with_hold", Some("account:src:7".to_owned()))];
        assert_eq!(judge(&mut n, "failed", vec![7], vec![8], vec![]), found);
        assert_eq!(judge(&mut n, "failed", vec![7], vec![], vec![]), found);
        assert!(judge(&mut n, "released", vec![7], vec![8], vec![]).is_empty());
        // A release of a hold it never placed: a tombstone, or one of money.
        let released =
            |seq: &str| vec![("failed_with_release", Some(format!("account:src:{seq}")))];
        assert_eq!(
            judge(&mut n, "failed", vec![], vec![], vec![9]),
            released("9")
        );
        assert_eq!(
            judge(&mut n, "failed", vec![], vec![8], vec![]),
            released("8")
        );
        // A released transfer's tombstone is the saga's: its reserve was
        // given up, and may still land.
        assert!(judge(&mut n, "released", vec![], vec![], vec![9]).is_empty());
    }

    #[test]
    fn each_leg_names_the_other_party_and_a_tombstone_may_name_none() {
        let mut n = Names::default();
        let (src, dst, third, none, usd) = (
            n.id("src"),
            n.id("dst"),
            n.id("third"),
            n.id(""),
            n.id("USD"),
        );
        let mut t = TransferFacts::new(n.id("released"));
        t.set_amount(Some(100));
        t.set_currency(Some(usd));
        t.set_source(Some(src));
        t.set_destination(Some(dst));
        let leg = |account, amount, counterparty, seq| Leg {
            at_s: 0,
            account,
            amount,
            currency: usd,
            counterparty,
            seq,
        };
        // (holds, debits, credits, releases) → the seqs of the legs found.
        let judge = |lists: [Vec<Leg>; 4]| {
            let mut out = Vec::new();
            check_transfer(&n, "t", Some(&t), &Legs::from_lists(lists), &mut out);
            out.retain(|f| f.code == "counterparty_mismatch");
            out.iter().map(|f| f.seq.unwrap()).collect::<Vec<_>>()
        };
        let hold = leg(src, 100, dst, 1);
        let release = leg(src, 100, dst, 2);
        // What the core writes: the destination on the source's legs.
        assert!(judge([vec![hold], vec![], vec![], vec![release]]).is_empty());
        // A credit names the source; the destination or none is a mismatch.
        assert!(judge([vec![hold], vec![], vec![leg(dst, 100, src, 3)], vec![]]).is_empty());
        assert_eq!(
            judge([vec![hold], vec![], vec![leg(dst, 100, dst, 3)], vec![]]),
            [3]
        );
        assert_eq!(
            judge([vec![hold], vec![], vec![leg(dst, 100, none, 3)], vec![]]),
            [3]
        );
        // A hold, a capture or a release of money naming another or none.
        assert_eq!(
            judge([
                vec![leg(src, 100, third, 1)],
                vec![leg(src, 100, none, 2)],
                vec![],
                vec![]
            ]),
            [1, 2]
        );
        assert_eq!(
            judge([vec![hold], vec![], vec![], vec![leg(src, 100, none, 2)]]),
            [2]
        );
        // A release of nothing (a tombstone) may name none, not another.
        assert!(judge([vec![], vec![], vec![], vec![leg(src, 0, none, 1)]]).is_empty());
        assert_eq!(
            judge([vec![], vec![], vec![], vec![leg(src, 0, third, 1)]]),
            [1]
        );
        // The finding names the row.
        let mut out = Vec::new();
        let lists = [vec![], vec![], vec![leg(dst, 100, third, 7)], vec![]];
        check_transfer(&n, "t", Some(&t), &Legs::from_lists(lists), &mut out);
        let f = out
            .iter()
            .find(|f| f.code == "counterparty_mismatch")
            .unwrap();
        assert_eq!(f.event_id.as_deref(), Some("account:dst:7"));
        assert!(
            f.detail.contains("counterparty third") && f.detail.contains("source is src"),
            "{}",
            f.detail
        );
    }

    /// A hold's end (capture or release) is final on the source (the core
    /// refuses a later reserve or release), and holds and their releases
    /// are only on the source.
    #[test]
    fn nothing_on_the_source_after_its_holds_end_and_no_release_off_it() {
        let mut n = Names::default();
        let (src, dst, none, usd) = (n.id("src"), n.id("dst"), n.id(""), n.id("USD"));
        let leg = |account, amount, seq| Leg {
            at_s: 0,
            account,
            amount,
            currency: usd,
            counterparty: if amount == 0 { none } else { dst },
            seq,
        };
        // (phase, holds, debits, releases) → the findings' codes and rows.
        let judge = |n: &mut Names, phase: &str, holds, debits, releases| {
            let mut t = TransferFacts::new(n.id(phase));
            t.set_amount(Some(100));
            t.set_currency(Some(usd));
            t.set_source(Some(src));
            t.set_destination(Some(dst));
            let credits = match phase {
                "captured" => vec![Leg {
                    counterparty: src,
                    ..leg(dst, 100, 9)
                }],
                _ => vec![],
            };
            let legs = Legs::from_lists([holds, debits, credits, releases]);
            let mut out = Vec::new();
            check_transfer(n, "t", Some(&t), &legs, &mut out);
            out.iter()
                .map(|f| (f.code, f.event_id.clone()))
                .collect::<Vec<_>>()
        };
        let at = |code, seq: u64| vec![(code, Some(format!("account:src:{seq}")))];
        // What the core writes: a hold then its release; a tombstone alone.
        let (hold, release) = (leg(src, 100, 1), leg(src, 100, 2));
        assert!(judge(&mut n, "released", vec![hold], vec![], vec![release]).is_empty());
        assert!(judge(&mut n, "released", vec![], vec![], vec![leg(src, 0, 1)]).is_empty());
        // A hold placed again after its release, and released again: both
        // rows after the hold's end.
        assert_eq!(
            judge(
                &mut n,
                "released",
                vec![hold, leg(src, 100, 3)],
                vec![],
                vec![release, leg(src, 100, 4)]
            ),
            [at("hold_after_end", 3), at("release_after_end", 4)].concat()
        );
        // A tombstone (a release that came first) followed by a hold that
        // the saga then captured: at the hold.
        assert_eq!(
            judge(
                &mut n,
                "captured",
                vec![leg(src, 100, 5)],
                vec![leg(src, 100, 6)],
                vec![leg(src, 0, 4)]
            ),
            at("hold_after_end", 5)
        );
        // A release after a capture (the core refuses it) or after a
        // release (answered from its record), of money or of nothing.
        let (capture, tombstone) = (leg(src, 100, 2), leg(src, 0, 3));
        assert_eq!(
            judge(
                &mut n,
                "captured",
                vec![hold],
                vec![capture],
                vec![tombstone]
            ),
            at("release_after_end", 3)
        );
        assert_eq!(
            judge(
                &mut n,
                "released",
                vec![hold],
                vec![],
                vec![release, tombstone]
            ),
            at("release_after_end", 3)
        );
        assert_eq!(
            judge(
                &mut n,
                "released",
                vec![],
                vec![],
                vec![leg(src, 0, 1), tombstone]
            ),
            at("release_after_end", 3)
        );
        // The finding names the end.
        let mut t = TransferFacts::new(n.id("captured"));
        t.set_amount(Some(100));
        t.set_currency(Some(usd));
        t.set_source(Some(src));
        t.set_destination(Some(dst));
        let lists = [vec![hold], vec![capture], vec![], vec![tombstone]];
        let mut out = Vec::new();
        check_transfer(&n, "t", Some(&t), &Legs::from_lists(lists), &mut out);
        let f = out.iter().find(|f| f.code == "release_after_end").unwrap();
        assert!(
            f.detail.contains("after account:src:2 captured 100 there"),
            "{}",
            f.detail
        );
        // A release off the source, even of nothing: the transfer's finding.
        let off = judge(
            &mut n,
            "released",
            vec![hold],
            vec![],
            vec![release, leg(dst, 0, 7)],
        );
        assert_eq!(
            off,
            [("hold_on_wrong_account", Some("account:dst:7".to_owned()))]
        );
        let mut out = Vec::new();
        let mut t = TransferFacts::new(n.id("released"));
        t.set_amount(Some(100));
        t.set_currency(Some(usd));
        t.set_source(Some(src));
        t.set_destination(Some(dst));
        let lists = [vec![hold], vec![], vec![], vec![release, leg(dst, 0, 7)]];
        check_transfer(&n, "t", Some(&t), &Legs::from_lists(lists), &mut out);
        assert!(
            out[0].detail.starts_with("release account:dst:7 is on dst"),
            "{}",
            out[0].detail
        );
    }
}
