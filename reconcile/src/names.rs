//! Interning and hashing for the proof's state: [`Names`] turns the few
//! thousand account keys, currencies and phases that millions of legs and
//! transfers name into 4-byte [`Sym`]s, and [`FxHasher`] hashes the ids the
//! proof's tables are keyed by.

use std::collections::HashMap;
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

/// An interned string: an index into [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sym(pub u32);

/// Interned strings: account keys, currencies, phases. A few thousand distinct
/// values name millions of legs and transfers.
#[derive(Debug, Clone, Default)]
pub struct Names {
    list: Vec<Box<str>>,
    ix: FxMap<Box<str>, Sym>,
    /// Per slot (a name's length and last byte), the sym + 1 of the last name
    /// looked up there: most lookups repeat a few names (currencies, phases),
    /// and one comparison is cheaper than hashing.
    recent: [u32; 32],
}

impl Names {
    pub fn id(&mut self, s: &str) -> Sym {
        let slot = (s.len() ^ usize::from(s.as_bytes().last().copied().unwrap_or(0)) << 1) % 32;
        if let Some(r) = self.recent[slot].checked_sub(1) {
            if *self.list[r as usize] == *s {
                return Sym(r);
            }
        }
        let id = match self.ix.get(s) {
            Some(&id) => id,
            None => {
                let id =
                    Sym(u32::try_from(self.list.len()).expect("fewer than 2³² distinct names"));
                self.list.push(s.into());
                self.ix.insert(s.into(), id);
                id
            }
        };
        self.recent[slot] = id.0 + 1;
        id
    }

    /// The sym of `s`, if it was interned.
    pub fn find(&self, s: &str) -> Option<Sym> {
        self.ix.get(s).copied()
    }

    pub fn get(&self, s: Sym) -> &str {
        &self.list[s.0 as usize]
    }

    pub fn list(&self) -> &[Box<str>] {
        &self.list
    }

    pub fn from_list(list: Vec<Box<str>>) -> Names {
        let mut n = Names::default();
        for s in list {
            n.id(&s);
        }
        n
    }

    /// Adds `other`'s names; returns, for each of `other`'s syms, this table's sym.
    pub fn absorb(&mut self, other: &Names) -> Vec<Sym> {
        other.list.iter().map(|s| self.id(s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sharing_a_recent_slot_keep_their_own_syms() {
        let mut n = Names::default();
        // Same length and last byte: the same recent slot, alternately.
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
}
