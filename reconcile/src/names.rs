//! Interning and hashing for the proof's state: [`Names`] turns the few
//! thousand account keys, currencies and phases that millions of legs and
//! transfers name into 4-byte [`Sym`]s, and [`FxHasher`] hashes the ids the
//! proof's tables are keyed by.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

/// The FxHash function (rustc's): a multiply-rotate over 8-byte words, with
/// a finalizer. The proof's maps are keyed by ids the lake holds, hashed
/// millions of times a run; SipHash's DoS resistance buys nothing against
/// our own files.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    /// The multiply leaves the low bits, which pick a table's bucket, poorly
    /// mixed: at 9M transfer ids the legs table's probe chains grew until
    /// the run took minutes. MurmurHash3's finalizer spreads every bit.
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub type FxSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

/// An interned string: an index into [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sym(pub u32);

/// Interned strings: account keys, currencies, phases. A few thousand distinct
/// values name millions of legs and transfers.
///
/// Looked up tens of millions of times a run (four times a transfer), among
/// the reads of a proof whose other tables keep evicting it from the cache:
/// at 50M events nearly every lookup of an account key missed the cache on
/// its slot (~9 % of the proof's time). So the table is open addressing in
/// one array that a caller can prefetch ([`Names::prefetch`]) a batch ahead,
/// and each slot holds a name's length and first 16 bytes: a name of up to
/// 16 bytes (every account key and currency the generator writes) is found
/// and compared in its slot, without a `memcmp` or a miss on the name's own
/// allocation.
#[derive(Debug, Clone, Default)]
pub struct Names {
    list: Vec<Box<str>>,
    /// Linear probing; a power of two long, at most half full.
    slots: Vec<Slot>,
    /// The fork this table is one side of, and how many names the two
    /// sides shared then ([`Names::fork`]).
    fork: Option<(u64, usize)>,
}

/// A name as its table slot holds it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The first 16 bytes, zero-padded ([`head`]).
    head: Head,
    len: u32,
    /// [`EMPTY`]: a free slot.
    sym: u32,
}

const EMPTY: u32 = u32::MAX;

/// A name's first 16 bytes, zero-padded, as two little-endian words.
type Head = [u64; 2];

/// A name's [`Head`], read with loads of the name's own bytes (overlapping
/// where it is shorter than a word), never through a copy to the stack: a
/// `memcpy` of a short name into a zeroed array, read back as words at once,
/// stalls on store forwarding (a load that spans several smaller stores),
/// and that stall was 2/3 of every lookup's time (~3 % of a proof's CPU).
#[inline]
fn head(b: &[u8]) -> Head {
    let n = b.len();
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    if n >= 16 {
        return [word(0), word(8)];
    }
    if n >= 8 {
        // The last 8 bytes, shifted down past the ones `word(0)` holds.
        let hi = if n == 8 {
            0
        } else {
            word(n - 8) >> ((16 - n) * 8)
        };
        return [word(0), hi];
    }
    let lo = if n >= 4 {
        let half = |at: usize| {
            u64::from(u32::from_le_bytes(
                b[at..at + 4].try_into().expect("4 bytes"),
            ))
        };
        // Two 4-byte reads that overlap where n < 8; the bytes they share agree.
        half(0) | half(n - 4) << ((n - 4) * 8)
    } else if n > 0 {
        // n is 1, 2 or 3: the first, middle and last bytes cover them.
        u64::from(b[0]) | u64::from(b[n / 2]) << (n / 2 * 8) | u64::from(b[n - 1]) << ((n - 1) * 8)
    } else {
        0
    };
    [lo, 0]
}

/// [`FxHasher`] over the head and the length (and any bytes past the head).
#[inline]
fn name_hash(b: &[u8], head: &Head) -> u64 {
    let mut h = FxHasher::default();
    h.write_u64(head[0]);
    h.write_u64(head[1]);
    h.write_usize(b.len());
    if b.len() > 16 {
        h.write(&b[16..]);
    }
    h.finish()
}

impl Names {
    /// The sym of `b` if a slot holds it (`Ok`), else the free slot where
    /// its probe ended, which it would take (`Err`).
    #[inline]
    fn probe(&self, b: &[u8]) -> Result<Sym, usize> {
        if self.slots.is_empty() {
            return Err(0);
        }
        let head = head(b);
        let mask = self.slots.len() - 1;
        let mut i = name_hash(b, &head) as usize & mask;
        loop {
            let x = &self.slots[i];
            if x.sym == EMPTY {
                return Err(i);
            }
            if x.head == head
                && x.len as usize == b.len()
                && (b.len() <= 16 || self.list[x.sym as usize].as_bytes()[16..] == b[16..])
            {
                return Ok(Sym(x.sym));
            }
            i = (i + 1) & mask;
        }
    }

