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
//! A compactor that lies (a manifest that names an output without some of
//! its inputs' rows) is caught two ways. The streams whose rows it cut are
//! re-proved when any of their rows are in the output (they are copies
//! short of their tails), and their proved tails judged
//! (`crate::retained`). A stream cut from the outputs whole leaves no row
//! to re-prove, so the streams of the files that now hold a replaced
//! version's rows are checked against those the checkpoint saw in it
//! (`crate::presence`): one missing makes the version lost
//! ([`Lost::Emptied`]). The checkpoint notes each stream of a file with
//! the seq its stretch of rows there starts at, so an output that holds a
//! stream but not the first row of it the version held (its start cut:
//! the copies after the cut still chain to the proved tail) is caught the
//! same way. And it notes how many rows each stretch holds, a stretch
//! being cut wherever the file skips a seq of the stream (and after seq 0,
//! outside the chain): the outputs must
//! hold at least that many rows of the stream in the seqs the stretch spans
//! ([`Lost::Cut`]). Without it, a compactor that writes its outputs one
//! night and deletes its inputs the next goes unseen when it cut a proved
//! tail or a row in the middle: the night the outputs are new, their rows
//! are old rows the inputs still hold, so nothing is missing yet.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use datafusion::arrow::array::Array;

use ledger_ingest::{parse_object_key, Unaccounted};

use crate::checkpoint::FULL_HELP;
use crate::lake::{Error, Lake, LakeFileInfo};
use crate::presence::{at_seq, Fingerprint};
use crate::presence_files::Stored;

/// A proved file version that is gone and whose rows the lake may no
/// longer hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// No chain of compaction manifests accounts for it.
    Unaccounted(Unaccounted),
    /// Compaction replaced it, but the files that now hold its rows
    /// (`outputs`, the first named) lack the first row of `streams` of the
    /// stretches of streams the checkpoint saw in it (or, noted before
    /// checkpoint version 11, any row of `streams` of its streams): they
    /// lack rows it held.
    Emptied {
        key: String,
        output: String,
        streams: usize,
    },
    /// Compaction replaced it, and the files that now hold its rows hold the
    /// first row of each stretch of a stream the checkpoint saw in it, but
    /// fewer rows than `stretches` of those stretches held, in the seqs
    /// each spans: they lack rows it held (a proved tail, or a row in the
    /// middle, whose stream's other rows passed as copies while the version
    /// was still in the lake).
    Cut {
        key: String,
        output: String,
        stretches: usize,
    },
}

impl Lost {
    /// The key of the lost version.
    pub fn key(&self) -> &str {
        match self {
            Lost::Unaccounted(u) => u.key(),
            Lost::Emptied { key, .. } | Lost::Cut { key, .. } => key,
        }
    }
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Unaccounted(u) => u.fmt(f),
            Lost::Emptied {
                key,
                output,
                streams,
            } => write!(
                f,
                "{key} was replaced by compaction, but its output {output} lacks the first row of \
                 {streams} stretch(es) of stream(s) the checkpoint proved in it (a compaction keeps every row it reads)"
            ),
            Lost::Cut {
                key,
                output,
                stretches,
            } => write!(
                f,
                "{key} was replaced by compaction, but its output {output} holds fewer rows than \
                 {stretches} stretch(es) of stream(s) the checkpoint proved in it held, in the seqs \
                 each spans (a compaction keeps every row it reads)"
            ),
        }
    }
}

