//! One transfer's saga: what a TransferDO owns.
//!
//! ```text
//! created ──reserve ok──▶ reserved ──credit ok──▶ credited ──capture──▶ captured
//!    │                       │
//!    │ reserve rejected      │ credit rejected
//!    ▼                       ▼
//!  failed                releasing ──release──▶ released
//!    (reserve gave up after its retries: releasing too)
//! ```
//!
//! Each phase is named after what has happened and waits for one step
//! ([`Phase::next_step`]). Guarantees, given that the caller persists the
//! transfer and the returned event atomically before acting on the next step:
//! - the machine is monotonic and acyclic, so every transfer whose steps are
//!   eventually answered reaches `captured`, `failed` or `released` (I4);
//! - a rejection is accepted only where a compensation remains: reserve
//!   (nothing held yet) and credit (release the hold). Capture and release
//!   have no rejection branch (I0); a rejection there is a bug elsewhere,
//!   reported as [`Advance::Anomaly`] and retried, never papered over. So is
//!   an idempotency conflict on the reserve or the credit: the account
//!   recorded that step under other terms and may have applied it, so no
//!   compensation is safe;
//! - a reply for a step the transfer is no longer waiting for is ignored
//!   ([`Advance::Stale`]), so a late or duplicated reply cannot move it twice;
//! - every step is an idempotent account command keyed by the transfer id, so
//!   a re-drive after a crash at any boundary replays instead of re-posting.

use serde::{Deserialize, Serialize};

use crate::account::{Command, Outcome};
use crate::idempotency::{self, Check, Fingerprint};
use crate::money::{self, Currency};
use crate::retry::{self, RetryPolicy};
use crate::Rejection;
use ledger_events::{Event, Stream, TransferKind, GENESIS_HASH};

/// The immutable request: what the idempotency fingerprint covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferSpec {
    /// Tenant-namespaced idempotency key: the TransferDO's name.
    pub id: String,
    pub source: String,
    pub destination: String,
    pub amount: i64,
    pub currency: Currency,
}

impl TransferSpec {
    pub fn validate(&self) -> Result<(), Rejection> {
        money::check_amount(self.amount)?;
        if self.source == self.destination {
            return Err(Rejection::SameAccount);
        }
        Ok(())
    }

    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&[
            "transfer",
            &self.source,
            &self.destination,
            &self.amount.to_string(),
            self.currency.as_str(),
        ])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for the source to place a hold.
    Created,
    /// Hold placed; waiting for the destination to take the credit.
    Reserved,
    /// Credit posted; waiting for the source to capture the hold (I0: always).
    Credited,
    /// Abandoned before the credit; waiting for the source to release the hold.
    Releasing,
    Captured,
    Failed,
    Released,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        self.kind().as_str()
    }

    pub fn kind(self) -> TransferKind {
        match self {
            Phase::Created => TransferKind::Created,
            Phase::Reserved => TransferKind::Reserved,
            Phase::Credited => TransferKind::Credited,
            Phase::Releasing => TransferKind::Releasing,
            Phase::Captured => TransferKind::Captured,
            Phase::Failed => TransferKind::Failed,
            Phase::Released => TransferKind::Released,
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Captured | Phase::Failed | Phase::Released)
    }

    pub fn next_step(self) -> Option<Step> {
        match self {
            Phase::Created => Some(Step::Reserve),
            Phase::Reserved => Some(Step::Credit),
            Phase::Credited => Some(Step::Capture),
            Phase::Releasing => Some(Step::Release),
            Phase::Captured | Phase::Failed | Phase::Released => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Reserve,
    Credit,
    Capture,
    Release,
}

impl Step {
    pub fn policy(self) -> RetryPolicy {
        match self {
            Step::Reserve => retry::RESERVE,
            Step::Credit => retry::CREDIT,
            Step::Capture => retry::CAPTURE,
            Step::Release => retry::RELEASE,
        }
    }
}

/// A transfer's whole persisted state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub spec: TransferSpec,
    pub fingerprint: Fingerprint,
    pub phase: Phase,
    pub created_at_ms: i64,
    /// Past this instant a non-terminal transfer is reported as dangling.
    pub deadline_ms: i64,
    /// Seq and hash of the last event of the transfer's stream.
    pub seq: u64,
    pub last_hash: String,
    /// Transient failures of the current step so far.
    pub attempt: u32,
    /// When the current step should next be tried (the alarm time).
    pub next_attempt_at_ms: i64,
    /// Why the transfer failed or is being released.
    pub reason: Option<String>,
}

