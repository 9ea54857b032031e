//! What a check reports: one [`Finding`] per offending row or group of rows.

use serde::Serialize;

/// One offending row (or group of rows) of one check.
///
/// `key` is what the finding is about: a stream key (an account or a
/// transfer), a transfer id, or a currency; `seq` and `event_id` name the row
/// when there is one. `code` is a stable snake_case word tests and alerts
/// match on; `detail` is for humans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    pub detail: String,
    /// Set on a finding that rests on a row being *absent* (a missing seq,
    /// a saga step not in the lake), which rows still in delivery could
    /// explain: when the youngest row it rests on was committed (ms since
    /// the epoch). A run leaves it pending while that is within its settle
    /// window (`crate::settle`). A finding on a row that is wrong has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub youngest_ms: Option<i64>,
    /// A `seq_gap` in an account stream: how much the missing events moved
    /// the balance (the row after the gap's balance before its own effect,
    /// less the row before's), which global conservation cannot see while
    /// the gap is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_balance: Option<i64>,
    /// A `hash_mismatch`: what the lake owes of the row where it is judged
    /// from a checkpoint (`crate::unproved`): `None` until the run marks it
    /// (or in a checkpoint written before marks: its recorded hash). The
    /// checkpoint keeps it; reports do not (a proof without a checkpoint
    /// cannot know it, and a resumed run's report is a full proof's).
    #[serde(skip)]
    pub hash_owed: Option<crate::unproved::Owes>,
}

impl Finding {
    pub fn new(code: &'static str, key: &str, detail: String) -> Finding {
        Finding {
            code,
            key: key.to_owned(),
            seq: None,
            event_id: None,
            detail,
            youngest_ms: None,
            missing_balance: None,
            hash_owed: None,
        }
    }

    /// Marks a finding delivery lag could explain, resting on rows the
    /// youngest of which was committed at `youngest_ms`.
    pub fn absence(mut self, youngest_ms: i64) -> Finding {
        self.youngest_ms = Some(youngest_ms);
        self
    }

    pub fn at(mut self, seq: u64, event_id: &str) -> Finding {
        self.seq = Some(seq);
        self.event_id = Some(event_id.to_owned());
        self
    }
}

/// The verdict of one check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// Stable name (`completeness`, `no_overdraft`...).
    pub name: &'static str,
    /// The invariant it proves (`I1`, `I2`, `I4`, `lake`).
    pub invariant: &'static str,
    /// What holding proves, in one sentence.
    pub proves: &'static str,
    pub holds: bool,
    pub violations: usize,
    /// Every offending row, in a deterministic order.
    pub findings: Vec<Finding>,
    /// Findings delivery lag could still explain (rows younger than the
    /// run's settle window): not violations yet ([`CheckResult::settle`]).
    pub pending: Vec<Finding>,
}

/// The settle window of a run (docs/RECONCILE.md, "Delivery lag"): a row
/// committed within `settle_ms` before `now_ms` is young, a finding that
/// rests on it pending. So is one up to `settle_ms` after `now_ms` (a
/// writer's clock a little ahead of the reconciler's), no later: a row that
/// says it was committed further in the future would otherwise keep the
/// findings resting on it pending until then (years, for a wrong clock), so
/// they decide now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    pub now_ms: i64,
    pub settle_ms: i64,
}

impl Settle {
    pub fn young(self, committed_ms: i64) -> bool {
        committed_ms > self.now_ms.saturating_sub(self.settle_ms)
            && committed_ms <= self.now_ms.saturating_add(self.settle_ms)
    }
}

impl CheckResult {
    pub fn new(
        name: &'static str,
        invariant: &'static str,
        proves: &'static str,
        findings: Vec<Finding>,
    ) -> CheckResult {
        CheckResult {
            name,
            invariant,
            proves,
            holds: findings.is_empty(),
            violations: findings.len(),
            findings,
            pending: Vec::new(),
        }
    }

    /// Moves the findings whose youngest row is young in `window` to
    /// `pending`: a row they miss may still be in delivery. The rest decide
    /// the verdict.
    pub fn settle(&mut self, window: Settle) {
        let (pending, decided) = std::mem::take(&mut self.findings)
            .into_iter()
            .partition(|f| f.youngest_ms.is_some_and(|t| window.young(t)));
        self.findings = decided;
        self.pending = pending;
        self.holds = self.findings.is_empty();
        self.violations = self.findings.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_young_within_the_window_before_now_and_no_further_after() {
        let w = Settle {
            now_ms: 100_000,
            settle_ms: 600,
        };
        let young: Vec<i64> = [99_399, 99_400, 99_401, 100_000, 100_600, 100_601, i64::MAX]
            .into_iter()
            .filter(|&t| w.young(t))
            .collect();
        assert_eq!(young, [99_401, 100_000, 100_600]);
        // A finding resting on a row from far in the future decides now.
        let at = |t| Finding::new("seq_gap", "acme", String::new()).absence(t);
        let mut c = CheckResult::new(
            "completeness",
            "lake",
            "",
            vec![at(100_000), at(4_102_444_800_000)],
        );
        c.settle(w);
        assert_eq!((c.pending.len(), c.violations, c.holds), (1, 1, false));
        assert_eq!(c.findings[0].youngest_ms, Some(4_102_444_800_000));
    }
}
