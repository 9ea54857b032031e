//! Errors as `application/problem+json` (RFC 9457) with a stable `type` URI.
//!
//! Every error the API can answer is an [`ApiError`]; [`ApiError::problem`]
//! gives its status, type and body. The `type` is
//! `https://ledger.example/problems/{code}` where `code` is the snake_case
//! code (for a core [`Rejection`], [`Rejection::code`]). The body also carries
//! `code` and, where useful, the offending `field` or the amounts involved.

use ledger_core::account::AccountHeader;
use ledger_core::Rejection;
use ledger_events::ids::IdError;
use serde_json::{json, Map, Value};

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";
pub const TYPE_BASE: &str = "https://ledger.example/problems/";

/// Every error the API answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The body is not JSON at all.
    MalformedJson {
        detail: String,
    },
    /// The body is JSON but not an object.
    NotAnObject,
    MissingField {
        field: &'static str,
    },
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
    UnknownField {
        field: String,
    },
    /// An amount (or overdraft limit) outside 1..=max (0..=max for limits).
    AmountOutOfRange {
        field: &'static str,
        amount: String,
        min: i64,
        max: i64,
    },
    UnknownCurrency {
        field: &'static str,
        found: String,
    },
    SameAccount,
    BadId {
        field: &'static str,
        why: IdError,
    },
    MissingIdempotencyKey,
    BadQuery {
        param: &'static str,
        detail: String,
    },
    BodyTooLarge {
        limit: usize,
    },
    /// A list longer than the route accepts.
    TooManyItems {
        field: &'static str,
        count: usize,
        max: usize,
    },
    Unauthorized,
    /// A valid key, but not the admin key, on an admin route.
    Forbidden,
    RouteNotFound,
    MethodNotAllowed,
    UnknownTransfer,
    /// `POST /v1/accounts` for an id that is already open with another currency or overdraft
    /// limit. The core refuses it as a conflict of the account's "open" record, but the client
    /// sent no Idempotency-Key: "key reused" would send them looking for one. Carries what the
    /// account holds (client id, currency, limit), which an open cannot change.
    AccountExists {
        id: String,
        currency: String,
        overdraft_limit: i64,
    },
    /// `POST /v1/transfers` naming, as its `field` (`source` or `destination`), an account that
    /// is not open (`UnknownAccount`) or that holds another currency (`CurrencyMismatch`). The
    /// gateway reads both accounts before it admits a transfer, so a typo is refused at once
    /// with nothing created (no transfer, no object under the mistyped name, the key unused)
    /// rather than answered as a transfer that failed. The problem is the rejection's (code,
    /// status, title, members), with the side and the client's account id named.
    TransferAccount {
        field: &'static str,
        account: String,
        rejection: Rejection,
    },
    /// A business rejection from the core.
    Rejected(Rejection),
    /// A failure inside the ledger that a retry would meet again: a bug, or a stored value it
    /// cannot read (the objects mark these; a failed call is `Unavailable`). The detail is
    /// logged, not shown.
    Internal,
    /// Admin routes or auth not configured.
    Unavailable {
        detail: String,
    },
}

/// A rendered problem: status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: u16,
    pub body: Value,
}

impl Problem {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
    pub fn to_json(&self) -> String {
        self.body.to_string()
    }
}

fn rejection_status(r: &Rejection) -> u16 {
    match r {
        Rejection::UnknownAccount => 404,
        Rejection::IdempotencyConflict { .. } => 409,
        // Internal saga states; never expected on a public route.
        Rejection::UnknownHold | Rejection::HoldCaptured | Rejection::HoldReleased => 409,
        Rejection::InsufficientFunds { .. }
        | Rejection::AccountFrozen
        | Rejection::CurrencyMismatch { .. }
        | Rejection::AmountOutOfRange { .. }
        | Rejection::OverdraftLimitOutOfRange { .. }
        | Rejection::BalanceOverflow
        | Rejection::SameAccount => 422,
    }
}

