//! One account's state machine: what an AccountDO owns.
//!
//! Guarantees, given that the caller commits a [`Transition`] atomically and
//! serialises commands per account (a Durable Object does both):
//! - **at most once**: every money-moving command has an operation identity
//!   ([`Command::op_id`]); its record (fingerprint + outcome) commits with its
//!   effect, so a replay returns the recorded outcome and never posts twice,
//!   and a replay with other parameters is refused without effect, as is a
//!   deposit or withdrawal whose key the other direction already used
//!   ([`Command::paired_op_id`]);
//! - **no overdraft (I2)**: only `reserve` and `withdraw` lower `available`, and
//!   both check `balance − held + overdraft_limit ≥ amount` first;
//! - **capture is honoured (I0)**: a granted hold is captured whatever the
//!   account's status; freezing blocks new reserves, credits, deposits and
//!   withdrawals only;
//! - **a release is final**: releasing a hold that was never placed leaves a
//!   tombstone, so a reserve delayed past its own compensation is refused;
//! - **an ordered, verifiable history**: each change emits one event with the
//!   next seq (contiguous from 1) and the previous event's hash.
//!
//! State-dependent rejections (insufficient funds, frozen, closed hold,
//! overflow) are recorded, so a retried saga step sees the same answer; a
//! request that is invalid on its face (unknown account, wrong currency,
//! amount out of range, idempotency conflict) changes nothing at all.

use serde::{Deserialize, Serialize};

use crate::idempotency::{self, Check, Fingerprint};
use crate::money::{self, Currency, AMOUNT_MINOR_MAX};
use crate::Rejection;
use ledger_events::{AccountKind, Event, Stream, GENESIS_HASH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Active,
    Frozen,
}

/// The account's single row: everything a command needs but its own records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountHeader {
    pub id: String,
    pub currency: Currency,
    pub overdraft_limit: i64,
    pub status: Status,
    pub balance: i64,
    pub held: i64,
    /// Seq of the last event emitted (0 before the first).
    pub seq: u64,
    /// Hash of the last event emitted ([`GENESIS_HASH`] before the first).
    pub last_hash: String,
    pub opened_at_ms: i64,
}

impl AccountHeader {
    /// balance − held: what the account owns outright.
    pub fn available(&self) -> i64 {
        self.balance - self.held
    }

    /// What a new reserve or withdrawal may take: available plus the overdraft limit.
    fn spendable(&self) -> i64 {
        // balance and held are bounded by the I2 assertion, so this cannot overflow
        // for any state this module produced; checked anyway for foreign input.
        self.available().saturating_add(self.overdraft_limit)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldState {
    Held,
    Captured,
    Released,
}

/// Funds reserved for one transfer; keyed by the transfer id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub transfer_id: String,
    /// 0 for a tombstone: a release that arrived before (or instead of) the reserve.
    pub amount: i64,
    pub counterparty: Option<String>,
    pub state: HoldState,
}

/// A posted ledger entry: the double-entry row. Signed: credits positive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub entry_id: String,
    pub transfer_id: Option<String>,
    pub counterparty: Option<String>,
    pub amount: i64,
    pub balance_after: i64,
    pub seq: u64,
    pub occurred_at_ms: i64,
}

/// What an accepted command left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Seq of the event the command emitted, if it emitted one.
    pub seq: Option<u64>,
    pub balance_after: i64,
    pub held_after: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    Accepted(Receipt),
    Rejected(Rejection),
}

/// The idempotency record of one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRecord {
    pub op_id: String,
    pub fingerprint: Fingerprint,
    pub outcome: Outcome,
}

/// How a deposit's entry id (and op id) begins: `dep:{account}:{key}`.
pub const DEPOSIT_PREFIX: &str = "dep:";
/// How a withdrawal's entry id (and op id) begins: `wd:{account}:{key}`.
pub const WITHDRAWAL_PREFIX: &str = "wd:";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Command {
    Open {
        currency: Currency,
        overdraft_limit: i64,
    },
    Deposit {
        entry_id: String,
        amount: i64,
        currency: Currency,
    },
    Withdraw {
        entry_id: String,
        amount: i64,
        currency: Currency,
    },
    Reserve {
        transfer_id: String,
        amount: i64,
        currency: Currency,
        destination: String,
    },
    Credit {
        transfer_id: String,
        amount: i64,
        currency: Currency,
        source: String,
    },
    Capture {
        transfer_id: String,
    },
    Release {
        transfer_id: String,
    },
    Freeze,
    Unfreeze,
}

