//! Each entry posts once: on an account, no deposit or withdrawal entry id
//! is posted at two seqs (balance integrity's `entry_posted_twice`).
//!
//! An entry id is the idempotency record of a deposit or a withdrawal
//! (`dep:{account}:{key}`, `wd:{account}:{key}`; the account object keeps it
//! as its entries' primary key). The same id at a second seq is the same
//! money moved twice, and every other check passes it: the refold
//! reproduces each balance, and global conservation counts the second
//! deposit on both sides. A transfer's legs are not kept here: their ids
//! are `{transfer}:debit` and `{transfer}:credit`, and transfer
//! conservation requires exactly one of each per transfer.
//!
//! An account's entry ids are kept as 64-bit fingerprints with the seq each
//! was first posted at, sorted by fingerprint: 16 bytes an entry, in memory
//! for the ids a run adds and carried from night to night in the entry store
//! beside the checkpoint (`entry_store`), so a night that brings the second
//! posting names the first as a full proof does. A fingerprint is SipHash-1-3
//! of the id under a random key ([`EntryKey`]) a proof from the first event
//! draws and its checkpoint keeps: the ids are partly client-chosen (the
//! idempotency key), and under a known function a client could search for
//! two keys whose fingerprints meet (2³² tries for 64 bits) and raise a
//! false alarm; under a secret key it cannot. Two ids of one account share a
//! fingerprint with probability 2⁻⁶⁴ a pair; such a pair would be reported
//! (both seqs named, so the rows show it), never hidden.

use std::hash::{BuildHasher, Hasher};

use siphasher::sip::SipHasher13;

use ledger_core::account::{DEPOSIT_PREFIX, WITHDRAWAL_PREFIX};
use ledger_events::AccountKind;

use crate::finding::Finding;

/// The key of an account's entry-id fingerprints. [`Default`] draws a new
/// random one (a proof from the first event); a resumed proof takes its
/// checkpoint's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryKey(pub [u64; 2]);

impl Default for EntryKey {
    fn default() -> EntryKey {
        // The standard library's random hasher keys (seeded from the
        // operating system once per thread, then stepped), drawn twice:
        // no crate added for two random words.
        let draw = || std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64);
        EntryKey([draw(), draw()])
    }
}

impl EntryKey {
    /// The fingerprint of an entry id.
    pub fn fingerprint(&self, entry_id: &str) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.0[0], self.0[1]);
        h.write(entry_id.as_bytes());
        h.finish()
    }
}

/// The most of an account's ids [`EntryIds::prefetch`] fetches (64 KiB:
/// ~4,000 ids; at 50M events an account holds ~450).
const PREFETCH_BYTES_MAX: usize = 64 << 10;

/// An account's entry ids so far: (fingerprint, first seq), sorted by
/// fingerprint, one per fingerprint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryIds(Vec<(u64, u64)>);

/// One posting of an entry: its fingerprint, seq and where its row is in the
/// batch that brought it.
#[derive(Debug, Clone, Copy)]
pub struct Posting {
    pub fp: u64,
    pub seq: u64,
    pub row: u32,
}

impl EntryIds {
    /// From (fingerprint, seq) pairs sorted by fingerprint, each once (a
    /// checkpoint's); `None` if they are not.
    pub fn from_sorted(pairs: Vec<(u64, u64)>) -> Option<EntryIds> {
        pairs
            .windows(2)
            .all(|w| w[0].0 < w[1].0)
            .then_some(EntryIds(pairs))
    }

