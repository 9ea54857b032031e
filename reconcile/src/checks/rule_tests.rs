//! Each rule of the checks, one row or leg away from holding: a test per
//! rule that the checks' other tests reach only through a whole lake, if at
//! all. Each fails when its rule is dropped or weakened (the condition it
//! names removed, a field left uncompared).
use crate::checks::{
    balance, completeness, consistency, duplicates, overdraft, transfer_conservation,
};
use crate::facts::{Leg, Legs, TransferFacts};
use crate::finding::{Finding, Settle};
use crate::names::Names;
use crate::stream::{OwnedView, Tail};
use ledger_events::{Event, Stream};

fn account_events() -> Vec<Event> {
    let (events, _) = crate::gen::generate_events(&crate::gen::GenConfig::default());
    let key = events[0].stream_key.clone();
    events
        .into_iter()
        .filter(|e| e.stream == Stream::Account && e.stream_key == key)
        .collect()
}
fn rechain(rows: &mut [Event], from: usize) {
    for i in from..rows.len() {
        if i > 0 {
            rows[i].prev_hash = rows[i - 1].hash.clone();
        }
        rows[i] = rows[i].clone().seal();
    }
}
fn codes(out: &[Finding]) -> Vec<(&'static str, Option<u64>)> {
    out.iter().map(|f| (f.code, f.seq)).collect()
}

#[test]
fn seq_1_links_to_genesis() {
    let mut rows = account_events();
    rows[0].prev_hash = "ab".repeat(32);
    rechain(&mut rows, 0);
    let v = OwnedView::of_events(Stream::Account, &rows[0].stream_key, &rows);
    let mut out = Vec::new();
    completeness::check_stream(&v.view(), &mut Tail::default(), &mut out);
    assert_eq!(codes(&out), [("chain_break", Some(1))]);
}

#[test]
fn a_row_may_link_to_either_version_of_a_conflict() {
    for link_second in [false, true] {
        let mut rows = account_events();
        let mut other = rows[1].clone();
        other.occurred_at_ms += 1;
        let other = other.seal();
        let (lo, hi) = if other.hash < rows[1].hash {
            (other.clone(), rows[1].clone())
        } else {
            (rows[1].clone(), other.clone())
        };
        let linked = if link_second { hi.clone() } else { lo.clone() };
        let mut chain = rows.clone();
        chain[1] = linked;
        rechain(&mut chain, 2);
        rows = chain.clone();
        let unlinked = if link_second { lo } else { hi };
        rows.push(unlinked);
        rows.sort_by(|a, b| (a.seq, &a.hash).cmp(&(b.seq, &b.hash)));
        let v = OwnedView::of_events(Stream::Account, &rows[0].stream_key, &rows);
        let mut out = Vec::new();
        completeness::check_stream(&v.view(), &mut Tail::default(), &mut out);
        assert_eq!(
            codes(&out),
            [],
            "link to the version that sorts second: {link_second}"
        );
    }
}

fn bare(stream: Stream, key: &str, kinds: &[&str]) -> Vec<Event> {
    kinds
        .iter()
        .zip(1u64..)
        .map(|(k, seq)| Event::new(stream, key, seq, k, 1_000, "00").seal())
        .collect()
}

#[test]
fn a_transfer_stream_starts_with_created() {
    let rows = bare(
        Stream::Transfer,
        "t.acme.k",
        &["reserved", "credited", "captured"],
    );
    let v = OwnedView::of_events(Stream::Transfer, "t.acme.k", &rows);
    let mut out = Vec::new();
    completeness::check_phases(&v.view(), None, &mut out);
    assert_eq!(codes(&out), [("phase_order", Some(1))]);
}

