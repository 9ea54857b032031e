//! Multi-buffer SHA-256: [`sha256_many`] hashes independent messages side by
//! side. The reconciler checks the SHA-256 of every event it reads, each a
//! separate 250-600 byte message, and one message at a time (`sha2`, with
//! SHA-NI where the CPU has it) leaves most of the CPU's hashing throughput
//! unused. Two paths, chosen at run time:
//!
//! - where the CPU has avx512f and avx512bw, 16 messages at a time, one per
//!   32-bit lane of the AVX-512 registers ([`lanes`]). Measured on the
//!   reconciler's Zen 5 EPYC, 200 000 messages, fastest of 5: mixed 250-600
//!   bytes, `sha2` 1 800 MB/s (236 ns a message), `sha256_many` 5 500 MB/s
//!   (77 ns), 3.0x; exactly 400 bytes, 1 770 MB/s (226 ns) against 5 600 MB/s
//!   (71 ns), 3.2x;
//! - elsewhere, where it has the SHA extensions, two messages interleaved
//!   round by round ([`shani`]): one message at a time waits on the latency
//!   of each `sha256rnds2`. On a Zen 3 EPYC (no AVX-512), the same 200 000
//!   messages: mixed, `sha2` 1 340 MB/s (318 ns) against 2 090 MB/s (203 ns),
//!   1.56x; exactly 400 bytes, 1 340 MB/s (298 ns) against 2 320 MB/s
//!   (172 ns), 1.73x (three or four messages at a time were slower than two:
//!   16 XMM registers hold two messages' words and states, not more).
//!
//! For CPUs with neither, and for batches too small to fill the lanes, it is
//! `sha2` one message at a time. Command: `cargo run --release -p
//! ledger-events --example sha256_lanes`.

use sha2::{Digest, Sha256};

/// Below this many messages the batch is hashed one message at a time.
#[cfg(target_arch = "x86_64")]
const MIN_BATCH: usize = 4;

