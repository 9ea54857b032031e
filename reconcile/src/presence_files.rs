//! The streams of each proved lake file ([`crate::presence`]) on disk:
//! immutable files beside the checkpoint, so that a night writes the
//! streams of the files it read and no more (a lake file's streams never
//! change: a file is written once under a content-derived key).
//!
//! A file of streams (`{checkpoint}.{16 hex}.prs`), version 3:
//!
//! ```text
//! header  := "LDGRPRES" version:u32
//! sets    := { fp:u64* rows:u32* }*      one per lake file: fps sorted and distinct,
//!                                        then the rows of each (as many, each > 0)
//! index   := files:u64 { key:str offset:u64 fps:u64 sha:[u8;32] }*    keys in order
//! footer  := index_offset:u64 index_len:u64 index_sha:[u8;32] "LDGRPRS3"
//! ```
//!
//! A set's rows are how many rows of the lake file each noted stretch
//! holds (`presence::Noter`; a fingerprint noted more than once in a file,
//! the sum), which the keyed scans check (`crate::keyed`): 12 bytes a note,
//! four more than version 2's. Version 2 is version 3 without the rows
//! (`fp:u64*` a set, the footer's magic `LDGRPRS2`), written by checkpoint
//! versions 9 to 16: still read (a night reads the files of streams of
//! the checkpoint it sets aside to account for what compaction replaced,
//! `crate::custody`), its sets not counted. A file is written in version 3
//! when every set in it is counted, in version 2 when none is (what is
//! left of a version-1 or version-2 file, rewritten). A rewrite or a merge
//! that mixed the two would write every set in version 2, the counted
//! sets' rows lost for good: none does, as no checkpoint this reconciler
//! resumes from names a file before version 3 (one before checkpoint
//! version 17 is set aside, `checkpoint::ProofState::older_rules`, and its
//! files of streams are not carried over); should one, the checkpoint is
//! not written (an error that asks for `--full`).
//!
//! The checkpoint names each with its index's SHA-256 (the name's hex is its
//! start) and the lake files it covers ([`StreamsRef`]), and each set is
//! checked against its own SHA-256 when it is read: a night after compaction
//! reads the index and the sets of the replaced lake files only, not the
//! whole file (at 50M events the full proof's file is 74 MB). The reference
//! also fixes the file's length (from the lake files it covers and how many
//! fingerprints it holds), checked before anything past the header is read.
//! One altered, truncated, swapped or missing is refused (exit 2) when it
//! is read, which is only when a lake file it covers is gone
//! (`crate::custody`), when it is merged (every set), or when it is
//! rewritten (the sets of the lake files left). Version 1 (the sets one
//! after another and the SHA-256 of the whole file, read whole; checkpoint
//! version 8) is still read, not counted either.
//!
//! Each run that read files not yet covered writes one such file for them.
//! A file whose lake files are mostly gone (compacted away) is rewritten
//! with the ones left, or dropped when none is, and the newest two are
//! merged while the newest holds at least half as many fingerprints as the
//! one before: O(log n) files, each entry rewritten O(log n) times.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::archive::{open_sized, place, read_at, Beside};
use crate::codec::{Reader, Writer};
use crate::presence::{read_set, Counted, Presence};

const MAGIC: &[u8; 8] = b"LDGRPRES";
/// 1: the sets one after another and the SHA-256 of the whole file (read
/// whole). 2: the sets, an index with a SHA-256 per set, a footer. 3: each
/// set with the rows of each of its stretches.
const VERSION: u32 = 3;
/// Version 2: version 3 without the rows (sets read from one are written
/// in it again, not counted).
const UNCOUNTED: u32 = 2;
const FOOTER_MAGIC: &[u8; 8] = b"LDGRPRS3";
const UNCOUNTED_FOOTER_MAGIC: &[u8; 8] = b"LDGRPRS2";
const HEADER: u64 = 12;
const FOOTER: u64 = 8 + 8 + 32 + 8;