impl Command {
    /// The identity under which this command executes at most once.
    pub fn op_id(&self) -> Option<String> {
        match self {
            Command::Open { .. } => Some("open".to_owned()),
            Command::Deposit { entry_id, .. } | Command::Withdraw { entry_id, .. } => {
                Some(entry_id.clone())
            }
            Command::Reserve { transfer_id, .. } => Some(format!("{transfer_id}:reserve")),
            Command::Credit { transfer_id, .. } => Some(format!("{transfer_id}:credit")),
            Command::Capture { transfer_id } => Some(format!("{transfer_id}:debit")),
            Command::Release { transfer_id } => Some(format!("{transfer_id}:release")),
            // Idempotent by state: freezing a frozen account changes nothing.
            Command::Freeze | Command::Unfreeze => None,
        }
    }

    /// The record a deposit or withdrawal must not find: the other direction's op id under the
    /// same key. A key is scoped to its account, not to (account, direction): the deposit
    /// `dep:{account}:{key}` and the withdrawal `wd:{account}:{key}` are two op records (and two
    /// entry ids, which the events carry and must keep), but one key, so a new operation whose
    /// paired record exists is an idempotency conflict and runs nothing. An entry id without
    /// either prefix pairs with nothing.
    pub fn paired_op_id(&self) -> Option<String> {
        let (entry_id, from, to) = match self {
            Command::Deposit { entry_id, .. } => (entry_id, DEPOSIT_PREFIX, WITHDRAWAL_PREFIX),
            Command::Withdraw { entry_id, .. } => (entry_id, WITHDRAWAL_PREFIX, DEPOSIT_PREFIX),
            _ => return None,
        };
        entry_id
            .strip_prefix(from)
            .map(|rest| format!("{to}{rest}"))
    }

    /// The transfer whose hold this command reads or writes.
    pub fn hold_key(&self) -> Option<&str> {
        match self {
            Command::Reserve { transfer_id, .. }
            | Command::Capture { transfer_id }
            | Command::Release { transfer_id } => Some(transfer_id),
            _ => None,
        }
    }

    pub fn fingerprint(&self) -> Fingerprint {
        let amount_s;
        let limit_s;
        let fields: Vec<&str> = match self {
            Command::Open {
                currency,
                overdraft_limit,
            } => {
                limit_s = overdraft_limit.to_string();
                vec!["open", currency.as_str(), &limit_s]
            }
            Command::Deposit {
                amount, currency, ..
            } => {
                amount_s = amount.to_string();
                vec!["deposit", &amount_s, currency.as_str()]
            }
            Command::Withdraw {
                amount, currency, ..
            } => {
                amount_s = amount.to_string();
                vec!["withdraw", &amount_s, currency.as_str()]
            }
            Command::Reserve {
                amount,
                currency,
                destination,
                ..
            } => {
                amount_s = amount.to_string();
                vec!["reserve", &amount_s, currency.as_str(), destination]
            }
            Command::Credit {
                amount,
                currency,
                source,
                ..
            } => {
                amount_s = amount.to_string();
                vec!["credit", &amount_s, currency.as_str(), source]
            }
            Command::Capture { .. } => vec!["capture"],
            Command::Release { .. } => vec!["release"],
            Command::Freeze => vec!["freeze"],
            Command::Unfreeze => vec!["unfreeze"],
        };
        Fingerprint::of(&fields)
    }
}

/// The stored rows a command may depend on; the caller loads exactly these.
#[derive(Debug, Clone, Copy, Default)]
pub struct View<'a> {
    pub header: Option<&'a AccountHeader>,
    /// The record under `cmd.op_id()`, if any.
    pub op: Option<&'a OpRecord>,
    /// The hold under `cmd.hold_key()`, if any.
    pub hold: Option<&'a Hold>,
    /// The record under `cmd.paired_op_id()`, if any: the same key's operation in the other
    /// direction, whose existence makes a new deposit or withdrawal a conflict.
    pub paired_op: Option<&'a OpRecord>,
}

