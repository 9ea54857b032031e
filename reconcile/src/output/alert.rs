//! The alert webhook (`--alert-webhook URL`, `--alert-state FILE`): one JSON
//! POST when the run has a violation the previous run did not have.
//!
//! A violation's fingerprint is its check, code, key, seq and event id (not
//! the human `detail`). The state file holds the fingerprints of the last
//! run's violations. It advances only once the alert is delivered, so an
//! alert that could not be delivered is sent again by the next run, and a
//! run with nothing new (including a clean one) replaces it with the current
//! set (which can only have shrunk), so a violation that was resolved and
//! comes back alerts again. A violation already alerted that a run finds
//! pending (undecided: its row dated ahead of the reconciler's clock comes
//! within the settle window as time passes) is neither resolved nor new: it
//! stays in the state, so it does not alert again when it is decided.
//! Body and state formats: docs/RECONCILE.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::http::{self, RetryPolicy};
use super::rows::{pending_rows, violation_rows, ViolationRow};
use crate::report::Report;

/// Version of the webhook body.
pub const ALERT_VERSION: u32 = 1;
/// Version of the state file.
pub const ALERT_STATE_VERSION: u32 = 1;
/// New violations the body lists in full; more are counted in
/// `new_violations_omitted` (all are in `--violations` / `--json`).
pub const ALERT_ROWS_MAX: usize = 1000;
/// Per attempt, by default (`--alert-timeout`): receivers that open a
/// ticket before they answer take more than a few seconds, and one slower
/// than the timeout acts on every attempt (rev-s51-ops2 F4: 10 s, three
/// pages a night).
pub const ALERT_TIMEOUT_DEFAULT_S: u64 = 30;
/// The longest `--alert-timeout`: three attempts of it, with the waits
/// between them (each at most [`super::http::RETRY_AFTER_MAX`]), stay
/// within 16 minutes.
pub const ALERT_TIMEOUT_MAX_S: u64 = 300;

/// Codes of one event whose detail names its versions' hashes: a
/// `conflict` every version's, a `hash_mismatch` what the row's content
/// hashes to. A new version of an event already reported (a third one, a
/// second tampered copy) is another finding, and alerts as new.
pub const VERSIONS_DESCRIBED: [&str; 2] = ["conflict", "hash_mismatch"];

/// `transfer_conservation`'s per-transfer codes, whose detail describes the
/// transfer's legs on the accounts (no one row shows them).
pub const LEGS_DESCRIBED: [&str; 4] = [
    "captured_legs_mismatch",
    "money_moved_without_capture",
    "debit_before_capture",
    "credit_not_the_transfers",
];

#[derive(Debug, Clone)]
pub struct AlertConfig {
    pub webhook: String,
    pub state: PathBuf,
    pub retry: RetryPolicy,
}

impl AlertConfig {
    /// The config for `--alert-webhook URL --alert-state FILE
    /// --alert-timeout SECONDS`: the default retries, each attempt given
    /// `timeout_s`.
    pub fn new(webhook: String, state: PathBuf, timeout_s: u64) -> AlertConfig {
        AlertConfig {
            webhook,
            state,
            retry: RetryPolicy {
                timeout: std::time::Duration::from_secs(timeout_s),
                ..RetryPolicy::default()
            },
        }
    }

    /// For the run on `lake`: a damaged state file, or one of another
    /// lake, is found before the run, not after it.
    pub fn validate(&self, lake: &str) -> Result<(), String> {
        http::check_url("--alert-webhook", &self.webhook)?;
        read_state(&self.state, lake)?;
        Ok(())
    }
}

