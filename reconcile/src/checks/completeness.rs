//! Lake completeness: per stream, seqs are contiguous from 1, every row
//! hashes to its recorded `hash` (the canonical encoding of docs/EVENTS.md,
//! recomputed here), every row is a valid schema event, and every
//! `prev_hash` is the hash of the previous event (genesis for seq 1).
//!
//! What holding proves: no event of any stream present in the lake was
//! removed, altered or reordered after it was hashed, except possibly the
//! stream's *last* events (a hash chain cannot see a truncated tail; a run
//! with a checkpoint can: the tails earlier runs proved are owed, see
//! `crate::retained`, whose findings this check reports too).
//!
//! A transfer stream is also a saga's history ([`check_phases`]): `created`
//! first; after it `reserved`, `failed` or `releasing`; after `reserved`,
//! `credited` or `releasing`; after `credited`, `captured`; after
//! `releasing`, `released`; nothing after `captured`, `failed` or
//! `released` (edge/core/src/transfer.rs). A row that does not follow its
//! predecessor is `phase_order`: an event is missing, repeated or out of
//! place even where the chain was sealed over it.
//!
//! An account stream is an account's life ([`check_account_life`], the same
//! code): `opened` first and only first; `frozen` only when active,
//! `unfrozen` only when frozen; no `deposited`, `withdrawn`, `hold_placed`
//! or `credited` while frozen (a freeze blocks new money and reserves, never
//! captures or releases: I0; edge/core/src/account.rs).
//!
//! Reporting rule: one finding per defect, at the row that shows it. A gap
//! is reported once (`seq_gap`, naming the first missing seq); the row after
//! it is not also reported as a broken link, because the gap explains it.

use ledger_events::event::{check_stream_key, same};
use ledger_events::{AccountKind, EventRef, TransferKind, GENESIS_HASH};

use crate::facts::AccountLife;
use crate::finding::Finding;
use crate::stream::{LastHashes, StreamView, Tail};

pub const NAME: &str = "completeness";

/// The codes of a row whose content is not the ledger's (it fails its
/// hash, or is not a valid event): what it records tells nothing, neither
/// what a gap before it moved nor that a transfer's leg is one.
pub const ROW_NOT_THE_LEDGERS: [&str; 2] = ["hash_mismatch", "invalid_event"];
pub const INVARIANT: &str = "lake";
pub const PROVES: &str = "every stream's seqs are contiguous from 1, every row hashes to its recorded hash and links to its predecessor, and every transfer and account stream is a path of its life (the saga, opened/frozen/unfrozen); with a checkpoint, every stream still holds the rows earlier runs proved";

/// Whether the saga enters `next` right after `prev`.
fn follows(prev: TransferKind, next: TransferKind) -> bool {
    use TransferKind::*;
    matches!(
        (prev, next),
        (Created, Reserved | Failed | Releasing)
            | (Reserved, Credited | Releasing)
            | (Credited, Captured)
            | (Releasing, Released)
    )
}

/// The `phase_order` finding at row `ev` of `s`: its kind, then `why`.
fn phase_order(s: &StreamView, ev: &EventRef, why: String) -> Finding {
    Finding::new("phase_order", s.key, format!("{} {why}", ev.kind)).at(ev.seq, ev.event_id)
}

/// Checks that each row of the transfer stream `s` follows the one before
/// it in the saga; `prev` is the stream's last row before `s` (seq, kind),
/// if any. The first event must be `created`. A row after a gap, or whose
/// kind or predecessor's kind is not a transfer kind (an `invalid_event`),
/// is not judged.
pub fn check_phases(s: &StreamView, prev: Option<(u64, &str)>, out: &mut Vec<Finding>) {
    let mut prev = prev.map(|(seq, kind)| (seq, TransferKind::parse(kind)));
    for ev in s.primary() {
        let kind = TransferKind::parse(ev.kind);
        let wrong = match (kind, prev) {
            (Some(k), _) if ev.seq == 1 => k != TransferKind::Created,
            (Some(k), Some((pseq, Some(pk)))) if pseq + 1 == ev.seq => !follows(pk, k),
            _ => false,
        };
        if wrong {
            let after = match prev {
                _ if ev.seq == 1 => "as the first event".to_owned(),
                Some((_, Some(pk))) => format!("after {}", pk.as_str()),
                _ => String::new(),
            };
            out.push(phase_order(
                s,
                ev,
                format!("{after}: not a step of the saga"),
            ));
        }
        prev = Some((ev.seq, kind));
    }
}

