//! The accounts' entry ids (`checks::entries`) from night to night: kept in
//! immutable segment files beside the checkpoint, not in it, and read back
//! only for the accounts a night visits and the fingerprints it asks about:
//! a night writes what it brings, and reads the index and the filters of the
//! blocks its new postings fall in (2 bytes a stored id of those blocks),
//! not the ids.
//!
//! Each id is one pair (account, fingerprint) → the seq it was first posted
//! at. A run keeps in memory only the pairs it adds (`AccountFacts::entries`);
//! a new posting is looked up there and then here. The checkpoint it writes
//! appends one segment of those pairs, and the newest two segments are merged
//! while the newest is at least half the size of the one before (as the
//! settled archive's are): O(log n) segments, each pair rewritten O(log n)
//! times.
//!
//! **Generations.** The n-th checkpoint to write a segment gives it
//! generation n (a merged segment keeps the newer one's). An account whose
//! state starts in a run (a new account, or one re-proved from its first
//! event: its state withdrawn) holds all its pairs in memory, and the
//! checkpoint records that run's generation as its `entries_since`: its pairs
//! in older segments no longer count. Lookups skip those segments, and
//! merges drop those pairs.
//!
//! **A lookup** of (account, fingerprint) asks the newest segment first and
//! stops at the account's `entries_since`. In each segment, the index (read
//! when the segment opens, ~100 bytes per 1000 pairs) names the one block
//! whose key range holds the pair. That block's Bloom filter (16 bits a pair,
//! read once and kept) says whether its records need reading; the last block
//! read is kept, so a visit's postings, asked in fingerprint order, read
//! each block once.
//!
//! A segment file (`{checkpoint}.{16 hex}.ent`):
//!
//! ```text
//! block  := filter:u64* records          ~16 KiB of records each, pairs in (account, fp) order
//! records:= { account:str n:u32 { fp:u64 seq:u64 }* }*
//! index  := version:u32 generation:u64 records:u64 blocks:u64
//!           { account:str fp:u64 offset:u64 words:u32 len:u32 filter_sha:[u8;32] sha:[u8;32] }*
//! footer := index_offset:u64 index_len:u64 index_sha:[u8;32] "LDGRENT1"
//! ```
//!
//! The checkpoint names each segment with its index's SHA-256, and each
//! filter and block is checked against its own SHA-256 when it is read.

use std::collections::HashMap;
use std::fs::File;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::archive::{self, Beside, Bloom};
use crate::codec;
use crate::names::FxHasher;

const MAGIC: &[u8; 8] = b"LDGRENT1";
/// Version of the segment layout (and of the filter's hashes).
const ENTRY_SEGMENT_VERSION: u32 = 1;
const BLOCK_BYTES: usize = 16 << 10;

/// What the checkpoint file says of one entry segment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EntrySegmentRef {
    /// File name, in the checkpoint's directory.
    pub file: String,
    pub bytes: u64,
    /// Pairs it holds (some may no longer count: see the module's
    /// generations).
    pub records: u64,
    /// SHA-256 of the segment's index, lower-case hex.
    pub index_sha256: String,
    pub generation: u64,
}

/// The filter's two hashes of (account, fingerprint). The fingerprint is
/// already a keyed hash; the account's is mixed in because a block may hold
/// the ends of several accounts. Pinned by a test: segments on disk depend
/// on it.
fn pair_hashes(account: &str, fp: u64) -> (u64, u64) {
    let mut h = FxHasher::default();
    h.write(account.as_bytes());
    let h1 = fp ^ h.finish().rotate_left(29);
    let h2 = (h1.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xff51_afd7_ed55_8ccd);
    (h1, h2 | 1)
}

#[derive(Debug, Clone)]
struct Block {
    /// Its first pair's key.
    account: Box<str>,
    fp: u64,
    offset: u64,
    /// The filter's length in u64 words, then the records' in bytes.
    words: u32,
    len: u32,
    filter_sha: [u8; 32],
    sha: [u8; 32],
}

/// A block's records: runs of one account's pairs, in (account, fp) order.
type Runs = Vec<(Arc<str>, Vec<(u64, u64)>)>;