/// A violation's identity across runs: the first 128 bits of SHA-256 over
/// the JSON array `[check, code, key, seq, event_id]` (nulls as null), hex;
/// a `not_conserved` finding (one per currency, whatever broke it) adds the
/// part of its difference that is decided (not on rows younger than the
/// settle window, which delivery lag adds and takes away night by night),
/// so a second defect in the same currency alerts as new and the same one
/// does not alert again. A transfer's money-moving finding that names no
/// row ([`LEGS_DESCRIBED`]) adds its detail, which describes the legs (how
/// many debits and credits, which is wrong): a second debit on a failed
/// transfer alerts as new. So does a finding on an event's versions
/// ([`VERSIONS_DESCRIBED`]): a new version is a new finding.
pub fn fingerprint(r: &ViolationRow) -> String {
    let difference = (r.code == "not_conserved")
        .then(|| crate::checks::global_conservation::decided_difference_in(&r.detail))
        .flatten();
    let code = r.code.as_str();
    let legs = ((r.seq.is_none() && LEGS_DESCRIBED.contains(&code))
        || VERSIONS_DESCRIBED.contains(&code))
    .then_some(&r.detail);
    let mut id = serde_json::json!([r.check, r.code, r.key, r.seq, r.event_id]);
    if let (Some(extra), Some(all)) = (
        difference.map(|d| d.to_string()).or(legs.cloned()),
        id.as_array_mut(),
    ) {
        all.push(extra.into());
    }
    let id = id.to_string();
    let digest = Sha256::digest(id.as_bytes());
    ledger_events::event::hex(&digest[..16])
}

/// The state file: the fingerprints of the violations last alerted on or
/// already known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertState {
    pub version: u32,
    pub lake: String,
    pub written_at_ms: i64,
    pub fingerprints: BTreeSet<String>,
}

/// What to send, decided from the report and the previous state alone.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every current violation's fingerprint.
    pub current: BTreeSet<String>,
    /// The next state: `current` and the previous state's violations this
    /// run finds pending (undecided, not resolved).
    pub next: BTreeSet<String>,
    /// The violations the previous state does not have, in report order.
    pub new: Vec<(String, ViolationRow)>,
    /// Current violations the previous state already had.
    pub known: usize,
    /// Previous violations the run no longer shows.
    pub resolved: usize,
}

pub fn plan(report: &Report, previous: &BTreeSet<String>) -> Plan {
    let mut current = BTreeSet::new();
    let mut new = Vec::new();
    let mut known = 0;
    for r in violation_rows(report) {
        let fp = fingerprint(&r);
        if !current.insert(fp.clone()) {
            continue; // the same row reported twice by one check
        }
        if previous.contains(&fp) {
            known += 1;
        } else {
            new.push((fp, r));
        }
    }
    let mut next = current.clone();
    next.extend(
        pending_rows(report)
            .iter()
            .map(fingerprint)
            .filter(|fp| previous.contains(fp)),
    );
    let resolved = previous.difference(&next).count();
    Plan {
        current,
        next,
        new,
        known,
        resolved,
    }
}

/// The alert's deduplication key: SHA-256 over the JSON array of the lake's
/// identity (the body's `lake_identity`, as the state file records the
/// lake: one however the lake is spelled, rev-s52-contracts L3) and the
/// array of the new violations' fingerprints,
/// sorted (every one, not only the [`ALERT_ROWS_MAX`] listed), in hex. The
/// same on every attempt and on the next run's sending again of the same
/// new violations (an alert not delivered, or whose answer did not come in
/// time), so a receiver that deduplicates on it (PagerDuty's Events API,
/// most incident tools) pages once for them; another lake's alert never
/// shares it (rev-s51-late H1: a staging copy of the production lake sent
/// the same key, and its open incident would have swallowed production's).
pub fn dedup_key(lake: &str, plan: &Plan) -> String {
    let sorted: BTreeSet<&str> = plan.new.iter().map(|(fp, _)| fp.as_str()).collect();
    let array = serde_json::json!([lake, sorted]).to_string();
    ledger_events::event::hex(&Sha256::digest(array.as_bytes()))
}

