//! Money: `i64` minor units plus an ISO 4217 currency.
//!
//! Floats never touch an amount. Every operation that can overflow is checked
//! and turns into a [`Rejection`] value; a wrap or a panic would silently
//! create or destroy money.

use crate::Rejection;
pub use ledger_events::Currency;

/// Largest amount one command may move, in minor units. Far above any real
/// payment, exact as a JavaScript number (2^53 − 1) so no JSON client rounds
/// it, and small enough that the sum of two never overflows `i64`.
pub const AMOUNT_MINOR_MAX: i64 = (1 << 53) - 1;

/// A strictly positive amount of at most [`AMOUNT_MINOR_MAX`] minor units.
pub fn check_amount(amount: i64) -> Result<i64, Rejection> {
    if amount <= 0 || amount > AMOUNT_MINOR_MAX {
        return Err(Rejection::AmountOutOfRange {
            amount,
            max: AMOUNT_MINOR_MAX,
        });
    }
    Ok(amount)
}

/// `a + b`, or [`Rejection::BalanceOverflow`].
pub fn add(a: i64, b: i64) -> Result<i64, Rejection> {
    a.checked_add(b).ok_or(Rejection::BalanceOverflow)
}

/// `a - b`, or [`Rejection::BalanceOverflow`].
pub fn sub(a: i64, b: i64) -> Result<i64, Rejection> {
    a.checked_sub(b).ok_or(Rejection::BalanceOverflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_outside_the_range_are_rejections_not_panics() {
        assert!(check_amount(1).is_ok());
        assert!(check_amount(AMOUNT_MINOR_MAX).is_ok());
        for bad in [0, -1, i64::MIN, AMOUNT_MINOR_MAX + 1, i64::MAX] {
            assert!(
                matches!(check_amount(bad), Err(Rejection::AmountOutOfRange { .. })),
                "{bad}"
            );
        }
        assert_eq!(add(i64::MAX, 1), Err(Rejection::BalanceOverflow));
        assert_eq!(sub(i64::MIN, 1), Err(Rejection::BalanceOverflow));
        assert_eq!(add(2, 3), Ok(5));
    }
}
