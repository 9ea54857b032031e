//! Dedup by `event_id`, the rule every reader of the lake applies too.
//!
//! Guarantees: copies of one event (same `event_id`, same `hash`) collapse to
//! one row, and each extra copy is reported as a [`Duplicate`] naming where it
//! came from. Copies with the same `event_id` but different hashes are a
//! conflict, never a duplicate: every distinct version is kept as its own row
//! with `conflict = true` and the group is reported as a [`Conflict`], because
//! silently choosing one would hide exactly what the reconciler must report.
//! The output is sorted by (stream, stream_key, seq, hash) whatever the input
//! order, so it is a pure function of the *set* of inputs.

use std::collections::BTreeMap;

use ledger_events::Event;

/// One row of the lake: the event plus the conflict flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub event: Event,
    /// Another row with the same `event_id` and a different `hash` was seen
    /// together with this one (in the same batch, or the same compaction).
    pub conflict: bool,
}

impl AsRef<Row> for Row {
    fn as_ref(&self) -> &Row {
        self
    }
}

/// An extra copy of an event already kept: harmless, counted, not a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// The queue message id (ingest) or the object key (compaction) of the copy.
    pub source: String,
    pub event_id: String,
}

/// One `event_id` seen with more than one content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub event_id: String,
    /// Each distinct hash, with the sources (message ids or keys) that carried it.
    pub versions: Vec<(String, Vec<String>)>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "event {} arrived with {} different contents:",
            self.event_id,
            self.versions.len()
        )?;
        for (hash, sources) in &self.versions {
            write!(f, " hash {hash} from {}", sources.join(", "))?;
            write!(f, ";")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deduped {
    pub rows: Vec<Row>,
    pub duplicates: Vec<Duplicate>,
    pub conflicts: Vec<Conflict>,
}

/// Dedups `(source, row)` pairs. An input row already flagged as a conflict
/// (read back from a file) keeps its flag: the other version may live in a
/// file this call has not seen.
pub fn dedup<I>(inputs: I) -> Deduped
where
    I: IntoIterator<Item = (String, Row)>,
{
    // event_id -> its versions, each (row, sources). The BTreeMap and the
    // versions sorted by hash below make the output independent of the input
    // order. The versions are a vector of one, nearly always (a map per
    // event_id allocated a whole B-tree node, ~6 KB a row in compaction).
    let mut groups: BTreeMap<String, Vec<(Row, Vec<String>)>> = BTreeMap::new();
    let mut duplicates = Vec::new();
    for (source, row) in inputs {
        let versions = groups
            .entry(row.event.event_id.clone())
            .or_insert_with(|| Vec::with_capacity(1));
        match versions
            .iter_mut()
            .find(|(kept, _)| kept.event.hash == row.event.hash)
        {
            Some((kept, sources)) => {
                kept.conflict |= row.conflict;
                duplicates.push(Duplicate {
                    source: source.clone(),
                    event_id: row.event.event_id.clone(),
                });
                sources.push(source);
            }
            None => versions.push((row, vec![source])),
        }
    }
    let mut rows = Vec::with_capacity(groups.len());
    let mut conflicts = Vec::new();
    for (event_id, mut versions) in groups {
        let conflict = versions.len() > 1;
        if conflict {
            versions.sort_by(|a, b| a.0.event.hash.cmp(&b.0.event.hash));
            conflicts.push(Conflict {
                event_id,
                versions: versions
                    .iter()
                    .map(|(row, sources)| (row.event.hash.clone(), sources.clone()))
                    .collect(),
            });
        }
        for (mut row, _) in versions {
            row.conflict |= conflict;
            rows.push(row);
        }
    }
    sort_rows(&mut rows);
    Deduped {
        rows,
        duplicates,
        conflicts,
    }
}

/// The lake's row order: stream, stream_key, seq, then hash (so that the
/// versions of a conflict have a fixed order too).
pub fn sort_rows(rows: &mut [Row]) {
    rows.sort_by(lake_order);
}

/// The lake's row order, as [`sort_rows`] sorts.
pub fn lake_order(a: &Row, b: &Row) -> std::cmp::Ordering {
    let (a, b) = (&a.event, &b.event);
    (a.stream, &a.stream_key, a.seq, &a.hash).cmp(&(b.stream, &b.stream_key, b.seq, &b.hash))
}

/// Whether two rows are versions of one event: the same stream, stream key
/// and seq, which make the `event_id` (readers check that a row's id is
/// the one they make). Adjacent in [`lake_order`].
pub fn same_event(a: &Row, b: &Row) -> bool {
    let (a, b) = (&a.event, &b.event);
    (a.stream, &a.stream_key, a.seq) == (b.stream, &b.stream_key, b.seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_events::{Stream, GENESIS_HASH};

    fn row(key: &str, seq: u64, at: i64) -> Row {
        Row {
            event: Event::new(Stream::Account, key, seq, "opened", at, GENESIS_HASH).seal(),
            conflict: false,
        }
    }

    #[test]
    fn copies_collapse_and_versions_are_kept_whatever_the_input_order() {
        // One event in three versions (three contents, one event_id), one
        // of them twice; another event twice; a third once.
        let (a1, a2, a3) = (row("a", 1, 10), row("a", 1, 11), row("a", 1, 12));
        let (b, c) = (row("b", 1, 10), row("c", 1, 10));
        let inputs = [
            ("f1", a3.clone()),
            ("f2", b.clone()),
            ("f3", a1.clone()),
            ("f4", a3.clone()),
            ("f5", c.clone()),
            ("f6", a2.clone()),
            ("f7", b.clone()),
        ];
        let mut first: Option<Deduped> = None;
        for rotation in 0..inputs.len() {
            for reversed in [false, true] {
                let mut order: Vec<_> = inputs.to_vec();
                order.rotate_left(rotation);
                if reversed {
                    order.reverse();
                }
                let mut d = dedup(order.into_iter().map(|(s, r)| (s.to_owned(), r)));
                assert_eq!(d.rows.len(), 5, "three versions of a, b, c");
                assert_eq!(d.duplicates.len(), 2);
                assert!(d
                    .rows
                    .iter()
                    .all(|r| r.conflict == (r.event.stream_key == "a")));
                assert_eq!(d.conflicts.len(), 1);
                let conflict = &mut d.conflicts[0];
                let hashes: Vec<&str> = conflict.versions.iter().map(|v| v.0.as_str()).collect();
                let mut sorted = hashes.clone();
                sorted.sort();
                assert_eq!(hashes, sorted, "versions in hash order");
                let a3_sources = conflict
                    .versions
                    .iter_mut()
                    .find(|v| v.0 == a3.event.hash)
                    .map(|v| {
                        v.1.sort();
                        v.1.clone()
                    });
                assert_eq!(a3_sources, Some(vec!["f1".to_owned(), "f4".to_owned()]));
                // The rows do not depend on the order; the sources within a
                // version and the duplicates list follow it.
                d.duplicates.clear();
                for v in &mut d.conflicts[0].versions {
                    v.1.sort();
                }
                match &first {
                    None => first = Some(d),
                    Some(f) => assert_eq!(&d, f, "rotation {rotation}, reversed {reversed}"),
                }
            }
        }
    }
}
