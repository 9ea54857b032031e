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
/// (`per_transfer`: their findings), and per currency what the seq gaps of account streams whose
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
    // `dangling` of the same transfer made its created money pending).
    for f in per_transfer.iter().flat_map(|f| f.iter()) {
        if !f.youngest_ms.is_some_and(|at| window.young(at)) {
            transfers.remove(&f.key);
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
    Young { transfers, gaps }
}