/// What the checkpoint says of one file of streams.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamsRef {
    /// File name, in the checkpoint's directory.
    pub file: String,
    /// SHA-256 of its index (version 1: of everything before its trailing
    /// digest), lower-case hex.
    pub sha256: String,
    /// The lake files whose streams it holds, sorted.
    pub keys: Vec<String>,
    /// How many fingerprints it holds (its size, for the merge rule).
    pub fingerprints: u64,
    /// Its sets hold each stream with the seq its stretch of rows in the
    /// lake file starts at (`presence::fingerprint_at`); false (a file a
    /// checkpoint before version 11 named): the stream alone
    /// (`presence::fingerprint`). Files of the two kinds are never merged.
    #[serde(default)]
    pub starts: bool,
}

/// The files of streams a checkpoint names, in its directory.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    pub dir: std::path::PathBuf,
    pub refs: Vec<StreamsRef>,
}

impl Stored {
    /// The streams they hold for the lake files `keys` ([`streams_of`]).
    pub fn of(&self, keys: &BTreeSet<&str>) -> Result<Sets, String> {
        streams_of(&self.dir, &self.refs, keys)
    }
}

/// The sets of some lake files, and which of them hold streams alone (no
/// seq: [`StreamsRef::starts`] false).
#[derive(Debug, Default)]
pub struct Sets {
    pub presence: Presence,
    pub plain: HashSet<String>,
}

/// Where one lake file's set is in a version-2 file.
struct Entry {
    offset: u64,
    fps: u64,
    sha: [u8; 32],
}

/// One file of streams, opened: its index read and checked against the
/// checkpoint's reference (version 2), or its sets read whole (version 1).
enum Opened {
    Indexed {
        path: PathBuf,
        file: File,
        entries: BTreeMap<String, Entry>,
        /// Version 3: each set with its stretches' rows.
        counted: bool,
    },
    Whole(Presence),
}

/// The bytes of a set of `fps` fingerprints in layout `version` (2 or 3);
/// `None` past `u64`.
fn set_bytes(fps: u64, version: u32) -> Option<u64> {
    fps.checked_mul(if version == VERSION { 8 + 4 } else { 8 })
}

impl Opened {
    /// Opens the file `r` names in `dir`: its header, and its index (checked
    /// against `r`'s SHA-256, and to cover exactly the lake files `r` says,
    /// with as many fingerprints).
    fn open(dir: &Path, r: &StreamsRef) -> Result<Opened, String> {
        let path = dir.join(&r.file);
        let err = |why: String| format!("streams file {}: {why}", path.display());
        let (file, len) = open_sized(&path).map_err(err)?;
        let header = read_at(&file, 0, HEADER.min(len)).map_err(|e| err(e.to_string()))?;
        if header.len() < HEADER as usize || &header[..MAGIC.len()] != MAGIC {
            return Err(err("not a streams file (no LDGRPRES header)".into()));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        // The reference fixes the file's length: a file of another length
        // is refused before anything past its header is read.
        match sizes(r, version) {
            Some((whole, _)) if whole == len => {}
            Some((whole, _)) => {
                return Err(err(format!(
                    "damaged: {len} bytes where the checkpoint's reference makes {whole} \
                     (truncated, extended or swapped)"
                )));
            }
            None => return Err(err(format!("format version {version}"))),
        }
        let opened = match version {
            1 => Opened::Whole(read_whole(&file, len, r).map_err(err)?),
            UNCOUNTED | VERSION => Opened::Indexed {
                entries: read_index(&file, len, r, version).map_err(err)?,
                path: path.clone(),
                file,
                counted: version == VERSION,
            },
            version => return Err(err(format!("format version {version}"))),
        };
        let (keys, fps): (Vec<&str>, u64) = match &opened {
            Opened::Indexed { entries, .. } => (
                entries.keys().map(String::as_str).collect(),
                entries.values().map(|e| e.fps).sum(),
            ),
            Opened::Whole(p) => (p.files().collect(), p.len()),
        };
        if !keys.iter().copied().eq(r.keys.iter().map(String::as_str)) || fps != r.fingerprints {
            return Err(err(
                "covers other lake files than the checkpoint says".into()
            ));
        }
        Ok(opened)
    }

    /// The streams of the lake file `key` (none if it does not cover it)
    /// and the rows of each (version 3), the set checked against its
    /// SHA-256.
    fn set(&self, key: &str) -> Result<Counted, String> {
        match self {
            Opened::Whole(p) => Ok(p.counted(key)),
            Opened::Indexed {
                path,
                file,
                entries,
                counted,
            } => {
                let Some(e) = entries.get(key) else {
                    return Ok(Counted::default());
                };
                let err = |why: String| {
                    format!("streams file {}: the set of {key}: {why}", path.display())
                };
                let version = if *counted { VERSION } else { UNCOUNTED };
                let len = set_bytes(e.fps, version).expect("checked with the index");
                let bytes = read_at(file, e.offset, len).map_err(|e| err(e.to_string()))?;
                if Sha256::digest(&bytes).as_slice() != e.sha {
                    return Err(err("damaged: its SHA-256 does not match the index".into()));
                }
                let mut r = Reader::new(&bytes, 0);
                let damaged = |e: String| err(format!("damaged: {e}"));
                let fps = read_set(key, &mut r, e.fps as usize).map_err(damaged)?;
                let rows = if *counted {
                    Some(read_rows(key, &mut r, fps.len()).map_err(damaged)?)
                } else {
                    None
                };
                Ok(Counted { fps, rows })
            }
        }
    }

    /// Every set it holds.
    fn all(&self) -> Result<Presence, String> {
        match self {
            Opened::Whole(p) => Ok(p.clone()),
            Opened::Indexed { entries, .. } => {
                let mut p = Presence::default();
                for key in entries.keys() {
                    let set = self.set(key)?;
                    p.add(key, &set.fps, set.rows.as_deref());
                }
                Ok(p)
            }
        }
    }
}

/// Reads the rows of each of the `n` stretches of a set of `file`: none
/// holds no row (anything else is damage).
fn read_rows(file: &str, r: &mut Reader<'_>, n: usize) -> Result<Vec<u32>, String> {
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        match r.u32()? {
            0 => return Err(format!("a stretch of {file} noted with no row")),
            k => rows.push(k),
        }
    }
    Ok(rows)
}

