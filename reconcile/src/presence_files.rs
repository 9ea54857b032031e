//! The streams of each proved lake file ([`crate::presence`]) on disk:
//! immutable files beside the checkpoint, so that a night writes the
//! streams of the files it read and no more (a lake file's streams never
//! change: a file is written once under a content-derived key).
//!
//! `FILE.<16 hex>.prs`: `LDGRPRES`, the format version (u32 LE), the
//! [`Presence`] sections of the lake files it covers, and the SHA-256 of
//! everything before it (the name's hex is its start). The checkpoint names
//! each with its SHA-256 and the lake files it covers ([`StreamsRef`]): one
//! altered, truncated or missing is refused (exit 2) when it is read, which
//! is only when a lake file it covers is gone (`crate::custody`) or when it
//! is merged.
//!
//! Each run that read files not yet covered writes one such file for them.
//! A file whose lake files are mostly gone (compacted away) is rewritten
//! with the ones left, or dropped when none is, and the newest two are
//! merged while the newest holds at least half as many fingerprints as the
//! one before: O(log n) files, each entry rewritten O(log n) times.

use std::collections::{BTreeSet, HashSet};
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::archive::place;
use crate::codec::{Reader, Writer};
use crate::presence::Presence;

const MAGIC: &[u8; 8] = b"LDGRPRES";
const VERSION: u32 = 1;

/// What the checkpoint says of one file of streams.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamsRef {
    /// File name, in the checkpoint's directory.
    pub file: String,
    /// SHA-256 of everything before its trailing digest, lower-case hex.
    pub sha256: String,
    /// The lake files whose streams it holds, sorted.
    pub keys: Vec<String>,
    /// How many fingerprints it holds (its size, for the merge rule).
    pub fingerprints: u64,
}

/// The files of streams a checkpoint names, in its directory.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    pub dir: std::path::PathBuf,
    pub refs: Vec<StreamsRef>,
}

impl Stored {
    /// The streams they hold for the lake files `keys` ([`streams_of`]).
    pub fn of(&self, keys: &BTreeSet<&str>) -> Result<Presence, String> {
        streams_of(&self.dir, &self.refs, keys)
    }
}

/// Reads the file `r` names in `dir`, checking its digest and that it
/// covers exactly the lake files `r` says.
pub fn read(dir: &Path, r: &StreamsRef) -> Result<Presence, String> {
    let path = dir.join(&r.file);
    let err = |why: String| format!("streams file {}: {why}", path.display());
    let bytes = std::fs::read(&path).map_err(|e| err(format!("cannot read: {e}")))?;
    if bytes.len() < MAGIC.len() + 4 + 32 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(err("not a streams file (no LDGRPRES header)".into()));
    }
    let (content, digest) = bytes.split_at(bytes.len() - 32);
    if ledger_events::event::hex(&Sha256::digest(content)) != r.sha256
        || ledger_events::event::hex(digest) != r.sha256
    {
        return Err(err(
            "damaged: its SHA-256 is not the one the checkpoint names".into(),
        ));
    }
    let version = u32::from_le_bytes(content[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(err(format!("format version {version}")));
    }
    let mut reader = Reader::new(&content[12..], 0);
    let p = Presence::read(&mut reader).map_err(|e| err(format!("damaged: {e}")))?;
    if !reader.at_end() {
        return Err(err("damaged: bytes after the last file".into()));
    }
    if !p.files().eq(r.keys.iter().map(String::as_str)) || p.len() != r.fingerprints {
        return Err(err(
            "covers other lake files than the checkpoint says".into()
        ));
    }
    Ok(p)
}

/// Writes `p` as a new file beside `checkpoint` (temporary name, fsync,
/// rename) and returns its reference.
fn write(checkpoint: &Path, p: &Presence) -> Result<StreamsRef, String> {
    let (dir, stem) = place(checkpoint);
    let io = |e: std::io::Error| format!("cannot write a streams file in {}: {e}", dir.display());
    let mut w = Writer::default();
    w.bytes(MAGIC);
    w.u32(VERSION);
    let fingerprints = p.write(&mut w);
    let digest = Sha256::digest(&w.buf);
    let sha256 = ledger_events::event::hex(&digest);
    let tmp = dir.join(format!("{stem}.prs.tmp"));
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(&w.buf).map_err(io)?;
    file.write_all(&digest).map_err(io)?;
    file.sync_all().map_err(io)?;
    let name = format!("{stem}.{}.prs", &sha256[..16]);
    std::fs::rename(&tmp, dir.join(&name)).map_err(io)?;
    Ok(StreamsRef {
        file: name,
        sha256,
        keys: p.files().map(str::to_owned).collect(),
        fingerprints,
    })
}

