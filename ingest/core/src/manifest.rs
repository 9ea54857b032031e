//! Compaction manifests: which lake files one compaction replaced, and by
//! which (docs/LAKE.md, "Compaction manifests").
//!
//! Compaction is the only writer that deletes lake files. Before it deletes
//! its inputs it writes one manifest naming every input it read and every
//! output it wrote, each with the version the store showed it (size and
//! ETag: a file rewritten in place has another). A reader that proved a file
//! and later finds it gone can then tell the two ways a file leaves the lake
//! apart:
//!
//! - **replaced**: some manifest read exactly the version it proved, and every
//!   output of that manifest is in the lake as written, or was itself
//!   replaced the same way ([`unaccounted`] follows the chain); its
//!   rows are in those outputs;
//! - **lost**: anything else (deleted, rewritten under another key, rewritten
//!   in place before compaction read it, an output altered since): its rows
//!   may have left the lake, and only a proof of the lake as it is judges it.
//!
//! Manifests are never overwritten with other content (the key is a digest of
//! the content) and never deleted by compaction, so a chain of compactions
//! stays readable. A manifest is small beside the data it describes (one
//! line per file, not per row).
//!
//! Pure: no I/O. The compactor writes [`Manifest::to_json`] at
//! [`Manifest::key`]; readers list [`manifest_prefix`] and parse with
//! [`Manifest::parse`].

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::key::{parse_object_key, Partition, Table};

/// Every manifest lives under this prefix of the lake root, beside
/// [`crate::LAKE_EVENTS_PREFIX`] (never inside it: readers of `events/`
/// list only lake files).
pub const MANIFEST_PREFIX: &str = "manifests";

/// The manifest format's version; [`Manifest::parse`] refuses others.
pub const MANIFEST_VERSION: u32 = 1;

/// A lake file as the store showed it: its key, size and ETag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FileVersion {
    pub key: String,
    pub size: u64,
    /// The store's version tag (S3/R2: the ETag; a local directory: derived
    /// from inode, size and mtime); `None` when the store gives none.
    pub e_tag: Option<String>,
}

impl FileVersion {
    /// The version as one string: `{size}:{e_tag}`, what a reconciler
    /// checkpoint records for each file it proved ([`stamp`]).
    pub fn stamp(&self) -> String {
        stamp(self.size, self.e_tag.as_deref())
    }
}

/// A file version's stamp: `{size}:{e_tag}` (empty when the store gives no
/// ETag). Equal stamps of one key are the same bytes, as far as the store
/// can tell.
pub fn stamp(size: u64, e_tag: Option<&str>) -> String {
    format!("{size}:{}", e_tag.unwrap_or(""))
}

/// One compaction of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    pub table: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Every lake file the compaction read, sorted by key.
    pub inputs: Vec<FileVersion>,
    /// Every file it left holding their rows (new, or an input it kept
    /// because its key and bytes were already the output's), sorted by key.
    pub outputs: Vec<FileVersion>,
    /// The lake layout a compactor wrote its outputs in
    /// ([`Manifest::of_compaction`]); absent in manifests written before the
    /// field was, and in those of other tools that move files under new keys
    /// ([`Manifest::new`]: the test data's `rekey`). A partition listed
    /// exactly as the outputs of a manifest of the current layout is compact
    /// already: compaction need not read it ([`Manifest::left_as`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
}

/// The "directory" of a partition's manifests, with a trailing `/`.
pub fn manifest_prefix(partition: &Partition) -> String {
    format!(
        "{MANIFEST_PREFIX}/{}/date={}/",
        partition.table.as_str(),
        partition.date
    )
}

impl Manifest {
    /// A manifest of `partition`, inputs and outputs sorted by key.
    pub fn new(
        partition: &Partition,
        mut inputs: Vec<FileVersion>,
        mut outputs: Vec<FileVersion>,
    ) -> Manifest {
        inputs.sort();
        outputs.sort();
        Manifest {
            version: MANIFEST_VERSION,
            table: partition.table.as_str().to_owned(),
            date: partition.date.clone(),
            inputs,
            outputs,
            layout: None,
        }
    }

