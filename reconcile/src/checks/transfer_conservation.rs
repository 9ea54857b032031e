//! I1 per transfer: a captured transfer has exactly one debit −a on its
//! source and exactly one credit +a on its destination, in the transfer's
//! currency, where a is the transfer's amount; a failed or released
//! transfer moved no money; no leg names a transfer the lake does not have.
//! Before capture no debit, except in phase `credited`, where the source's
//! debit may already be committed (the capture the transfer asked for, its
//! reply not yet recorded): then it must be exactly that capture. No credit
//! while `releasing` (`credit_while_releasing`): the saga releases only when
//! the destination refused the credit or the reserve was given up.
//!
//! "The transfer's amount" is one amount: the saga writes the terms (amount,
//! currency, source, destination) on every event of the transfer's stream,
//! so each event after `created` must repeat them ([`check_terms`],
//! `terms_changed`, per row). The `created` row's deadline is 1 s to 30
//! days after it (`ledger_events::TRANSFER_DEADLINE_MS_MIN`/`_MAX`, the
//! bounds the edge sets it within): one outside them is
//! `deadline_out_of_range` (a deadline years ahead would keep a transfer,
//! and the money its hold keeps, from ever being judged dangling; the
//! facts judge it by the bound instead). Its source and destination are
//! two accounts (`same_account` when they are one: the ledger refuses such
//! a transfer) of the transfer's tenant (`cross_tenant`: a transfer
//! `t.{tenant}.{key}` moves money between accounts `{tenant}.{id}` only:
//! the edge derives all three from one tenant, `edge/api/src/names.rs`,
//! whose forms docs/EVENTS.md gives). A transfer id of another form names
//! no tenant to judge its accounts by, and is `transfer_id_form`: otherwise
//! it would move money between two tenants' accounts with every check
//! holding (conservation is per currency, not per tenant).
//!
//! What holding proves: every transfer moved exactly what it said, from
//! where it said, to where it said, or nothing at all.

use super::{same_text, shown, shown_absent_ms};
use crate::facts::{ms_of, Leg, Legs, TransferFacts};
use crate::finding::Finding;
use crate::names::{Names, Sym};
use crate::stream::StreamView;

pub const NAME: &str = "transfer_conservation";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str = "each captured transfer is one debit −a on its source and one credit +a on its destination; failed and released transfers moved nothing; every event of a transfer repeats its created terms, whose deadline is within the ledger's bounds and whose accounts are two of the transfer's tenant";

/// A transfer's terms as a row records them: amount, currency, source,
/// destination.
type Terms<'a> = (
    Option<i64>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

/// The terms of the `created` row `f` last took in (`None` when it has
/// none, or when that row records none of them: nothing to judge by).
fn created_terms<'a>(f: &TransferFacts, names: &'a Names) -> Option<Terms<'a>> {
    let name = |s: Option<Sym>| s.map(|s| names.get(s));
    let t = (
        f.amount(),
        name(f.currency()),
        name(f.source()),
        name(f.destination()),
    );
    (t != (None, None, None, None)).then_some(t)
}

/// Checks that each row of the transfer stream `s` after a `created` row
/// repeats that row's terms; `f` is what the stream's rows before `s` left
/// (read only when `s` does not start with its own `created` row: the
/// names are not looked up for nearly every stream). A later `created` row
/// replaces the terms (it is itself a `phase_order` finding of
/// completeness).
pub fn check_terms<'a>(
    s: &StreamView<'a>,
    f: &TransferFacts,
    names: &'a Names,
    out: &mut Vec<Finding>,
) {
    let mut created = None;
    for (i, ev) in s.primary().enumerate() {
        let row = (ev.amount, ev.currency, ev.source, ev.destination);
        if i == 0 && ev.kind != "created" {
            created = created_terms(f, names);
        }
        if ev.kind == "created" {
            created = (row != (None, None, None, None)).then_some(row);
            if let Some(d) = ev.deadline_ms {
                let after = d.checked_sub(ev.occurred_at_ms);
                let bounds = ledger_events::TRANSFER_DEADLINE_MS_MIN
                    ..=ledger_events::TRANSFER_DEADLINE_MS_MAX;
                if !after.is_some_and(|a| bounds.contains(&a)) {
                    out.push(
                        Finding::new(
                            "deadline_out_of_range",
                            s.key,
                            format!(
                                "created at {} with the deadline {d}: not {} ms to {} ms after it",
                                ev.occurred_at_ms,
                                bounds.start(),
                                bounds.end()
                            ),
                        )
                        .at(ev.seq, ev.event_id),
                    );
                }
            }
            check_parties(s.key, ev.source, ev.destination, &mut |code, detail| {
                out.push(Finding::new(code, s.key, detail).at(ev.seq, ev.event_id))
            });
            continue;
        }
        let Some(c) = created else { continue };
        if !same_terms(row, c) {
            out.push(
                Finding::new(
                    "terms_changed",
                    s.key,
                    format!(
                        "{}: {}, but the transfer was created with {}",
                        ev.kind,
                        shown_terms(row),
                        shown_terms(c)
                    ),
                )
                .at(ev.seq, ev.event_id),
            );
        }
    }
}

