//! Request bodies and query strings → core commands, with specific errors.
//!
//! Bodies are parsed from the raw text with `serde_json` (never through JS
//! numbers), so an integer is seen exactly as sent. Rules:
//! - the body must be a JSON object of at most [`Limits::body_bytes_max`] bytes;
//! - every field has one JSON type; unknown fields are refused (a typo such as
//!   `ammount` must not silently fall back to a default);
//! - amounts are JSON integers (no fraction, no exponent, no string) in
//!   `1..=Limits::amount_max` minor units, the configured maximum applied to a
//!   new operation only, once its key is found unused ([`Limits::before_lookup`]);
//!   an overdraft limit is `0..=AMOUNT_MINOR_MAX` (the core's bound, not the
//!   configured maximum of one operation);
//! - currencies are active upper-case ISO 4217 codes;
//! - account ids are client keys (`[A-Za-z0-9._-]`), at most 64 bytes once
//!   namespaced as `{tenant}.{id}`.

use ledger_core::account::{AccountHeader, Command};
use ledger_core::money::AMOUNT_MINOR_MAX;
use ledger_core::transfer::TransferSpec;
use ledger_core::{Currency, Rejection};
use serde_json::{Map, Value};

use crate::names;
use crate::problem::ApiError;

/// Configurable request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest amount one request may move (≤ the core's `AMOUNT_MINOR_MAX`).
    pub amount_max: i64,
    pub body_bytes_max: usize,
    /// Largest statement page.
    pub page_max: u32,
}

pub const PAGE_DEFAULT: u32 = 50;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            amount_max: AMOUNT_MINOR_MAX,
            body_bytes_max: 16 * 1024,
            page_max: 200,
        }
    }
}

impl Limits {
    /// From optional configuration strings (Worker vars). A missing or empty value is the
    /// default; the amount maximum never exceeds the core's (a larger one is the core's). A
    /// value set but not a number in range is an error naming it: a misspelt limit
    /// (`"1e6"`, `"1,000,000"`, `"0"`) must not silently become no limit (rev-s56-edge L3).
    pub fn from_config(
        amount_max: Option<&str>,
        body_bytes_max: Option<&str>,
    ) -> Result<Limits, String> {
        let d = Limits::default();
        let amount_max = match amount_max.map(str::trim).filter(|v| !v.is_empty()) {
            None => d.amount_max,
            // Any whole number from 1 up, however large, is the core's maximum at most (one
            // past i64 as much as one past 2^53: rev-s56-diff L1).
            Some(v) => match v.parse::<u128>() {
                Ok(n) if n >= 1 => {
                    i64::try_from(n).map_or(AMOUNT_MINOR_MAX, |n| n.min(AMOUNT_MINOR_MAX))
                }
                _ => {
                    return Err(format!(
                        "AMOUNT_MAX {v:?} is not a whole number of minor units from 1 to \
                         {AMOUNT_MINOR_MAX}"
                    ))
                }
            },
        };
        let body_bytes_max = match body_bytes_max.map(str::trim).filter(|v| !v.is_empty()) {
            None => d.body_bytes_max,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n >= 64 => n,
                _ => {
                    return Err(format!(
                        "BODY_BYTES_MAX {v:?} is not a whole number of bytes, at least 64"
                    ))
                }
            },
        };
        Ok(Limits {
            amount_max,
            body_bytes_max,
            page_max: d.page_max,
        })
    }

    /// The limits a request is parsed against before its idempotency key is looked up: these,
    /// with the core's amount range in place of `amount_max`. The configured maximum applies to
    /// new operations only ([`Limits::check_new_amount`]): an account applies it to a deposit or
    /// withdrawal after looking up its key, the gateway to a transfer once its key is found
    /// unused. So lowering `AMOUNT_MAX` never turns the retry of a booked operation into a
    /// refusal. The body limit stays: a body is bounded before it is read, and a replay's
    /// body, like any, must be read to be compared with the record.
    pub fn before_lookup(&self) -> Limits {
        Limits {
            amount_max: AMOUNT_MINOR_MAX,
            ..*self
        }
    }

    /// Refuses a new operation's amount above `amount_max`, as the range check of a body does.
    pub fn check_new_amount(&self, amount: i64) -> Result<(), ApiError> {
        if amount > self.amount_max {
            return Err(amount_over_limit(amount, self.amount_max));
        }
        Ok(())
    }

    /// Refuses a body by its declared or actual length.
    pub fn check_body_len(&self, len: usize) -> Result<(), ApiError> {
        if len > self.body_bytes_max {
            return Err(ApiError::BodyTooLarge {
                limit: self.body_bytes_max,
            });
        }
        Ok(())
    }
}