    /// [`Manifest::new`] for a compactor, which wrote every output by
    /// merging its inputs in the current layout: a partition later listed
    /// exactly as its outputs need not be read again ([`Manifest::left_as`]).
    pub fn of_compaction(
        partition: &Partition,
        inputs: Vec<FileVersion>,
        outputs: Vec<FileVersion>,
    ) -> Manifest {
        Manifest {
            layout: Some(crate::LAKE_LAYOUT_VERSION.to_owned()),
            ..Manifest::new(partition, inputs, outputs)
        }
    }

    /// Whether a partition listed as `listed` (sorted by key) is exactly
    /// this compaction's outputs, each in the version it wrote (size and
    /// ETag, which every listed file must have), in the current layout: a
    /// compaction of it would write the same files again.
    pub fn left_as(&self, listed: &[FileVersion]) -> bool {
        self.layout.as_deref() == Some(crate::LAKE_LAYOUT_VERSION)
            && !listed.is_empty()
            && listed.iter().all(|f| f.e_tag.is_some())
            && self.outputs == listed
    }

    /// The bytes written: JSON, one object.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest always serializes")
    }

    /// `manifests/{table}/date={date}/m-{digest}.json`, the digest the first
    /// 128 bits of SHA-256 over [`Manifest::to_json`]: a re-run that
    /// replaces the same versions writes the same object again; any other
    /// content gets a key of its own, so no manifest is ever overwritten with
    /// less than it said.
    pub fn key(&self) -> String {
        let digest = Sha256::digest(self.to_json());
        format!(
            "{MANIFEST_PREFIX}/{}/date={}/m-{}.json",
            self.table,
            self.date,
            ledger_events::event::hex(&digest[..16])
        )
    }

    /// The partition it describes.
    pub fn partition(&self) -> Option<Partition> {
        Some(Partition {
            table: Table::parse(&self.table)?,
            date: self.date.clone(),
        })
    }

    /// Parses and checks a manifest read from `key`: its version, and that
    /// it names only lake files of the partition its key names.
    pub fn parse(key: &str, bytes: &[u8]) -> Result<Manifest, String> {
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| format!("{key}: not a compaction manifest: {e}"))?;
        if m.version != MANIFEST_VERSION {
            return Err(format!(
                "{key}: manifest version {} (this build reads {MANIFEST_VERSION})",
                m.version
            ));
        }
        let partition = m
            .partition()
            .ok_or_else(|| format!("{key}: unknown table {:?}", m.table))?;
        if !key.starts_with(&manifest_prefix(&partition)) {
            return Err(format!(
                "{key}: describes {} {}, not the partition its key names",
                m.table, m.date
            ));
        }
        let foreign = m
            .inputs
            .iter()
            .chain(&m.outputs)
            .find(|f| parse_object_key(&f.key).map(|k| k.partition) != Some(partition.clone()));
        if let Some(f) = foreign {
            return Err(format!(
                "{key}: names {}, which is not a lake file of its partition",
                f.key
            ));
        }
        Ok(m)
    }
}

/// Why a proved file that is gone is not accounted for ([`unaccounted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unaccounted {
    /// No manifest read this file at all: deleted or renamed outside compaction.
    NotCompacted { key: String },
    /// No manifest read this version, and the key is listed in another
    /// version: the file was rewritten in place, or copied (on a local
    /// disk a version is also its inode: `cp -a`, rsync or a restore of a
    /// local lake makes every file another version).
    Rewritten { key: String },
    /// Manifests read this key, but never the version proved: it was rewritten
    /// before compaction read it.
    OtherVersion { key: String, read: String },
    /// A manifest replaced it, but an output of every such manifest is gone
    /// or changed since, and no later manifest replaced that output as written.
    OutputsChanged { key: String, output: String },
    /// Every manifest that read it wrote no file: its rows went nowhere
    /// (every lake file holds a row; a compactor that read a damaged file
    /// as empty wrote such a manifest).
    NoOutputs { key: String },
}

impl Unaccounted {
    /// The key of the file version that is not accounted for.
    pub fn key(&self) -> &str {
        match self {
            Unaccounted::Rewritten { key }
            | Unaccounted::NotCompacted { key }
            | Unaccounted::OtherVersion { key, .. }
            | Unaccounted::NoOutputs { key }
            | Unaccounted::OutputsChanged { key, .. } => key,
        }
    }
}