/// Judges the accounts a `created` row of transfer `t` names: two
/// (`same_account`), each of the tenant of `t` = `t.{tenant}.{key}`
/// (`cross_tenant`, once, naming every foreign one); `t` itself of that form
/// (`transfer_id_form`).
fn check_parties(
    t: &str,
    source: Option<&str>,
    destination: Option<&str>,
    found: &mut dyn FnMut(&'static str, String),
) {
    if let (Some(a), Some(b)) = (source, destination) {
        if a == b {
            found(
                "same_account",
                format!("created from {a} to itself: a transfer's source and destination differ"),
            );
        }
    }
    // The edge names every transfer `t.{tenant}.{key}`: one of another form
    // names no tenant its accounts could be judged by, and would move money
    // between any two accounts, of any tenants, unseen.
    let tenant = match ledger_api::names::parse_transfer_id(t) {
        Ok((tenant, _)) => tenant,
        Err(why) => {
            return found(
                "transfer_id_form",
                format!(
                    "{why}: the edge names every transfer t.{{tenant}}.{{key}}, so the tenant its \
                     accounts ({} and {}) must share is not known",
                    shown(source),
                    shown(destination)
                ),
            )
        }
    };
    // Tenants contain no `.`: the first one ends an account's tenant.
    let foreign: Vec<String> = [("source", source), ("destination", destination)]
        .into_iter()
        .filter_map(|(role, a)| {
            let a = a?;
            let own = a.strip_prefix(tenant).is_some_and(|r| r.starts_with('.'));
            (!own).then(|| format!("{role} {a}"))
        })
        .collect();
    if !foreign.is_empty() {
        found(
            "cross_tenant",
            format!(
                "created with {}: not an account of tenant {tenant:?}",
                foreign.join(" and ")
            ),
        );
    }
}

/// `a == b`, the strings compared inline ([`same_text`]).
fn same_terms(a: Terms<'_>, b: Terms<'_>) -> bool {
    a.0 == b.0 && same_text(a.1, b.1) && same_text(a.2, b.2) && same_text(a.3, b.3)
}

fn shown_terms((amount, currency, source, destination): Terms<'_>) -> String {
    format!(
        "{} {} from {} to {}",
        shown(amount),
        shown(currency),
        shown(source),
        shown(destination)
    )
}

/// When the first of `legs` was committed (ms): the absent `created` of
/// their transfer was committed before it.
fn earliest_leg_ms(legs: &Legs) -> i64 {
    ms_of(legs.all().iter().map(|l| l.at_s).min().unwrap_or(0))
}

/// Whether `legs` is exactly one leg of `amount` `currency` on `account`
/// (syms of `names`; `None`: the transfer does not name one).
pub(super) fn one_leg(
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
    let Some(t) = t.filter(|t| t.amount().is_some()) else {
        if moved || !legs.holds().is_empty() {
            let why = if t.is_none() {
                "the lake has no row of its stream"
            } else {
                "the lake has no valid `created` event for it (lost, or not valid: completeness \
                 names it)"
            };
            // Its `created` was committed before its first leg.
            let f = Finding::new(
                "leg_without_transfer",
                id,
                format!("account events name this transfer but {why}"),
            );
            // Decided by its first leg: rows added later (a hold and its
            // release, say) do not put the decision off. An id of no
            // transfer's form is decided at once: a stream under it would
            // be `transfer_id_form` itself, so no late row makes the legs
            // right (rev-s56-pending 7).
            out.push(if ledger_api::names::parse_transfer_id(id).is_ok() {
                f.absence(earliest_leg_ms(legs))
            } else {
                f
            });
        }
        return;
    };
    let amount = t.amount().unwrap_or(0);
    let name = |s: Option<Sym>| s.map_or("", |s| n.get(s));
    let (currency, src, dst) = (name(t.currency()), name(t.source()), name(t.destination()));
    let phase = n.get(t.phase);
    match phase {
        "captured" => {
            let debit = one_leg(n, legs.debits(), t.source(), amount, t.currency());
            let credit = one_leg(n, legs.credits(), t.destination(), amount, t.currency());
            if debit.is_err() || credit.is_err() {
                // Only absent legs (each side right or empty): both were
                // committed before `captured`, and may still be in delivery.
                let absent = (debit.is_ok() || legs.debits().is_empty())
                    && (credit.is_ok() || legs.credits().is_empty());
                let show = |r: Result<(), String>| r.err().unwrap_or_else(|| "ok".into());
                let f = Finding::new(
                    "captured_legs_mismatch",
                    id,
                    format!(
                        "captured {amount} {currency} {src} → {dst}; debit: {}; credit: {}",
                        show(debit),
                        show(credit)
                    ),
                );
                // Both shown by `captured`, the credit also by the debit.
                out.push(if absent {
                    f.absence(shown_absent_ms(Some(t), legs.debits()))
                } else {
                    f
                });
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
        // The capture in progress: the source commits its debit before the
        // transfer records the reply (a state every capture passes through).
        "credited" if !legs.debits().is_empty() => {
            if let Err(debit) = one_leg(n, legs.debits(), t.source(), amount, t.currency()) {
                out.push(Finding::new(
                    "debit_before_capture",
                    id,
                    format!(
                        "phase credited, capturing {amount} {currency} from {src}, but the source's debits are not that capture: {debit}"
                    ),
                ));
            }
        }
        _ if !legs.debits().is_empty() => {
            let f = Finding::new(
                "debit_before_capture",
                id,
                format!("phase {phase} but the source was already debited"),
            );
            // Before `credited`, the transfer's next rows (committed before
            // the capture) may still be in delivery; after `releasing` no
            // row makes a debit right.
            // The capture (the debit) is asked for once `credited` is.
            out.push(if matches!(phase, "created" | "reserved") {
                f.absence(shown_absent_ms(None, legs.debits()))
            } else {
                f
            });
        }
        _ => {}
    }
    // Releasing: the destination refused the credit, or it was never asked
    // for (the reserve given up): no credit, the transfer's own or any
    // other (while the hold is live, every other check passes it, and the
    // destination may spend it). At the first credit.
    if phase == "releasing" {
        if let Some(credit) = legs.credits().first() {
            let event = credit.event_id(n);
            out.push(
                Finding::new(
                    "credit_while_releasing",
                    id,
                    format!(
                        "phase releasing (the credit refused or never asked for), but {event} credited {} to {}",
                        credit.amount,
                        n.get(credit.account)
                    ),
                )
                .at(credit.seq, &event),
            );
        }
    }
    // Before its end (created, reserved, credited, releasing), a credit the
    // lake holds is the transfer's own: one, on the destination, of the
    // amount, in the currency (captured: the arm above; failed or released:
    // none at all). Any other credit pays someone the saga never asked to,
    // from a hold that covers only the transfer's own credit.
    if !matches!(phase, "captured" | "failed" | "released") && !legs.credits().is_empty() {
        if let Err(credit) = one_leg(n, legs.credits(), t.destination(), amount, t.currency()) {
            out.push(Finding::new(
                "credit_not_the_transfers",
                id,
                format!(
                    "phase {phase}, crediting {amount} {currency} to {dst}, but the credits are not that credit: {credit}"
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_transfer_moves_money_between_two_accounts_of_its_tenant() {
        let judge = |t: &str, a: Option<&str>, b: Option<&str>| {
            let mut codes = Vec::new();
            super::check_parties(t, a, b, &mut |code, detail| codes.push((code, detail)));
            codes
        };
        assert!(judge("t.acme.k", Some("acme.a"), Some("acme.b")).is_empty());
        // `acme.x` is not of tenant `ac`, nor `acmex.b` of `acme`.
        let found = judge("t.ac.k", Some("acme.a"), Some("ac.b"));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "cross_tenant");
        assert!(found[0].1.contains("source acme.a"), "{}", found[0].1);
        let found = judge("t.acme.k", Some("acme.a"), Some("acmex.b"));
        assert_eq!(found.len(), 1);
        assert!(found[0].1.contains("destination acmex.b"), "{}", found[0].1);
        assert_eq!(
            judge("t.acme.k", Some("acme.a"), Some("acme.a"))
                .iter()
                .map(|f| f.0)
                .collect::<Vec<_>>(),
            ["same_account"]
        );
        // Another tenant on both sides: one finding naming both.
        let found = judge("t.acme.k", Some("evil.a"), Some("evil.b"));
        assert_eq!(found.len(), 1);
        assert!(found[0].1.contains("source evil.a and destination evil.b"));
        // An id of another form names no tenant: its accounts cannot be
        // judged, and that is the finding, whatever they are.
        for t in [
            "transfer-1",
            "x.acme.k",
            "acme.k",
            "t.acme",
            "T.acme.k",
            "t.acme.k:1",
            "t..k",
        ] {
            let found = judge(t, Some("acme.a"), Some("evil.b"));
            assert_eq!(found.len(), 1, "{t}: {found:?}");
            assert_eq!(found[0].0, "transfer_id_form", "{t}");
            assert!(found[0].1.contains("acme.a and evil.b"), "{}", found[0].1);
        }
        assert_eq!(judge("x.acme.k", Some("acme.a"), Some("acme.b")).len(), 1);
        // Absent parties are not judged here.
        assert!(judge("t.acme.k", None, None).is_empty());
    }

    use super::*;

    /// Legs naming a transfer the lake lacks: the finding rests on the first
    /// of them (the `created` was committed before it), so legs added later
    /// cannot keep it pending.
    #[test]
    fn a_leg_without_its_transfer_is_decided_by_the_first_leg() {
        let mut n = Names::default();
        let (a, b, usd) = (n.id("a"), n.id("b"), n.id("USD"));
        let leg = |account, amount, at_s| Leg {
            account,
            amount,
            currency: usd,
            counterparty: a,
            seq: 1,
            at_s,
        };
        let legs = Legs::from_lists([
            vec![leg(a, 1, 9_000)],
            vec![],
            vec![leg(b, 1_000, 100)],
            vec![leg(a, 1, 9_001)],
        ]);
        let mut out = Vec::new();
        check_transfer(&n, "t.acme.ghost", None, &legs, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].code, "leg_without_transfer");
        assert_eq!(out[0].youngest_ms, Some(ms_of(100)));
        // An id no transfer can have: decided at once (rev-s56-pending 7).
        for id in ["x.acme.1", "t.ghost"] {
            let mut out = Vec::new();
            check_transfer(&n, id, None, &legs, &mut out);
            assert_eq!(out[0].code, "leg_without_transfer");
            assert_eq!(out[0].youngest_ms, None, "{id}");
        }
    }

    /// Before its end, a transfer's credit is its own: on the destination,
    /// of its amount, in its currency, one of it.
    #[test]
    fn a_credit_before_the_end_is_the_transfers_own_credit_or_a_finding() {
        let mut n = Names::default();
        let (a, b, x, usd, eur) = (n.id("a"), n.id("b"), n.id("x"), n.id("USD"), n.id("EUR"));
        let leg = |account, amount, currency| Leg {
            account,
            amount,
            currency,
            counterparty: a,
            seq: 2,
            at_s: 1,
        };
        let judge = |phase: &str, credits: Vec<Leg>, debits: Vec<Leg>| {
            let mut n = n.clone();
            let mut t = TransferFacts::default();
            t.set_amount(Some(100));
            t.set_currency(Some(usd));
            t.set_source(Some(a));
            t.set_destination(Some(b));
            t.phase = n.id(phase);
            let legs = Legs::from_lists([vec![leg(a, 100, usd)], debits, credits, vec![]]);
            let mut out = Vec::new();
            check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
            out.iter().map(|f| f.code).collect::<Vec<_>>()
        };
        let own = leg(b, 100, usd);
        for phase in ["created", "reserved", "credited", "releasing"] {
            assert!(judge(phase, vec![], vec![]).is_empty(), "{phase}");
            if phase != "releasing" {
                assert!(judge(phase, vec![own], vec![]).is_empty(), "{phase}");
            }
            for wrong in [
                vec![leg(x, 100, usd)],
                vec![leg(b, 90, usd)],
                vec![leg(b, 100, eur)],
                vec![own, leg(x, 100, usd)],
            ] {
                let mut expected = vec!["credit_not_the_transfers"];
                if phase == "releasing" {
                    expected.insert(0, "credit_while_releasing");
                }
                assert_eq!(judge(phase, wrong, vec![]), expected, "{phase}");
            }
        }
        // Being captured: the source's debit committed, the credit on a
        // third account (the reviewer's case: every other check held).
        assert_eq!(
            judge("credited", vec![leg(x, 100, usd)], vec![leg(a, 100, usd)]),
            ["credit_not_the_transfers"]
        );
        assert!(judge("credited", vec![own], vec![leg(a, 100, usd)]).is_empty());
        // Releasing: no credit at all, its own included.
        assert_eq!(
            judge("releasing", vec![own], vec![]),
            ["credit_while_releasing"]
        );
        // After the end: the arms above name it, once.
        assert_eq!(
            judge("captured", vec![leg(x, 100, usd)], vec![leg(a, 100, usd)]),
            ["captured_legs_mismatch"]
        );
    }
}
