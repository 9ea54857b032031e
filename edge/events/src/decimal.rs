//! Integers of the canonical encoding written as decimal text straight into
//! the frame being built.
//!
//! The reconciler encodes every event it reads, each with up to eight
//! integers. Formatting them into a buffer (`itoa`) and copying that buffer
//! into the frame makes each copy's wide loads wait on the narrow stores that
//! just wrote the digits (a store-forwarding stall per number). Here a number
//! is measured first ([`Decimal::of_i64`] and its kin, so the frame's length is known before
//! anything is written), then its digits are computed eight at a time in one
//! `u64` (SWAR: multiplications, shifts and masks) and stored into the frame
//! with one or two 8-byte stores ([`Decimal::put`]). Numbers of more than 16
//! digits, which no amount or time in a real ledger has, take `itoa`.
//!
//! The reverse, [`is_decimal_of`], reads an event id's seq digit by digit
//! rather than comparing it with a formatted copy, for the same reason.

use std::mem::MaybeUninit;

/// `POW10[t]` is 10ᵗ, but `POW10[0]` is 0 so that zero has one digit.
const POW10: [u64; 20] = {
    let mut p = [0u64; 20];
    let mut t = 1;
    let mut v = 10u64;
    while t < 20 {
        p[t] = v;
        t += 1;
        if t < 20 {
            v *= 10;
        }
    }
    p
};

/// Bytes a [`Decimal::put`] may write past the number's end (then
/// overwritten by whatever is written next): the frame's slice must have this
/// much room after its last number, which the canonical encoding's
/// `\nprev_hash=` line always gives.
pub(crate) const SPILL: usize = 8;

/// An integer's decimal text, measured but not yet written: `-` if negative,
/// then the magnitude's digits without leading zeros. An absent optional
/// integer is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    negative: bool,
    magnitude: u64,
    /// Digits of `magnitude`; 0 only for an absent value.
    digits: u8,
}

impl Decimal {
    /// The empty text of an absent value.
    pub const ABSENT: Decimal = Decimal {
        negative: false,
        magnitude: 0,
        digits: 0,
    };

    #[inline(always)]
    pub fn of_u64(v: u64) -> Decimal {
        Decimal {
            negative: false,
            magnitude: v,
            digits: digits(v),
        }
    }

    #[inline(always)]
    pub fn of_i64(v: i64) -> Decimal {
        let magnitude = v.unsigned_abs();
        Decimal {
            negative: v < 0,
            magnitude,
            digits: digits(magnitude),
        }
    }

    #[inline(always)]
    pub fn of_opt(v: Option<i64>) -> Decimal {
        v.map_or(Decimal::ABSENT, Decimal::of_i64)
    }

    /// Bytes of its text.
    #[inline(always)]
    pub fn len(self) -> usize {
        self.digits as usize + self.negative as usize
    }

    /// Writes the text at `dst[*at..]` and moves `*at` past it. Up to
    /// [`SPILL`] bytes after the text may be written too; `dst` must have
    /// room for them.
    #[inline(always)]
    pub fn put(self, dst: &mut [MaybeUninit<u8>], at: &mut usize) {
        if self.digits == 0 {
            return;
        }
        let mut p = *at;
        if self.negative {
            dst[p].write(b'-');
            p += 1;
        }
        let d = self.digits as usize;
        let m = self.magnitude;
        if d <= 8 {
            store(dst, p, eight(m as u32) >> (8 * (8 - d)));
        } else if d <= 16 {
            let (hi, lo) = ((m / 100_000_000) as u32, (m % 100_000_000) as u32);
            let head = d - 8;
            store(dst, p, eight(hi) >> (8 * (8 - head)));
            store(dst, p + head, eight(lo));
        } else {
            let mut buf = itoa::Buffer::new();
            for (slot, b) in dst[p..p + d].iter_mut().zip(buf.format(m).as_bytes()) {
                slot.write(*b);
            }
        }
        *at = p + d;
    }
}

/// Whether `text` is `seq` as [`crate::event_id`] writes it: decimal digits, no
/// sign, no leading zero. Read digit by digit rather than compared with
/// `seq` formatted into a buffer, whose wide reads would wait on the narrow
/// writes that just filled it.
#[inline(always)]
pub(crate) fn is_decimal_of(text: &[u8], seq: u64) -> bool {
    let Some(&first) = text.first() else {
        return false;
    };
    if text.len() > 20 || (first == b'0' && text.len() > 1) {
        return false;
    }
    let mut v: u64 = 0;
    for &b in text {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return false;
        }
        match v.checked_mul(10).and_then(|v| v.checked_add(u64::from(d))) {
            Some(next) => v = next,
            None => return false,
        }
    }
    v == seq
}

