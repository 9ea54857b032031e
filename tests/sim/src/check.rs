//! The auditor: invariants checked from the committed state and the events
//! alone, after every step and at the end of a run.

use std::collections::BTreeMap;

use ledger_core::account::HoldState;
use ledger_core::transfer::Phase;
use ledger_events::{ChainCursor, Stream};

use crate::model::HoldSt;
use crate::world::World;

/// Checked after every step: I2 on every account, the mid-saga form of I1
/// (every posted credit is matched by a live or captured hold of the same
/// amount on the source), and global conservation with money in flight. An
/// account nobody opened owns nothing: no header, entries, events or live
/// holds (release tombstones only), and it counts as 0 in the sums.
pub fn step_invariants(w: &World) -> Result<(), String> {
    for (id, a) in &w.accounts {
        let Some(h) = &a.header else {
            if w.models[id].opened {
                return Err(format!("{id}: not open, the model says it is"));
            }
            if !a.entries.is_empty() || !a.events.is_empty() {
                return Err(format!(
                    "{id}: not open, yet it has {} entries and {} events",
                    a.entries.len(),
                    a.events.len()
                ));
            }
            if let Some(x) = a
                .holds
                .values()
                .find(|x| x.state != HoldState::Released || x.amount != 0)
            {
                return Err(format!(
                    "{id}: not open, yet it has a hold other than a release tombstone: {x:?}"
                ));
            }
            continue;
        };
        if h.held < 0 || h.balance - h.held < -h.overdraft_limit {
            return Err(format!(
                "I2: {id} balance {} held {} limit {}",
                h.balance, h.held, h.overdraft_limit
            ));
        }
        let live: i64 = a
            .holds
            .values()
            .filter(|x| x.state == HoldState::Held)
            .map(|x| x.amount)
            .sum();
        if live != h.held {
            return Err(format!(
                "{id}: held {} but live holds sum to {live}",
                h.held
            ));
        }
    }
    // Per currency: Σ balances − credits not yet captured = deposits − withdrawals.
    let mut lhs: BTreeMap<&str, i128> = BTreeMap::new();
    let mut rhs: BTreeMap<&str, i128> = BTreeMap::new();
    for (id, a) in &w.accounts {
        let (Some(h), m) = (&a.header, &w.models[id]) else {
            continue;
        };
        *lhs.entry(m.currency.as_str()).or_default() += i128::from(h.balance);
        *rhs.entry(m.currency.as_str()).or_default() += m.deposited - m.withdrawn;
    }
    for (tid, c) in &w.transfers {
        let s = &c.t.spec;
        let Some(dest) = w.models.get(&s.destination) else {
            continue;
        };
        if !dest.accepted(&format!("{tid}:credit")) {
            continue;
        }
        let src = &w.models[&s.source];
        match src.holds.get(tid) {
            Some((a, HoldSt::Held)) if *a == i128::from(s.amount) => {
                *lhs.entry(dest.currency.as_str()).or_default() -= a;
            }
            Some((a, HoldSt::Captured)) if *a == i128::from(s.amount) => {}
            other => {
                return Err(format!(
                    "I1: {tid} credited {} but the source hold is {other:?}",
                    s.amount
                ))
            }
        }
    }
    if lhs != rhs {
        return Err(format!(
            "I1: balances net of in-flight credits {lhs:?} != deposits - withdrawals {rhs:?}"
        ));
    }
    Ok(())
}

/// Checked once the run is quiescent.
pub fn final_invariants(w: &World) -> Result<(), String> {
    step_invariants(w)?;
    for (tid, c) in &w.transfers {
        let s = &c.t.spec;
        if !c.t.is_terminal() {
            return Err(format!("I4: {tid} still {:?} after quiescence", c.t.phase));
        }
        let entries = |acct: &str, id: String| -> Vec<i64> {
            w.accounts
                .get(acct)
                .map(|a| {
                    a.entries
                        .iter()
                        .filter(|e| e.entry_id == id)
                        .map(|e| e.amount)
                        .collect()
                })
                .unwrap_or_default()
        };
        let debits = entries(&s.source, format!("{tid}:debit"));
        let credits = entries(&s.destination, format!("{tid}:credit"));
        let expected: (Vec<i64>, Vec<i64>) = match c.t.phase {
            Phase::Captured => (vec![-s.amount], vec![s.amount]),
            _ => (vec![], vec![]),
        };
        if (debits.clone(), credits.clone()) != expected {
            return Err(format!(
                "I1: {tid} {:?} has debits {debits:?} and credits {credits:?}",
                c.t.phase
            ));
        }
        let mut cursor = ChainCursor::genesis(Stream::Transfer, tid);
        for e in &c.events {
            e.validate()
                .map_err(|err| format!("{}: {err}", e.event_id))?;
            cursor.push(e).map_err(|err| err.to_string())?;
        }
        if cursor.last_seq != c.t.seq || cursor.last_hash != c.t.last_hash {
            return Err(format!(
                "{tid}: stream ends at {} but the transfer records {}",
                cursor.last_seq, c.t.seq
            ));
        }
    }
    for (id, a) in &w.accounts {
        if let Some(leak) = a.holds.values().find(|x| x.state == HoldState::Held) {
            return Err(format!(
                "leaked hold: {id} still holds {} for {}",
                leak.amount, leak.transfer_id
            ));
        }
        // The balance is a fold over the entries, and over the events (an
        // account nobody opened has neither: checked by step_invariants).
        let Some(h) = &a.header else { continue };
        let sum: i64 = a.entries.iter().map(|e| e.amount).sum();
        if sum != h.balance {
            return Err(format!(
                "{id}: entries sum to {sum}, balance is {}",
                h.balance
            ));
        }
        let mut cursor = ChainCursor::genesis(Stream::Account, id);
        for e in &a.events {
            e.validate()
                .map_err(|err| format!("{}: {err}", e.event_id))?;
            cursor.push(e).map_err(|err| err.to_string())?;
        }
        if a.events.last().and_then(|e| e.balance_after) != Some(h.balance)
            || cursor.last_seq != h.seq
        {
            return Err(format!(
                "{id}: the last event does not describe the committed header"
            ));
        }
    }
    Ok(())
}
