//! Object keys: a pure function of a file's content.
//!
//! ```text
//! events/{table}/date={YYYY-MM-DD}/{layer}-{digest}.parquet
//!   table  = account | transfer | subscription   (the event's stream)
//!   date   = UTC date of occurred_at_ms           (hive-style, so DuckDB and
//!                                                  DataFusion can prune on it)
//!   layer  = i (written by ingest) | c (written by compaction)
//!   digest = first 128 bits, hex, of SHA-256 over the layout version, the
//!            partition and each row's (event_id, hash, conflict) in row order
//! ```
//!
//! Because rows are deduplicated and sorted before the digest is taken, a
//! redelivered batch (in any order) maps to the same keys; because the bytes
//! are a deterministic function of the same rows, it rewrites identical bytes.

use ledger_events::Stream;
use sha2::{Digest, Sha256};

use crate::dedup::Row;
use crate::{LAKE_EVENTS_PREFIX, LAKE_LAYOUT_VERSION};

/// One table of the lake per stream kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Account,
    Transfer,
    /// Reserved: schema v1 defines no subscription kinds yet.
    Subscription,
}

impl Table {
    pub const ALL: &'static [Table] = &[Table::Account, Table::Transfer, Table::Subscription];

    pub fn of(stream: Stream) -> Table {
        match stream {
            Stream::Account => Table::Account,
            Stream::Transfer => Table::Transfer,
            Stream::Subscription => Table::Subscription,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Table::Account => "account",
            Table::Transfer => "transfer",
            Table::Subscription => "subscription",
        }
    }

    pub fn parse(s: &str) -> Option<Table> {
        Table::ALL.iter().copied().find(|t| t.as_str() == s)
    }
}

/// A table and a UTC day: the unit of partitioning and of compaction.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    pub table: Table,
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
}

impl Partition {
    pub fn of(row: &Row) -> Partition {
        Partition {
            table: Table::of(row.event.stream),
            date: date_of_ms(row.event.occurred_at_ms),
        }
    }

    /// The "directory" holding this partition's files, with a trailing `/`.
    pub fn prefix(&self) -> String {
        format!(
            "{LAKE_EVENTS_PREFIX}/{}/date={}/",
            self.table.as_str(),
            self.date
        )
    }
}

/// Who wrote a file. Both layers hold the same columns; readers read both and
/// dedup (see docs/LAKE.md), so the layer only tells compaction what to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileLayer {
    Ingest,
    Compacted,
}

impl FileLayer {
    pub fn tag(self) -> &'static str {
        match self {
            FileLayer::Ingest => "i",
            FileLayer::Compacted => "c",
        }
    }
}

/// A key taken apart by [`parse_object_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    pub partition: Partition,
    pub layer: FileLayer,
    pub digest: String,
}

