//! Saga steps at an account nobody opened yet, with two drivers of one
//! transfer (its request and its alarm, a client's retry, the sweeper): the
//! account may be opened between two deliveries of one step, and the later
//! delivery must get the first one's answer.

use ledger_core::account::{Command, HoldState, Outcome};
use ledger_core::memory::MemAccount;
use ledger_core::transfer::{admit, Admission, Advance, Phase, Reply, Step, Transfer};
use ledger_core::{Currency, Rejection};

const SRC: &str = "acme.src";
const DST: &str = "acme.dst";

fn usd() -> Currency {
    Currency::parse("USD").unwrap()
}

fn open(a: &mut MemAccount, id: &str, funds: i64) {
    let open = Command::Open {
        currency: usd(),
        overdraft_limit: 0,
    };
    assert!(matches!(a.run(id, &open, 1), Outcome::Accepted(_)));
    if funds > 0 {
        let deposit = Command::Deposit {
            entry_id: format!("dep:{id}"),
            amount: funds,
            currency: usd(),
        };
        assert!(matches!(a.run(id, &deposit, 2), Outcome::Accepted(_)));
    }
}

fn transfer(key: &str, amount: i64) -> Transfer {
    let spec = ledger_core::transfer::TransferSpec {
        id: format!("t.acme.{key}"),
        source: SRC.into(),
        destination: DST.into(),
        amount,
        currency: usd(),
    };
    match admit(None, spec, 10, 1_000_000) {
        Admission::Start(t, _) => *t,
        other => panic!("{other:?}"),
    }
}

fn unknown() -> Outcome {
    Outcome::Rejected(Rejection::UnknownAccount)
}

#[test]
fn a_credit_refused_for_an_unopened_destination_is_refused_again_once_it_is_opened() {
    let (mut src, mut dst) = (MemAccount::default(), MemAccount::default());
    open(&mut src, SRC, 100);
    let mut t = transfer("k1", 100);
    let (_, reserve) = t.request(Step::Reserve);
    let r = src.run(SRC, &reserve, 11);
    assert!(matches!(
        t.on_reply(Step::Reserve, &Reply::Outcome(r), 11),
        Advance::Moved(_)
    ));
    // Two drivers build the same credit; the first lands on nobody.
    let (_, credit_a) = t.request(Step::Credit);
    let (_, credit_b) = t.request(Step::Credit);
    let ra = dst.run(DST, &credit_a, 12);
    assert_eq!(ra, unknown());
    assert!(
        dst.header.is_none() && dst.events.is_empty(),
        "no stream, no event"
    );
    assert!(matches!(
        t.on_reply(Step::Credit, &Reply::Outcome(ra), 12),
        Advance::Moved(_)
    ));
    assert_eq!(t.phase, Phase::Releasing);
    // The destination is opened; the second delivery gets the same answer.
    open(&mut dst, DST, 0);
    let rb = dst.run(DST, &credit_b, 13);
    assert_eq!(rb, unknown());
    assert_eq!(
        t.on_reply(Step::Credit, &Reply::Outcome(rb), 13),
        Advance::Stale
    );
    let (_, release) = t.request(Step::Release);
    let r = src.run(SRC, &release, 14);
    assert!(matches!(
        t.on_reply(Step::Release, &Reply::Outcome(r), 14),
        Advance::Moved(_)
    ));
    assert_eq!(t.phase, Phase::Released);
    // No money created: the source has its 100, the destination nothing.
    assert_eq!((src.header().balance, src.header().held), (100, 0));
    assert_eq!((dst.header().balance, dst.entries.len()), (0, 0));
}

#[test]
fn a_reserve_refused_for_an_unopened_source_holds_nothing_once_it_is_opened() {
    let mut src = MemAccount::default();
    let mut t = transfer("k2", 50);
    let (_, reserve_a) = t.request(Step::Reserve);
    let (_, reserve_b) = t.request(Step::Reserve);
    assert_eq!(src.run(SRC, &reserve_a, 11), unknown());
    assert!(matches!(
        t.on_reply(Step::Reserve, &Reply::Outcome(unknown()), 11),
        Advance::Moved(_)
    ));
    assert_eq!(t.phase, Phase::Failed);
    open(&mut src, SRC, 50);
    assert_eq!(src.run(SRC, &reserve_b, 13), unknown());
    assert!(src.holds.is_empty());
    assert_eq!((src.header().held, src.header().available()), (0, 50));
}

#[test]
fn a_release_at_an_unopened_source_ends_the_saga_and_refuses_a_reserve_still_in_flight() {
    let mut src = MemAccount::default();
    let mut t = transfer("k3", 50);
    // The reserve was sent and never answered (the account unreachable)
    // until the saga gave up on it and released.
    let (_, reserve) = t.request(Step::Reserve);
    let mut now = 11;
    while t.phase == Phase::Created {
        t.on_reply(Step::Reserve, &Reply::Transient, now);
        now += 1_000;
    }
    assert_eq!(t.phase, Phase::Releasing);
    let (_, release) = t.request(Step::Release);
    let r = src.run(SRC, &release, now);
    assert_eq!(r, unknown());
    assert!(matches!(
        t.on_reply(Step::Release, &Reply::Outcome(r), now),
        Advance::Moved(_)
    ));
    assert_eq!(t.phase, Phase::Released, "terminal, not retried for ever");
    assert!(t.next_step().is_none());
    assert_eq!(src.run(SRC, &release, now + 1), unknown(), "a replay");
    // The source is opened and funded; the reserve in flight lands: refused.
    open(&mut src, SRC, 50);
    assert_eq!(
        src.run(SRC, &reserve, now + 2),
        Outcome::Rejected(Rejection::HoldReleased)
    );
    assert_eq!(src.holds[&t.spec.id].state, HoldState::Released);
    assert_eq!((src.header().held, src.header().available()), (0, 50));
}

#[test]
fn only_saga_steps_leave_a_record_at_an_unopened_account() {
    let mut a = MemAccount::default();
    let deposit = Command::Deposit {
        entry_id: "dep:1".into(),
        amount: 5,
        currency: usd(),
    };
    assert_eq!(a.run(SRC, &deposit, 1), unknown());
    assert_eq!(a.run(SRC, &Command::Freeze, 1), unknown());
    assert!(a.ops.is_empty() && a.holds.is_empty());
    let capture = Command::Capture {
        transfer_id: "t.acme.k4".into(),
    };
    assert_eq!(a.run(SRC, &capture, 1), unknown());
    assert!(
        a.ops.is_empty(),
        "a capture needs a hold, which nobody placed"
    );
}
