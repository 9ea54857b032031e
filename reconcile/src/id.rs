//! Transfer ids as the proof's tables hold them: [`Id`].

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Bytes an [`Id`] keeps in place.
pub const INLINE: usize = 22;

/// A string of up to [`INLINE`] bytes kept in place, a longer one on the
/// heap; 24 bytes either way. A table holds one per transfer, millions: as
/// a `Box<str>` each was an allocation (17M at 50M events, for the transfer
/// and legs tables), and each read of an id (the join compares millions) a
/// second random access after the row's own. Ordered, compared and hashed
/// as the string.
#[derive(Clone)]
pub struct Id(Repr);

#[derive(Clone)]
enum Repr {
    /// `bytes[..len]`, copied from a `&str` (so UTF-8); the rest zero.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<str>),
}

impl Id {
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                // SAFETY: `bytes[..len]` is a copy of a whole `&str` (the
                // only constructor of `Inline` is `From<&str>`), so it is
                // UTF-8.
                unsafe { std::str::from_utf8_unchecked(&bytes[..usize::from(*len)]) }
            }
            Repr::Heap(s) => s,
        }
    }

    /// Whether the string is on the heap (longer than [`INLINE`] bytes).
    pub fn on_heap(&self) -> bool {
        matches!(self.0, Repr::Heap(_))
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Id {
        if s.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Id(Repr::Inline {
                len: s.len() as u8, // ≤ INLINE
                bytes,
            })
        } else {
            Id(Repr::Heap(s.into()))
        }
    }
}

impl From<Box<str>> for Id {
    fn from(s: Box<str>) -> Id {
        if s.len() <= INLINE {
            Id::from(&*s)
        } else {
            Id(Repr::Heap(s))
        }
    }
}

impl From<String> for Id {
    fn from(s: String) -> Id {
        if s.len() <= INLINE {
            Id::from(s.as_str())
        } else {
            Id(Repr::Heap(s.into_boxed_str()))
        }
    }
}

impl From<&Id> for Box<str> {
    fn from(id: &Id) -> Box<str> {
        id.as_str().into()
    }
}

impl Default for Id {
    fn default() -> Id {
        Id::from("")
    }
}

impl Deref for Id {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Id {}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Id) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Id) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl std::fmt::Debug for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_24_bytes_and_gives_back_every_string_in_place_or_not() {
        assert_eq!(std::mem::size_of::<Id>(), 24);
        let long = "t.".repeat(40);
        let strings = [
            "",
            "t",
            "t.gen.op9347022",
            "é€𝄞 multi-byte ok",                    // 21 bytes
            "exactly-twenty-two-by",                // 21
            "exactly-twenty-two-byt",               // 22: the last inline
            "exactly-twenty-three-by",              // 23: the first on the heap
            "0123456789abcdef0123456789abcdef0123", // a UUID's length
            &long,
        ];
        for s in strings {
            for id in [
                Id::from(s),
                Id::from(Box::<str>::from(s)),
                Id::from(s.to_owned()),
            ] {
                assert_eq!(id.as_str(), s);
                assert_eq!(&*id, s);
                assert_eq!(id.on_heap(), s.len() > INLINE, "{s:?}");
                assert_eq!(Box::<str>::from(&id), Box::<str>::from(s));
                assert_eq!(format!("{id:?}"), format!("{s:?}"));
                assert_eq!(id.to_string(), s);
            }
        }
        // Ordered and equal as the strings are, across both kinds.
        for a in strings {
            for b in strings {
                assert_eq!(Id::from(a).cmp(&Id::from(b)), a.cmp(b), "{a:?} {b:?}");
                assert_eq!(Id::from(a) == Id::from(b), a == b);
            }
        }
        assert_eq!(Id::default().as_str(), "");
    }
}