/// One account's pairs (fingerprint, first seq), in fingerprint order.
pub type AccountPairs = (String, Vec<(u64, u64)>);

/// A pair with its account: (account, fingerprint, first seq).
type Pair = (Arc<str>, u64, u64);

/// An open segment: its file and its index.
#[derive(Debug)]
struct Segment {
    r: EntrySegmentRef,
    file: File,
    blocks: Vec<Block>,
}

impl Segment {
    fn open(dir: &Path, r: &EntrySegmentRef) -> Result<Segment, String> {
        let path = dir.join(&r.file);
        let err = |why: String| format!("entry segment {}: {why}", path.display());
        let (file, index, at) =
            archive::open_indexed(&path, r.bytes, &r.index_sha256, MAGIC).map_err(err)?;
        let blocks =
            Segment::parse_index(&index, at, r).map_err(|e| err(format!("damaged index: {e}")))?;
        Ok(Segment {
            r: r.clone(),
            file,
            blocks,
        })
    }

    fn parse_index(
        index: &[u8],
        blocks_end: u64,
        r: &EntrySegmentRef,
    ) -> Result<Vec<Block>, String> {
        let mut rd = codec::Reader::new(index, 0);
        let version = rd.u32()?;
        if version != ENTRY_SEGMENT_VERSION {
            return Err(format!(
                "segment version {version} (this reconciler reads {ENTRY_SEGMENT_VERSION})"
            ));
        }
        let (generation, records) = (rd.u64()?, rd.u64()?);
        if generation != r.generation || records != r.records {
            return Err(format!(
                "generation {generation} and {records} pairs where the checkpoint recorded {} and {}",
                r.generation, r.records
            ));
        }
        let n = rd.count()?;
        let mut blocks: Vec<Block> = Vec::with_capacity(n);
        for _ in 0..n {
            let b = Block {
                account: rd.str()?.into(),
                fp: rd.u64()?,
                offset: rd.u64()?,
                words: rd.u32()?,
                len: rd.u32()?,
                filter_sha: rd.take(32)?.try_into().expect("32 bytes"),
                sha: rd.take(32)?.try_into().expect("32 bytes"),
            };
            let end = b
                .offset
                .checked_add(u64::from(b.words) * 8 + u64::from(b.len));
            if b.words == 0 || end.is_none_or(|e| e > blocks_end) {
                return Err("a block out of place".into());
            }
            if blocks
                .last()
                .is_some_and(|p| (&*p.account, p.fp) >= (&*b.account, b.fp))
            {
                return Err("blocks out of key order".into());
            }
            blocks.push(b);
        }
        if !rd.at_end() {
            return Err("bytes after the last block".into());
        }
        Ok(blocks)
    }

    /// The block whose key range would hold (account, fp): the last whose
    /// first key is not after it.
    fn block_of(&self, account: &str, fp: u64) -> Option<usize> {
        self.blocks
            .partition_point(|b| (&*b.account, b.fp) <= (account, fp))
            .checked_sub(1)
    }

    fn err(&self, i: usize, why: impl std::fmt::Display) -> String {
        format!("entry segment {}: block {i}: {why}", self.r.file)
    }

    /// Block `i`'s filter, checked against its SHA-256.
    fn filter(&self, i: usize) -> Result<Bloom, String> {
        let b = &self.blocks[i];
        let bytes = archive::read_at(&self.file, b.offset, u64::from(b.words) * 8)
            .map_err(|e| self.err(i, e))?;
        if Sha256::digest(&bytes).as_slice() != b.filter_sha {
            return Err(self.err(i, "damaged: its filter's SHA-256 does not match"));
        }
        let words = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        Ok(Bloom {
            words,
            probes: archive::BLOOM_PROBES,
        })
    }