/// Digits of `v` (1 for zero): the bit length's estimate of log₁₀ and one
/// comparison.
#[inline(always)]
fn digits(v: u64) -> u8 {
    let bits = 64 - (v | 1).leading_zeros();
    let t = (bits * 1233) >> 12;
    (t + (v >= POW10[t as usize]) as u32) as u8
}

/// The eight decimal digits of `v` < 10⁸ (leading zeros included) as ASCII
/// in one little-endian word: the most significant digit in the lowest byte,
/// where it is stored first.
#[inline(always)]
fn eight(v: u32) -> u64 {
    debug_assert!(v < 100_000_000);
    // Two 4-digit halves in 32-bit lanes, most significant in the low lane.
    let x = (v / 10_000) as u64 | (((v % 10_000) as u64) << 32);
    // Each lane / 100 (exact below 43,699), then 2-digit pairs in 16-bit lanes.
    let q = ((x * 10_486) >> 20) & 0x0000_007f_0000_007f;
    let x = q | ((x - q * 100) << 16);
    // Each lane / 10 (exact below 179), then digits in 8-bit lanes.
    let q = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    let x = q | ((x - q * 10) << 8);
    x + 0x3030_3030_3030_3030
}

#[inline(always)]
fn store(dst: &mut [MaybeUninit<u8>], at: usize, word: u64) {
    let d: &mut [MaybeUninit<u8>; 8] = (&mut dst[at..at + 8]).try_into().expect("8 bytes");
    *d = word.to_le_bytes().map(MaybeUninit::new);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text `put` writes, with the spill room after it filled with `#`
    /// first, so a test sees only what the text is.
    fn text(d: Decimal) -> String {
        let mut buf = vec![MaybeUninit::new(b'#'); 1 + 20 + SPILL];
        buf[0].write(b'<');
        let mut at = 1;
        d.put(&mut buf, &mut at);
        assert_eq!(at, 1 + d.len(), "put moves past exactly its text");
        // SAFETY: every slot was initialised above.
        let bytes: Vec<u8> = buf[..at]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        String::from_utf8(bytes).unwrap()[1..].to_owned()
    }

    /// Every power of ten and its neighbours, the extremes, and a spread of
    /// every length.
    fn samples() -> Vec<i64> {
        let mut v = vec![
            0,
            1,
            -1,
            9,
            -9,
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
            i64::MIN + 1,
        ];
        let mut p: i64 = 1;
        for _ in 0..19 {
            let near = [
                p.checked_sub(1),
                Some(p),
                p.checked_add(1),
                p.checked_mul(2).map(|x| x - 1),
                p.checked_mul(5),
                p.checked_mul(10).map(|x| x - 1),
            ];
            for x in near.into_iter().flatten() {
                v.extend([x, -x]);
            }
            p = p.saturating_mul(10);
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Every length equally often: shift away a random number of bits.
            v.push((x >> (x % 64)) as i64);
            v.push(-((x >> 1 >> (x % 63)) as i64));
        }
        v
    }

    #[test]
    fn every_length_and_sign_is_written_as_std_writes_it() {
        for v in samples() {
            let d = Decimal::of_i64(v);
            assert_eq!(text(d), v.to_string(), "{v}");
            assert_eq!(d.len(), v.to_string().len(), "{v}");
        }
    }

    #[test]
    fn unsigned_values_past_i64_and_absent_values() {
        for v in [
            u64::MAX,
            u64::MAX / 10,
            10_000_000_000_000_000_000,
            9_999_999_999_999_999_999,
        ] {
            assert_eq!(text(Decimal::of_u64(v)), v.to_string());
        }
        for v in samples() {
            let u = v.unsigned_abs();
            assert_eq!(text(Decimal::of_u64(u)), u.to_string());
        }
        assert_eq!(text(Decimal::of_opt(None)), "");
        assert_eq!(Decimal::of_opt(None).len(), 0);
        assert_eq!(text(Decimal::of_opt(Some(-42))), "-42");
    }

    #[test]
    fn eight_digits_keep_their_leading_zeros() {
        for v in [0, 7, 10, 99, 1_000, 12_345_678, 99_999_999, 40_000_001] {
            assert_eq!(eight(v).to_le_bytes(), *format!("{v:08}").as_bytes());
        }
    }
}