impl std::fmt::Display for Unaccounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unaccounted::Rewritten { key } => write!(
                f,
                "{key} is listed in another version than the one proved and no compaction manifest replaced that one: \
                 rewritten in place, or the lake was copied (on a local disk a copy is a new version of every file)"
            ),
            Unaccounted::NotCompacted { key } => write!(
                f,
                "{key} is gone and no compaction manifest says it replaced it"
            ),
            Unaccounted::OtherVersion { key, read } => write!(
                f,
                "{key} is gone; compaction replaced another version of it ({read}), not the one proved"
            ),
            Unaccounted::NoOutputs { key } => write!(
                f,
                "{key} is gone; the compaction manifest that read it wrote no file for its rows"
            ),
            Unaccounted::OutputsChanged { key, output } => write!(
                f,
                "{key} was replaced by compaction, but its output {output} is gone or changed since"
            ),
        }
    }
}

/// Each of `gone` (key and stamp of a file version that was proved and is
/// no longer in the lake as it was) that `manifests` do not account for, in
/// the order given; empty when compaction replaced every one of them and
/// their rows are in files of `listed` (key → stamp of every lake file now)
/// as compaction wrote them.
///
/// A version is accounted for when it is listed with that stamp, or when
/// some manifest read exactly that version and every one of that manifest's
/// outputs is accounted for in turn (a chain of compactions: the output of
/// one was the input of the next).
pub fn unaccounted<'a>(
    gone: impl IntoIterator<Item = (&'a str, &'a str)>,
    listed: &HashMap<&str, &str>,
    manifests: &[Manifest],
) -> Vec<Unaccounted> {
    custody(gone, listed, manifests)
        .into_iter()
        .filter_map(|(_, c)| c.err())
        .collect()
}

/// For each of `gone` (as [`unaccounted`]), in the order given: the keys of
/// the files of `listed` that hold its rows (the outputs, as written, that
/// a chain of manifests leads to from it), or why it is not accounted for.
pub fn custody<'a>(
    gone: impl IntoIterator<Item = (&'a str, &'a str)>,
    listed: &HashMap<&str, &str>,
    manifests: &[Manifest],
) -> Vec<(&'a str, Result<BTreeSet<String>, Unaccounted>)> {
    let mut readers: HashMap<(&str, String), Vec<&Manifest>> = HashMap::new();
    let mut read_versions: HashMap<&str, String> = HashMap::new();
    for m in manifests {
        for f in read_by(m) {
            readers.entry((&f.key, f.stamp())).or_default().push(m);
            read_versions.entry(&f.key).or_insert_with(|| f.stamp());
        }
    }
    let walk = Walk {
        listed,
        readers: &readers,
        rank: ranks(listed, manifests),
    };
    let mut out = Vec::new();
    for (key, stamp) in gone {
        if walk.accounted(key, stamp) {
            let mut holders = BTreeSet::new();
            walk.holders(key, stamp, &mut holders);
            out.push((key, Ok(holders)));
            continue;
        }
        out.push((
            key,
            Err(if !readers.contains_key(&(key, stamp.to_owned())) {
                match read_versions.get(key) {
                    Some(read) => Unaccounted::OtherVersion {
                        key: key.to_owned(),
                        read: read.clone(),
                    },
                    None if listed.contains_key(key) => Unaccounted::Rewritten {
                        key: key.to_owned(),
                    },
                    None => Unaccounted::NotCompacted {
                        key: key.to_owned(),
                    },
                }
            } else if readers[&(key, stamp.to_owned())]
                .iter()
                .all(|m| m.outputs.is_empty())
            {
                Unaccounted::NoOutputs {
                    key: key.to_owned(),
                }
            } else {
                let output = walk
                    .first_lost_output(key, stamp)
                    .unwrap_or_else(|| key.to_owned());
                Unaccounted::OutputsChanged {
                    key: key.to_owned(),
                    output,
                }
            }),
        ));
    }
    out
}

/// The inputs `m` replaced: each it read but one it wrote again as it was
/// (a compaction that found nothing to add to it: a redelivered batch's
/// rows all in it already, on a store whose version tag is the content's).
/// That one is its own output, not replaced: counted a reader, it made a
/// cycle (rev-s59-holds 1).
fn read_by(m: &Manifest) -> impl Iterator<Item = &FileVersion> {
    m.inputs.iter().filter(move |f| {
        !m.outputs
            .iter()
            .any(|o| o.key == f.key && o.stamp() == f.stamp())
    })
}

