//! Multi-buffer SHA-256: many independent messages hashed 16 at a time, one
//! per 32-bit lane of the AVX-512 registers.
//!
//! FIGURES-PLACEHOLDER

use sha2::{Digest, Sha256};

/// Below this many messages the batch is hashed one message at a time.
const MIN_BATCH: usize = 4;

/// SHA-256 of each message: out[i] = SHA-256(msgs[i]). Panics if the lengths differ.
pub fn sha256_many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
    assert_eq!(
        msgs.len(),
        out.len(),
        "sha256_many: {} messages but {} digests",
        msgs.len(),
        out.len()
    );
    #[cfg(target_arch = "x86_64")]
    if msgs.len() >= MIN_BATCH && fast_path_available() {
        // SAFETY: `fast_path_available` checked at run time that this CPU has
        // avx512f and avx512bw, the features `lanes::many` is compiled for.
        unsafe { lanes::many(msgs, out) };
        return;
    }
    one_by_one(msgs, out);
}

/// The portable path: `sha2` (SHA-NI where the CPU has it), one message at a time.
fn one_by_one(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
    for (msg, digest) in msgs.iter().zip(out.iter_mut()) {
        *digest = Sha256::digest(msg).into();
    }
}

/// Whether `sha256_many` uses the 16-lane AVX-512 path on this CPU. The
/// detection runs once: `is_x86_feature_detected!` caches its answer.
pub(crate) fn fast_path_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod lanes {
    use core::arch::x86_64::*;

    use sha2::{Digest, Sha256};

    const LANES: usize = 16;

    const IV: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];

    static K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    /// The eight state words of the 16 lanes: `0[j][lane]` is word j of that
    /// lane's hash state, so row j is one AVX-512 register.
    #[repr(C, align(64))]
    struct State([[u32; LANES]; 8]);

    impl State {
        fn reset(&mut self, lane: usize) {
            for (row, iv) in self.0.iter_mut().zip(IV) {
                row[lane] = iv;
            }
        }

        fn digest(&self, lane: usize) -> [u8; 32] {
            let mut digest = [0; 32];
            for (bytes, row) in digest.chunks_exact_mut(4).zip(&self.0) {
                bytes.copy_from_slice(&row[lane].to_be_bytes());
            }
            digest
        }
    }

    /// One message in one lane: its whole 64-byte blocks still to compress,
    /// then its padded final block or two, built in `tail`.
    struct Lane<'a> {
        rest: &'a [u8],
        tail: [u8; 128],
        tail_pos: usize,
        tail_end: usize,
        /// Index of the message in the batch; `IDLE` when the lane has none.
        index: usize,
    }

    const IDLE: usize = usize::MAX;

    impl<'a> Lane<'a> {
        const fn idle() -> Self {
            Lane {
                rest: &[],
                tail: [0; 128],
                tail_pos: 0,
                tail_end: 0,
                index: IDLE,
            }
        }

        fn load(&mut self, msg: &'a [u8], index: usize) {
            let whole = msg.len() / 64 * 64;
            let (rest, last) = msg.split_at(whole);
            self.rest = rest;
            self.tail = [0; 128];
            self.tail[..last.len()].copy_from_slice(last);
            self.tail[last.len()] = 0x80;
            // The 64-bit length needs the last 8 bytes of a block: 56 bytes
            // or more left over push it into a second block.
            self.tail_end = if last.len() < 56 { 64 } else { 128 };
            let bits = (msg.len() as u64).wrapping_mul(8);
            self.tail[self.tail_end - 8..self.tail_end].copy_from_slice(&bits.to_be_bytes());
            self.tail_pos = 0;
            self.index = index;
        }

        fn block(&self) -> &[u8; 64] {
            match self.rest.first_chunk() {
                Some(block) => block,
                None => self.tail[self.tail_pos..]
                    .first_chunk()
                    .expect("a lane's tail holds whole blocks"),
            }
        }

        /// Moves past the block just compressed; true when that was the last.
        fn advance(&mut self) -> bool {
            if self.rest.is_empty() {
                self.tail_pos += 64;
                self.tail_pos == self.tail_end
            } else {
                self.rest = &self.rest[64..];
                false
            }
        }

        /// Blocks still to compress, the current one included.
        fn blocks_left(&self) -> usize {
            (self.rest.len() + self.tail_end - self.tail_pos) / 64
        }
    }

    /// Fetches the messages about to be loaded into lanes ahead of use: the
    /// lanes read 16 messages side by side, a pattern the hardware
    /// prefetchers follow poorly once the batch is larger than the caches.
    struct Prefetch {
        /// The next message to fetch, and the next of its cache lines.
        msg: usize,
        line: usize,
    }

    impl Prefetch {
        /// Lines fetched per 16-lane compression: a little more than the
        /// lanes consume, so it stays ahead.
        const LINES: usize = 24;
        /// How many messages past the next one to load it may run ahead.
        const MESSAGES: usize = 32;

        #[target_feature(enable = "avx512f,avx512bw")]
        fn run(&mut self, msgs: &[&[u8]], next: usize) {
            if self.msg < next {
                *self = Prefetch { msg: next, line: 0 };
            }
            let mut budget = Self::LINES;
            while budget > 0 && self.msg < msgs.len().min(next + Self::MESSAGES) {
                let msg = msgs[self.msg];
                // The lines that hold the message: from the one with its
                // first byte, whatever the message's alignment.
                let start = msg.as_ptr() as usize % 64;
                if self.line * 64 < start + msg.len() {
                    let at = msg.as_ptr().wrapping_sub(start).wrapping_add(self.line * 64);
                    _mm_prefetch::<_MM_HINT_T0>(at.cast());
                    self.line += 1;
                    budget -= 1;
                } else {
                    self.msg += 1;
                    self.line = 0;
                }
            }
        }
    }

    /// What one 16-lane compression costs, in single-message `sha2` blocks
    /// (measured on a Zen 5 EPYC with SHA-NI); decides when the last few
    /// lanes are cheaper to finish one by one.
    const LANES_COST_IN_BLOCKS: usize = 4;

    /// `sha256_many` on the AVX-512 path. Every lane holds a message; when a
    /// lane's message is done its digest is written and the next message of
    /// the batch takes the lane. Once the batch has no message left to load
    /// and the few lanes still busy would cost more in 16-lane rounds than
    /// hashing their messages again with `sha2`, they are finished with `sha2`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) fn many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
        debug_assert_eq!(msgs.len(), out.len());
        let mut state = State([[0; LANES]; 8]);
        let mut lanes: [Lane; LANES] = [const { Lane::idle() }; LANES];
        let zero = [0u8; 64];
        let mut next = 0;
        let mut busy = 0;
        for (lane, slot) in lanes.iter_mut().enumerate() {
            if let Some(msg) = msgs.get(next) {
                slot.load(msg, next);
                state.reset(lane);
                next += 1;
                busy += 1;
            }
        }
        let mut ahead = Prefetch { msg: next, line: 0 };
        while busy > 0 {
            ahead.run(msgs, next);
            if next == msgs.len() && busy < LANES {
                let rounds_left = lanes.iter().map(Lane::blocks_left).max().unwrap_or(0);
                let one_by_one: usize = lanes
                    .iter()
                    .filter(|lane| lane.index != IDLE)
                    .map(|lane| (msgs[lane.index].len() + 9).div_ceil(64))
                    .sum();
                if one_by_one < rounds_left * LANES_COST_IN_BLOCKS {
                    for lane in lanes.iter().filter(|lane| lane.index != IDLE) {
                        out[lane.index] = Sha256::digest(msgs[lane.index]).into();
                    }
                    return;
                }
            }
            let mut blocks = [&zero; LANES];
            for (block, lane) in blocks.iter_mut().zip(&lanes) {
                if lane.index != IDLE {
                    *block = lane.block();
                }
            }
            compress(&mut state, &blocks);
            for (i, lane) in lanes.iter_mut().enumerate() {
                if lane.index == IDLE || !lane.advance() {
                    continue;
                }
                out[lane.index] = state.digest(i);
                if let Some(msg) = msgs.get(next) {
                    lane.load(msg, next);
                    state.reset(i);
                    next += 1;
                } else {
                    lane.index = IDLE;
                    busy -= 1;
                }
            }
        }
    }

    /// One SHA-256 compression in each of the 16 lanes: lane i absorbs
    /// `blocks[i]` into its state.
    #[target_feature(enable = "avx512f,avx512bw")]
    fn compress(state: &mut State, blocks: &[&[u8; 64]; LANES]) {
        // Load the 16 blocks as rows, then transpose so that register j holds
        // word j of every lane's block.
        let mut r = [_mm512_setzero_si512(); LANES];
        for (row, block) in r.iter_mut().zip(blocks) {
            // SAFETY: `block` is a reference to 64 readable bytes, exactly one
            // unaligned 512-bit load.
            *row = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
        }
        let mut w = transpose(&r);
        let swap = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
        for word in w.iter_mut() {
            *word = _mm512_shuffle_epi8(*word, swap);
        }

        let mut s = [_mm512_setzero_si512(); 8];
        for (reg, row) in s.iter_mut().zip(&state.0) {
            // SAFETY: `row` is 16 u32s, 64 readable bytes: one 512-bit load.
            *reg = unsafe { _mm512_loadu_si512(row.as_ptr().cast()) };
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = s;

        // One round. A vector add takes two cycles on Zen 5 and the rounds
        // are bound by the dependency chains through `e` and `a`, so the sums
        // are grouped to keep three operations (rotate, ternary logic, add)
        // on each chain per round and everything else off them. `pin!` keeps
        // that grouping: LLVM otherwise reassociates the adds into one long
        // chain (1.6x slower).
        macro_rules! pin {
            ($x:expr) => {{
                let mut v: __m512i = $x;
                // SAFETY: an empty assembly template: it reads and writes
                // nothing, the register keeps its value.
                unsafe {
                    core::arch::asm!("/* {0} */", inout(zmm_reg) v,
                        options(pure, nomem, nostack, preserves_flags));
                }
                v
            }};
        }
        macro_rules! round {
            ($k:expr, $w:expr, $a:ident, $b:ident, $c:ident, $d:ident,
             $e:ident, $f:ident, $g:ident, $h:ident) => {{
                let kw = _mm512_add_epi32($w, _mm512_set1_epi32($k as i32));
                let hkw = pin!(_mm512_add_epi32($h, kw));
                let hkwd = pin!(_mm512_add_epi32(hkw, $d));
                let ch = _mm512_ternarylogic_epi32::<0xca>($e, $f, $g);
                let s1 = _mm512_ternarylogic_epi32::<0x96>(
                    _mm512_ror_epi32::<6>($e),
                    _mm512_ror_epi32::<11>($e),
                    _mm512_ror_epi32::<25>($e),
                );
                let maj = _mm512_ternarylogic_epi32::<0xe8>($a, $b, $c);
                let s0 = _mm512_ternarylogic_epi32::<0x96>(
                    _mm512_ror_epi32::<2>($a),
                    _mm512_ror_epi32::<13>($a),
                    _mm512_ror_epi32::<22>($a),
                );
                // T1 = h + K + W + Ch + Σ1; the new e is d + T1, the new a T1 + Σ0 + Maj.
                $d = _mm512_add_epi32(s1, pin!(_mm512_add_epi32(ch, hkwd)));
                let t1 = pin!(_mm512_add_epi32(s1, pin!(_mm512_add_epi32(ch, hkw))));
                $h = _mm512_add_epi32(s0, pin!(_mm512_add_epi32(t1, maj)));
            }};
        }
        macro_rules! eight {
            ($k:expr, $w:expr, $o:expr) => {{
                round!($k[$o], $w[$o], a, b, c, d, e, f, g, h);
                round!($k[$o + 1], $w[$o + 1], h, a, b, c, d, e, f, g);
                round!($k[$o + 2], $w[$o + 2], g, h, a, b, c, d, e, f);
                round!($k[$o + 3], $w[$o + 3], f, g, h, a, b, c, d, e);
                round!($k[$o + 4], $w[$o + 4], e, f, g, h, a, b, c, d);
                round!($k[$o + 5], $w[$o + 5], d, e, f, g, h, a, b, c);
                round!($k[$o + 6], $w[$o + 6], c, d, e, f, g, h, a, b);
                round!($k[$o + 7], $w[$o + 7], b, c, d, e, f, g, h, a);
            }};
        }

        // Written out word by word so that `w` stays in registers.
        macro_rules! schedule {
            ($($j:literal),*) => {$(
                let w2 = w[($j + 14) % 16];
                let w15 = w[($j + 1) % 16];
                let sigma1 = _mm512_ternarylogic_epi32::<0x96>(
                    _mm512_ror_epi32::<17>(w2),
                    _mm512_ror_epi32::<19>(w2),
                    _mm512_srli_epi32::<10>(w2),
                );
                let sigma0 = _mm512_ternarylogic_epi32::<0x96>(
                    _mm512_ror_epi32::<7>(w15),
                    _mm512_ror_epi32::<18>(w15),
                    _mm512_srli_epi32::<3>(w15),
                );
                w[$j] = _mm512_add_epi32(
                    _mm512_add_epi32(w[$j], w[($j + 9) % 16]),
                    _mm512_add_epi32(sigma0, sigma1),
                );
            )*};
        }

        for (chunk, k) in K.chunks_exact(16).enumerate() {
            eight!(k, w, 0);
            eight!(k, w, 8);
            if chunk < 3 {
                // The next 16 schedule words, in place: w[j] becomes W[t + 16].
                schedule!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            }
        }

        for (row, (old, new)) in state.0.iter_mut().zip(s.into_iter().zip([a, b, c, d, e, f, g, h])) {
            // SAFETY: `row` is 16 u32s, 64 writable bytes: one 512-bit store.
            unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), _mm512_add_epi32(old, new)) };
        }
    }

    /// Transposes a 16x16 matrix of 32-bit words held as 16 rows.
    #[target_feature(enable = "avx512f,avx512bw")]
    fn transpose(r: &[__m512i; LANES]) -> [__m512i; LANES] {
        // Within each 128-bit lane: 4x4 transposes of rows 4g..4g+3, so that
        // u[4g + j] holds column 4k + j of those rows in 128-bit lane k.
        let mut u = [_mm512_setzero_si512(); LANES];
        for g in 0..4 {
            let [r0, r1, r2, r3] = [r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]];
            let t0 = _mm512_unpacklo_epi32(r0, r1);
            let t1 = _mm512_unpackhi_epi32(r0, r1);
            let t2 = _mm512_unpacklo_epi32(r2, r3);
            let t3 = _mm512_unpackhi_epi32(r2, r3);
            u[4 * g] = _mm512_unpacklo_epi64(t0, t2);
            u[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
            u[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
            u[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        // Then gather the 128-bit lanes: column 4k + j is lane k of
        // u[j], u[4 + j], u[8 + j] and u[12 + j].
        let mut cols = [_mm512_setzero_si512(); LANES];
        for j in 0..4 {
            let lo01 = _mm512_shuffle_i32x4::<0x44>(u[j], u[4 + j]);
            let lo23 = _mm512_shuffle_i32x4::<0x44>(u[8 + j], u[12 + j]);
            let hi01 = _mm512_shuffle_i32x4::<0xee>(u[j], u[4 + j]);
            let hi23 = _mm512_shuffle_i32x4::<0xee>(u[8 + j], u[12 + j]);
            cols[j] = _mm512_shuffle_i32x4::<0x88>(lo01, lo23);
            cols[4 + j] = _mm512_shuffle_i32x4::<0xdd>(lo01, lo23);
            cols[8 + j] = _mm512_shuffle_i32x4::<0x88>(hi01, hi23);
            cols[12 + j] = _mm512_shuffle_i32x4::<0xdd>(hi01, hi23);
        }
        cols
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(msgs: &[&[u8]]) {
        let mut out = vec![[0u8; 32]; msgs.len()];
        sha256_many(msgs, &mut out);
        for (i, (msg, digest)) in msgs.iter().zip(&out).enumerate() {
            let want: [u8; 32] = Sha256::digest(msg).into();
            assert_eq!(*digest, want, "message {i} of {}, {} bytes", msgs.len(), msg.len());
        }
    }

    #[test]
    fn smoke() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        let msgs: Vec<&[u8]> = (0..40).map(|i| &data[..i * 37]).collect();
        check(&msgs);
    }
}