/// The files of streams the next checkpoint names: `refs` (the last
/// checkpoint's) with the lake files no longer `listed` left out, and
/// `noted` (the streams of the files this run read) for the listed lake
/// files none of them covers; rewritten and merged as the module says.
pub fn save(
    checkpoint: &Path,
    refs: &[StreamsRef],
    noted: &Presence,
    listed: &dyn Fn(&str) -> bool,
) -> Result<Vec<StreamsRef>, String> {
    let dir = place(checkpoint).0;
    let covered: HashSet<&str> = refs
        .iter()
        .flat_map(|r| r.keys.iter().map(String::as_str))
        .filter(|k| listed(k))
        .collect();
    let mut fresh = Presence::default();
    for k in noted.files().filter(|k| listed(k) && !covered.contains(k)) {
        fresh.add(k, noted.get(k));
    }
    let mut kept: Vec<StreamsRef> = Vec::new();
    for r in refs {
        let live = r.keys.iter().filter(|k| listed(k)).count();
        if live == 0 {
            continue; // every lake file it covers is gone
        }
        if live * 2 < r.keys.len() {
            // Mostly gone: what is left joins this run's file.
            let old = read(&dir, r)?;
            for k in r.keys.iter().filter(|k| listed(k)) {
                fresh.add(k, old.get(k));
            }
            continue;
        }
        kept.push(r.clone());
    }
    if fresh.files().next().is_some() {
        kept.push(write(checkpoint, &fresh)?);
    }
    while let [.., older, newer] = kept.as_slice() {
        if newer.fingerprints * 2 < older.fingerprints {
            break;
        }
        let mut merged = read(&dir, older)?;
        merged.absorb(read(&dir, newer)?);
        let n = kept.len();
        kept.truncate(n - 2);
        kept.push(write(checkpoint, &merged)?);
    }
    Ok(kept)
}

/// The streams the files `refs` names hold for the lake files `keys` (the
/// files of streams that cover none of them are not read).
pub fn streams_of(
    dir: &Path,
    refs: &[StreamsRef],
    keys: &BTreeSet<&str>,
) -> Result<Presence, String> {
    let mut out = Presence::default();
    for r in refs {
        if !r.keys.iter().any(|k| keys.contains(k.as_str())) {
            continue;
        }
        let p = read(dir, r)?;
        for k in keys.iter().filter(|k| !p.get(k).is_empty()) {
            out.add(k, p.get(k));
        }
    }
    Ok(out)
}

/// Deletes the files of streams of the checkpoint `checkpoint` that `keep`
/// does not name (merged away, or left by a run that stopped before its
/// checkpoint was written).
pub fn remove_unreferenced(checkpoint: &Path, keep: &[StreamsRef]) -> Result<(), String> {
    crate::archive::remove_unnamed(checkpoint, "prs", keep.iter().map(|r| r.file.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noted(keys: &[&str]) -> Presence {
        let mut p = Presence::default();
        for (i, k) in keys.iter().enumerate() {
            p.add(k, &[i as u64 + 1, 100]);
        }
        p
    }

    #[test]
    fn nights_write_only_new_files_streams_and_drop_what_left_the_lake() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        let first = save(&ckpt, &[], &noted(&["a", "b", "c", "d"]), &all).unwrap();
        assert_eq!(first.len(), 1);
        // A night that read "e" and, again, "a": only "e" is new.
        let second = save(&ckpt, &first, &noted(&["a", "e"]), &all).unwrap();
        assert_eq!(second.len(), 2, "{second:?}");
        assert_eq!(second[0], first[0]);
        assert_eq!(second[1].keys, vec!["e"]);
        let got = streams_of(dir.path(), &second, &["a", "e"].into_iter().collect()).unwrap();
        assert_eq!(got.get("a"), &[1, 100]);
        assert_eq!(got.get("e"), &[2, 100]);
        // "a", "b", "c" compacted into "f": the first file, mostly gone,
        // is rewritten with "d" and merged with the night's.
        let gone = |k: &str| !["a", "b", "c"].contains(&k);
        let third = save(&ckpt, &second, &noted(&["f"]), &gone).unwrap();
        let keys: Vec<&str> = third
            .iter()
            .flat_map(|r| r.keys.iter().map(String::as_str))
            .collect();
        assert_eq!(
            keys.iter().copied().collect::<BTreeSet<_>>(),
            ["d", "e", "f"].into()
        );
        remove_unreferenced(&ckpt, &third).unwrap();
        let left: BTreeSet<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, third.iter().map(|r| r.file.clone()).collect());
        let got = streams_of(dir.path(), &third, &["d"].into_iter().collect()).unwrap();
        assert_eq!(got.get("d"), &[4, 100]);
    }

    #[test]
    fn a_nights_small_file_is_not_merged_into_a_large_one() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        let mut big = Presence::default();
        big.add("c-1", &(0..100).collect::<Vec<u64>>());
        let mut refs = save(&ckpt, &[], &big, &all).unwrap();
        let first = refs[0].clone();
        for night in ["i-1", "i-2", "i-3"] {
            refs = save(&ckpt, &refs, &noted(&[night]), &all).unwrap();
        }
        // The nights merged with each other (2, 2 → 4; 4, 2 → 6), not
        // with the 100 fingerprints of the first.
        assert_eq!(refs.len(), 2, "{refs:?}");
        assert_eq!(refs[0], first);
        assert_eq!((refs[1].keys.len(), refs[1].fingerprints), (3, 6));
    }

    #[test]
    fn a_damaged_or_swapped_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        let refs = save(&ckpt, &[], &noted(&["a", "b"]), &all).unwrap();
        let path = dir.path().join(&refs[0].file);
        let good = std::fs::read(&path).unwrap();
        for at in [0, 9, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            assert!(read(dir.path(), &refs[0]).is_err(), "byte {at}");
        }
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(read(dir.path(), &refs[0]).is_err());
        std::fs::write(&path, &good).unwrap();
        let mut other = refs[0].clone();
        other.keys = vec!["a".into()];
        assert!(read(dir.path(), &other).is_err());
        std::fs::remove_file(&path).unwrap();
        assert!(read(dir.path(), &refs[0]).is_err());
    }
}