/// SHA-256 of each message: `out[i] = SHA-256(msgs[i])`. Panics if the lengths differ.
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
        unsafe {
            if lanes::fewest_ops() {
                lanes::many::<true>(msgs, out, lanes::LANES_COST_IN_BLOCKS)
            } else {
                lanes::many::<false>(msgs, out, lanes::LANES_COST_IN_BLOCKS)
            }
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if msgs.len() >= shani::WAYS && shani::available() {
        // SAFETY: `shani::available` checked at run time that this CPU has
        // the SHA extensions, SSSE3 and SSE4.1, which `shani::many` is
        // compiled for.
        unsafe { shani::many(msgs, out) };
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
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
#[cfg(target_arch = "x86_64")]
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// SHA-256's round constants (FIPS 180-4, 4.2.2).
#[cfg(target_arch = "x86_64")]
static K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

#[cfg(target_arch = "x86_64")]
mod lanes {
    use core::arch::x86_64::*;

    use super::{IV, K};

    use sha2::{Digest, Sha256};

    const LANES: usize = 16;

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

    /// A block of zeros for the lanes without a message (their state is
    /// never read).
    static IDLE_BLOCK: [u8; 64] = [0; 64];

    /// Messages at least this long (2^31 blocks) go to `sha2` directly: a
    /// lane counts its blocks in 32 bits.
    const LANE_MAX_LEN: usize = 1 << 37;

    /// Writes the padded final block or two of `msg` into `tail`: the bytes
    /// after its last whole block, 0x80, zeros and the 64-bit big-endian bit
    /// length. Returns how many blocks that is (1 or 2). Without branches on
    /// the length (a masked load, not a variable-length copy): lengths vary
    /// at random from one message to the next.
    #[target_feature(enable = "avx512f,avx512bw")]
    fn fill_tail(msg: &[u8], tail: &mut [u8; 128]) -> usize {
        let last = &msg[msg.len() / 64 * 64..];
        let r = last.len();
        // SAFETY: the mask selects the first `r` bytes, which `last` holds;
        // a masked load does not touch the bytes outside the mask (none at
        // all when `r` is 0).
        let bytes = unsafe { _mm512_maskz_loadu_epi8((1u64 << r) - 1, last.as_ptr().cast()) };
        let block = _mm512_mask_set1_epi8(bytes, 1u64 << r, 0x80u8 as i8);
        // SAFETY: `tail` is 128 writable bytes: two 512-bit stores.
        unsafe {
            _mm512_storeu_si512(tail.as_mut_ptr().cast(), block);
            _mm512_storeu_si512(tail.as_mut_ptr().add(64).cast(), _mm512_setzero_si512());
        }
        // The length takes the last 8 bytes of a block: from 56 bytes left
        // over, it needs a second block.
        let blocks = 1 + usize::from(r >= 56);
        let bits = (msg.len() as u64).wrapping_mul(8);
        tail[blocks * 64 - 8..blocks * 64].copy_from_slice(&bits.to_be_bytes());
        blocks
    }

    /// How many messages ahead of the one entering a lane to prefetch, and
    /// how many of its cache lines: the lanes read 16 messages side by side,
    /// which the hardware prefetchers follow poorly once the batch is larger
    /// than the caches (2.3 times slower on the example's 200 000 messages
    /// without this). A fixed count of lines, clamped to the message, keeps
    /// it free of branches on the lengths.
    const PREFETCH_AHEAD: usize = 16;
    const PREFETCH_LINES: usize = 12;

    #[target_feature(enable = "avx512f,avx512bw")]
    fn prefetch(msg: &[u8]) {
        let last = msg.len().saturating_sub(1);
        for line in 0..PREFETCH_LINES {
            let at = msg.as_ptr().wrapping_add((line * 64).min(last));
            _mm_prefetch::<_MM_HINT_T0>(at.cast());
        }
    }

    /// What one 16-lane compression costs, in blocks of `sha2` one message
    /// at a time (about 160 ns against 32 ns on a Zen 5 EPYC with SHA-NI):
    /// decides when the last few busy lanes are cheaper to finish one by one.
    pub(super) const LANES_COST_IN_BLOCKS: usize = 5;

    /// `sha256_many` on the AVX-512 path. Every lane holds a message; when a
    /// lane's message is done its digest is written and the next message of
    /// the batch takes the lane. Once the batch has no message left to load
    /// and the few lanes still busy would cost more in 16-lane compressions
    /// than hashing their messages again with `sha2`, they go to `sha2`.
    ///
    /// The per-lane bookkeeping is kept free of branches that depend on the
    /// lengths (a block pointer that jumps to the tail with a select, one
    /// mask of the finished lanes): with mixed lengths such branches
    /// mispredict, and cost about a quarter of the throughput.
    ///
    /// `lanes_cost` is [`LANES_COST_IN_BLOCKS`]; tests set it to 0 to keep
    /// every message in the lanes. `FEWEST_OPS` picks the form of the rounds
    /// ([`compress`], [`fewest_ops`]).
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) fn many<const FEWEST_OPS: bool>(
        msgs: &[&[u8]],
        out: &mut [[u8; 32]],
        lanes_cost: usize,
    ) {
        assert_eq!(msgs.len(), out.len());
        if msgs.len() < LANES {
            // Fewer messages than lanes: the same choice as at the end of a
            // batch, before setting anything up.
            let blocks = |msg: &&[u8]| (msg.len() + 9).div_ceil(64);
            let compressions = msgs.iter().map(blocks).max().unwrap_or(0);
            if msgs.iter().map(blocks).sum::<usize>() < compressions * lanes_cost {
                super::one_by_one(msgs, out);
                return;
            }
        }
        let mut state = State([[0; LANES]; 8]);
        let mut tails = [[0u8; 128]; LANES];
        // From here on `tails` is only reached through this pointer, so the
        // block pointers derived from it stay valid.
        let tails: *mut [u8; 128] = tails.as_mut_ptr();
        let idle = IDLE_BLOCK.as_ptr();
        // Per lane: the block it compresses next; the address after its
        // message's last whole block, where it jumps to `jump` (its tail);
        // and the message's index in the batch.
        let mut cur = [idle; LANES];
        let mut switch = [idle.wrapping_add(64); LANES];
        let mut jump = [idle; LANES];
        let mut index = [0usize; LANES];
        // Blocks left per lane, and the lanes that hold a message.
        let mut left = _mm512_setzero_si512();
        let mut active: __mmask16 = 0;
        let mut next = 0;

        // Puts the next message of the batch (if any) in `lane`; hashes the
        // ones too long for a lane's counter on the way.
        macro_rules! start {
            ($lane:expr) => {{
                let lane: usize = $lane;
                while next < msgs.len() && msgs[next].len() >= LANE_MAX_LEN {
                    out[next] = Sha256::digest(msgs[next]).into();
                    next += 1;
                }
                if let Some(&msg) = msgs.get(next) {
                    if let Some(ahead) = msgs.get(next + PREFETCH_AHEAD) {
                        prefetch(ahead);
                    }
                    let tail = tails.wrapping_add(lane);
                    // SAFETY: `tail` is lane `lane`'s buffer in `tails`, in
                    // bounds and alive; no reference to it is held (the lane
                    // pointers into it are raw and not used meanwhile).
                    let tail_blocks = fill_tail(msg, unsafe { &mut *tail });
                    let whole = msg.len() / 64 * 64;
                    let tail = tail.cast_const().cast::<u8>();
                    if whole == 0 {
                        // Never equal to a block pointer: straight to the tail.
                        cur[lane] = tail;
                        switch[lane] = core::ptr::null();
                    } else {
                        cur[lane] = msg.as_ptr();
                        switch[lane] = msg.as_ptr().wrapping_add(whole);
                    }
                    jump[lane] = tail;
                    index[lane] = next;
                    let blocks = whole / 64 + tail_blocks;
                    left = _mm512_mask_set1_epi32(left, 1 << lane, blocks as i32);
                    active |= 1 << lane;
                    state.reset(lane);
                    next += 1;
                } else {
                    cur[lane] = idle;
                    switch[lane] = idle.wrapping_add(64);
                    jump[lane] = idle;
                    active &= !(1 << lane);
                }
            }};
        }

        #[cfg(test)]
        super::tests::LANE_BATCHES.with(|n| n.set(n.get() + 1));
        for msg in msgs.iter().take(PREFETCH_AHEAD) {
            prefetch(msg);
        }
        for lane in 0..LANES {
            start!(lane);
        }
        while active != 0 {
            if next == msgs.len()
                && active != u16::MAX
                && finish_one_by_one(msgs, out, &index, active, left, lanes_cost)
            {
                return;
            }
            // SAFETY: each `cur[i]` points at 64 readable bytes: a whole
            // block of lane i's message (before `switch[i]`), a block of its
            // tail buffer (alive, and not written during `compress`), or
            // `IDLE_BLOCK`.
            unsafe { compress::<FEWEST_OPS>(&mut state, &cur) };
            // Next blocks. `n` only equals `switch[i]` at the end of the
            // message's whole blocks: a pointer into a tail buffer (ours)
            // cannot be one into or just past a caller's message.
            for i in 0..LANES {
                let n = cur[i].wrapping_add(64);
                cur[i] = if n == switch[i] { jump[i] } else { n };
            }
            left = _mm512_sub_epi32(left, _mm512_set1_epi32(1));
            let mut done = _mm512_mask_cmpeq_epi32_mask(active, left, _mm512_setzero_si512());
            while done != 0 {
                let lane = done.trailing_zeros() as usize;
                done &= done - 1;
                out[index[lane]] = state.digest(lane);
                start!(lane);
            }
        }
    }

    /// When the batch has no message left to load: if the busy lanes would
    /// cost more as 16-lane compressions than their messages hashed again
    /// with `sha2`, hashes them so and returns true.
    #[target_feature(enable = "avx512f,avx512bw")]
    fn finish_one_by_one(
        msgs: &[&[u8]],
        out: &mut [[u8; 32]],
        index: &[usize; LANES],
        active: __mmask16,
        left: __m512i,
        lanes_cost: usize,
    ) -> bool {
        let busy = || (0..LANES).filter(|lane| active & (1 << lane) != 0);
        let compressions = _mm512_mask_reduce_max_epu32(active, left) as usize;
        let blocks: usize = busy()
            .map(|lane| (msgs[index[lane]].len() + 9).div_ceil(64))
            .sum();
        if blocks >= compressions * lanes_cost {
            return false;
        }
        for lane in busy() {
            out[index[lane]] = Sha256::digest(msgs[index[lane]]).into();
        }
        true
    }

    /// Whether this CPU runs the rounds faster in their form with the fewest
    /// operations (`compress::<true>`) than in the one with the shortest
    /// dependency chains (`compress::<false>`); see [`compress`]. Intel's
    /// cores with AVX-512 issue 512-bit integer operations on two ports, with
    /// one-cycle adds: the rounds are bound by how many operations they issue,
    /// and 17 a round instead of 19 was 6-7 % faster on a Xeon (family 6 model
    /// 167: 151-152 → 141-146 ns a message in the `sha256_lanes` example).
    /// AMD's Zen 4 (family 25) splits each 512-bit operation in two 256-bit
    /// halves: also bound by the operations, 3-4 % faster with the fewest
    /// (EPYC family 25 model 17: 2 800 → 2 900 MB/s mixed, 2 660 → 2 770 MB/s
    /// at 400 bytes). AMD's Zen 5 (family 26) has four 512-bit pipes and
    /// two-cycle adds: bound by the chains, where the grouping below was 1.25
    /// times faster than one long chain. Detected once (CPUID's vendor string
    /// and family), cached. Not measured: Zen 5's mobile parts (family 26,
    /// 512-bit operations in two halves, likely better with the fewest) and
    /// other vendors' AVX-512 cores (the fewest). Either form is exact (the
    /// tests hold both to `sha2`); only the speed depends on the choice.
    pub(super) fn fewest_ops() -> bool {
        static FEWEST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *FEWEST.get_or_init(|| {
            // Leaf 0: the vendor string in EBX, EDX, ECX.
            let id = __cpuid(0);
            let vendor = [id.ebx, id.edx, id.ecx].map(u32::to_le_bytes);
            vendor.concat() != b"AuthenticAMD" || amd_family(__cpuid(1).eax) < 0x1A
        })
    }

    /// The family CPUID leaf 1 reports in EAX: the base family, plus the
    /// extended family when the base is 0xF (as AMD's since the K8 are).
    pub(super) fn amd_family(eax: u32) -> u32 {
        let base = (eax >> 8) & 0xF;
        if base == 0xF {
            base + ((eax >> 20) & 0xFF)
        } else {
            base
        }
    }

    /// One SHA-256 compression in each of the 16 lanes: lane i absorbs the
    /// 64 bytes at `blocks[i]` into its state.
    ///
    /// `FEWEST_OPS` (Intel, AMD's Zen 4: [`fewest_ops`]): each round's sums
    /// in the fewest adds, 17 operations a round. Otherwise (AMD's Zen 5):
    /// two more adds a round keep each state word's chain at three
    /// operations (below).
    ///
    /// # Safety
    ///
    /// Each pointer must be valid for reading 64 bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn compress<const FEWEST_OPS: bool>(state: &mut State, blocks: &[*const u8; LANES]) {
        // Load the 16 blocks as rows, then transpose so that register j holds
        // word j of every lane's block.
        let mut r = [_mm512_setzero_si512(); LANES];
        for (row, block) in r.iter_mut().zip(blocks) {
            // SAFETY: the caller guarantees 64 readable bytes at `block`,
            // exactly one unaligned 512-bit load.
            *row = unsafe { _mm512_loadu_si512(block.cast()) };
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
        // are bound by the dependency chains through `e` and `a`, so there
        // (`!FEWEST_OPS`) the sums are grouped to keep three operations
        // (rotate, ternary logic, add) on each chain per round and everything
        // else off them. `pin!` keeps that grouping: LLVM otherwise
        // reassociates the adds into one long chain (1.25 times slower end to
        // end). With `FEWEST_OPS` the chain through `e` is four operations,
        // still shorter than what two ports take to issue a round's 17.
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
                let t1 = pin!(_mm512_add_epi32(s1, pin!(_mm512_add_epi32(ch, hkw))));
                if FEWEST_OPS {
                    $d = _mm512_add_epi32($d, t1);
                    $h = _mm512_add_epi32(t1, pin!(_mm512_add_epi32(s0, maj)));
                } else {
                    let hkwd = pin!(_mm512_add_epi32(hkw, $d));
                    $d = _mm512_add_epi32(s1, pin!(_mm512_add_epi32(ch, hkwd)));
                    $h = _mm512_add_epi32(s0, pin!(_mm512_add_epi32(t1, maj)));
                }
            }};
        }
        // W[t + 16], in place of W[t] in the ring of 16 words.
        macro_rules! schedule {
            ($j:expr) => {{
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
            }};
        }
        macro_rules! no_schedule {
            ($j:expr) => {};
        }
        // Eight rounds from word `$o` of the ring (the state names rotate
        // back to where they started), each followed by `$sched` of the word
        // it used: `schedule` replaces it with the word 16 rounds later.
        macro_rules! eight {
            ($k:expr, $o:expr, $sched:ident) => {{
                round!($k[$o], w[$o], a, b, c, d, e, f, g, h);
                $sched!($o);
                round!($k[$o + 1], w[$o + 1], h, a, b, c, d, e, f, g);
                $sched!($o + 1);
                round!($k[$o + 2], w[$o + 2], g, h, a, b, c, d, e, f);
                $sched!($o + 2);
                round!($k[$o + 3], w[$o + 3], f, g, h, a, b, c, d, e);
                $sched!($o + 3);
                round!($k[$o + 4], w[$o + 4], e, f, g, h, a, b, c, d);
                $sched!($o + 4);
                round!($k[$o + 5], w[$o + 5], d, e, f, g, h, a, b, c);
                $sched!($o + 5);
                round!($k[$o + 6], w[$o + 6], c, d, e, f, g, h, a, b);
                $sched!($o + 6);
                round!($k[$o + 7], w[$o + 7], b, c, d, e, f, g, h, a);
                $sched!($o + 7);
            }};
        }

        // Rounds 0 to 47 compute the schedule words for 16 rounds later.
        for k in K[..48].chunks_exact(16) {
            eight!(k, 0, schedule);
            eight!(k, 8, schedule);
        }
        eight!(K[48..], 0, no_schedule);
        eight!(K[48..], 8, no_schedule);

        for (row, (old, new)) in state
            .0
            .iter_mut()
            .zip(s.into_iter().zip([a, b, c, d, e, f, g, h]))
        {
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

/// SHA-256 with the SHA extensions (SHA-NI), [`shani::WAYS`] messages
/// interleaved: the path where the CPU has them but not AVX-512 (AMD Zen 1
/// to 4; Intel's cores with SHA-NI and without AVX-512). One message at a
/// time (`sha2`) is bound by the latency of `sha256rnds2`, each pair of
/// rounds waiting on the last; a second, independent message fills the
/// gaps. Figures in the module's documentation.
#[cfg(target_arch = "x86_64")]
pub(crate) mod shani {
    use core::arch::x86_64::*;

    use super::{IV, K};

    /// Messages in flight at once.
    pub(crate) const WAYS: usize = 2;

    /// Whether this CPU has what [`many`] is compiled for.
    pub(crate) fn available() -> bool {
        std::is_x86_feature_detected!("sha")
            && std::is_x86_feature_detected!("sse4.1")
            && std::is_x86_feature_detected!("ssse3")
    }

    /// A state in the form `sha256rnds2` takes: (ABEF, CDGH).
    #[derive(Clone, Copy)]
    struct State(__m128i, __m128i);

    /// Byte order of each 32-bit word reversed (message words are big-endian).
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn bswap32() -> __m128i {
        _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203)
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn initial() -> State {
        // SAFETY: `IV` is 8 u32s: two 128-bit loads in bounds.
        let (dcba, efgh) = unsafe {
            (
                _mm_loadu_si128(IV.as_ptr().cast()),
                _mm_loadu_si128(IV.as_ptr().add(4).cast()),
            )
        };
        let cdab = _mm_shuffle_epi32::<0xb1>(dcba);
        let hgfe = _mm_shuffle_epi32::<0x1b>(efgh);
        State(
            _mm_alignr_epi8::<8>(cdab, hgfe),
            _mm_blend_epi16::<0xf0>(hgfe, cdab),
        )
    }

    /// The digest of a finished state.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn digest(s: State) -> [u8; 32] {
        let feba = _mm_shuffle_epi32::<0x1b>(s.0);
        let dchg = _mm_shuffle_epi32::<0xb1>(s.1);
        let dcba = _mm_shuffle_epi8(_mm_blend_epi16::<0xf0>(feba, dchg), bswap32());
        let hgef = _mm_shuffle_epi8(_mm_alignr_epi8::<8>(dchg, feba), bswap32());
        let mut out = [0u8; 32];
        // SAFETY: `out` is 32 writable bytes: two 128-bit stores.
        unsafe {
            _mm_storeu_si128(out.as_mut_ptr().cast(), dcba);
            _mm_storeu_si128(out.as_mut_ptr().add(16).cast(), hgef);
        }
        out
    }

    /// One compression in each of `N` states, interleaved round by round:
    /// state i absorbs the 64 bytes at `blocks[i]`.
    ///
    /// # Safety
    ///
    /// Each pointer must be valid for reading 64 bytes.
    #[inline]
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn compress<const N: usize>(s: &mut [State; N], blocks: [*const u8; N]) {
        let mask = bswap32();
        let saved = *s;
        let mut w = [[_mm_setzero_si128(); 4]; N];
        for (n, block) in blocks.iter().enumerate() {
            for (j, word) in w[n].iter_mut().enumerate() {
                // SAFETY: the caller guarantees 64 readable bytes at `block`.
                *word =
                    _mm_shuffle_epi8(unsafe { _mm_loadu_si128(block.add(16 * j).cast()) }, mask);
            }
        }
        // Four rounds of every state, written out sixteen times (not a loop:
        // the message words then stay in registers).
        macro_rules! four_rounds {
            ($i:literal) => {{
                // SAFETY: `K` is 64 u32s and `$i` is below 16.
                let k = unsafe { _mm_loadu_si128(K.as_ptr().add(4 * $i).cast()) };
                for n in 0..N {
                    if $i >= 4 {
                        // Words 4i..4i+3 from the sixteen before them, in
                        // place of words 4i-16..4i-13.
                        let w0 = w[n][$i % 4];
                        let w1 = w[n][($i + 1) % 4];
                        let w2 = w[n][($i + 2) % 4];
                        let w3 = w[n][($i + 3) % 4];
                        let t = _mm_add_epi32(
                            _mm_sha256msg1_epu32(w0, w1),
                            _mm_alignr_epi8::<4>(w3, w2),
                        );
                        w[n][$i % 4] = _mm_sha256msg2_epu32(t, w3);
                    }
                    let kw = _mm_add_epi32(w[n][$i % 4], k);
                    let State(abef, cdgh) = s[n];
                    let cdgh = _mm_sha256rnds2_epu32(cdgh, abef, kw);
                    let abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32::<0x0e>(kw));
                    s[n] = State(abef, cdgh);
                }
            }};
        }
        four_rounds!(0);
        four_rounds!(1);
        four_rounds!(2);
        four_rounds!(3);
        four_rounds!(4);
        four_rounds!(5);
        four_rounds!(6);
        four_rounds!(7);
        four_rounds!(8);
        four_rounds!(9);
        four_rounds!(10);
        four_rounds!(11);
        four_rounds!(12);
        four_rounds!(13);
        four_rounds!(14);
        four_rounds!(15);
        for (st, old) in s.iter_mut().zip(saved) {
            *st = State(_mm_add_epi32(st.0, old.0), _mm_add_epi32(st.1, old.1));
        }
    }

    /// A message in a slot: the block it compresses next, where its whole
    /// blocks end (then it goes on in `tail`), and its padded final block or
    /// two.
    struct Slot {
        cur: *const u8,
        switch: *const u8,
        left: usize,
        index: usize,
        tail: [u8; 128],
    }

    impl Slot {
        /// Takes message `index`, `msg`.
        fn load(&mut self, msg: &[u8], index: usize) {
            let whole = msg.len() / 64 * 64;
            let rest = &msg[whole..];
            self.tail = [0; 128];
            self.tail[..rest.len()].copy_from_slice(rest);
            self.tail[rest.len()] = 0x80;
            let tail_blocks = 1 + usize::from(rest.len() >= 56);
            let bits = (msg.len() as u64).wrapping_mul(8);
            self.tail[tail_blocks * 64 - 8..tail_blocks * 64].copy_from_slice(&bits.to_be_bytes());
            self.left = whole / 64 + tail_blocks;
            self.index = index;
            if whole == 0 {
                self.cur = self.tail.as_ptr();
                self.switch = core::ptr::null();
            } else {
                self.cur = msg.as_ptr();
                self.switch = msg.as_ptr().wrapping_add(whole);
            }
        }

        /// Moves on to the next block; true when the message is done.
        fn advance(&mut self) -> bool {
            self.left -= 1;
            let n = self.cur.wrapping_add(64);
            // `n` equals `switch` only at the end of the message's whole
            // blocks (a pointer into `tail` is never one into the message).
            self.cur = if n == self.switch {
                self.tail.as_ptr()
            } else {
                n
            };
            self.left == 0
        }
    }

    /// `super::sha256_many` on the SHA-NI path: [`WAYS`] messages in
    /// flight; when one is done its digest is written and the next message
    /// of the batch takes its slot. Once the batch is drained, the messages
    /// still in flight finish one at a time.
    ///
    /// The slots stay where they are while in use: a slot's `cur` may point
    /// into its own `tail`.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub(crate) fn many(msgs: &[&[u8]], out: &mut [[u8; 32]]) {
        assert_eq!(msgs.len(), out.len());
        if msgs.len() < WAYS {
            super::one_by_one(msgs, out);
            return;
        }
        let mut slots: [Slot; WAYS] = core::array::from_fn(|_| Slot {
            cur: core::ptr::null(),
            switch: core::ptr::null(),
            left: 0,
            index: 0,
            tail: [0; 128],
        });
        #[cfg(test)]
        super::tests::SHANI_BATCHES.with(|n| n.set(n.get() + 1));
        let mut states = [initial(); WAYS];
        for (i, slot) in slots.iter_mut().enumerate() {
            slot.load(msgs[i], i);
        }
        let mut next = WAYS;
        loop {
            let blocks: [*const u8; WAYS] = core::array::from_fn(|i| slots[i].cur);
            // SAFETY: each `cur` points at 64 readable bytes: a whole block
            // of its slot's message (before `switch`) or a block of its
            // `tail` (not written during `compress`).
            unsafe { compress(&mut states, blocks) };
            let mut drained = false;
            for (slot, state) in slots.iter_mut().zip(states.iter_mut()) {
                if slot.advance() {
                    out[slot.index] = digest(*state);
                    if let Some(&msg) = msgs.get(next) {
                        slot.load(msg, next);
                        *state = initial();
                        next += 1;
                    } else {
                        drained = true;
                    }
                }
            }
            if drained {
                for (slot, state) in slots.iter_mut().zip(states) {
                    finish(slot, state, out);
                }
                return;
            }
        }
    }

    /// Runs `slot`'s message to its end alone, unless it is done already
    /// (its digest written).
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn finish(slot: &mut Slot, state: State, out: &mut [[u8; 32]]) {
        if slot.left == 0 {
            return;
        }
        let mut one = [state];
        while slot.left > 0 {
            // SAFETY: as in `many`.
            unsafe { compress(&mut one, [slot.cur]) };
            slot.advance();
        }
        out[slot.index] = digest(one[0]);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Batches that went through the lanes on this thread.
        pub(super) static LANE_BATCHES: Cell<usize> = const { Cell::new(0) };
        /// Batches that went through the interleaved SHA-NI path on this thread.
        pub(crate) static SHANI_BATCHES: Cell<usize> = const { Cell::new(0) };
    }

    /// The families `lanes::fewest_ops` tells apart, from the EAX their
    /// CPUID leaf 1 reports: Zen 3 and Zen 4 are family 25, Zen 5 is 26.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn amd_families_decode_from_cpuid() {
        assert_eq!(lanes::amd_family(0x00A0_0F11), 0x19, "EPYC 7003 (Zen 3)");
        assert_eq!(lanes::amd_family(0x00A1_0F11), 0x19, "EPYC 9004 (Zen 4)");
        assert_eq!(lanes::amd_family(0x00B0_0F21), 0x1A, "EPYC 9005 (Zen 5)");
        assert_eq!(
            lanes::amd_family(0x0000_0F4A),
            0x0F,
            "a K8: no extended family"
        );
        assert_eq!(lanes::amd_family(0x0005_06F1), 0x06, "an Intel family 6");
    }

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn bytes(&mut self, len: usize) -> Vec<u8> {
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    fn sha2(msg: &[u8]) -> [u8; 32] {
        Sha256::digest(msg).into()
    }

    /// Hashes `msgs` with `sha256_many` and, where the CPU has them, with
    /// every message kept in the AVX-512 lanes to the end and with the
    /// interleaved SHA-NI path; each against `sha2`.
    fn check(msgs: &[&[u8]]) {
        let mut out = vec![[0u8; 32]; msgs.len()];
        sha256_many(msgs, &mut out);
        compare(msgs, &out, "sha256_many");
        #[cfg(target_arch = "x86_64")]
        if fast_path_available() {
            let mut out = vec![[0u8; 32]; msgs.len()];
            // SAFETY: the CPU has avx512f and avx512bw (checked above).
            unsafe { lanes::many::<false>(msgs, &mut out, 0) };
            compare(msgs, &out, "lanes only, short chains");
            let mut out = vec![[0u8; 32]; msgs.len()];
            // SAFETY: as above.
            unsafe { lanes::many::<true>(msgs, &mut out, 0) };
            compare(msgs, &out, "lanes only, fewest operations");
        }
        #[cfg(target_arch = "x86_64")]
        if shani::available() {
            let mut out = vec![[0u8; 32]; msgs.len()];
            // SAFETY: the CPU has the SHA extensions, SSSE3 and SSE4.1
            // (checked above).
            unsafe { shani::many(msgs, &mut out) };
            compare(msgs, &out, "SHA-NI interleaved");
        }
    }

    fn compare(msgs: &[&[u8]], out: &[[u8; 32]], path: &str) {
        for (i, (msg, digest)) in msgs.iter().zip(out).enumerate() {
            assert_eq!(
                *digest,
                sha2(msg),
                "{path}: message {i} of {}, {} bytes",
                msgs.len(),
                msg.len()
            );
        }
    }

    /// `count` messages of random lengths below `max_len` and random
    /// contents, at random offsets (so at any alignment) in one buffer.
    fn random_batch(
        rng: &mut XorShift,
        count: usize,
        max_len: usize,
    ) -> (Vec<u8>, Vec<(usize, usize)>) {
        let spans: Vec<(usize, usize)> = (0..count)
            .map(|_| (rng.below(64), rng.below(max_len)))
            .collect();
        let mut data = Vec::new();
        let spans = spans
            .into_iter()
            .map(|(gap, len)| {
                data.extend(rng.bytes(gap));
                let start = data.len();
                data.extend(rng.bytes(len));
                (start, len)
            })
            .collect();
        (data, spans)
    }

    fn slices<'a>(data: &'a [u8], spans: &[(usize, usize)]) -> Vec<&'a [u8]> {
        spans
            .iter()
            .map(|&(start, len)| &data[start..start + len])
            .collect()
    }

    /// Hashes a batch of 100 mixed messages with `sha256_many`, checks the
    /// digests, and asserts that the batch went through the path that
    /// counts its batches in `counter`; returns the count after.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn one_batch_through(counter: &'static std::thread::LocalKey<Cell<usize>>, seed: u64) -> usize {
        let mut rng = XorShift(seed);
        let (data, spans) = random_batch(&mut rng, 100, 600);
        let msgs = slices(&data, &spans);
        let mut out = vec![[0u8; 32]; msgs.len()];
        let before = counter.with(Cell::get);
        sha256_many(&msgs, &mut out);
        assert_eq!(counter.with(Cell::get), before + 1);
        compare(&msgs, &out, "sha256_many");
        before + 1
    }

    #[test]
    fn fast_path_is_taken_when_the_cpu_has_avx512() {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw") {
            assert!(fast_path_available());
            one_batch_through(&LANE_BATCHES, 7);
            return;
        }
        assert!(!fast_path_available());
    }

    #[test]
    fn sha_ni_path_is_taken_when_the_cpu_has_it_and_not_avx512() {
        #[cfg(target_arch = "x86_64")]
        if !fast_path_available() && shani::available() {
            let after = one_batch_through(&SHANI_BATCHES, 8);
            // A single message is not worth the slots: `sha2` hashes it.
            let mut out = [[0u8; 32]];
            sha256_many(&[b"abc".as_slice()], &mut out);
            assert_eq!(SHANI_BATCHES.with(Cell::get), after);
            compare(&[b"abc".as_slice()], &out, "sha256_many");
        }
    }

    #[test]
    fn every_length_on_its_own() {
        let mut rng = XorShift(1);
        let data = rng.bytes(1100);
        for len in 0..=1100 {
            check(&[&data[..len]]);
        }
    }

    #[test]
    fn every_length_in_one_batch() {
        let mut rng = XorShift(2);
        let data = rng.bytes(1100);
        let msgs: Vec<&[u8]> = (0..=1100).map(|len| &data[..len]).collect();
        check(&msgs);
        // And from the longest down, so that short and long share the lanes.
        let reversed: Vec<&[u8]> = msgs.iter().rev().copied().collect();
        check(&reversed);
    }

    #[test]
    fn batches_of_every_size_with_mixed_lengths() {
        let mut rng = XorShift(3);
        for count in [0, 1, 3, 15, 16, 17, 31, 33, 1000] {
            let (data, spans) = random_batch(&mut rng, count, 2000);
            check(&slices(&data, &spans));
        }
    }

    #[test]
    fn messages_of_several_kilobytes_among_short_ones() {
        let mut rng = XorShift(4);
        let (data, spans) = random_batch(&mut rng, 200, 10_000);
        let mut spans = spans;
        // Every fifth one short, so lanes turn over while others are long.
        for span in spans.iter_mut().step_by(5) {
            span.1 %= 100;
        }
        check(&slices(&data, &spans));
    }

    #[test]
    fn padding_boundaries() {
        // 55 bytes leave room for 0x80 and the length in the last block; 56
        // to 63 need another block; the same one block further on.
        let mut rng = XorShift(5);
        let data = rng.bytes(128);
        let lens = [55, 56, 63, 64, 119, 120, 127, 128];
        let msgs: Vec<&[u8]> = lens.iter().map(|&len| &data[..len]).collect();
        check(&msgs);
        // Also with the lanes full, each boundary length in several lanes.
        let many: Vec<&[u8]> = msgs.iter().cycle().take(40).copied().collect();
        check(&many);
    }

    #[test]
    fn the_fallback_gives_the_same_digests() {
        let mut rng = XorShift(6);
        let (data, spans) = random_batch(&mut rng, 300, 1500);
        let msgs = slices(&data, &spans);
        let mut fast = vec![[0u8; 32]; msgs.len()];
        sha256_many(&msgs, &mut fast);
        let mut slow = vec![[1u8; 32]; msgs.len()];
        one_by_one(&msgs, &mut slow);
        assert_eq!(fast, slow);
        compare(&msgs, &slow, "one by one");
    }

    #[test]
    fn identical_messages_get_identical_digests() {
        let msgs = [b"abc".as_slice(); 20];
        let mut out = [[0u8; 32]; 20];
        sha256_many(&msgs, &mut out);
        let abc = [
            0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
            0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
            0xf2, 0x00, 0x15, 0xad,
        ];
        assert!(out.iter().all(|d| *d == abc));
    }

    #[test]
    #[should_panic(expected = "3 messages but 2 digests")]
    fn lengths_must_agree() {
        let msgs = [b"a".as_slice(), b"b", b"c"];
        sha256_many(&msgs, &mut [[0u8; 32]; 2]);
    }
}
