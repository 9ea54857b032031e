//! The ledger's event contract, schema v1.
//!
//! Every state change of an account or a transfer is one [`Event`]: the edge
//! emits it in the same storage transaction as the change, the queue carries
//! it as JSON, ingest validates it with [`decode`] and writes it to Parquet,
//! and the reconciler re-proves the invariants from it. `docs/EVENTS.md` is the
//! human-readable form of this crate, and the golden vectors under `golden/`
//! freeze the wire format: a change that alters them is a new schema version.

pub mod currency;
mod decimal;
pub mod event;
pub mod ids;
pub mod sha256_lanes;

pub use currency::{Currency, UnknownCurrency};
pub use event::{
    decode, event_id, is_event_id, newer_version_of, AccountKind, ChainCursor, ChainError,
    DecodeError, Event, EventRef, SchemaError, Stream, TransferKind, FIELDS, GENESIS_HASH,
    SCHEMA_VERSION, SCHEMA_VERSIONS_KNOWN, TRANSFER_DEADLINE_MS_MAX, TRANSFER_DEADLINE_MS_MIN,
};