    /// Hints that these ids will be read soon: each cache line they span is
    /// fetched meanwhile. An account's ids are cold when it is visited
    /// again (every other account's visits came between), and [`EntryIds::add`]
    /// at the visit's end searches them and merges into them: at 50M events,
    /// waiting for those lines was ~3 % of the proof's CPU. `Facts::add_account`
    /// hints at the visit's first posting, before folding the rest of its
    /// rows. Not past 64 KiB (`PREFETCH_BYTES_MAX`): a hot account's ids
    /// would only evict what the visit reads before it.
    pub fn prefetch(&self) {
        if std::mem::size_of_val(self.0.as_slice()) <= PREFETCH_BYTES_MAX {
            crate::facts::prefetch_whole(self.0.as_slice());
        }
    }

    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the postings of one visit of the account (`batch`, in seq order,
    /// each after every posting already kept) and returns the ones whose
    /// fingerprint was posted before, each with the seq it was first posted
    /// at, in seq order. A fingerprint these ids lack is asked of `stored`
    /// (the earlier nights' ids, `entry_store`), in fingerprint order; one it
    /// knows is not kept again. Empties `batch` (a buffer to reuse).
    pub fn add(
        &mut self,
        batch: &mut Vec<Posting>,
        mut stored: impl FnMut(u64) -> Option<u64>,
    ) -> Vec<(Posting, u64)> {
        let mut twice = Vec::new();
        if batch.is_empty() {
            return twice;
        }
        // Stable: the postings of one fingerprint stay in seq order, so the
        // first of them is the one kept.
        batch.sort_by_key(|p| p.fp);
        // `batch` keeps, in fingerprint order, the first posting of each
        // fingerprint not kept before: merged in from the back, in place.
        let mut kept = 0;
        let mut first: Option<(u64, u64)> = None;
        for r in 0..batch.len() {
            let p = batch[r];
            match first {
                Some((fp, seq)) if fp == p.fp => twice.push((p, seq)),
                _ => {
                    let before = self
                        .0
                        .binary_search_by_key(&p.fp, |e| e.0)
                        .ok()
                        .map(|i| self.0[i].1)
                        .or_else(|| stored(p.fp));
                    match before {
                        Some(seq) => twice.push((p, seq)),
                        None => {
                            batch[kept] = p;
                            kept += 1;
                        }
                    }
                    first = Some((p.fp, before.unwrap_or(p.seq)));
                }
            }
        }
        let (mut i, mut j) = (self.0.len(), kept);
        self.0.resize(i + kept, (0, 0));
        let mut k = self.0.len();
        while j > 0 {
            k -= 1;
            if i > 0 && self.0[i - 1].0 > batch[j - 1].fp {
                self.0[k] = self.0[i - 1];
                i -= 1;
            } else {
                self.0[k] = (batch[j - 1].fp, batch[j - 1].seq);
                j -= 1;
            }
        }
        batch.clear();
        twice.sort_by_key(|(p, _)| p.seq);
        twice
    }
}

/// Whether a deposit's or a withdrawal's entry id is its account's:
/// `dep:{account}:{key}` or `wd:{account}:{key}`, the key a client's
/// (`[A-Za-z0-9._-]{1,64}`, no `:`), as the edge derives it
/// (`ledger_api::names`). One naming another account (or of another form)
/// would let the same posting be booked on a second account unseen: entry
/// ids are kept per account.
pub fn names_its_account(kind: AccountKind, entry_id: &str, account: &str) -> bool {
    let Some(prefix) = prefix_of(kind) else {
        return true;
    };
    entry_id
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix(account))
        .and_then(|r| r.strip_prefix(':'))
        .is_some_and(|key| ledger_events::ids::check_client_key(key).is_ok())
}

/// What a deposit's or a withdrawal's entry id starts with (no other kind
/// has such an id).
fn prefix_of(kind: AccountKind) -> Option<&'static str> {
    match kind {
        AccountKind::Deposited => Some(DEPOSIT_PREFIX),
        AccountKind::Withdrawn => Some(WITHDRAWAL_PREFIX),
        _ => None,
    }
}

/// The finding on a deposit or withdrawal whose entry id is not its
/// account's ([`names_its_account`]).
pub fn not_the_accounts(
    account: &str,
    kind: AccountKind,
    entry_id: &str,
    seq: u64,
    event_id: &str,
) -> Finding {
    let prefix = prefix_of(kind).unwrap_or_default();
    Finding::new(
        "entry_not_the_accounts",
        account,
        format!(
            "{} entry {entry_id} is not this account's ({prefix}{account}:KEY): the same posting \
             could be booked on another account unseen",
            kind.as_str()
        ),
    )
    .at(seq, event_id)
}

