//! The event envelope, schema version 1.
//!
//! One flat envelope serves every stream so that ingest can map all events of
//! a stream kind onto one Arrow schema and the reconciler can read them with
//! one projection. The field order of [`Event`] is the JSON field order, the
//! Parquet column order and the canonical hash order; `docs/EVENTS.md` lists
//! the same fields and a test checks that the two agree.
//!
//! Guarantees a reader can rely on for a *validated* event (see
//! [`Event::validate`]): the version is known, the kind belongs to the stream,
//! exactly the fields the kind defines are present, identifiers and codes are
//! in their restricted alphabets, and `hash` is the SHA-256 of the canonical
//! encoding. Whether `prev_hash` links to the previous event and whether the
//! balances obey the invariants are properties of the *stream*, checked by the
//! reconciler, not of one event: ingest must keep a structurally valid event
//! even when it proves a violation.

use std::mem::MaybeUninit;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::currency::Currency;
use crate::decimal::{is_decimal_of, Decimal, SPILL};
use crate::ids::{check_client_key, check_derived_id, IdError};

/// The schema version this crate writes.
pub const SCHEMA_VERSION: u16 = 1;
/// Versions this crate can read. Readers must accept every older version.
pub const SCHEMA_VERSIONS_KNOWN: &[u16] = &[1];
/// The latest instant an event may name (`occurred_at_ms`, `deadline_ms`):
/// 9999-12-31T23:59:59.999Z. The lake partitions by the UTC date of
/// `occurred_at_ms` in four-digit years; a later instant (a producer
/// writing microseconds, say) would be written under a key no reader
/// lists, so it is refused instead.
pub const TIME_MS_MAX: i64 = 253_402_300_799_999;

/// The shortest time from a transfer's creation to its deadline the ledger
/// sets (the TransferDO clamps `TRANSFER_DEADLINE_MS` to these bounds).
pub const TRANSFER_DEADLINE_MS_MIN: i64 = 1_000;
/// The longest: 30 days. The reconciler refuses a `created` row whose
/// deadline is outside the bounds, and judges a transfer dangling by this
/// one at the latest (a far deadline would put off I4 for ever).
pub const TRANSFER_DEADLINE_MS_MAX: i64 = 30 * 86_400_000;
/// `prev_hash` of the first event (seq 1) of every stream.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Longest `reason` code, in bytes.
pub const REASON_BYTES_MAX: usize = 64;

/// Field names in canonical order: JSON, Parquet columns and the hash all use it.
pub const FIELDS: &[&str] = &[
    "v",
    "event_id",
    "stream",
    "stream_key",
    "seq",
    "kind",
    "occurred_at_ms",
    "currency",
    "amount",
    "balance_after",
    "held_after",
    "overdraft_limit",
    "entry_id",
    "transfer_id",
    "counterparty",
    "source",
    "destination",
    "deadline_ms",
    "reason",
    "prev_hash",
    "hash",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Account,
    Transfer,
    /// Reserved for recurring billing; schema v1 defines no subscription kinds.
    Subscription,
}

