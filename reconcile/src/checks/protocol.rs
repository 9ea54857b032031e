//! Protocol values: every row records values the ledger core can write.
//!
//! The event schema (`ledger_events`, which ingest applies) takes any
//! positive amount, any overdraft limit and any snake_case reason; the core
//! writes far fewer. A row outside what the core writes was not written by
//! it, and the schema must not refuse it (ingest would dead-letter an event
//! that was committed), so it is judged here, per row, with its stream, seq
//! and event id:
//!
//! - **Amounts** (`amount_out_of_range`): the core moves at most
//!   [`AMOUNT_MINOR_MAX`] (2⁵³ − 1) minor units a command
//!   (`ledger_core::money::check_amount`, applied to every deposit,
//!   withdrawal, reserve and credit, and to a transfer when it is admitted;
//!   a capture or a release moves the hold a reserve placed), so any row's
//!   `amount` above it is reported, account and transfer rows alike.
//! - **The overdraft limit** (`overdraft_limit_out_of_range`): an account
//!   is opened with one of at most [`AMOUNT_MINOR_MAX`]
//!   (`ledger_core::account::open`), judged at its `opened` row (every later
//!   row repeats it: `balance_integrity`'s `terms_changed` where one does
//!   not).
//! - **Reasons** (`unexpected_reason`; a reason absent where the kind needs
//!   one is "none", not in any vocabulary). The core sets a reason in four
//!   places (edge/core/src/transfer.rs `Transfer::on_reply`,
//!   `Transfer::on_transient`; edge/core/src/account.rs `apply`, the
//!   release; docs/EVENTS.md), so per kind:
//!   `failed` carries the code of the source's refusal of the reserve
//!   ([`FAILED`]); `releasing` after `created` says why the reserve was given
//!   up ([`RESERVE_GIVEN_UP`]), after `reserved` the code of the
//!   destination's refusal of the credit ([`CREDIT_REJECTED`]), after
//!   anything else (a gap, a row out of order) either; `released` repeats
//!   its `releasing`'s (`reason_changed` when the row before it is that
//!   `releasing` and says another; any reason outside both lists is
//!   `unexpected_reason`); an account's `hold_released` of nothing (amount
//!   0, the tombstone) carries [`NO_HOLD`] and one that frees a hold none.
//!   `frozen` and `unfrozen` are not judged: the core writes no reason on
//!   them, but docs/EVENTS.md keeps the field open to one.
//!
//! Only the rows a stream's own checks read are judged (the first version
//! of each seq: a second one is `conflicting_duplicates`'s), and streams in
//! their own table (`completeness` reports the others, `wrong_table`).
//!
//! What holding proves: no row records an amount, a limit or a reason the
//! ledger core would not have written there.

use ledger_events::{EventRef, TransferKind};

use crate::finding::Finding;
use crate::stream::StreamView;

use super::shown;

pub const NAME: &str = "protocol_values";
pub const INVARIANT: &str = "protocol";
pub const PROVES: &str = "every row records what the ledger core can write there: amounts and an opened account's overdraft limit of at most 2^53 − 1 minor units, and each reason a code the core writes for that kind after that step (a released transfer's that of its releasing)";

/// The largest amount (and overdraft limit) the core writes: 2⁵³ − 1.
pub const AMOUNT_MINOR_MAX: i64 = ledger_core::money::AMOUNT_MINOR_MAX;

/// A `failed` row's reasons: the codes of the source's refusals of a
/// reserve the core admitted (`Rejection::code`): insufficient funds,
/// frozen, another currency, an account nobody opened (a recorded refusal),
/// a held sum that would overflow. A reserve's other refusals cannot reach
/// it: its amount passed the same range check at admission, its op record
/// (`{t}:reserve`) is its own transfer's (the edge's deposit and withdrawal
/// entry ids are `dep:`/`wd:` ones), and a tombstone that refuses it is left
/// only by a release, which a `failed` transfer never asks for.
pub const FAILED: [&str; 5] = [
    "account_frozen",
    "balance_overflow",
    "currency_mismatch",
    "insufficient_funds",
    "unknown_account",
];

/// A `releasing` row's reasons after `reserved`: the codes of the
/// destination's refusals of the credit (frozen, another currency, an
/// account nobody opened, a balance that would overflow).
pub const CREDIT_REJECTED: [&str; 4] = [
    "account_frozen",
    "balance_overflow",
    "currency_mismatch",
    "unknown_account",
];

