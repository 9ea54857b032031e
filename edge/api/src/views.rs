//! JSON shapes of successful answers. Money is an exact JSON integer (minor
//! units; serialised by serde_json from `i64`). Balances may exceed 2^53 in
//! principle; clients that parse JSON numbers as doubles must use an exact
//! integer parser for `balance`, `held` and `available`.

use ledger_core::account::{AccountHeader, Entry, Receipt, Status};
use ledger_core::transfer::Transfer;
use serde_json::{json, Value};

use crate::names::{account_id_of, transfer_key_of};

fn client_account<'a>(tenant: &str, name: &'a str) -> &'a str {
    account_id_of(tenant, name).unwrap_or(name)
}

pub fn status_str(s: Status) -> &'static str {
    match s {
        Status::Active => "active",
        Status::Frozen => "frozen",
    }
}

pub fn account(tenant: &str, h: &AccountHeader) -> Value {
    json!({
        "id": client_account(tenant, &h.id),
        "currency": h.currency.as_str(),
        "balance": h.balance,
        "held": h.held,
        "available": h.available(),
        "overdraft_limit": h.overdraft_limit,
        "status": status_str(h.status),
        "last_seq": h.seq,
        "opened_at_ms": h.opened_at_ms,
    })
}

/// The answer to a deposit or a withdrawal.
pub fn movement(
    tenant: &str,
    account_name: &str,
    entry_id: &str,
    amount: i64,
    r: &Receipt,
) -> Value {
    json!({
        "account": client_account(tenant, account_name),
        "entry_id": entry_id,
        "amount": amount,
        "balance": r.balance_after,
        "held": r.held_after,
        "available": r.balance_after - r.held_after,
        "seq": r.seq,
    })
}

pub fn entry(tenant: &str, e: &Entry) -> Value {
    json!({
        "entry_id": e.entry_id,
        "seq": e.seq,
        "amount": e.amount,
        "balance_after": e.balance_after,
        "transfer_id": e.transfer_id,
        "counterparty": e.counterparty.as_deref().map(|c| client_account(tenant, c)),
        "occurred_at_ms": e.occurred_at_ms,
    })
}

pub fn transfer(tenant: &str, t: &Transfer) -> Value {
    let s = &t.spec;
    json!({
        "key": transfer_key_of(tenant, &s.id).unwrap_or(&s.id),
        "transfer_id": s.id,
        "source": client_account(tenant, &s.source),
        "destination": client_account(tenant, &s.destination),
        "amount": s.amount,
        "currency": s.currency.as_str(),
        "phase": t.phase.as_str(),
        "terminal": t.is_terminal(),
        "reason": t.reason,
        "created_at_ms": t.created_at_ms,
        "deadline_ms": t.deadline_ms,
        "seq": t.seq,
        "attempt": t.attempt,
        "next_attempt_at_ms": (!t.is_terminal()).then_some(t.next_attempt_at_ms),
    })
}

/// The answer to opening an account (also to its replay): the state the `Open` receipt shows.
pub fn opened(
    tenant: &str,
    account_name: &str,
    currency: &str,
    overdraft_limit: i64,
    r: &Receipt,
) -> Value {
    json!({
        "id": client_account(tenant, account_name),
        "currency": currency,
        "overdraft_limit": overdraft_limit,
        "status": status_str(Status::Active),
        "balance": r.balance_after,
        "held": r.held_after,
        "available": r.balance_after - r.held_after,
        "last_seq": r.seq,
    })
}

/// One statement page of `limit` entries asked for: `next_after_seq` is the last seq when the
/// page is full (there may be more), null otherwise.
pub fn statement(tenant: &str, account_id: &str, entries: &[Entry], limit: u32) -> Value {
    let next = if entries.len() == limit as usize {
        entries.last().map(|e| e.seq)
    } else {
        None
    };
    json!({
        "account": account_id,
        "entries": entries.iter().map(|e| entry(tenant, e)).collect::<Vec<_>>(),
        "next_after_seq": next,
    })
}

/// The HTTP answer to a transfer: 200 when terminal (or when read), 202 with the `Location` to
/// poll when a create returns before the saga finished.
pub fn transfer_answer(tenant: &str, t: &Transfer, creating: bool) -> (u16, Value, Option<String>) {
    let v = transfer(tenant, t);
    if creating && !t.is_terminal() {
        let key = transfer_key_of(tenant, &t.spec.id).unwrap_or(&t.spec.id);
        return (202, v, Some(format!("/v1/transfers/{key}")));
    }
    (200, v, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_core::account::Command;
    use ledger_core::memory::MemAccount;
    use ledger_core::transfer::{admit, Admission, TransferSpec};
    use ledger_core::Currency;

    #[test]
    fn views_strip_the_tenant_and_keep_exact_integers() {
        let usd = Currency::parse("USD").unwrap();
        let mut m = MemAccount::default();
        m.run(
            "acme.a",
            &Command::Open {
                currency: usd,
                overdraft_limit: 0,
            },
            1,
        );
        m.run(
            "acme.a",
            &Command::Deposit {
                entry_id: "dep:acme.a:k".into(),
                amount: 9007199254740991,
                currency: usd,
            },
            2,
        );
        m.run(
            "acme.a",
            &Command::Deposit {
                entry_id: "dep:acme.a:k2".into(),
                amount: 9007199254740991,
                currency: usd,
            },
            3,
        );
        let v = account("acme", m.header());
        assert_eq!(v["id"], "acme.a".strip_prefix("acme.").unwrap());
        // 2 * (2^53 - 1) survives the JSON text exactly.
        let text = v.to_string();
        assert!(text.contains("\"balance\":18014398509481982"), "{text}");
        assert_eq!(v["status"], "active");
        assert_eq!(v["last_seq"], 3);
        let e = entry("acme", &m.entries[0]);
        assert_eq!(e["amount"], 9007199254740991i64);

        let spec = TransferSpec {
            id: "t.acme.k1".into(),
            source: "acme.a".into(),
            destination: "acme.b".into(),
            amount: 5,
            currency: usd,
        };
        let Admission::Start(t, _) = admit(None, spec, 10, 100) else {
            panic!()
        };
        let v = transfer("acme", &t);
        assert_eq!(
            (v["key"].as_str(), v["source"].as_str(), v["phase"].as_str()),
            (Some("k1"), Some("a"), Some("created"))
        );
        assert_eq!(v["terminal"], false);
        let (status, _, location) = transfer_answer("acme", &t, true);
        assert_eq!(
            (status, location.as_deref()),
            (202, Some("/v1/transfers/k1"))
        );
        assert_eq!(transfer_answer("acme", &t, false).0, 200);

        let page = statement("acme", "a", &m.entries, 2);
        assert_eq!(page["next_after_seq"], 3);
        assert_eq!(
            statement("acme", "a", &m.entries, 3)["next_after_seq"],
            Value::Null
        );
    }
}
