//! The reconciler: proves the ledger's invariants from the Parquet lake
//! alone, without trusting the edge, or names every violation with the rows
//! that show it.
//!
//! Design: one pass. DataFusion reads each lake file of a table as one
//! ordered stream and [`merge`] merges them into (`stream`, `stream_key`,
//! `seq`, `hash`) order (a full run's account table a few dates at a time
//! while the dates keep each stream's order), the rows read in place from the Arrow batches
//! ([`rows`]); the rows are deduplicated by (`event_id`, `hash`) and grouped
//! into streams ([`stream`]); each stream is
//! checked on its own (completeness, conflicts, balance refold, overdraft)
//! and folded into small per-transfer and per-currency facts ([`facts`]),
//! on which the cross-stream checks run. See `docs/RECONCILE.md`.
//!
//! Native only: DataFusion and tokio never reach a wasm crate.

/// `eprintln!` that ignores a failed write: progress, warnings and errors
/// go to stderr, and a stderr that went away mid-run (a closed pipe, `2>&1 |
/// head`, a log pipe restarted) must not panic the run (exit 101, the
/// night's proof and outputs lost) but let it finish with its own exit code.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod archive;
pub mod checkpoint;
pub mod checks;
pub mod chunked;
pub mod codec;
pub mod copies;
pub mod corrupt;
pub mod custody;
pub mod entry_store;
pub mod facts;
pub mod finding;
pub mod gen;
pub mod id;
pub mod keyed;
pub mod lake;
pub mod mapped;
pub mod merge;
pub mod names;
pub mod output;
pub mod owing;
pub mod presence;
pub mod presence_files;
pub mod report;
pub mod retained;
pub mod rows;
pub mod run;
pub mod settle;
pub mod store;
pub mod stream;
pub mod threads;
pub mod unproved;

pub use checkpoint::{CheckpointError, CheckpointLock, LockError, ProofState};
pub use finding::{CheckResult, Finding};
pub use lake::{Error, Lake};
pub use report::Report;
pub use run::{reconcile, reconcile_from, reconcile_full_owing, Options};

/// Exit code: every invariant holds.
pub const EXIT_HELD: i32 = 0;
/// Exit code: at least one invariant is violated.
pub const EXIT_VIOLATED: i32 = 1;
/// Exit code: no verdict (unreadable lake, corrupt file, unknown version, usage).
pub const EXIT_ERROR: i32 = 2;