/// Checks that each row of the account stream `s` is a step of the
/// account's life, continuing from `life` (the stream's rows before `s`;
/// `None`: none) and leaving it after the last row. The status is known from
/// `opened` on, while no seq is missing; after a gap it is known again from
/// the next `frozen` or `unfrozen` (that row itself not judged). Rows whose
/// kind is not an account kind (an `invalid_event`) change nothing.
pub fn check_account_life(s: &StreamView, life: &mut Option<AccountLife>, out: &mut Vec<Finding>) {
    use AccountKind::*;
    for ev in s.primary() {
        let contiguous = ev.seq == life.map_or(0, |l| l.last_seq) + 1;
        let frozen = if contiguous {
            life.and_then(|l| l.frozen)
        } else {
            None
        };
        let Some(kind) = AccountKind::parse(ev.kind) else {
            *life = Some(AccountLife {
                last_seq: ev.seq,
                frozen,
            });
            continue;
        };
        let wrong = match kind {
            _ if ev.seq == 1 && kind != Opened => Some("as the first event".to_owned()),
            Opened if ev.seq != 1 => Some("after the account was opened".to_owned()),
            Frozen if frozen == Some(true) => Some("while frozen".to_owned()),
            Unfrozen if frozen == Some(false) => Some("while active".to_owned()),
            Deposited | Withdrawn | HoldPlaced | Credited if frozen == Some(true) => {
                Some("while frozen".to_owned())
            }
            _ => None,
        };
        if let Some(why) = wrong {
            out.push(phase_order(
                s,
                ev,
                format!("{why}: not a step of the account's life"),
            ));
        }
        let frozen = match kind {
            Opened | Unfrozen => Some(false),
            Frozen => Some(true),
            _ => frozen,
        };
        *life = Some(AccountLife {
            last_seq: ev.seq,
            frozen,
        });
    }
}

/// Checks `s`, whose rows continue the stream after `tail` (the default
/// tail: from seq 1), and moves `tail` to the stream's new end.
pub fn check_stream(s: &StreamView, tail: &mut Tail, out: &mut Vec<Finding>) {
    let mut expected = tail.last_seq + 1;
    // The versions of the previous seq (None: the tail's, or genesis).
    let mut prev: Option<std::ops::Range<usize>> = None;
    let linked = |prev: &Option<std::ops::Range<usize>>, prev_hash: &str| match prev {
        Some(r) => s.rows[r.clone()]
            .iter()
            .any(|p| same(p.hash.as_bytes(), prev_hash.as_bytes())),
        None if tail.last_seq == 0 => prev_hash == GENESIS_HASH,
        None => tail.last_hashes.contains(prev_hash),
    };
    // Every event of the stream has its key: checked once here, and per
    // event only when it fails (so each event's finding names the failure).
    let key_ok = check_stream_key(s.stream, s.key).is_ok();
    for (seq, range) in s.by_seq() {
        let versions = &s.rows[range.clone()];
        // The hashes of the versions that hash to them, listed once a seq
        // and only where one fails (K damaged copies of a row cost K).
        let mut intact: Option<std::collections::HashSet<&str>> = None;
        for (i, ev) in versions.iter().enumerate() {
            debug_assert!(ev.stream == s.stream && ev.stream_key == s.key);
            let valid = if key_ok {
                ev.validate_in_checked_stream()
            } else {
                ev.validate()
            };
            if let Err(e) = valid {
                out.push(
                    Finding::new(
                        "invalid_event",
                        s.key,
                        format!("not a valid schema event: {e}"),
                    )
                    .at(seq, ev.event_id),
                );
            }
            if !s.hash_ok[range.start + i] {
                let mut f = Finding::new(
                    crate::unproved::CODE,
                    s.key,
                    crate::unproved::detail(ev.hash, &ev.compute_hash()),
                )
                .at(seq, ev.event_id);
                // Another version that records the same hash and hashes to
                // it proves that hash here: this copy was altered
                // (`crate::unproved`; otherwise the run marks it).
                let intact = intact.get_or_insert_with(|| {
                    versions
                        .iter()
                        .zip(&s.hash_ok[range.clone()])
                        .filter(|(_, &ok)| ok)
                        .map(|(v, _)| v.hash)
                        .collect()
                });
                if intact.contains(&ev.hash) {
                    f.hash_owed = Some(crate::unproved::Owes::Recorded);
                }
                out.push(f);
            }
        }
        if seq == 0 {
            // Outside the chain (seqs start at 1; `invalid_event` above):
            // neither linked nor a link, so seq 1 still links to genesis.
            continue;
        }
        if seq > expected {
            let missing = ledger_events::event_id(s.stream, s.key, expected);
            out.push(
                Finding::new(
                    "seq_gap",
                    s.key,
                    format!(
                        "seqs {expected}..={} missing (next present: {seq})",
                        seq - 1
                    ),
                )
                .at(expected, &missing)
                // The missing events were committed before the next one:
                // they may still be in delivery while it is young.
                .absence(versions.iter().map(|v| v.occurred_at_ms).max().unwrap_or(0)),
            );
        } else {
            for ev in versions {
                if !linked(&prev, ev.prev_hash) {
                    out.push(
                        Finding::new(
                            "chain_break",
                            s.key,
                            format!(
                                "prev_hash {} is not the hash of seq {}",
                                ev.prev_hash,
                                seq.saturating_sub(1)
                            ),
                        )
                        .at(seq, ev.event_id),
                    );
                }
            }
        }
        prev = Some(range);
        expected = seq + 1;
    }
    if let Some(r) = prev {
        tail.last_hashes = LastHashes::of(s.rows[r].iter().map(|e| e.hash));
        tail.last_seq = expected - 1;
    }
}

