//! Tenant namespacing.
//!
//! Every object name, transfer id and entry id the API derives starts with the
//! tenant, so one tenant can never address another's objects: another
//! tenant's account simply does not exist under your names (`404`).
//!
//! Tenant ids are restricted to `[A-Za-z0-9_-]{1,32}` (no `.`), so the first
//! `.` of a name always ends the tenant and two tenants' names never collide.
//!
//! | what | name | rule |
//! |---|---|---|
//! | AccountDO name = account stream key | `{tenant}.{account_id}` | client key, ≤ 64 bytes |
//! | TransferDO name = transfer id | `t.{tenant}.{idempotency_key}` | derived id |
//! | deposit entry id (= its op id) | `dep:{tenant}.{account_id}:{key}` | derived id |
//! | withdrawal entry id | `wd:{tenant}.{account_id}:{key}` | derived id |
//!
//! Deposit and withdrawal entry ids include the account so that an entry id is
//! unique across the whole lake even when a client reuses one key on two
//! accounts (their operation records live in different objects). On one
//! account a key is one identity: a deposit and a withdrawal cannot share it
//! (the account object answers the second `idempotency_conflict`:
//! `ledger_core::account::Command::paired_op_id`), though their entry ids
//! differ in the prefix.

use ledger_core::account::{DEPOSIT_PREFIX, WITHDRAWAL_PREFIX};
use ledger_events::ids::{check_client_key, check_derived_id, IdError};

use crate::problem::ApiError;

pub const TENANT_BYTES_MAX: usize = 32;

pub fn check_tenant(t: &str) -> Result<(), String> {
    if t.is_empty() || t.len() > TENANT_BYTES_MAX {
        return Err(format!(
            "tenant {t:?} must be 1 to {TENANT_BYTES_MAX} bytes"
        ));
    }
    if !t
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "tenant {t:?} may contain only letters, digits, '_' and '-'"
        ));
    }
    Ok(())
}

fn bad(field: &'static str, why: IdError) -> ApiError {
    ApiError::BadId { field, why }
}

/// The AccountDO name and account stream key of a client's account id.
pub fn account_name(
    tenant: &str,
    account_id: &str,
    field: &'static str,
) -> Result<String, ApiError> {
    check_client_key(account_id).map_err(|w| bad(field, w))?;
    let name = format!("{tenant}.{account_id}");
    match check_client_key(&name) {
        Ok(()) => Ok(name),
        Err(IdError::TooLong { max, .. }) => Err(bad(
            field,
            IdError::TooLong {
                len: account_id.len(),
                max: max - tenant.len() - 1,
            },
        )),
        Err(w) => Err(bad(field, w)),
    }
}

/// The client's account id of an account name, if the name belongs to `tenant`.
pub fn account_id_of<'a>(tenant: &str, name: &'a str) -> Option<&'a str> {
    name.strip_prefix(tenant)?.strip_prefix('.')
}

/// Checks an `Idempotency-Key` header value.
pub fn idempotency_key(header: Option<&str>) -> Result<String, ApiError> {
    let k = header.ok_or(ApiError::MissingIdempotencyKey)?;
    check_client_key(k).map_err(|w| bad("Idempotency-Key", w))?;
    Ok(k.to_owned())
}

/// The transfer id (TransferDO name, transfer stream key) of a tenant's key.
pub fn transfer_id(tenant: &str, key: &str) -> Result<String, ApiError> {
    check_client_key(key).map_err(|w| bad("Idempotency-Key", w))?;
    let id = format!("t.{tenant}.{key}");
    check_derived_id(&id).map_err(|w| bad("Idempotency-Key", w))?;
    Ok(id)
}

/// The client's key of a transfer id, if it belongs to `tenant`.
pub fn transfer_key_of<'a>(tenant: &str, transfer_id: &'a str) -> Option<&'a str> {
    transfer_id
        .strip_prefix("t.")?
        .strip_prefix(tenant)?
        .strip_prefix('.')
}