/// A `releasing` row's reasons after `created`: the reserve given up
/// (unanswered past the transfer's deadline, or past its retries).
pub const RESERVE_GIVEN_UP: [&str; 2] = ["deadline_exceeded", "reserve_unavailable"];

/// The reason of an account's `hold_released` of nothing (amount 0).
pub const NO_HOLD: &str = "no_hold";

/// Every reason a `releasing` (and so a `released`) row may carry, in the
/// order [`releasing_code`] numbers them.
const RELEASING: [&str; 6] = [
    "deadline_exceeded",
    "reserve_unavailable",
    "account_frozen",
    "balance_overflow",
    "currency_mismatch",
    "unknown_account",
];

/// A row's reason as the transfer's facts keep it for the row after it
/// (one byte): 0 when the row is not `releasing`, 1 + i for `RELEASING[i]`,
/// [`OTHER`] for any other reason or none. A `released` row compares its
/// reason with the code of the row before it: one outside `RELEASING` is
/// `unexpected_reason` whatever that row's, so that row's own reason
/// matters only when it is one of them.
pub fn releasing_code(kind: &str, reason: Option<&str>) -> u8 {
    if kind != "releasing" {
        return 0;
    }
    reason
        .and_then(|r| RELEASING.iter().position(|&c| c == r))
        .map_or(OTHER, |i| i as u8 + 1)
}

/// [`releasing_code`] of a `releasing` row whose reason is none of
/// `RELEASING` (or absent).
pub const OTHER: u8 = u8::MAX;

/// Whether `code` is one [`releasing_code`] returns.
pub fn is_releasing_code(code: u8) -> bool {
    code == OTHER || usize::from(code) <= RELEASING.len()
}

/// The row before a transfer stream's rows: its seq, its kind (`None`: not
/// a transfer kind) and its [`releasing_code`].
pub type Before = Option<(u64, Option<TransferKind>, u8)>;

/// Checks the account stream `s`: amounts, the limit it was opened with,
/// the reasons of its releases.
pub fn check_account_stream(s: &StreamView, out: &mut Vec<Finding>) {
    for ev in s.primary() {
        check_amount(s, ev, out);
        if ev.kind == "opened" {
            if let Some(limit) = ev.overdraft_limit.filter(|&l| l > AMOUNT_MINOR_MAX) {
                out.push(
                    Finding::new(
                        "overdraft_limit_out_of_range",
                        s.key,
                        format!(
                            "opened with the overdraft limit {limit}: the ledger opens none above {AMOUNT_MINOR_MAX}"
                        ),
                    )
                    .at(ev.seq, ev.event_id),
                );
            }
        }
        if ev.kind == "hold_released" {
            let (Some(amount), reason) = (ev.amount, ev.reason) else {
                continue; // invalid_event
            };
            let wrong = if amount == 0 {
                (reason != Some(NO_HOLD)).then(|| {
                    format!(
                        "hold_released of nothing (amount 0) with reason {}: a release that found no hold records {NO_HOLD}",
                        shown(reason)
                    )
                })
            } else {
                reason.map(|r| {
                    format!(
                        "hold_released of {amount} with reason {r}: a release of a hold records none"
                    )
                })
            };
            if let Some(detail) = wrong {
                out.push(Finding::new("unexpected_reason", s.key, detail).at(ev.seq, ev.event_id));
            }
        }
    }
}

