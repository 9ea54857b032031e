//! Pure request handling for the ledger's HTTP API.
//!
//! Everything the gateway Worker does between the raw request and a Durable
//! Object call, and between the object's answer and the HTTP response, except
//! the I/O: parsing and validating JSON bodies into core commands
//! ([`parse`]), API-key authentication ([`auth`]), tenant namespacing of object
//! names and idempotency keys ([`names`]), `application/problem+json` errors
//! ([`problem`]) and the JSON shapes of answers ([`views`]). No `worker`, no
//! `tokio`: it builds natively (unit tests) and for wasm32 (the Worker).
//!
//! Business rules stay in `ledger-core`; this crate only maps.

pub mod auth;
pub mod names;
pub mod parse;
pub mod problem;
pub mod sweep;
pub mod views;

pub use auth::{ApiKeys, ConfigError};
pub use parse::Limits;
pub use problem::{ApiError, Problem};
