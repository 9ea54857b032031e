//! The settled archive: transfers whose proof is finished, kept out of the
//! part of the checkpoint a night rewrites.
//!
//! A transfer is *settled* at the end of a run when its stream is terminal
//! and no cross-stream check has a finding on it. Every cross-stream check
//! of a transfer reads only its own state and legs (and the live holds,
//! which never name a settled transfer: a live hold on a terminal transfer
//! is a finding), so a settled transfer gets the same verdict every night
//! until a new event names it. The checkpoint file therefore keeps only the
//! *open* transfers, and settled ones go into immutable segment files next
//! to it. A resumed run first lists the transfers its new files name (and,
//! for an account stream it must re-prove from its first event, every
//! transfer that stream's history names) and pulls just those back
//! ([`Archive::pull`]).
//!
//! Each run appends one segment of what settled in it; the newest two are
//! merged while the newest is at least half the size of the one before, so
//! there are O(log n) segments and a record is rewritten O(log n) times. A
//! lookup asks the newest segment first; a record pulled back into the open
//! state is stale wherever it is, and is dropped by the next merge.
//!
//! A segment file (`{checkpoint}.{16 hex}.seg`):
//!
//! ```text
//! blocks  := { record* }*          ~16 KiB each, records in id order (codec::Writer::record)
//! index   := version:u32 names:u64 names_sha:[u8;32] records:u64
//!            blocks:u64 { first_id:str offset:u64 len:u32 sha:[u8;32] }*
//!            probes:u32 words:u64 u64*                     (Bloom filter of every id)
//! footer  := index_offset:u64 index_len:u64 index_sha:[u8;32] "LDGRSEG1"
//! ```
//!
//! The checkpoint names each segment with its index's SHA-256, so a segment
//! swapped or altered is refused, and each block is checked against its
//! SHA-256 when it is read. A segment's syms are the first `names` of the
//! checkpoint's names (names are only ever appended); their SHA-256 proves it.

use std::collections::HashSet;
use std::fs::File;
use std::hash::Hasher;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::codec;
use crate::facts::{Legs, TransferState};
use crate::id::Id;
use crate::names::{FxHasher, Names};

/// One settled transfer: its stream's state and its legs.
pub type Record = (Id, TransferState, Legs);

const MAGIC: &[u8; 8] = b"LDGRSEG1";
/// Version of the segment layout (and of the Bloom filter's hash). 2: a
/// leg records its counterparty. 3: a leg and a transfer record when they
/// were committed.
const SEGMENT_VERSION: u32 = 3;
const BLOCK_BYTES: usize = 16 << 10;
pub(crate) const BLOOM_BITS_PER_ID: u64 = 16;
/// Probes per id: with 16 bits an id, ~0.05 % false positives.
pub(crate) const BLOOM_PROBES: u32 = 11;
const FOOTER: u64 = 8 + 8 + 32 + 8;

/// Why the files beside a checkpoint could not be carried to the next one.
#[derive(Debug)]
pub enum Beside {
    /// One the checkpoint names is damaged or missing (found when it is
    /// merged or rewritten): a run with `--full` writes new ones.
    Unreadable(String),
    /// A new one could not be written.
    Unwritable(String),
}

/// What the checkpoint file says of one segment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SegmentRef {
    /// File name, in the checkpoint's directory.
    pub file: String,
    pub bytes: u64,
    pub records: u64,
    /// SHA-256 of the segment's index, lower-case hex.
    pub index_sha256: String,
}

/// A Bloom filter: no false negatives, so "absent" is exact. Over ids here
/// ([`bloom_hashes`]); over an account's entry fingerprints in
/// `entry_store` (which give their own two hashes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bloom {
    pub(crate) words: Vec<u64>,
    pub(crate) probes: u32,
}

/// The filter's two hashes of an id (Kirsch–Mitzenmacher double hashing).
/// Pinned by a test: segments on disk depend on it.
fn bloom_hashes(id: &str) -> (u64, u64) {
    let mut h = FxHasher::default();
    h.write(id.as_bytes());
    let h1 = h.finish();
    let mut g = FxHasher::default();
    g.write_u64(h1 ^ 0x9e37_79b9_7f4a_7c15);
    (h1, g.finish() | 1)
}

impl Bloom {
    /// A filter sized for `ids` keys, [`BLOOM_BITS_PER_ID`] bits each.
    pub(crate) fn new(ids: usize) -> Bloom {
        let bits = (ids as u64).max(1) * BLOOM_BITS_PER_ID;
        Bloom {
            words: vec![0; bits.div_ceil(64) as usize],
            probes: BLOOM_PROBES,
        }
    }

    /// The bits of the key hashed to `(h1, h2)`: an iterator that does not
    /// borrow the filter.
    fn bits(&self, (h1, h2): (u64, u64)) -> impl Iterator<Item = usize> + use<> {
        let n = self.words.len() as u64 * 64;
        (0..u64::from(self.probes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % n) as usize)
    }