    pub fn id(&mut self, s: &str) -> Sym {
        let b = s.as_bytes();
        let at = match self.probe(b) {
            Ok(sym) => return sym,
            Err(at) => at,
        };
        let sym = Sym(u32::try_from(self.list.len())
            .ok()
            .filter(|&n| n < EMPTY)
            .expect("fewer than 2³² − 1 distinct names"));
        self.list.push(s.into());
        if self.list.len() * 2 > self.slots.len() {
            self.grow();
        } else {
            self.slots[at] = slot(b, sym);
        }
        sym
    }

    /// Doubles the slots (or makes the first ones) and places every name anew.
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(64);
        self.slots = vec![
            Slot {
                head: [0; 2],
                len: 0,
                sym: EMPTY,
            };
            n
        ];
        for (sym, name) in self.list.iter().enumerate() {
            let b = name.as_bytes();
            let mut i = name_hash(b, &head(b)) as usize & (n - 1);
            while self.slots[i].sym != EMPTY {
                i = (i + 1) & (n - 1);
            }
            self.slots[i] = slot(b, Sym(sym as u32));
        }
    }

    /// Hints that `s` will be looked up soon: its slot is fetched into the
    /// cache meanwhile.
    #[inline]
    pub fn prefetch(&self, s: &str) {
        if !self.slots.is_empty() {
            let b = s.as_bytes();
            let i = name_hash(b, &head(b)) as usize & (self.slots.len() - 1);
            crate::facts::prefetch_whole(&self.slots[i]);
        }
    }

    /// The sym of `s`, if it was interned.
    pub fn find(&self, s: &str) -> Option<Sym> {
        self.probe(s.as_bytes()).ok()
    }

    pub fn get(&self, s: Sym) -> &str {
        &self.list[s.0 as usize]
    }

    pub fn list(&self) -> &[Box<str>] {
        &self.list
    }

    /// The table whose syms are `list`'s indexes (a checkpoint's names, in
    /// sym order): its slots made once, at their final size (a million
    /// accounts' names were placed again at every doubling). A name listed
    /// twice keeps its first sym, as [`Names::id`] would.
    pub fn from_list(list: Vec<Box<str>>) -> Names {
        let n = (list.len() * 2 + 1).next_power_of_two().max(64);
        let mut names = Names {
            list: Vec::with_capacity(list.len()),
            slots: vec![
                Slot {
                    head: [0; 2],
                    len: 0,
                    sym: EMPTY,
                };
                n
            ],
            fork: None,
        };
        for s in list {
            if let Err(at) = names.probe(s.as_bytes()) {
                let sym = Sym(names.list.len() as u32);
                names.slots[at] = slot(s.as_bytes(), sym);
                names.list.push(s);
            }
        }
        names
    }

    /// A copy of this table for another thread's proof, whose syms agree
    /// with this one's on every name the two hold now: [`Names::absorb`]
    /// maps those to themselves instead of looking each up again (a
    /// checkpoint's names hold every account's key, millions).
    pub fn fork(&mut self) -> Names {
        static FORKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let fork = FORKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.fork = Some((fork, self.list.len()));
        self.clone()
    }

    /// Adds `other`'s names; returns, for each of `other`'s syms, this table's sym.
    pub fn absorb(&mut self, other: &Names) -> Vec<Sym> {
        // Both sides of one fork only added names since: the ones they
        // shared keep their syms.
        let shared = match (self.fork, other.fork) {
            (Some(a), Some(b)) if a == b => a.1,
            _ => 0,
        };
        let mut to: Vec<Sym> = (0..shared).map(|i| Sym(i as u32)).collect();
        to.extend(other.list[shared..].iter().map(|s| self.id(s)));
        to
    }
}

