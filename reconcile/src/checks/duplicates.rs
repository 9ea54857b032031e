//! Conflicting duplicates: one `event_id` with more than one content hash.
//!
//! Rows were already deduplicated by (`event_id`, `hash`) (see `stream`);
//! plain duplicates are delivery statistics (`ScanStats::plain_duplicates`),
//! never violations. Two hashes for one event id mean two different histories
//! were committed or delivered for the same position of a stream: every
//! version is kept and named, none is chosen silently (docs/LAKE.md).

use crate::finding::Finding;
use crate::stream::StreamView;

pub const NAME: &str = "conflicting_duplicates";
pub const INVARIANT: &str = "lake";
pub const PROVES: &str = "no event id appears in the lake with two different contents";

pub fn check_stream(s: &StreamView, out: &mut Vec<Finding>) {
    for (seq, range) in s.by_seq() {
        if range.len() < 2 {
            continue;
        }
        let versions = &s.rows[range];
        let mut hashes: Vec<&str> = versions.iter().map(|e| e.hash).collect();
        hashes.dedup();
        if hashes.len() > 1 {
            out.push(
                Finding::new(
                    "conflict",
                    s.key,
                    format!("{} versions: hashes {}", hashes.len(), hashes.join(", ")),
                )
                .at(seq, versions[0].event_id),
            );
        }
    }
}