/// Checks the transfer stream `s`, whose rows follow `before` (the last row
/// of the stream proved before them, if any): amounts and reasons.
pub fn check_transfer_stream(s: &StreamView, before: Before, out: &mut Vec<Finding>) {
    use TransferKind::{Created, Releasing, Reserved};
    let mut before = before;
    for ev in s.primary() {
        check_amount(s, ev, out);
        // The row right before this one, if the lake has it (seqs start
        // at 1: a row of seq 0 is no step before another).
        let after = before
            .filter(|b| b.0 >= 1 && b.0.checked_add(1) == Some(ev.seq))
            .map(|b| (b.1, b.2));
        let vocabulary: Option<&[&str]> = match (ev.kind, after) {
            ("failed", _) => Some(&FAILED[..]),
            ("releasing", Some((Some(Created), _))) => Some(&RESERVE_GIVEN_UP[..]),
            ("releasing", Some((Some(Reserved), _))) => Some(&CREDIT_REJECTED[..]),
            ("releasing" | "released", _) => Some(&RELEASING[..]),
            _ => None,
        };
        if let Some(vocabulary) = vocabulary {
            let known = ev.reason.is_some_and(|r| vocabulary.contains(&r));
            let prior = after.filter(|a| a.0 == Some(Releasing)).map(|a| a.1);
            let this = releasing_code("releasing", ev.reason);
            if !known {
                let step = match after {
                    Some((Some(kind @ (Created | Reserved)), _)) if ev.kind == "releasing" => {
                        format!(" after {}", kind.as_str())
                    }
                    _ => String::new(),
                };
                out.push(
                    Finding::new(
                        "unexpected_reason",
                        s.key,
                        format!(
                            "{}{step} with reason {}: the ledger writes one of {}",
                            ev.kind,
                            shown(ev.reason),
                            vocabulary.join(", ")
                        ),
                    )
                    .at(ev.seq, ev.event_id),
                );
            } else if let Some(prior) = prior.filter(|&p| ev.kind == "released" && p != this) {
                let was = usize::from(prior)
                    .checked_sub(1)
                    .and_then(|i| RELEASING.get(i))
                    .map_or("another", |r| r);
                out.push(
                    Finding::new(
                        "reason_changed",
                        s.key,
                        format!(
                            "released with reason {}, but its releasing (seq {}) has {was}",
                            shown(ev.reason),
                            ev.seq - 1
                        ),
                    )
                    .at(ev.seq, ev.event_id),
                );
            }
        }
        let code = releasing_code(ev.kind, ev.reason);
        before = Some((ev.seq, TransferKind::parse(ev.kind), code));
    }
}

