//! Identifier rules shared by every component.
//!
//! Keys that clients choose (account ids, idempotency keys) are restricted to
//! `[A-Za-z0-9._-]{1,64}`. Identifiers the ledger derives from them append
//! `:`-separated parts (`t.acme.k1:debit`, `account:acc-1:7`), so a derived id can
//! never collide with another derived id or be forged from a client key, and
//! the canonical hash encoding (one `name=value` per line) needs no escaping.

/// Longest client-chosen key, in bytes.
pub const CLIENT_KEY_BYTES_MAX: usize = 64;
/// Longest derived identifier (stream keys, entry ids, transfer ids), in bytes.
pub const DERIVED_ID_BYTES_MAX: usize = 200;

/// Why an identifier was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    Empty,
    TooLong { len: usize, max: usize },
    BadChar { ch: char, at: usize },
}

impl std::fmt::Display for IdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdError::Empty => write!(f, "is empty"),
            IdError::TooLong { len, max } => {
                write!(f, "is {len} bytes long; at most {max} are allowed")
            }
            IdError::BadChar { ch, at } => write!(
                f,
                "has {ch:?} at byte {at}; only letters, digits, '.', '_' and '-' are allowed"
            ),
        }
    }
}

fn check(s: &str, max: usize, allow_colon: bool) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty);
    }
    if s.len() > max {
        return Err(IdError::TooLong { len: s.len(), max });
    }
    if all_allowed(s.as_bytes(), allow_colon) {
        return Ok(());
    }
    // Rare: the char-wise scan names the first offending char, whole (a
    // non-ASCII char is reported as itself, not as its first byte).
    for (at, ch) in s.char_indices() {
        let ok = ch.is_ascii_alphanumeric()
            || matches!(ch, '.' | '_' | '-')
            || (allow_colon && ch == ':');
        if !ok {
            return Err(IdError::BadChar { ch, at });
        }
    }
    Ok(())
}

/// Bytes checked together by [`all_allowed`]: one SSE2 register.
const CHUNK_BYTES: usize = 16;

/// Whether every byte of `bytes` is in the alphabet. The reconciler checks
/// several identifiers per event for millions of events, so this is written
/// for the vectorizer: fixed-size chunks folded without short-circuiting, the
/// tail covered by one last chunk that overlaps the one before it (a byte
/// checked twice changes nothing). Bytes of non-ASCII chars are all >= 0x80
/// and never allowed, so the bytes pass exactly when the chars do.
fn all_allowed(bytes: &[u8], allow_colon: bool) -> bool {
    let n = bytes.len();
    if n < CHUNK_BYTES {
        // Most ids are short (an account key, `t.{tenant}.{key}`): checked
        // as two overlapping words, 8 bytes at a time across the word.
        let word = |at: usize, len: usize| {
            bytes[at..at + len]
                .iter()
                .rev()
                .fold(0u64, |w, &b| (w << 8) | u64::from(b))
        };
        return match n {
            8.. => {
                word_allowed(word(0, 8), allow_colon) & word_allowed(word(n - 8, 8), allow_colon)
            }
            4.. => word_allowed(word(0, 4) | (word(n - 4, 4) << 32), allow_colon),
            _ => bytes
                .iter()
                .fold(true, |ok, &b| ok & allowed(b, allow_colon)),
        };
    }
    let last = &bytes[bytes.len() - CHUNK_BYTES..];
    bytes
        .chunks_exact(CHUNK_BYTES)
        .fold(chunk_allowed(last, allow_colon), |ok, chunk| {
            ok & chunk_allowed(chunk, allow_colon)
        })
}

/// Every byte of `x` is allowed ([`allowed`], 8 bytes at once).
#[inline(always)]
fn word_allowed(x: u64, allow_colon: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of the result: that byte of `x` is in
    // lo..=hi. Only for bytes below 0x80 (no carry crosses a byte: each sum
    // stays below 0x100).
    let within = |x: u64, lo: u8, hi: u8| {
        let at_least_lo = x.wrapping_add(ONES * u64::from(0x80 - lo));
        let above_hi = x.wrapping_add(ONES * u64::from(0x7f - hi));
        at_least_lo & !above_hi & HIGH
    };
    if x & HIGH != 0 {
        return false; // a byte that is not ASCII
    }
    let last_punct_digit = if allow_colon { b':' } else { b'9' };
    let punct_digit = within(x, b'-', last_punct_digit) & !within(x, b'/', b'/');
    let letter = within(x | (ONES * 0x20), b'a', b'z');
    (punct_digit | letter | within(x, b'_', b'_')) == HIGH
}

/// [`all_allowed`] of exactly [`CHUNK_BYTES`] bytes.
#[inline(always)]
fn chunk_allowed(chunk: &[u8], allow_colon: bool) -> bool {
    let chunk: &[u8; CHUNK_BYTES] = chunk.try_into().expect("a full chunk");
    chunk
        .iter()
        .fold(true, |ok, &b| ok & allowed(b, allow_colon))
}

/// `[A-Za-z0-9._-]`, and `:` when `allow_colon`, as range arithmetic the
/// vectorizer turns into a few compares per 16 bytes: `-` `.` `/` `0`..`9`
/// `:` are the consecutive bytes 0x2D..=0x3A, `/` excepted; `b | 0x20` maps
/// upper-case letters onto lower-case ones and nothing else onto `a`..`z`.
#[inline(always)]
fn allowed(b: u8, allow_colon: bool) -> bool {
    let punct_digit = b.wrapping_sub(b'-') < 13 + u8::from(allow_colon) && b != b'/';
    let letter = (b | 0x20).wrapping_sub(b'a') < 26;
    punct_digit | letter | (b == b'_')
}

