//! The account machine's rules, one scenario each, through the same commit
//! path the Durable Object uses.

use ledger_core::account::{self, Command, Decision, HoldState, Outcome, Status, View};
use ledger_core::memory::MemAccount;
use ledger_core::money::AMOUNT_MINOR_MAX;
use ledger_core::{Currency, Rejection};
use ledger_events::ChainCursor;

const ID: &str = "acc-1";

fn usd() -> Currency {
    Currency::parse("USD").unwrap()
}

fn opened(limit: i64) -> MemAccount {
    let mut a = MemAccount::default();
    assert!(matches!(
        a.run(
            ID,
            &Command::Open {
                currency: usd(),
                overdraft_limit: limit
            },
            1
        ),
        Outcome::Accepted(_)
    ));
    a
}

fn deposit(key: &str, amount: i64) -> Command {
    Command::Deposit {
        entry_id: format!("dep:{key}"),
        amount,
        currency: usd(),
    }
}

fn withdraw(key: &str, amount: i64) -> Command {
    Command::Withdraw {
        entry_id: format!("wd:{key}"),
        amount,
        currency: usd(),
    }
}

fn reserve(t: &str, amount: i64) -> Command {
    Command::Reserve {
        transfer_id: t.into(),
        amount,
        currency: usd(),
        destination: "acc-2".into(),
    }
}

fn credit(t: &str, amount: i64) -> Command {
    Command::Credit {
        transfer_id: t.into(),
        amount,
        currency: usd(),
        source: "acc-0".into(),
    }
}

fn rejected(o: Outcome) -> Rejection {
    match o {
        Outcome::Rejected(r) => r,
        Outcome::Accepted(r) => panic!("expected a rejection, got {r:?}"),
    }
}

fn accepted(o: Outcome) {
    assert!(
        matches!(o, Outcome::Accepted(_)),
        "expected acceptance, got {o:?}"
    );
}

fn verify_chain(a: &MemAccount) {
    let mut c = ChainCursor::genesis(ledger_events::Stream::Account, ID);
    for e in &a.events {
        e.validate().unwrap();
        c.push(e).unwrap();
    }
    assert_eq!(c.last_seq, a.header().seq);
    assert_eq!(c.last_hash, a.header().last_hash);
}

#[test]
fn deposit_replay_returns_the_recorded_outcome_and_posts_once() {
    let mut a = opened(0);
    let first = a.run(ID, &deposit("k1", 500), 2);
    let again = a.run(ID, &deposit("k1", 500), 3);
    assert_eq!(first, again);
    assert_eq!(a.header().balance, 500);
    assert_eq!(a.entries.len(), 1);
    assert_eq!(a.events.len(), 2, "opened + one deposit");
    verify_chain(&a);
}

#[test]
fn same_key_other_amount_is_a_conflict_and_changes_nothing() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 500), 2));
    let before = a.clone();
    let d = a.execute(ID, &deposit("k1", 501), 3);
    assert_eq!(
        d,
        Decision::Refuse(Rejection::IdempotencyConflict {
            op_id: "dep:k1".into()
        })
    );
    assert_eq!(a.header, before.header);
    assert_eq!(a.events.len(), before.events.len());
}

#[test]
fn a_deposit_and_a_withdrawal_cannot_share_a_key() {
    let mut a = opened(0);
    let booked = a.run(ID, &deposit("k1", 100), 2);
    let before = a.clone();
    // The same key the other way is a conflict naming the record that holds it, and runs
    // nothing, whatever the amount or the limit (the key is looked up first).
    for (cmd, max) in [
        (withdraw("k1", 10), AMOUNT_MINOR_MAX),
        (withdraw("k1", 100), AMOUNT_MINOR_MAX),
        (withdraw("k1", 5_000), 1_000),
    ] {
        assert_eq!(
            a.execute_within(ID, &cmd, 3, max),
            Decision::Refuse(Rejection::IdempotencyConflict {
                op_id: "dep:k1".into()
            })
        );
    }
    assert_eq!(a.header, before.header);
    assert_eq!(a.ops.len(), before.ops.len());
    assert_eq!(a.events.len(), before.events.len());
    // The deposit still replays, and the reverse order is refused alike.
    assert_eq!(
        a.execute(ID, &deposit("k1", 100), 4),
        Decision::Replay(booked)
    );
    accepted(a.run(ID, &withdraw("w1", 10), 5));
    assert_eq!(
        a.execute(ID, &deposit("w1", 10), 6),
        Decision::Refuse(Rejection::IdempotencyConflict {
            op_id: "wd:w1".into()
        })
    );
    // Both directions recorded under one key before the check existed: each still replays.
    let mut old = opened(0);
    let d = old.run(ID, &deposit("k2", 50), 2);
    // An older version decided the withdrawal without the paired record, and committed it.
    let Decision::Commit(t) = account::decide(
        ID,
        View {
            header: old.header.as_ref(),
            ..View::default()
        },
        &withdraw("k2", 20),
        3,
    ) else {
        panic!("a withdrawal decided without the paired record commits")
    };
    old.header = t.header.clone();
    let op = t.op.clone().unwrap();
    old.ops.insert(op.op_id.clone(), op);
    assert_eq!(old.execute(ID, &deposit("k2", 50), 4), Decision::Replay(d));
    assert_eq!(
        old.execute(ID, &withdraw("k2", 20), 4),
        Decision::Replay(t.outcome.clone())
    );
}

