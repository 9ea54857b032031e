//! In-memory storage that commits transitions exactly as the Durable Objects
//! do: all of a transition or nothing, before the answer is returned. It is
//! the reference the unit tests and the deterministic simulation run the core
//! against; it has no role in production.

use std::collections::BTreeMap;

use crate::account::{
    self, AccountHeader, Command, Decision, Entry, Hold, OpRecord, Outcome, View,
};
use crate::Event;

/// One account's committed state: what an AccountDO keeps in SQLite.
#[derive(Debug, Clone, Default)]
pub struct MemAccount {
    pub header: Option<AccountHeader>,
    pub ops: BTreeMap<String, OpRecord>,
    pub holds: BTreeMap<String, Hold>,
    pub entries: Vec<Entry>,
    /// The outbox, never drained here: every event the account ever emitted.
    pub events: Vec<Event>,
}

impl MemAccount {
    /// Decides `cmd` against the stored rows, commits the transition if any
    /// and returns the decision (whose outcome is the answer).
    pub fn execute(&mut self, account_id: &str, cmd: &Command, now_ms: i64) -> Decision {
        self.execute_within(account_id, cmd, now_ms, crate::money::AMOUNT_MINOR_MAX)
    }

    /// [`MemAccount::execute`] under a lower amount limit for new deposits and withdrawals
    /// ([`account::decide_within`]).
    pub fn execute_within(
        &mut self,
        account_id: &str,
        cmd: &Command,
        now_ms: i64,
        amount_max: i64,
    ) -> Decision {
        let op_id = cmd.op_id();
        let view = View {
            header: self.header.as_ref(),
            op: op_id.as_ref().and_then(|k| self.ops.get(k)),
            hold: cmd.hold_key().and_then(|k| self.holds.get(k)),
            paired_op: cmd.paired_op_id().and_then(|k| self.ops.get(&k)),
        };
        let decision = account::decide_within(account_id, view, cmd, now_ms, amount_max);
        if let Decision::Commit(t) = &decision {
            let t = t.as_ref().clone();
            if let Some(h) = t.header {
                self.header = Some(h);
            }
            if let Some(h) = t.hold {
                self.holds.insert(h.transfer_id.clone(), h);
            }
            if let Some(e) = t.entry {
                self.entries.push(e);
            }
            if let Some(op) = t.op {
                let prev = self.ops.insert(op.op_id.clone(), op);
                assert!(prev.is_none(), "an op record is written once");
            }
            if let Some(ev) = t.event {
                self.events.push(ev);
            }
        }
        decision
    }

    /// [`MemAccount::execute`], returning only the answer.
    pub fn run(&mut self, account_id: &str, cmd: &Command, now_ms: i64) -> Outcome {
        self.execute(account_id, cmd, now_ms).outcome()
    }

    pub fn header(&self) -> &AccountHeader {
        self.header.as_ref().expect("account is open")
    }
}
