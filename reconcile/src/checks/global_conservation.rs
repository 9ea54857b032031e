//! I1 globally: per currency, Σ final balances = Σ deposits − Σ withdrawals
//! (i128 sums over the last recorded `balance_after` of every account).
//!
//! What holding proves: no money was created or destroyed inside the
//! ledger; only deposits and withdrawals moved money across its boundary.

use crate::facts::Facts;
use crate::finding::Finding;

pub const NAME: &str = "global_conservation";
pub const INVARIANT: &str = "I1";
pub const PROVES: &str =
    "per currency, the sum of final balances equals deposits minus withdrawals";

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    for (currency, s) in &f.currencies {
        let expected = s.deposits - s.withdrawals;
        if s.balances != expected {
            out.push(Finding::new(
                "not_conserved",
                currency,
                format!(
                    "Σ balances {} over {} accounts ≠ deposits {} − withdrawals {} = {expected} (difference {})",
                    s.balances,
                    s.accounts,
                    s.deposits,
                    s.withdrawals,
                    s.balances - expected
                ),
            ));
        }
    }
    out
}
