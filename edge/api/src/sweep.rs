//! The sweeper's input: the reconciler's dangling-transfer list (format v1), and which part of
//! it one run re-drives. Pure: the Worker's cron handler reads the object from R2, calls
//! [`parse_dangling`] and [`window`], re-drives the chosen transfers and stores the
//! [`SweepCursor`]. The format is a contract with reconcile (issue 5): docs/SWEEPER.md.
//!
//! ```json
//! {"version": 1, "generated_at_ms": 1764470000000,
//!  "transfers": [{"transfer_id": "t.acme.k1", "phase": "reserved", "deadline_ms": 1764469000000}]}
//! ```
//!
//! Rules: the document must be a JSON object with `version` 1 (an integer), `generated_at_ms`
//! (an integer) and `transfers` (an array); otherwise the whole document is refused and nothing
//! is re-driven. An entry is re-driven when it is an object whose `transfer_id` is a transfer id
//! `t.{tenant}.{key}`; any other entry is skipped with its reason (a re-drive is always safe, so
//! one bad entry does not hold back the others). Members this version does not use (`phase`,
//! `deadline_ms`, anything else) are ignored, so the writer can add members without a new
//! version. Duplicate ids are re-driven once (first position wins).

use serde_json::Value;

use crate::names;

/// The version of the dangling-list format this code reads.
pub const DANGLING_VERSION: i64 = 1;
/// Where the reconciler writes the list (in the lake bucket, binding `LAKE`).
pub const DANGLING_KEY: &str = "reconcile/dangling/latest.json";
/// Where the sweeper keeps its cursor and its last run's report (same bucket).
pub const SWEEP_STATE_KEY: &str = "sweeper/state.json";
/// A larger list object is refused unread (≈ 10,000 entries at ~100 bytes each).
pub const DANGLING_BYTES_MAX: u64 = 1 << 20;
/// The most transfers one cron run re-drives (and one admin re-drive request accepts).
pub const SWEEP_MAX_PER_RUN: usize = 100;

/// A parsed, valid dangling list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DanglingList {
    pub generated_at_ms: i64,
    /// Valid transfer ids in document order, without duplicates.
    pub transfers: Vec<String>,
    /// Entries that were not re-drivable: (index in `transfers`, reason).
    pub skipped: Vec<(usize, String)>,
}

/// Why a whole document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    TooLarge { size: u64 },
    NotJson(String),
    NotAnObject,
    Missing(&'static str),
    WrongType(&'static str, &'static str),
    UnsupportedVersion(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::TooLarge { size } => {
                write!(f, "{size} bytes; at most {DANGLING_BYTES_MAX} are read")
            }
            ListError::NotJson(e) => write!(f, "not JSON: {e}"),
            ListError::NotAnObject => write!(f, "not a JSON object"),
            ListError::Missing(m) => write!(f, "member `{m}` is missing"),
            ListError::WrongType(m, t) => write!(f, "member `{m}` must be {t}"),
            ListError::UnsupportedVersion(v) => {
                write!(
                    f,
                    "version {v} is not supported (this sweeper reads version {DANGLING_VERSION})"
                )
            }
        }
    }
}

/// Refuses an object by its size before it is read.
pub fn check_size(size: u64) -> Result<(), ListError> {
    if size > DANGLING_BYTES_MAX {
        return Err(ListError::TooLarge { size });
    }
    Ok(())
}

/// Parses and validates a dangling list (format v1).
pub fn parse_dangling(text: &str) -> Result<DanglingList, ListError> {
    check_size(text.len() as u64)?;
    let v: Value = serde_json::from_str(text).map_err(|e| ListError::NotJson(e.to_string()))?;
    let Value::Object(doc) = v else {
        return Err(ListError::NotAnObject);
    };
    let version = doc.get("version").ok_or(ListError::Missing("version"))?;
    match version.as_i64() {
        Some(DANGLING_VERSION) => {}
        Some(_) => return Err(ListError::UnsupportedVersion(version.to_string())),
        None => return Err(ListError::WrongType("version", "an integer")),
    }
    let generated_at_ms = doc
        .get("generated_at_ms")
        .ok_or(ListError::Missing("generated_at_ms"))?
        .as_i64()
        .ok_or(ListError::WrongType("generated_at_ms", "an integer"))?;
    let entries = doc
        .get("transfers")
        .ok_or(ListError::Missing("transfers"))?
        .as_array()
        .ok_or(ListError::WrongType("transfers", "an array"))?;
    let mut transfers: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut skipped = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let id = match e.get("transfer_id") {
            Some(Value::String(id)) => id,
            Some(_) => {
                skipped.push((i, "`transfer_id` is not a string".to_owned()));
                continue;
            }
            None if e.is_object() => {
                skipped.push((i, "`transfer_id` is missing".to_owned()));
                continue;
            }
            None => {
                skipped.push((i, "not an object".to_owned()));
                continue;
            }
        };
        if let Err(why) = names::parse_transfer_id(id) {
            skipped.push((i, why));
            continue;
        }
        if seen.insert(id.clone()) {
            transfers.push(id.clone());
        }
    }
    Ok(DanglingList {
        generated_at_ms,
        transfers,
        skipped,
    })
}

/// Where the next run starts, for the list object with this etag.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SweepCursor {
    pub list_etag: String,
    pub next_index: usize,
}

