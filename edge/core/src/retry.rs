//! Named, bounded retry policies for the saga's steps.
//!
//! A transient fault (a lost reply, an unreachable object, a runtime restart)
//! is retried with capped exponential backoff; the jitter is a pure function
//! of the transfer id and the attempt, so a simulation replays exactly and
//! many transfers stalled by one fault do not retry in lockstep.
//!
//! Only the reserve step may give up: before a hold exists, abandoning the
//! transfer is safe (the compensation releases whatever may have been
//! reserved, and the release tombstone refuses a late reserve). Past the
//! point of no return (credit, capture) and for the compensation itself
//! (release), the step is retried at the capped delay until it lands; a
//! transfer stuck there is reported as dangling once past its deadline, never
//! abandoned.

/// One step's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub name: &'static str,
    pub delay_ms_initial: u64,
    pub delay_ms_max: u64,
    /// Attempts after which the step escalates; `None`: never (retried at the cap).
    pub attempts_max: Option<u32>,
}

pub const RESERVE: RetryPolicy = RetryPolicy {
    name: "reserve",
    delay_ms_initial: 100,
    delay_ms_max: 10_000,
    attempts_max: Some(8),
};
pub const CREDIT: RetryPolicy = RetryPolicy {
    name: "credit",
    delay_ms_initial: 100,
    delay_ms_max: 60_000,
    attempts_max: None,
};
pub const CAPTURE: RetryPolicy = RetryPolicy {
    name: "capture",
    delay_ms_initial: 100,
    delay_ms_max: 60_000,
    attempts_max: None,
};
pub const RELEASE: RetryPolicy = RetryPolicy {
    name: "release",
    delay_ms_initial: 100,
    delay_ms_max: 60_000,
    attempts_max: None,
};

impl RetryPolicy {
    /// Delay before attempt `attempt + 1` (attempt ≥ 1 failed so far):
    /// "equal jitter", half fixed and half pseudo-random, capped.
    pub fn delay_ms(&self, attempt: u32, jitter_seed: u64) -> u64 {
        let exp = attempt.saturating_sub(1).min(32);
        let base = self
            .delay_ms_initial
            .saturating_mul(1u64 << exp)
            .min(self.delay_ms_max);
        let half = base / 2;
        half + splitmix64(jitter_seed ^ u64::from(attempt)) % (half + 1)
    }

    pub fn exhausted(&self, attempt: u32) -> bool {
        self.attempts_max.is_some_and(|max| attempt >= max)
    }
}

/// A well-mixed 64-bit hash (SplitMix64's finaliser).
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stay_within_the_cap() {
        for p in [RESERVE, CREDIT, CAPTURE, RELEASE] {
            let mut prev_floor = 0;
            for attempt in 1..200 {
                let d = p.delay_ms(attempt, 42);
                assert!(d <= p.delay_ms_max, "{} attempt {attempt}: {d}", p.name);
                let floor = (p.delay_ms_initial << (attempt - 1).min(32)).min(p.delay_ms_max) / 2;
                assert!(
                    d >= floor && floor >= prev_floor,
                    "{} attempt {attempt}",
                    p.name
                );
                prev_floor = floor;
            }
        }
        assert!(RESERVE.exhausted(8) && !RESERVE.exhausted(7));
        assert!(!CAPTURE.exhausted(u32::MAX));
    }
}
