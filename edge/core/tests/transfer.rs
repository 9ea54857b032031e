//! The saga's transitions, one path each.

use ledger_core::account::{Outcome, Receipt};
use ledger_core::transfer::{
    admit, Admission, Advance, Phase, Reply, Step, Transfer, TransferSpec,
};
use ledger_core::{retry, Currency, Rejection};

const NOW: i64 = 1_000_000;

fn spec(amount: i64) -> TransferSpec {
    TransferSpec {
        id: "t.acme.k1".into(),
        source: "acc-1".into(),
        destination: "acc-2".into(),
        amount,
        currency: Currency::parse("USD").unwrap(),
    }
}

fn start() -> Transfer {
    match admit(None, spec(100), NOW, NOW + 60_000) {
        Admission::Start(t, ev) => {
            assert_eq!(
                (ev.kind.as_str(), ev.seq, ev.deadline_ms),
                ("created", 1, Some(NOW + 60_000))
            );
            *t
        }
        other => panic!("{other:?}"),
    }
}

fn ok() -> Reply {
    Reply::Outcome(Outcome::Accepted(Receipt {
        seq: Some(2),
        balance_after: 0,
        held_after: 0,
    }))
}

fn no(r: Rejection) -> Reply {
    Reply::Outcome(Outcome::Rejected(r))
}

fn moved(a: Advance) -> String {
    match a {
        Advance::Moved(ev) => ev.kind,
        other => panic!("expected a move, got {other:?}"),
    }
}

#[test]
fn admission_replays_the_same_request_and_refuses_a_changed_one() {
    let t = start();
    assert!(matches!(admit(Some(&t), spec(100), NOW + 5, NOW), Admission::Existing(x) if x == &t));
    assert!(matches!(
        admit(Some(&t), spec(101), NOW + 5, NOW),
        Admission::Refuse(Rejection::IdempotencyConflict { op_id }) if op_id == "t.acme.k1"
    ));
    assert!(matches!(
        admit(None, spec(0), NOW, NOW),
        Admission::Refuse(Rejection::AmountOutOfRange { .. })
    ));
    let same = TransferSpec {
        destination: "acc-1".into(),
        ..spec(5)
    };
    assert!(matches!(
        admit(None, same, NOW, NOW),
        Admission::Refuse(Rejection::SameAccount)
    ));
}

#[test]
fn the_happy_path_walks_reserve_credit_capture() {
    let mut t = start();
    assert_eq!(moved(t.on_reply(Step::Reserve, &ok(), NOW + 1)), "reserved");
    assert_eq!(moved(t.on_reply(Step::Credit, &ok(), NOW + 2)), "credited");
    assert_eq!(moved(t.on_reply(Step::Capture, &ok(), NOW + 3)), "captured");
    assert!(t.is_terminal() && t.next_step().is_none());
    assert_eq!(t.seq, 4);
}

#[test]
fn a_rejected_reserve_fails_and_a_rejected_credit_is_released() {
    let mut t = start();
    assert_eq!(
        moved(t.on_reply(
            Step::Reserve,
            &no(Rejection::InsufficientFunds {
                available: 5,
                requested: 100
            }),
            NOW
        )),
        "failed"
    );
    assert_eq!(
        (t.phase, t.reason.as_deref()),
        (Phase::Failed, Some("insufficient_funds"))
    );

    let mut t = start();
    moved(t.on_reply(Step::Reserve, &ok(), NOW));
    assert_eq!(
        moved(t.on_reply(Step::Credit, &no(Rejection::AccountFrozen), NOW)),
        "releasing"
    );
    assert_eq!(t.next_step(), Some(Step::Release));
    assert_eq!(moved(t.on_reply(Step::Release, &ok(), NOW)), "released");
    assert_eq!(t.reason.as_deref(), Some("account_frozen"));
}

