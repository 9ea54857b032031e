//! Lake completeness: per stream, seqs are contiguous from 1, every row
//! hashes to its recorded `hash` (the canonical encoding of docs/EVENTS.md,
//! recomputed here), every row is a valid schema event, and every
//! `prev_hash` is the hash of the previous event (genesis for seq 1).
//!
//! What holding proves: no event of any stream present in the lake was
//! removed, altered or reordered after it was hashed, except possibly the
//! stream's *last* events (a hash chain cannot see a truncated tail; the
//! edge's sweeper and the next night's run can).
//!
//! Reporting rule: one finding per defect, at the row that shows it. A gap
//! is reported once (`seq_gap`, naming the first missing seq); the row after
//! it is not also reported as a broken link, because the gap explains it.

use ledger_events::GENESIS_HASH;

use crate::finding::Finding;
use crate::stream::StreamRows;

pub const NAME: &str = "completeness";
pub const INVARIANT: &str = "lake";
pub const PROVES: &str = "every stream's seqs are contiguous from 1, every row hashes to its recorded hash and links to its predecessor";

pub fn check_stream(s: &StreamRows, out: &mut Vec<Finding>) {
    let mut expected = 1u64;
    let mut prev_hashes: Vec<&str> = vec![GENESIS_HASH];
    for (seq, range) in s.by_seq() {
        let versions = &s.rows[range.clone()];
        for (i, ev) in versions.iter().enumerate() {
            if let Err(e) = ev.validate() {
                out.push(
                    Finding::new(
                        "invalid_event",
                        &s.key,
                        format!("not a valid schema event: {e}"),
                    )
                    .at(seq, &ev.event_id),
                );
            }
            if !s.hash_ok[range.start + i] {
                out.push(
                    Finding::new(
                        "hash_mismatch",
                        &s.key,
                        format!(
                            "recorded hash {} but the row's content hashes to {}",
                            ev.hash,
                            ev.compute_hash()
                        ),
                    )
                    .at(seq, &ev.event_id),
                );
            }
        }
        if seq > expected {
            let missing = ledger_events::event_id(s.stream, &s.key, expected);
            out.push(
                Finding::new(
                    "seq_gap",
                    &s.key,
                    format!(
                        "seqs {expected}..={} missing (next present: {seq})",
                        seq - 1
                    ),
                )
                .at(expected, &missing),
            );
        } else {
            for ev in versions {
                if !prev_hashes.contains(&ev.prev_hash.as_str()) {
                    out.push(
                        Finding::new(
                            "chain_break",
                            &s.key,
                            format!(
                                "prev_hash {} is not the hash of seq {}",
                                ev.prev_hash,
                                seq.saturating_sub(1)
                            ),
                        )
                        .at(seq, &ev.event_id),
                    );
                }
            }
        }
        prev_hashes = versions.iter().map(|e| e.hash.as_str()).collect();
        expected = seq + 1;
    }
}