    /// Block `i`'s records, checked against its SHA-256 and its key order.
    fn records(&self, i: usize) -> Result<Runs, String> {
        let b = &self.blocks[i];
        let at = b.offset + u64::from(b.words) * 8;
        let bytes =
            archive::read_at(&self.file, at, u64::from(b.len)).map_err(|e| self.err(i, e))?;
        if Sha256::digest(&bytes).as_slice() != b.sha {
            return Err(self.err(i, "damaged: its SHA-256 does not match"));
        }
        let runs = parse_runs(&bytes).map_err(|e| self.err(i, format!("damaged: {e}")))?;
        // The index sends a lookup here by the block's first key: it must be
        // the first pair, and the last pair before the next block's.
        let first = runs.first().map(|(a, p)| (&**a, p[0].0));
        let last = runs.last().map(|(a, p)| (&**a, p[p.len() - 1].0));
        let next = self.blocks.get(i + 1).map(|n| (&*n.account, n.fp));
        if first != Some((&*b.account, b.fp)) || next.is_some_and(|n| last >= Some(n)) {
            return Err(self.err(i, "damaged: its pairs do not match the index's keys"));
        }
        Ok(runs)
    }
}

fn parse_runs(bytes: &[u8]) -> Result<Runs, String> {
    let mut rd = codec::Reader::new(bytes, 0);
    let mut runs: Runs = Vec::new();
    while !rd.at_end() {
        let account: Arc<str> = rd.str()?.into();
        let n = rd.u32()? as usize;
        let mut pairs = Vec::with_capacity(n.min(bytes.len() / 16));
        for _ in 0..n {
            pairs.push((rd.u64()?, rd.u64()?));
        }
        let sorted = pairs.windows(2).all(|w| w[0].0 < w[1].0);
        let after = runs.last().is_none_or(|(a, _)| **a < *account);
        if n == 0 || !sorted || !after {
            return Err("pairs out of key order".into());
        }
        runs.push((account, pairs));
    }
    Ok(runs)
}

/// The pair's seq in `runs`, if they hold it.
fn find(runs: &Runs, account: &str, fp: u64) -> Option<u64> {
    let at = runs.binary_search_by(|(a, _)| (**a).cmp(account)).ok()?;
    let pairs = &runs[at].1;
    let k = pairs.binary_search_by_key(&fp, |p| p.0).ok()?;
    Some(pairs[k].1)
}

/// The entry segments a checkpoint names, oldest first, and what lookups
/// have read of them.
#[derive(Debug, Default)]
pub struct EntryStore {
    segments: Vec<Segment>,
    /// The generation of the checkpoint it was read from (0: none): the
    /// next checkpoint writes `generation + 1`.
    pub generation: u64,
    /// Filters read, by (segment, block).
    filters: HashMap<(usize, usize), Bloom>,
    /// The last block whose records were read.
    last: Option<((usize, usize), Runs)>,
    /// Blocks whose records a lookup read.
    pub blocks_read: u64,
}