/// A conflict answered to the transfer's own reserve or credit means the
/// account recorded that step under other terms, perhaps applied: the saga
/// neither fails (a hold would leak) nor releases (a credit would stand
/// without its debit); it reports and retries (rev-s56-edge L1).
#[test]
fn a_conflict_on_its_own_step_is_an_anomaly_not_a_compensation() {
    let conflict = |t: &Transfer| {
        no(Rejection::IdempotencyConflict {
            op_id: t.spec.id.clone(),
        })
    };
    let mut t = start();
    let before = t.phase;
    let c = conflict(&t);
    match t.on_reply(Step::Reserve, &c, NOW) {
        Advance::Anomaly { retry_at_ms, .. } => assert!(retry_at_ms > NOW),
        other => panic!("a conflicting reserve answered {other:?}"),
    }
    assert_eq!((t.phase, t.next_step()), (before, Some(Step::Reserve)));
    assert_eq!(t.reason, None);
    // Still the reserve's to finish: a later acceptance moves on.
    assert_eq!(moved(t.on_reply(Step::Reserve, &ok(), NOW)), "reserved");
    let c = conflict(&t);
    match t.on_reply(Step::Credit, &c, NOW) {
        Advance::Anomaly { rejection, .. } => assert_eq!(rejection.code(), "idempotency_conflict"),
        other => panic!("a conflicting credit answered {other:?}"),
    }
    assert_eq!(t.next_step(), Some(Step::Credit), "no release started");
    assert_eq!(t.reason, None);
}

#[test]
fn late_and_duplicate_replies_are_stale() {
    let mut t = start();
    moved(t.on_reply(Step::Reserve, &ok(), NOW));
    let before = t.clone();
    assert_eq!(t.on_reply(Step::Reserve, &ok(), NOW), Advance::Stale);
    assert_eq!(t.on_reply(Step::Capture, &ok(), NOW), Advance::Stale);
    assert_eq!(t, before);
}

#[test]
fn capture_has_no_rejection_branch() {
    let mut t = start();
    moved(t.on_reply(Step::Reserve, &ok(), NOW));
    moved(t.on_reply(Step::Credit, &ok(), NOW));
    match t.on_reply(Step::Capture, &no(Rejection::UnknownHold), NOW) {
        Advance::Anomaly {
            rejection,
            retry_at_ms,
        } => {
            assert_eq!(rejection, Rejection::UnknownHold);
            assert!(retry_at_ms > NOW);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        t.phase,
        Phase::Credited,
        "still waiting to capture, visibly"
    );
}

#[test]
fn transient_faults_back_off_and_only_reserve_gives_up() {
    let mut t = start();
    let mut last = NOW;
    for attempt in 1..retry::RESERVE.attempts_max.unwrap() {
        match t.on_reply(Step::Reserve, &Reply::Transient, NOW) {
            Advance::RetryAt(at) => {
                assert!(at >= NOW && at <= NOW + retry::RESERVE.delay_ms_max as i64);
                assert_eq!(t.attempt, attempt);
                last = at;
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    assert!(last > NOW);
    assert_eq!(
        moved(t.on_reply(Step::Reserve, &Reply::Transient, NOW)),
        "releasing"
    );
    assert_eq!(t.reason.as_deref(), Some("reserve_unavailable"));

    // Past the deadline, one transient reserve is enough to abandon.
    let mut t = start();
    assert_eq!(
        moved(t.on_reply(Step::Reserve, &Reply::Transient, NOW + 60_000)),
        "releasing"
    );
    assert_eq!(t.reason.as_deref(), Some("deadline_exceeded"));

    // Past the point of no return the step never gives up.
    let mut t = start();
    moved(t.on_reply(Step::Reserve, &ok(), NOW));
    for _ in 0..1_000 {
        assert!(matches!(
            t.on_reply(Step::Credit, &Reply::Transient, NOW + 10_000_000),
            Advance::RetryAt(_)
        ));
    }
    assert_eq!(t.phase, Phase::Reserved);
}