/// The UTC calendar date (`YYYY-MM-DD`) of a Unix time in milliseconds.
/// Pure arithmetic (Howard Hinnant's civil-from-days), so no clock or date
/// crate is needed in the wasm core.
pub fn date_of_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Digest of a file's identity: its partition and its rows' (event_id, hash,
/// conflict), in order. The conflict flag is part of it because it is part of
/// the bytes: the same rows with a different flag must not share a key.
pub fn file_digest(partition: &Partition, rows: &[Row]) -> String {
    let mut digest = FileDigest::new(partition);
    rows.iter().for_each(|row| digest.push(row));
    digest.finish()
}

/// [`file_digest`] a row at a time: a reader checks a file's key with it
/// (`parquet_io::read_lake_file`) as the rows go by.
pub struct FileDigest(Sha256);

impl FileDigest {
    pub fn new(partition: &Partition) -> FileDigest {
        FileDigest::of_layout(partition, LAKE_LAYOUT_VERSION)
    }

    /// The digest a file of `layout` (one of `LAKE_LAYOUTS_READABLE`) was
    /// named by.
    pub fn of_layout(partition: &Partition, layout: &str) -> FileDigest {
        let mut h = Sha256::new();
        h.update(layout.as_bytes());
        h.update(b"\n");
        h.update(partition.table.as_str().as_bytes());
        h.update(b"\n");
        h.update(partition.date.as_bytes());
        h.update(b"\n");
        FileDigest(h)
    }

    pub fn push(&mut self, row: &Row) {
        let h = &mut self.0;
        h.update(row.event.event_id.as_bytes());
        h.update(b" ");
        h.update(row.event.hash.as_bytes());
        h.update(if row.conflict { b" 1\n" } else { b" 0\n" });
    }

    pub fn finish(self) -> String {
        ledger_events::event::hex(&self.0.finalize()[..16])
    }
}

/// `events/{table}/date={date}/{layer}-{digest}.parquet`.
pub fn object_key(partition: &Partition, layer: FileLayer, digest: &str) -> String {
    format!("{}{}-{digest}.parquet", partition.prefix(), layer.tag())
}

/// Inverse of [`object_key`]; `None` for any key that is not a lake file
/// (temporary uploads, other tools' files), which readers must ignore.
pub fn parse_object_key(key: &str) -> Option<KeyParts> {
    let rest = key.strip_prefix(LAKE_EVENTS_PREFIX)?.strip_prefix('/')?;
    let mut parts = rest.split('/');
    let table = Table::parse(parts.next()?)?;
    let date = parts.next()?.strip_prefix("date=")?;
    let file = parts.next()?;
    if parts.next().is_some() || !is_date(date) {
        return None;
    }
    let stem = file.strip_suffix(".parquet")?;
    let (tag, digest) = stem.split_once('-')?;
    let layer = match tag {
        "i" => FileLayer::Ingest,
        "c" => FileLayer::Compacted,
        _ => return None,
    };
    if digest.len() != 32
        || !digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    Some(KeyParts {
        partition: Partition {
            table,
            date: date.to_owned(),
        },
        layer,
        digest: digest.to_owned(),
    })
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(date_of_ms(0), "1970-01-01");
        assert_eq!(date_of_ms(86_399_999), "1970-01-01");
        assert_eq!(date_of_ms(86_400_000), "1970-01-02");
        // The golden vectors' first event: 2026-01-01T00:00:01Z.
        assert_eq!(date_of_ms(1_767_225_601_000), "2026-01-01");
        assert_eq!(date_of_ms(1_767_225_599_999), "2025-12-31");
        // Leap days, and the century rules.
        assert_eq!(date_of_ms(951_782_400_000), "2000-02-29");
        assert_eq!(date_of_ms(1_709_164_800_000), "2024-02-29");
        assert_eq!(date_of_ms(4_107_542_400_000), "2100-03-01");
    }

    #[test]
    fn keys_round_trip_and_foreign_keys_are_ignored() {
        let p = Partition {
            table: Table::Transfer,
            date: "2026-01-01".into(),
        };
        let d = "0123456789abcdef0123456789abcdef";
        let k = object_key(&p, FileLayer::Compacted, d);
        assert_eq!(
            k,
            "events/transfer/date=2026-01-01/c-0123456789abcdef0123456789abcdef.parquet"
        );
        let parts = parse_object_key(&k).unwrap();
        assert_eq!(
            (parts.partition, parts.layer, parts.digest.as_str()),
            (p, FileLayer::Compacted, d)
        );
        for bad in [
            "events/transfer/date=2026-01-01/c-0123.parquet",
            "events/transfer/date=2026-01-01/x-0123456789abcdef0123456789abcdef.parquet",
            "events/transfer/date=2026-01-01/c-0123456789abcdef0123456789abcdef.parquet.tmp",
            "events/ledger/date=2026-01-01/c-0123456789abcdef0123456789abcdef.parquet",
            "events/transfer/2026-01-01/c-0123456789abcdef0123456789abcdef.parquet",
            "other/transfer/date=2026-01-01/c-0123456789abcdef0123456789abcdef.parquet",
        ] {
            assert_eq!(parse_object_key(bad), None, "{bad}");
        }
    }
}