/// The length of the file `r` names in layout `version`, and of its index
/// (versions 2 and 3): both follow from the lake files it covers and how many
/// fingerprints it holds. `None`: a version this reconciler does not read
/// (or lengths past `u64`).
fn sizes(r: &StreamsRef, version: u32) -> Option<(u64, u64)> {
    let keys: u64 = r.keys.iter().map(|k| k.len() as u64).sum();
    let n = r.keys.len() as u64;
    match version {
        // count { key:str n:u64 } fp:u64* ... digest
        1 => {
            let body = 8u64.checked_add(keys)?.checked_add(n.checked_mul(4 + 8)?)?;
            Some((
                HEADER
                    .checked_add(body)?
                    .checked_add(r.fingerprints.checked_mul(8)?)?
                    .checked_add(32)?,
                0,
            ))
        }
        // count { key:str offset:u64 fps:u64 sha:[u8;32] }
        UNCOUNTED | VERSION => {
            let index = 8u64
                .checked_add(keys)?
                .checked_add(n.checked_mul(4 + 8 + 8 + 32)?)?;
            let whole = HEADER
                .checked_add(set_bytes(r.fingerprints, version)?)?
                .checked_add(index)?
                .checked_add(FOOTER)?;
            Some((whole, index))
        }
        _ => None,
    }
}

/// A version-1 file, read whole and checked against `r`'s SHA-256.
fn read_whole(file: &File, len: u64, r: &StreamsRef) -> Result<Presence, String> {
    let bytes = read_at(file, 0, len).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() < MAGIC.len() + 4 + 32 {
        return Err("damaged: truncated".into());
    }
    let (content, digest) = bytes.split_at(bytes.len() - 32);
    if ledger_events::event::hex(&Sha256::digest(content)) != r.sha256
        || ledger_events::event::hex(digest) != r.sha256
    {
        return Err("damaged: its SHA-256 is not the one the checkpoint names".into());
    }
    let mut reader = Reader::new(&content[HEADER as usize..], 0);
    let p = Presence::read(&mut reader).map_err(|e| format!("damaged: {e}"))?;
    if !reader.at_end() {
        return Err("damaged: bytes after the last file".into());
    }
    Ok(p)
}