impl EntryStore {
    /// Opens the segments a checkpoint in `dir` names (oldest first, their
    /// generations rising and none above `generation`).
    pub fn open(
        dir: &Path,
        refs: &[EntrySegmentRef],
        generation: u64,
    ) -> Result<EntryStore, String> {
        let rising = refs.windows(2).all(|w| w[0].generation < w[1].generation);
        if !rising || refs.last().is_some_and(|r| r.generation > generation) {
            return Err(format!(
                "damaged header: entry segments of generations {:?} in a checkpoint of generation {generation}",
                refs.iter().map(|r| r.generation).collect::<Vec<_>>()
            ));
        }
        let segments = refs
            .iter()
            .map(|r| Segment::open(dir, r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EntryStore {
            segments,
            generation,
            ..EntryStore::default()
        })
    }

    pub fn refs(&self) -> Vec<EntrySegmentRef> {
        self.segments.iter().map(|s| s.r.clone()).collect()
    }

    /// The seq `account` first posted the entry fingerprinted `fp` at, as
    /// the segments of generation `since` and after hold it.
    pub fn first_seq(&mut self, account: &str, since: u64, fp: u64) -> Result<Option<u64>, String> {
        let h = pair_hashes(account, fp);
        for s in (0..self.segments.len()).rev() {
            let seg = &self.segments[s];
            if seg.r.generation < since {
                break; // older ones too: generations rise
            }
            let Some(b) = seg.block_of(account, fp) else {
                continue;
            };
            let filter = match self.filters.entry((s, b)) {
                std::collections::hash_map::Entry::Occupied(f) => f.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(seg.filter(b)?),
            };
            if !filter.may_contain_hashed(h) {
                continue;
            }
            if self.last.as_ref().map(|l| l.0) != Some((s, b)) {
                self.blocks_read += 1;
                self.last = Some(((s, b), seg.records(b)?));
            }
            let runs = &self.last.as_ref().expect("just read").1;
            if let Some(seq) = find(runs, account, fp) {
                return Ok(Some(seq));
            }
        }
        Ok(None)
    }
}

impl EntryStore {
    /// Every pair that counts (`since`: see [`append`]), by account in
    /// order, each account's in fingerprint order: the whole store read.
    pub fn pairs(&self, since: &dyn Fn(&str) -> Option<u64>) -> Result<Vec<AccountPairs>, String> {
        let mut all: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
        for seg in &self.segments {
            let mut c = Cursor::new(seg);
            while let Some((account, fp, seq)) = c.peek()?.cloned() {
                c.pending.pop();
                if since(&account).is_some_and(|g| seg.r.generation >= g) {
                    all.entry(account.to_string()).or_default().push((fp, seq));
                }
            }
        }
        Ok(all
            .into_iter()
            .map(|(a, mut p)| {
                p.sort_unstable();
                (a, p)
            })
            .collect())
    }
}

/// Reads a segment's pairs in key order, one block at a time.
struct Cursor<'a> {
    seg: &'a Segment,
    next_block: usize,
    /// The current block's pairs, reversed (the next at the end).
    pending: Vec<Pair>,
}

impl<'a> Cursor<'a> {
    fn new(seg: &'a Segment) -> Cursor<'a> {
        Cursor {
            seg,
            next_block: 0,
            pending: Vec::new(),
        }
    }

    fn peek(&mut self) -> Result<Option<&Pair>, String> {
        while self.pending.is_empty() && self.next_block < self.seg.blocks.len() {
            let runs = self.seg.records(self.next_block)?;
            self.next_block += 1;
            for (account, pairs) in runs.into_iter().rev() {
                self.pending.extend(
                    pairs
                        .into_iter()
                        .rev()
                        .map(|(fp, seq)| (account.clone(), fp, seq)),
                );
            }
        }
        Ok(self.pending.last())
    }
}

/// Writes pairs (pushed in key order) as a segment beside the checkpoint;
/// fsynced before it is named.
struct SegmentWriter {
    dir: PathBuf,
    stem: String,
    tmp: PathBuf,
    out: std::io::BufWriter<File>,
    blocks: Vec<Block>,
    /// The current block: its encoded runs, its open run, its first key and
    /// its pairs' filter hashes.
    buf: codec::Writer,
    run: Option<AccountPairs>,
    first: Option<(Box<str>, u64)>,
    hashes: Vec<(u64, u64)>,
    last: Option<(Box<str>, u64)>,
    offset: u64,
    count: u64,
}

impl SegmentWriter {
    fn create(checkpoint: &Path) -> Result<SegmentWriter, String> {
        let (dir, stem, tmp, out) =
            archive::create_beside(checkpoint, "ent").map_err(|(dir, e)| write_err(&dir, e))?;
        Ok(SegmentWriter {
            out,
            blocks: Vec::new(),
            buf: codec::Writer::default(),
            run: None,
            first: None,
            hashes: Vec::new(),
            last: None,
            offset: 0,
            count: 0,
            dir,
            stem,
            tmp,
        })
    }