fn rejection_title(r: &Rejection) -> &'static str {
    match r {
        Rejection::InsufficientFunds { .. } => "Insufficient funds",
        Rejection::AccountFrozen => "Account frozen",
        Rejection::CurrencyMismatch { .. } => "Currency mismatch",
        Rejection::UnknownAccount => "Unknown account",
        Rejection::AmountOutOfRange { .. } => "Amount out of range",
        Rejection::OverdraftLimitOutOfRange { .. } => "Overdraft limit out of range",
        Rejection::BalanceOverflow => "Balance overflow",
        Rejection::SameAccount => "Same source and destination",
        Rejection::IdempotencyConflict { .. } => "Idempotency key reused with other parameters",
        Rejection::UnknownHold => "Unknown hold",
        Rejection::HoldCaptured => "Hold already captured",
        Rejection::HoldReleased => "Hold already released",
    }
}

/// The members a rejection's problem carries besides the standard ones.
fn rejection_members(r: &Rejection, ext: &mut Map<String, Value>) {
    match r {
        Rejection::InsufficientFunds {
            available,
            requested,
        } => {
            ext.insert("available".into(), json!(available));
            ext.insert("requested".into(), json!(requested));
        }
        Rejection::CurrencyMismatch { account, requested } => {
            ext.insert("account_currency".into(), json!(account.as_str()));
            ext.insert("requested_currency".into(), json!(requested.as_str()));
        }
        _ => {}
    }
}