/// The answer to a create request.
// `Start` is the usual answer and its event is persisted as is: boxing it
// would add an allocation per transfer for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Admission<'a> {
    /// New: persist the transfer and its `created` event, then drive it.
    Start(Box<Transfer>, Event),
    /// The same key with the same parameters: answer with the stored transfer.
    Existing(&'a Transfer),
    /// Invalid on its face or a key reused with other parameters; nothing runs.
    Refuse(Rejection),
}

/// Admits a create request under its idempotency key.
pub fn admit<'a>(
    existing: Option<&'a Transfer>,
    spec: TransferSpec,
    now_ms: i64,
    deadline_ms: i64,
) -> Admission<'a> {
    let fingerprint = spec.fingerprint();
    match idempotency::check(existing.map(|t| (&t.fingerprint, t)), &fingerprint) {
        Check::Replay(t) => return Admission::Existing(t),
        Check::Conflict => {
            return Admission::Refuse(Rejection::IdempotencyConflict { op_id: spec.id })
        }
        Check::New => {}
    }
    if let Err(r) = spec.validate() {
        return Admission::Refuse(r);
    }
    assert!(deadline_ms >= now_ms, "deadline before creation");
    let mut t = Transfer {
        spec,
        fingerprint,
        phase: Phase::Created,
        created_at_ms: now_ms,
        deadline_ms,
        seq: 0,
        last_hash: GENESIS_HASH.to_owned(),
        attempt: 0,
        next_attempt_at_ms: now_ms,
        reason: None,
    };
    let event = t.emit(Phase::Created, now_ms);
    Admission::Start(Box::new(t), event)
}

/// What the account answered to a step, as far as the coordinator knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Outcome(Outcome),
    /// No answer: timed out, lost, the object unreachable or restarting.
    Transient,
}

// `Moved` is the usual step and its event is persisted as is: boxing it
// would add an allocation per saga step for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// The phase changed: persist the transfer with this event, then continue.
    Moved(Event),
    /// Persist the attempt count and try the same step again at this time.
    RetryAt(i64),
    /// A reply for a step the transfer no longer waits for: ignore it.
    Stale,
    /// A step with no rejection branch was rejected: a bug elsewhere. Persist,
    /// alert, and retry at this time; the transfer stays visible until fixed.
    Anomaly {
        rejection: Rejection,
        retry_at_ms: i64,
    },
}

impl Transfer {
    pub fn is_terminal(&self) -> bool {
        self.phase.is_terminal()
    }

    pub fn next_step(&self) -> Option<Step> {
        self.phase.next_step()
    }

    /// The account and the idempotent command that perform `step`.
    pub fn request(&self, step: Step) -> (&str, Command) {
        let s = &self.spec;
        let t = s.id.clone();
        match step {
            Step::Reserve => (
                &s.source,
                Command::Reserve {
                    transfer_id: t,
                    amount: s.amount,
                    currency: s.currency,
                    destination: s.destination.clone(),
                },
            ),
            Step::Credit => (
                &s.destination,
                Command::Credit {
                    transfer_id: t,
                    amount: s.amount,
                    currency: s.currency,
                    source: s.source.clone(),
                },
            ),
            Step::Capture => (&s.source, Command::Capture { transfer_id: t }),
            Step::Release => (&s.source, Command::Release { transfer_id: t }),
        }
    }