    fn push(&mut self, account: &str, fp: u64, seq: u64) -> Result<(), String> {
        if self
            .last
            .as_ref()
            .is_some_and(|(a, f)| (&**a, *f) >= (account, fp))
        {
            return Err(format!("entry pairs out of key order at {account:?}"));
        }
        self.last = Some((account.into(), fp));
        self.first.get_or_insert_with(|| (account.into(), fp));
        if self.run.as_ref().is_some_and(|(a, _)| a != account) {
            self.end_run();
        }
        self.run
            .get_or_insert_with(|| (account.into(), Vec::new()))
            .1
            .push((fp, seq));
        self.hashes.push(pair_hashes(account, fp));
        self.count += 1;
        let open = self.run.as_ref().map_or(0, |r| r.1.len() * 16);
        if self.buf.buf.len() + open >= BLOCK_BYTES {
            self.end_block()?;
        }
        Ok(())
    }

    fn end_run(&mut self) {
        if let Some((account, pairs)) = self.run.take() {
            self.buf.str(&account);
            self.buf.u32(pairs.len() as u32); // a block holds ~1000 pairs
            for (fp, seq) in pairs {
                self.buf.u64(fp);
                self.buf.u64(seq);
            }
        }
    }

    fn end_block(&mut self) -> Result<(), String> {
        self.end_run();
        let Some((account, fp)) = self.first.take() else {
            return Ok(());
        };
        let mut filter = Bloom::new(self.hashes.len());
        for h in self.hashes.drain(..) {
            filter.insert_hashed(h);
        }
        let filter: Vec<u8> = filter.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let records = std::mem::take(&mut self.buf.buf);
        for part in [&filter, &records] {
            self.out
                .write_all(part)
                .map_err(|e| write_err(&self.dir, e))?;
        }
        self.blocks.push(Block {
            account,
            fp,
            offset: self.offset,
            words: (filter.len() / 8) as u32,
            len: records.len() as u32,
            filter_sha: Sha256::digest(&filter).into(),
            sha: Sha256::digest(&records).into(),
        });
        self.offset += (filter.len() + records.len()) as u64;
        Ok(())
    }

