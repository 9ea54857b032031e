//! Idempotency records.
//!
//! Guarantee: an operation identity (an idempotency key, an entry id such as
//! `t.acme.k1:debit`, a hold's transfer id) executes at most once. The record
//! stores a fingerprint of the request's immutable fields next to the outcome,
//! committed in the same transaction as the effect. A later request with the
//! same identity and the same fingerprint gets the recorded outcome back; one
//! with another fingerprint is a typed conflict and executes nothing. Without
//! the fingerprint a retry carrying a different amount would be answered with
//! the first amount's result and the caller would believe the wrong thing.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// SHA-256 over the request's immutable fields, each length-prefixed so that
/// no two field lists encode alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    pub fn of(fields: &[&str]) -> Fingerprint {
        let mut h = Sha256::new();
        for f in fields {
            h.update((f.len() as u64).to_be_bytes());
            h.update(f.as_bytes());
        }
        Fingerprint(h.finalize().into())
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Option<Fingerprint> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Fingerprint(out))
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fingerprint, D::Error> {
        let s = String::deserialize(d)?;
        Fingerprint::from_hex(&s)
            .ok_or_else(|| serde::de::Error::custom("fingerprint must be 64 hex digits"))
    }
}

/// What to do with a request whose identity may have been seen before.
#[derive(Debug, PartialEq, Eq)]
pub enum Check<'a, R> {
    /// Never seen: execute it and store a record with this fingerprint.
    New,
    /// Seen with the same fingerprint: answer with the recorded result.
    Replay(&'a R),
    /// Seen with another fingerprint: refuse, execute nothing.
    Conflict,
}

/// Decides from the stored record (fingerprint and result), if any.
pub fn check<'a, R>(stored: Option<(&Fingerprint, &'a R)>, request: &Fingerprint) -> Check<'a, R> {
    match stored {
        None => Check::New,
        Some((fp, result)) if fp == request => Check::Replay(result),
        Some(_) => Check::Conflict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_fields_replay_other_fields_conflict() {
        let a = Fingerprint::of(&["transfer", "acc-1", "acc-2", "100", "USD"]);
        let b = Fingerprint::of(&["transfer", "acc-1", "acc-2", "101", "USD"]);
        let result = "recorded";
        assert_eq!(check::<&str>(None, &a), Check::New);
        assert_eq!(check(Some((&a, &result)), &a), Check::Replay(&result));
        assert_eq!(check(Some((&a, &result)), &b), Check::Conflict);
    }

    #[test]
    fn length_prefix_keeps_field_boundaries() {
        assert_ne!(Fingerprint::of(&["ab", "c"]), Fingerprint::of(&["a", "bc"]));
        let fp = Fingerprint::of(&["x"]);
        assert_eq!(Fingerprint::from_hex(&fp.to_hex()), Some(fp));
        assert_eq!(Fingerprint::from_hex("zz"), None);
    }
}
