//! The golden vectors under `edge/events/golden/v1/` are produced by this
//! scenario. If the core's output ever differs, the wire format changed: that
//! is a new schema version, not a fixture update. (`UPDATE_GOLDEN=1` rewrites
//! the files, for the day a version is deliberately added.)

use std::path::PathBuf;

use ledger_core::account::{Command, Outcome};
use ledger_core::memory::MemAccount;
use ledger_core::transfer::{admit, Admission, Advance, Reply, Step, Transfer, TransferSpec};
use ledger_core::{Currency, Event};

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn usd() -> Currency {
    Currency::parse("USD").unwrap()
}

fn ok(o: Outcome) {
    assert!(matches!(o, Outcome::Accepted(_)), "{o:?}");
}

fn account_stream() -> Vec<Event> {
    let id = "acme.acc-1";
    let mut a = MemAccount::default();
    let mut t = T0;
    let mut run = |a: &mut MemAccount, cmd: Command| {
        t += 1_000;
        ok(a.run(id, &cmd, t));
    };
    run(
        &mut a,
        Command::Open {
            currency: usd(),
            overdraft_limit: 0,
        },
    );
    run(
        &mut a,
        Command::Deposit {
            entry_id: "dep:acme.acc-1:k1".into(),
            amount: 10_000,
            currency: usd(),
        },
    );
    run(
        &mut a,
        Command::Reserve {
            transfer_id: "t.acme.k1".into(),
            amount: 2_500,
            currency: usd(),
            destination: "acme.acc-2".into(),
        },
    );
    run(
        &mut a,
        Command::Capture {
            transfer_id: "t.acme.k1".into(),
        },
    );
    run(
        &mut a,
        Command::Reserve {
            transfer_id: "t.acme.k2".into(),
            amount: 100,
            currency: usd(),
            destination: "acme.acc-2".into(),
        },
    );
    run(
        &mut a,
        Command::Release {
            transfer_id: "t.acme.k2".into(),
        },
    );
    run(
        &mut a,
        Command::Release {
            transfer_id: "t.acme.k3".into(),
        },
    );
    run(
        &mut a,
        Command::Credit {
            transfer_id: "t.acme.k9".into(),
            amount: 300,
            currency: usd(),
            source: "acme.acc-3".into(),
        },
    );
    run(&mut a, Command::Freeze);
    run(&mut a, Command::Unfreeze);
    run(
        &mut a,
        Command::Withdraw {
            entry_id: "wd:acme.acc-1:k2".into(),
            amount: 500,
            currency: usd(),
        },
    );
    a.events
}

fn drive(spec: TransferSpec, replies: &[(Step, Reply)]) -> Vec<Event> {
    let mut t = T0;
    let (mut transfer, first): (Transfer, Event) = match admit(None, spec, t, t + 300_000) {
        Admission::Start(tr, ev) => (*tr, ev),
        other => panic!("{other:?}"),
    };
    let mut events = vec![first];
    for (step, reply) in replies {
        t += 1_000;
        match transfer.on_reply(*step, reply, t) {
            Advance::Moved(ev) => events.push(ev),
            other => panic!("{other:?}"),
        }
    }
    assert!(transfer.is_terminal());
    events
}

fn transfer_stream() -> Vec<Event> {
    let accepted = || {
        Reply::Outcome(Outcome::Accepted(ledger_core::account::Receipt {
            seq: Some(1),
            balance_after: 0,
            held_after: 0,
        }))
    };
    let rejected = |r| Reply::Outcome(Outcome::Rejected(r));
    let spec = |key: &str, amount| TransferSpec {
        id: format!("t.acme.{key}"),
        source: "acme.acc-1".into(),
        destination: "acme.acc-2".into(),
        amount,
        currency: usd(),
    };
    let mut all = drive(
        spec("k1", 2_500),
        &[
            (Step::Reserve, accepted()),
            (Step::Credit, accepted()),
            (Step::Capture, accepted()),
        ],
    );
    all.extend(drive(
        spec("k2", 100),
        &[
            (Step::Reserve, accepted()),
            (
                Step::Credit,
                rejected(ledger_core::Rejection::AccountFrozen),
            ),
            (Step::Release, accepted()),
        ],
    ));
    all.extend(drive(
        spec("k4", 1_000_000),
        &[(
            Step::Reserve,
            rejected(ledger_core::Rejection::InsufficientFunds {
                available: 7_400,
                requested: 1_000_000,
            }),
        )],
    ));
    all
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../events/golden/v1")
        .join(name)
}

fn check(name: &str, events: Vec<Event>) {
    let produced: String = events.iter().map(|e| e.to_json() + "\n").collect();
    let path = golden_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &produced).unwrap();
    }
    let golden =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (i, (g, p)) in golden.lines().zip(produced.lines()).enumerate() {
        assert_eq!(
            g,
            p,
            "{name} line {}: the core no longer produces the frozen wire format",
            i + 1
        );
    }
    assert_eq!(
        golden.lines().count(),
        produced.lines().count(),
        "{name}: event count changed"
    );
}

#[test]
fn the_core_produces_the_golden_account_stream() {
    check("account.jsonl", account_stream());
}

#[test]
fn the_core_produces_the_golden_transfer_streams() {
    check("transfer.jsonl", transfer_stream());
}
