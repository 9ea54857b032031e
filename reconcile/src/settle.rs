//! The settle window: delivery lag told apart from a violation.
//!
//! The lake is the ledger as delivered. An event committed but still in an
//! outbox, the queue or a retried batch is absent for a while, and its
//! absence looks like a violation when a later event arrived first: a seq
//! gap, a saga step the transfer or its other account already shows (a
//! credit whose hold is not in the lake yet, a `captured` transfer whose
//! debit is not). Every prefix of the commit log holds (mid-saga states are
//! not findings), so such a finding always rests on a row committed *after*
//! the absent one: the next row of the stream, a row of the same saga.
//!
//! So a finding that rests on an absent row records when the youngest row
//! it rests on was committed ([`Finding::youngest_ms`], set by the checks
//! that can see an absence); a run with a settle window `S` leaves it
//! *pending* while that row is younger than `S` ([`CheckResult::settle`]):
//! if every event is delivered within `S` of its commit, a pending finding
//! is delivery lag or a violation that a run `S` later decides, and a
//! finding on older rows is a violation. A finding on a row that is wrong
//! (a bad amount, a broken hash, an overdraft) is never pending: no late
//! row makes it right. Dangling transfers are judged `S` after their
//! deadline (their terminal row may be in delivery). Global conservation is
//! pending only when its whole residual is what the pending findings leave
//! unbalanced ([`crate::checks::global_conservation::Young`]): the
//! transfers with a pending finding and no decided one, and the pending gaps of account
//! streams (what the missing events moved the balance by).
//!
//! Pure: the checks' findings and the proof's per-stream state in, the
//! young parts out.

use std::collections::BTreeMap;

use ledger_events::Stream;
use ledger_ingest::Table;

use crate::checkpoint::{StreamFinding, StreamId, StreamState};
use crate::checks::completeness;
use crate::checks::global_conservation::{owe, Owed, Young};
use crate::finding::{Finding, Settle};
use crate::names::FxMap;

#[cfg(doc)]
use crate::finding::CheckResult;

