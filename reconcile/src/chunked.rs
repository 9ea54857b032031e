//! A vector kept in chunks of a fixed size that never move: [`Chunked`].
//!
//! The legs table's rows (~1.2 GB at 50M events) are built while the leg log
//! they come from is freed bucket by bucket ([`crate::facts::LegsTable`]).
//! In one vector reserved up front, every row lands on a fresh page (a page
//! fault each 4 KiB: ~200K faults, a sixth of the proof's, docs/BENCHMARKS.md);
//! in chunks of a few MB allocated as they fill, the allocator hands out the
//! pages of the log's freed buckets, already faulted in.

use std::ops::{Index, IndexMut};

/// Elements per chunk, as a power of two (32 Ki: 4.5 MiB of 144-byte legs
/// rows, about what a leg-log bucket frees at 50M events). In the unit
/// tests, 16: the legs tables' tests cross chunks.
#[cfg(not(test))]
const CHUNK_BITS: u32 = 15;
#[cfg(test)]
const CHUNK_BITS: u32 = 4;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A vector in chunks of [`CHUNK`] elements: element `i` is element
/// `i % CHUNK` of chunk `i / CHUNK`. Every chunk but the last is full. The
/// first chunk grows as a vector does (a small table takes little room);
/// later ones are allocated whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, value: T) {
        if self.len == self.chunks.len() * CHUNK {
            self.chunks.push(if self.chunks.is_empty() {
                Vec::new()
            } else {
                Vec::with_capacity(CHUNK)
            });
        }
        self.chunks[self.len >> CHUNK_BITS].push(value);
        self.len += 1;
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flatten()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.chunks.iter_mut().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        let mut c = Chunked::default();
        for v in values {
            c.push(v);
        }
        c
    }
}

impl<'a, T> IntoIterator for &'a Chunked<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_is_where_a_vector_has_it_across_chunks() {
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] {
            let v: Vec<u64> = (0..n as u64).map(|i| i * 31 + 7).collect();
            let mut c: Chunked<u64> = v.iter().copied().collect();
            assert_eq!(c.len(), n);
            assert_eq!(c.is_empty(), n == 0);
            assert!(c.iter().eq(v.iter()), "n = {n}");
            assert!((&c).into_iter().eq(v.iter()));
            for (i, want) in v.iter().enumerate() {
                assert_eq!(c[i], *want);
                assert_eq!(c.get(i), Some(want));
            }
            assert_eq!(c.get(n), None);
            // Every chunk but the last is full, and no chunk is left empty.
            assert!(c.chunks.iter().rev().skip(1).all(|k| k.len() == CHUNK));
            assert!(c.chunks.last().is_none_or(|k| !k.is_empty()));
            for x in c.iter_mut() {
                *x += 1;
            }
            if n > 0 {
                c[n - 1] = 0;
                assert_eq!(c[n - 1], 0);
            }
            let kept = n.saturating_sub(1);
            assert!(c
                .iter()
                .copied()
                .take(kept)
                .eq(v.iter().map(|x| x + 1).take(kept)));
        }
    }

    #[test]
    #[should_panic]
    fn an_index_past_the_end_panics() {
        let c: Chunked<u8> = (0..10).collect();
        let _ = c[10];
    }
}