impl ApiError {
    /// The stable snake_case code (the last part of the `type` URI).
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::MalformedJson { .. } => "malformed_json",
            ApiError::NotAnObject => "not_an_object",
            ApiError::MissingField { .. } => "missing_field",
            ApiError::WrongType { .. } => "wrong_type",
            ApiError::UnknownField { .. } => "unknown_field",
            ApiError::AmountOutOfRange { .. } => "amount_out_of_range",
            ApiError::UnknownCurrency { .. } => "unknown_currency",
            ApiError::SameAccount => "same_account",
            ApiError::BadId { .. } => "bad_id",
            ApiError::MissingIdempotencyKey => "missing_idempotency_key",
            ApiError::BadQuery { .. } => "bad_query",
            ApiError::BodyTooLarge { .. } => "body_too_large",
            ApiError::TooManyItems { .. } => "too_many_items",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::RouteNotFound => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::UnknownTransfer => "unknown_transfer",
            ApiError::AccountExists { .. } => "account_exists",
            ApiError::Rejected(r) | ApiError::TransferAccount { rejection: r, .. } => r.code(),
            ApiError::Internal => "internal",
            ApiError::Unavailable { .. } => "unavailable",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            ApiError::MalformedJson { .. }
            | ApiError::NotAnObject
            | ApiError::MissingField { .. }
            | ApiError::WrongType { .. }
            | ApiError::UnknownField { .. }
            | ApiError::BadId { .. }
            | ApiError::MissingIdempotencyKey
            | ApiError::BadQuery { .. } => 400,
            ApiError::AmountOutOfRange { .. }
            | ApiError::UnknownCurrency { .. }
            | ApiError::SameAccount
            | ApiError::TooManyItems { .. } => 422,
            ApiError::BodyTooLarge { .. } => 413,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden => 403,
            ApiError::RouteNotFound | ApiError::UnknownTransfer => 404,
            ApiError::MethodNotAllowed => 405,
            ApiError::AccountExists { .. } => 409,
            ApiError::Rejected(r) | ApiError::TransferAccount { rejection: r, .. } => {
                rejection_status(r)
            }
            ApiError::Internal => 500,
            ApiError::Unavailable { .. } => 503,
        }
    }

    pub fn problem(&self) -> Problem {
        let code = self.code();
        let mut ext = Map::new();
        let (title, detail): (&str, String) = match self {
            ApiError::MalformedJson { detail } => (
                "Malformed JSON",
                format!("the body is not valid JSON: {detail}"),
            ),
            ApiError::NotAnObject => ("Not an object", "the body must be a JSON object".into()),
            ApiError::MissingField { field } => {
                ext.insert("field".into(), json!(field));
                ("Missing field", format!("field `{field}` is required"))
            }
            ApiError::WrongType { field, expected } => {
                ext.insert("field".into(), json!(field));
                ("Wrong type", format!("field `{field}` must be {expected}"))
            }
            ApiError::UnknownField { field } => {
                ext.insert("field".into(), json!(field));
                (
                    "Unknown field",
                    format!("field `{field}` is not part of this request"),
                )
            }
            ApiError::AmountOutOfRange {
                field,
                amount,
                min,
                max,
            } => {
                ext.insert("field".into(), json!(field));
                ext.insert("min".into(), json!(min));
                ext.insert("max".into(), json!(max));
                (
                    "Amount out of range",
                    format!("`{field}` is {amount}; it must be an integer number of minor units between {min} and {max}"),
                )
            }
            ApiError::UnknownCurrency { field, found } => {
                ext.insert("field".into(), json!(field));
                (
                    "Unknown currency",
                    format!("`{field}` is {found:?}, not an active upper-case ISO 4217 code such as \"USD\""),
                )
            }
            ApiError::SameAccount => (
                "Same source and destination",
                "source and destination must be different accounts".into(),
            ),
            ApiError::BadId { field, why } => {
                ext.insert("field".into(), json!(field));
                ("Bad identifier", format!("`{field}` {why}"))
            }
            ApiError::MissingIdempotencyKey => (
                "Missing Idempotency-Key",
                "this request needs an Idempotency-Key header: [A-Za-z0-9._-]{1,64}".into(),
            ),
            ApiError::BadQuery { param, detail } => {
                ext.insert("field".into(), json!(param));
                ("Bad query parameter", format!("`{param}` {detail}"))
            }
            ApiError::BodyTooLarge { limit } => {
                ext.insert("limit".into(), json!(limit));
                ("Body too large", format!("the body exceeds {limit} bytes"))
            }
            ApiError::TooManyItems { field, count, max } => {
                ext.insert("field".into(), json!(field));
                ext.insert("max".into(), json!(max));
                (
                    "Too many items",
                    format!("`{field}` has {count} items; at most {max} are accepted"),
                )
            }
            ApiError::Unauthorized => (
                "Unauthorized",
                "a valid API key is required: Authorization: Bearer <key>".into(),
            ),
            ApiError::Forbidden => ("Forbidden", "this route needs the admin key".into()),
            ApiError::RouteNotFound => ("Not found", "no such route".into()),
            ApiError::MethodNotAllowed => (
                "Method not allowed",
                "method not allowed on this route".into(),
            ),
            ApiError::UnknownTransfer => ("Unknown transfer", "no transfer with this key".into()),
            ApiError::AccountExists {
                id,
                currency,
                overdraft_limit,
            } => {
                ext.insert("account_currency".into(), json!(currency));
                ext.insert("overdraft_limit".into(), json!(overdraft_limit));
                (
                    "Account already exists",
                    format!("account {id} is already open in {currency} with overdraft limit {overdraft_limit}, and neither ever changes: an open with these answers the account, another id opens a new one"),
                )
            }
            ApiError::Rejected(r) => {
                rejection_members(r, &mut ext);
                (rejection_title(r), r.to_string())
            }
            ApiError::TransferAccount {
                field,
                account,
                rejection,
            } => {
                ext.insert("field".into(), json!(field));
                rejection_members(rejection, &mut ext);
                let detail = match rejection {
                    Rejection::UnknownAccount => format!(
                        "the {field} account {account} is not open: check the id, or open the account first (nothing was created, and the Idempotency-Key is still unused)"
                    ),
                    Rejection::CurrencyMismatch {
                        account: held,
                        requested,
                    } => format!(
                        "the {field} account {account} holds {held}, the transfer is in {requested} (nothing was created, and the Idempotency-Key is still unused)"
                    ),
                    other => format!("the {field} account {account}: {other}"),
                };
                (rejection_title(rejection), detail)
            }
            ApiError::Internal => (
                "Internal error",
                "an internal error occurred and was logged; a retry with the same Idempotency-Key is safe, but is likely to fail the same way until it is fixed".into(),
            ),
            ApiError::Unavailable { detail } => ("Unavailable", detail.clone()),
        };
        let mut body = Map::new();
        body.insert("type".into(), json!(format!("{TYPE_BASE}{code}")));
        body.insert("title".into(), json!(title));
        body.insert("status".into(), json!(self.status()));
        body.insert("detail".into(), json!(detail));
        body.insert("code".into(), json!(code));
        body.extend(ext);
        Problem {
            status: self.status(),
            body: Value::Object(body),
        }
    }
}