/// Each version the manifests account for (not listed itself), with its
/// rank: 1 + the greatest rank of the outputs of the manifest that carried
/// it with the least, a listed version's rank 0. The least fixpoint of
/// "accounted: listed, or read by a manifest that wrote at least one
/// output and each of them accounted", found by rank (breadth first from
/// the listed files), so a cycle of manifests accounts for nothing of
/// itself and a version accounted through one way out is found whichever
/// version is asked first; and [`Walk::holders`], following a reader of
/// rank equal to its version's down to rank 0, always ends.
fn ranks(listed: &HashMap<&str, &str>, manifests: &[Manifest]) -> HashMap<(String, String), u32> {
    let is_listed = |f: &FileVersion| listed.get(f.key.as_str()) == Some(&f.stamp().as_str());
    // Per manifest, its outputs not yet accounted for (each once); per
    // version, the manifests that wrote it.
    let mut waiting: Vec<usize> = Vec::with_capacity(manifests.len());
    let mut writers: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, m) in manifests.iter().enumerate() {
        let outputs: HashSet<(String, String)> = m
            .outputs
            .iter()
            .map(|o| (o.key.clone(), o.stamp()))
            .collect();
        waiting.push(outputs.len());
        for o in outputs {
            writers.entry(o).or_default().push(i);
        }
    }
    let mut rank: HashMap<(String, String), u32> = HashMap::new();
    let mut queue: std::collections::VecDeque<((String, String), u32)> = manifests
        .iter()
        .flat_map(|m| &m.outputs)
        .filter(|o| is_listed(o))
        .map(|o| ((o.key.clone(), o.stamp()), 0))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    // Breadth first: ranks come off the queue in order, so the output that
    // completes a manifest has the greatest rank of its outputs.
    while let Some((v, r)) = queue.pop_front() {
        for &i in writers.get(&v).map_or(&[][..], Vec::as_slice) {
            waiting[i] -= 1;
            if waiting[i] > 0 {
                continue;
            }
            for f in read_by(&manifests[i]) {
                let id = (f.key.clone(), f.stamp());
                if is_listed(f) || rank.contains_key(&id) {
                    continue;
                }
                rank.insert(id.clone(), r + 1);
                queue.push_back((id, r + 1));
            }
        }
    }
    rank
}

/// The chain walk of [`unaccounted`], on the ranks of [`ranks`].
struct Walk<'m, 'l> {
    listed: &'l HashMap<&'l str, &'l str>,
    readers: &'m HashMap<(&'m str, String), Vec<&'m Manifest>>,
    rank: HashMap<(String, String), u32>,
}

impl Walk<'_, '_> {
    /// The rank of the version `key`@`stamp` when it is accounted for.
    fn rank_of(&self, key: &str, stamp: &str) -> Option<u32> {
        if self.listed.get(key) == Some(&stamp) {
            return Some(0);
        }
        self.rank.get(&(key.to_owned(), stamp.to_owned())).copied()
    }

    /// Whether the version `key`@`stamp` is accounted for.
    fn accounted(&self, key: &str, stamp: &str) -> bool {
        self.rank_of(key, stamp).is_some()
    }

    /// Adds to `into` the listed files that hold the rows of the accounted
    /// version `key`@`stamp`: itself when listed, else the holders of the
    /// outputs of the first manifest that read it whose outputs are all
    /// accounted for with ranks below its own (one exists: the one that
    /// gave it its rank), so the walk goes down and ends.
    fn holders(&self, key: &str, stamp: &str, into: &mut BTreeSet<String>) {
        let Some(at) = self.rank_of(key, stamp) else {
            return;
        };
        if at == 0 {
            into.insert(key.to_owned());
            return;
        }
        let Some(ms) = self.readers.get(&(key, stamp.to_owned())) else {
            return;
        };
        let m = ms.iter().copied().find(|m| {
            !m.outputs.is_empty()
                && m.outputs
                    .iter()
                    .all(|o| self.rank_of(&o.key, &o.stamp()).is_some_and(|r| r < at))
        });
        for o in m.map_or(&[][..], |m| &m.outputs[..]) {
            self.holders(&o.key, &o.stamp(), into);
        }
    }

