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
}

impl Finding {
    pub fn new(code: &'static str, key: &str, detail: String) -> Finding {
        Finding {
            code,
            key: key.to_owned(),
            seq: None,
            event_id: None,
            detail,
        }
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
        }
    }
}
