//! Throughput of `sha256_many` against `sha2::Sha256::digest` per message, on
//! 200 000 messages the size of canonical events.
//!
//! cargo run --release -p ledger-events --example sha256_lanes

use std::hint::black_box;
use std::time::{Duration, Instant};

use ledger_events::sha256_lanes::sha256_many;
use sha2::{Digest, Sha256};

const MESSAGES: usize = 200_000;
const REPETITIONS: usize = 5;

/// How long each message is.
type Length = fn(&mut XorShift) -> usize;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The messages back to back in one buffer, and their lengths.
fn messages(rng: &mut XorShift, len: Length) -> (Vec<u8>, Vec<usize>) {
    let lens: Vec<usize> = (0..MESSAGES).map(|_| len(rng)).collect();
    let data = (0..lens.iter().sum::<usize>())
        .map(|_| b' ' + (rng.next() % 95) as u8)
        .collect();
    (data, lens)
}

fn fastest(mut run: impl FnMut()) -> Duration {
    (0..REPETITIONS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .min()
        .expect("at least one repetition")
}

fn report(name: &str, bytes: usize, time: Duration) -> f64 {
    let mb_s = bytes as f64 / time.as_secs_f64() / 1e6;
    let ns = time.as_nanos() as f64 / MESSAGES as f64;
    println!("  {name:<28} {mb_s:>8.0} MB/s {ns:>8.1} ns/message");
    mb_s
}

fn main() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mixes: [(&str, Length); 2] = [
        ("mixed 250-600 bytes", |rng| {
            250 + (rng.next() % 351) as usize
        }),
        ("exactly 400 bytes", |_| 400),
    ];
    println!(
        "{MESSAGES} messages, fastest of {REPETITIONS}; avx512f+avx512bw: {}, sha: {}",
        cfg!(target_arch = "x86_64") && avx512(),
        cfg!(target_arch = "x86_64") && shani()
    );
    for (name, len) in mixes {
        let (data, lens) = messages(&mut rng, len);
        let mut msgs = Vec::with_capacity(MESSAGES);
        let mut at = 0;
        for len in &lens {
            msgs.push(&data[at..at + len]);
            at += len;
        }
        let bytes = data.len();
        println!("{name} ({:.1} MB):", bytes as f64 / 1e6);

        let mut want = vec![[0u8; 32]; MESSAGES];
        let sha2 = fastest(|| {
            for (msg, digest) in black_box(&msgs).iter().zip(want.iter_mut()) {
                *digest = Sha256::digest(msg).into();
            }
            black_box(&want);
        });
        let mut got = vec![[0u8; 32]; MESSAGES];
        let many = fastest(|| {
            sha256_many(black_box(&msgs), &mut got);
            black_box(&got);
        });
        assert!(got == want, "sha256_many disagrees with sha2");

        let a = report("sha2, one message at a time", bytes, sha2);
        let b = report("sha256_many", bytes, many);
        println!("  speed-up {:.2}x", b / a);
    }
}

fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn shani() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("sha")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
