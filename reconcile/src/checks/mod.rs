//! The checks, one module per invariant. Each names the invariant it proves
//! and returns its offending rows ([`crate::finding::Finding`]).
//!
//! | module | invariant | input |
//! |---|---|---|
//! | [`completeness`] | lake completeness: seqs, hashes, chain | each stream |
//! | [`duplicates`] | no conflicting duplicates | each stream |
//! | [`balance`] | I1: balances are the fold of the postings | each account stream |
//! | [`overdraft`] | I2: no overdraft | each account stream |
//! | [`transfer_conservation`] | I1 per transfer | facts |
//! | [`global_conservation`] | I1 per currency | facts |
//! | [`consistency`] | I1: transfer phases vs account legs | facts |
//! | [`convergence`] | I4: dangling transfers, leaked holds | facts |

pub mod balance;
pub mod completeness;
pub mod consistency;
pub mod convergence;
pub mod duplicates;
pub mod global_conservation;
pub mod overdraft;
pub mod transfer_conservation;