/// A version-2 or 3 file's index, found by its footer and checked against
/// `r`'s SHA-256; every set inside the file, the keys in order.
fn read_index(
    file: &File,
    len: u64,
    r: &StreamsRef,
    version: u32,
) -> Result<BTreeMap<String, Entry>, String> {
    let magic_of = if version == VERSION {
        FOOTER_MAGIC
    } else {
        UNCOUNTED_FOOTER_MAGIC
    };
    if len < HEADER + FOOTER {
        return Err("damaged: truncated".into());
    }
    let footer = read_at(file, len - FOOTER, FOOTER).map_err(|e| e.to_string())?;
    let (at, rest) = footer.split_at(8);
    let (n, rest) = rest.split_at(8);
    let (sha, magic) = rest.split_at(32);
    if magic != magic_of || ledger_events::event::hex(sha) != r.sha256 {
        return Err(
            "damaged: its footer does not match the checkpoint (altered, truncated or swapped)"
                .into(),
        );
    }
    let at = u64::from_le_bytes(at.try_into().expect("8 bytes"));
    let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
    let index_len = sizes(r, version).map(|(_, index)| index);
    if Some(n) != index_len || at.checked_add(n) != Some(len - FOOTER) {
        return Err("damaged: index out of place".into());
    }
    let index = read_at(file, at, n).map_err(|e| e.to_string())?;
    if Sha256::digest(&index).as_slice() != sha {
        return Err("damaged: its index's SHA-256 does not match".into());
    }
    let bad = |why: String| format!("damaged index: {why}");
    let mut ix = Reader::new(&index, 0);
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    for _ in 0..ix.count().map_err(bad)? {
        let key = ix.str().map_err(bad)?.to_owned();
        let e = Entry {
            offset: ix.u64().map_err(bad)?,
            fps: ix.u64().map_err(bad)?,
            sha: ix.take(32).map_err(bad)?.try_into().expect("32 bytes"),
        };
        let end = set_bytes(e.fps, version).and_then(|b| b.checked_add(e.offset));
        if e.offset < HEADER || end.is_none_or(|end| end > at) {
            return Err(bad(format!("the set of {key} out of place")));
        }
        if entries
            .last_key_value()
            .is_some_and(|(last, _)| *last >= key)
        {
            return Err(bad("lake files out of order".into()));
        }
        entries.insert(key, e);
    }
    if !ix.at_end() {
        return Err(bad("bytes after the last entry".into()));
    }
    Ok(entries)
}

/// Reads every set of the file `r` names in `dir` (checked as [`Opened`]
/// says).
pub fn read(dir: &Path, r: &StreamsRef) -> Result<Presence, String> {
    Opened::open(dir, r)?.all()
}

/// Writes `p` as a new file beside `checkpoint` (temporary name, fsync,
/// rename) and returns its reference (`starts`: what its sets hold): in
/// layout 3 when every set of it is counted, in layout 2 when none is
/// (sets read from one). Never both: the counted sets would lose their
/// counts, so such a file is not written and the checkpoint with it fails
/// (the module says why it cannot be), as for a file of streams it cannot
/// carry over: `--full` writes new ones.
fn write(checkpoint: &Path, p: &Presence, starts: bool) -> Result<StreamsRef, Beside> {
    if !(p.is_counted() || p.is_uncounted()) {
        return Err(Beside::Unreadable(
            "counted and uncounted sets in one file of streams: the counted would lose their \
             counts (a bug in this reconciler; the checkpoint is not written)"
                .into(),
        ));
    }
    write_sets(checkpoint, p, starts).map_err(Beside::Unwritable)
}

