//! A local lake directory: the entries `object_store`'s local listing passes
//! over without a word. A symbolic link whose target is missing (a share
//! that is not mounted) or that may not be opened is left out of a listing,
//! so a tool reading the listing alone would take a missing day, or a
//! missing table, for one that holds nothing.

use std::io;
use std::path::Path;

/// The lake's event tables' directory, relative to the lake's root.
const EVENTS: &str = "events";

/// Whether `key` ends in `.parquet`, in any case.
pub fn is_parquet_name(key: &str) -> bool {
    key.len() >= 8
        && key.is_char_boundary(key.len() - 8)
        && key[key.len() - 8..].eq_ignore_ascii_case(".parquet")
}

/// Whether the directory entry `e` was last modified at least `age` ago:
/// a leftover of a killed writer, not a file a live one (perhaps in another
/// container, whose processes this one cannot see) is still writing.
pub fn untouched_for(e: &std::fs::DirEntry, age: std::time::Duration) -> bool {
    e.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed >= age)
}

/// Why an entry [`unreadable_entry`] names cannot be read, as every tool
/// says it.
pub fn why_unreadable(e: &io::Error) -> String {
    format!(
        "cannot be read ({e}): a symbolic link whose target is missing (a share not mounted?) \
         or may not be opened; the listing would pass over it as if it were not there"
    )
}

/// The first entry of `events/{table}/` under the lake's `root` that would
/// be read and cannot be: `events/` or the table's directory (present, or
/// absent altogether; never there and unreadable), a partition (`date=…`, or
/// any entry ending in `.parquet`), or, in a partition, a file whose key
/// `is_lake_key` accepts or whose name ends in `.parquet`. Only the partition
/// named `only` (its directory's name, `date=…`) when given. Returns the
/// entry's key (relative to `root`, `/`-separated) and why it cannot be read.
pub fn unreadable_entry(
    root: &Path,
    table: &str,
    only: Option<&str>,
    is_lake_key: impl Fn(&str) -> bool,
) -> Option<(String, io::Error)> {
    let dir = root.join(EVENTS).join(table);
    let table_key = format!("{EVENTS}/{table}");
    for (key, path) in [
        (EVENTS.to_owned(), root.join(EVENTS)),
        (table_key.clone(), dir.clone()),
    ] {
        if let Err(e) = std::fs::read_dir(&path) {
            if std::fs::symlink_metadata(&path).is_ok() {
                return Some((key, e));
            }
        }
    }
    // A directory that cannot be listed is the listing's own error.
    let entries = |dir: &Path| -> Vec<std::fs::DirEntry> {
        std::fs::read_dir(dir).map_or(Vec::new(), |r| r.flatten().collect())
    };
    for part in entries(&dir) {
        let name = part.file_name().to_string_lossy().into_owned();
        if only.is_some_and(|only| only != name) {
            continue;
        }
        let at = format!("{table_key}/{name}");
        match std::fs::metadata(part.path()) {
            Err(e) if name.starts_with("date=") || is_parquet_name(&name) => return Some((at, e)),
            Ok(m) if m.is_dir() => {
                for file in entries(&part.path()) {
                    let name = file.file_name().to_string_lossy().into_owned();
                    let key = format!("{at}/{name}");
                    if is_lake_key(&key) || is_parquet_name(&name) {
                        if let Err(e) = std::fs::metadata(file.path()) {
                            return Some((key, e));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn lake() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("events/account/date=2026-01-01")).unwrap();
        dir
    }

    #[test]
    fn a_healthy_lake_has_no_unreadable_entry() {
        let dir = lake();
        std::fs::write(
            dir.path()
                .join("events/account/date=2026-01-01/i-0.parquet"),
            b"x",
        )
        .unwrap();
        assert!(unreadable_entry(dir.path(), "account", None, |_| false).is_none());
        // A table with no directory at all is an empty table, not an error.
        assert!(unreadable_entry(dir.path(), "transfer", None, |_| false).is_none());
    }

    #[test]
    fn dangling_links_are_named_at_every_level() {
        let dir = lake();
        let gone = dir.path().join("gone");
        let link = |at: &str| std::os::unix::fs::symlink(&gone, dir.path().join(at)).unwrap();
        link("events/account/date=2026-01-01/i-1.parquet");
        let (key, _) = unreadable_entry(dir.path(), "account", None, |_| false).unwrap();
        assert_eq!(key, "events/account/date=2026-01-01/i-1.parquet");
        // Another partition is not looked at when one is named.
        assert!(
            unreadable_entry(dir.path(), "account", Some("date=2026-01-02"), |_| false).is_none()
        );
        link("events/account/date=2026-01-02");
        let (key, _) =
            unreadable_entry(dir.path(), "account", Some("date=2026-01-02"), |_| false).unwrap();
        assert_eq!(key, "events/account/date=2026-01-02");
        link("events/transfer");
        let (key, _) = unreadable_entry(dir.path(), "transfer", None, |_| false).unwrap();
        assert_eq!(key, "events/transfer");
        // A file by the lake's naming rule, whatever its suffix says.
        std::fs::remove_file(
            dir.path()
                .join("events/account/date=2026-01-01/i-1.parquet"),
        )
        .unwrap();
        std::fs::remove_file(dir.path().join("events/account/date=2026-01-02")).unwrap();
        link("events/account/date=2026-01-01/odd");
        assert!(unreadable_entry(dir.path(), "account", None, |_| false).is_none());
        let (key, _) =
            unreadable_entry(dir.path(), "account", None, |k| k.ends_with("/odd")).unwrap();
        assert_eq!(key, "events/account/date=2026-01-01/odd");
    }
}