impl Stream {
    /// Every stream kind, in the lake's order.
    pub const ALL: [Stream; 3] = [Stream::Account, Stream::Transfer, Stream::Subscription];

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Account => "account",
            Stream::Transfer => "transfer",
            Stream::Subscription => "subscription",
        }
    }

    /// The stream kind [`Stream::as_str`] names `s`, if any.
    pub fn parse(s: &str) -> Option<Stream> {
        Stream::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

macro_rules! kinds {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
            pub fn parse(s: &str) -> Option<$name> {
                match s { $($wire => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

kinds!(
    /// What happened to an account. Each changes balance, held, status or a hold.
    AccountKind {
        Opened = "opened",
        Deposited = "deposited",
        Withdrawn = "withdrawn",
        HoldPlaced = "hold_placed",
        Credited = "credited",
        Captured = "captured",
        HoldReleased = "hold_released",
        Frozen = "frozen",
        Unfrozen = "unfrozen",
    }
);

kinds!(
    /// A transfer's phase changes; the kind is the phase entered.
    TransferKind {
        Created = "created",
        Reserved = "reserved",
        Credited = "credited",
        Captured = "captured",
        Failed = "failed",
        Releasing = "releasing",
        Released = "released",
    }
);

/// One event, as it travels on the queue and lands in the lake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub v: u16,
    pub event_id: String,
    pub stream: Stream,
    pub stream_key: String,
    pub seq: u64,
    pub kind: String,
    pub occurred_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance_after: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_after: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overdraft_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counterparty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

/// A borrowed event: the same fields as [`Event`], borrowing its strings
/// (from an [`Event`] or from a record batch's string arrays). The canonical
/// encoding, the hash check and validation are implemented here, once, and
/// allocate nothing on success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventRef<'a> {
    pub v: u16,
    pub event_id: &'a str,
    pub stream: Stream,
    pub stream_key: &'a str,
    pub seq: u64,
    pub kind: &'a str,
    pub occurred_at_ms: i64,
    pub currency: Option<&'a str>,
    pub amount: Option<i64>,
    pub balance_after: Option<i64>,
    pub held_after: Option<i64>,
    pub overdraft_limit: Option<i64>,
    pub entry_id: Option<&'a str>,
    pub transfer_id: Option<&'a str>,
    pub counterparty: Option<&'a str>,
    pub source: Option<&'a str>,
    pub destination: Option<&'a str>,
    pub deadline_ms: Option<i64>,
    pub reason: Option<&'a str>,
    pub prev_hash: &'a str,
    pub hash: &'a str,
}

/// The event id: stream, stream key and seq joined by `:`. Stream keys never
/// contain `:`-free ambiguity because the stream name is a fixed word and the
/// seq is the last part.
pub fn event_id(stream: Stream, stream_key: &str, seq: u64) -> String {
    format!("{}:{}:{}", stream.as_str(), stream_key, seq)
}

/// Whether `id` is [`event_id`]`(stream, key, seq)`, without allocating.
pub fn is_event_id(id: &str, stream: Stream, key: &str, seq: u64) -> bool {
    // Literal prefixes compare inline; the reconciler checks every event id.
    let rest = match stream {
        Stream::Account => id.strip_prefix("account:"),
        Stream::Transfer => id.strip_prefix("transfer:"),
        Stream::Subscription => id.strip_prefix("subscription:"),
    };
    let Some(rest) = rest.filter(|r| r.len() > key.len()) else {
        return false;
    };
    let (k, rest) = rest.as_bytes().split_at(key.len());
    same(k, key.as_bytes()) && rest[0] == b':' && is_decimal_of(&rest[1..], seq)
}

/// A structural defect in one event. Each names the field and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaError {
    UnsupportedVersion {
        v: u16,
    },
    BadId {
        field: &'static str,
        why: IdError,
    },
    SeqZero,
    EventIdMismatch {
        expected: String,
        found: String,
    },
    UnknownKind {
        stream: Stream,
        kind: String,
    },
    Missing {
        field: &'static str,
        kind: String,
    },
    Unexpected {
        field: &'static str,
        kind: String,
    },
    BadCurrency {
        found: String,
    },
    NotPositive {
        field: &'static str,
        value: i64,
    },
    Negative {
        field: &'static str,
        value: i64,
    },
    /// An instant after [`TIME_MS_MAX`].
    TooLate {
        field: &'static str,
        value: i64,
    },
    BadReason {
        found: String,
    },
    BadHash {
        field: &'static str,
        found: String,
    },
    TransferIdMismatch {
        stream_key: String,
        transfer_id: String,
    },
    EntryIdMismatch {
        expected: String,
        found: String,
    },
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use SchemaError::*;
        match self {
            UnsupportedVersion { v } if SCHEMA_VERSIONS_KNOWN.iter().all(|k| v < k) => write!(
                f,
                "schema version {v} is older than any the ledger writes (known: {SCHEMA_VERSIONS_KNOWN:?})"
            ),
            UnsupportedVersion { v } => write!(
                f,
                "schema version {v} is not known to this reader (known: {SCHEMA_VERSIONS_KNOWN:?}); upgrade the reader"
            ),
            BadId { field, why } => write!(f, "field `{field}` {why}"),
            SeqZero => write!(f, "field `seq` is 0; sequences start at 1"),
            EventIdMismatch { expected, found } => {
                write!(f, "field `event_id` is {found:?} but stream, stream_key and seq make {expected:?}")
            }
            UnknownKind { stream, kind } => {
                write!(f, "kind {kind:?} is not defined for the {} stream in schema v1", stream.as_str())
            }
            Missing { field, kind } => write!(f, "field `{field}` is required for kind {kind:?}"),
            Unexpected { field, kind } => write!(f, "field `{field}` must be absent for kind {kind:?}"),
            BadCurrency { found } => write!(f, "field `currency` is {found:?}, not an active ISO 4217 code"),
            NotPositive { field, value } => write!(f, "field `{field}` is {value}; it must be > 0"),
            Negative { field, value } => write!(f, "field `{field}` is {value}; it must be >= 0"),
            TooLate { field, value } => write!(
                f,
                "field `{field}` is {value}, after 9999-12-31T23:59:59.999Z ({TIME_MS_MAX}); instants are Unix milliseconds"
            ),
            BadReason { found } => write!(
                f,
                "field `reason` is {found:?}; reasons are snake_case codes of at most {REASON_BYTES_MAX} bytes"
            ),
            BadHash { field, found } => write!(f, "field `{field}` is {found:?}, not 64 lower-case hex digits"),
            TransferIdMismatch { stream_key, transfer_id } => write!(
                f,
                "field `transfer_id` is {transfer_id:?} but a transfer event's stream_key is {stream_key:?}"
            ),
            EntryIdMismatch { expected, found } => {
                write!(f, "field `entry_id` is {found:?} but a transfer leg's entry id is {expected:?}")
            }
        }
    }
}

impl std::error::Error for SchemaError {}

/// Why bytes from the queue are not a usable event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON, a wrong type, a missing envelope field or an unknown field.
    Json(String),
    Schema(SchemaError),
    /// The content does not hash to `hash`: altered in transit or at rest.
    HashMismatch {
        event_id: String,
        recorded: String,
        computed: String,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Json(e) => write!(f, "not a schema v1 event: {e}"),
            DecodeError::Schema(e) => write!(f, "invalid event: {e}"),
            DecodeError::HashMismatch {
                event_id,
                recorded,
                computed,
            } => write!(
                f,
                "event {event_id}: recorded hash {recorded} but the content hashes to {computed}"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

impl DecodeError {
    /// The schema version of an event a newer writer wrote, which this
    /// reader does not know (every known one is older): not a bad message
    /// but an upgrade to make, so a consumer keeps it for one that reads it.
    pub fn newer_version(&self) -> Option<u16> {
        match self {
            DecodeError::Schema(SchemaError::UnsupportedVersion { v })
                if SCHEMA_VERSIONS_KNOWN.iter().all(|k| v > k) =>
            {
                Some(*v)
            }
            _ => None,
        }
    }
}

/// Presence rule for one optional field under one kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum P {
    Req,
    Opt,
    No,
}

/// For each kind, the presence rule of the optional fields, in the order
/// currency, amount, balance_after, held_after, overdraft_limit, entry_id,
/// transfer_id, counterparty, source, destination, deadline_ms, reason.
fn account_rules(kind: AccountKind) -> [P; 12] {
    use P::*;
    // currency, amount, bal, held, limit, entry, transfer, counterparty, source, dest, deadline, reason
    match kind {
        AccountKind::Opened => [Req, No, Req, Req, Req, No, No, No, No, No, No, No],
        AccountKind::Deposited | AccountKind::Withdrawn => {
            [Req, Req, Req, Req, Req, Req, No, No, No, No, No, No]
        }
        AccountKind::HoldPlaced => [Req, Req, Req, Req, Req, No, Req, Req, No, No, No, No],
        AccountKind::Credited | AccountKind::Captured => {
            [Req, Req, Req, Req, Req, Req, Req, Req, No, No, No, No]
        }
        AccountKind::HoldReleased => [Req, Req, Req, Req, Req, No, Req, Opt, No, No, No, Opt],
        AccountKind::Frozen | AccountKind::Unfrozen => {
            [Req, No, Req, Req, Req, No, No, No, No, No, No, Opt]
        }
    }
}

fn transfer_rules(kind: TransferKind) -> [P; 12] {
    use P::*;
    match kind {
        TransferKind::Created => [Req, Req, No, No, No, No, Req, No, Req, Req, Req, No],
        TransferKind::Reserved | TransferKind::Credited | TransferKind::Captured => {
            [Req, Req, No, No, No, No, Req, No, Req, Req, No, No]
        }
        TransferKind::Failed | TransferKind::Releasing | TransferKind::Released => {
            [Req, Req, No, No, No, No, Req, No, Req, Req, No, Req]
        }
    }
}

fn is_hex64(s: &str) -> bool {
    // Folded without short-circuiting so that it vectorizes: two hashes per
    // event, every event of the lake.
    <&[u8; 64]>::try_from(s.as_bytes()).is_ok_and(|digits| {
        digits.iter().fold(true, |ok, &b| {
            ok & ((b.wrapping_sub(b'0') < 10) | (b.wrapping_sub(b'a') < 6))
        })
    })
}

fn is_reason(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= REASON_BYTES_MAX
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl Event {
    /// An unsealed event with every optional field absent. Fill the fields the
    /// kind requires, then call [`Event::seal`].
    pub fn new(
        stream: Stream,
        stream_key: &str,
        seq: u64,
        kind: &str,
        occurred_at_ms: i64,
        prev_hash: &str,
    ) -> Event {
        Event {
            v: SCHEMA_VERSION,
            event_id: event_id(stream, stream_key, seq),
            stream,
            stream_key: stream_key.to_owned(),
            seq,
            kind: kind.to_owned(),
            occurred_at_ms,
            currency: None,
            amount: None,
            balance_after: None,
            held_after: None,
            overdraft_limit: None,
            entry_id: None,
            transfer_id: None,
            counterparty: None,
            source: None,
            destination: None,
            deadline_ms: None,
            reason: None,
            prev_hash: prev_hash.to_owned(),
            hash: String::new(),
        }
    }

    /// A borrowed view of this event. The canonical encoding, the hash and
    /// validation are implemented once, on [`EventRef`].
    pub fn view(&self) -> EventRef<'_> {
        EventRef {
            v: self.v,
            event_id: &self.event_id,
            stream: self.stream,
            stream_key: &self.stream_key,
            seq: self.seq,
            kind: &self.kind,
            occurred_at_ms: self.occurred_at_ms,
            currency: self.currency.as_deref(),
            amount: self.amount,
            balance_after: self.balance_after,
            held_after: self.held_after,
            overdraft_limit: self.overdraft_limit,
            entry_id: self.entry_id.as_deref(),
            transfer_id: self.transfer_id.as_deref(),
            counterparty: self.counterparty.as_deref(),
            source: self.source.as_deref(),
            destination: self.destination.as_deref(),
            deadline_ms: self.deadline_ms,
            reason: self.reason.as_deref(),
            prev_hash: &self.prev_hash,
            hash: &self.hash,
        }
    }

    /// The canonical encoding that `hash` covers; see [`EventRef::canonical_into`].
    pub fn canonical(&self) -> String {
        self.view().canonical()
    }

    /// SHA-256 of [`Event::canonical`], lower-case hex.
    pub fn compute_hash(&self) -> String {
        self.view().compute_hash()
    }

    /// Sets `hash`; the event is final after this.
    pub fn seal(mut self) -> Event {
        self.hash = self.compute_hash();
        self
    }

    pub fn account_kind(&self) -> Option<AccountKind> {
        self.view().account_kind()
    }

    pub fn transfer_kind(&self) -> Option<TransferKind> {
        self.view().transfer_kind()
    }

    /// Structural validation of one event (see the module docs for what it
    /// does not check). Does not check the hash; [`decode`] does both.
    pub fn validate(&self) -> Result<(), SchemaError> {
        self.view().validate()
    }

    /// The JSON form sent on the queue: fields in canonical order, absent
    /// fields omitted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an Event always serializes")
    }
}

/// The `stream_key` rule of [`EventRef::validate`]: an account's key is a
/// client key, any other stream's a derived id.
pub fn check_stream_key(stream: Stream, key: &str) -> Result<(), SchemaError> {
    match stream {
        Stream::Account => check_client_key(key),
        _ => check_derived_id(key),
    }
    .map_err(|why| SchemaError::BadId {
        field: "stream_key",
        why,
    })
}

/// Bytes reserved for one canonical encoding; typical events fit.
const CANONICAL_CAPACITY: usize = 512;

/// Bytes of the canonical encoding that do not depend on the values: the
/// names of every field but `hash`, their `=` and the `\n` between lines.
const CANONICAL_FRAME_BYTES: usize = {
    let mut bytes = 0;
    let mut i = 0;
    while i < FIELDS.len() - 1 {
        bytes += FIELDS[i].len() + 2;
        i += 1;
    }
    bytes - 1
};

impl<'a> EventRef<'a> {
    /// An owned copy.
    pub fn to_event(&self) -> Event {
        Event {
            v: self.v,
            event_id: self.event_id.to_owned(),
            stream: self.stream,
            stream_key: self.stream_key.to_owned(),
            seq: self.seq,
            kind: self.kind.to_owned(),
            occurred_at_ms: self.occurred_at_ms,
            currency: self.currency.map(str::to_owned),
            amount: self.amount,
            balance_after: self.balance_after,
            held_after: self.held_after,
            overdraft_limit: self.overdraft_limit,
            entry_id: self.entry_id.map(str::to_owned),
            transfer_id: self.transfer_id.map(str::to_owned),
            counterparty: self.counterparty.map(str::to_owned),
            source: self.source.map(str::to_owned),
            destination: self.destination.map(str::to_owned),
            deadline_ms: self.deadline_ms,
            reason: self.reason.map(str::to_owned),
            prev_hash: self.prev_hash.to_owned(),
            hash: self.hash.to_owned(),
        }
    }

    /// Appends the canonical encoding that `hash` covers to `out`: one
    /// `name=value` line per field in [`FIELDS`] order except `hash`, absent
    /// values empty, joined by `\n` with no trailing newline. Restricted
    /// alphabets make it unambiguous, and it is easy to reproduce in SQL
    /// (`sha256(concat_ws(chr(10), ...))`). Allocates nothing beyond growing
    /// `out`.
    pub fn canonical_into(&self, out: &mut Vec<u8>) {
        // The reconciler encodes every event it reads (10⁷ a night), so the
        // encoding is one exact reservation, then each line's constant
        // `\nname=` and its value written by `put` (a few inlined moves, not
        // a call to memcpy per value), each integer measured first and then
        // written in place ([`Decimal`]). The byte-for-byte tests hold the
        // literals to FIELDS.
        let v = Decimal::of_u64(self.v.into());
        let seq = Decimal::of_u64(self.seq);
        let occurred = Decimal::of_i64(self.occurred_at_ms);
        let amount = Decimal::of_opt(self.amount);
        let balance = Decimal::of_opt(self.balance_after);
        let held = Decimal::of_opt(self.held_after);
        let limit = Decimal::of_opt(self.overdraft_limit);
        let deadline = Decimal::of_opt(self.deadline_ms);
        let ints = [v, seq, occurred, amount, balance, held, limit, deadline];
        let texts = [
            self.event_id,
            self.stream.as_str(),
            self.stream_key,
            self.kind,
            self.currency.unwrap_or_default(),
            self.entry_id.unwrap_or_default(),
            self.transfer_id.unwrap_or_default(),
            self.counterparty.unwrap_or_default(),
            self.source.unwrap_or_default(),
            self.destination.unwrap_or_default(),
            self.reason.unwrap_or_default(),
            self.prev_hash,
        ];
        let total = CANONICAL_FRAME_BYTES
            + ints.iter().map(|d| d.len()).sum::<usize>()
            + texts.iter().map(|t| t.len()).sum::<usize>();
        // A number may spill past its end (overwritten by the next line);
        // the `\nprev_hash=` line after the last one covers the spill, and
        // the room reserved here keeps every store in bounds regardless.
        out.reserve(total + SPILL);
        let dst = &mut out.spare_capacity_mut()[..total + SPILL];
        let mut at = 0;
        let [event_id, stream, stream_key, kind, currency, entry_id, transfer_id, counterparty, source, destination, reason, prev_hash] =
            texts;
        // Written out line by line (not a loop over the pairs), so each
        // prefix is a copy of a length known at compile time.
        macro_rules! lines {
            (@ text $value:ident) => { put(dst, &mut at, $value.as_bytes()) };
            (@ int $value:ident) => { $value.put(dst, &mut at) };
            ($($prefix:literal $how:ident $value:ident),*) => {$(
                put(dst, &mut at, $prefix.as_bytes());
                lines!(@ $how $value);
            )*};
        }
        lines!(
            "v=" int v,
            "\nevent_id=" text event_id,
            "\nstream=" text stream,
            "\nstream_key=" text stream_key,
            "\nseq=" int seq,
            "\nkind=" text kind,
            "\noccurred_at_ms=" int occurred,
            "\ncurrency=" text currency,
            "\namount=" int amount,
            "\nbalance_after=" int balance,
            "\nheld_after=" int held,
            "\noverdraft_limit=" int limit,
            "\nentry_id=" text entry_id,
            "\ntransfer_id=" text transfer_id,
            "\ncounterparty=" text counterparty,
            "\nsource=" text source,
            "\ndestination=" text destination,
            "\ndeadline_ms=" int deadline,
            "\nreason=" text reason,
            "\nprev_hash=" text prev_hash
        );
        // Not a debug assertion: the `set_len` below relies on it.
        assert_eq!(at, total, "the canonical frame is CANONICAL_FRAME_BYTES");
        let len = out.len() + total;
        // SAFETY: the `put`s above wrote `dst[0..at]` without a gap (each
        // writes every byte of its range and starts where the last ended),
        // and `at == total`: the `total` spare bytes after `out.len()` are
        // initialized, within the capacity reserved above.
        unsafe { out.set_len(len) };
    }

    /// The canonical encoding as a string; see [`EventRef::canonical_into`].
    pub fn canonical(&self) -> String {
        let mut out = Vec::with_capacity(CANONICAL_CAPACITY);
        self.canonical_into(&mut out);
        String::from_utf8(out).expect("the canonical encoding of UTF-8 fields is UTF-8")
    }

    /// SHA-256 of the canonical encoding, written into `scratch` first.
    fn digest(&self, scratch: &mut Vec<u8>) -> sha2::digest::Output<Sha256> {
        scratch.clear();
        self.canonical_into(scratch);
        Sha256::digest(scratch.as_slice())
    }

    /// SHA-256 of [`EventRef::canonical`], lower-case hex.
    pub fn compute_hash(&self) -> String {
        hex(&self.digest(&mut Vec::with_capacity(CANONICAL_CAPACITY)))
    }

    /// Whether `hash` is the SHA-256 of the canonical encoding. Clears and
    /// reuses `scratch` for the encoding, so it allocates nothing once
    /// `scratch` has grown, and compares the digest with the recorded hex
    /// without building a string: an upper-case or malformed recorded hash is
    /// a mismatch, exactly as comparing with [`EventRef::compute_hash`] is.
    pub fn hash_matches(&self, scratch: &mut Vec<u8>) -> bool {
        self.hash_is(&self.digest(scratch).into())
    }

    /// The recorded hash's 64 hex digits against `digest`: equal only if
    /// the record is the lower-case hex of the digest.
    fn hash_is(&self, digest: &[u8; 32]) -> bool {
        let Ok(recorded) = <&[u8; 64]>::try_from(self.hash.as_bytes()) else {
            return false;
        };
        let mut expected = [0u8; 64];
        for (pair, b) in expected.chunks_exact_mut(2).zip(digest) {
            pair.copy_from_slice(&hex_pair(*b));
        }
        same(&expected, recorded)
    }

    pub fn account_kind(&self) -> Option<AccountKind> {
        (self.stream == Stream::Account)
            .then(|| AccountKind::parse(self.kind))
            .flatten()
    }

    pub fn transfer_kind(&self) -> Option<TransferKind> {
        (self.stream == Stream::Transfer)
            .then(|| TransferKind::parse(self.kind))
            .flatten()
    }

    /// Structural validation of one event (see the module docs for what it
    /// does not check). Does not check the hash. Allocates only to build the
    /// error it returns.
    pub fn validate(&self) -> Result<(), SchemaError> {
        self.validate_checking_key(true)
    }

    /// [`EventRef::validate`] for one of the events of a stream whose key
    /// the caller has checked once with [`check_stream_key`], and it passed:
    /// the same result, without checking the same key again per event (the
    /// reconciler validates millions of events of a few thousand streams).
    pub fn validate_in_checked_stream(&self) -> Result<(), SchemaError> {
        self.validate_checking_key(false)
    }

    fn validate_checking_key(&self, check_key: bool) -> Result<(), SchemaError> {
        if !SCHEMA_VERSIONS_KNOWN.contains(&self.v) {
            return Err(SchemaError::UnsupportedVersion { v: self.v });
        }
        if check_key {
            check_stream_key(self.stream, self.stream_key)?;
        }
        if self.seq == 0 {
            return Err(SchemaError::SeqZero);
        }
        if !is_event_id(self.event_id, self.stream, self.stream_key, self.seq) {
            return Err(SchemaError::EventIdMismatch {
                expected: event_id(self.stream, self.stream_key, self.seq),
                found: self.event_id.to_owned(),
            });
        }
        // The kind is parsed once: the rules, the zero amount of a tombstone
        // and the leg of an entry id below all follow from it.
        let (rules, account_kind) = match self.stream {
            Stream::Account => {
                let kind = AccountKind::parse(self.kind);
                (kind.map(account_rules), kind)
            }
            Stream::Transfer => (TransferKind::parse(self.kind).map(transfer_rules), None),
            Stream::Subscription => (None, None),
        };
        let rules = rules.ok_or_else(|| SchemaError::UnknownKind {
            stream: self.stream,
            kind: self.kind.to_owned(),
        })?;
        if self.occurred_at_ms < 0 {
            return Err(SchemaError::Negative {
                field: "occurred_at_ms",
                value: self.occurred_at_ms,
            });
        }
        if self.occurred_at_ms > TIME_MS_MAX {
            return Err(SchemaError::TooLate {
                field: "occurred_at_ms",
                value: self.occurred_at_ms,
            });
        }
        let present: [(&'static str, bool); 12] = [
            ("currency", self.currency.is_some()),
            ("amount", self.amount.is_some()),
            ("balance_after", self.balance_after.is_some()),
            ("held_after", self.held_after.is_some()),
            ("overdraft_limit", self.overdraft_limit.is_some()),
            ("entry_id", self.entry_id.is_some()),
            ("transfer_id", self.transfer_id.is_some()),
            ("counterparty", self.counterparty.is_some()),
            ("source", self.source.is_some()),
            ("destination", self.destination.is_some()),
            ("deadline_ms", self.deadline_ms.is_some()),
            ("reason", self.reason.is_some()),
        ];
        for ((field, is), rule) in present.iter().zip(rules.iter()) {
            match (rule, is) {
                (P::Req, false) => {
                    return Err(SchemaError::Missing {
                        field,
                        kind: self.kind.to_owned(),
                    })
                }
                (P::No, true) => {
                    return Err(SchemaError::Unexpected {
                        field,
                        kind: self.kind.to_owned(),
                    })
                }
                _ => {}
            }
        }
        if let Some(c) = self.currency {
            Currency::parse(c).map_err(|_| SchemaError::BadCurrency {
                found: c.to_owned(),
            })?;
        }
        if let Some(a) = self.amount {
            // A released tombstone (a release that found no hold) carries 0.
            let zero_ok = account_kind == Some(AccountKind::HoldReleased);
            if a < 0 || (a == 0 && !zero_ok) {
                return Err(SchemaError::NotPositive {
                    field: "amount",
                    value: a,
                });
            }
        }
        for (field, v) in [
            ("held_after", self.held_after),
            ("overdraft_limit", self.overdraft_limit),
            ("deadline_ms", self.deadline_ms),
        ] {
            if let Some(v) = v {
                if v < 0 {
                    return Err(SchemaError::Negative { field, value: v });
                }
            }
        }
        if let Some(d) = self.deadline_ms.filter(|&d| d > TIME_MS_MAX) {
            return Err(SchemaError::TooLate {
                field: "deadline_ms",
                value: d,
            });
        }
        // A transfer stream's transfer_id must be its stream_key (checked
        // below), and that passed check_derived_id above: when they are equal
        // there is nothing left to find.
        let transfer_id_is_key = self.stream == Stream::Transfer
            && self
                .transfer_id
                .is_some_and(|t| same(t.as_bytes(), self.stream_key.as_bytes()));
        for (field, v) in [
            ("entry_id", self.entry_id),
            (
                "transfer_id",
                self.transfer_id.filter(|_| !transfer_id_is_key),
            ),
            ("counterparty", self.counterparty),
            ("source", self.source),
            ("destination", self.destination),
        ] {
            if let Some(v) = v {
                check_derived_id(v).map_err(|why| SchemaError::BadId { field, why })?;
            }
        }
        if let Some(r) = self.reason {
            if !is_reason(r) {
                return Err(SchemaError::BadReason {
                    found: r.to_owned(),
                });
            }
        }
        if self.stream == Stream::Transfer && !transfer_id_is_key {
            return Err(SchemaError::TransferIdMismatch {
                stream_key: self.stream_key.to_owned(),
                transfer_id: self.transfer_id.unwrap_or_default().to_owned(),
            });
        }
        let leg = match account_kind {
            Some(AccountKind::Credited) => Some("credit"),
            Some(AccountKind::Captured) => Some("debit"),
            _ => None,
        };
        if let (Some(leg), Some(t), Some(e)) = (leg, self.transfer_id, self.entry_id) {
            // The leg's entry id is `{transfer_id}:{leg}`.
            if e.strip_prefix(t).and_then(|r| r.strip_prefix(':')) != Some(leg) {
                return Err(SchemaError::EntryIdMismatch {
                    expected: format!("{t}:{leg}"),
                    found: e.to_owned(),
                });
            }
        }
        for (field, h) in [("prev_hash", self.prev_hash), ("hash", self.hash)] {
            if !is_hex64(h) {
                return Err(SchemaError::BadHash {
                    field,
                    found: h.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// The schema version `bytes` claim when it is newer than every version
/// this reader knows: a JSON object whose one `v` member is such a whole
/// number, whatever its other members (a newer version adds fields). `None`
/// for anything else, a `v` named twice included (malformed, not newer).
pub fn newer_version_of(bytes: &[u8]) -> Option<u16> {
    struct Probe(Option<u64>);
    impl<'de> serde::Deserialize<'de> for Probe {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Probe, D::Error> {
            struct Members;
            impl<'de> serde::de::Visitor<'de> for Members {
                type Value = Probe;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut a: A,
                ) -> Result<Probe, A::Error> {
                    let mut v = None;
                    while let Some(k) = a.next_key::<std::borrow::Cow<'de, str>>()? {
                        if k == "v" {
                            if v.is_some() {
                                return Err(serde::de::Error::custom("`v` named twice"));
                            }
                            v = Some(a.next_value::<u64>()?);
                        } else {
                            // Read whole, not skipped: a member that is not JSON (bytes
                            // not UTF-8, a number out of range) makes the message
                            // malformed, not a newer writer's (rev-s57-fixes 1).
                            a.next_value::<serde_json::Value>()?;
                        }
                    }
                    Ok(Probe(v))
                }
            }
            d.deserialize_map(Members)
        }
    }
    let v = serde_json::from_slice::<Probe>(bytes).ok()?.0?;
    let v = u16::try_from(v).ok()?;
    SCHEMA_VERSIONS_KNOWN.iter().all(|k| v > *k).then_some(v)
}

/// Decodes and fully checks one queue message: JSON shape, schema rules and
/// the event's own hash.
pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let ev: Event = serde_json::from_slice(bytes).map_err(|e| {
        // A newer version adds fields, which this version's shape refuses as unknown: the
        // version says what the message is (an upgrade to make), not the first unknown field.
        match newer_version_of(bytes) {
            Some(v) => DecodeError::Schema(SchemaError::UnsupportedVersion { v }),
            None => DecodeError::Json(e.to_string()),
        }
    })?;
    let view = ev.view();
    view.validate().map_err(DecodeError::Schema)?;
    if !view.hash_matches(&mut Vec::with_capacity(CANONICAL_CAPACITY)) {
        return Err(DecodeError::HashMismatch {
            event_id: ev.event_id.clone(),
            recorded: ev.hash.clone(),
            computed: view.compute_hash(),
        });
    }
    Ok(ev)
}

/// A break in one stream's sequence or hash chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainError {
    Gap {
        stream_key: String,
        expected_seq: u64,
        found_seq: u64,
    },
    BrokenLink {
        event_id: String,
        prev_hash: String,
        previous_hash: String,
    },
    BadHash {
        event_id: String,
    },
    MixedStreams {
        event_id: String,
    },
}

impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainError::Gap { stream_key, expected_seq, found_seq } => {
                write!(f, "stream {stream_key}: expected seq {expected_seq}, found {found_seq}")
            }
            ChainError::BrokenLink { event_id, prev_hash, previous_hash } => write!(
                f,
                "event {event_id}: prev_hash {prev_hash} does not match the previous event's hash {previous_hash}"
            ),
            ChainError::BadHash { event_id } => write!(f, "event {event_id}: hash does not match its content"),
            ChainError::MixedStreams { event_id } => write!(f, "event {event_id} belongs to another stream"),
        }
    }
}

/// Incremental verifier of one stream: seqs contiguous from 1, each event's
/// hash correct and each `prev_hash` equal to the previous event's hash.
#[derive(Debug, Clone)]
pub struct ChainCursor {
    pub stream: Stream,
    pub stream_key: String,
    pub last_seq: u64,
    pub last_hash: String,
}

impl ChainCursor {
    pub fn genesis(stream: Stream, stream_key: &str) -> ChainCursor {
        ChainCursor {
            stream,
            stream_key: stream_key.to_owned(),
            last_seq: 0,
            last_hash: GENESIS_HASH.to_owned(),
        }
    }

    pub fn push(&mut self, ev: &Event) -> Result<(), ChainError> {
        if ev.stream != self.stream || ev.stream_key != self.stream_key {
            return Err(ChainError::MixedStreams {
                event_id: ev.event_id.clone(),
            });
        }
        if ev.seq != self.last_seq + 1 {
            return Err(ChainError::Gap {
                stream_key: self.stream_key.clone(),
                expected_seq: self.last_seq + 1,
                found_seq: ev.seq,
            });
        }
        if ev.prev_hash != self.last_hash {
            return Err(ChainError::BrokenLink {
                event_id: ev.event_id.clone(),
                prev_hash: ev.prev_hash.clone(),
                previous_hash: self.last_hash.clone(),
            });
        }
        if !ev
            .view()
            .hash_matches(&mut Vec::with_capacity(CANONICAL_CAPACITY))
        {
            return Err(ChainError::BadHash {
                event_id: ev.event_id.clone(),
            });
        }
        self.last_seq = ev.seq;
        self.last_hash = ev.hash.clone();
        Ok(())
    }
}

/// Checks the recorded hashes of many events at once, as
/// [`EventRef::hash_matches`] checks one: the reconciler's hot path (it
/// hashes every event of the lake). The canonical encodings go into one
/// buffer and are hashed together, so the SHA-256 of several events can run
/// side by side. Reused across calls, it allocates only while it grows.
#[derive(Debug, Default)]
pub struct HashCheck {
    text: Vec<u8>,
    ends: Vec<usize>,
    digests: Vec<[u8; 32]>,
}

/// How many events [`HashCheck::check`] encodes and then hashes at a time:
/// their encodings (~400 bytes each, ~100 KB) stay in the core's L2 cache
/// between being written and being hashed. Encoding a whole chunk of rows
/// first (thousands of events, megabytes) sent them out to L3 or memory
/// and back.
const HASH_BLOCK_EVENTS: usize = 256;

impl HashCheck {
    /// Appends to `ok`, for each of `events` in order, whether its recorded
    /// hash is the SHA-256 of its canonical encoding.
    pub fn check(&mut self, events: &[&EventRef<'_>], ok: &mut Vec<bool>) {
        ok.reserve(events.len());
        for block in events.chunks(HASH_BLOCK_EVENTS) {
            self.check_block(block, ok);
        }
    }

    fn check_block(&mut self, events: &[&EventRef<'_>], ok: &mut Vec<bool>) {
        self.text.clear();
        self.ends.clear();
        for e in events {
            e.canonical_into(&mut self.text);
            self.ends.push(self.text.len());
        }
        let mut start = 0;
        let texts: Vec<&[u8]> = self
            .ends
            .iter()
            .map(|&end| {
                let t = &self.text[start..end];
                start = end;
                t
            })
            .collect();
        self.digests.clear();
        self.digests.resize(texts.len(), [0; 32]);
        crate::sha256_lanes::sha256_many(&texts, &mut self.digests);
        ok.extend(events.iter().zip(&self.digests).map(|(e, d)| e.hash_is(d)));
    }
}

/// Writes `v` at `dst[*at..]` and moves `*at` past it. The canonical
/// encoding's values are short (3 to 64 bytes), so the copy is a few
/// fixed-size moves of chunks that may overlap, inlined, rather than a call
/// to `memcpy` per value.
#[inline(always)]
fn put(dst: &mut [MaybeUninit<u8>], at: &mut usize, v: &[u8]) {
    let n = v.len();
    let d = &mut dst[*at..*at + n];
    if n >= 16 {
        let mut i = 0;
        while i + 16 < n {
            chunk::<16>(&mut d[i..i + 16], &v[i..i + 16]);
            i += 16;
        }
        chunk::<16>(&mut d[n - 16..], &v[n - 16..]);
    } else if n >= 8 {
        chunk::<8>(&mut d[..8], &v[..8]);
        chunk::<8>(&mut d[n - 8..], &v[n - 8..]);
    } else if n >= 4 {
        chunk::<4>(&mut d[..4], &v[..4]);
        chunk::<4>(&mut d[n - 4..], &v[n - 4..]);
    } else {
        for (d, s) in d.iter_mut().zip(v) {
            d.write(*s);
        }
    }
    *at += n;
}

/// Copies `s` (exactly `N` bytes) into `d` (exactly `N` slots) as one move.
#[inline(always)]
fn chunk<const N: usize>(d: &mut [MaybeUninit<u8>], s: &[u8]) {
    let s: [u8; N] = s.try_into().expect("a chunk of N bytes");
    let d: &mut [MaybeUninit<u8>; N] = d.try_into().expect("room for N bytes");
    *d = s.map(MaybeUninit::new);
}

/// `a == b` for short byte strings, in 8-byte words (the last one
/// overlapping) rather than a call to `memcmp`: the reconciler compares keys
/// and hashes of every row it reads.
#[inline(always)]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        if n < 4 {
            return a.iter().zip(b).all(|(x, y)| x == y);
        }
        let word =
            |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().expect("4 bytes"));
        return (word(a, 0) ^ word(b, 0)) | (word(a, n - 4) ^ word(b, n - 4)) == 0;
    }
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let mut diff = 0;
    let mut i = 0;
    while i + 8 < n {
        diff |= word(a, i) ^ word(b, i);
        i += 8;
    }
    diff | (word(a, n - 8) ^ word(b, n - 8)) == 0
}

/// The two lower-case hex digits of `b`, by arithmetic (a form the compiler
/// vectorizes over a digest, unlike a table lookup).
#[inline(always)]
fn hex_pair(b: u8) -> [u8; 2] {
    let digit = |n: u8| n + b'0' + if n > 9 { b'a' - b'0' - 10 } else { 0 };
    [digit(b >> 4), digit(b & 15)]
}

/// `bytes` as lower-case hex (the form of every hash and digest the ledger
/// writes).
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let [hi, lo] = hex_pair(*b);
        s.push(hi as char);
        s.push(lo as char);
    }
    s
}

#[cfg(test)]
mod tests;