/// Splits a transfer id `t.{tenant}.{key}` (as the sweeper and the admin re-drive receive it)
/// into its tenant and key; anything else is refused with the reason.
pub fn parse_transfer_id(id: &str) -> Result<(&str, &str), String> {
    check_derived_id(id).map_err(|w| format!("transfer id {id:?} {w}"))?;
    let rest = id
        .strip_prefix("t.")
        .ok_or_else(|| format!("transfer id {id:?} does not start with \"t.\""))?;
    let (tenant, key) = rest
        .split_once('.')
        .ok_or_else(|| format!("transfer id {id:?} is not t.{{tenant}}.{{key}}"))?;
    check_tenant(tenant)?;
    check_client_key(key).map_err(|w| format!("transfer id {id:?}: key {w}"))?;
    Ok((tenant, key))
}

pub fn deposit_entry_id(account_name: &str, key: &str) -> Result<String, ApiError> {
    check_client_key(key).map_err(|w| bad("Idempotency-Key", w))?;
    let id = format!("{DEPOSIT_PREFIX}{account_name}:{key}");
    check_derived_id(&id).map_err(|w| bad("Idempotency-Key", w))?;
    Ok(id)
}

pub fn withdrawal_entry_id(account_name: &str, key: &str) -> Result<String, ApiError> {
    check_client_key(key).map_err(|w| bad("Idempotency-Key", w))?;
    let id = format!("{WITHDRAWAL_PREFIX}{account_name}:{key}");
    check_derived_id(&id).map_err(|w| bad("Idempotency-Key", w))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_events::ids::check_client_key;

    #[test]
    fn names_are_namespaced_and_valid() {
        let a = account_name("acme", "acc-1", "id").unwrap();
        assert_eq!(a, "acme.acc-1");
        assert!(check_client_key(&a).is_ok());
        assert_eq!(account_id_of("acme", &a), Some("acc-1"));
        assert_eq!(account_id_of("acm", &a), None);
        assert_eq!(account_id_of("other", &a), None);
        let t = transfer_id("acme", "k1").unwrap();
        assert_eq!(t, "t.acme.k1");
        assert!(check_derived_id(&format!("{t}:reserve")).is_ok());
        assert_eq!(transfer_key_of("acme", &t), Some("k1"));
        assert_eq!(transfer_key_of("acm", &t), None);
        assert_eq!(parse_transfer_id(&t), Ok(("acme", "k1")));
        assert_eq!(parse_transfer_id("t.acme.k.2"), Ok(("acme", "k.2")));
        for bad in [
            "",
            "acme.k1",
            "t.acme",
            "t..k",
            "t.acme.",
            "t.acme.k:1",
            "t.a b.k",
        ] {
            assert!(parse_transfer_id(bad).is_err(), "{bad:?}");
        }
        assert_eq!(deposit_entry_id(&a, "k1").unwrap(), "dep:acme.acc-1:k1");
        assert_eq!(withdrawal_entry_id(&a, "k1").unwrap(), "wd:acme.acc-1:k1");
    }

    #[test]
    fn bad_ids_are_refused_with_the_field() {
        for bad in ["", "a:b", "a b", "é", "a/b"] {
            assert!(
                matches!(
                    account_name("acme", bad, "id"),
                    Err(ApiError::BadId { field: "id", .. })
                ),
                "{bad:?}"
            );
        }
        // 64 bytes is a valid client key but too long once namespaced.
        let long = "x".repeat(64);
        match account_name("acme", &long, "id") {
            Err(ApiError::BadId {
                why: IdError::TooLong { len: 64, max: 59 },
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            idempotency_key(None),
            Err(ApiError::MissingIdempotencyKey)
        ));
        assert!(matches!(
            idempotency_key(Some("a:b")),
            Err(ApiError::BadId {
                field: "Idempotency-Key",
                ..
            })
        ));
        assert_eq!(idempotency_key(Some("k-1")).unwrap(), "k-1");
    }

    #[test]
    fn tenant_rules_keep_names_unambiguous() {
        assert!(check_tenant("acme").is_ok());
        assert!(check_tenant("ac_me-2").is_ok());
        assert!(check_tenant("a.b").is_err());
        assert!(check_tenant("").is_err());
        assert!(check_tenant(&"x".repeat(33)).is_err());
    }
}