    /// The first output not accounted for, of the manifests that read
    /// `key`@`stamp` (readers that wrote none skipped), followed down the
    /// chain while a later manifest read it in turn, and not back into a
    /// cycle: the file that is gone or changed, not one a later compaction
    /// replaced as it should (what a message names; rev-s58-full 6,
    /// rev-s58-fixes 2).
    fn first_lost_output(&self, key: &str, stamp: &str) -> Option<String> {
        let mut at = (key.to_owned(), stamp.to_owned());
        let mut seen = HashSet::from([at.clone()]);
        let mut named = None;
        while let Some(o) = self
            .readers
            .get(&(at.0.as_str(), at.1.clone()))
            .into_iter()
            .flatten()
            .find_map(|m| {
                m.outputs
                    .iter()
                    .find(|o| !self.accounted(&o.key, &o.stamp()))
            })
        {
            let next = (o.key.clone(), o.stamp());
            if !seen.insert(next.clone()) {
                break;
            }
            named = Some(o.key.clone());
            at = next;
        }
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "events/account/date=2026-01-01/";

    /// A version of file `n` of the partition: `c-…` when `n` ≥ 100, else `i-…`.
    fn v(n: u32, size: u64, tag: &str) -> FileVersion {
        let layer = if n >= 100 { "c" } else { "i" };
        FileVersion {
            key: format!("{P}{layer}-{n:032x}.parquet"),
            size,
            e_tag: Some(tag.to_owned()),
        }
    }

    fn day() -> Partition {
        Partition {
            table: Table::Account,
            date: "2026-01-01".into(),
        }
    }

    fn listed(files: &[&FileVersion]) -> Vec<(String, String)> {
        files.iter().map(|f| (f.key.clone(), f.stamp())).collect()
    }

    fn lost(gone: &[&FileVersion], now: &[&FileVersion], ms: &[Manifest]) -> Option<Unaccounted> {
        let now = listed(now);
        let now: HashMap<&str, &str> = now.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
        let gone = listed(gone);
        unaccounted(gone.iter().map(|(k, s)| (k.as_str(), s.as_str())), &now, ms)
            .into_iter()
            .next()
    }

    #[test]
    fn a_partition_is_left_as_a_manifest_says_only_in_the_versions_and_layout_it_wrote() {
        let (i, c1, c2) = (v(1, 10, "i"), v(100, 20, "c1"), v(101, 30, "c2"));
        let m = Manifest::of_compaction(&day(), vec![i.clone()], vec![c2.clone(), c1.clone()]);
        assert!(m.left_as(&[c1.clone(), c2.clone()]));
        // Read back from its bytes, the same.
        let back = Manifest::parse(&m.key(), &m.to_json()).unwrap();
        assert!(back.left_as(&[c1.clone(), c2.clone()]));
        // Another file beside the outputs (a late ingest file, or an input
        // a crash left), an output gone, or one in another version: no.
        assert!(!m.left_as(&[i.clone(), c1.clone(), c2.clone()]));
        assert!(!m.left_as(std::slice::from_ref(&c1)));
        assert!(!m.left_as(&[c1.clone(), v(101, 30, "rewritten")]));
        assert!(!m.left_as(&[]));
        // A store that gives no ETag cannot tell a version: no.
        let untagged = |f: &FileVersion| FileVersion {
            e_tag: None,
            ..f.clone()
        };
        let bare = Manifest::of_compaction(&day(), vec![], vec![untagged(&c1)]);
        assert!(!bare.left_as(&[untagged(&c1)]));
        // A manifest written before the layout was recorded, or of another
        // layout: its outputs may need rewriting, so no.
        let mut legacy = m.clone();
        legacy.layout = None;
        let json = String::from_utf8(legacy.to_json()).unwrap();
        assert!(!json.contains("layout"), "{json}");
        let legacy = Manifest::parse(&legacy.key(), json.as_bytes()).unwrap();
        assert!(!legacy.left_as(&[c1.clone(), c2.clone()]));
        let mut old = m.clone();
        old.layout = Some("lake-v1".into());
        assert!(!old.left_as(&[c1.clone(), c2.clone()]));
        // Another tool's manifest (files moved under new keys, not merged):
        // no.
        let moved = Manifest::new(&day(), vec![i], vec![c1.clone(), c2.clone()]);
        assert!(!moved.left_as(&[c1, c2]));
    }

    #[test]
    fn an_accounted_version_is_held_by_the_files_its_chain_of_manifests_leads_to() {
        let (a, b, i) = (v(1, 10, "a"), v(2, 10, "b"), v(3, 10, "i"));
        let (c1, c2, c3) = (v(100, 20, "c1"), v(101, 30, "c2"), v(102, 5, "c3"));
        // a and b into c1 and c3; c1 (with i) into c2; c3 stays.
        let m1 = Manifest::new(
            &day(),
            vec![a.clone(), b.clone()],
            vec![c1.clone(), c3.clone()],
        );
        let m2 = Manifest::new(&day(), vec![c1.clone(), i.clone()], vec![c2.clone()]);
        let now = listed(&[&c2, &c3]);
        let now: HashMap<&str, &str> = now.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
        let gone = listed(&[&a, &c1, &v(4, 10, "x")]);
        let out = custody(
            gone.iter().map(|(k, s)| (k.as_str(), s.as_str())),
            &now,
            &[m1, m2],
        );
        let held = |keys: &[&FileVersion]| -> BTreeSet<String> {
            keys.iter().map(|f| f.key.clone()).collect()
        };
        assert_eq!(out[0], (a.key.as_str(), Ok(held(&[&c2, &c3]))));
        assert_eq!(out[1], (c1.key.as_str(), Ok(held(&[&c2]))));
        assert!(matches!(out[2].1, Err(Unaccounted::NotCompacted { .. })));
    }

    /// A redelivered batch whose rows the compacted file held already: the
    /// compaction wrote that file again as it was (the same version on a
    /// store whose tag is the content's) and read the batch. A later
    /// compaction replaced the file. Every version is held by the last
    /// output, and the walk ends (it recursed for good through the
    /// manifest that read and wrote the same version: rev-s59-holds 1).
    #[test]
    fn a_file_written_again_as_it_was_is_not_replaced_by_its_own_manifest() {
        let (i1, i2, i3) = (v(1, 10, "i1"), v(2, 10, "i2"), v(3, 10, "i3"));
        let (c, w) = (v(100, 20, "c"), v(101, 30, "w"));
        let m1 = Manifest::new(&day(), vec![i1.clone()], vec![c.clone()]);
        let again = Manifest::new(&day(), vec![c.clone(), i2.clone()], vec![c.clone()]);
        let m3 = Manifest::new(&day(), vec![c.clone(), i3.clone()], vec![w.clone()]);
        let now = listed(&[&w]);
        let now: HashMap<&str, &str> = now.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
        let gone = listed(&[&i1, &c, &i2, &i3]);
        // Either order of the manifests (the one that wrote `c` again
        // first among its readers, or last).
        for ms in [
            [m1.clone(), again.clone(), m3.clone()],
            [m1.clone(), m3.clone(), again.clone()],
        ] {
            let out = custody(
                gone.iter().map(|(k, s)| (k.as_str(), s.as_str())),
                &now,
                &ms,
            );
            let held: Vec<_> = out.iter().map(|(_, h)| h.clone()).collect();
            let w_only = Ok(BTreeSet::from([w.key.clone()]));
            assert_eq!(held, vec![w_only.clone(); 4]);
        }
        // `c` still listed as it was: the batch it read is held by it.
        let now = listed(&[&c]);
        let now: HashMap<&str, &str> = now.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
        let gone = listed(&[&i2]);
        let out = custody(
            gone.iter().map(|(k, s)| (k.as_str(), s.as_str())),
            &now,
            &[m1, again],
        );
        assert_eq!(out[0].1, Ok(BTreeSet::from([c.key.clone()])));
        // A cycle through two manifests (`a` into `b`, `b` back into the
        // same version of `a`) beside the way out (`a` into `w`): both are
        // held by `w`, whichever is asked first (asked first, `a` found `b`
        // open and a walk memoised `b` as lost; asked first, `b` went back
        // into `a` for good).
        let (a, b) = (v(4, 10, "a"), v(5, 10, "b"));
        let ms = [
            Manifest::new(&day(), vec![a.clone()], vec![b.clone()]),
            Manifest::new(&day(), vec![b.clone()], vec![a.clone()]),
            Manifest::new(&day(), vec![a.clone()], vec![w.clone()]),
        ];
        let now = listed(&[&w]);
        let now: HashMap<&str, &str> = now.iter().map(|(k, s)| (k.as_str(), s.as_str())).collect();
        for gone in [listed(&[&b, &a]), listed(&[&a, &b])] {
            let out = custody(
                gone.iter().map(|(k, s)| (k.as_str(), s.as_str())),
                &now,
                &ms,
            );
            let w_only = Ok(BTreeSet::from([w.key.clone()]));
            assert_eq!((&out[0].1, &out[1].1), (&w_only, &w_only), "{gone:?}");
        }
        // The cycle alone accounts for nothing.
        let stamp = a.stamp();
        let out = custody([(a.key.as_str(), stamp.as_str())], &now, &ms[..2]);
        assert!(
            matches!(out[0].1, Err(Unaccounted::OutputsChanged { .. })),
            "{out:?}"
        );
    }

    #[test]
    fn a_manifest_round_trips_and_its_key_is_its_content() {
        let (a, c) = (v(1, 10, "a"), v(100, 30, "c"));
        let m = Manifest::new(&day(), vec![a.clone()], vec![c.clone()]);
        let key = m.key();
        assert!(
            key.starts_with("manifests/account/date=2026-01-01/m-"),
            "{key}"
        );
        assert_eq!(Manifest::parse(&key, &m.to_json()).unwrap(), m);
        let other = Manifest::new(&day(), vec![a, v(1, 10, "b")], vec![c]);
        assert_ne!(other.key(), key, "other content, another key");
    }

    #[test]
    fn a_manifest_is_refused_when_it_is_not_one_or_names_another_partition() {
        let m = Manifest::new(&day(), vec![v(1, 1, "a")], vec![v(100, 1, "c")]);
        let elsewhere = "manifests/account/date=2026-01-02/m-0.json";
        let e = Manifest::parse(elsewhere, &m.to_json()).unwrap_err();
        assert!(e.contains("not the partition its key names"), "{e}");
        let e = Manifest::parse(&m.key(), b"{\"version\":1").unwrap_err();
        assert!(e.contains("not a compaction manifest"), "{e}");
        let mut later = m.clone();
        later.version = 2;
        let e = Manifest::parse(&m.key(), &later.to_json()).unwrap_err();
        assert!(e.contains("manifest version 2"), "{e}");
        let mut foreign = m.clone();
        foreign.outputs[0].key = "events/transfer/date=2026-01-01/c-0.parquet".into();
        let e = Manifest::parse(&m.key(), &foreign.to_json()).unwrap_err();
        assert!(e.contains("not a lake file of its partition"), "{e}");
    }

    #[test]
    fn a_file_compaction_replaced_is_accounted_for_through_a_chain_of_compactions() {
        let (a, b, c1, d, c2) = (
            v(1, 10, "a"),
            v(2, 11, "b"),
            v(100, 21, "c1"),
            v(3, 12, "d"),
            v(101, 33, "c2"),
        );
        let first = Manifest::new(&day(), vec![a.clone(), b.clone()], vec![c1.clone()]);
        let second = Manifest::new(&day(), vec![c1.clone(), d], vec![c2.clone()]);
        // After the first compaction.
        assert_eq!(lost(&[&a, &b], &[&c1], std::slice::from_ref(&first)), None);
        // After both: a and c1 are gone, c2 holds everything.
        let both = [first.clone(), second.clone()];
        assert_eq!(lost(&[&a, &c1], &[&c2], &both), None);
        // The second manifest missing: c1 is gone and nothing replaced it.
        assert_eq!(
            lost(&[&a], &[&c2], std::slice::from_ref(&first)),
            Some(Unaccounted::OutputsChanged {
                key: a.key.clone(),
                output: c1.key.clone()
            })
        );
        // c2 altered since it was written, or deleted: named, not c1, which
        // the second compaction replaced as it should (rev-s58-full 6).
        let altered = v(101, 33, "c2-altered");
        for now in [&[&altered][..], &[]] {
            assert_eq!(
                lost(&[&a], now, &both),
                Some(Unaccounted::OutputsChanged {
                    key: a.key.clone(),
                    output: c2.key.clone()
                })
            );
        }
        // A cycle of manifests (a bug or a forgery) ends the walk before it
        // steps back: the last of the chain is named.
        let back = Manifest::new(&day(), vec![c2.clone()], vec![c1.clone()]);
        let cycle = [first.clone(), second.clone(), back];
        assert_eq!(
            lost(&[&a], &[], &cycle),
            Some(Unaccounted::OutputsChanged {
                key: a.key.clone(),
                output: c2.key.clone()
            })
        );
        // A reader that wrote nothing beside one that wrote c1, then
        // deleted: c1 is named, whichever manifest is listed first.
        let empty = Manifest::new(&day(), vec![a.clone(), b.clone()], vec![]);
        for ms in [
            [empty.clone(), first.clone()],
            [first.clone(), empty.clone()],
        ] {
            assert_eq!(
                lost(&[&a], &[], &ms),
                Some(Unaccounted::OutputsChanged {
                    key: a.key.clone(),
                    output: c1.key.clone()
                })
            );
        }
    }

    #[test]
    fn a_version_gone_under_a_key_still_listed_is_named_rewritten() {
        let (proved, now) = (v(1, 10, "inode-1"), v(1, 10, "inode-2"));
        let got = lost(&[&proved], &[&now], &[]).unwrap();
        assert_eq!(
            got,
            Unaccounted::Rewritten {
                key: now.key.clone()
            }
        );
        assert!(got.to_string().contains("copied"), "{got}");
        assert_eq!(
            lost(&[&proved], &[], &[]),
            Some(Unaccounted::NotCompacted {
                key: proved.key.clone()
            })
        );
    }

    #[test]
    fn a_manifest_that_wrote_no_file_accounts_for_nothing_it_read() {
        let (a, c) = (v(1, 10, "a"), v(100, 21, "c"));
        let empty = Manifest::new(&day(), vec![a.clone()], vec![]);
        let got = lost(&[&a], &[&c], std::slice::from_ref(&empty)).unwrap();
        assert_eq!(got, Unaccounted::NoOutputs { key: a.key.clone() });
        assert!(got.to_string().contains("wrote no file"), "{got}");
        // Another manifest that read the same version and wrote c does.
        let m = Manifest::new(&day(), vec![a.clone()], vec![c.clone()]);
        assert_eq!(lost(&[&a], &[&c], &[empty, m]), None);
    }

    #[test]
    fn a_file_deleted_or_rewritten_before_compaction_read_it_is_not_accounted_for() {
        let (a, c) = (v(1, 10, "a"), v(100, 21, "c"));
        let m = Manifest::new(&day(), vec![a.clone()], vec![c.clone()]);
        let deleted = v(2, 10, "x");
        assert_eq!(
            lost(&[&deleted], &[&c], std::slice::from_ref(&m)),
            Some(Unaccounted::NotCompacted {
                key: deleted.key.clone()
            })
        );
        // The version proved had tag "a0"; compaction read the rewrite "a".
        let proved = v(1, 10, "a0");
        let got = lost(&[&proved], &[&c], std::slice::from_ref(&m)).unwrap();
        assert_eq!(
            got,
            Unaccounted::OtherVersion {
                key: a.key.clone(),
                read: a.stamp()
            }
        );
        assert!(got.to_string().contains("another version"), "{got}");
    }

    #[test]
    fn an_output_kept_under_its_own_key_and_a_cycle_are_handled() {
        let (c, i) = (v(100, 21, "c"), v(1, 10, "i"));
        // Re-compaction: c was already the output; a redelivered i merged in.
        let m = Manifest::new(&day(), vec![c.clone(), i.clone()], vec![c.clone()]);
        assert_eq!(lost(&[&i], &[&c], std::slice::from_ref(&m)), None);
        // Two manifests each naming the other's input as its output, neither
        // listed: a cycle accounts for nothing (and ends).
        let (x, y) = (v(7, 1, "x"), v(8, 1, "y"));
        let ms = [
            Manifest::new(&day(), vec![x.clone()], vec![y.clone()]),
            Manifest::new(&day(), vec![y.clone()], vec![x.clone()]),
        ];
        assert!(lost(&[&x], &[&c], &ms).is_some());
    }
}
