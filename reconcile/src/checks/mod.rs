//! The checks, one module per invariant. Each names the invariant it proves
//! and returns its offending rows ([`crate::finding::Finding`]).
//!
//! | module | invariant | input |
//! |---|---|---|
//! | [`completeness`] | lake completeness: seqs, hashes, chain | each stream |
//! | [`duplicates`] | no conflicting duplicates | each stream |
//! | [`balance`] | I1: balances are the fold of the postings | each account stream |
//! | [`entries`] | I1: each deposit or withdrawal posts once | each account stream |
//! | [`overdraft`] | I2: no overdraft | each account stream |
//! | [`transfer_conservation`] | I1 per transfer | facts |
//! | [`global_conservation`] | I1 per currency | facts |
//! | [`consistency`] | I1: transfer phases vs account legs | facts |
//! | [`convergence`] | I4: dangling transfers, leaked holds | facts |
//! | [`protocol`] | protocol: amounts, limits and reasons the core writes | each stream |
//!
//! The checks of one transfer at a time ([`TransferCheck`]) run together in
//! one walk over the transfers ([`per_transfer`]).

pub mod balance;
pub mod completeness;
pub mod consistency;
pub mod convergence;
pub mod duplicates;
pub mod entries;
pub mod global_conservation;
pub mod overdraft;
pub mod protocol;
pub mod transfer_conservation;

use ledger_events::event::same;

use crate::facts::{ms_of, Facts, Leg, Legs, TransferFacts};
use crate::finding::Finding;
use crate::names::Names;

/// `a == b` for a recorded text that may be absent, compared inline
/// ([`same`]): the per-row terms checks compare a few per row, and a call to
/// `memcmp` per string cost more than the rest of the comparison.
pub(crate) fn same_text(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same(a.as_bytes(), b.as_bytes()),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// A recorded value as a finding shows it: `none` when absent.
pub(crate) fn shown<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

/// A text value as a finding shows it: `none` when empty (a column that
/// was null, interned as the empty name).
pub(crate) fn or_none(v: &str) -> &str {
    if v.is_empty() {
        "none"
    } else {
        v
    }
}

/// When the first row that shows a saga step absent was committed (ms):
/// `last`, the transfer's last row, when its phase shows the step, and
/// `legs`, the account rows that show it. The step was committed before
/// each of them, so it may still be in delivery only while the earliest is
/// young ([`Finding::absence`]). The earliest, not the youngest: rows added
/// later cannot put a decided absence off (rev-s56-pending 1: a credit with
/// no hold, violated, went back to pending with each later row of its
/// transfer, and the run to exit 0).
pub(crate) fn shown_absent_ms<'a>(
    last: Option<&TransferFacts>,
    legs: impl IntoIterator<Item = &'a Leg>,
) -> i64 {
    let rows = last.map(|t| t.last_at_s);
    ms_of(
        legs.into_iter()
            .map(|l| l.at_s)
            .chain(rows)
            .min()
            .unwrap_or(0),
    )
}

/// A check of one transfer: its id, its facts when it has a stream, and its
/// legs; appends its findings.
pub type TransferCheck = fn(&Names, &str, Option<&TransferFacts>, &Legs, &mut Vec<Finding>);

/// Runs each of `checks` on every transfer of `f` in one walk (each
/// transfer's legs are read once, and they are millions of random reads),
/// half of the transfers on each of two threads. Each check's findings come
/// back in transfer id order (a transfer's own keep their order).
pub fn per_transfer<const N: usize>(f: &Facts, checks: [TransferCheck; N]) -> [Vec<Finding>; N] {
    let walk = |from: usize, to: usize| {
        let mut out: [Vec<Finding>; N] = std::array::from_fn(|_| Vec::new());
        for (id, t, legs) in f.transfer_ids_in(from..to) {
            let legs = legs.canonical(&f.names);
            for (check, out) in checks.iter().zip(&mut out) {
                check(&f.names, id, t, &legs, out);
            }
        }
        out
    };
    let all = f.transfer_ids_len();
    let half = all / 2;
    let (mut found, second) = crate::threads::both(|| walk(0, half), || walk(half, all));
    for (a, b) in found.iter_mut().zip(second) {
        a.extend(b);
    }
    for out in &mut found {
        out.sort_by(|a, b| a.key.cmp(&b.key));
    }
    found
}