/// What global conservation needs to tell delivery lag from a violation in
/// `window`: the transfers a
/// cross-stream check has a pending finding on and no decided one
/// (`per_transfer`: their findings; nor one on their own stream), the
/// account rows that are wrong (a transfer with such a leg owes nothing to
/// delivery either), and per currency what the seq gaps of account streams whose
/// next row is young moved the balance by, each with when
/// the youngest row was committed. A gap whose movement the rows around it
/// do not tell (an invalid row before it) adds nothing, so a residual it
/// explains stays a violation.
pub fn young(
    findings: &[StreamFinding],
    streams: &FxMap<StreamId, StreamState>,
    per_transfer: &[&[Finding]],
    window: Settle,
) -> Young {
    let mut transfers: BTreeMap<String, i64> = BTreeMap::new();
    for f in per_transfer.iter().flat_map(|f| f.iter()) {
        if let Some(at) = f.youngest_ms.filter(|&at| window.young(at)) {
            let e = transfers.entry(f.key.clone()).or_insert(at);
            *e = (*e).max(at);
        }
    }
    // A transfer with a decided finding besides (a wrong row: a token hold,
    // a credit while releasing; or one past the window) owes nothing to
    // delivery: no late row makes its money right, so what it leaves
    // unbalanced is a violation, not lag (rev-s56-outputs 1: a pending
    // `dangling` of the same transfer made its created money pending). So
    // is one whose own stream has a decided finding (its terms changed, an
    // id of no tenant, a row that fails its hash: rev-s56-pending 3), or
    // whose leg is a row that fails its hash, is not valid or conflicts
    // with another version of it (`wrong_rows`, judged with the legs).
    let decided = |f: &Finding| !f.youngest_ms.is_some_and(|at| window.young(at));
    // Not `dangling`: a transfer past its deadline is a violation of time,
    // not a wrong row; its money may still be in delivery (a destination
    // that answered late, its credit lagging: rev-s56-diff M1).
    for f in per_transfer.iter().flat_map(|f| f.iter()) {
        if decided(f) && f.code != "dangling" {
            transfers.remove(&f.key);
        }
    }
    let mut wrong_rows = std::collections::HashSet::new();
    for sf in findings.iter().filter(|sf| decided(&sf.finding)) {
        match sf.stream {
            (Table::Transfer, Stream::Transfer, ref key) => {
                transfers.remove(key);
            }
            (Table::Account, Stream::Account, ref key) => {
                if let (Some(seq), true) = (
                    sf.finding.seq,
                    completeness::ROW_NOT_THE_LEDGERS.contains(&sf.finding.code)
                        || sf.finding.code == "conflict",
                ) {
                    wrong_rows.insert((key.clone(), seq));
                }
            }
            _ => {}
        }
    }
    let mut gaps = Owed::new();
    for sf in findings {
        let f = &sf.finding;
        let (Some(at), Some(moved)) = (f.youngest_ms, f.missing_balance) else {
            continue;
        };
        if sf.check != completeness::NAME
            || f.code != "seq_gap"
            || !window.young(at)
            || sf.stream.0 != Table::Account
            || sf.stream.1 != Stream::Account
        {
            continue;
        }
        let currency = streams
            .get(&sf.stream)
            .and_then(|st| st.account.as_deref())
            .and_then(|a| a.currency.clone());
        if let Some(currency) = currency {
            owe(&mut gaps, &currency, i128::from(moved), at);
        }
    }
    Young {
        transfers,
        gaps,
        wrong_rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const WINDOW: Settle = Settle {
        now_ms: NOW,
        settle_ms: 600_000,
    };

    fn on(table: Table, stream: Stream, key: &str, f: Finding) -> StreamFinding {
        StreamFinding {
            check: "c",
            stream: (table, stream, key.to_owned()),
            finding: f,
        }
    }

    /// rev-s56-outputs 1, rev-s56-pending 3: a transfer owes its residual
    /// to delivery only while every finding on it is young: a decided one
    /// of a cross-stream check, or on its own stream (its terms changed, a
    /// row that fails its hash), takes it out; a decided wrong account row
    /// is kept for the legs. A young finding on another transfer's stream
    /// changes nothing.
    #[test]
    fn a_transfer_with_a_decided_finding_owes_nothing() {
        let young = || Finding::new("dangling", "t.a.1", String::new()).absence(NOW - 1_000);
        let per_transfer = vec![
            young(),
            Finding::new("dangling", "t.a.2", String::new()).absence(NOW - 1_000),
            Finding::new("dangling", "t.a.3", String::new()).absence(NOW - 1_000),
            Finding::new("hold_amount_mismatch", "t.a.3", String::new()),
            // Past its deadline and the window, its credit young: the
            // dangling is time's, not a wrong row (rev-s56-diff M1).
            Finding::new("phase_without_credit", "t.a.4", String::new()).absence(NOW - 1_000),
            Finding::new("dangling", "t.a.4", String::new()).absence(NOW - 3_600_000),
        ];
        let findings = vec![
            on(
                Table::Transfer,
                Stream::Transfer,
                "t.a.2",
                Finding::new("terms_changed", "t.a.2", String::new()).at(2, "transfer:t.a.2:2"),
            ),
            on(
                Table::Transfer,
                Stream::Transfer,
                "t.a.1",
                Finding::new("seq_gap", "t.a.1", String::new()).absence(NOW - 1_000),
            ),
            on(
                Table::Account,
                Stream::Account,
                "a.b",
                Finding::new("hash_mismatch", "a.b", String::new()).at(7, "account:a.b:7"),
            ),
            on(
                Table::Account,
                Stream::Account,
                "a.b",
                Finding::new("overdraft", "a.b", String::new()).at(8, "account:a.b:8"),
            ),
        ];
        let y = young_of(&findings, &per_transfer);
        assert_eq!(y.transfers.keys().collect::<Vec<_>>(), ["t.a.1", "t.a.4"]);
        assert_eq!(
            y.wrong_rows.into_iter().collect::<Vec<_>>(),
            [("a.b".to_owned(), 7)]
        );
    }

    fn young_of(findings: &[StreamFinding], per_transfer: &[Finding]) -> Young {
        young(findings, &FxMap::default(), &[per_transfer], WINDOW)
    }
}