impl ApiError {
    /// [`ApiError::AccountExists`] for the account `h` of `tenant`.
    pub fn account_exists(tenant: &str, h: &AccountHeader) -> ApiError {
        ApiError::AccountExists {
            id: crate::names::account_id_of(tenant, &h.id)
                .unwrap_or(&h.id)
                .to_owned(),
            currency: h.currency.as_str().to_owned(),
            overdraft_limit: h.overdraft_limit,
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        ApiError::Rejected(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_core::Currency;

    fn all_rejections() -> Vec<Rejection> {
        let usd = Currency::parse("USD").unwrap();
        let eur = Currency::parse("EUR").unwrap();
        vec![
            Rejection::InsufficientFunds {
                available: 1,
                requested: 2,
            },
            Rejection::AccountFrozen,
            Rejection::CurrencyMismatch {
                account: usd,
                requested: eur,
            },
            Rejection::UnknownAccount,
            Rejection::AmountOutOfRange { amount: 0, max: 9 },
            Rejection::OverdraftLimitOutOfRange { limit: -1 },
            Rejection::BalanceOverflow,
            Rejection::SameAccount,
            Rejection::IdempotencyConflict { op_id: "x".into() },
            Rejection::UnknownHold,
            Rejection::HoldCaptured,
            Rejection::HoldReleased,
        ]
    }

    #[test]
    fn every_rejection_has_a_stable_type_and_status() {
        for r in all_rejections() {
            let p = ApiError::Rejected(r.clone()).problem();
            assert_eq!(p.body["type"], json!(format!("{TYPE_BASE}{}", r.code())));
            assert_eq!(p.body["status"], json!(p.status));
            assert_eq!(p.code(), r.code());
            let want = match r {
                Rejection::UnknownAccount => 404,
                Rejection::IdempotencyConflict { .. }
                | Rejection::UnknownHold
                | Rejection::HoldCaptured
                | Rejection::HoldReleased => 409,
                _ => 422,
            };
            assert_eq!(p.status, want, "{r:?}");
        }
    }

    #[test]
    fn statuses_of_request_errors() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (
                ApiError::MalformedJson { detail: "x".into() },
                400,
                "malformed_json",
            ),
            (ApiError::NotAnObject, 400, "not_an_object"),
            (
                ApiError::MissingField { field: "amount" },
                400,
                "missing_field",
            ),
            (
                ApiError::WrongType {
                    field: "amount",
                    expected: "an integer",
                },
                400,
                "wrong_type",
            ),
            (
                ApiError::UnknownField { field: "x".into() },
                400,
                "unknown_field",
            ),
            (
                ApiError::BadId {
                    field: "id",
                    why: IdError::Empty,
                },
                400,
                "bad_id",
            ),
            (
                ApiError::MissingIdempotencyKey,
                400,
                "missing_idempotency_key",
            ),
            (
                ApiError::AmountOutOfRange {
                    field: "amount",
                    amount: "0".into(),
                    min: 1,
                    max: 5,
                },
                422,
                "amount_out_of_range",
            ),
            (
                ApiError::UnknownCurrency {
                    field: "currency",
                    found: "usd".into(),
                },
                422,
                "unknown_currency",
            ),
            (ApiError::SameAccount, 422, "same_account"),
            (ApiError::BodyTooLarge { limit: 10 }, 413, "body_too_large"),
            (
                ApiError::TooManyItems {
                    field: "transfer_ids",
                    count: 2,
                    max: 1,
                },
                422,
                "too_many_items",
            ),
            (ApiError::Unauthorized, 401, "unauthorized"),
            (ApiError::Forbidden, 403, "forbidden"),
            (ApiError::UnknownTransfer, 404, "unknown_transfer"),
            (
                ApiError::AccountExists {
                    id: "a".into(),
                    currency: "USD".into(),
                    overdraft_limit: 0,
                },
                409,
                "account_exists",
            ),
            (ApiError::Internal, 500, "internal"),
        ];
        for (e, status, code) in cases {
            let p = e.problem();
            assert_eq!((p.status, p.code()), (status, code), "{e:?}");
            assert_eq!(
                p.body["type"].as_str().unwrap(),
                format!("{TYPE_BASE}{code}")
            );
            assert!(p.body["title"].is_string() && p.body["detail"].is_string());
        }
        let p = ApiError::MissingField { field: "amount" }.problem();
        assert_eq!(p.body["field"], json!("amount"));
    }

    /// One value of every `ApiError` variant (with every core rejection). The match below stops
    /// compiling when a variant is added, so the list (and the OpenAPI check) cannot fall behind.
    fn every_error() -> Vec<ApiError> {
        fn exhaustive(e: &ApiError) {
            match e {
                ApiError::MalformedJson { .. }
                | ApiError::NotAnObject
                | ApiError::MissingField { .. }
                | ApiError::WrongType { .. }
                | ApiError::UnknownField { .. }
                | ApiError::AmountOutOfRange { .. }
                | ApiError::UnknownCurrency { .. }
                | ApiError::SameAccount
                | ApiError::BadId { .. }
                | ApiError::MissingIdempotencyKey
                | ApiError::BadQuery { .. }
                | ApiError::BodyTooLarge { .. }
                | ApiError::TooManyItems { .. }
                | ApiError::Unauthorized
                | ApiError::Forbidden
                | ApiError::RouteNotFound
                | ApiError::MethodNotAllowed
                | ApiError::UnknownTransfer
                | ApiError::AccountExists { .. }
                | ApiError::TransferAccount { .. }
                | ApiError::Rejected(_)
                | ApiError::Internal
                | ApiError::Unavailable { .. } => {}
            }
        }
        fn exhaustive_rejection(r: &Rejection) {
            match r {
                Rejection::InsufficientFunds { .. }
                | Rejection::AccountFrozen
                | Rejection::CurrencyMismatch { .. }
                | Rejection::UnknownAccount
                | Rejection::AmountOutOfRange { .. }
                | Rejection::OverdraftLimitOutOfRange { .. }
                | Rejection::BalanceOverflow
                | Rejection::SameAccount
                | Rejection::IdempotencyConflict { .. }
                | Rejection::UnknownHold
                | Rejection::HoldCaptured
                | Rejection::HoldReleased => {}
            }
        }
        let mut v = vec![
            ApiError::MalformedJson { detail: "x".into() },
            ApiError::NotAnObject,
            ApiError::MissingField { field: "amount" },
            ApiError::WrongType {
                field: "amount",
                expected: "an integer",
            },
            ApiError::UnknownField { field: "x".into() },
            ApiError::AmountOutOfRange {
                field: "amount",
                amount: "0".into(),
                min: 1,
                max: 5,
            },
            ApiError::UnknownCurrency {
                field: "currency",
                found: "usd".into(),
            },
            ApiError::SameAccount,
            ApiError::BadId {
                field: "id",
                why: IdError::Empty,
            },
            ApiError::MissingIdempotencyKey,
            ApiError::BadQuery {
                param: "limit",
                detail: "x".into(),
            },
            ApiError::BodyTooLarge { limit: 1 },
            ApiError::TooManyItems {
                field: "transfer_ids",
                count: 2,
                max: 1,
            },
            ApiError::Unauthorized,
            ApiError::Forbidden,
            ApiError::RouteNotFound,
            ApiError::MethodNotAllowed,
            ApiError::UnknownTransfer,
            ApiError::AccountExists {
                id: "a".into(),
                currency: "USD".into(),
                overdraft_limit: 0,
            },
            ApiError::TransferAccount {
                field: "source",
                account: "a".into(),
                rejection: Rejection::UnknownAccount,
            },
            ApiError::TransferAccount {
                field: "destination",
                account: "b".into(),
                rejection: Rejection::CurrencyMismatch {
                    account: ledger_core::Currency::parse("EUR").unwrap(),
                    requested: ledger_core::Currency::parse("USD").unwrap(),
                },
            },
            ApiError::Internal,
            ApiError::Unavailable { detail: "x".into() },
        ];
        for r in all_rejections() {
            exhaustive_rejection(&r);
            v.push(ApiError::Rejected(r));
        }
        v.iter().for_each(exhaustive);
        v
    }

    #[test]
    fn account_exists_says_what_the_account_holds_not_a_key() {
        let h = AccountHeader {
            id: "acme.alice".into(),
            currency: ledger_core::Currency::parse("EUR").unwrap(),
            overdraft_limit: 9_007_199_254_740_993,
            status: ledger_core::account::Status::Active,
            balance: 0,
            held: 0,
            seq: 1,
            last_hash: String::new(),
            opened_at_ms: 0,
        };
        let p = ApiError::account_exists("acme", &h).problem();
        assert_eq!((p.status, p.code()), (409, "account_exists"));
        assert_eq!(p.body["account_currency"], json!("EUR"));
        assert_eq!(p.body["overdraft_limit"], json!(9_007_199_254_740_993i64));
        let detail = p.body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(
                "account alice is already open in EUR with overdraft limit 9007199254740993,"
            ),
            "{detail}"
        );
        assert!(
            !detail.contains("used") && !detail.contains("key"),
            "{detail}"
        );
    }