/// Everything one accepted (or recorded-rejected) command writes. The caller
/// commits all of it, and the events' outbox rows, in one transaction before
/// answering with `outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The header after the command; none when it does not change (a
    /// recorded refusal, also at an account nobody opened: see
    /// `unknown_account`).
    pub header: Option<AccountHeader>,
    pub hold: Option<Hold>,
    pub entry: Option<Entry>,
    pub op: Option<OpRecord>,
    pub event: Option<Event>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Seen before with the same parameters: answer with this, write nothing.
    Replay(Outcome),
    /// Refused on its face: answer with this, write nothing.
    Refuse(Rejection),
    /// Accepted, and nothing changes (freezing a frozen account).
    Noop(Receipt),
    /// Commit this, then answer with its outcome.
    Commit(Box<Transition>),
}

impl Decision {
    pub fn outcome(&self) -> Outcome {
        match self {
            Decision::Replay(o) => o.clone(),
            Decision::Refuse(r) => Outcome::Rejected(r.clone()),
            Decision::Noop(r) => Outcome::Accepted(r.clone()),
            Decision::Commit(t) => t.outcome.clone(),
        }
    }
}

/// Rejections that depend on the account's current state are recorded so a
/// retried step gets the same answer; the rest leave no trace.
fn is_recorded(r: &Rejection) -> bool {
    matches!(
        r,
        Rejection::InsufficientFunds { .. }
            | Rejection::AccountFrozen
            | Rejection::BalanceOverflow
            | Rejection::UnknownHold
            | Rejection::HoldCaptured
            | Rejection::HoldReleased
    )
}

/// Decides one command against the loaded rows. Pure: the same inputs always
/// give the same decision.
pub fn decide(account_id: &str, view: View<'_>, cmd: &Command, now_ms: i64) -> Decision {
    let op_id = cmd.op_id();
    let fingerprint = cmd.fingerprint();
    if let (Some(op_id), Some(rec)) = (&op_id, view.op) {
        assert_eq!(&rec.op_id, op_id, "caller loaded the wrong op record");
        match idempotency::check(Some((&rec.fingerprint, &rec.outcome)), &fingerprint) {
            Check::Replay(outcome) => return Decision::Replay(outcome.clone()),
            Check::Conflict => {
                return Decision::Refuse(Rejection::IdempotencyConflict {
                    op_id: op_id.clone(),
                })
            }
            Check::New => unreachable!("a stored record is never New"),
        }
    }
    // Only a new operation gets here (its own record answers a replay first, also for the two
    // directions of one key recorded before this check existed).
    if let Some(paired) = view.paired_op {
        assert_eq!(
            Some(&paired.op_id),
            cmd.paired_op_id().as_ref(),
            "caller loaded the wrong paired op record"
        );
        return Decision::Refuse(Rejection::IdempotencyConflict {
            op_id: paired.op_id.clone(),
        });
    }
    if let (Some(key), Some(hold)) = (cmd.hold_key(), view.hold) {
        assert_eq!(hold.transfer_id, key, "caller loaded the wrong hold");
    }

    let current = match (cmd, view.header) {
        (
            Command::Open {
                currency,
                overdraft_limit,
            },
            None,
        ) => return open(account_id, *currency, *overdraft_limit, fingerprint, now_ms),
        // An open account always has its "open" record, so a second Open was
        // answered above as a replay or a conflict.
        (Command::Open { .. }, Some(_)) => {
            panic!("account {account_id} is open but its open record is missing")
        }
        (Command::Reserve { .. } | Command::Credit { .. } | Command::Release { .. }, None) => {
            return unknown_account(cmd, op_id, fingerprint)
        }
        (_, None) => return Decision::Refuse(Rejection::UnknownAccount),
        (_, Some(h)) => h,
    };

    let mut next = current.clone();
    let result = apply(&mut next, view.hold, cmd, now_ms);
    match result {
        Ok(Applied::Noop) => Decision::Noop(receipt(current, None)),
        Ok(Applied::Changed { hold, entry, event }) => {
            check_i2(&next);
            let outcome = Outcome::Accepted(receipt(&next, Some(event.seq)));
            let op = op_id.map(|op_id| OpRecord {
                op_id,
                fingerprint,
                outcome: outcome.clone(),
            });
            Decision::Commit(Box::new(Transition {
                header: Some(next),
                hold,
                entry,
                op,
                event: Some(event),
                outcome,
            }))
        }
        Err(r) if is_recorded(&r) && op_id.is_some() => {
            let outcome = Outcome::Rejected(r);
            let op = op_id.map(|op_id| OpRecord {
                op_id,
                fingerprint,
                outcome: outcome.clone(),
            });
            Decision::Commit(Box::new(Transition {
                header: None,
                hold: None,
                entry: None,
                op,
                event: None,
                outcome,
            }))
        }
        Err(r) => Decision::Refuse(r),
    }
}