/// What became of the file versions a checkpoint proved.
#[derive(Debug, Default)]
pub struct Custody {
    /// Proved versions no longer in the lake as proved (deleted, or the key
    /// now holds another version).
    pub gone: usize,
    /// Those whose rows the lake may no longer hold, in key order.
    pub lost: Vec<Lost>,
    /// Objects under `manifests/` that are not manifests this build reads
    /// (each with why): ignored, so what they would account for is lost.
    pub unreadable: Vec<String>,
    /// Replaced versions whose outputs could not be held to the first row
    /// and the count of rows of each stretch the checkpoint saw in them
    /// (notes from before those were kept: none in a checkpoint this build
    /// resumes from, `checkpoint::ProofState::older_rules`). While there is
    /// one, a row only such a version held may be missing from the lake
    /// with every other row of its stream there, so no proved row vouches
    /// for the rows before it (`run::found_again`).
    pub uncounted: usize,
    /// Why the checkpoint's notes of the replaced versions could not be
    /// read, when [`check`] was asked to go on without them (`--full`, the
    /// remedy for a damaged checkpoint): those versions were then not held
    /// to their stretches (each counted in `uncounted`).
    pub notes_unread: Option<String>,
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
/// partitions that lost a proved version (none when nothing is gone) and,
/// for every one they account for, the streams of the files that
/// hold their rows now, against those `stored` (the checkpoint's files of
/// streams) says each held. Notes that cannot be read are an error, or,
/// with `notes_optional`, said in [`Custody::notes_unread`]; the lake's own
/// errors are errors either way.
pub async fn check(
    lake: &Lake,
    proved: &BTreeMap<String, String>,
    stored: &Stored,
    tables: &[&[LakeFileInfo]],
    notes_optional: bool,
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
    let custody = ledger_ingest::custody(gone.iter().copied(), &listed, &manifests);
    let mut lost: Vec<Lost> = Vec::new();
    let mut replaced: Vec<(&str, BTreeSet<String>)> = Vec::new();
    let mut uncounted = 0;
    for (key, c) in custody {
        match c {
            Ok(holders) => replaced.push((key, holders)),
            Err(u) => lost.push(Lost::Unaccounted(u)),
        }
    }
    // The replaced versions are held to their stretches whatever else was
    // lost: a lost file makes the night a full proof, but a compaction that
    // dropped rows is lost evidence all the same, and only this finds it
    // (its rows' starts then decide the gaps: `owing::lost_starts`;
    // rev-s58-fixes 1).
    if !replaced.is_empty() {
        let keys: BTreeSet<&str> = replaced.iter().map(|(k, _)| *k).collect();
        let sets = match stored.of(&keys) {
            Ok(sets) => sets,
            Err(e) if notes_optional => {
                return Ok(Custody {
                    gone: gone.len(),
                    lost,
                    unreadable,
                    uncounted: replaced.len(),
                    notes_unread: Some(e.to_string()),
                })
            }
            Err(e) => return Err(Error::Lake(format!("checkpoint: {e}\n{FULL_HELP}"))),
        };
        let presence = &sets.presence;
        let files: HashMap<&str, &LakeFileInfo> = tables
            .iter()
            .flat_map(|files| files.iter())
            .map(|f| (f.key.as_str(), f))
            .collect();
        // The starts noted in the replaced versions: the only rows of the
        // files that now hold them worth keeping (a day's outputs hold
        // millions of rows).
        let wanted: HashSet<Fingerprint> = replaced
            .iter()
            .filter(|(k, _)| !sets.plain.contains(*k))
            .flat_map(|(k, _)| presence.get(k).iter().copied())
            .collect();
        // The streams of each file that holds replaced rows, read once.
        let mut read: HashMap<String, Held> = HashMap::new();
        for (key, holders) in replaced {
            let plain = sets.plain.contains(key);
            if plain || presence.rows(key).is_none() {
                uncounted += 1;
            }
            if presence.get(key).is_empty() {
                continue; // not seen (a checkpoint before version 8)
            }
            for h in &holders {
                if !read.contains_key(h) {
                    let file = files
                        .get(h.as_str())
                        .map_or(&[][..], |f| std::slice::from_ref(*f));
                    read.insert(h.clone(), streams_in(lake, file, &wanted).await?);
                }
            }
            let present = |fp| holders.iter().any(|h| read[h].has(fp, plain));
            let streams = presence.missing(key, present);
            let output = || holders.first().cloned().unwrap_or_default();
            if streams > 0 {
                lost.push(Lost::Emptied {
                    key: key.to_owned(),
                    output: output(),
                    streams,
                });
                continue;
            }
            let held: Vec<&Held> = holders.iter().map(|h| &read[h]).collect();
            let stretches = short(presence, key, &held);
            if stretches > 0 {
                lost.push(Lost::Cut {
                    key: key.to_owned(),
                    output: output(),
                    stretches,
                });
            }
        }
    }
    Ok(Custody {
        gone: gone.len(),
        lost,
        unreadable,
        uncounted,
        notes_unread: None,
    })
}

/// How many of the stretches `presence` notes (with their rows) in the
/// replaced version `key` the files that hold its rows now (`held`) hold
/// fewer rows of than it did. A stretch noted at seq `s` with `n` rows
/// holds rows of seqs `s..s + n` only (`crate::presence::Noter::note`), and
/// compaction keeps every distinct row it reads, each once: so those files
/// hold at least `n` rows of the stream in those seqs before any seq they
/// lack there ([`rows_before_a_hole`]), or they lack one of the version's.
/// (A row cut where another input's version of it is kept goes unseen
/// here; two versions are a conflict the proof reports.) Notes without
/// counts (before checkpoint version 17) give none.
fn short(presence: &crate::presence::Presence, key: &str, held: &[&Held]) -> usize {
    let Some(rows) = presence.rows(key) else {
        return 0;
    };
    let mut short = 0;
    for (&at, &n) in presence.get(key).iter().zip(rows) {
        // The stretch's stream and first seq, from the row of the files
        // that matched it ([`Presence::missing`] found one).
        let Some(&(stream, first)) = held.iter().find_map(|h| h.rows.get(&at)) else {
            continue;
        };
        let last = first.saturating_add(u64::from(n).saturating_sub(1));
        // Each file's rows in the stretch's seqs; a row two files hold
        // counts once.
        let mut windows = held
            .iter()
            .filter_map(|h| h.by_stream.get(&stream))
            .map(|rows| {
                let from = rows.partition_point(|&(q, _)| q < first);
                let to = rows.partition_point(|&(q, _)| q <= last);
                &rows[from..to]
            });
        let merged: Vec<(u64, u64)>;
        let window: &[(u64, u64)] = match (windows.next(), windows.next()) {
            (None, _) => &[],
            (Some(one), None) => one,
            (Some(a), Some(b)) => {
                let mut all: Vec<(u64, u64)> = [a, b].concat();
                windows.for_each(|w| all.extend_from_slice(w));
                all.sort_unstable();
                all.dedup();
                merged = all;
                &merged
            }
        };
        if rows_before_a_hole(first, window) < u64::from(n) {
            short += 1;
        }
    }
    short
}

/// How many of `rows` (one stream's, ascending by seq, from seq `first`
/// on) come before the first seq from `first` on that none of them holds.
/// A stretch holds every seq from its first to its last, so an output
/// holding all of its rows has no such hole before its last seq; counting
/// past one would let the rows after it, or a conflict's second version
/// (which makes a stretch's count exceed the seqs it spans), stand in for
/// the row cut there.
fn rows_before_a_hole(first: u64, rows: &[(u64, u64)]) -> u64 {
    let mut next = first;
    let mut n = 0;
    for &(seq, _) in rows {
        if seq > next {
            break;
        }
        n += 1;
        next = seq.saturating_add(1);
    }
    n
}

/// What the files that hold a replaced version's rows hold: their rows by
/// stream ([`crate::presence::fingerprint`]), and those of their rows'
/// (stream, seq) ([`crate::presence::fingerprint_at`]) that a replaced
/// version noted, with the stream and seq each is.
#[derive(Default)]
struct Held {
    /// Per stream, its rows, each once: (seq, a 64-bit hash of the row's
    /// `hash`), ascending. A row the files hold twice counts once, so a
    /// second copy of one row cannot stand in for another row cut.
    by_stream: HashMap<Fingerprint, Vec<(u64, u64)>>,
    rows: HashMap<Fingerprint, (Fingerprint, u64)>,
}

impl Held {
    /// Whether `fp` is here: a stream's (`plain`, a set noted before
    /// checkpoint version 11) or a row's.
    fn has(&self, fp: Fingerprint, plain: bool) -> bool {
        if plain {
            self.by_stream.contains_key(&fp)
        } else {
            self.rows.contains_key(&fp)
        }
    }
}

/// What `files` hold ([`Held`]: `stream`, `stream_key` and `seq` read; of
/// the rows, those `wanted`; a row that names no known stream, or no seq,
/// is left to the proof to name).
async fn streams_in(
    lake: &Lake,
    files: &[LakeFileInfo],
    wanted: &HashSet<Fingerprint>,
) -> Result<Held, Error> {
    let mut now = Held::default();
    let columns = ["stream", "stream_key", "seq", "hash"];
    lake.scan_columns(files, &columns, None, |b| {
        let hashes = crate::rows::strings(b, "hash");
        crate::rows::stream_fingerprints(b, |fp, seq, i| {
            let rows = now.by_stream.entry(fp).or_default();
            if let Some(seq) = seq.and_then(|q| u64::try_from(q).ok()) {
                // A null hash is left to the proof to name, like a null seq.
                let hash = hashes
                    .as_ref()
                    .filter(|h| h.is_valid(i))
                    .map(|h| h.value(i));
                if let Some(hash) = hash {
                    rows.push((seq, row_hash(hash)));
                }
                let at = at_seq(fp, seq);
                if wanted.contains(&at) {
                    now.rows.insert(at, (fp, seq));
                }
            }
        });
    })
    .await?;
    // The counts in `short` need each stream's rows in order and each once:
    // a stream's rows may come from several files (one compaction's
    // outputs), and a row twice (from two of them, or twice in one).
    for rows in now.by_stream.values_mut() {
        rows.sort_unstable();
        rows.dedup();
    }
    Ok(now)
}

/// 64 bits of a row's `hash` column: the first 8 bytes of the SHA-256 its
/// 64 hex digits spell (two rows of one seq with other hashes share them by
/// chance with odds of 2⁻⁶⁴, and then count once, which can only make a
/// version lost, never hide a cut); of any other string, a fixed hash of it
/// (the proof names such a row).
fn row_hash(hash: &str) -> u64 {
    match crate::stream::unhex(hash) {
        Some(bytes) => u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
        None => {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            hash.hash(&mut h);
            h.finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presence::{fingerprint, Presence};
    use ledger_events::Stream;

    /// A version noted a stretch of `a` at seq 1 of `n` rows; the output
    /// holds `rows` of `a` (seq, hash): is the stretch short?
    fn cut(n: u32, rows: &[(u64, u64)]) -> bool {
        let a = fingerprint(Stream::Account, "a");
        let mut noted = Presence::default();
        noted.add("f", &[at_seq(a, 1)], Some(&[n]));
        let mut held = Held::default();
        held.rows.insert(at_seq(a, 1), (a, 1));
        held.by_stream.insert(a, rows.to_vec());
        short(&noted, "f", &[&held]) == 1
    }

    #[test]
    fn a_stretch_is_short_when_its_outputs_lack_a_row_before_a_seq_they_lack() {
        // Seqs 1 to 3, whole; and with more rows after them.
        assert!(!cut(3, &[(1, 0), (2, 0), (3, 0)]));
        assert!(!cut(3, &[(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]));
        // Two versions of seq 2 (a count of 4 over seqs 1 to 3), whole.
        assert!(!cut(4, &[(1, 0), (2, 0), (2, 7), (3, 0)]));
        // Seq 2 cut: short, even with rows after it enough to fill the
        // count (another input's 4, or a conflict's second version).
        assert!(cut(3, &[(1, 0), (3, 0)]));
        assert!(cut(3, &[(1, 0), (3, 0), (4, 0)]));
        assert!(cut(4, &[(1, 0), (2, 0), (2, 7), (4, 0), (5, 0)]));
        // The tail cut.
        assert!(cut(3, &[(1, 0), (2, 0)]));
    }

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