/// The problem of an `amount` above the configured maximum, found after the key was looked up
/// (an account's [`Rejection::AmountOutOfRange`] for a new deposit or withdrawal, or a new
/// transfer's): the same as a body's own range check answers.
pub fn amount_over_limit(amount: i64, max: i64) -> ApiError {
    ApiError::AmountOutOfRange {
        field: "amount",
        amount: amount.to_string(),
        min: 1,
        max,
    }
}

/// A JSON object body whose fields are taken one by one; leftovers are errors.
struct Body(Map<String, Value>);

/// A JSON object's fields, each named once (a name twice is an error).
struct Unique(Map<String, Value>);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Unique, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Unique;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Unique, A::Error> {
                let mut m = Map::new();
                while let Some(k) = a.next_key::<String>()? {
                    if m.contains_key(&k) {
                        return Err(serde::de::Error::custom(format_args!(
                            "duplicate field `{k}`"
                        )));
                    }
                    // Each value's text as sent: serde_json reads the integer `-0` as the
                    // float -0.0, as it reads `-0.0`; the text tells them apart (the one is
                    // 0, the other a float, as `0.0` is).
                    let raw: Box<serde_json::value::RawValue> = a.next_value()?;
                    let v = if raw.get() == "-0" {
                        Value::from(0)
                    } else {
                        serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?
                    };
                    m.insert(k, v);
                }
                Ok(Unique(m))
            }
        }
        d.deserialize_map(Fields)
    }
}

impl Body {
    fn parse(text: &str, limits: &Limits) -> Result<Body, ApiError> {
        limits.check_body_len(text.len())?;
        let malformed = |e: serde_json::Error| ApiError::MalformedJson {
            detail: e.to_string(),
        };
        let v: Value = serde_json::from_str(text).map_err(malformed)?;
        if !v.is_object() {
            return Err(ApiError::NotAnObject);
        }
        // A field named twice is refused, not taken at its last value
        // (`{"amount":1,"amount":100000}`: which one the client meant is not
        // known; RFC 8259 leaves it to the reader, I-JSON forbids it).
        let Unique(m) = serde_json::from_str(text).map_err(malformed)?;
        Ok(Body(m))
    }

    fn take(&mut self, field: &'static str) -> Option<Value> {
        match self.0.remove(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    fn req(&mut self, field: &'static str) -> Result<Value, ApiError> {
        self.take(field).ok_or(ApiError::MissingField { field })
    }

    fn req_str(&mut self, field: &'static str) -> Result<String, ApiError> {
        match self.req(field)? {
            Value::String(s) => Ok(s),
            _ => Err(ApiError::WrongType {
                field,
                expected: "a string",
            }),
        }
    }

    fn currency(&mut self, field: &'static str) -> Result<Currency, ApiError> {
        let s = self.req_str(field)?;
        Currency::parse(&s).map_err(|_| ApiError::UnknownCurrency { field, found: s })
    }

    fn integer(v: Value, field: &'static str, min: i64, max: i64) -> Result<i64, ApiError> {
        let Value::Number(n) = v else {
            return Err(ApiError::WrongType {
                field,
                expected: "an integer number of minor units",
            });
        };
        let out_of_range = || ApiError::AmountOutOfRange {
            field,
            amount: n.to_string(),
            min,
            max,
        };
        // The integer `-0` is 0 here ([`Unique`] reads it from its text), judged by the range:
        // an amount's `-0` is out of range, not of the wrong type.
        if let Some(i) = n.as_i64() {
            if i < min || i > max {
                return Err(out_of_range());
            }
            return Ok(i);
        }
        if n.is_u64() {
            // Above i64::MAX: an integer, just far too large.
            return Err(out_of_range());
        }
        if n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0 && f.abs() >= 9.2e18)
        {
            // Beyond u64 serde_json keeps only a double: a whole number far outside i64 is out
            // of range, not of the wrong type.
            return Err(out_of_range());
        }
        // A float: 1.5, 1e3, 100.0. Amounts are integers; never round.
        Err(ApiError::WrongType {
            field,
            expected: "an integer number of minor units (no fraction or exponent)",
        })
    }

    fn amount(&mut self, field: &'static str, limits: &Limits) -> Result<i64, ApiError> {
        let v = self.req(field)?;
        Body::integer(v, field, 1, limits.amount_max)
    }

    fn done(self) -> Result<(), ApiError> {
        match self.0.into_iter().next() {
            Some((field, _)) => Err(ApiError::UnknownField { field }),
            None => Ok(()),
        }
    }
}

/// The refusal of an open that would make a *new* account in a code ISO 4217 withdrew (BGN,
/// ANG: rev-s56-edge L4), `None` for any other. The gateway asks only when no account of that
/// name exists: one already opened in such a code keeps working, so that it can be wound down,
/// and the repeat of its open still answers it.
pub fn withdrawn_for_new(cmd: &Command) -> Option<ApiError> {
    match cmd {
        Command::Open { currency, .. } if currency.is_withdrawn() => {
            Some(ApiError::UnknownCurrency {
                field: "currency",
                found: currency.as_str().to_owned(),
            })
        }
        _ => None,
    }
}

/// `POST /v1/accounts {id, currency, overdraft_limit?}` → (account name, `Open`).
pub fn open_account(
    tenant: &str,
    text: &str,
    limits: &Limits,
) -> Result<(String, Command), ApiError> {
    let mut b = Body::parse(text, limits)?;
    let id = b.req_str("id")?;
    let currency = b.currency("currency")?;
    let overdraft_limit = match b.take("overdraft_limit") {
        None => 0,
        Some(v) => Body::integer(v, "overdraft_limit", 0, AMOUNT_MINOR_MAX)?,
    };
    b.done()?;
    let name = names::account_name(tenant, &id, "id")?;
    Ok((
        name,
        Command::Open {
            currency,
            overdraft_limit,
        },
    ))
}

/// Which way external money moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    Deposit,
    Withdrawal,
}