/// The webhook body (version 1) for a plan with new violations.
pub fn body(report: &Report, plan: &Plan) -> serde_json::Value {
    let identity = crate::store::Location::identity(&report.lake);
    let rows: Vec<serde_json::Value> = plan
        .new
        .iter()
        .take(ALERT_ROWS_MAX)
        .map(|(fp, r)| {
            serde_json::json!({
                "fingerprint": fp,
                "check": r.check,
                "invariant": r.invariant,
                "code": r.code,
                "key": r.key,
                "seq": r.seq,
                "event_id": r.event_id,
                "detail": r.detail,
            })
        })
        .collect();
    let mut by_check: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, r) in &plan.new {
        *by_check.entry(r.check.as_str()).or_default() += 1;
    }
    serde_json::json!({
        "version": ALERT_VERSION,
        "dedup_key": dedup_key(&identity, plan),
        "lake": report.lake,
        "lake_identity": identity,
        "now_ms": report.now_ms,
        "verdict": if report.holds { "holds" } else { "violated" },
        "counts": {
            "violations": plan.current.len(),
            "new": plan.new.len(),
            "known": plan.known,
            "resolved": plan.resolved,
        },
        "checks": report.checks.iter().map(|c| serde_json::json!({
            "check": c.name,
            "invariant": c.invariant,
            "holds": c.holds,
            "violations": c.violations,
            "new": by_check.get(c.name).copied().unwrap_or(0),
        })).collect::<Vec<_>>(),
        "new_violations": rows,
        "new_violations_omitted": plan.new.len().saturating_sub(ALERT_ROWS_MAX),
    })
}

/// Reads and checks the state file (format and version); `None` when it
/// does not exist yet (the first run).
pub fn load_state(path: &Path) -> Result<Option<AlertState>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "alert: cannot read the state file {}: {e}",
                path.display()
            ))
        }
    };
    let state: AlertState = serde_json::from_slice(&bytes).map_err(|e| {
        // A JSON object with an alert state's fields is one damaged (or
        // written by hand); anything else is another file, and the path the
        // likely mistake: "delete it" would be the wrong Help there
        // (rev-s55-blackbox F8).
        let ours = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.as_object().map(|o| o.contains_key("fingerprints")))
            .unwrap_or(false);
        let help = if ours { STATE_HELP } else { FOREIGN_STATE_HELP };
        format!(
            "alert: the state file {} is not an alert state ({e})\n{help}",
            path.display()
        )
    })?;
    if state.version != ALERT_STATE_VERSION {
        return Err(format!(
            "alert: the state file {} has version {}; this reconcile knows {ALERT_STATE_VERSION}\n{STATE_HELP}",
            path.display(),
            state.version
        ));
    }
    Ok(Some(state))
}

const STATE_HELP: &str =
    "Help: delete the file to start over (every current violation then alerts once)";

/// The Help of an `--alert-state` file that is no alert state at all.
const FOREIGN_STATE_HELP: &str = "Help: check the --alert-state path: it names this lake's \
     alert state (a JSON file reconcile writes), and this file is something else, left as it is. \
     If it is this lake's state, damaged, delete it to start over (every current violation then \
     alerts once)";

/// The previous fingerprints for `lake`; a missing file is an empty state.
pub fn read_state(path: &Path, lake: &str) -> Result<BTreeSet<String>, String> {
    let Some(state) = load_state(path)? else {
        return Ok(BTreeSet::new());
    };
    if !crate::store::Location::is_same_lake(&state.lake, &crate::store::Location::identity(lake)) {
        return Err(format!(
            "alert: the state file {} belongs to the lake {:?}, not {lake:?}; one state file per lake\n\
             Help: give this lake its own state file (--alert-state or LEDGER_ALERT_STATE), or \
             --no-alert for a run that should not page (a replay in the nightly job's environment); \
             do not delete that one: it is the other lake's record of what it already alerted",
            path.display(),
            state.lake
        ));
    }
    Ok(state.fingerprints)
}

/// The state file holding `fingerprints`, written in full beside `path`
/// but not yet in its place ([`super::Staged::commit`]).
fn stage_state(
    path: &Path,
    lake: &str,
    fingerprints: &BTreeSet<String>,
) -> Result<super::Staged, String> {
    let state = AlertState {
        version: ALERT_STATE_VERSION,
        // The lake however it was spelled.
        lake: crate::store::Location::identity(lake),
        written_at_ms: wall_clock_ms(),
        fingerprints: fingerprints.clone(),
    };
    let text = serde_json::to_string_pretty(&state).map_err(|e| e.to_string())? + "\n";
    super::stage(path, text.as_bytes())
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What the alert step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Sent {
        new: usize,
        known: usize,
        resolved: usize,
    },
    NothingNew {
        violations: usize,
        resolved: usize,
    },
}