#[test]
fn withdrawal_cannot_overdraw_and_its_rejection_is_recorded() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 100), 2));
    let r = rejected(a.run(ID, &withdraw("w1", 101), 3));
    assert_eq!(
        r,
        Rejection::InsufficientFunds {
            available: 100,
            requested: 101
        }
    );
    // Funds arrive; the same key still answers with the recorded rejection.
    accepted(a.run(ID, &deposit("k2", 100), 4));
    assert_eq!(
        rejected(a.run(ID, &withdraw("w1", 101), 5)).code(),
        "insufficient_funds"
    );
    accepted(a.run(ID, &withdraw("w2", 200), 6));
    assert_eq!(a.header().balance, 0);
}

#[test]
fn overdraft_limit_lets_available_go_negative_down_to_the_limit() {
    let mut a = opened(50);
    accepted(a.run(ID, &withdraw("w1", 50), 2));
    assert_eq!(a.header().balance, -50);
    assert_eq!(
        rejected(a.run(ID, &withdraw("w2", 1), 3)),
        Rejection::InsufficientFunds {
            available: 0,
            requested: 1
        }
    );
    verify_chain(&a);
}

#[test]
fn reserve_holds_funds_that_a_second_reserve_cannot_take() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 100), 2));
    accepted(a.run(ID, &reserve("t1", 70), 3));
    assert_eq!(
        (a.header().balance, a.header().held, a.header().available()),
        (100, 70, 30)
    );
    assert_eq!(
        rejected(a.run(ID, &reserve("t2", 31), 4)),
        Rejection::InsufficientFunds {
            available: 30,
            requested: 31
        }
    );
    assert_eq!(
        rejected(a.run(ID, &withdraw("w1", 31), 5)).code(),
        "insufficient_funds"
    );
}

#[test]
fn capture_turns_the_hold_into_exactly_one_debit_even_when_replayed() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 100), 2));
    accepted(a.run(ID, &reserve("t1", 70), 3));
    let cap = Command::Capture {
        transfer_id: "t1".into(),
    };
    let first = a.run(ID, &cap, 4);
    assert_eq!(a.run(ID, &cap, 5), first);
    assert_eq!((a.header().balance, a.header().held), (30, 0));
    let debits: Vec<_> = a
        .entries
        .iter()
        .filter(|e| e.entry_id == "t1:debit")
        .collect();
    assert_eq!(debits.len(), 1);
    assert_eq!(debits[0].amount, -70);
    assert_eq!(a.holds["t1"].state, HoldState::Captured);
    // The compensation can no longer run once the debit exists.
    assert_eq!(
        rejected(a.run(
            ID,
            &Command::Release {
                transfer_id: "t1".into()
            },
            6
        )),
        Rejection::HoldCaptured
    );
    verify_chain(&a);
}

#[test]
fn freeze_blocks_new_money_movement_but_never_a_granted_capture() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 100), 2));
    accepted(a.run(ID, &reserve("t1", 60), 3));
    accepted(a.run(ID, &reserve("t2", 40), 3));
    accepted(a.run(ID, &Command::Freeze, 4));
    assert_eq!(a.header().status, Status::Frozen);
    assert_eq!(
        rejected(a.run(ID, &reserve("t3", 1), 5)),
        Rejection::AccountFrozen
    );
    assert_eq!(
        rejected(a.run(ID, &credit("t4", 1), 5)),
        Rejection::AccountFrozen
    );
    assert_eq!(
        rejected(a.run(ID, &deposit("k2", 1), 5)),
        Rejection::AccountFrozen
    );
    assert_eq!(
        rejected(a.run(ID, &withdraw("w1", 1), 5)),
        Rejection::AccountFrozen
    );
    // I0: the granted holds are captured and released regardless.
    accepted(a.run(
        ID,
        &Command::Capture {
            transfer_id: "t1".into(),
        },
        6,
    ));
    accepted(a.run(
        ID,
        &Command::Release {
            transfer_id: "t2".into(),
        },
        6,
    ));
    assert_eq!((a.header().balance, a.header().held), (40, 0));
    // Freezing twice is a no-op without an event.
    let events = a.events.len();
    assert!(matches!(
        a.execute(ID, &Command::Freeze, 7),
        Decision::Noop(_)
    ));
    assert_eq!(a.events.len(), events);
    accepted(a.run(ID, &Command::Unfreeze, 8));
    accepted(a.run(ID, &deposit("k3", 1), 9));
    verify_chain(&a);
}