/// `POST /v1/accounts/{id}/deposits|withdrawals {amount, currency}` with its
/// `Idempotency-Key` → the account command (its entry id is the op id).
pub fn movement(
    kind: Movement,
    account_name: &str,
    idempotency_key: Option<&str>,
    text: &str,
    limits: &Limits,
) -> Result<Command, ApiError> {
    let mut b = Body::parse(text, limits)?;
    let amount = b.amount("amount", limits)?;
    let currency = b.currency("currency")?;
    b.done()?;
    let key = names::idempotency_key(idempotency_key)?;
    Ok(match kind {
        Movement::Deposit => Command::Deposit {
            entry_id: names::deposit_entry_id(account_name, &key)?,
            amount,
            currency,
        },
        Movement::Withdrawal => Command::Withdraw {
            entry_id: names::withdrawal_entry_id(account_name, &key)?,
            amount,
            currency,
        },
    })
}

/// `POST /v1/transfers {source, destination, amount, currency}` with its
/// `Idempotency-Key` → the transfer spec (ids namespaced).
pub fn transfer(
    tenant: &str,
    idempotency_key: Option<&str>,
    text: &str,
    limits: &Limits,
) -> Result<TransferSpec, ApiError> {
    let mut b = Body::parse(text, limits)?;
    let source = b.req_str("source")?;
    let destination = b.req_str("destination")?;
    let amount = b.amount("amount", limits)?;
    let currency = b.currency("currency")?;
    b.done()?;
    let key = names::idempotency_key(idempotency_key)?;
    let source = names::account_name(tenant, &source, "source")?;
    let destination = names::account_name(tenant, &destination, "destination")?;
    if source == destination {
        return Err(ApiError::SameAccount);
    }
    Ok(TransferSpec {
        id: names::transfer_id(tenant, &key)?,
        source,
        destination,
        amount,
        currency,
    })
}

/// A parsed transfer against the headers of its two accounts, as the gateway read them just
/// before admitting it (`None`: nobody opened it): an account not open, or holding another
/// currency, is refused with its side named. The saga would refuse the same transfer at its
/// first step at that account, but only after creating the transfer and, under the mistyped
/// name, an object that records the refusal; refused here, nothing is created and the key
/// stays unused. The source is judged first, as the saga reaches it first.
///
/// What passes here cannot fail that way later: an account is never deleted and never changes
/// currency. Its status and funds can change, and are the saga's to judge.
pub fn transfer_accounts(
    tenant: &str,
    spec: &TransferSpec,
    source: Option<&AccountHeader>,
    destination: Option<&AccountHeader>,
) -> Result<(), ApiError> {
    for (field, name, header) in [
        ("source", &spec.source, source),
        ("destination", &spec.destination, destination),
    ] {
        let rejection = match header {
            None => Rejection::UnknownAccount,
            Some(h) if h.currency != spec.currency => Rejection::CurrencyMismatch {
                account: h.currency,
                requested: spec.currency,
            },
            Some(_) => continue,
        };
        return Err(ApiError::TransferAccount {
            field,
            account: names::account_id_of(tenant, name)
                .unwrap_or(name)
                .to_owned(),
            rejection,
        });
    }
    Ok(())
}

/// `?after_seq=&limit=` of a statement page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub after_seq: u64,
    pub limit: u32,
}

pub fn page(query: Option<&str>, limits: &Limits) -> Result<Page, ApiError> {
    let mut p = Page {
        after_seq: 0,
        limit: PAGE_DEFAULT.min(limits.page_max),
    };
    for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "after_seq" => {
                p.after_seq =
                    v.parse::<u64>()
                        .ok()
                        .filter(|s| *s < 1 << 53)
                        .ok_or(ApiError::BadQuery {
                            param: "after_seq",
                            detail: format!("is {v:?}; it must be an integer >= 0"),
                        })?
            }
            "limit" => {
                p.limit = v
                    .parse::<u32>()
                    .ok()
                    .filter(|l| (1..=limits.page_max).contains(l))
                    .ok_or(ApiError::BadQuery {
                        param: "limit",
                        detail: format!(
                            "is {v:?}; it must be an integer from 1 to {}",
                            limits.page_max
                        ),
                    })?
            }
            _ => {}
        }
    }
    Ok(p)
}