impl Outcome {
    /// The one line printed on stderr.
    pub fn line(&self) -> String {
        match self {
            Outcome::Sent {
                new,
                known,
                resolved,
            } => format!(
                "alert: sent {new} new violation(s) ({known} already alerted, {resolved} resolved)"
            ),
            Outcome::NothingNew {
                violations,
                resolved,
            } => format!(
                "alert: nothing new to send ({violations} violation(s) already alerted, {resolved} resolved)"
            ),
        }
    }
}

/// Reads the state, POSTs when there is something new, advances the state
/// only after a 2xx. A failed delivery is an error (exit 2). The next state
/// is written to its temporary file before the POST and renamed over the
/// state after the 2xx. A state that cannot be written (a read-only or full
/// volume) does not hold the page back (rev-s53-resources M3; rev-s51-ops2
/// F6 had it send nothing): the alert is sent, and the run is exit 2 saying
/// it was delivered and that the next run sends it again with the same
/// `dedup_key`: a receiver deduplicates on it while its incident is open
/// (PagerDuty, Opsgenie); a resolved one, or a chat webhook, gets it again.
/// A repeated page a night costs less than new money violations nobody is
/// paged for.
pub async fn run(cfg: &AlertConfig, report: &Report) -> Result<Outcome, String> {
    http::check_url("--alert-webhook", &cfg.webhook)?;
    let previous = read_state(&cfg.state, &report.lake)?;
    let p = plan(report, &previous);
    let write_help = super::WRITE_HELP;
    if p.new.is_empty() {
        stage_state(&cfg.state, &report.lake, &p.next)
            .and_then(super::Staged::commit)
            .map_err(|e| format!("alert: {e}\n{write_help}"))?;
        return Ok(Outcome::NothingNew {
            violations: p.known,
            resolved: p.resolved,
        });
    }
    let n = p.new.len();
    let staged = stage_state(&cfg.state, &report.lake, &p.next);
    // The key as the body carries it (one identity, one hash).
    let body = body(report, &p);
    let key = body["dedup_key"].as_str().unwrap_or_default().to_owned();
    let url = http::redact_path(&cfg.webhook);
    // What a failed POST leaves: the state as it was, or none yet
    // (rev-s55-blackbox F8: "unchanged" named a file that does not exist).
    let state = match cfg.state.exists() {
        true => format!("The state file {} is unchanged", cfg.state.display()),
        false => format!("No state file is written ({})", cfg.state.display()),
    };
    // Said with a failed POST too: mending the webhook alone would leave
    // the repeat for the next night to find (rev-s53-diff L3).
    let unwritable = match &staged {
        Err(e) => format!("\nAlso, the state cannot be written: {e}\n{write_help}"),
        Ok(_) => String::new(),
    };
    let answer = http::post_json(&cfg.webhook, &[], &body.to_string(), &cfg.retry)
        .await
        .map_err(|f| {
            let timeout = cfg.retry.timeout.as_secs();
            // A refusal (a 4xx that is not retried) is what to mend, even
            // when an earlier attempt may have been taken.
            // 408 and 429 are retried, and are the receiver's state, not the
            // request's fault (rev-s52-diff M5).
            let last = match &f.last {
                http::Last::Status { status, .. } => Some(*status),
                http::Last::Transport { .. } => None,
            };
            let refused = last.filter(|s| (400..500).contains(s) && !matches!(s, 408 | 429));
            let busy = last.filter(|s| matches!(s, 408 | 429));
            if let Some(why) = &f.maybe_acted {
                let help = match refused {
                    Some(status) => format!(
                        "the last attempt was refused (HTTP {status}): check the webhook URL and its \
                         token (--alert-webhook or LEDGER_ALERT_WEBHOOK); have the receiver \
                         deduplicate on the body's dedup_key"
                    ),
                    None if f.unanswered > 0 => format!(
                        "give the receiver more time (--alert-timeout or LEDGER_ALERT_TIMEOUT; now \
                         {timeout} s), or have it deduplicate on the body's dedup_key"
                    ),
                    None => "have the receiver deduplicate on the body's dedup_key, and check that \
                             it (and any gateway before it) is up"
                        .to_owned(),
                };
                format!(
                    "alert: POST {url} with {n} new violation(s) may have been delivered ({why}): {f}\n\
                     {state}, so the next run sends these violations again, \
                     with the same dedup_key ({key}) while the same ones are new.\n\
                     Help: {help}{unwritable}"
                )
            } else {
                let help = if f.tls() {
                    format!(
                        "the receiver must speak https with {}; a plain-http receiver is an http:// URL",
                        crate::store::TRUSTED_CERTIFICATE
                    )
                } else if let Some(status) = busy {
                    format!(
                        "the receiver answered HTTP {status} (too many requests, or out of time) to \
                         every attempt: it is overloaded or rate-limits this sender; the next run sends \
                         the alert again"
                    )
                } else if let Some(status) = refused {
                    format!(
                        "the receiver refused the alert (HTTP {status}): check the webhook URL and its \
                         token (--alert-webhook or LEDGER_ALERT_WEBHOOK)"
                    )
                } else {
                    "check the webhook URL (--alert-webhook or LEDGER_ALERT_WEBHOOK) and that the \
                     receiver is up"
                        .to_owned()
                };
                format!(
                    "alert: POST {url} with {n} new violation(s) was not delivered: {f}\n\
                     {state}, so the next run alerts on them again.\n\
                     Help: {help}{unwritable}"
                )
            }
        })?;
    staged.and_then(super::Staged::commit).map_err(|e| {
        format!(
            "alert: the alert WAS delivered (HTTP {}: {n} new violation(s), dedup_key {key}), but \
             the state could not be advanced: {e}\n\
             The next run sends it again, with the same dedup_key.\n{write_help}",
            answer.status
        )
    })?;
    Ok(Outcome::Sent {
        new: n,
        known: p.known,
        resolved: p.resolved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{CheckResult, Finding};

    /// A report whose one check has `violated` and `pending` findings.
    fn report(violated: &[&Finding], pending: &[&Finding]) -> Report {
        Report {
            settle_ms: 600_000,
            holds: violated.is_empty(),
            pending: pending.len(),
            checks: vec![CheckResult {
                name: "completeness",
                invariant: "lake",
                proves: "",
                holds: violated.is_empty(),
                violations: violated.len(),
                findings: violated.iter().map(|f| (*f).clone()).collect(),
                pending: pending.iter().map(|f| (*f).clone()).collect(),
            }],
            ..Report::empty(1)
        }
    }

    #[test]
    fn an_alerted_violation_that_goes_pending_and_comes_back_does_not_alert_again() {
        let gap = Finding::new("seq_gap", "acme.a", "seq 5 missing".into())
            .at(5, "account:acme.a:5")
            .absence(0);
        let other = Finding::new("seq_gap", "acme.b", "seq 2 missing".into())
            .at(2, "account:acme.b:2")
            .absence(0);
        // Night 1: violated, alerted.
        let p = plan(&report(&[&gap], &[]), &BTreeSet::new());
        assert_eq!(p.new.len(), 1);
        // Night 2: the row it rests on is dated ahead of the clock and now
        // within the window: pending. Not resolved, kept; another pending
        // finding never alerted is not kept.
        let p = plan(&report(&[], &[&gap, &other]), &p.next);
        assert_eq!((p.new.len(), p.known, p.resolved), (0, 0, 0));
        assert_eq!(p.next.len(), 1);
        // Night 3: decided again: known, no second alert.
        let p = plan(&report(&[&gap], &[&other]), &p.next);
        assert_eq!((p.new.len(), p.known, p.resolved), (0, 1, 0));
        // Night 4: gone: resolved, and it would alert again if it came back.
        let p = plan(&report(&[], &[]), &p.next);
        assert_eq!((p.resolved, p.next.len()), (1, 0));
        assert_eq!(plan(&report(&[&gap], &[]), &p.next).new.len(), 1);
    }

    #[test]
    fn a_currency_not_conserved_alerts_once_however_much_of_it_young_rows_owe_night_by_night() {
        let usd = |detail: &str| {
            let mut r = report(&[&Finding::new("not_conserved", "USD", detail.into())], &[]);
            r.checks[0].name = "global_conservation";
            r
        };
        // A defect of 100 (the difference as the check writes it: its young
        // part, when there is one, after it).
        let steady = usd("Σ balances 1100 over 2 accounts ≠ deposits 1000 − withdrawals 0 + in flight 0 = 1000 (difference 100)");
        let lag = usd("Σ balances 1150 over 2 accounts ≠ deposits 1000 − withdrawals 0 + in flight 0 = 1000 (difference 150); 50 of it on rows younger than the settle window");
        let second = usd("Σ balances 1170 over 2 accounts ≠ deposits 1000 − withdrawals 0 + in flight 0 = 1000 (difference 170); 50 of it on rows younger than the settle window");
        let p = plan(&steady, &BTreeSet::new());
        assert_eq!(p.new.len(), 1);
        // Rows in delivery add 50 to it, then arrive: the same defect.
        let p = plan(&lag, &p.next);
        assert_eq!((p.new.len(), p.known), (0, 1));
        let p = plan(&steady, &p.next);
        assert_eq!((p.new.len(), p.known), (0, 1));
        // A second defect of 20 in the same currency: new.
        assert_eq!(plan(&second, &p.next).new.len(), 1);
    }

    /// The fingerprint is the documented one (docs/RECONCILE.md,
    /// "Alerts"): the first 128 bits of SHA-256 over the JSON array, so
    /// state files written by any build stay valid.
    #[test]
    fn a_fingerprint_is_the_hash_of_the_documented_array() {
        let row = |check: &str, code: &str, seq: Option<u64>, detail: &str| ViolationRow {
            check: check.into(),
            invariant: "I1".into(),
            code: code.into(),
            key: "k".into(),
            seq,
            event_id: seq.map(|s| format!("account:k:{s}")),
            detail: detail.into(),
            lake: "/lake".into(),
            now_ms: 0,
        };
        let sha = |array: &str| ledger_events::event::hex(&Sha256::digest(array.as_bytes())[..16]);
        let gap = row("completeness", "seq_gap", Some(5), "seqs 5..=5 missing");
        assert_eq!(
            fingerprint(&gap),
            sha(r#"["completeness","seq_gap","k",5,"account:k:5"]"#)
        );
        let usd = row(
            "global_conservation",
            "not_conserved",
            None,
            "Σ balances 1100 over 2 accounts ≠ deposits 1000 − withdrawals 0 + in flight 0 = 1000 (difference 100)",
        );
        assert_eq!(
            fingerprint(&usd),
            sha(r#"["global_conservation","not_conserved","k",null,null,"100"]"#)
        );
        let moved = row(
            "transfer_conservation",
            "money_moved_without_capture",
            None,
            "failed transfer has 1 debit(s) and 0 credit(s)",
        );
        assert_eq!(
            fingerprint(&moved),
            sha(
                r#"["transfer_conservation","money_moved_without_capture","k",null,null,"failed transfer has 1 debit(s) and 0 credit(s)"]"#
            )
        );
    }

    /// rev-s51-ops2 F4: the dedup_key is the documented hash of the sorted
    /// new fingerprints: the same for the same new violations whatever their
    /// order, another for another set, and blind to what is already known.
    #[test]
    fn the_dedup_key_hashes_the_sorted_new_fingerprints() {
        let gap = |key: &str| {
            Finding::new("seq_gap", key, "seq 5 missing".into())
                .at(5, &format!("account:{key}:5"))
                .absence(0)
        };
        let (a, b, c) = (gap("acme.a"), gap("acme.b"), gap("acme.c"));
        let ab = plan(&report(&[&a, &b], &[]), &BTreeSet::new());
        let ba = plan(&report(&[&b, &a], &[]), &BTreeSet::new());
        assert_eq!(dedup_key("/lake", &ab), dedup_key("/lake", &ba));
        let mut sorted: Vec<&str> = ab.new.iter().map(|(fp, _)| fp.as_str()).collect();
        sorted.sort();
        let array = serde_json::json!(["/lake", sorted]).to_string();
        assert_eq!(
            dedup_key("/lake", &ab),
            ledger_events::event::hex(&Sha256::digest(array.as_bytes()))
        );
        assert_ne!(
            dedup_key("/lake", &ab),
            dedup_key("/lake", &plan(&report(&[&a], &[]), &BTreeSet::new()))
        );
        // c new, a and b known: the key of c alone.
        let known = plan(&report(&[&a, &b, &c], &[]), &ab.next);
        let c_alone = plan(&report(&[&c], &[]), &BTreeSet::new());
        assert_eq!(dedup_key("/lake", &known), dedup_key("/lake", &c_alone));
        let r = report(&[&c], &[]);
        assert_eq!(
            body(&r, &c_alone)["dedup_key"],
            dedup_key(&r.lake, &c_alone)
        );
        // One lake however it is spelled (rev-s52-contracts L3): the key
        // hashes the identity the state file records.
        let dir = tempfile::tempdir().unwrap();
        let spelled = |lake: String| {
            let mut r = report(&[&c], &[]);
            r.lake = lake;
            body(&r, &c_alone)
        };
        let plain = spelled(dir.path().display().to_string());
        let slashed = spelled(format!("{}/./", dir.path().display()));
        assert_ne!(plain["lake"], slashed["lake"]);
        assert_eq!(plain["lake_identity"], slashed["lake_identity"]);
        assert_eq!(plain["dedup_key"], slashed["dedup_key"]);
        // Another lake, the same violations: another key.
        assert_ne!(
            dedup_key("/lake", &c_alone),
            dedup_key("/staging", &c_alone)
        );
    }

    /// rev-s45-outputs L1: a failed transfer that moved money is one
    /// finding with no row; a second debit on it is a second defect.
    #[test]
    fn a_transfers_legs_changing_alert_as_new() {
        let moved = |detail: &str| {
            let f = Finding::new("money_moved_without_capture", "t.acme.k", detail.into());
            let mut r = report(&[&f], &[]);
            r.checks[0].name = "transfer_conservation";
            r
        };
        let once = moved("failed transfer has 1 debit(s) and 0 credit(s)");
        let twice = moved("failed transfer has 2 debit(s) and 0 credit(s)");
        let p = plan(&once, &BTreeSet::new());
        assert_eq!(p.new.len(), 1);
        assert_eq!((plan(&once, &p.next).new.len()), 0);
        assert_eq!(plan(&twice, &p.next).new.len(), 1);
        // A finding with a row keeps its detail out (a seq gap's detail
        // changes as later rows arrive).
        let gap = |detail: &str| {
            report(
                &[&Finding::new("seq_gap", "acme.a", detail.into()).at(5, "account:acme.a:5")],
                &[],
            )
        };
        let p = plan(
            &gap("seqs 5..=5 missing (next present: 6)"),
            &BTreeSet::new(),
        );
        let again = plan(&gap("seqs 5..=6 missing (next present: 7)"), &p.next);
        assert_eq!(again.new.len(), 0);
    }

    /// rev-s48-outputs M1: a new version of an event already reported (a
    /// third version of one in conflict, a second tampered copy of a row
    /// already a `hash_mismatch`) is a new finding, and alerts as new; the
    /// same versions night after night do not.
    #[test]
    fn a_new_version_of_an_event_already_reported_alerts_as_new() {
        let of = |findings: &[(&'static str, &str)]| {
            let found: Vec<Finding> = findings
                .iter()
                .map(|(code, detail)| {
                    Finding::new(code, "acme.a", (*detail).into()).at(4, "account:acme.a:4")
                })
                .collect();
            report(&found.iter().collect::<Vec<_>>(), &[])
        };
        let two = of(&[("conflict", "2 versions: hashes aa, bb")]);
        let three = of(&[("conflict", "3 versions: hashes aa, bb, cc")]);
        let p = plan(&two, &BTreeSet::new());
        assert_eq!(plan(&two, &p.next).new.len(), 0);
        assert_eq!(plan(&three, &p.next).new.len(), 1);
        let tampered = |h: &str| {
            (
                "hash_mismatch",
                format!("recorded hash aa but the row's content hashes to {h}"),
            )
        };
        let (one, other) = (tampered("bb"), tampered("cc"));
        let first = of(&[(one.0, one.1.as_str())]);
        let both = of(&[(one.0, one.1.as_str()), (other.0, other.1.as_str())]);
        let p = plan(&first, &BTreeSet::new());
        let next = plan(&both, &p.next);
        assert_eq!((next.new.len(), next.known, next.current.len()), (1, 1, 2));
    }
}