    fn insert(&mut self, id: &str) {
        self.insert_hashed(bloom_hashes(id));
    }

    fn may_contain(&self, id: &str) -> bool {
        self.may_contain_hashed(bloom_hashes(id))
    }

    pub(crate) fn insert_hashed(&mut self, h: (u64, u64)) {
        for b in self.bits(h) {
            self.words[b / 64] |= 1 << (b % 64);
        }
    }

    pub(crate) fn may_contain_hashed(&self, h: (u64, u64)) -> bool {
        !self.words.is_empty()
            && self
                .bits(h)
                .all(|b| self.words[b / 64] & (1 << (b % 64)) != 0)
    }
}

#[derive(Debug)]
struct Block {
    first: Box<str>,
    offset: u64,
    len: u32,
    sha: [u8; 32],
}

/// An open segment: its file and its index.
#[derive(Debug)]
pub struct Segment {
    r: SegmentRef,
    file: File,
    /// The names its syms index (a prefix of the checkpoint's).
    names: usize,
    blocks: Vec<Block>,
    bloom: Bloom,
}

fn names_sha(names: &[Box<str>]) -> [u8; 32] {
    let mut sha = Sha256::new();
    for n in names {
        sha.update((n.len() as u64).to_le_bytes());
        sha.update(n.as_bytes());
    }
    sha.finalize().into()
}

/// Opens a file beside the checkpoint, with its length.
pub(crate) fn open_sized(path: &Path) -> Result<(File, u64), String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot stat: {e}"))?
        .len();
    Ok((file, len))
}

/// `len` bytes of `file` from `offset`.
pub(crate) fn read_at(file: &File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0; len as usize];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// A segment's temporary file: directory, stem, path, writer.
pub(crate) type Created = (PathBuf, String, PathBuf, std::io::BufWriter<File>);

/// Creates `{stem}.{ext}.tmp` beside the checkpoint (`stem` its file name)
/// for a segment to be written into: returns the directory, the stem, the
/// temporary path and a buffered writer (or the directory and the error).
pub(crate) fn create_beside(
    checkpoint: &Path,
    ext: &str,
) -> Result<Created, (PathBuf, std::io::Error)> {
    let (dir, stem) = place(checkpoint);
    let tmp = dir.join(format!("{stem}.{ext}.tmp"));
    match File::create(&tmp) {
        Ok(file) => Ok((
            dir,
            stem,
            tmp,
            std::io::BufWriter::with_capacity(1 << 20, file),
        )),
        Err(e) => Err((dir, e)),
    }
}

/// Opens a file beside the checkpoint laid out as blocks, an index and the
/// footer `index_offset:u64 index_len:u64 index_sha:[u8;32] magic:[u8;8]`,
/// checks it against what the checkpoint recorded (its length and its
/// index's SHA-256, lower-case hex) and returns the file, the index and
/// where the index starts (the blocks' end).
pub(crate) fn open_indexed(
    path: &Path,
    bytes: u64,
    index_sha256: &str,
    magic: &[u8; 8],
) -> Result<(File, Vec<u8>, u64), String> {
    let (file, len) = open_sized(path)?;
    if len != bytes || len < FOOTER {
        return Err(format!(
            "{len} bytes where the checkpoint recorded {bytes} (truncated or replaced)"
        ));
    }
    let footer = read_at(&file, len - FOOTER, FOOTER).map_err(|e| e.to_string())?;
    let (at, rest) = footer.split_at(8);
    let (n, rest) = rest.split_at(8);
    let (sha, found) = rest.split_at(32);
    if found != magic || ledger_events::event::hex(sha) != index_sha256 {
        return Err(
            "damaged: its footer does not match the checkpoint (altered or swapped)".into(),
        );
    }
    let at = u64::from_le_bytes(at.try_into().expect("8 bytes"));
    let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
    if at.checked_add(n) != Some(len - FOOTER) {
        return Err("damaged: index out of place".into());
    }
    let index = read_at(&file, at, n).map_err(|e| e.to_string())?;
    if Sha256::digest(&index).as_slice() != sha {
        return Err("damaged: its index's SHA-256 does not match".into());
    }
    Ok((file, index, at))
}