fn slot(b: &[u8], sym: Sym) -> Slot {
    Slot {
        head: head(b),
        len: u32::try_from(b.len()).expect("a name under 4 GiB"),
        sym: sym.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_the_first_16_bytes_zero_padded_at_every_length() {
        let text = b"acc.gen.00000001.with-a-tail";
        for n in 0..=text.len() {
            let b = &text[..n];
            let mut padded = [0u8; 16];
            padded[..n.min(16)].copy_from_slice(&b[..n.min(16)]);
            let want = [
                u64::from_le_bytes(padded[..8].try_into().unwrap()),
                u64::from_le_bytes(padded[8..].try_into().unwrap()),
            ];
            assert_eq!(head(b), want, "length {n}");
        }
    }

    #[test]
    fn names_keep_their_own_syms_in_any_order() {
        let mut n = Names::default();
        // Names of one length and last byte, alternately, and repeated.
        let words = ["ab", "cb", "ab", "xb", "cb", "", "ab", "USD", "EUR", "USD"];
        let syms: Vec<u32> = words.iter().map(|w| n.id(w).0).collect();
        assert_eq!(syms, [0, 1, 0, 2, 1, 3, 0, 4, 5, 4]);
        for (w, s) in words.iter().zip(&syms) {
            assert_eq!(n.get(Sym(*s)), *w);
            assert_eq!(n.find(w), Some(Sym(*s)));
        }
        let copy = Names::from_list(n.list().to_vec());
        assert_eq!(copy.list(), n.list());
    }

    #[test]
    fn names_alike_in_their_first_16_bytes_or_in_zero_padding_are_distinct() {
        let mut n = Names::default();
        // Same head, different tails; a name and itself with a NUL added
        // (same zero-padded head, another length); lengths 15, 16 and 17.
        let words = [
            "acc.gen.00000001.a",
            "acc.gen.00000001.b",
            "acc.gen.00000001",
            "acc.gen.0000000",
            "acc.gen.0000000\0",
            "acc.gen.00000001\0",
            "",
            "\0",
            "acc.gen.00000001.a",
            "acc.gen.0000000",
        ];
        let syms: Vec<u32> = words.iter().map(|w| n.id(w).0).collect();
        assert_eq!(syms, [0, 1, 2, 3, 4, 5, 6, 7, 0, 3]);
        for (w, s) in words.iter().zip(&syms) {
            assert_eq!(n.get(Sym(*s)), *w);
            assert_eq!(n.find(w), Some(Sym(*s)));
        }
        assert_eq!(n.find("acc.gen.00000001.c"), None);
        assert_eq!(n.find("acc.gen.000000"), None);
    }

    #[test]
    fn thousands_of_names_keep_their_syms_as_the_table_grows() {
        let mut n = Names::default();
        let name = |i: u32| {
            if i.is_multiple_of(3) {
                format!("gen.acc-{i}.with-a-tail-past-16-bytes")
            } else {
                format!("gen.acc-{i}")
            }
        };
        for i in 0..10_000 {
            assert_eq!(n.id(&name(i)), Sym(i));
            n.prefetch(&name(i / 2));
        }
        for i in 0..10_000 {
            assert_eq!(n.id(&name(i)), Sym(i), "{}", name(i));
            assert_eq!(n.get(Sym(i)), name(i));
        }
        assert_eq!(n.find("gen.acc-10000"), None);
        assert_eq!(n.list().len(), 10_000);
        assert!(n.slots.len() >= 2 * n.list().len() && n.slots.len().is_power_of_two());
    }

    #[test]
    fn a_fork_absorbed_keeps_the_names_it_shared_and_adds_its_own() {
        let mut base = Names::default();
        for w in ["acc-1", "USD", "acc-2"] {
            base.id(w);
        }
        let mut other = base.fork();
        // Each side adds names of its own, one of them the same.
        let mine: Vec<Sym> = ["acc-3", "EUR"].iter().map(|w| base.id(w)).collect();
        let theirs: Vec<Sym> = ["EUR", "acc-4", "USD"]
            .iter()
            .map(|w| other.id(w))
            .collect();
        let to = base.absorb(&other);
        assert_eq!(to.len(), other.list().len());
        for (sym, name) in other.list().iter().enumerate() {
            assert_eq!(base.get(to[sym]), &**name, "{name}");
        }
        assert_eq!(to[theirs[0].0 as usize], mine[1], "EUR is one name");
        assert_eq!(to[theirs[2].0 as usize], Sym(1), "USD was shared");
        // A table that is no side of that fork is looked up name by name.
        let mut apart = Names::default();
        apart.id("acc-2");
        let to = base.absorb(&apart);
        assert_eq!(to, [Sym(2)]);
        // Nor is a later fork's side.
        let mut later = base.fork();
        let fresh = later.id("acc-9");
        let to = other.absorb(&later);
        assert_eq!(other.get(to[fresh.0 as usize]), "acc-9");
        for (sym, name) in later.list().iter().enumerate() {
            assert_eq!(other.get(to[sym]), &**name, "{name}");
        }
    }
}