    /// Feeds the answer to `step`.
    pub fn on_reply(&mut self, step: Step, reply: &Reply, now_ms: i64) -> Advance {
        if self.next_step() != Some(step) {
            return Advance::Stale;
        }
        let rejected = match reply {
            Reply::Transient => return self.on_transient(step, now_ms),
            Reply::Outcome(Outcome::Accepted(_)) => None,
            Reply::Outcome(Outcome::Rejected(r)) => Some(r),
        };
        let next = match (step, rejected) {
            // The account recorded this very step (`{id}:reserve`,
            // `{id}:credit`) under other terms: it may have been applied,
            // so neither compensation is safe. Failing would leak a hold it
            // placed; releasing after a credit it applied would leave that
            // credit without its debit. Unreachable while a transfer's terms
            // are fixed by its object; reported and retried, never papered
            // over (rev-s56-edge L1).
            (Step::Reserve | Step::Credit, Some(r @ Rejection::IdempotencyConflict { .. })) => {
                return self.anomaly(step, r, now_ms);
            }
            (Step::Reserve, None) => Phase::Reserved,
            (Step::Reserve, Some(r)) => {
                self.reason = Some(r.code().to_owned());
                Phase::Failed
            }
            (Step::Credit, None) => Phase::Credited,
            (Step::Credit, Some(r)) => {
                self.reason = Some(r.code().to_owned());
                Phase::Releasing
            }
            (Step::Capture, None) => Phase::Captured,
            (Step::Release, None) => Phase::Released,
            // A source nobody opened holds nothing, and the account recorded
            // this transfer's hold released: a reserve still in flight is
            // refused when it lands (`account::unknown_account`).
            (Step::Release, Some(Rejection::UnknownAccount)) => Phase::Released,
            (Step::Capture | Step::Release, Some(r)) => return self.anomaly(step, r, now_ms),
        };
        Advance::Moved(self.emit(next, now_ms))
    }

    /// A refusal the saga has no safe answer to: the step is tried again
    /// after its policy's longest delay, and the refusal reported.
    fn anomaly(&mut self, step: Step, rejection: &Rejection, now_ms: i64) -> Advance {
        self.attempt = self.attempt.saturating_add(1);
        let retry_at_ms = now_ms.saturating_add(step.policy().delay_ms_max as i64);
        self.next_attempt_at_ms = retry_at_ms;
        Advance::Anomaly {
            rejection: rejection.clone(),
            retry_at_ms,
        }
    }

    fn on_transient(&mut self, step: Step, now_ms: i64) -> Advance {
        self.attempt = self.attempt.saturating_add(1);
        let policy = step.policy();
        if step == Step::Reserve && (policy.exhausted(self.attempt) || now_ms >= self.deadline_ms) {
            // Whether or not the reserve landed, releasing is safe: it frees a
            // hold that exists and tombstones one that might still arrive.
            let why = if now_ms >= self.deadline_ms {
                "deadline_exceeded"
            } else {
                "reserve_unavailable"
            };
            self.reason = Some(why.to_owned());
            return Advance::Moved(self.emit(Phase::Releasing, now_ms));
        }
        let jitter = retry::splitmix64(fnv1a(self.spec.id.as_bytes()));
        let at = now_ms.saturating_add(policy.delay_ms(self.attempt, jitter) as i64);
        self.next_attempt_at_ms = at;
        Advance::RetryAt(at)
    }

    /// Enters `phase` and returns its event, chained onto the stream.
    fn emit(&mut self, phase: Phase, now_ms: i64) -> Event {
        self.phase = phase;
        self.attempt = 0;
        self.next_attempt_at_ms = now_ms;
        let s = &self.spec;
        let seq = self.seq + 1;
        let mut e = Event::new(
            Stream::Transfer,
            &s.id,
            seq,
            phase.as_str(),
            now_ms,
            &self.last_hash,
        );
        e.currency = Some(s.currency.to_string());
        e.amount = Some(s.amount);
        e.transfer_id = Some(s.id.clone());
        e.source = Some(s.source.clone());
        e.destination = Some(s.destination.clone());
        if phase == Phase::Created {
            e.deadline_ms = Some(self.deadline_ms);
        }
        if matches!(phase, Phase::Failed | Phase::Releasing | Phase::Released) {
            e.reason = Some(
                self.reason
                    .clone()
                    .expect("a failed or released transfer has a reason"),
            );
        }
        let e = e.seal();
        self.seq = seq;
        self.last_hash = e.hash.clone();
        e
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