    fn finish(mut self, generation: u64) -> Result<EntrySegmentRef, String> {
        self.end_block()?;
        let index = encode_index(generation, self.count, &self.blocks);
        let dir = self.dir.clone();
        let (file, bytes, index_sha256) = archive::finish_indexed(
            self.out,
            &index,
            self.offset,
            MAGIC,
            &self.tmp,
            (&self.dir, &self.stem, "ent"),
        )
        .map_err(|e| write_err(&dir, e))?;
        Ok(EntrySegmentRef {
            file,
            bytes,
            records: self.count,
            index_sha256,
            generation,
        })
    }
}

/// A segment's index (see the module's layout).
fn encode_index(generation: u64, records: u64, blocks: &[Block]) -> Vec<u8> {
    let mut ix = codec::Writer::default();
    ix.u32(ENTRY_SEGMENT_VERSION);
    ix.u64(generation);
    ix.u64(records);
    ix.count(blocks.len());
    for b in blocks {
        ix.str(&b.account);
        ix.u64(b.fp);
        ix.u64(b.offset);
        ix.u32(b.words);
        ix.u32(b.len);
        ix.bytes(&b.filter_sha);
        ix.bytes(&b.sha);
    }
    ix.buf
}

fn write_err(dir: &Path, e: std::io::Error) -> String {
    format!("cannot write an entry segment in {}: {e}", dir.display())
}

/// Adds a run's new pairs (`added`: accounts in order, each with its pairs
/// in fingerprint order) to `store` as a segment of generation
/// `store.generation + 1`, merges the newest segments as the policy says,
/// and returns the segments the new checkpoint names. `since(account)`: the
/// generation from which the account's pairs count (`None`: the account has
/// no state any more, and none of its pairs count).
pub fn append<'a>(
    store: &EntryStore,
    checkpoint: &Path,
    added: impl Iterator<Item = (&'a str, &'a [(u64, u64)])>,
    since: &dyn Fn(&str) -> Option<u64>,
) -> Result<Vec<EntrySegmentRef>, Beside> {
    use Beside::{Unreadable, Unwritable};
    let dir = archive::place(checkpoint).0;
    let generation = store.generation + 1;
    let mut refs = store.refs();
    let named: std::collections::HashSet<String> = refs.iter().map(|r| r.file.clone()).collect();
    let mut fresh: Vec<Segment> = Vec::new();
    let mut w: Option<SegmentWriter> = None;
    for (account, pairs) in added {
        for &(fp, seq) in pairs {
            if w.is_none() {
                w = Some(SegmentWriter::create(checkpoint).map_err(Unwritable)?);
            }
            let w = w.as_mut().expect("just created");
            w.push(account, fp, seq).map_err(Unwritable)?;
        }
    }
    if let Some(w) = w {
        let r = w.finish(generation).map_err(Unwritable)?;
        fresh.push(Segment::open(&dir, &r).map_err(Unwritable)?);
        refs.push(r);
    }
    let counts =
        |seg: &Segment, account: &str| since(account).is_some_and(|g| seg.r.generation >= g);
    while let [.., older, newer] = refs.as_slice() {
        if newer.records * 2 < older.records {
            break;
        }
        let n = refs.len();
        let find = |r: &EntrySegmentRef| {
            store
                .segments
                .iter()
                .chain(&fresh)
                .find(|s| s.r == *r)
                .expect("every referenced segment is open")
        };
        let (old, new) = (find(&refs[n - 2]), find(&refs[n - 1]));
        let mut w = SegmentWriter::create(checkpoint).map_err(Unwritable)?;
        let (mut a, mut b) = (Cursor::new(old), Cursor::new(new));
        loop {
            let pa = a.peek().map_err(Unreadable)?.cloned();
            let pb = b.peek().map_err(Unreadable)?.cloned();
            // The lesser key; of equal keys (never both counted: a pair is
            // added only when no segment holds it) the older one.
            let (take_a, take_b) = match (&pa, &pb) {
                (None, None) => break,
                (Some(_), None) => (true, false),
                (None, Some(_)) => (false, true),
                (Some(x), Some(y)) => {
                    let (kx, ky) = ((&*x.0, x.1), (&*y.0, y.1));
                    (kx <= ky, ky <= kx)
                }
            };
            let mut wrote = false;
            for (take, p, seg) in [(take_a, &pa, old), (take_b, &pb, new)] {
                let Some((account, fp, seq)) = p.as_ref().filter(|_| take) else {
                    continue;
                };
                if !wrote && counts(seg, account) {
                    w.push(account, *fp, *seq).map_err(Unwritable)?;
                    wrote = true;
                }
            }
            if take_a {
                a.pending.pop();
            }
            if take_b {
                b.pending.pop();
            }
        }
        let r = w.finish(new.r.generation).map_err(Unwritable)?;
        let inputs: Vec<String> = refs.drain(n - 2..).map(|r| r.file).collect();
        let stays = |f: &str| f == r.file || named.contains(f);
        fresh.retain(|s| !archive::remove_merged(&dir, &inputs, &s.r.file, stays));
        fresh.push(Segment::open(&dir, &r).map_err(Unwritable)?);
        refs.push(r);
    }
    Ok(refs)
}