/// The part of an `n`-entry list one run re-drives: at most `max` entries from the cursor on,
/// and the cursor for the next run. Reaching the end wraps to 0, so a list longer than `max` is
/// covered in ⌈n / max⌉ runs and then again from the top (a re-drive of a terminal transfer does
/// nothing). A new list object (another etag) goes on from the cursor too, while it is inside
/// the new list: restarting at its top would re-drive only its head for ever whenever the
/// reconciler republishes the list more often than the cron covers it.
pub fn window(
    n: usize,
    max: usize,
    list_etag: &str,
    cursor: Option<&SweepCursor>,
) -> (std::ops::Range<usize>, SweepCursor) {
    let max = max.max(1);
    let start = match cursor {
        Some(c) if c.next_index < n => c.next_index,
        _ => 0,
    };
    let end = (start + max).min(n);
    let next_index = if end >= n { 0 } else { end };
    (
        start..end,
        SweepCursor {
            list_etag: list_etag.to_owned(),
            next_index,
        },
    )
}

/// `SWEEP_MAX_PER_RUN` from configuration: 1..=[`SWEEP_MAX_PER_RUN`], default the maximum.
pub fn max_per_run(config: Option<&str>) -> usize {
    config
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|n| *n >= 1)
        .map_or(SWEEP_MAX_PER_RUN, |n| n.min(SWEEP_MAX_PER_RUN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_list_with_unknown_members_and_bad_entries() {
        let doc = r#"{"version": 1, "generated_at_ms": 1764470000000, "writer": "reconcile 0.1",
            "transfers": [
              {"transfer_id": "t.acme.k1", "phase": "reserved", "deadline_ms": 5, "extra": [1]},
              {"transfer_id": "t.acme.k1"},
              {"transfer_id": "acme.k2"},
              {"transfer_id": 7},
              {"phase": "reserved"},
              "t.acme.k3",
              {"transfer_id": "t.globex.k.4"}
            ]}"#;
        let l = parse_dangling(doc).unwrap();
        assert_eq!(l.generated_at_ms, 1764470000000);
        assert_eq!(l.transfers, vec!["t.acme.k1", "t.globex.k.4"]);
        assert_eq!(
            l.skipped.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![2, 3, 4, 5]
        );
        let empty = parse_dangling(r#"{"version":1,"generated_at_ms":0,"transfers":[]}"#).unwrap();
        assert!(empty.transfers.is_empty() && empty.skipped.is_empty());
    }

    #[test]
    fn malformed_documents_are_refused_whole() {
        let cases = [
            ("{not json", "not JSON"),
            ("[1]", "not a JSON object"),
            (
                r#"{"generated_at_ms":1,"transfers":[]}"#,
                "`version` is missing",
            ),
            (
                r#"{"version":"1","generated_at_ms":1,"transfers":[]}"#,
                "integer",
            ),
            (
                r#"{"version":2,"generated_at_ms":1,"transfers":[]}"#,
                "version 2",
            ),
            (
                r#"{"version":1,"transfers":[]}"#,
                "`generated_at_ms` is missing",
            ),
            (
                r#"{"version":1,"generated_at_ms":1.5,"transfers":[]}"#,
                "integer",
            ),
            (
                r#"{"version":1,"generated_at_ms":1}"#,
                "`transfers` is missing",
            ),
            (
                r#"{"version":1,"generated_at_ms":1,"transfers":{"t.acme.k":1}}"#,
                "an array",
            ),
        ];
        for (doc, want) in cases {
            let e = parse_dangling(doc).unwrap_err().to_string();
            assert!(e.contains(want), "{doc}: {e}");
        }
        assert!(check_size(DANGLING_BYTES_MAX).is_ok());
        assert!(matches!(
            check_size(DANGLING_BYTES_MAX + 1),
            Err(ListError::TooLarge { .. })
        ));
    }

    #[test]
    fn windows_cover_a_long_list_then_wrap_and_go_on_in_a_new_list() {
        let (r, c) = window(5, 2, "e1", None);
        assert_eq!((r, c.next_index), (0..2, 2));
        let (r, c) = window(5, 2, "e1", Some(&c));
        assert_eq!((r, c.next_index), (2..4, 4));
        let (r, c) = window(5, 2, "e1", Some(&c));
        assert_eq!((r, c.next_index), (4..5, 0));
        let (r, _) = window(5, 2, "e1", Some(&c));
        assert_eq!(r, 0..2);
        // Another list object (new etag) goes on from the cursor, so a list republished at
        // every run still reaches its tail; a cursor past the end starts from the top.
        let c = SweepCursor {
            list_etag: "e1".into(),
            next_index: 4,
        };
        let (r, next) = window(5, 2, "e2", Some(&c));
        assert_eq!(
            (r, next.list_etag.as_str(), next.next_index),
            (4..5, "e2", 0)
        );
        assert_eq!(window(3, 2, "e1", Some(&c)).0, 0..2);
        let mut cursor: Option<SweepCursor> = None;
        let mut seen = std::collections::BTreeSet::new();
        for run in 0..3 {
            let (r, next) = window(6, 2, &format!("e{run}"), cursor.as_ref());
            seen.extend(r);
            cursor = Some(next);
        }
        assert_eq!(seen.len(), 6, "three runs, three lists: every entry");
        assert_eq!(window(0, 2, "e1", None).0, 0..0);
        assert_eq!(window(3, 100, "e1", None).0, 0..3);
    }

    #[test]
    fn the_bound_is_configurable_only_downwards() {
        assert_eq!(max_per_run(None), SWEEP_MAX_PER_RUN);
        assert_eq!(max_per_run(Some("2")), 2);
        assert_eq!(max_per_run(Some("0")), SWEEP_MAX_PER_RUN);
        assert_eq!(max_per_run(Some("100000")), SWEEP_MAX_PER_RUN);
        assert_eq!(max_per_run(Some("x")), SWEEP_MAX_PER_RUN);
    }
}