/// `POST /v1/admin/transfers/redrive {"transfer_ids": ["t.{tenant}.{key}", ...]}` → the ids,
/// at most [`crate::sweep::SWEEP_MAX_PER_RUN`], duplicates removed (first position wins).
pub fn redrive(text: &str, limits: &Limits) -> Result<Vec<String>, ApiError> {
    const FIELD: &str = "transfer_ids";
    let mut b = Body::parse(text, limits)?;
    let wrong = || ApiError::WrongType {
        field: FIELD,
        expected: "an array of transfer ids t.{tenant}.{key}",
    };
    let Value::Array(items) = b.req(FIELD)? else {
        return Err(wrong());
    };
    b.done()?;
    let max = crate::sweep::SWEEP_MAX_PER_RUN;
    if items.len() > max {
        return Err(ApiError::TooManyItems {
            field: FIELD,
            count: items.len(),
            max,
        });
    }
    let mut ids: Vec<String> = Vec::with_capacity(items.len());
    for v in items {
        let Value::String(id) = v else {
            return Err(wrong());
        };
        names::parse_transfer_id(&id).map_err(|_| wrong())?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Largest count a fault can be armed with.
pub const FAULT_COUNT_MAX: u64 = 1_000_000;

/// Longest wait the `delay_commands_ms` fault can make a saga step take: long enough to outlast
/// any drive budget (30 s is the largest transfer wait), short enough that a test left with
/// it armed still finishes.
pub const FAULT_DELAY_MS_MAX: u64 = 60_000;

/// `POST /v1/admin/accounts/{name}/faults {"fail_sends"?, "fail_commands"?,
/// "fail_after_write"?, "fail_after_commit"?, "delay_commands_ms"?, "drop_alarm"?,
/// "corrupt_header"?}` (test fault injection) → the body to forward to the account: each count
/// an integer in 0..=[`FAULT_COUNT_MAX`], the delay an integer number of ms in
/// 0..=[`FAULT_DELAY_MS_MAX`], `drop_alarm` and `corrupt_header` booleans. An unknown field is an
/// error: a misspelt fault must not be left unarmed without a word.
pub fn faults(text: &str, limits: &Limits) -> Result<String, ApiError> {
    let mut b = Body::parse(text, limits)?;
    let mut out = Map::new();
    for field in [
        "fail_sends",
        "fail_commands",
        "fail_after_write",
        "fail_after_commit",
    ] {
        fault_count(&mut b, &mut out, field)?;
    }
    if let Some(v) = b.take("delay_commands_ms") {
        let ms = v
            .as_u64()
            .filter(|ms| *ms <= FAULT_DELAY_MS_MAX)
            .ok_or(ApiError::WrongType {
                field: "delay_commands_ms",
                expected: "an integer number of milliseconds from 0 to 60000",
            })?;
        out.insert("delay_commands_ms".to_owned(), ms.into());
    }
    for field in ["drop_alarm", "corrupt_header"] {
        if let Some(v) = b.take(field) {
            let on = v.as_bool().ok_or(ApiError::WrongType {
                field,
                expected: "a boolean",
            })?;
            out.insert(field.to_owned(), on.into());
        }
    }
    b.done()?;
    Ok(Value::Object(out).to_string())
}

/// `POST /v1/admin/transfers/{id}/faults {"fail_sends"?}` (test fault injection) → the body to
/// forward to the transfer: the count an integer in 0..=[`FAULT_COUNT_MAX`]. A transfer's object
/// sends to the queue and calls accounts, nothing else: the accounts' other faults are not its
/// to honour, and are refused as unknown fields rather than accepted and left unarmed.
pub fn transfer_faults(text: &str, limits: &Limits) -> Result<String, ApiError> {
    let mut b = Body::parse(text, limits)?;
    let mut out = Map::new();
    fault_count(&mut b, &mut out, "fail_sends")?;
    b.done()?;
    Ok(Value::Object(out).to_string())
}

/// A fault's count, when `field` is given, into `out`.
fn fault_count(
    b: &mut Body,
    out: &mut Map<String, Value>,
    field: &'static str,
) -> Result<(), ApiError> {
    if let Some(v) = b.take(field) {
        let n = v
            .as_u64()
            .filter(|n| *n <= FAULT_COUNT_MAX)
            .ok_or(ApiError::WrongType {
                field,
                expected: "an integer count from 0 to 1000000",
            })?;
        out.insert(field.to_owned(), n.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_core::Rejection;

    #[test]
    fn faults_take_known_counts_only() {
        let body = faults(
            r#"{"fail_sends": 2, "fail_after_write": 0, "fail_after_commit": 1}"#,
            &l(),
        )
        .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"fail_sends": 2, "fail_after_write": 0, "fail_after_commit": 1})
        );
        assert_eq!(faults("{}", &l()).unwrap(), "{}");
        assert_eq!(
            faults(r#"{"fail_send": 1}"#, &l()),
            Err(ApiError::UnknownField {
                field: "fail_send".into()
            })
        );
        for bad in ["-1", "1.5", "\"3\"", "1000001", "true"] {
            assert!(
                matches!(
                    faults(&format!(r#"{{"fail_commands": {bad}}}"#), &l()),
                    Err(ApiError::WrongType {
                        field: "fail_commands",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            faults("fail", &l()),
            Err(ApiError::MalformedJson { .. })
        ));
        assert_eq!(faults("[]", &l()), Err(ApiError::NotAnObject));
    }

    #[test]
    fn faults_take_a_bounded_delay_and_a_boolean_drop_alarm() {
        let body = faults(r#"{"delay_commands_ms": 3000, "drop_alarm": true}"#, &l()).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"delay_commands_ms": 3000, "drop_alarm": true})
        );
        for bad in ["-1", "1.5", "\"3\"", "60001", "true"] {
            assert!(
                matches!(
                    faults(&format!(r#"{{"delay_commands_ms": {bad}}}"#), &l()),
                    Err(ApiError::WrongType {
                        field: "delay_commands_ms",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        for bad in ["1", "\"true\""] {
            for field in ["drop_alarm", "corrupt_header"] {
                assert_eq!(
                    faults(&format!(r#"{{"{field}": {bad}}}"#), &l()),
                    Err(ApiError::WrongType {
                        field,
                        expected: "a boolean",
                    }),
                    "{field} {bad}"
                );
            }
        }
        assert_eq!(
            faults(r#"{"corrupt_header": true}"#, &l()).unwrap(),
            r#"{"corrupt_header":true}"#
        );
    }

    #[test]
    fn transfer_faults_take_fail_sends_only() {
        assert_eq!(
            transfer_faults(r#"{"fail_sends": 2}"#, &l()).unwrap(),
            r#"{"fail_sends":2}"#
        );
        assert_eq!(transfer_faults("{}", &l()).unwrap(), "{}");
        // An account's fault, which a transfer's object has nothing to apply to, is refused.
        for field in [
            "fail_commands",
            "fail_after_write",
            "fail_after_commit",
            "delay_commands_ms",
            "drop_alarm",
            "corrupt_header",
        ] {
            assert_eq!(
                transfer_faults(&format!(r#"{{"fail_sends": 1, "{field}": 1}}"#), &l()),
                Err(ApiError::UnknownField {
                    field: field.into()
                }),
                "{field}"
            );
        }
        for bad in ["-1", "1.5", "\"3\"", "1000001", "true"] {
            assert!(
                matches!(
                    transfer_faults(&format!(r#"{{"fail_sends": {bad}}}"#), &l()),
                    Err(ApiError::WrongType {
                        field: "fail_sends",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        assert_eq!(transfer_faults("[]", &l()), Err(ApiError::NotAnObject));
    }

    #[test]
    fn a_field_named_twice_is_refused_not_taken_at_its_last_value() {
        let twice = r#"{"amount": 1, "currency": "USD", "amount": 100000}"#;
        let deposit = |text: &str| movement(Movement::Deposit, "acme.a", Some("k1"), text, &l());
        match deposit(twice) {
            Err(ApiError::MalformedJson { detail }) => {
                assert!(detail.contains("duplicate field `amount`"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        assert!(deposit(r#"{"amount": 1, "currency": "USD"}"#).is_ok());
    }

    fn l() -> Limits {
        Limits::default()
    }

    fn usd() -> Currency {
        Currency::parse("USD").unwrap()
    }

    #[test]
    fn open_account_happy_and_defaults() {
        let (name, cmd) = open_account("acme", r#"{"id":"acc-1","currency":"USD"}"#, &l()).unwrap();
        assert_eq!(name, "acme.acc-1");
        assert_eq!(
            cmd,
            Command::Open {
                currency: usd(),
                overdraft_limit: 0
            }
        );
        let (_, cmd) = open_account(
            "acme",
            r#"{"id":"a","currency":"EUR","overdraft_limit":500}"#,
            &l(),
        )
        .unwrap();
        assert!(matches!(
            cmd,
            Command::Open {
                overdraft_limit: 500,
                ..
            }
        ));
    }

    #[test]
    fn each_bad_input_class_has_its_error() {
        let t = |body: &str| open_account("acme", body, &l()).unwrap_err().code();
        assert_eq!(t("{not json"), "malformed_json");
        assert_eq!(t(""), "malformed_json");
        assert_eq!(t("[1]"), "not_an_object");
        assert_eq!(t(r#"{"currency":"USD"}"#), "missing_field");
        assert_eq!(t(r#"{"id":null,"currency":"USD"}"#), "missing_field");
        assert_eq!(t(r#"{"id":5,"currency":"USD"}"#), "wrong_type");
        assert_eq!(t(r#"{"id":"a","currency":"usd"}"#), "unknown_currency");
        assert_eq!(t(r#"{"id":"a","currency":"XXX"}"#), "unknown_currency");
        assert_eq!(t(r#"{"id":"a b","currency":"USD"}"#), "bad_id");
        assert_eq!(
            t(r#"{"id":"a","currency":"USD","extra":1}"#),
            "unknown_field"
        );
        assert_eq!(
            t(r#"{"id":"a","currency":"USD","overdraft_limit":-1}"#),
            "amount_out_of_range"
        );
        assert_eq!(
            t(r#"{"id":"a","currency":"USD","overdraft_limit":"5"}"#),
            "wrong_type"
        );
        assert_eq!(
            t(r#"{"id":"a","currency":"USD","overdraft_limit":0.0}"#),
            "wrong_type"
        );
        // A withdrawn code parses (an existing account's open repeats), and is refused for a
        // new account (rev-s56-edge L4).
        for code in ["BGN", "ANG"] {
            let body = format!(r#"{{"id":"a","currency":"{code}"}}"#);
            let (_, cmd) = open_account("acme", &body, &l()).unwrap();
            let e = withdrawn_for_new(&cmd).expect("refused for a new account");
            assert_eq!(e.code(), "unknown_currency");
        }
        let (_, usd) = open_account("acme", r#"{"id":"a","currency":"USD"}"#, &l()).unwrap();
        assert!(withdrawn_for_new(&usd).is_none());
        // `-0` is the integer 0 (serde_json reads it as -0.0, the body's text tells): a valid
        // limit; `-0.0` and `-0e3` are floats, as `0.0` is (rev-s56-diff L2).
        for float in ["-0.0", "-0e3", "-0.000"] {
            let body = format!(r#"{{"id":"a","currency":"USD","overdraft_limit":{float}}}"#);
            assert_eq!(t(&body), "wrong_type", "{float}");
        }
        assert!(matches!(
            open_account(
                "acme",
                r#"{"id":"a","currency":"USD","overdraft_limit":-0}"#,
                &l()
            ),
            Ok((
                _,
                Command::Open {
                    overdraft_limit: 0,
                    ..
                }
            ))
        ));

        let m = |body: &str, key: Option<&str>| {
            movement(Movement::Deposit, "acme.a", key, body, &l())
                .unwrap_err()
                .code()
        };
        let k = Some("k1");
        assert_eq!(
            m(r#"{"amount":0,"currency":"USD"}"#, k),
            "amount_out_of_range"
        );
        assert_eq!(
            m(r#"{"amount":-5,"currency":"USD"}"#, k),
            "amount_out_of_range"
        );
        assert_eq!(
            m(r#"{"amount":-0,"currency":"USD"}"#, k),
            "amount_out_of_range"
        );
        // An account in a withdrawn code keeps taking deposits (wound down, replays kept).
        assert!(movement(
            Movement::Deposit,
            "acme.a",
            k,
            r#"{"amount":5,"currency":"BGN"}"#,
            &l()
        )
        .is_ok());
        assert_eq!(
            m(r#"{"amount":9007199254740992,"currency":"USD"}"#, k),
            "amount_out_of_range"
        );
        assert_eq!(
            m(r#"{"amount":18446744073709551615,"currency":"USD"}"#, k),
            "amount_out_of_range"
        );
        assert_eq!(m(r#"{"amount":1.5,"currency":"USD"}"#, k), "wrong_type");
        assert_eq!(m(r#"{"amount":1e3,"currency":"USD"}"#, k), "wrong_type");
        assert_eq!(m(r#"{"amount":"100","currency":"USD"}"#, k), "wrong_type");
        assert_eq!(m(r#"{"amount":100}"#, k), "missing_field");
        assert_eq!(
            m(r#"{"amount":100,"currency":"USD"}"#, None),
            "missing_idempotency_key"
        );
        assert_eq!(
            m(r#"{"amount":100,"currency":"USD"}"#, Some("a:b")),
            "bad_id"
        );
        let big = format!(
            r#"{{"amount":1,"currency":"USD","pad":"{}"}}"#,
            "x".repeat(20_000)
        );
        assert_eq!(m(&big, k), "body_too_large");
    }

    #[test]
    fn amount_max_is_configurable_but_never_above_the_core() {
        let lim = Limits::from_config(Some("1000"), None).unwrap();
        assert_eq!(lim.amount_max, 1000);
        let e = movement(
            Movement::Withdrawal,
            "acme.a",
            Some("k"),
            r#"{"amount":1001,"currency":"USD"}"#,
            &lim,
        )
        .unwrap_err();
        assert_eq!(e.code(), "amount_out_of_range");
        assert_eq!(e.problem().body["max"], serde_json::json!(1000));
        assert_eq!(
            Limits::from_config(Some("99999999999999999"), None)
                .unwrap()
                .amount_max,
            AMOUNT_MINOR_MAX
        );
        assert_eq!(
            Limits::from_config(Some("99999999999999999999999"), None)
                .unwrap()
                .amount_max,
            AMOUNT_MINOR_MAX
        );
        assert_eq!(
            Limits::from_config(Some(" "), None),
            Ok(Limits::default()),
            "empty is unset"
        );
        // Set but not a limit: an error naming it, never no limit.
        for bad in ["junk", "1e6", "1,000,000", "0", "-5", "1000.00"] {
            let e = Limits::from_config(Some(bad), None).unwrap_err();
            assert!(e.starts_with(&format!("AMOUNT_MAX {bad:?}")), "{e}");
        }
        let e = Limits::from_config(Some("1000"), Some("1")).unwrap_err();
        assert!(e.starts_with("BODY_BYTES_MAX \"1\""), "{e}");
        let ok = movement(
            Movement::Withdrawal,
            "acme.a",
            Some("k"),
            r#"{"amount":1000,"currency":"USD"}"#,
            &lim,
        )
        .unwrap();
        assert_eq!(
            ok,
            Command::Withdraw {
                entry_id: "wd:acme.a:k".into(),
                amount: 1000,
                currency: usd()
            }
        );
    }

    #[test]
    fn max_amount_is_exact() {
        let c = movement(
            Movement::Deposit,
            "acme.a",
            Some("k"),
            r#"{"amount":9007199254740991,"currency":"USD"}"#,
            &l(),
        )
        .unwrap();
        assert!(matches!(
            c,
            Command::Deposit {
                amount: 9007199254740991,
                ..
            }
        ));
    }

    #[test]
    fn transfers() {
        let s = transfer(
            "acme",
            Some("k1"),
            r#"{"source":"a","destination":"b","amount":25,"currency":"USD"}"#,
            &l(),
        )
        .unwrap();
        assert_eq!(
            s,
            TransferSpec {
                id: "t.acme.k1".into(),
                source: "acme.a".into(),
                destination: "acme.b".into(),
                amount: 25,
                currency: usd()
            }
        );
        assert_eq!(s.validate(), Ok(()));
        let e = |body: &str| transfer("acme", Some("k1"), body, &l()).unwrap_err().code();
        assert_eq!(
            e(r#"{"source":"a","destination":"a","amount":25,"currency":"USD"}"#),
            "same_account"
        );
        assert_eq!(
            e(r#"{"source":"a","destination":"b:c","amount":25,"currency":"USD"}"#),
            "bad_id"
        );
        assert_eq!(
            e(r#"{"destination":"b","amount":25,"currency":"USD"}"#),
            "missing_field"
        );
        assert_eq!(
            e(r#"{"source":"a","destination":"b","amount":0,"currency":"USD"}"#),
            "amount_out_of_range"
        );
        // The core agrees with the API's own checks.
        assert_eq!(
            ApiError::from(Rejection::SameAccount).code(),
            "same_account"
        );
    }

    #[test]
    fn a_transfer_names_open_accounts_in_its_currency_or_is_refused_by_side() {
        let header = |id: &str, currency: &str| AccountHeader {
            id: id.into(),
            currency: Currency::parse(currency).unwrap(),
            overdraft_limit: 0,
            status: ledger_core::account::Status::Frozen,
            balance: 0,
            held: 0,
            seq: 1,
            last_hash: String::new(),
            opened_at_ms: 0,
        };
        let spec = transfer(
            "acme",
            Some("k1"),
            r#"{"source":"a","destination":"b","amount":25,"currency":"USD"}"#,
            &l(),
        )
        .unwrap();
        let (a, b) = (header("acme.a", "USD"), header("acme.b", "USD"));
        // Frozen, no funds: the saga's to judge, not a refusal here.
        assert_eq!(transfer_accounts("acme", &spec, Some(&a), Some(&b)), Ok(()));
        let refused = |s: Option<&AccountHeader>, d: Option<&AccountHeader>| {
            let e = transfer_accounts("acme", &spec, s, d).unwrap_err();
            let p = e.problem();
            (
                p.status,
                p.code().to_owned(),
                p.body["field"].clone(),
                p.body["detail"].clone(),
            )
        };
        let (status, code, field, detail) = refused(None, Some(&b));
        assert_eq!(
            (status, code.as_str(), field),
            (404, "unknown_account", "source".into())
        );
        assert!(
            detail
                .as_str()
                .unwrap()
                .contains("the source account a is not open"),
            "{detail}"
        );
        let (status, code, field, _) = refused(Some(&a), None);
        assert_eq!(
            (status, code.as_str(), field),
            (404, "unknown_account", "destination".into())
        );
        // Both wrong: the source first, as the saga would reach it first.
        assert_eq!(refused(None, None).2, "source");
        let eur = header("acme.b", "EUR");
        let e = transfer_accounts("acme", &spec, Some(&a), Some(&eur)).unwrap_err();
        let p = e.problem();
        assert_eq!((p.status, p.code()), (422, "currency_mismatch"));
        assert_eq!(
            (
                &p.body["field"],
                &p.body["account_currency"],
                &p.body["requested_currency"]
            ),
            (&"destination".into(), &"EUR".into(), &"USD".into())
        );
        assert_eq!(
            refused(Some(&header("acme.a", "EUR")), None).2,
            "source",
            "the source's currency before the destination's existence"
        );
    }

    #[test]
    fn the_configured_amount_maximum_waits_for_the_key_lookup() {
        let lim = Limits::from_config(Some("1000"), None).unwrap();
        let body = r#"{"amount":5000,"currency":"USD"}"#;
        // Parsed for the lookup, 5000 passes; judged as new, it is the body check's problem.
        let early = movement(Movement::Deposit, "acme.a", Some("k"), body, &lim).unwrap_err();
        let cmd = movement(
            Movement::Deposit,
            "acme.a",
            Some("k"),
            body,
            &lim.before_lookup(),
        )
        .unwrap();
        assert!(matches!(cmd, Command::Deposit { amount: 5000, .. }));
        assert_eq!(lim.check_new_amount(5000), Err(early.clone()));
        assert_eq!(amount_over_limit(5000, 1000), early);
        assert_eq!(lim.check_new_amount(1000), Ok(()));
        // Still refused before the lookup: what is out of range under any configuration.
        let zero = r#"{"amount":0,"currency":"USD"}"#;
        let huge = r#"{"amount":9007199254740992,"currency":"USD"}"#;
        for b in [zero, huge] {
            let e = movement(
                Movement::Deposit,
                "acme.a",
                Some("k"),
                b,
                &lim.before_lookup(),
            );
            assert_eq!(e.unwrap_err().code(), "amount_out_of_range", "{b}");
        }
        assert_eq!(lim.before_lookup().body_bytes_max, lim.body_bytes_max);
    }

    #[test]
    fn pages() {
        assert_eq!(
            page(None, &l()).unwrap(),
            Page {
                after_seq: 0,
                limit: 50
            }
        );
        assert_eq!(
            page(Some("after_seq=7&limit=3&x=y"), &l()).unwrap(),
            Page {
                after_seq: 7,
                limit: 3
            }
        );
        for q in [
            "limit=0",
            "limit=201",
            "limit=x",
            "after_seq=-1",
            "after_seq=",
        ] {
            assert_eq!(page(Some(q), &l()).unwrap_err().code(), "bad_query", "{q}");
        }
    }

    #[test]
    fn redrive_lists() {
        let ids = redrive(
            r#"{"transfer_ids":["t.acme.k1","t.acme.k1","t.b.k.2"]}"#,
            &l(),
        )
        .unwrap();
        assert_eq!(ids, vec!["t.acme.k1", "t.b.k.2"]);
        let code = |t: &str| redrive(t, &l()).unwrap_err().code();
        assert_eq!(code("{}"), "missing_field");
        assert_eq!(code(r#"{"transfer_ids":"t.acme.k1"}"#), "wrong_type");
        assert_eq!(code(r#"{"transfer_ids":[1]}"#), "wrong_type");
        assert_eq!(code(r#"{"transfer_ids":["acme.k1"]}"#), "wrong_type");
        assert_eq!(code(r#"{"transfer_ids":[],"x":1}"#), "unknown_field");
        let many: Vec<String> = (0..101).map(|i| format!("t.a.k{i}")).collect();
        let body = serde_json::json!({ "transfer_ids": many }).to_string();
        assert_eq!(code(&body), "too_many_items");
        assert_eq!(
            redrive(r#"{"transfer_ids":[]}"#, &l()).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn integers_beyond_u64_are_out_of_range_not_wrong_type() {
        let code = |a: &str| {
            movement(
                Movement::Deposit,
                "acme.a",
                Some("k"),
                &format!(r#"{{"amount":{a},"currency":"USD"}}"#),
                &l(),
            )
            .unwrap_err()
            .code()
        };
        assert_eq!(code("99999999999999999999"), "amount_out_of_range");
        assert_eq!(code("-99999999999999999999"), "amount_out_of_range");
        assert_eq!(code("18446744073709551615"), "amount_out_of_range");
        assert_eq!(code("2.5"), "wrong_type");
        assert_eq!(code("1e2"), "wrong_type");
    }
}