/// The seqs a `seq_gap` finding says are missing (first, last), read back
/// from its detail: what a run that lost proved files looks up in the
/// notes of the files it lost (`crate::retained::lost_starts`). Read from
/// the detail, as `duplicates::versions` reads a conflict's, so no field
/// of its own; the form is this module's own, and the test below holds the
/// two together. `None` for any other finding, or a detail not of that form.
pub fn gap_span(f: &Finding) -> Option<(u64, u64)> {
    if f.code != "seq_gap" {
        return None;
    }
    let (first, rest) = f.detail.strip_prefix("seqs ")?.split_once("..=")?;
    let (last, _) = rest.split_once(" missing (next present: ")?;
    let (first, last) = (first.parse().ok()?, last.parse().ok()?);
    (f.seq == Some(first) && first <= last).then_some((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate_events, GenConfig};
    use crate::stream::OwnedView;
    use ledger_events::Stream;

    fn account_events() -> Vec<ledger_events::Event> {
        let (events, _) = generate_events(&GenConfig::default());
        let key = events[0].stream_key.clone();
        let rows: Vec<_> = events
            .into_iter()
            .filter(|e| e.stream == Stream::Account && e.stream_key == key)
            .collect();
        assert!(rows.len() >= 4);
        rows
    }

    fn check(events: &[ledger_events::Event], out: &mut Vec<Finding>) {
        let s = OwnedView::of_events(Stream::Account, &events[0].stream_key, events);
        check_stream(&s.view(), &mut Tail::default(), out);
    }

    #[test]
    fn a_clean_stream_has_no_findings_and_a_gap_is_one_finding() {
        let mut rows = account_events();
        let mut out = Vec::new();
        check(&rows, &mut out);
        assert_eq!(out, vec![]);
        let dropped = rows.remove(2);
        check(&rows, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].code, out[0].seq), ("seq_gap", Some(3)));
        assert_eq!(out[0].event_id.as_deref(), Some(dropped.event_id.as_str()));
        assert_eq!(gap_span(&out[0]), Some((3, 3)));
        // Three missing: the span read back is the finding's.
        rows.drain(2..4);
        out.clear();
        check(&rows, &mut out);
        assert_eq!(gap_span(&out[0]), Some((3, 5)), "{out:?}");
        let mut other = out[0].clone();
        other.code = "chain_break";
        assert_eq!(gap_span(&other), None);
    }

    /// rev-s45-checks L5: a seq-0 row is `invalid_event` and nothing else:
    /// the honest seq 1 still links to genesis (no false `chain_break`).
    #[test]
    fn a_seq_0_row_is_outside_the_chain() {
        let rows = account_events();
        let mut zero = rows[1].clone();
        zero.seq = 0;
        zero.event_id = ledger_events::event_id(Stream::Account, &zero.stream_key, 0);
        let zero = zero.seal();
        let mut with_zero = vec![zero];
        with_zero.extend(rows);
        let mut out = Vec::new();
        check(&with_zero, &mut out);
        let found: Vec<_> = out.iter().map(|f| (f.code, f.seq)).collect();
        assert_eq!(found, [("invalid_event", Some(0))], "{out:?}");
    }

    #[test]
    fn a_reordered_link_is_a_chain_break_at_that_row() {
        let mut rows = account_events();
        rows[2].prev_hash = rows[0].hash.clone();
        rows[2] = rows[2].clone().seal();
        let mut out = Vec::new();
        check(&rows, &mut out);
        // Row 3 now hashes differently, so row 4's link breaks too.
        let codes: Vec<_> = out.iter().map(|f| (f.code, f.seq)).collect();
        assert_eq!(
            codes,
            vec![("chain_break", Some(3)), ("chain_break", Some(4))]
        );
    }
}