#[cfg(test)]
mod rule_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{consistency, transfer_conservation};
    use crate::facts::{LegKind, TransferState, Transfers};

    /// A transfer of 100 `usd` from `a` to `b`, at `phase`.
    fn transfer(
        n: &mut Names,
        phase: &str,
        (a, b, usd): (crate::names::Sym, crate::names::Sym, crate::names::Sym),
    ) -> crate::facts::TransferFacts {
        let mut t = crate::facts::TransferFacts::new(n.id(phase));
        t.set_amount(Some(100));
        t.set_currency(Some(usd));
        t.set_source(Some(a));
        t.set_destination(Some(b));
        t
    }

    /// Each per-transfer code that rests on a row being absent (a saga step
    /// committed before one of the transfer's rows, which may still be in
    /// delivery) is marked so, and pending while young; the same code on
    /// rows that are wrong is not (docs/RECONCILE.md, "Delivery lag").
    #[test]
    fn per_transfer_codes_are_absences_only_where_a_row_is_missing() {
        let mut n = Names::default();
        let (a, b, usd) = (n.id("a"), n.id("b"), n.id("USD"));
        let leg = |account, amount, seq| Leg {
            account,
            amount,
            currency: usd,
            counterparty: if account == a { b } else { a },
            seq,
            at_s: 1_000,
        };
        // (phase, [holds, debits, credits, releases]) → (code, absent).
        let cases: Vec<(&str, [Vec<Leg>; 4], &str, bool)> = vec![
            // Captured, the credit not in the lake yet; then a wrong debit.
            (
                "captured",
                [vec![leg(a, 100, 1)], vec![leg(a, 100, 2)], vec![], vec![]],
                "captured_legs_mismatch",
                true,
            ),
            (
                "captured",
                [
                    vec![leg(a, 100, 1)],
                    vec![leg(a, 90, 2)],
                    vec![leg(b, 100, 1)],
                    vec![],
                ],
                "captured_legs_mismatch",
                false,
            ),
            // Debited while reserved (its `credited` may be in delivery),
            // and while releasing (no row makes that right).
            (
                "reserved",
                [vec![leg(a, 100, 1)], vec![leg(a, 100, 2)], vec![], vec![]],
                "debit_before_capture",
                true,
            ),
            (
                "releasing",
                [vec![leg(a, 100, 1)], vec![leg(a, 100, 2)], vec![], vec![]],
                "debit_before_capture",
                false,
            ),
            // Reserved with no hold on the source yet.
            (
                "reserved",
                [vec![], vec![], vec![], vec![]],
                "phase_without_hold",
                true,
            ),
            // A credit whose hold is not in the lake yet; one whose hold
            // was released (final).
            (
                "created",
                [vec![], vec![], vec![leg(b, 100, 1)], vec![]],
                "credit_without_live_hold",
                true,
            ),
            (
                "releasing",
                [
                    vec![leg(a, 100, 1)],
                    vec![],
                    vec![leg(b, 100, 1)],
                    vec![leg(a, 100, 2)],
                ],
                "credit_without_live_hold",
                false,
            ),
            // Credited, the destination's credit not in the lake yet.
            (
                "credited",
                [vec![leg(a, 100, 1)], vec![], vec![], vec![]],
                "phase_without_credit",
                true,
            ),
        ];
        for (phase, lists, code, absent) in cases {
            let t = transfer(&mut n, phase, (a, b, usd));
            let legs = crate::facts::Legs::from_lists(lists);
            let mut out = Vec::new();
            transfer_conservation::check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
            consistency::check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
            let found: Vec<_> = out.iter().filter(|f| f.code == code).collect();
            assert_eq!(found.len(), 1, "{phase} {code}: {out:?}");
            assert_eq!(
                found[0].youngest_ms.is_some(),
                absent,
                "{phase} {code}: {:?}",
                found[0]
            );
        }
    }

    /// rev-s56-pending 1: a finding on an absent step rests on the first row
    /// that shows the step absent, not on the transfer's youngest: rows the
    /// transfer adds later (its `reserved`, `credited`, dated hours after
    /// the credit) cannot turn a decided finding back into a pending one.
    #[test]
    fn an_absence_rests_on_the_first_row_that_shows_it() {
        let mut n = Names::default();
        let (a, b, usd) = (n.id("acme.a"), n.id("acme.b"), n.id("USD"));
        let leg = |account, counterparty, seq, at_s| Leg {
            account,
            amount: 100,
            currency: usd,
            counterparty,
            seq,
            at_s,
        };
        let judge = |phase: &str, lists: [Vec<Leg>; 4]| {
            let mut n = n.clone();
            let mut t = transfer(&mut n, phase, (a, b, usd));
            t.last_at_s = 9_000;
            let legs = crate::facts::Legs::from_lists(lists);
            let legs = legs.canonical(&n);
            let mut out = Vec::new();
            consistency::check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
            transfer_conservation::check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
            let mut found: Vec<_> = out
                .iter()
                .filter(|f| f.youngest_ms.is_some())
                .map(|f| (f.code, f.youngest_ms.unwrap()))
                .collect();
            found.sort();
            found
        };
        // A credit at 100 s and no hold: the credit shows the hold absent,
        // whatever the transfer's rows after it.
        let credit = || vec![leg(b, a, 3, 100)];
        for phase in ["reserved", "credited"] {
            assert_eq!(
                judge(phase, [vec![], vec![], credit(), vec![]]),
                [
                    ("credit_without_live_hold", ms_of(100)),
                    ("phase_without_hold", ms_of(100)),
                ],
                "{phase}"
            );
        }
        // A debit at 200 s: it shows the credit absent (captured, credited)
        // and, before `credited`, the transfer's own rows.
        let debit = || vec![leg(a, b, 5, 200)];
        let hold = || vec![leg(a, b, 2, 50)];
        assert_eq!(
            judge("credited", [hold(), debit(), vec![], vec![]]),
            [("phase_without_credit", ms_of(200))]
        );
        assert_eq!(
            judge("captured", [hold(), debit(), vec![], vec![]]),
            [("captured_legs_mismatch", ms_of(200))]
        );
        assert_eq!(
            judge("reserved", [hold(), debit(), vec![], vec![]]),
            [("debit_before_capture", ms_of(200))]
        );
        // Only the transfer's row shows it: that row.
        assert_eq!(
            judge("reserved", [vec![], vec![], vec![], vec![]]),
            [("phase_without_hold", ms_of(9_000))]
        );
    }

    /// Each wrong-row finding of cross-stream consistency names its row:
    /// every hold or release off the source its own, the hold of another
    /// amount the source's first hold, a capture of another amount the
    /// source's debit, a credit with no live hold the first credit by
    /// account, then seq.
    #[test]
    fn cross_stream_findings_name_the_row_that_shows_them() {
        let mut n = Names::default();
        let (a, b, c, usd) = (n.id("acme.a"), n.id("acme.b"), n.id("acme.c"), n.id("USD"));
        let leg = |account, amount, seq| Leg {
            account,
            amount,
            currency: usd,
            counterparty: b,
            seq,
            at_s: 1_000,
        };
        let rows = |phase: &str, lists: [Vec<Leg>; 4]| {
            let mut n = n.clone();
            let t = transfer(&mut n, phase, (a, b, usd));
            let legs = crate::facts::Legs::from_lists(lists);
            let legs = legs.canonical(&n);
            let mut out = Vec::new();
            consistency::check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
            let mut found: Vec<_> = out
                .iter()
                .filter(|f| f.code != "counterparty_mismatch")
                .map(|f| (f.code, f.seq, f.event_id.clone().unwrap_or_default()))
                .collect();
            found.sort();
            found
        };
        // Two holds off the source (and one on it): two findings.
        assert_eq!(
            rows(
                "reserved",
                [
                    vec![leg(c, 100, 4), leg(a, 100, 2), leg(b, 100, 9)],
                    vec![],
                    vec![],
                    vec![]
                ]
            ),
            [
                (
                    "hold_on_wrong_account",
                    Some(4),
                    "account:acme.c:4".to_owned()
                ),
                (
                    "hold_on_wrong_account",
                    Some(9),
                    "account:acme.b:9".to_owned()
                ),
            ]
        );
        // The source's first hold, of another amount; its debit, of another.
        assert_eq!(
            rows(
                "captured",
                [
                    vec![leg(a, 90, 2)],
                    vec![leg(a, 80, 5)],
                    vec![leg(b, 100, 3)],
                    vec![]
                ]
            ),
            [
                ("capture_not_hold", Some(5), "account:acme.a:5".to_owned()),
                (
                    "hold_amount_mismatch",
                    Some(2),
                    "account:acme.a:2".to_owned()
                ),
            ]
        );
        // Credits with no hold: the first by account name, then seq.
        assert_eq!(
            rows(
                "created",
                [vec![], vec![], vec![leg(c, 100, 1), leg(b, 100, 8)], vec![]]
            ),
            [(
                "credit_without_live_hold",
                Some(8),
                "account:acme.b:8".to_owned()
            )]
        );
        // A credit while releasing (transfer_conservation's): the same one.
        let mut m = n.clone();
        let t = transfer(&mut m, "releasing", (a, b, usd));
        let legs = crate::facts::Legs::from_lists([
            vec![leg(a, 100, 1)],
            vec![],
            vec![leg(c, 100, 1), leg(b, 100, 8)],
            vec![],
        ]);
        let mut out = Vec::new();
        let legs = legs.canonical(&m);
        transfer_conservation::check_transfer(&m, "t.acme.k", Some(&t), &legs, &mut out);
        let named: Vec<_> = out
            .iter()
            .filter(|f| f.code == "credit_while_releasing")
            .map(|f| (f.seq, f.event_id.clone().unwrap_or_default()))
            .collect();
        assert_eq!(named, [(Some(8), "account:acme.b:8".to_owned())]);
    }

    #[test]
    fn the_split_walk_finds_what_each_check_finds_on_its_own() {
        // Transfers whose findings span the whole id range (every third is
        // captured with no legs, every fifth has a hold on the wrong
        // account), plus legs that name no transfer (after the transfers).
        let mut f = Facts::default();
        let captured = f.names.id("captured");
        let reserved = f.names.id("reserved");
        let (usd, a, b) = (f.names.id("USD"), f.names.id("a"), f.names.id("b"));
        let rows: Vec<(crate::id::Id, TransferState)> = (0..1001)
            .map(|i| {
                let mut st = TransferState::default();
                st.facts.set_amount(Some(100));
                st.facts.set_currency(Some(usd));
                st.facts.set_source(Some(a));
                st.facts.set_destination(Some(b));
                st.facts.phase = if i % 3 == 0 { captured } else { reserved };
                (format!("t-{i:05}").into(), st)
            })
            .collect();
        for (i, (id, _)) in rows.iter().enumerate() {
            let account = if i % 5 == 0 { b } else { a };
            let leg = Leg {
                at_s: 0,
                account,
                amount: 100,
                currency: usd,
                counterparty: b,
                seq: i as u64 + 1,
            };
            f.legs.add(id, LegKind::Hold, leg);
        }
        let orphan = Leg {
            at_s: 0,
            account: a,
            amount: 5,
            currency: usd,
            counterparty: b,
            seq: 9999,
        };
        f.legs.add("t-99999", LegKind::Debit, orphan);
        f.transfers = Transfers::from_sorted(rows);
        f.finish_transfers();
        assert_eq!(f.orphan_legs, ["t-99999"]);
        // The reference: each check on its own, one transfer after another.
        let alone = |check: TransferCheck| {
            let mut out = Vec::new();
            for (id, t, legs) in f.transfer_ids() {
                check(&f.names, id, t, legs, &mut out);
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
            out
        };
        let [conserved, consistent] = per_transfer(
            &f,
            [
                transfer_conservation::check_transfer,
                consistency::check_transfer,
            ],
        );
        assert_eq!(conserved, alone(transfer_conservation::check_transfer));
        assert_eq!(consistent, alone(consistency::check_transfer));
        // Findings from both halves and the orphan.
        assert_eq!(conserved.len(), 334 + 1);
        // A hold on the wrong account: that, and no hold on the source.
        assert_eq!(consistent.len(), 2 * 201);
        assert_eq!(conserved.last().map(|c| c.key.as_str()), Some("t-99999"));
    }
}