/// [`write`], of sets all counted or all not.
fn write_sets(checkpoint: &Path, p: &Presence, starts: bool) -> Result<StreamsRef, String> {
    let (version, footer) = if p.is_counted() {
        (VERSION, FOOTER_MAGIC)
    } else {
        (UNCOUNTED, UNCOUNTED_FOOTER_MAGIC)
    };
    let (dir, stem) = place(checkpoint);
    let io = |e: std::io::Error| format!("cannot write a streams file in {}: {e}", dir.display());
    let tmp = dir.join(format!("{stem}.prs.tmp"));
    let mut out = std::io::BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(io)?);
    out.write_all(MAGIC).map_err(io)?;
    out.write_all(&version.to_le_bytes()).map_err(io)?;
    let mut ix = Writer::default();
    ix.count(p.files().count());
    let (mut offset, mut fingerprints) = (HEADER, 0);
    let mut set = Writer::default();
    for key in p.files() {
        set.buf.clear();
        let counted = p.counted(key);
        let fps = &counted.fps;
        for &fp in fps {
            set.u64(fp);
        }
        if version == VERSION {
            counted.rows.iter().flatten().for_each(|&n| set.u32(n));
        }
        out.write_all(&set.buf).map_err(io)?;
        ix.str(key);
        ix.u64(offset);
        ix.u64(fps.len() as u64);
        ix.bytes(&Sha256::digest(&set.buf));
        offset += set.buf.len() as u64;
        fingerprints += fps.len() as u64;
    }
    let sha: [u8; 32] = Sha256::digest(&ix.buf).into();
    for part in [
        &ix.buf[..],
        &offset.to_le_bytes(),
        &(ix.buf.len() as u64).to_le_bytes(),
        &sha,
        footer,
    ] {
        out.write_all(part).map_err(io)?;
    }
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    let sha256 = ledger_events::event::hex(&sha);
    let name = format!("{stem}.{}.prs", &sha256[..16]);
    std::fs::rename(&tmp, dir.join(&name)).map_err(io)?;
    Ok(StreamsRef {
        file: name,
        sha256,
        keys: p.files().map(str::to_owned).collect(),
        fingerprints,
        starts,
    })
}

/// The files of streams the next checkpoint names: `refs` (the last
/// checkpoint's) but those whose lake files are all gone (no longer
/// `listed`), and a new one of `noted` (the streams of the files this run
/// read) for the listed lake files none of them covers; rewritten and merged
/// as the module says, a rewrite or merge leaving the gone lake files out
/// (a file kept as it is still names its gone ones).
pub fn save(
    checkpoint: &Path,
    refs: &[StreamsRef],
    noted: &Presence,
    listed: &dyn Fn(&str) -> bool,
) -> Result<Vec<StreamsRef>, Beside> {
    use Beside::Unreadable;
    let dir = place(checkpoint).0;
    let covered: HashSet<&str> = refs
        .iter()
        .flat_map(|r| r.keys.iter().map(String::as_str))
        .filter(|k| listed(k))
        .collect();
    let mut fresh = Presence::default();
    for k in noted.files().filter(|k| listed(k) && !covered.contains(k)) {
        fresh.add(k, noted.get(k), noted.rows(k));
    }
    // The sets of files of the older kind (streams alone) stay of that kind.
    let mut plain = Presence::default();
    let mut kept: Vec<StreamsRef> = Vec::new();
    for r in refs {
        let live = r.keys.iter().filter(|k| listed(k)).count();
        if live == 0 {
            continue; // every lake file it covers is gone
        }
        if live * 2 < r.keys.len() {
            // Mostly gone: what is left joins this run's file.
            let old = Opened::open(&dir, r).map_err(Unreadable)?;
            let into = if r.starts { &mut fresh } else { &mut plain };
            for k in r.keys.iter().filter(|k| listed(k)) {
                let set = old.set(k).map_err(Unreadable)?;
                into.add(k, &set.fps, set.rows.as_deref());
            }
            continue;
        }
        kept.push(r.clone());
    }
    for (p, starts) in [(&plain, false), (&fresh, true)] {
        if p.files().next().is_some() {
            kept.push(write(checkpoint, p, starts)?);
        }
    }
    while let [.., older, newer] = kept.as_slice() {
        if newer.fingerprints * 2 < older.fingerprints || older.starts != newer.starts {
            break;
        }
        let starts = newer.starts;
        let mut merged = read(&dir, older).map_err(Unreadable)?;
        merged.absorb(read(&dir, newer).map_err(Unreadable)?);
        merged.retain(|k| listed(k));
        let n = kept.len();
        kept.truncate(n - 2);
        if !merged.is_empty() {
            kept.push(write(checkpoint, &merged, starts)?);
        }
    }
    Ok(kept)
}

/// Opens every file `refs` names in `dir` (its header, length and index,
/// checked against the reference), as a checkpoint is opened: one missing,
/// truncated or swapped is found that night, not on the night that first
/// needs its sets. The sets themselves are checked when read.
pub fn check(dir: &Path, refs: &[StreamsRef]) -> Result<(), String> {
    refs.iter().try_for_each(|r| Opened::open(dir, r).map(drop))
}