/// Writes a segment's index and footer after its blocks (which end at
/// `blocks_end`), syncs the file and names it `{stem}.{16 hex}.{ext}` in
/// `dir`: returns the name, the file's length and the index's SHA-256 (hex).
pub(crate) fn finish_indexed(
    mut out: std::io::BufWriter<File>,
    index: &[u8],
    blocks_end: u64,
    magic: &[u8; 8],
    tmp: &Path,
    (dir, stem, ext): (&Path, &str, &str),
) -> std::io::Result<(String, u64, String)> {
    let sha: [u8; 32] = Sha256::digest(index).into();
    for part in [
        index,
        &blocks_end.to_le_bytes(),
        &(index.len() as u64).to_le_bytes(),
        &sha,
        magic,
    ] {
        out.write_all(part)?;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    let index_sha256 = ledger_events::event::hex(&sha);
    let name = format!("{stem}.{}.{ext}", &index_sha256[..16]);
    std::fs::rename(tmp, dir.join(&name))?;
    Ok((name, blocks_end + index.len() as u64 + FOOTER, index_sha256))
}

impl Segment {
    /// Opens the segment `r` in `dir` and checks it against the reference
    /// and the checkpoint's `names`.
    fn open(dir: &Path, r: &SegmentRef, names: &Names) -> Result<Segment, String> {
        let path = dir.join(&r.file);
        let err = |why: String| format!("archive segment {}: {why}", path.display());
        let (file, index, at) =
            open_indexed(&path, r.bytes, &r.index_sha256, MAGIC).map_err(err)?;
        Segment::parse_index(&index, at, names)
            .map(|(names, blocks, bloom)| Segment {
                r: r.clone(),
                file,
                names,
                blocks,
                bloom,
            })
            .map_err(|e| err(format!("damaged index: {e}")))
    }

    fn parse_index(
        index: &[u8],
        blocks_end: u64,
        names: &Names,
    ) -> Result<(usize, Vec<Block>, Bloom), String> {
        let mut r = codec::Reader::new(index, 0);
        let version = r.u32()?;
        if version != SEGMENT_VERSION {
            return Err(format!(
                "segment version {version} (this reconciler reads {SEGMENT_VERSION})"
            ));
        }
        let n_names = usize::try_from(r.u64()?).map_err(|e| e.to_string())?;
        let sha = r.take(32)?;
        let known = names.list();
        if n_names > known.len() || names_sha(&known[..n_names]) != sha {
            return Err("written with other names than the checkpoint's".into());
        }
        let records = r.u64()?;
        let n = r.count()?;
        let mut blocks = Vec::with_capacity(n);
        for _ in 0..n {
            let b = Block {
                first: r.str()?.into(),
                offset: r.u64()?,
                len: r.u32()?,
                sha: r.take(32)?.try_into().expect("32 bytes"),
            };
            if b.offset
                .checked_add(u64::from(b.len))
                .is_none_or(|e| e > blocks_end)
            {
                return Err("a block out of place".into());
            }
            blocks.push(b);
        }
        let probes = r.u32()?;
        let words = (0..r.count()?)
            .map(|_| r.u64())
            .collect::<Result<Vec<_>, _>>()?;
        if !(1..=64).contains(&probes) || (records > 0 && words.is_empty()) {
            return Err(format!(
                "a Bloom filter of {} words and {probes} probes",
                words.len()
            ));
        }
        if !r.at_end() {
            return Err("bytes after the Bloom filter".into());
        }
        Ok((n_names, blocks, Bloom { words, probes }))
    }

    /// Every record of block `i`, checked against its SHA-256.
    fn block(&self, i: usize) -> Result<Vec<Record>, String> {
        let b = &self.blocks[i];
        let err = |why: String| format!("archive segment {}: block {i}: {why}", self.r.file);
        let bytes =
            read_at(&self.file, b.offset, u64::from(b.len)).map_err(|e| err(e.to_string()))?;
        if Sha256::digest(&bytes).as_slice() != b.sha {
            return Err(err("damaged: its SHA-256 does not match".into()));
        }
        let mut r = codec::Reader::new(&bytes, self.names);
        let mut out = Vec::new();
        while !r.at_end() {
            out.push(r.record().map_err(|e| err(format!("damaged: {e}")))?);
        }
        Ok(out)
    }

    /// The block that would hold `id` (the last whose first id is not after it).
    fn block_of(&self, id: &str) -> Option<usize> {
        self.blocks
            .partition_point(|b| &*b.first <= id)
            .checked_sub(1)
    }
}

/// The settled transfers of a checkpoint, in segments (oldest first).
#[derive(Debug, Default)]
pub struct Archive {
    segments: Vec<Segment>,
    /// Archived transfers whose archived record is their current state: a
    /// record pulled back into the open state no longer counts.
    pub live: u64,
    /// Records pulled back in this run.
    pub pulled: u64,
}

impl Archive {
    /// Opens the segments a checkpoint in `dir` names; `names` are the
    /// checkpoint's.
    pub fn open(
        dir: &Path,
        refs: &[SegmentRef],
        live: u64,
        names: &Names,
    ) -> Result<Archive, String> {
        let segments = refs
            .iter()
            .map(|r| Segment::open(dir, r, names))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Archive {
            segments,
            live,
            pulled: 0,
        })
    }

    /// [`Archive::open`] keeping the segments that open and naming why
    /// each other does not (missing, swapped, damaged index): what a
    /// `--full` run can still judge of a checkpoint whose archive is hurt.
    pub fn open_what_opens(
        dir: &Path,
        refs: &[SegmentRef],
        live: u64,
        names: &Names,
    ) -> (Archive, Vec<String>) {
        let mut lost = Vec::new();
        let segments = refs
            .iter()
            .filter_map(|r| Segment::open(dir, r, names).map_err(|e| lost.push(e)).ok())
            .collect();
        let archive = Archive {
            segments,
            live,
            pulled: 0,
        };
        (archive, lost)
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    pub fn refs(&self) -> Vec<SegmentRef> {
        self.segments.iter().map(|s| s.r.clone()).collect()
    }

    /// Pulls back the records of `ids` (sorted, distinct, none of them
    /// open): the newest of each found. Ids in no segment are new transfers.
    pub fn pull<'a>(
        &mut self,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<Record>, String> {
        let out = self.find(ids)?;
        self.live = self.live.saturating_sub(out.len() as u64);
        self.pulled += out.len() as u64;
        Ok(out)
    }

    /// The records of `ids` (sorted, distinct, none of them open), the
    /// newest of each found, left in the archive ([`Archive::pull`] takes
    /// them out).
    pub fn find<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Result<Vec<Record>, String> {
        let mut out = Vec::new();
        // Sorted ids read neighbouring records from one block: keep the last.
        let mut cached: Option<((usize, usize), Vec<Record>)> = None;
        for id in ids {
            for (s, seg) in self.segments.iter().enumerate().rev() {
                if !seg.bloom.may_contain(id) {
                    continue;
                }
                let Some(b) = seg.block_of(id) else { continue };
                if cached.as_ref().map(|c| c.0) != Some((s, b)) {
                    cached = Some(((s, b), seg.block(b)?));
                }
                let records = &mut cached.as_mut().expect("just filled").1;
                if let Ok(k) = records.binary_search_by(|r| (*r.0).cmp(id)) {
                    out.push(records[k].clone());
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Calls `visit` with every archived transfer's id and state, in id
    /// order (the newest record of each), except the ids `open` says are in
    /// the open state (their archived records are stale). Reads one block
    /// of each segment at a time.
    pub fn each(
        &self,
        open: &dyn Fn(&str) -> bool,
        mut visit: impl FnMut(&str, &TransferState),
    ) -> Result<(), String> {
        let segments: Vec<&Segment> = self.segments.iter().collect();
        let mut merged = Merged::new(&segments, open);
        while let Some((id, state, _)) = merged.next_record()? {
            visit(&id, &state);
        }
        Ok(())
    }

    /// [`Archive::each`] past damaged blocks: each one is left out (its
    /// transfers are not visited, or an older segment's record of one of
    /// them is) and named in the result, and the walk goes on with the next
    /// block. For `--full`, which only judges what the archive proved.
    pub fn each_readable(
        &self,
        open: &dyn Fn(&str) -> bool,
        mut visit: impl FnMut(&str, &TransferState),
    ) -> Vec<String> {
        let segments: Vec<&Segment> = self.segments.iter().collect();
        let mut merged = Merged::new(&segments, open);
        merged.skipped = Some(Vec::new());
        while let Ok(Some((id, state, _))) = merged.next_record() {
            visit(&id, &state);
        }
        merged.skipped.unwrap_or_default()
    }
}

/// The records of `segments` (oldest first) in id order, the newest of each
/// id only, without the ids that are `open` (their archived records are
/// stale): a k-way merge that holds one block per segment.
struct Merged<'a> {
    /// Per segment (oldest first): its next blocks and the current one's
    /// records, reversed so the next is at the end.
    heads: Vec<(&'a Segment, std::ops::Range<usize>, Vec<Record>)>,
    open: &'a dyn Fn(&str) -> bool,
    /// `Some`: a block that cannot be read is named here and left out;
    /// `None`: it is the error.
    skipped: Option<Vec<String>>,
}

impl<'a> Merged<'a> {
    fn new(segments: &[&'a Segment], open: &'a dyn Fn(&str) -> bool) -> Merged<'a> {
        Merged {
            heads: segments
                .iter()
                .map(|s| (*s, 0..s.blocks.len(), Vec::new()))
                .collect(),
            open,
            skipped: None,
        }
    }

    /// The next record, or None at the end.
    fn next_record(&mut self) -> Result<Option<Record>, String> {
        loop {
            for (seg, blocks, current) in &mut self.heads {
                while current.is_empty() {
                    let Some(b) = blocks.next() else { break };
                    match (seg.block(b), &mut self.skipped) {
                        (Ok(records), _) => *current = records,
                        (Err(e), Some(skipped)) => skipped.push(e),
                        (Err(e), None) => return Err(e),
                    }
                    current.reverse();
                }
            }
            // The least id; among equal ids the newest segment's record.
            let mut best: Option<usize> = None;
            for (k, (_, _, current)) in self.heads.iter().enumerate() {
                let Some(r) = current.last() else { continue };
                if best.is_none_or(|b| r.0 <= self.heads[b].2.last().expect("non-empty").0) {
                    best = Some(k);
                }
            }
            let Some(best) = best else {
                return Ok(None);
            };
            let record = self.heads[best].2.pop().expect("non-empty");
            for (_, _, current) in &mut self.heads {
                if current.last().is_some_and(|r| r.0 == record.0) {
                    current.pop(); // an older copy
                }
            }
            if !(self.open)(&record.0) {
                return Ok(Some(record));
            }
        }
    }
}

/// Writes records (pushed in id order) as a segment in the checkpoint's
/// directory, named after it; fsynced before it is named.
struct SegmentWriter {
    dir: PathBuf,
    stem: String,
    tmp: PathBuf,
    out: std::io::BufWriter<File>,
    bloom: Bloom,
    blocks: Vec<Block>,
    block: codec::Writer,
    first: Option<Box<str>>,
    last: Option<Box<str>>,
    offset: u64,
    count: u64,
}

impl SegmentWriter {
    /// A writer for at most `capacity` records (the Bloom filter's size).
    fn create(checkpoint: &Path, capacity: usize) -> Result<SegmentWriter, String> {
        let (dir, stem, tmp, out) =
            create_beside(checkpoint, "seg").map_err(|(dir, e)| write_err(&dir, e))?;
        Ok(SegmentWriter {
            out,
            bloom: Bloom::new(capacity),
            blocks: Vec::new(),
            block: codec::Writer::default(),
            first: None,
            last: None,
            offset: 0,
            count: 0,
            dir,
            stem,
            tmp,
        })
    }

    fn push(&mut self, id: &str, state: &TransferState, legs: &Legs) -> Result<(), String> {
        if self.last.as_deref().is_some_and(|l| l >= id) {
            return Err(format!("archive records out of id order at {id:?}"));
        }
        self.last = Some(id.into());
        self.first.get_or_insert_with(|| id.into());
        self.block.record(id, state, legs);
        self.bloom.insert(id);
        self.count += 1;
        if self.block.buf.len() >= BLOCK_BYTES {
            self.end_block()?;
        }
        Ok(())
    }

    fn end_block(&mut self) -> Result<(), String> {
        if let Some(first) = self.first.take() {
            let buf = std::mem::take(&mut self.block.buf);
            self.out
                .write_all(&buf)
                .map_err(|e| write_err(&self.dir, e))?;
            self.blocks.push(Block {
                first,
                offset: self.offset,
                len: buf.len() as u32,
                sha: Sha256::digest(&buf).into(),
            });
            self.offset += buf.len() as u64;
        }
        Ok(())
    }

    /// Writes the index and footer, syncs and names the file.
    fn finish(mut self, names: &Names) -> Result<SegmentRef, String> {
        self.end_block()?;
        let io = |e: std::io::Error| write_err(&self.dir, e);
        let list = names.list();
        let mut ix = codec::Writer::default();
        ix.u32(SEGMENT_VERSION);
        ix.u64(list.len() as u64);
        ix.bytes(&names_sha(list));
        ix.u64(self.count);
        ix.count(self.blocks.len());
        for b in &self.blocks {
            ix.str(&b.first);
            ix.u64(b.offset);
            ix.u32(b.len);
            ix.bytes(&b.sha);
        }
        ix.u32(self.bloom.probes);
        ix.count(self.bloom.words.len());
        for &word in &self.bloom.words {
            ix.u64(word);
        }
        let (file, bytes, index_sha256) = finish_indexed(
            self.out,
            &ix.buf,
            self.offset,
            MAGIC,
            &self.tmp,
            (&self.dir, &self.stem, "seg"),
        )
        .map_err(io)?;
        Ok(SegmentRef {
            file,
            bytes,
            records: self.count,
            index_sha256,
        })
    }
}

fn write_err(dir: &Path, e: std::io::Error) -> String {
    format!("cannot write an archive segment in {}: {e}", dir.display())
}

/// The checkpoint file's directory and name (segments are named after it).
pub fn place(checkpoint: &Path) -> (PathBuf, String) {
    let dir = match checkpoint.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = checkpoint
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "checkpoint".into());
    (dir, stem)
}

/// Adds `settled` (in id order) to `archive` as a new segment, merges the
/// newest segments as the policy says, and returns the segments the new
/// checkpoint names. `open(id)`: the id is in the checkpoint's open part.
pub fn append<'a>(
    archive: &Archive,
    checkpoint: &Path,
    settled: impl ExactSizeIterator<Item = (&'a str, &'a TransferState, &'a Legs)>,
    names: &Names,
    open: &dyn Fn(&str) -> bool,
) -> Result<Vec<SegmentRef>, Beside> {
    use Beside::{Unreadable, Unwritable};
    let dir = place(checkpoint).0;
    let mut refs = archive.refs();
    let named: HashSet<String> = refs.iter().map(|r| r.file.clone()).collect();
    // Segments this run wrote, opened again only to be merged.
    let mut fresh: Vec<Segment> = Vec::new();
    if settled.len() > 0 {
        let mut w = SegmentWriter::create(checkpoint, settled.len()).map_err(Unwritable)?;
        for (id, state, legs) in settled {
            w.push(id, state, legs).map_err(Unwritable)?;
        }
        let r = w.finish(names).map_err(Unwritable)?;
        fresh.push(Segment::open(&dir, &r, names).map_err(Unwritable)?);
        refs.push(r);
    }
    while let [.., older, newer] = refs.as_slice() {
        if newer.records * 2 < older.records {
            break;
        }
        let n = refs.len();
        let segs: Vec<&Segment> = refs[n - 2..]
            .iter()
            .map(|r| {
                archive
                    .segments
                    .iter()
                    .chain(&fresh)
                    .find(|s| s.r == *r)
                    .expect("every referenced segment is open")
            })
            .collect();
        let capacity = segs.iter().map(|s| s.r.records as usize).sum();
        let mut w = SegmentWriter::create(checkpoint, capacity).map_err(Unwritable)?;
        let mut merged = Merged::new(&segs, &open);
        while let Some((id, state, legs)) = merged.next_record().map_err(Unreadable)? {
            w.push(&id, &state, &legs).map_err(Unwritable)?;
        }
        let r = w.finish(names).map_err(Unwritable)?;
        let inputs: Vec<String> = refs.drain(n - 2..).map(|r| r.file).collect();
        let stays = |f: &str| f == r.file || named.contains(f);
        fresh.retain(|s| !remove_merged(&dir, &inputs, &s.r.file, stays));
        fresh.push(Segment::open(&dir, &r, names).map_err(Unwritable)?);
        refs.push(r);
    }
    Ok(refs)
}

/// Whether `file` is one of `inputs`, the inputs of a merge, and if so
/// removes it: called on the segments this run wrote, which neither the
/// old checkpoint nor the new one names once merged. Removed at once, not
/// after the save, so a save needs room for its result and one merge, not
/// for every step of its merges (rev-s53-resources M5: ~45 % more). Not
/// when a file of that name is to stay (`stays`: the merge's output, or a
/// file the old checkpoint names): files are named by their content, so a
/// merge or a night may write bytes that are already there. Best effort:
/// one left is removed after the save, as before.
pub(crate) fn remove_merged(
    dir: &Path,
    inputs: &[String],
    file: &str,
    stays: impl Fn(&str) -> bool,
) -> bool {
    let merged = inputs.iter().any(|i| i == file);
    if merged && !stays(file) {
        let _ = std::fs::remove_file(dir.join(file));
    }
    merged
}

/// Deletes the segment files of the checkpoint `checkpoint` that `keep`
/// does not name (merged away, or left by a run that stopped before its
/// checkpoint was written).
pub fn remove_unreferenced(checkpoint: &Path, keep: &[SegmentRef]) -> Result<(), String> {
    remove_unnamed(checkpoint, "seg", keep.iter().map(|r| r.file.as_str()))
}

/// Deletes the files `FILE.<16 hex digits>.{ext}` (and `FILE.{ext}.tmp`)
/// beside the checkpoint `FILE` that are not among `keep`: exactly the names
/// this checkpoint writes, so the files of a checkpoint `FILE.other` in the
/// same directory are never touched. A file that cannot be removed does not
/// stop the others (rev-s53-resources M4: one immutable file left every
/// later night's files too); the error names how many and the first.
pub fn remove_unnamed<'a>(
    checkpoint: &Path,
    ext: &str,
    keep: impl Iterator<Item = &'a str>,
) -> Result<(), String> {
    let (dir, stem) = place(checkpoint);
    let keep: HashSet<&str> = keep.collect();
    let tmp = format!("{ext}.tmp");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mut left, mut first) = (0usize, None);
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = state_file_of(&stem, &name, ext)
            || name
                .strip_prefix(&stem)
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|r| r == tmp);
        if ours && !keep.contains(name.as_str()) {
            if let Err(err) = std::fs::remove_file(e.path()) {
                left += 1;
                first.get_or_insert_with(|| format!("{}: {err}", e.path().display()));
            }
        }
    }
    match first {
        None => Ok(()),
        Some(first) => Err(format!(
            "{left} file(s) could not be removed, first {first}"
        )),
    }
}