/// Deletes the entry segment files of the checkpoint `checkpoint` that
/// `keep` does not name.
pub fn remove_unreferenced(checkpoint: &Path, keep: &[EntrySegmentRef]) -> Result<(), String> {
    archive::remove_unnamed(checkpoint, "ent", keep.iter().map(|r| r.file.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(
        account: &str,
        fps: impl IntoIterator<Item = u64>,
        seq: u64,
    ) -> Vec<(String, Vec<(u64, u64)>)> {
        let mut p: Vec<(u64, u64)> = fps.into_iter().map(|fp| (fp, seq)).collect();
        p.sort_unstable();
        vec![(account.to_owned(), p)]
    }

    /// One night: appends `added` and reopens the store as the next
    /// checkpoint names it.
    fn night(
        ckpt: &Path,
        store: &EntryStore,
        added: &[(String, Vec<(u64, u64)>)],
        since: &dyn Fn(&str) -> Option<u64>,
    ) -> EntryStore {
        let refs = append(
            store,
            ckpt,
            added.iter().map(|(a, p)| (a.as_str(), p.as_slice())),
            since,
        )
        .map_err(|e| format!("{e:?}"))
        .unwrap();
        remove_unreferenced(ckpt, &refs).unwrap();
        EntryStore::open(ckpt.parent().unwrap(), &refs, store.generation + 1).unwrap()
    }

    #[test]
    fn the_pair_hash_is_pinned() {
        // Segments on disk depend on it: changing it needs a new
        // ENTRY_SEGMENT_VERSION.
        assert_eq!(
            pair_hashes("acme.a1", 0x0123_4567_89ab_cdef),
            (0x41c1_3c6c_ef48_40e7, 0x67c1_0637_a9f1_cce5)
        );
    }

    #[test]
    fn a_blocks_filter_is_pinned() {
        // Segments on disk depend on the filter's size, probes and bit
        // mapping (shared with the archive's): changing any needs a new
        // ENTRY_SEGMENT_VERSION.
        let mut f = Bloom::new(2);
        f.insert_hashed(pair_hashes("acme.a1", 1));
        f.insert_hashed(pair_hashes("acme.a2", 1));
        assert_eq!(f.words.len(), 1);
        assert_eq!(f.words[0], 0x0518_1222_44c5_8b8a);
        assert!(f.may_contain_hashed(pair_hashes("acme.a1", 1)));
    }

    #[test]
    fn pairs_are_found_across_nights_and_segments_merge_as_they_accumulate() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        let all = |_: &str| Some(0);
        let mut store = EntryStore::default();
        // Night n adds 3000 pairs of account a (seq n) and 10 of account b.
        for n in 1..=12u64 {
            let mut added = pairs("a", (0..3000).map(|i| n * 1_000_000 + i * 7), n);
            added.extend(pairs("b", (0..10).map(|i| n * 100 + i), n));
            store = night(&ckpt, &store, &added, &all);
        }
        assert!(
            store.segments.len() <= 5,
            "{} segments",
            store.segments.len()
        );
        let on_disk = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(
            on_disk,
            store.segments.len(),
            "merged-away files are removed"
        );
        for n in 1..=12u64 {
            assert_eq!(
                store.first_seq("a", 0, n * 1_000_000 + 7 * 2999).unwrap(),
                Some(n)
            );
            assert_eq!(store.first_seq("b", 0, n * 100 + 9).unwrap(), Some(n));
            assert_eq!(
                store.first_seq("b", 0, n * 1_000_000).unwrap(),
                None,
                "a's, not b's"
            );
        }
        assert_eq!(store.first_seq("a", 0, 5).unwrap(), None);
        assert_eq!(store.first_seq("c", 0, 1_000_000).unwrap(), None);
        // The filters spare most blocks: 1000 absent pairs read few.
        let before = store.blocks_read;
        for i in 0..1000 {
            assert_eq!(
                store.first_seq("a", 0, 3 * 1_000_000 + i * 7 + 1).unwrap(),
                None
            );
        }
        assert!(
            store.blocks_read - before < 20,
            "{} blocks read",
            store.blocks_read - before
        );
    }

    #[test]
    fn an_account_rebuilt_from_its_first_event_counts_only_its_new_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        let s0 = EntryStore::default();
        // Generation 1: a holds fp 1 (seq 1) and 2 (seq 2).
        let s1 = night(&ckpt, &s0, &[("a".into(), vec![(1, 1), (2, 2)])], &|_| {
            Some(0)
        });
        assert_eq!(s1.refs()[0].generation, 1);
        // Generation 2: a is re-proved and now holds fp 1 at seq 1 and fp 3
        // at seq 2 (its history changed); b is new. a's old pairs no longer
        // count.
        let since = |a: &str| match a {
            "a" => Some(2),
            "b" => Some(2),
            _ => None,
        };
        let added = [
            ("a".to_owned(), vec![(1, 1), (3, 2)]),
            ("b".to_owned(), vec![(2, 5)]),
        ];
        let mut s2 = night(&ckpt, &s1, &added, &since);
        // Merged (2 new pairs against 2 old): a's fp 2 is gone.
        assert_eq!(s2.segments.len(), 1);
        assert_eq!(s2.refs()[0].records, 3);
        assert_eq!(s2.first_seq("a", 2, 2).unwrap(), None);
        assert_eq!(s2.first_seq("a", 2, 3).unwrap(), Some(2));
        assert_eq!(s2.first_seq("b", 2, 2).unwrap(), Some(5));
        // Unmerged, a lookup skips the older generation.
        let s1b = night(
            &ckpt,
            &s0,
            &[("a".into(), (10..40).map(|f| (f, f)).collect())],
            &|_| Some(0),
        );
        let s2b = {
            let refs = append(&s1b, &ckpt, [("a", &[(50, 60)][..])].into_iter(), &|_| {
                Some(2)
            })
            .unwrap();
            EntryStore::open(dir.path(), &refs, 2).unwrap()
        };
        let mut s2b = s2b;
        assert_eq!(s2b.segments.len(), 2);
        assert_eq!(s2b.first_seq("a", 2, 20).unwrap(), None);
        assert_eq!(s2b.first_seq("a", 1, 20).unwrap(), Some(20));
        assert_eq!(s2b.first_seq("a", 2, 50).unwrap(), Some(60));
    }

    #[test]
    fn a_block_whose_pairs_do_not_start_at_its_index_key_is_an_error_not_a_miss() {
        // A writer bug (say in a merge) that indexes a block by another key
        // than its first pair's, the index sealed as written: a lookup the
        // index sends there must stop the run, not answer "never posted".
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        let all = |_: &str| Some(0);
        let s = night(
            &ckpt,
            &EntryStore::default(),
            &pairs("a", (0..3000).map(|i| i * 10), 1),
            &all,
        );
        let seg = &s.segments[0];
        assert!(seg.blocks.len() >= 2);
        let mut blocks = seg.blocks.clone();
        // Block 1 claims to start 5 before its first pair.
        blocks[1].fp -= 5;
        let body = std::fs::read(dir.path().join(&seg.r.file)).unwrap();
        let end = blocks
            .last()
            .map(|b| b.offset + u64::from(b.words) * 8 + u64::from(b.len))
            .unwrap();
        let (_, stem, tmp, mut out) = archive::create_beside(&ckpt, "ent").unwrap();
        out.write_all(&body[..end as usize]).unwrap();
        let index = encode_index(1, seg.r.records, &blocks);
        let (file, bytes, index_sha256) =
            archive::finish_indexed(out, &index, end, MAGIC, &tmp, (dir.path(), &stem, "ent"))
                .unwrap();
        let r = EntrySegmentRef {
            file,
            bytes,
            records: seg.r.records,
            index_sha256,
            generation: 1,
        };
        let bad = EntryStore::open(dir.path(), &[r], 1).unwrap();
        // Reading the block, which a lookup in its claimed range does when
        // the filter passes, is the error.
        let e = bad.segments[0].records(1).unwrap_err();
        assert!(e.contains("block 1") && e.contains("index"), "{e}");
    }

    #[test]
    fn a_damaged_block_or_a_swapped_segment_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        let s1 = night(
            &ckpt,
            &EntryStore::default(),
            &pairs("a", 0..2000, 1),
            &|_| Some(0),
        );
        let r = s1.refs()[0].clone();
        let path = dir.path().join(&r.file);
        let mut bytes = std::fs::read(&path).unwrap();
        // A byte of the first block's records (after its filter).
        let words = s1.segments[0].blocks[0].words as usize;
        bytes[words * 8 + 30] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let mut s = EntryStore::open(dir.path(), std::slice::from_ref(&r), 1).unwrap();
        let e = s.first_seq("a", 0, 5).unwrap_err();
        assert!(
            e.contains(&r.file) && e.contains("block 0") && e.contains("SHA-256"),
            "{e}"
        );
        // Another generation than the checkpoint names: refused at open.
        let swapped = EntrySegmentRef {
            generation: 3,
            ..r.clone()
        };
        let e = EntryStore::open(dir.path(), &[swapped], 3).unwrap_err();
        assert!(e.contains("generation"), "{e}");
        // Out of order, or past the checkpoint's generation.
        assert!(EntryStore::open(dir.path(), std::slice::from_ref(&r), 0).is_err());
    }
}
