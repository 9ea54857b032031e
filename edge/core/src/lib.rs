//! The pure ledger core.
//!
//! Plain Rust with no `async`, no `worker`, no `tokio` and no clock: `now` and
//! every identifier are arguments, and every function returns what to persist
//! and which events to emit instead of doing it. The Durable Objects in
//! `edge/worker` persist what this crate decides in one storage transaction;
//! the deterministic simulation in `tests/sim` drives the same code under
//! crashes, lost replies, duplicates and reordering.
//!
//! - [`money`]: amounts are `i64` minor units with a currency; arithmetic is checked.
//! - [`account`]: one account's state machine (AccountDO).
//! - [`transfer`]: one transfer's saga (TransferDO).
//! - [`idempotency`]: fingerprints and the replay/conflict decision.
//! - [`retry`]: the named, bounded retry policies of the saga's steps.
//! - [`memory`]: in-memory storage with the Durable Objects' commit semantics, for tests.

pub mod account;
pub mod idempotency;
pub mod memory;
pub mod money;
pub mod rejection;
pub mod retry;
pub mod transfer;

pub use ledger_events as events;
pub use ledger_events::{Currency, Event};
pub use rejection::Rejection;