#[test]
fn no_new_money_or_reserve_while_frozen() {
    // A freeze blocks deposits, withdrawals, reserves and credits (I0).
    for kind in ["deposited", "withdrawn", "hold_placed", "credited"] {
        let rows = bare(Stream::Account, "acme.a", &["opened", "frozen", kind]);
        let v = OwnedView::of_events(Stream::Account, "acme.a", &rows);
        let mut out = Vec::new();
        completeness::check_account_life(&v.view(), &mut None, &mut out);
        assert_eq!(codes(&out), [("phase_order", Some(3))], "{kind}");
    }
    // Captures and releases go on.
    for kind in ["captured", "hold_released"] {
        let rows = bare(Stream::Account, "acme.a", &["opened", "frozen", kind]);
        let v = OwnedView::of_events(Stream::Account, "acme.a", &rows);
        let mut out = Vec::new();
        completeness::check_account_life(&v.view(), &mut None, &mut out);
        assert_eq!(codes(&out), [], "{kind}");
    }
}

/// An account row: kind, currency, amount, balance, held, limit.
type AccountRow<'a> = (&'a str, &'a str, Option<i64>, i64, i64, i64);

fn acct(rows: &[AccountRow<'_>]) -> Vec<Event> {
    rows.iter()
        .zip(1u64..)
        .map(|(&(k, c, amount, bal, held, lim), seq)| {
            let mut e = Event::new(Stream::Account, "acme.a", seq, k, 1_000, "00");
            e.currency = Some(c.into());
            e.amount = amount;
            e.balance_after = Some(bal);
            e.held_after = Some(held);
            e.overdraft_limit = Some(lim);
            e.seal()
        })
        .collect()
}

#[test]
fn an_account_row_in_another_currency_is_terms_changed() {
    let rows = acct(&[
        ("opened", "USD", None, 0, 0, 0),
        ("deposited", "EUR", Some(100), 100, 0, 0),
    ]);
    let v = OwnedView::of_events(Stream::Account, "acme.a", &rows);
    let (mut fold, mut terms, mut out, mut gaps) = (None, None, Vec::new(), Vec::new());
    balance::check_stream(&v.view(), &mut fold, &mut terms, &mut out, &mut gaps);
    assert_eq!(codes(&out), [("terms_changed", Some(2))]);
}

#[test]
fn money_held_counts_against_the_limit() {
    let rows = acct(&[
        ("opened", "USD", None, 0, 0, 0),
        ("hold_placed", "USD", Some(50), 0, 50, 0),
    ]);
    let v = OwnedView::of_events(Stream::Account, "acme.a", &rows);
    let mut out = Vec::new();
    overdraft::check_stream(&v.view(), &mut None, &mut out);
    assert_eq!(codes(&out), [("overdraft", Some(2))]);
}

fn facts(
    n: &mut Names,
    phase: &str,
) -> (
    TransferFacts,
    crate::names::Sym,
    crate::names::Sym,
    crate::names::Sym,
) {
    let (a, b, usd) = (n.id("acme.a"), n.id("acme.b"), n.id("USD"));
    let mut t = TransferFacts::new(n.id(phase));
    t.set_amount(Some(100));
    t.set_currency(Some(usd));
    t.set_source(Some(a));
    t.set_destination(Some(b));
    (t, a, b, usd)
}
fn leg(
    account: crate::names::Sym,
    counterparty: crate::names::Sym,
    usd: crate::names::Sym,
    amount: i64,
    seq: u64,
) -> Leg {
    Leg {
        account,
        amount,
        currency: usd,
        counterparty,
        seq,
        at_s: 1_000,
    }
}

#[test]
fn a_released_transfer_moved_no_money() {
    let mut n = Names::default();
    let (t, a, b, usd) = facts(&mut n, "released");
    // A debit and a credit, a debit alone, a credit alone: each is money
    // moved.
    let (debit, credit) = (leg(a, b, usd, 100, 2), leg(b, a, usd, 100, 1));
    for (debits, credits) in [
        (vec![debit], vec![credit]),
        (vec![debit], vec![]),
        (vec![], vec![credit]),
    ] {
        let legs = Legs::from_lists([vec![leg(a, b, usd, 100, 1)], debits, credits, vec![]]);
        let mut out = Vec::new();
        transfer_conservation::check_transfer(&n, "t.acme.k", Some(&t), &legs, &mut out);
        assert!(
            out.iter().any(|f| f.code == "money_moved_without_capture"),
            "{out:?}"
        );
    }
}

#[test]
fn a_capture_of_another_amount_than_the_hold_while_credited() {
    let mut n = Names::default();
    let (t, a, b, usd) = facts(&mut n, "credited");
    let legs = Legs::from_lists([
        vec![leg(a, b, usd, 100, 1)],
        vec![leg(a, b, usd, 80, 2)],
        vec![leg(b, a, usd, 100, 1)],
        vec![],
    ]);
    let mut out = Vec::new();
    consistency::check_transfer(&n, "t.acme.k", Some(&t), &legs.canonical(&n), &mut out);
    assert_eq!(codes(&out), [("capture_not_hold", Some(2))]);
}

#[test]
fn a_transfer_row_that_changes_its_destination_is_terms_changed() {
    let n = Names::default();
    let rows: Vec<Event> = [("created", "acme.b"), ("reserved", "acme.c")]
        .iter()
        .zip(1u64..)
        .map(|(&(k, dst), seq)| {
            let mut e = Event::new(Stream::Transfer, "t.acme.k", seq, k, 1_000, "00");
            e.amount = Some(100);
            e.currency = Some("USD".into());
            e.source = Some("acme.a".into());
            e.destination = Some(dst.into());
            e.deadline_ms = Some(61_000);
            e.seal()
        })
        .collect();
    let v = OwnedView::of_events(Stream::Transfer, "t.acme.k", &rows);
    let mut out = Vec::new();
    transfer_conservation::check_terms(&v.view(), &TransferFacts::default(), &n, &mut out);
    assert_eq!(codes(&out), [("terms_changed", Some(2))]);
}

#[test]
fn every_conflict_of_a_stream_is_named() {
    let mut rows = account_events();
    for i in [1usize, 3] {
        let mut other = rows[i].clone();
        other.occurred_at_ms += 1;
        rows.push(other.seal());
    }
    rows.sort_by(|a, b| (a.seq, &a.hash).cmp(&(b.seq, &b.hash)));
    let v = OwnedView::of_events(Stream::Account, &rows[0].stream_key, &rows);
    let mut out = Vec::new();
    duplicates::check_stream(&v.view(), &mut out);
    assert_eq!(codes(&out), [("conflict", Some(2)), ("conflict", Some(4))]);
}

const NOW: i64 = 1_800_000_000_000;
const WINDOW: Settle = Settle {
    now_ms: NOW,
    settle_ms: 600_000,
};

#[test]
fn a_decided_conflict_on_an_account_is_a_wrong_row() {
    use crate::checkpoint::StreamFinding;
    let f = StreamFinding {
        check: duplicates::NAME,
        stream: (ledger_ingest::Table::Account, Stream::Account, "a.b".into()),
        finding: Finding::new("conflict", "a.b", "2 versions: hashes x, y".into())
            .at(9, "account:a.b:9"),
    };
    let y = crate::settle::young(&[f], &Default::default(), &[], WINDOW);
    assert!(
        y.wrong_rows.contains(&("a.b".to_owned(), 9)),
        "{:?}",
        y.wrong_rows
    );
}

#[test]
fn a_decided_gap_owes_nothing_to_delivery() {
    use crate::checkpoint::{StreamFinding, StreamState};
    let id = (
        ledger_ingest::Table::Account,
        Stream::Account,
        "a.b".to_owned(),
    );
    let mut gap = Finding::new("seq_gap", "a.b", String::new()).absence(NOW - 3_600_000);
    gap.missing_balance = Some(50);
    let f = StreamFinding {
        check: completeness::NAME,
        stream: id.clone(),
        finding: gap,
    };
    let acc = crate::facts::AccountFacts {
        currency: Some("USD".into()),
        ..Default::default()
    };
    let mut streams = crate::names::FxMap::default();
    streams.insert(
        id,
        StreamState {
            tail: Tail::default(),
            account: Some(Box::new(acc)),
        },
    );
    let y = crate::settle::young(&[f], &streams, &[], WINDOW);
    assert!(y.gaps.is_empty(), "{:?}", y.gaps);
}
