//! Proved files that left the lake: replaced by compaction, or lost.
//!
//! A resumed run does not re-read the files its checkpoint proved, so a
//! proved file that is gone (or rewritten in place: the version proved is
//! gone) could take rows with it that the checkpoint's verdicts still count,
//! while a full proof of the lake as it is would not find them. Compaction
//! is the one writer that deletes lake files, and before it deletes any it
//! writes a manifest of the versions it read and the files that now hold
//! their rows (docs/LAKE.md, "Compaction manifests"). So each gone version
//! is either **accounted for** (a chain of manifests leads from it to files
//! in the lake as compaction wrote them: its rows are there, and the proof
//! finds them again as copies, `crate::copies`) or **lost**. A run with a
//! lost version proves the lake from its first event, whose verdicts are a
//! full proof's by construction; the run names what was lost.
//!
//! What this cannot see is a compactor that lies (a manifest that names an
//! output without some of its inputs' rows): the streams whose rows it cut
//! are re-proved when any of their rows are in the output (they are copies
//! short of their tails), and their proved tails judged
//! (`crate::retained`); a stream cut from the output whole is seen by
//! `--full` with the checkpoint.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ledger_ingest::{parse_object_key, unaccounted, Unaccounted};

use crate::lake::{Error, Lake, LakeFileInfo};

/// What became of the file versions a checkpoint proved.
#[derive(Debug, Default)]
pub struct Custody {
    /// Proved versions no longer in the lake as proved (deleted, or the key
    /// now holds another version).
    pub gone: usize,
    /// Those that no chain of compaction manifests accounts for, in key order.
    pub lost: Vec<Unaccounted>,
    /// Objects under `manifests/` that are not manifests this build reads
    /// (each with why): ignored, so what they would account for is lost.
    pub unreadable: Vec<String>,
}

/// The proved versions (`proved`: key → stamp) that are not listed now
/// (`listed`: every lake file of every table), in key order.
pub fn gone<'a>(
    proved: &'a BTreeMap<String, String>,
    listed: &HashMap<&str, &str>,
) -> Vec<(&'a str, &'a str)> {
    proved
        .iter()
        .filter(|(k, s)| listed.get(k.as_str()) != Some(&s.as_str()))
        .map(|(k, s)| (k.as_str(), s.as_str()))
        .collect()
}

/// Decides [`Custody`] for the versions `proved` against the lake's files
/// now (`tables`: every table's listing), reading the manifests of the
/// partitions that lost a proved version (none when nothing is gone).
pub async fn check(
    lake: &Lake,
    proved: &BTreeMap<String, String>,
    tables: &[&[LakeFileInfo]],
) -> Result<Custody, Error> {
    let stamps: Vec<(&str, String)> = tables
        .iter()
        .flat_map(|files| files.iter())
        .map(|f| (f.key.as_str(), f.stamp()))
        .collect();
    let listed: HashMap<&str, &str> = stamps.iter().map(|(k, s)| (*k, s.as_str())).collect();
    let gone = gone(proved, &listed);
    if gone.is_empty() {
        return Ok(Custody::default());
    }
    let partitions: BTreeSet<_> = gone
        .iter()
        .filter_map(|(k, _)| parse_object_key(k).map(|p| p.partition))
        .collect();
    let (manifests, unreadable) = lake.manifests(&partitions).await?;
    Ok(Custody {
        gone: gone.len(),
        lost: unaccounted(gone, &listed, &manifests),
        unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_gone_when_its_key_is_not_listed_or_holds_another() {
        let proved: BTreeMap<String, String> = [
            ("events/account/date=2026-01-01/i-a.parquet", "10:a"),
            ("events/account/date=2026-01-01/i-b.parquet", "10:b"),
            ("events/account/date=2026-01-01/i-c.parquet", "10:c"),
        ]
        .into_iter()
        .map(|(k, s)| (k.to_owned(), s.to_owned()))
        .collect();
        let listed: HashMap<&str, &str> = [
            ("events/account/date=2026-01-01/i-a.parquet", "10:a"),
            ("events/account/date=2026-01-01/i-b.parquet", "10:b2"),
            ("events/account/date=2026-01-01/c-d.parquet", "30:d"),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            gone(&proved, &listed),
            vec![
                ("events/account/date=2026-01-01/i-b.parquet", "10:b"),
                ("events/account/date=2026-01-01/i-c.parquet", "10:c"),
            ]
        );
    }
}