/// The finding on a posting of an entry id first posted at `first_seq`.
pub fn posted_twice(
    account: &str,
    kind: &str,
    entry_id: &str,
    seq: u64,
    event_id: &str,
    first_seq: u64,
) -> Finding {
    Finding::new(
        "entry_posted_twice",
        account,
        format!("{kind} entry {entry_id} was already posted at seq {first_seq}"),
    )
    .at(seq, event_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deposit_or_withdrawal_entry_id_must_name_its_account() {
        use AccountKind::{Deposited, Withdrawn};
        let a = "acme.a";
        assert!(names_its_account(Deposited, "dep:acme.a:k1", a));
        assert!(names_its_account(Withdrawn, "wd:acme.a:k.1-x", a));
        for (kind, id) in [
            (Deposited, "dep:acme.b:k1"),       // another account's
            (Deposited, "dep:acme.ab:k1"),      // an account whose name starts with this one's
            (Deposited, "wd:acme.a:k1"),        // a withdrawal's, on a deposit
            (Withdrawn, "dep:acme.a:k1"),       // and the other way round
            (Deposited, "dep:acme.a:"),         // no key
            (Deposited, "dep:acme.a"),          // no key at all
            (Deposited, "dep:acme.a:k1:retry"), // a key no client may choose
            (Withdrawn, "wd:acme.a:k\n1"),
            (Withdrawn, &format!("wd:acme.a:{}", "k".repeat(65))),
            (Deposited, "acme.a:k1"),        // no prefix
            (Deposited, "t.acme.k1:credit"), // a leg's
        ] {
            assert!(!names_its_account(kind, id, a), "{kind:?} {id}");
        }
        // Other kinds carry no such id (a leg's is judged by the schema).
        assert!(names_its_account(AccountKind::Credited, "x", a));
        let f = not_the_accounts(a, Deposited, "dep:acme.b:k1", 4, "account:acme.a:4");
        assert_eq!((f.code, f.seq), ("entry_not_the_accounts", Some(4)));
        assert!(f
            .detail
            .contains("deposited entry dep:acme.b:k1 is not this account's (dep:acme.a:KEY)"));
    }

    fn fingerprint(id: &str) -> u64 {
        EntryKey([1, 2]).fingerprint(id)
    }

    fn batch(ids: &[(&str, u64)]) -> Vec<Posting> {
        ids.iter()
            .enumerate()
            .map(|(row, &(id, seq))| Posting {
                fp: fingerprint(id),
                seq,
                row: row as u32,
            })
            .collect()
    }

    #[test]
    fn a_second_posting_names_the_first_across_visits_and_within_one() {
        let mut e = EntryIds::default();
        let mut b = batch(&[("dep:a:1", 1), ("dep:a:2", 2), ("wd:a:3", 3)]);
        assert!(e.add(&mut b, |_| None).is_empty());
        assert!(b.is_empty());
        assert_eq!(e.len(), 3);
        // Again in a later visit, twice within it, and new ones around.
        let mut b = batch(&[
            ("dep:a:4", 4),
            ("dep:a:2", 5),
            ("dep:a:6", 6),
            ("dep:a:6", 7),
            ("dep:a:2", 8),
        ]);
        let twice: Vec<(u64, u64)> = e
            .add(&mut b, |_| None)
            .iter()
            .map(|(p, s)| (p.seq, *s))
            .collect();
        assert_eq!(twice, [(5, 2), (7, 6), (8, 2)]);
        assert_eq!(e.len(), 5);
        // Sorted and each fingerprint once, whatever the order they came in.
        assert!(EntryIds::from_sorted(e.as_slice().to_vec()).is_some());
        let firsts: Vec<u64> = {
            let mut s: Vec<u64> = e.as_slice().iter().map(|p| p.1).collect();
            s.sort();
            s
        };
        assert_eq!(firsts, [1, 2, 3, 4, 6]);
    }

    #[test]
    fn an_id_an_earlier_night_stored_is_a_second_posting_and_not_kept_again() {
        let mut e = EntryIds::default();
        let stored_fp = fingerprint("dep:a:1");
        let mut asked = Vec::new();
        let mut b = batch(&[("dep:a:1", 9), ("dep:a:2", 10), ("dep:a:1", 11)]);
        let twice: Vec<(u64, u64)> = e
            .add(&mut b, |fp| {
                asked.push(fp);
                (fp == stored_fp).then_some(4)
            })
            .iter()
            .map(|(p, s)| (p.seq, *s))
            .collect();
        // Both postings name the stored seq; the store is asked once a
        // fingerprint; only the new id is kept in memory.
        assert_eq!(twice, [(9, 4), (11, 4)]);
        assert_eq!(asked.len(), 2);
        assert_eq!(e.as_slice(), [(fingerprint("dep:a:2"), 10)]);
    }

    #[test]
    fn the_merge_keeps_every_pair_sorted() {
        let mut e = EntryIds::default();
        for round in 0..20u64 {
            let mut b: Vec<Posting> = (0..37)
                .map(|i| Posting {
                    fp: fingerprint(&format!("dep:a:{round}-{i}")),
                    seq: round * 100 + i,
                    row: i as u32,
                })
                .collect();
            assert!(e.add(&mut b, |_| None).is_empty());
        }
        assert_eq!(e.len(), 20 * 37);
        assert!(e.as_slice().windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn a_checkpoints_pairs_are_taken_only_sorted_and_unique() {
        assert!(EntryIds::from_sorted(vec![(1, 5), (2, 3)]).is_some());
        assert!(EntryIds::from_sorted(vec![(2, 5), (1, 3)]).is_none());
        assert!(EntryIds::from_sorted(vec![(2, 5), (2, 3)]).is_none());
    }

    #[test]
    fn the_fingerprint_is_keyed_and_stable_under_its_key() {
        // Checkpoints keep fingerprints from night to night: under one key
        // the function never changes (SipHash-1-3's reference value for
        // the empty input under the key 00 01 .. 0f).
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(EntryKey([k0, k1]).fingerprint(""), 0xabac_0158_050f_c4dc);
        assert_eq!(
            EntryKey([k0, k1]).fingerprint("dep:acme.a:k1"),
            0xee02_b822_c249_618a
        );
        // A new key is drawn for each proof from the first event.
        let (a, b) = (EntryKey::default(), EntryKey::default());
        assert_ne!(a, b);
        assert_ne!(
            a.fingerprint("dep:acme.a:k1"),
            b.fingerprint("dep:acme.a:k1")
        );
    }
}