fn check_amount(s: &StreamView, ev: &EventRef, out: &mut Vec<Finding>) {
    if let Some(amount) = ev.amount.filter(|&a| a > AMOUNT_MINOR_MAX) {
        out.push(
            Finding::new(
                "amount_out_of_range",
                s.key,
                format!(
                    "{} of {amount}: the ledger moves at most {AMOUNT_MINOR_MAX} minor units",
                    ev.kind
                ),
            )
            .at(ev.seq, ev.event_id),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::OwnedView;
    use ledger_core::Rejection;
    use ledger_events::{Event, Stream, GENESIS_HASH};

    /// The stream of `rows` (kind, amount, reason), sealed, as `stream`'s
    /// key `k` from seq `from`.
    fn stream(stream: Stream, from: u64, rows: &[(&str, Option<i64>, Option<&str>)]) -> Vec<Event> {
        let key = if stream == Stream::Account {
            "acme.a"
        } else {
            "t.acme.k"
        };
        let mut prev = GENESIS_HASH.to_owned();
        rows.iter()
            .zip(from..)
            .map(|(&(kind, amount, reason), seq)| {
                let mut e = Event::new(stream, key, seq, kind, 1_000 * seq as i64, &prev);
                // An `opened` row's number is its overdraft limit.
                if kind == "opened" {
                    e.overdraft_limit = amount;
                } else {
                    e.amount = amount;
                }
                e.reason = reason.map(str::to_owned);
                let e = e.seal();
                prev.clone_from(&e.hash);
                e
            })
            .collect()
    }

    /// The findings on the transfer stream `rows` after `before`: (code, seq).
    fn transfer(
        before: Before,
        from: u64,
        rows: &[(&str, Option<&str>)],
    ) -> Vec<(&'static str, u64)> {
        let rows: Vec<_> = rows.iter().map(|&(k, r)| (k, Some(100), r)).collect();
        let events = stream(Stream::Transfer, from, &rows);
        let v = OwnedView::of_events(Stream::Transfer, "t.acme.k", &events);
        let mut out = Vec::new();
        check_transfer_stream(&v.view(), before, &mut out);
        out.iter().map(|f| (f.code, f.seq.unwrap())).collect()
    }

    fn account(rows: &[(&str, Option<i64>, Option<&str>)]) -> Vec<(&'static str, u64)> {
        let events = stream(Stream::Account, 1, rows);
        let v = OwnedView::of_events(Stream::Account, "acme.a", &events);
        let mut out = Vec::new();
        check_account_stream(&v.view(), &mut out);
        out.iter().map(|f| (f.code, f.seq.unwrap())).collect()
    }

    /// The lists are the core's own codes: the refusals `account::decide`
    /// answers a reserve or a credit of an admitted transfer with.
    #[test]
    fn the_vocabulary_is_the_cores_codes() {
        let codes = |rs: &[Rejection]| {
            let mut v: Vec<&str> = rs.iter().map(Rejection::code).collect();
            v.sort_unstable();
            v
        };
        let usd = ledger_core::Currency::parse("USD").unwrap();
        let mismatch = Rejection::CurrencyMismatch {
            account: usd,
            requested: usd,
        };
        let credit = [
            Rejection::AccountFrozen,
            Rejection::BalanceOverflow,
            mismatch.clone(),
            Rejection::UnknownAccount,
        ];
        assert_eq!(codes(&credit), CREDIT_REJECTED);
        let mut reserve = credit.to_vec();
        reserve.push(Rejection::InsufficientFunds {
            available: 0,
            requested: 1,
        });
        assert_eq!(codes(&reserve), FAILED);
        let union: std::collections::BTreeSet<&str> = RESERVE_GIVEN_UP
            .iter()
            .chain(&CREDIT_REJECTED)
            .copied()
            .collect();
        assert_eq!(RELEASING.len(), union.len());
        assert!(RELEASING.iter().all(|r| union.contains(r)));
        assert_eq!(AMOUNT_MINOR_MAX, (1 << 53) - 1);
    }

    #[test]
    fn amounts_and_the_opened_limit_are_at_most_the_cores_maximum() {
        let max = Some(AMOUNT_MINOR_MAX);
        let over = Some(AMOUNT_MINOR_MAX + 1);
        assert_eq!(
            account(&[("opened", max, None), ("deposited", max, None)]),
            []
        );
        assert_eq!(
            account(&[
                ("opened", over, None),
                ("deposited", over, None),
                ("withdrawn", Some(5), None),
                ("hold_placed", Some(i64::MAX), None),
            ]),
            [
                ("overdraft_limit_out_of_range", 1),
                ("amount_out_of_range", 2),
                ("amount_out_of_range", 4)
            ]
        );
        // Every transfer row, whatever its kind.
        let rows: Vec<_> = ["created", "reserved", "credited", "captured"]
            .iter()
            .map(|&k| (k, over, None))
            .collect();
        let events = stream(Stream::Transfer, 1, &rows);
        let v = OwnedView::of_events(Stream::Transfer, "t.acme.k", &events);
        let mut out = Vec::new();
        check_transfer_stream(&v.view(), None, &mut out);
        let found: Vec<_> = out.iter().map(|f| (f.code, f.seq.unwrap())).collect();
        assert_eq!(
            found,
            (1..=4)
                .map(|s| ("amount_out_of_range", s))
                .collect::<Vec<_>>()
        );
        assert_eq!(out[0].event_id.as_deref(), Some("transfer:t.acme.k:1"));
    }

    #[test]
    fn a_release_records_no_hold_exactly_when_it_released_nothing() {
        let opened = ("opened", Some(0), None);
        assert_eq!(
            account(&[
                opened,
                ("hold_released", Some(0), Some(NO_HOLD)),
                ("hold_released", Some(50), None),
            ]),
            []
        );
        assert_eq!(
            account(&[
                opened,
                ("hold_released", Some(0), None),
                ("hold_released", Some(0), Some("deadline_exceeded")),
                ("hold_released", Some(50), Some(NO_HOLD)),
                // Not judged: the core writes none, the schema allows one.
                ("frozen", None, Some("fraud")),
            ]),
            [
                ("unexpected_reason", 2),
                ("unexpected_reason", 3),
                ("unexpected_reason", 4)
            ]
        );
    }

    #[test]
    fn each_transfer_reason_is_one_the_core_writes_after_that_step() {
        // The saga's own paths.
        for path in [
            vec![("created", None), ("failed", Some("insufficient_funds"))],
            vec![
                ("created", None),
                ("releasing", Some("deadline_exceeded")),
                ("released", Some("deadline_exceeded")),
            ],
            vec![
                ("created", None),
                ("reserved", None),
                ("releasing", Some("currency_mismatch")),
                ("released", Some("currency_mismatch")),
            ],
        ] {
            assert_eq!(transfer(None, 1, &path), [], "{path:?}");
        }
        // Wrong for the kind, wrong for the step before, none at all.
        assert_eq!(
            transfer(
                None,
                1,
                &[("created", None), ("failed", Some("deadline_exceeded"))]
            ),
            [("unexpected_reason", 2)]
        );
        assert_eq!(
            transfer(None, 1, &[("created", None), ("failed", None)]),
            [("unexpected_reason", 2)]
        );
        assert_eq!(
            transfer(
                None,
                1,
                &[("created", None), ("releasing", Some("account_frozen"))]
            ),
            [("unexpected_reason", 2)]
        );
        assert_eq!(
            transfer(
                None,
                1,
                &[
                    ("created", None),
                    ("reserved", None),
                    ("releasing", Some("reserve_unavailable"))
                ]
            ),
            [("unexpected_reason", 3)]
        );
        // After a gap (or a row out of order): either list.
        assert_eq!(
            transfer(None, 3, &[("releasing", Some("reserve_unavailable"))]),
            []
        );
        assert_eq!(
            transfer(None, 3, &[("releasing", Some("account_frozen"))]),
            []
        );
        assert_eq!(
            transfer(None, 3, &[("releasing", Some("insufficient_funds"))]),
            [("unexpected_reason", 3)]
        );
        // A released repeats its releasing; one that does not is named once.
        assert_eq!(
            transfer(
                None,
                1,
                &[
                    ("created", None),
                    ("releasing", Some("deadline_exceeded")),
                    ("released", Some("reserve_unavailable"))
                ]
            ),
            [("reason_changed", 3)]
        );
        assert_eq!(
            transfer(
                None,
                1,
                &[
                    ("created", None),
                    ("releasing", Some("no_hold")),
                    ("released", Some("no_hold"))
                ]
            ),
            [("unexpected_reason", 2), ("unexpected_reason", 3)]
        );
        assert_eq!(
            transfer(
                None,
                1,
                &[
                    ("created", None),
                    ("releasing", Some("no_hold")),
                    ("released", Some("deadline_exceeded"))
                ]
            ),
            [("unexpected_reason", 2), ("reason_changed", 3)]
        );
    }

    /// A stream continued from an earlier run: the row before it is the
    /// facts' (seq, kind, releasing code), exactly as if read together.
    #[test]
    fn a_released_row_is_judged_against_the_releasing_before_it_from_the_facts() {
        use TransferKind::{Created, Releasing, Reserved};
        let frozen = releasing_code("releasing", Some("account_frozen"));
        assert_eq!(releasing_code("released", Some("account_frozen")), 0);
        assert_eq!(releasing_code("releasing", Some("fraud")), OTHER);
        assert_eq!(releasing_code("releasing", None), OTHER);
        assert!((0..=u8::MAX)
            .filter(|&c| is_releasing_code(c))
            .eq([0, 1, 2, 3, 4, 5, 6, OTHER]));
        let after = |code| Some((3, Some(Releasing), code));
        assert_eq!(
            transfer(after(frozen), 4, &[("released", Some("account_frozen"))]),
            []
        );
        assert_eq!(
            transfer(after(frozen), 4, &[("released", Some("unknown_account"))]),
            [("reason_changed", 4)]
        );
        assert_eq!(
            transfer(after(OTHER), 4, &[("released", Some("unknown_account"))]),
            [("reason_changed", 4)]
        );
        assert_eq!(
            transfer(after(OTHER), 4, &[("released", Some("fraud"))]),
            [("unexpected_reason", 4)]
        );
        // Not right before it (or of seq 0, no step): not compared.
        assert_eq!(
            transfer(after(frozen), 5, &[("released", Some("unknown_account"))]),
            []
        );
        assert_eq!(
            transfer(
                Some((0, Some(Releasing), frozen)),
                1,
                &[("released", Some("unknown_account"))]
            ),
            []
        );
        // The step before a releasing, from the facts too.
        assert_eq!(
            transfer(
                Some((2, Some(Reserved), 0)),
                3,
                &[("releasing", Some("deadline_exceeded"))]
            ),
            [("unexpected_reason", 3)]
        );
        assert_eq!(
            transfer(
                Some((1, Some(Created), 0)),
                2,
                &[("releasing", Some("deadline_exceeded"))]
            ),
            []
        );
    }
}