/// A key chosen by a client: account id, tenant id, idempotency key.
pub fn check_client_key(s: &str) -> Result<(), IdError> {
    check(s, CLIENT_KEY_BYTES_MAX, false)
}

/// An identifier the ledger derived (may contain `:` separators).
pub fn check_derived_id(s: &str) -> Result<(), IdError> {
    check(s, DERIVED_ID_BYTES_MAX, true)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn client_keys() {
        assert!(check_client_key("acc-1_A.b").is_ok());
        assert_eq!(check_client_key(""), Err(IdError::Empty));
        assert_eq!(
            check_client_key("a:b"),
            Err(IdError::BadChar { ch: ':', at: 1 })
        );
        assert_eq!(
            check_client_key("a\nb"),
            Err(IdError::BadChar { ch: '\n', at: 1 })
        );
        assert_eq!(
            check_client_key("é"),
            Err(IdError::BadChar { ch: 'é', at: 0 })
        );
        let long = "x".repeat(65);
        assert_eq!(
            check_client_key(&long),
            Err(IdError::TooLong { len: 65, max: 64 })
        );
        assert!(check_derived_id("t.acme.k1:debit").is_ok());
    }

    /// `check` before its vectorizable fast path, kept as the reference
    /// (here and for `event::tests::old_validate`).
    pub(crate) fn old_check(s: &str, max: usize, allow_colon: bool) -> Result<(), IdError> {
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if s.len() > max {
            return Err(IdError::TooLong { len: s.len(), max });
        }
        for (at, ch) in s.char_indices() {
            let ok = ch.is_ascii_alphanumeric()
                || matches!(ch, '.' | '_' | '-')
                || (allow_colon && ch == ':');
            if !ok {
                return Err(IdError::BadChar { ch, at });
            }
        }
        Ok(())
    }

    /// Both public checks against the reference; returns how many accepted.
    /// The fast path alone is held to the reference too: one that refused a
    /// good id would still give the right result, through the slow scan.
    fn agree(s: &str) -> usize {
        for allow_colon in [false, true] {
            let every_char_ok = s.is_empty() || old_check(s, usize::MAX, allow_colon).is_ok();
            assert_eq!(
                all_allowed(s.as_bytes(), allow_colon),
                every_char_ok,
                "{s:?}"
            );
        }
        let client = check_client_key(s);
        assert_eq!(client, old_check(s, CLIENT_KEY_BYTES_MAX, false), "{s:?}");
        let derived = check_derived_id(s);
        assert_eq!(derived, old_check(s, DERIVED_ID_BYTES_MAX, true), "{s:?}");
        usize::from(client.is_ok()) + usize::from(derived.is_ok())
    }

    /// Chars whose UTF-8 takes two, three and four bytes, and the bounds of
    /// each width.
    const MULTI_BYTE: &[char] = &[
        '\u{80}',
        'é',
        '\u{7ff}',
        '\u{800}',
        '€',
        '\u{ffff}',
        '\u{10000}',
        '𝄞',
        '\u{10ffff}',
    ];

    #[test]
    fn every_char_at_every_position_agrees_with_the_reference() {
        // Every byte value as a char (U+0080..=U+00FF are the two-byte ones),
        // then wider chars.
        let probes: Vec<char> = (0u8..=255)
            .map(char::from)
            .chain(MULTI_BYTE.iter().copied())
            .collect();
        let lengths = (0..=70).chain([63, 64, 65, 66, 127, 128, 129, 199, 200, 201, 202]);
        let mut accepted = 0;
        for len in lengths {
            // One body a client key may be, one with the derived ids' colons.
            for alphabet in ["aZ09._-xQ", "t.acme:k1-Z_9"] {
                let base: Vec<char> = alphabet.chars().cycle().take(len).collect();
                let whole: String = base.iter().collect();
                accepted += agree(&whole);
                for at in 0..len {
                    for &probe in &probes {
                        let mut chars = base.clone();
                        chars[at] = probe;
                        accepted += agree(&chars.into_iter().collect::<String>());
                    }
                }
            }
        }
        // The fast path accepted, not only rejected.
        assert!(accepted > 100_000, "{accepted}");
    }

    #[test]
    fn random_strings_agree_with_the_reference() {
        const STRINGS: usize = 300_000;
        // Allowed chars, the colon, and the bytes just outside each allowed
        // range, ASCII control bytes and non-ASCII chars.
        const VALID: &[char] = &['a', 'z', 'A', 'Z', '0', '9', 'm', 'Q', '5', '.', '_', '-'];
        const INVALID: &[char] = &[
            ' ', ',', '/', ';', '@', '[', '^', '`', '{', '~', '\n', '\0', '\u{7f}', 'é', '€', '𝄞',
        ];
        // xorshift64: deterministic, no dependency.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut accepted = [0usize; 3];
        let mut s = String::new();
        for _ in 0..STRINGS {
            let len = match next() % 4 {
                0 => next() % 16,
                1 => next() % 72,
                2 => 60 + next() % 10,
                _ => 190 + next() % 20,
            };
            // Invalid chars anywhere from never to often.
            let bad_in = 1 + next() % 512;
            s.clear();
            for _ in 0..len {
                let r = next();
                let ch = if r % bad_in == 0 {
                    INVALID[(r >> 32) as usize % INVALID.len()]
                } else if (r >> 16) % 24 == 0 {
                    ':'
                } else {
                    VALID[(r >> 32) as usize % VALID.len()]
                };
                s.push(ch);
            }
            accepted[agree(&s)] += 1;
        }
        // Each outcome is common: neither, the derived check only, both.
        assert!(accepted.iter().all(|&n| n > STRINGS / 20), "{accepted:?}");
    }
}