#[test]
fn a_release_before_its_reserve_leaves_a_tombstone_that_refuses_the_late_reserve() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 100), 2));
    accepted(a.run(
        ID,
        &Command::Release {
            transfer_id: "t1".into(),
        },
        3,
    ));
    let last = a.events.last().unwrap();
    assert_eq!(
        (last.kind.as_str(), last.amount, last.reason.as_deref()),
        ("hold_released", Some(0), Some("no_hold"))
    );
    assert_eq!(
        rejected(a.run(ID, &reserve("t1", 10), 4)),
        Rejection::HoldReleased
    );
    assert_eq!(a.header().held, 0);
    assert_eq!(
        rejected(a.run(
            ID,
            &Command::Capture {
                transfer_id: "t1".into()
            },
            5
        )),
        Rejection::HoldReleased
    );
    assert_eq!(
        rejected(a.run(
            ID,
            &Command::Capture {
                transfer_id: "t9".into()
            },
            5
        )),
        Rejection::UnknownHold
    );
}

#[test]
fn invalid_requests_change_nothing_and_leave_no_record() {
    let mut a = opened(0);
    accepted(a.run(ID, &deposit("k1", 100), 2));
    let before = (a.header.clone(), a.ops.len(), a.events.len());
    let eur = Currency::parse("EUR").unwrap();
    let cases = [
        (deposit("k2", 0), "amount_out_of_range"),
        (deposit("k2", -5), "amount_out_of_range"),
        (withdraw("k2", i64::MAX), "amount_out_of_range"),
        (
            Command::Deposit {
                entry_id: "dep:k2".into(),
                amount: 1,
                currency: eur,
            },
            "currency_mismatch",
        ),
        (
            Command::Reserve {
                transfer_id: "t1".into(),
                amount: 1,
                currency: eur,
                destination: "x".into(),
            },
            "currency_mismatch",
        ),
    ];
    for (cmd, code) in cases {
        assert_eq!(rejected(a.run(ID, &cmd, 3)).code(), code, "{cmd:?}");
    }
    assert_eq!((a.header.clone(), a.ops.len(), a.events.len()), before);
    // The key that was refused is still free for a valid request.
    accepted(a.run(ID, &deposit("k2", 1), 4));
}

#[test]
fn unknown_accounts_and_bad_limits_are_refused() {
    let mut a = MemAccount::default();
    assert_eq!(
        rejected(a.run(ID, &deposit("k1", 1), 1)),
        Rejection::UnknownAccount
    );
    assert_eq!(
        rejected(a.run(
            ID,
            &Command::Open {
                currency: usd(),
                overdraft_limit: -1
            },
            1
        )),
        Rejection::OverdraftLimitOutOfRange { limit: -1 }
    );
    assert!(a.header.is_none() && a.ops.is_empty());
    let mut a = opened(0);
    // Reopening with the same parameters replays; with others, conflicts.
    accepted(a.run(
        ID,
        &Command::Open {
            currency: usd(),
            overdraft_limit: 0,
        },
        9,
    ));
    assert_eq!(
        rejected(a.run(
            ID,
            &Command::Open {
                currency: usd(),
                overdraft_limit: 5
            },
            9
        ))
        .code(),
        "idempotency_conflict"
    );
    assert_eq!(a.events.len(), 1);
}

#[test]
fn balance_overflow_is_a_rejection_not_a_wrap() {
    let mut a = opened(0);
    let max = ledger_core::money::AMOUNT_MINOR_MAX;
    let mut n = 0;
    // Fill the balance to the brim in maximal deposits.
    while a.header().balance <= i64::MAX - max {
        accepted(a.run(ID, &deposit(&format!("k{n}"), max), 2));
        n += 1;
    }
    assert_eq!(
        rejected(a.run(ID, &deposit("over", max), 3)),
        Rejection::BalanceOverflow
    );
    assert!(a.header().balance > 0, "no wrap");
}

#[test]
fn a_lowered_amount_limit_refuses_new_movements_but_never_a_recorded_one() {
    let mut a = opened(0);
    let booked = a.run(ID, &deposit("k1", 5_000), 2);
    // The limit is lowered to 1000 after the deposit was booked (its answer lost): the retry
    // answers the record, and a reuse with other parameters is still a conflict.
    assert_eq!(
        a.execute_within(ID, &deposit("k1", 5_000), 3, 1_000),
        Decision::Replay(booked)
    );
    assert!(matches!(
        a.execute_within(ID, &deposit("k1", 4_000), 3, 1_000),
        Decision::Refuse(Rejection::IdempotencyConflict { .. })
    ));
    // New movements above it are refused, unrecorded: the key stays unused.
    for cmd in [deposit("k2", 1_001), withdraw("w1", 1_001)] {
        assert_eq!(
            a.execute_within(ID, &cmd, 4, 1_000),
            Decision::Refuse(Rejection::AmountOutOfRange {
                amount: 1_001,
                max: 1_000
            })
        );
    }
    let mut within = |cmd: Command, now: i64| a.execute_within(ID, &cmd, now, 1_000).outcome();
    accepted(within(deposit("k2", 1_000), 5));
    accepted(within(withdraw("w1", 1_000), 6));
    // A saga step's amount was judged when its transfer was admitted.
    accepted(within(reserve("t1", 2_000), 7));
    assert_eq!((a.header().balance, a.header().held), (5_000, 2_000));
    assert_eq!(a.entries.len(), 3, "k1, k2, w1: once each");
    verify_chain(&a);
}
