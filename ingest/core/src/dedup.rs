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
    // event_id -> hash -> (row, sources). BTreeMaps make the iteration order,
    // and therefore the output, independent of the input order.
    let mut groups: BTreeMap<String, BTreeMap<String, (Row, Vec<String>)>> = BTreeMap::new();
    let mut duplicates = Vec::new();
    for (source, row) in inputs {
        let versions = groups.entry(row.event.event_id.clone()).or_default();
        match versions.get_mut(&row.event.hash) {
            Some((kept, sources)) => {
                kept.conflict |= row.conflict;
                duplicates.push(Duplicate {
                    source: source.clone(),
                    event_id: row.event.event_id.clone(),
                });
                sources.push(source);
            }
            None => {
                versions.insert(row.event.hash.clone(), (row, vec![source]));
            }
        }
    }
    let mut rows = Vec::new();
    let mut conflicts = Vec::new();
    for (event_id, versions) in groups {
        let conflict = versions.len() > 1;
        if conflict {
            conflicts.push(Conflict {
                event_id,
                versions: versions
                    .iter()
                    .map(|(h, (_, sources))| (h.clone(), sources.clone()))
                    .collect(),
            });
        }
        for (_, (mut row, _)) in versions {
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
    rows.sort_by(|a, b| {
        let (a, b) = (&a.event, &b.event);
        (a.stream, &a.stream_key, a.seq, &a.hash).cmp(&(b.stream, &b.stream_key, b.seq, &b.hash))
    });
}