/// [`decide`] under a lower amount limit for *new* deposits and withdrawals (the gateway's
/// configured `AMOUNT_MAX`): an operation already recorded answers its record, a replay or a
/// conflict, whatever the limit is now, so lowering the limit never turns the retry of a
/// booked deposit into a refusal (nor a key already used in the other direction into anything
/// but its conflict); a new one above `amount_max` is refused, unrecorded (its key stays
/// unused), as [`Rejection::AmountOutOfRange`]. Saga steps are not limited here: their
/// amount is the transfer's, judged when the transfer was admitted.
pub fn decide_within(
    account_id: &str,
    view: View<'_>,
    cmd: &Command,
    now_ms: i64,
    amount_max: i64,
) -> Decision {
    if view.op.is_none() && view.paired_op.is_none() {
        if let Command::Deposit { amount, .. } | Command::Withdraw { amount, .. } = cmd {
            if *amount > amount_max {
                return Decision::Refuse(Rejection::AmountOutOfRange {
                    amount: *amount,
                    max: amount_max,
                });
            }
        }
    }
    decide(account_id, view, cmd, now_ms)
}

/// A saga step at an account nobody opened (yet): refused, and the refusal
/// recorded as one that depends on the account's state is. A transfer's
/// saga has several drivers (the request, its alarm, a client's retry, the
/// sweeper), and the account may be opened between two deliveries of one
/// step: the later one must get the same answer, or a transfer released
/// because its destination was unknown would still credit it (money
/// created), and one failed because its source was unknown would hold its
/// money for ever. A release also leaves the transfer's hold released (a
/// tombstone, as on an open account, with no event: the account has no
/// stream yet), so a reserve still in flight is refused when it lands.
fn unknown_account(cmd: &Command, op_id: Option<String>, fingerprint: Fingerprint) -> Decision {
    let outcome = Outcome::Rejected(Rejection::UnknownAccount);
    let Some(op_id) = op_id else {
        return Decision::Refuse(Rejection::UnknownAccount);
    };
    let tombstone = match cmd {
        Command::Release { transfer_id } => Some(Hold {
            transfer_id: transfer_id.clone(),
            amount: 0,
            counterparty: None,
            state: HoldState::Released,
        }),
        _ => None,
    };
    Decision::Commit(Box::new(Transition {
        header: None,
        hold: tombstone,
        entry: None,
        op: Some(OpRecord {
            op_id,
            fingerprint,
            outcome: outcome.clone(),
        }),
        event: None,
        outcome,
    }))
}

/// I2 and the hold invariant, asserted after every change this module makes:
/// a violation here is a bug in this file, not a business outcome.
fn check_i2(h: &AccountHeader) {
    assert!(
        h.held >= 0,
        "account {}: held went negative ({})",
        h.id,
        h.held
    );
    assert!(
        h.available() >= -h.overdraft_limit,
        "account {}: available {} below the overdraft limit -{}",
        h.id,
        h.available(),
        h.overdraft_limit
    );
}

fn receipt(h: &AccountHeader, seq: Option<u64>) -> Receipt {
    Receipt {
        seq,
        balance_after: h.balance,
        held_after: h.held,
    }
}

// The large variant is the usual outcome, moved straight into storage:
// boxing it would add an allocation to every applied command for nothing.
#[allow(clippy::large_enum_variant)]
enum Applied {
    Noop,
    Changed {
        hold: Option<Hold>,
        entry: Option<Entry>,
        event: Event,
    },
}

fn open(
    id: &str,
    currency: Currency,
    overdraft_limit: i64,
    fingerprint: Fingerprint,
    now_ms: i64,
) -> Decision {
    if !(0..=AMOUNT_MINOR_MAX).contains(&overdraft_limit) {
        return Decision::Refuse(Rejection::OverdraftLimitOutOfRange {
            limit: overdraft_limit,
        });
    }
    let mut h = AccountHeader {
        id: id.to_owned(),
        currency,
        overdraft_limit,
        status: Status::Active,
        balance: 0,
        held: 0,
        seq: 0,
        last_hash: GENESIS_HASH.to_owned(),
        opened_at_ms: now_ms,
    };
    let event = emit(&mut h, AccountKind::Opened, now_ms, |_| {});
    let outcome = Outcome::Accepted(receipt(&h, Some(event.seq)));
    let op = Some(OpRecord {
        op_id: "open".to_owned(),
        fingerprint,
        outcome: outcome.clone(),
    });
    Decision::Commit(Box::new(Transition {
        header: Some(h),
        hold: None,
        entry: None,
        op,
        event: Some(event),
        outcome,
    }))
}