/// The streams the files `refs` names hold for the lake files `keys` (the
/// files of streams that cover none of them are not read).
pub fn streams_of(dir: &Path, refs: &[StreamsRef], keys: &BTreeSet<&str>) -> Result<Sets, String> {
    let mut out = Sets::default();
    for r in refs {
        if !r.keys.iter().any(|k| keys.contains(k.as_str())) {
            continue;
        }
        let file = Opened::open(dir, r)?;
        for k in keys {
            let set = file.set(k)?;
            if !r.starts && !set.fps.is_empty() {
                out.plain.insert((*k).to_owned());
            }
            out.presence.add(k, &set.fps, set.rows.as_deref());
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

    /// Two stretches noted in each of `keys`, the i-th holding i + 1 rows
    /// and 7 rows.
    fn noted(keys: &[&str]) -> Presence {
        let mut p = Presence::default();
        for (i, k) in keys.iter().enumerate() {
            p.add(k, &[i as u64 + 1, 100], Some(&[i as u32 + 1, 7]));
        }
        p
    }

    /// [`noted`] without the rows (as a set before layout 3).
    fn uncounted(keys: &[&str]) -> Presence {
        let mut p = Presence::default();
        for (i, k) in keys.iter().enumerate() {
            p.add(k, &[i as u64 + 1, 100], None);
        }
        p
    }

    #[test]
    fn the_rows_of_each_stretch_are_written_read_and_merged() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        // A run's own notes: a fingerprint twice in "a", out of order.
        let mut p = Presence::default();
        p.add("a", &[100, 5, 100], Some(&[2, 1, 3]));
        p.add("b", &[7], Some(&[4]));
        let first = save(&ckpt, &[], &p, &all).unwrap();
        assert_eq!(first[0].fingerprints, 3);
        let bytes = std::fs::read(dir.path().join(&first[0].file)).unwrap();
        assert_eq!(&bytes[8..12], &VERSION.to_le_bytes());
        assert_eq!(&bytes[bytes.len() - 8..], FOOTER_MAGIC);
        let back = read(dir.path(), &first[0]).unwrap();
        assert_eq!(
            (back.get("a"), back.rows("a")),
            (&[5, 100][..], Some(&[1, 5][..]))
        );
        assert_eq!(back.rows("b"), Some(&[4][..]));
        // Merged with a night's (as large): still counted.
        let refs = save(&ckpt, &first, &noted(&["c", "d"]), &all).unwrap();
        assert_eq!(refs.len(), 1, "{refs:?}");
        let got = streams_of(dir.path(), &refs, &["a", "d"].into_iter().collect()).unwrap();
        assert_eq!(got.presence.rows("a"), Some(&[1, 5][..]));
        assert_eq!(
            (got.presence.get("d"), got.presence.rows("d")),
            (&[2, 100][..], Some(&[2, 7][..]))
        );
        // A set that says a stretch holds no row is damage (sealed as the
        // writer seals it, so only the reader's check stands).
        let mut zero = Presence::default();
        zero.add("z", &[1], Some(&[0]));
        let r = write(&ckpt, &zero, true).unwrap();
        let e = read(dir.path(), &r).unwrap_err();
        assert!(e.contains("a stretch of z noted with no row"), "{e}");
    }

    /// A version-2 file of "a", "b", "c" (as a checkpoint before version 17
    /// named) and its reference.
    fn version_2(ckpt: &Path) -> Vec<StreamsRef> {
        save(ckpt, &[], &uncounted(&["a", "b", "c"]), &|_| true).unwrap()
    }

    /// Saving `night` over a version-2 file of "a", "b", "c" with `keep`
    /// fails: the two would share a file, and the counted sets would lose
    /// their counts.
    fn mixing_fails(night: &[&str], keep: &dyn Fn(&str) -> bool) {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        match save(&ckpt, &version_2(&ckpt), &noted(night), keep) {
            Err(Beside::Unreadable(e)) => {
                assert!(
                    e.contains("counted and uncounted sets in one file of streams"),
                    "{e}"
                )
            }
            other => panic!("saved: {other:?}"),
        }
    }

    #[test]
    fn a_version_2_files_sets_left_are_not_rewritten_with_a_nights_counted_ones() {
        // "a" and "b" gone: "c"'s set would join the night's file.
        mixing_fails(&["d"], &|k| !["a", "b"].contains(&k));
    }

    #[test]
    fn a_version_2_file_is_not_merged_with_a_counted_one() {
        // A night's file as large as it: the two would merge.
        mixing_fails(&["d", "e", "f"], &|_| true);
    }

    #[test]
    fn a_version_2_file_is_still_read_not_counted_and_kept_so() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let refs = version_2(&ckpt);
        let bytes = std::fs::read(dir.path().join(&refs[0].file)).unwrap();
        assert_eq!(&bytes[8..12], &UNCOUNTED.to_le_bytes());
        assert_eq!(&bytes[bytes.len() - 8..], UNCOUNTED_FOOTER_MAGIC);
        assert_eq!(bytes.len() as u64, sizes(&refs[0], UNCOUNTED).unwrap().0);
        let got = streams_of(dir.path(), &refs, &["b"].into_iter().collect()).unwrap();
        assert_eq!(
            (got.presence.get("b"), got.presence.rows("b")),
            (&[2, 100][..], None)
        );
        assert_eq!(
            read(dir.path(), &refs[0]).unwrap(),
            uncounted(&["a", "b", "c"])
        );
        // Its version changed to 3 (as if counted): refused by its length.
        let mut as3 = bytes.clone();
        as3[8..12].copy_from_slice(&VERSION.to_le_bytes());
        std::fs::write(dir.path().join(&refs[0].file), &as3).unwrap();
        assert!(read(dir.path(), &refs[0]).is_err());
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
        assert_eq!(got.presence.get("a"), &[1, 100]);
        assert_eq!(got.presence.get("e"), &[2, 100]);
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
        assert_eq!(got.presence.get("d"), &[4, 100]);
    }

    #[test]
    fn a_merge_leaves_the_gone_lake_files_out() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let first = save(&ckpt, &[], &noted(&["a", "b"]), &|_| true).unwrap();
        // "a" is gone: half of the first file, not most of it, so it is
        // kept as it is; the night's file for "c" is as large as half of
        // it, so the two merge, without "a".
        let refs = save(&ckpt, &first, &noted(&["c"]), &|k| k != "a").unwrap();
        assert_eq!(refs.len(), 1, "{refs:?}");
        assert_eq!(refs[0].keys, vec!["b", "c"]);
        let back = read(dir.path(), &refs[0]).unwrap();
        assert_eq!((back.get("a"), back.get("b")), (&[][..], &[2, 100][..]));
    }

    #[test]
    fn a_nights_small_file_is_not_merged_into_a_large_one() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        let mut big = Presence::default();
        big.add("c-1", &(0..100).collect::<Vec<u64>>(), Some(&[1; 100]));
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
    fn a_damaged_truncated_or_swapped_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        let refs = save(&ckpt, &[], &noted(&["a", "b"]), &all).unwrap();
        let path = dir.path().join(&refs[0].file);
        let good = std::fs::read(&path).unwrap();
        assert_eq!(read(dir.path(), &refs[0]).unwrap(), noted(&["a", "b"]));
        // Every byte matters: header, sets, index, footer.
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            assert!(read(dir.path(), &refs[0]).is_err(), "byte {at}");
        }
        for cut in 0..good.len() {
            std::fs::write(&path, &good[..cut]).unwrap();
            assert!(read(dir.path(), &refs[0]).is_err(), "{cut} bytes");
        }
        let mut longer = good.clone();
        longer.push(0);
        std::fs::write(&path, &longer).unwrap();
        let e = read(dir.path(), &refs[0]).unwrap_err();
        assert!(e.contains("where the checkpoint's reference makes"), "{e}");
        std::fs::write(&path, &good).unwrap();
        let mut other = refs[0].clone();
        other.keys = vec!["a".into()];
        assert!(read(dir.path(), &other).is_err());
        other = refs[0].clone();
        other.fingerprints += 1;
        assert!(read(dir.path(), &other).is_err());
        std::fs::remove_file(&path).unwrap();
        assert!(read(dir.path(), &refs[0]).is_err());
    }

    #[test]
    fn a_night_reads_the_sets_of_the_replaced_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        let refs = save(&ckpt, &[], &noted(&["a", "b", "c"]), &all).unwrap();
        let path = dir.path().join(&refs[0].file);
        let good = std::fs::read(&path).unwrap();
        // The sets are in key order after the header: "b"'s is the second
        // (two fingerprints and their rows each).
        let b_set = HEADER as usize + 24;
        let mut bad = good.clone();
        bad[b_set] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let only = |keys: &[&'static str]| keys.iter().copied().collect::<BTreeSet<_>>();
        let got = streams_of(dir.path(), &refs, &only(&["a", "c"])).unwrap();
        assert_eq!(
            (got.presence.get("a"), got.presence.get("c")),
            (&[1, 100][..], &[3, 100][..])
        );
        let e = streams_of(dir.path(), &refs, &only(&["b"])).unwrap_err();
        assert!(e.contains("the set of b") && e.contains("damaged"), "{e}");
        // A lake file the file does not cover has no set, and is no error.
        assert!(streams_of(dir.path(), &refs, &only(&["z"]))
            .unwrap()
            .presence
            .is_empty());
    }

    #[test]
    fn a_version_1_file_is_still_read_and_rewritten_as_version_2() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let p = uncounted(&["a", "b", "c"]);
        let mut w = Writer::default();
        w.bytes(MAGIC);
        w.u32(1);
        let fingerprints = p.write(&mut w);
        let digest = Sha256::digest(&w.buf);
        w.bytes(&digest);
        let sha256 = ledger_events::event::hex(&digest);
        let v1 = StreamsRef {
            file: format!("ck.{}.prs", &sha256[..16]),
            sha256,
            keys: vec!["a".into(), "b".into(), "c".into()],
            fingerprints,
            starts: false,
        };
        let path = dir.path().join(&v1.file);
        for at in 0..w.buf.len() {
            let mut bad = w.buf.clone();
            bad[at] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            assert!(read(dir.path(), &v1).is_err(), "byte {at}");
        }
        for cut in 0..w.buf.len() {
            std::fs::write(&path, &w.buf[..cut]).unwrap();
            assert!(read(dir.path(), &v1).is_err(), "{cut} bytes");
        }
        std::fs::write(&path, &w.buf).unwrap();
        assert_eq!(read(dir.path(), &v1).unwrap(), p);
        let got = streams_of(
            dir.path(),
            std::slice::from_ref(&v1),
            &["b"].into_iter().collect(),
        )
        .unwrap();
        assert_eq!(got.presence.get("b"), &[2, 100]);
        assert!(got.plain.contains("b"), "streams alone: {:?}", got.plain);
        // Mostly gone: rewritten in the indexed layout with what is left,
        // still of streams alone (and not counted: version 2).
        let refs = save(&ckpt, &[v1], &Presence::default(), &|k| k == "c").unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].keys, vec!["c"]);
        assert!(!refs[0].starts);
        let bytes = std::fs::read(dir.path().join(&refs[0].file)).unwrap();
        assert_eq!(&bytes[bytes.len() - 8..], UNCOUNTED_FOOTER_MAGIC);
        assert_eq!(read(dir.path(), &refs[0]).unwrap().get("c"), &[3, 100]);
    }

    #[test]
    fn files_of_streams_alone_stay_apart_from_files_of_starts() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let all = |_: &str| true;
        // A file an older checkpoint named (streams alone), then a night's.
        let mut old = save(&ckpt, &[], &noted(&["a", "b", "c"]), &all).unwrap();
        old[0].starts = false;
        let refs = save(&ckpt, &old, &noted(&["d", "e", "f"]), &all).unwrap();
        // As large as it: merged, were they of one kind.
        assert_eq!(refs.len(), 2, "{refs:?}");
        assert_eq!((refs[0].starts, refs[1].starts), (false, true));
        // "a", "b" gone: its leftover is rewritten apart, still plain.
        let refs = save(&ckpt, &refs, &Presence::default(), &|k| {
            !["a", "b"].contains(&k)
        })
        .unwrap();
        let kinds: Vec<(Vec<String>, bool)> =
            refs.iter().map(|r| (r.keys.clone(), r.starts)).collect();
        assert_eq!(
            kinds,
            vec![
                (vec!["d".into(), "e".into(), "f".into()], true),
                (vec!["c".into()], false)
            ]
        );
        let only = ["c", "d"].into_iter().collect();
        let got = streams_of(dir.path(), &refs, &only).unwrap();
        assert_eq!(got.plain, ["c".to_owned()].into_iter().collect());
        assert_eq!(got.presence.get("d"), &[1, 100]);
    }
}
