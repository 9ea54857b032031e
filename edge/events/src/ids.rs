//! Identifier rules shared by every component.
//!
//! Keys that clients choose (account ids, idempotency keys) are restricted to
//! `[A-Za-z0-9._-]{1,64}`. Identifiers the ledger derives from them append
//! `:`-separated parts (`t.acme.k1:debit`, `account:acc-1:7`), so a derived id can
//! never collide with another derived id or be forged from a client key, and
//! the canonical hash encoding (one `name=value` per line) needs no escaping.

/// Longest client-chosen key, in bytes.
pub const CLIENT_KEY_BYTES_MAX: usize = 64;
/// Longest derived identifier (stream keys, entry ids, transfer ids), in bytes.
pub const DERIVED_ID_BYTES_MAX: usize = 200;

/// Why an identifier was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    Empty,
    TooLong { len: usize, max: usize },
    BadChar { ch: char, at: usize },
}

impl std::fmt::Display for IdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdError::Empty => write!(f, "is empty"),
            IdError::TooLong { len, max } => {
                write!(f, "is {len} bytes long; at most {max} are allowed")
            }
            IdError::BadChar { ch, at } => write!(
                f,
                "has {ch:?} at byte {at}; only letters, digits, '.', '_' and '-' are allowed"
            ),
        }
    }
}

fn check(s: &str, max: usize, allow_colon: bool) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty);
    }
    if s.len() > max {
        return Err(IdError::TooLong { len: s.len(), max });
    }
    for (at, ch) in s.char_indices() {
        let ok = ch.is_ascii_alphanumeric()
            || matches!(ch, '.' | '_' | '-')
            || (allow_colon && ch == ':');
        if !ok {
            return Err(IdError::BadChar { ch, at });
        }
    }
    Ok(())
}

/// A key chosen by a client: account id, tenant id, idempotency key.
pub fn check_client_key(s: &str) -> Result<(), IdError> {
    check(s, CLIENT_KEY_BYTES_MAX, false)
}

/// An identifier the ledger derived (may contain `:` separators).
pub fn check_derived_id(s: &str) -> Result<(), IdError> {
    check(s, DERIVED_ID_BYTES_MAX, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_keys() {
        assert!(check_client_key("acc-1_A.b").is_ok());
        assert_eq!(check_client_key(""), Err(IdError::Empty));
        assert_eq!(
            check_client_key("a:b"),
            Err(IdError::BadChar { ch: ':', at: 1 })
        );
        assert_eq!(
            check_client_key("a\nb"),
            Err(IdError::BadChar { ch: '\n', at: 1 })
        );
        assert_eq!(
            check_client_key("é"),
            Err(IdError::BadChar { ch: 'é', at: 0 })
        );
        let long = "x".repeat(65);
        assert_eq!(
            check_client_key(&long),
            Err(IdError::TooLong { len: 65, max: 64 })
        );
        assert!(check_derived_id("t.acme.k1:debit").is_ok());
    }
}