fn same_currency(h: &AccountHeader, requested: Currency) -> Result<(), Rejection> {
    if h.currency != requested {
        return Err(Rejection::CurrencyMismatch {
            account: h.currency,
            requested,
        });
    }
    Ok(())
}

fn active(h: &AccountHeader) -> Result<(), Rejection> {
    match h.status {
        Status::Active => Ok(()),
        Status::Frozen => Err(Rejection::AccountFrozen),
    }
}

/// The rules every incoming posting (deposit, credit) obeys, then the posting
/// itself: a valid amount in the account's currency, an active account, and
/// a balance that does not overflow.
fn receive(h: &mut AccountHeader, amount: i64, currency: Currency) -> Result<(), Rejection> {
    money::check_amount(amount)?;
    same_currency(h, currency)?;
    active(h)?;
    h.balance = money::add(h.balance, amount)?;
    Ok(())
}

fn spend_check(h: &AccountHeader, amount: i64) -> Result<(), Rejection> {
    if h.spendable() < amount {
        return Err(Rejection::InsufficientFunds {
            available: h.spendable(),
            requested: amount,
        });
    }
    Ok(())
}

/// Applies `cmd` to `h` in place. Validation that needs no state comes first,
/// so an invalid request is refused identically whatever the account holds.
fn apply(
    h: &mut AccountHeader,
    hold: Option<&Hold>,
    cmd: &Command,
    now: i64,
) -> Result<Applied, Rejection> {
    match cmd {
        Command::Open { .. } => unreachable!("handled by decide"),
        Command::Deposit {
            entry_id,
            amount,
            currency,
        } => {
            receive(h, *amount, *currency)?;
            let entry = entry(h, entry_id, None, None, *amount, now);
            let event = emit(h, AccountKind::Deposited, now, |e| {
                e.amount = Some(*amount);
                e.entry_id = Some(entry_id.clone());
            });
            Ok(Applied::Changed {
                hold: None,
                entry: Some(entry),
                event,
            })
        }
        Command::Withdraw {
            entry_id,
            amount,
            currency,
        } => {
            money::check_amount(*amount)?;
            same_currency(h, *currency)?;
            active(h)?;
            spend_check(h, *amount)?;
            h.balance = money::sub(h.balance, *amount)?;
            let entry = entry(h, entry_id, None, None, -*amount, now);
            let event = emit(h, AccountKind::Withdrawn, now, |e| {
                e.amount = Some(*amount);
                e.entry_id = Some(entry_id.clone());
            });
            Ok(Applied::Changed {
                hold: None,
                entry: Some(entry),
                event,
            })
        }
        Command::Reserve {
            transfer_id,
            amount,
            currency,
            destination,
        } => {
            money::check_amount(*amount)?;
            same_currency(h, *currency)?;
            if let Some(existing) = hold {
                // The reserve record would have answered a replay; a hold
                // without one is the tombstone of an earlier release.
                assert_eq!(
                    existing.state,
                    HoldState::Released,
                    "hold for {transfer_id} without its reserve record"
                );
                return Err(Rejection::HoldReleased);
            }
            active(h)?;
            spend_check(h, *amount)?;
            h.held = money::add(h.held, *amount)?;
            let new_hold = Hold {
                transfer_id: transfer_id.clone(),
                amount: *amount,
                counterparty: Some(destination.clone()),
                state: HoldState::Held,
            };
            let event = emit(h, AccountKind::HoldPlaced, now, |e| {
                e.amount = Some(*amount);
                e.transfer_id = Some(transfer_id.clone());
                e.counterparty = Some(destination.clone());
            });
            Ok(Applied::Changed {
                hold: Some(new_hold),
                entry: None,
                event,
            })
        }
        Command::Credit {
            transfer_id,
            amount,
            currency,
            source,
        } => {
            receive(h, *amount, *currency)?;
            let entry_id = format!("{transfer_id}:credit");
            let entry = entry(h, &entry_id, Some(transfer_id), Some(source), *amount, now);
            let event = emit(h, AccountKind::Credited, now, |e| {
                e.amount = Some(*amount);
                e.entry_id = Some(entry_id.clone());
                e.transfer_id = Some(transfer_id.clone());
                e.counterparty = Some(source.clone());
            });
            Ok(Applied::Changed {
                hold: None,
                entry: Some(entry),
                event,
            })
        }
        Command::Capture { transfer_id } => {
            // No status check: I0, a granted hold is always captured.
            let held = match hold {
                None => return Err(Rejection::UnknownHold),
                Some(x) if x.state == HoldState::Released => return Err(Rejection::HoldReleased),
                Some(x) if x.state == HoldState::Captured => {
                    panic!("hold {transfer_id} captured without its capture record")
                }
                Some(x) => x,
            };
            h.held = money::sub(h.held, held.amount)?;
            h.balance = money::sub(h.balance, held.amount)?;
            let entry_id = format!("{transfer_id}:debit");
            let counterparty = held.counterparty.clone();
            let entry = entry(
                h,
                &entry_id,
                Some(transfer_id),
                counterparty.as_ref(),
                -held.amount,
                now,
            );
            let event = emit(h, AccountKind::Captured, now, |e| {
                e.amount = Some(held.amount);
                e.entry_id = Some(entry_id.clone());
                e.transfer_id = Some(transfer_id.clone());
                e.counterparty = counterparty.clone();
            });
            let captured = Hold {
                state: HoldState::Captured,
                ..held.clone()
            };
            Ok(Applied::Changed {
                hold: Some(captured),
                entry: Some(entry),
                event,
            })
        }
        Command::Release { transfer_id } => {
            // No status check either: releasing only ever returns funds.
            let (released, reason) = match hold {
                None => (
                    Hold {
                        transfer_id: transfer_id.clone(),
                        amount: 0,
                        counterparty: None,
                        state: HoldState::Released,
                    },
                    Some("no_hold"),
                ),
                Some(x) if x.state == HoldState::Captured => return Err(Rejection::HoldCaptured),
                Some(x) if x.state == HoldState::Released => {
                    panic!("hold {transfer_id} released without its release record")
                }
                Some(x) => {
                    h.held = money::sub(h.held, x.amount)?;
                    (
                        Hold {
                            state: HoldState::Released,
                            ..x.clone()
                        },
                        None,
                    )
                }
            };
            let event = emit(h, AccountKind::HoldReleased, now, |e| {
                e.amount = Some(released.amount);
                e.transfer_id = Some(transfer_id.clone());
                e.counterparty = released.counterparty.clone();
                e.reason = reason.map(str::to_owned);
            });
            Ok(Applied::Changed {
                hold: Some(released),
                entry: None,
                event,
            })
        }
        Command::Freeze | Command::Unfreeze => {
            let target = if matches!(cmd, Command::Freeze) {
                Status::Frozen
            } else {
                Status::Active
            };
            if h.status == target {
                return Ok(Applied::Noop);
            }
            h.status = target;
            let kind = if target == Status::Frozen {
                AccountKind::Frozen
            } else {
                AccountKind::Unfrozen
            };
            let event = emit(h, kind, now, |_| {});
            Ok(Applied::Changed {
                hold: None,
                entry: None,
                event,
            })
        }
    }
}

fn entry(
    h: &AccountHeader,
    entry_id: &str,
    transfer_id: Option<&String>,
    counterparty: Option<&String>,
    amount: i64,
    now: i64,
) -> Entry {
    Entry {
        entry_id: entry_id.to_owned(),
        transfer_id: transfer_id.cloned(),
        counterparty: counterparty.cloned(),
        amount,
        balance_after: h.balance,
        // The entry is posted by the event emitted right after it.
        seq: h.seq + 1,
        occurred_at_ms: now,
    }
}

/// Emits the next event of the account's stream from the already-updated
/// header and advances the header's seq and hash.
fn emit(
    h: &mut AccountHeader,
    kind: AccountKind,
    now: i64,
    fill: impl FnOnce(&mut Event),
) -> Event {
    let seq = h.seq + 1;
    let mut e = Event::new(
        Stream::Account,
        &h.id,
        seq,
        kind.as_str(),
        now,
        &h.last_hash,
    );
    e.currency = Some(h.currency.to_string());
    e.balance_after = Some(h.balance);
    e.held_after = Some(h.held);
    e.overdraft_limit = Some(h.overdraft_limit);
    fill(&mut e);
    let e = e.seal();
    h.seq = seq;
    h.last_hash = e.hash.clone();
    e
}
