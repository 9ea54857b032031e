//! Business rejections are values (TigerBeetle's result enums), never panics
//! or free-form strings: the API maps each to a stable problem type, and a
//! saga step maps each to its compensation. Bugs are assertions instead.

use serde::{Deserialize, Serialize};

use crate::money::Currency;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Rejection {
    /// available = balance − held + overdraft limit is below the amount.
    InsufficientFunds {
        available: i64,
        requested: i64,
    },
    /// Frozen accounts take no new reserves, credits, deposits or withdrawals.
    AccountFrozen,
    CurrencyMismatch {
        account: Currency,
        requested: Currency,
    },
    /// No account with this id has been opened.
    UnknownAccount,
    AmountOutOfRange {
        amount: i64,
        max: i64,
    },
    /// The overdraft limit must be between 0 and the amount maximum.
    OverdraftLimitOutOfRange {
        limit: i64,
    },
    /// The result would not fit in an `i64` balance.
    BalanceOverflow,
    SameAccount,
    /// The operation id was used before with other parameters; nothing ran.
    IdempotencyConflict {
        op_id: String,
    },
    /// Capture or release of a hold that was never placed.
    UnknownHold,
    /// Release of a hold that was already captured.
    HoldCaptured,
    /// Capture or reserve after the transfer's hold was released.
    HoldReleased,
}

impl Rejection {
    /// The stable snake_case code: the event `reason` and the API problem type.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::InsufficientFunds { .. } => "insufficient_funds",
            Rejection::AccountFrozen => "account_frozen",
            Rejection::CurrencyMismatch { .. } => "currency_mismatch",
            Rejection::UnknownAccount => "unknown_account",
            Rejection::AmountOutOfRange { .. } => "amount_out_of_range",
            Rejection::OverdraftLimitOutOfRange { .. } => "overdraft_limit_out_of_range",
            Rejection::BalanceOverflow => "balance_overflow",
            Rejection::SameAccount => "same_account",
            Rejection::IdempotencyConflict { .. } => "idempotency_conflict",
            Rejection::UnknownHold => "unknown_hold",
            Rejection::HoldCaptured => "hold_captured",
            Rejection::HoldReleased => "hold_released",
        }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::InsufficientFunds {
                available,
                requested,
            } => {
                write!(
                    f,
                    "insufficient funds: {requested} requested, {available} available"
                )
            }
            Rejection::AccountFrozen => write!(f, "the account is frozen"),
            Rejection::CurrencyMismatch { account, requested } => {
                write!(
                    f,
                    "the account holds {account}, the request is in {requested}"
                )
            }
            Rejection::UnknownAccount => write!(f, "no such account"),
            Rejection::AmountOutOfRange { amount, max } => {
                write!(
                    f,
                    "amount {amount} is out of range: it must be between 1 and {max} minor units"
                )
            }
            Rejection::OverdraftLimitOutOfRange { limit } => {
                write!(f, "overdraft limit {limit} is out of range")
            }
            Rejection::BalanceOverflow => write!(f, "the balance would overflow"),
            Rejection::SameAccount => write!(f, "source and destination are the same account"),
            Rejection::IdempotencyConflict { op_id } => {
                write!(f, "{op_id} was already used with other parameters")
            }
            Rejection::UnknownHold => write!(f, "no hold for this transfer"),
            Rejection::HoldCaptured => write!(f, "the hold was already captured"),
            Rejection::HoldReleased => write!(f, "the hold was already released"),
        }
    }
}