    /// docs/openapi.json lists exactly the problem codes this crate produces, each with its
    /// status and title, and every documented member of a problem body.
    #[test]
    fn every_problem_type_is_in_the_openapi_spec() {
        let spec: Value = serde_json::from_str(include_str!("../../../docs/openapi.json"))
            .expect("docs/openapi.json is JSON");
        let listed = spec["components"]["x-problems"]
            .as_object()
            .expect("components.x-problems");
        let enum_codes: Vec<&str> = spec["components"]["schemas"]["ProblemCode"]["enum"]
            .as_array()
            .expect("ProblemCode enum")
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let members = spec["components"]["schemas"]["Problem"]["properties"]
            .as_object()
            .expect("Problem properties");
        let mut produced = std::collections::BTreeSet::new();
        for e in every_error() {
            let p = e.problem();
            let code = p.code().to_owned();
            let entry = listed
                .get(&code)
                .unwrap_or_else(|| panic!("problem {code} is not in docs/openapi.json x-problems"));
            assert_eq!(entry["status"], json!(p.status), "status of {code}");
            assert_eq!(entry["title"], p.body["title"], "title of {code}");
            assert!(
                enum_codes.contains(&code.as_str()),
                "{code} not in ProblemCode"
            );
            for k in p.body.as_object().unwrap().keys() {
                assert!(
                    members.contains_key(k),
                    "problem member {k} of {code} not in the spec"
                );
            }
            let status = p.status.to_string();
            assert!(
                spec["components"]["responses"][format!("P{status}")].is_object(),
                "no response P{status} for {code}"
            );
            produced.insert(code);
        }
        let documented: std::collections::BTreeSet<String> = listed.keys().cloned().collect();
        assert_eq!(documented, produced, "spec lists codes nothing produces");
        assert_eq!(enum_codes.len(), produced.len());
    }
}