/// Whether `name` is `{stem}.<16 hex digits>.{ext}`: a file of the state of
/// the checkpoint `stem` (archive segments, the entry store, files of
/// streams), as only that checkpoint names its files.
fn state_file_of(stem: &str, name: &str, ext: &str) -> bool {
    name.strip_prefix(stem)
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_suffix(ext))
        .and_then(|r| r.strip_suffix('.'))
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The files of a checkpoint's state beside `checkpoint` (its archive
/// segments, entry store and files of streams), sorted: a checkpoint that is
/// missing while they are there was lost, and a run must not take itself
/// for a first one.
pub fn state_files(checkpoint: &Path) -> Vec<String> {
    let (dir, stem) = place(checkpoint);
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    STATE_FILE_EXTS
                        .iter()
                        .any(|ext| state_file_of(&stem, n, ext))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The extensions of the files of a checkpoint's state.
pub const STATE_FILE_EXTS: &[&str] = &["seg", "ent", "prs"];

/// Whether `name`, beside the checkpoint `stem`, is one of that
/// checkpoint's own files: a file of its state ([`state_file_of`]), its
/// temporary one (`{stem}.{ext}.tmp`, `{stem}.tmp`), its lock
/// (`{stem}.lock`) or its first save's marker (`{stem}.first-save`). Other
/// names that start with `{stem}.` are not its.
pub fn is_checkpoint_file(stem: &str, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(stem).and_then(|r| r.strip_prefix('.')) else {
        return false;
    };
    STATE_FILE_EXTS
        .iter()
        .any(|ext| state_file_of(stem, name, ext) || rest.strip_suffix(".tmp") == Some(ext))
        || rest == "tmp"
        || rest == "lock"
        || rest == "first-save"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Leg, TransferFacts};
    use crate::names::Sym;
    use crate::stream::Tail;

    fn names() -> Names {
        Names::from_list(vec!["acc-1".into(), "USD".into(), "captured".into()])
    }

    fn record(id: &str, seq: u64) -> Record {
        let leg = Leg {
            at_s: 0,
            account: Sym(0),
            amount: 5,
            currency: Sym(1),
            counterparty: Sym(0),
            seq,
        };
        let state = TransferState {
            tail: Tail {
                last_seq: seq,
                ..Default::default()
            },
            facts: {
                let mut f = TransferFacts::new(Sym(2));
                f.set_terminal(true);
                f
            },
        };
        let legs = Legs::from_lists([vec![leg], vec![], vec![], vec![]]);
        (id.into(), state, legs)
    }

    /// Records `{prefix}.00000`, `{prefix}.00001`, … at `seq`.
    fn numbered(prefix: &str, n: usize, seq: u64) -> Vec<Record> {
        (0..n)
            .map(|i| record(&format!("{prefix}.{i:05}"), seq))
            .collect()
    }

    fn rows(r: &[Record]) -> impl ExactSizeIterator<Item = (&str, &TransferState, &Legs)> {
        r.iter().map(|(id, s, l)| (&**id, s, l))
    }

    /// Appends `records` as a run's settled transfers and reopens the archive.
    fn night(ckpt: &Path, archive: &Archive, records: &[Record], open: &[&str]) -> Archive {
        let refs = append(archive, ckpt, rows(records), &names(), &|id| {
            open.contains(&id)
        })
        .unwrap();
        remove_unreferenced(ckpt, &refs).unwrap();
        let live = archive.live + records.len() as u64;
        Archive::open(&place(ckpt).0, &refs, live, &names()).unwrap()
    }

    #[test]
    fn the_bloom_hash_is_pinned_and_has_no_false_negatives() {
        // Segments on disk depend on this function: changing it needs a new
        // SEGMENT_VERSION.
        assert_eq!(
            bloom_hashes("t.acme.k1"),
            (0xe114_19ed_bc27_0f26, 0x444e_e6fd_c442_bf75)
        );
        let mut b = Bloom::new(10_000);
        for i in 0..10_000 {
            b.insert(&format!("t.{i}"));
        }
        assert!((0..10_000).all(|i| b.may_contain(&format!("t.{i}"))));
        let false_pos = (0..100_000)
            .filter(|i| b.may_contain(&format!("u.{i}")))
            .count();
        assert!(false_pos < 200, "{false_pos} false positives in 100k");
    }

    #[test]
    fn records_are_found_in_the_newest_segment_and_merged_as_they_accumulate() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let big = numbered("t", 3_000, 1);
        let a = night(&ckpt, &Archive::default(), &big, &[]);
        assert_eq!(a.refs().len(), 1);
        assert!(a.segments[0].blocks.len() > 1, "several blocks");
        // A later night: one transfer settled again (newer state), new ones.
        let later = vec![record("t.00007", 2), record("t.99999", 2)];
        let mut b = night(&ckpt, &a, &later, &[]);
        assert_eq!(
            b.refs().len(),
            2,
            "a small segment is not merged into a big one"
        );
        let got = b
            .pull(["t.00006", "t.00007", "t.50000", "t.99999"])
            .unwrap();
        let seqs: Vec<(&str, u64)> = got.iter().map(|r| (&*r.0, r.1.tail.last_seq)).collect();
        assert_eq!(seqs, [("t.00006", 1), ("t.00007", 2), ("t.99999", 2)]);
        assert_eq!(got[0], record("t.00006", 1), "round trip");
        assert_eq!(b.pulled, 3);
        // A segment as large as the one before is merged into it; stale
        // records (older copies, ids now open) are dropped.
        let many = numbered("u", 3_000, 3);
        let c = night(&ckpt, &b, &many, &["t.00006"]);
        assert_eq!(c.refs().len(), 1, "{:?}", c.refs());
        assert_eq!(c.refs()[0].records, 3_000 + 3_000 + 1 - 1);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "old segments deleted"
        );
        let mut c = c;
        let got = c.pull(["t.00006", "t.00007", "u.02999"]).unwrap();
        let seqs: Vec<(&str, u64)> = got.iter().map(|r| (&*r.0, r.1.tail.last_seq)).collect();
        assert_eq!(
            seqs,
            [("t.00007", 2), ("u.02999", 3)],
            "newest kept, open dropped"
        );
    }

    /// rev-s53-resources M5: a segment this run wrote and then merged away
    /// is removed at once, so the save needs room for its result, not for
    /// every step of a cascade of merges.
    #[test]
    fn the_segments_a_night_writes_and_merges_away_are_gone_before_the_save_ends() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let a = night(&ckpt, &Archive::default(), &numbered("a", 1_000, 1), &[]);
        let b = night(&ckpt, &a, &numbered("b", 100, 1), &[]);
        assert_eq!(b.refs().len(), 2);
        // 600 more: merged with the 100 (700), then with the 1,000.
        let refs = append(&b, &ckpt, rows(&numbered("c", 600, 1)), &names(), &|_| {
            false
        })
        .unwrap();
        assert_eq!(refs.len(), 1, "{refs:?}");
        assert_eq!(refs[0].records, 1_700);
        let mut on_disk: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut named: Vec<String> = b
            .refs()
            .iter()
            .chain(&refs)
            .map(|r| r.file.clone())
            .collect();
        named.sort();
        assert_eq!(
            on_disk, named,
            "the old checkpoint's segments and the new one's only"
        );
    }

    #[test]
    fn a_damaged_or_missing_segment_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ck");
        let recs = numbered("t", 2_000, 1);
        let a = night(&ckpt, &Archive::default(), &recs, &[]);
        let r = a.refs().remove(0);
        let path = dir.path().join(&r.file);
        let good = std::fs::read(&path).unwrap();
        // A block byte: found when the block is read.
        let mut bad = good.clone();
        bad[10] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let mut opened =
            Archive::open(dir.path(), std::slice::from_ref(&r), 2_000, &names()).unwrap();
        let e = opened.pull(["t.00001"]).unwrap_err();
        assert!(e.contains("block 0") && e.contains("SHA-256"), "{e}");
        // A walk stops there; a walk past damage (`--full`'s) names the
        // block and visits every record of the others.
        let none = |_: &str| false;
        let e = opened.each(&none, |_, _| {}).unwrap_err();
        assert!(e.contains("block 0"), "{e}");
        let mut seen = Vec::new();
        let skipped = opened.each_readable(&none, |id, _| seen.push(id.to_owned()));
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].contains("block 0"), "{skipped:?}");
        assert!(!seen.is_empty() && seen.len() < 2_000, "{}", seen.len());
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        assert!(
            seen[0].as_str() > "t.00001",
            "block 0's ids are left out: {}",
            seen[0]
        );
        assert_eq!(seen.last().map(String::as_str), Some("t.01999"));
        let first: usize = seen[0][2..].parse().unwrap();
        assert_eq!(
            seen.len(),
            2_000 - first,
            "every record from the next block on"
        );
        // An index byte, the length, another checkpoint's names: refused on open.
        for (at, why) in [
            (good.len() - 100, "SHA-256"),
            (good.len() - 30, "footer"),
            (good.len() - 52, "out of place"),
        ] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            let e = Archive::open(dir.path(), std::slice::from_ref(&r), 0, &names()).unwrap_err();
            assert!(e.contains(why), "byte {at}: {e}");
        }
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        let e = Archive::open(dir.path(), std::slice::from_ref(&r), 0, &names()).unwrap_err();
        assert!(e.contains("truncated or replaced"), "{e}");
        std::fs::write(&path, &good).unwrap();
        let other = Names::from_list(vec!["acc-2".into(), "USD".into(), "captured".into()]);
        let e = Archive::open(dir.path(), std::slice::from_ref(&r), 0, &other).unwrap_err();
        assert!(e.contains("other names"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let e = Archive::open(dir.path(), &[r], 0, &names()).unwrap_err();
        assert!(e.contains("cannot open"), "{e}");
    }

    #[test]
    fn only_this_checkpoints_own_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |n: &str| std::fs::write(dir.path().join(n), b"x").unwrap();
        let theirs = [
            "ck.staging.0123456789abcdef.seg",
            "ck.v2.seg.tmp",
            "ck.0123456789ABCDEF.seg",
            "ck.0123456789abcde.seg",
            "ckpt.0123456789abcdef.seg",
            "ck.0123456789abcdef.prs",
        ];
        let ours = ["ck.0123456789abcdef.seg", "ck.seg.tmp"];
        let kept = "ck.fedcba9876543210.seg";
        for n in theirs.iter().chain(&ours).chain([&kept]) {
            touch(n);
        }
        remove_unnamed(&dir.path().join("ck"), "seg", [kept].into_iter()).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = theirs
            .iter()
            .chain([&kept])
            .map(|s| s.to_string())
            .collect();
        want.sort();
        assert_eq!(left, want);
    }
}
