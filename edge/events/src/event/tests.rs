//! [`EventRef`] against copies of the implementations it replaced: the same
//! canonical bytes, hashes and validation results for the golden vectors and
//! for hand-built events that cover every optional field and the integer
//! extremes.

use super::*;
use crate::ids::tests::old_check;
use crate::ids::{CLIENT_KEY_BYTES_MAX, DERIVED_ID_BYTES_MAX};

/// `ids::check_client_key` before its fast path.
fn old_check_client_key(s: &str) -> Result<(), IdError> {
    old_check(s, CLIENT_KEY_BYTES_MAX, false)
}

/// `ids::check_derived_id` before its fast path.
fn old_check_derived_id(s: &str) -> Result<(), IdError> {
    old_check(s, DERIVED_ID_BYTES_MAX, true)
}

/// `is_hex64` before it was folded for the vectorizer.
fn old_is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The body of `Event::canonical` before [`EventRef`], kept as the reference.
fn old_canonical(ev: &Event) -> String {
    fn o<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map(|x| x.to_string()).unwrap_or_default()
    }
    let values: [String; 20] = [
        ev.v.to_string(),
        ev.event_id.clone(),
        ev.stream.as_str().to_owned(),
        ev.stream_key.clone(),
        ev.seq.to_string(),
        ev.kind.clone(),
        ev.occurred_at_ms.to_string(),
        o(&ev.currency),
        o(&ev.amount),
        o(&ev.balance_after),
        o(&ev.held_after),
        o(&ev.overdraft_limit),
        o(&ev.entry_id),
        o(&ev.transfer_id),
        o(&ev.counterparty),
        o(&ev.source),
        o(&ev.destination),
        o(&ev.deadline_ms),
        o(&ev.reason),
        ev.prev_hash.clone(),
    ];
    let mut out = String::with_capacity(512);
    for (i, (name, value)) in FIELDS.iter().zip(values.iter()).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
    out
}

/// The old `compute_hash`, with its own hex formatting.
fn old_compute_hash(ev: &Event) -> String {
    Sha256::digest(old_canonical(ev).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The body of `Event::validate` before [`EventRef`], kept as the reference.
fn old_validate(ev: &Event) -> Result<(), SchemaError> {
    let old_account_kind = (ev.stream == Stream::Account)
        .then(|| AccountKind::parse(&ev.kind))
        .flatten();
    if !SCHEMA_VERSIONS_KNOWN.contains(&ev.v) {
        return Err(SchemaError::UnsupportedVersion { v: ev.v });
    }
    let key_check = match ev.stream {
        Stream::Account => old_check_client_key(&ev.stream_key),
        _ => old_check_derived_id(&ev.stream_key),
    };
    key_check.map_err(|why| SchemaError::BadId {
        field: "stream_key",
        why,
    })?;
    if ev.seq == 0 {
        return Err(SchemaError::SeqZero);
    }
    let expected = event_id(ev.stream, &ev.stream_key, ev.seq);
    if ev.event_id != expected {
        return Err(SchemaError::EventIdMismatch {
            expected,
            found: ev.event_id.clone(),
        });
    }
    let rules = match ev.stream {
        Stream::Account => AccountKind::parse(&ev.kind).map(account_rules),
        Stream::Transfer => TransferKind::parse(&ev.kind).map(transfer_rules),
        Stream::Subscription => None,
    }
    .ok_or_else(|| SchemaError::UnknownKind {
        stream: ev.stream,
        kind: ev.kind.clone(),
    })?;
    if ev.occurred_at_ms < 0 {
        return Err(SchemaError::Negative {
            field: "occurred_at_ms",
            value: ev.occurred_at_ms,
        });
    }
    if ev.occurred_at_ms > 253_402_300_799_999 {
        return Err(SchemaError::TooLate {
            field: "occurred_at_ms",
            value: ev.occurred_at_ms,
        });
    }
    let present: [(&'static str, bool); 12] = [
        ("currency", ev.currency.is_some()),
        ("amount", ev.amount.is_some()),
        ("balance_after", ev.balance_after.is_some()),
        ("held_after", ev.held_after.is_some()),
        ("overdraft_limit", ev.overdraft_limit.is_some()),
        ("entry_id", ev.entry_id.is_some()),
        ("transfer_id", ev.transfer_id.is_some()),
        ("counterparty", ev.counterparty.is_some()),
        ("source", ev.source.is_some()),
        ("destination", ev.destination.is_some()),
        ("deadline_ms", ev.deadline_ms.is_some()),
        ("reason", ev.reason.is_some()),
    ];
    for ((field, is), rule) in present.iter().zip(rules.iter()) {
        match (rule, is) {
            (P::Req, false) => {
                return Err(SchemaError::Missing {
                    field,
                    kind: ev.kind.clone(),
                })
            }
            (P::No, true) => {
                return Err(SchemaError::Unexpected {
                    field,
                    kind: ev.kind.clone(),
                })
            }
            _ => {}
        }
    }
    if let Some(c) = &ev.currency {
        Currency::parse(c).map_err(|_| SchemaError::BadCurrency { found: c.clone() })?;
    }
    if let Some(a) = ev.amount {
        let zero_ok = old_account_kind == Some(AccountKind::HoldReleased);
        if a < 0 || (a == 0 && !zero_ok) {
            return Err(SchemaError::NotPositive {
                field: "amount",
                value: a,
            });
        }
    }
    for (field, v) in [
        ("held_after", ev.held_after),
        ("overdraft_limit", ev.overdraft_limit),
        ("deadline_ms", ev.deadline_ms),
    ] {
        if let Some(v) = v {
            if v < 0 {
                return Err(SchemaError::Negative { field, value: v });
            }
        }
    }
    if let Some(d) = ev.deadline_ms.filter(|&d| d > 253_402_300_799_999) {
        return Err(SchemaError::TooLate {
            field: "deadline_ms",
            value: d,
        });
    }
    for (field, v) in [
        ("entry_id", &ev.entry_id),
        ("transfer_id", &ev.transfer_id),
        ("counterparty", &ev.counterparty),
        ("source", &ev.source),
        ("destination", &ev.destination),
    ] {
        if let Some(v) = v {
            old_check_derived_id(v).map_err(|why| SchemaError::BadId { field, why })?;
        }
    }
    if let Some(r) = &ev.reason {
        if !is_reason(r) {
            return Err(SchemaError::BadReason { found: r.clone() });
        }
    }
    if ev.stream == Stream::Transfer && ev.transfer_id.as_deref() != Some(ev.stream_key.as_str()) {
        return Err(SchemaError::TransferIdMismatch {
            stream_key: ev.stream_key.clone(),
            transfer_id: ev.transfer_id.clone().unwrap_or_default(),
        });
    }
    let leg = match old_account_kind {
        Some(AccountKind::Credited) => Some("credit"),
        Some(AccountKind::Captured) => Some("debit"),
        _ => None,
    };
    if let (Some(leg), Some(t), Some(e)) = (leg, &ev.transfer_id, &ev.entry_id) {
        let expected = format!("{t}:{leg}");
        if *e != expected {
            return Err(SchemaError::EntryIdMismatch {
                expected,
                found: e.clone(),
            });
        }
    }
    for (field, h) in [("prev_hash", &ev.prev_hash), ("hash", &ev.hash)] {
        if !old_is_hex64(h) {
            return Err(SchemaError::BadHash {
                field,
                found: h.clone(),
            });
        }
    }
    Ok(())
}

fn golden() -> Vec<Event> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/v1");
    let mut evs = Vec::new();
    for name in ["account.jsonl", "transfer.jsonl"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        evs.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Event>(l).unwrap()),
        );
    }
    assert_eq!(evs.len(), 21);
    evs
}

/// Every optional field present, with extreme and negative values, then each
/// optional field absent in turn, then all absent; sealed with the old hash.
fn hand_built() -> Vec<Event> {
    let mut full = Event::new(
        Stream::Transfer,
        "t.acme.k1",
        u64::MAX,
        "created",
        i64::MIN,
        GENESIS_HASH,
    );
    full.v = u16::MAX;
    full.currency = Some("EUR".into());
    full.amount = Some(i64::MIN);
    full.balance_after = Some(i64::MAX);
    full.held_after = Some(-1);
    full.overdraft_limit = Some(0);
    full.entry_id = Some("t.acme.k1:debit".into());
    full.transfer_id = Some("t.acme.k1".into());
    full.counterparty = Some("acme.acc-2".into());
    full.source = Some("acme.acc-1".into());
    full.destination = Some("acme.acc-2".into());
    full.deadline_ms = Some(i64::MAX);
    full.reason = Some("insufficient_funds".into());
    let absent: [Edit; 12] = [
        |e| e.currency = None,
        |e| e.amount = None,
        |e| e.balance_after = None,
        |e| e.held_after = None,
        |e| e.overdraft_limit = None,
        |e| e.entry_id = None,
        |e| e.transfer_id = None,
        |e| e.counterparty = None,
        |e| e.source = None,
        |e| e.destination = None,
        |e| e.deadline_ms = None,
        |e| e.reason = None,
    ];
    let mut evs = vec![full.clone()];
    let mut none = full.clone();
    for clear in absent {
        let mut e = full.clone();
        clear(&mut e);
        evs.push(e);
        clear(&mut none);
    }
    evs.push(none);
    let mut small = Event::new(Stream::Account, "a", 0, "", 0, "");
    small.v = 0;
    small.amount = Some(-1);
    small.deadline_ms = Some(i64::MIN);
    evs.push(small);
    let mut one = Event::new(Stream::Subscription, "s:1", 1, "x", -1, "p");
    one.balance_after = Some(i64::MIN + 1);
    one.held_after = Some(i64::MAX - 1);
    evs.push(one);
    for e in &mut evs {
        e.hash = old_compute_hash(e);
    }
    evs
}

fn all_events() -> Vec<Event> {
    let mut evs = golden();
    evs.extend(hand_built());
    evs
}

#[test]
fn canonical_and_hash_are_byte_for_byte_the_old_ones() {
    for ev in all_events() {
        let old = old_canonical(&ev);
        let view = ev.view();
        assert_eq!(view.canonical(), old);
        assert_eq!(ev.canonical(), old);
        // canonical_into appends and leaves what was there.
        let mut out = b"prefix|".to_vec();
        view.canonical_into(&mut out);
        assert_eq!(out, [b"prefix|".as_slice(), old.as_bytes()].concat());
        assert_eq!(view.compute_hash(), old_compute_hash(&ev));
        assert_eq!(ev.compute_hash(), old_compute_hash(&ev));
        assert_eq!(view.to_event(), ev);
        assert_eq!(view.account_kind(), ev.account_kind());
        assert_eq!(view.transfer_kind(), ev.transfer_kind());
    }
}

#[test]
fn canonical_frame_bytes_are_the_encoding_without_values() {
    let mut empty = Event::new(Stream::Account, "", 0, "", 0, "");
    empty.v = 0;
    // The values left: the three integers that are never absent ("0"), the
    // stream ("account") and the event id ("account::0").
    let values_bytes = 3 + "account".len() + "account::0".len();
    assert_eq!(
        empty.canonical().len(),
        CANONICAL_FRAME_BYTES + values_bytes
    );
    assert_eq!(old_canonical(&empty), empty.canonical());
}

/// One edit per field that the canonical encoding covers; each changes it.
/// An in-place change to an event.
type Edit = fn(&mut Event);

const EDITS: [(&str, Edit); 20] = [
    ("v", |e| e.v = e.v.wrapping_add(1)),
    ("event_id", |e| e.event_id.push('x')),
    ("stream", |e| {
        e.stream = match e.stream {
            Stream::Account => Stream::Transfer,
            _ => Stream::Account,
        }
    }),
    ("stream_key", |e| e.stream_key.push('x')),
    ("seq", |e| e.seq = e.seq.wrapping_add(1)),
    ("kind", |e| e.kind.push('x')),
    ("occurred_at_ms", |e| {
        e.occurred_at_ms = e.occurred_at_ms.wrapping_add(1)
    }),
    ("currency", |e| toggle_str(&mut e.currency)),
    ("amount", |e| toggle_int(&mut e.amount)),
    ("balance_after", |e| toggle_int(&mut e.balance_after)),
    ("held_after", |e| toggle_int(&mut e.held_after)),
    ("overdraft_limit", |e| toggle_int(&mut e.overdraft_limit)),
    ("entry_id", |e| toggle_str(&mut e.entry_id)),
    ("transfer_id", |e| toggle_str(&mut e.transfer_id)),
    ("counterparty", |e| toggle_str(&mut e.counterparty)),
    ("source", |e| toggle_str(&mut e.source)),
    ("destination", |e| toggle_str(&mut e.destination)),
    ("deadline_ms", |e| toggle_int(&mut e.deadline_ms)),
    ("reason", |e| toggle_str(&mut e.reason)),
    ("prev_hash", |e| {
        e.prev_hash = e.prev_hash.replacen('0', "1", 1) + "x"
    }),
];

fn toggle_str(v: &mut Option<String>) {
    *v = match v {
        Some(_) => None,
        None => Some("x".into()),
    }
}

fn toggle_int(v: &mut Option<i64>) {
    *v = match v {
        Some(x) => Some(x.wrapping_add(1)),
        None => Some(0),
    }
}

#[test]
fn hash_matches_sealed_events_and_nothing_else() {
    let mut scratch = b"leftovers".to_vec();
    for ev in all_events() {
        assert!(ev.view().hash_matches(&mut scratch), "{}", ev.event_id);
        assert_eq!(
            scratch,
            old_canonical(&ev).as_bytes(),
            "scratch holds the encoding"
        );
        for (field, edit) in EDITS {
            let mut bad = ev.clone();
            edit(&mut bad);
            assert_ne!(old_canonical(&bad), old_canonical(&ev), "edit of {field}");
            assert!(!bad.view().hash_matches(&mut scratch), "{field} changed");
            assert_eq!(bad.view().compute_hash(), old_compute_hash(&bad));
        }
        let mut recorded = |hash: String| {
            let mut e = ev.clone();
            e.hash = hash;
            e.view().hash_matches(&mut scratch)
        };
        assert!(!recorded(ev.hash.to_uppercase()), "upper case");
        assert!(!recorded(ev.hash[..63].to_owned()), "63 digits");
        assert!(!recorded(format!("{}0", ev.hash)), "65 digits");
        assert!(!recorded(format!("{}g", &ev.hash[..63])), "not hex");
        assert!(!recorded(String::new()), "empty");
        assert!(recorded(ev.hash.clone()));
    }
}

#[test]
fn hash_check_of_many_agrees_with_hash_matches_one_by_one() {
    // Sealed events, each edited field, and malformed recorded hashes, in one
    // batch (several times over, so a batch is longer than any lane count)
    // and in batches of every size up to 40.
    let mut events = Vec::new();
    for ev in all_events() {
        for (_, edit) in EDITS {
            let mut bad = ev.clone();
            edit(&mut bad);
            events.push(bad);
        }
        for hash in [
            ev.hash.to_uppercase(),
            ev.hash[..63].to_owned(),
            String::new(),
        ] {
            let mut e = ev.clone();
            e.hash = hash;
            events.push(e);
        }
        events.push(ev);
    }
    // Past two of the blocks `check` encodes and hashes at a time.
    let n = (events.len() * 3).max(2 * HASH_BLOCK_EVENTS + 7);
    let events: Vec<Event> = events.iter().cycle().take(n).cloned().collect();
    let mut scratch = Vec::new();
    let want: Vec<bool> = events
        .iter()
        .map(|e| e.view().hash_matches(&mut scratch))
        .collect();
    assert!(want.iter().any(|&ok| ok) && want.iter().any(|&ok| !ok));
    let views: Vec<EventRef> = events.iter().map(Event::view).collect();
    let refs: Vec<&EventRef> = views.iter().collect();
    let mut check = HashCheck::default();
    let mut got = vec![true]; // appended to, not replaced
    check.check(&refs, &mut got);
    assert_eq!(got[1..], want[..]);
    let mut none = Vec::new();
    check.check(&[], &mut none);
    assert!(none.is_empty());
    for n in 1..=40 {
        let mut got = Vec::new();
        for batch in refs.chunks(n) {
            check.check(batch, &mut got);
        }
        assert_eq!(got, want, "batches of {n}");
    }
}

#[test]
fn hash_matches_reuses_the_scratch_buffer() {
    let evs = all_events();
    let mut scratch = Vec::new();
    for ev in &evs {
        ev.view().hash_matches(&mut scratch);
    }
    let (ptr, cap) = (scratch.as_ptr(), scratch.capacity());
    for ev in &evs {
        assert!(ev.view().hash_matches(&mut scratch));
        assert_eq!((scratch.as_ptr(), scratch.capacity()), (ptr, cap));
    }
}

/// Edits that make a valid event invalid, covering every [`SchemaError`]
/// variant (the first nine are the cases `tests/golden.rs` sends through
/// `decode`).
const BREAKS: &[Edit] = &[
    // Microseconds where milliseconds belong: year 57971.
    |e| e.occurred_at_ms = e.occurred_at_ms.saturating_mul(1000),
    |e| e.occurred_at_ms = 253_402_300_800_000,
    |e| e.occurred_at_ms = 253_402_300_799_999,
    |e| e.deadline_ms = e.deadline_ms.map(|d| d.saturating_mul(1000)),
    |e| e.v = 2,
    |e| e.kind = "created".into(),
    |e| e.transfer_id = None,
    |e| e.reason = Some("x".into()),
    |e| e.currency = Some("usd".into()),
    |e| e.amount = Some(-5),
    |e| e.event_id = event_id(e.stream, &e.stream_key, e.seq.wrapping_add(1)),
    |e| {
        e.seq = 0;
        e.event_id = event_id(e.stream, &e.stream_key, 0);
    },
    |e| e.hash = "abc".into(),
    |e| e.v = 0,
    |e| {
        e.stream_key = "bad key".into();
        e.event_id = event_id(e.stream, &e.stream_key, e.seq);
    },
    |e| {
        e.stream_key = String::new();
        e.event_id = event_id(e.stream, &e.stream_key, e.seq);
    },
    |e| {
        e.stream_key = "a:b".into();
        e.event_id = event_id(e.stream, &e.stream_key, e.seq);
    },
    |e| e.event_id.push(':'),
    |e| e.event_id = e.event_id.replacen(':', "::", 1),
    |e| e.event_id = String::new(),
    |e| e.stream = Stream::Subscription,
    |e| {
        e.stream = Stream::Subscription;
        e.event_id = event_id(e.stream, &e.stream_key, e.seq);
    },
    |e| e.kind = "Opened".into(),
    |e| e.occurred_at_ms = -1,
    |e| e.occurred_at_ms = i64::MIN,
    |e| e.currency = None,
    |e| e.currency = Some("XXQ".into()),
    |e| e.amount = None,
    |e| e.amount = Some(0),
    |e| e.amount = e.amount.map(|_| i64::MIN),
    |e| e.balance_after = e.balance_after.map_or(Some(-1), |_| None),
    |e| e.held_after = e.held_after.map(|_| -1),
    |e| e.overdraft_limit = e.overdraft_limit.map(|_| i64::MIN),
    |e| e.deadline_ms = e.deadline_ms.map(|_| -7),
    |e| e.deadline_ms = Some(5),
    |e| e.entry_id = e.entry_id.as_ref().map(|x| format!("{x}x")),
    |e| e.entry_id = e.entry_id.as_ref().map(|x| x.replace(':', "")),
    |e| e.entry_id = e.entry_id.as_ref().map(|_| "bad id".into()),
    |e| e.entry_id = e.transfer_id.clone(),
    |e| e.entry_id = e.entry_id.as_ref().map(|x| x.replace("debit", "credit")),
    |e| e.entry_id = e.entry_id.as_ref().map(|x| x.replace("credit", "debit")),
    |e| e.transfer_id = e.transfer_id.as_ref().map(|x| format!("{x}2")),
    |e| e.transfer_id = e.transfer_id.as_ref().map(|_| String::new()),
    |e| e.counterparty = e.counterparty.as_ref().map(|_| "a b".into()),
    |e| e.source = e.source.as_ref().map(|_| "x".repeat(201)),
    |e| e.destination = e.destination.as_ref().map(|_| "é".into()),
    |e| e.reason = e.reason.as_ref().map(|_| "Bad".into()),
    |e| e.reason = e.reason.as_ref().map(|_| String::new()),
    |e| e.reason = e.reason.as_ref().map(|_| "r".repeat(65)),
    |e| e.reason = e.reason.as_ref().map(|_| "r".repeat(64)),
    |e| e.prev_hash = e.prev_hash.to_uppercase().replace('0', "A"),
    |e| e.prev_hash.truncate(63),
    |e| e.hash = e.hash.to_uppercase(),
    |e| e.hash.push('0'),
    // The bytes just outside the hex ranges, first and last, and a
    // non-ASCII char that keeps the length at 64 bytes.
    |e| e.hash = format!("/{}", &e.hash[1..]),
    |e| e.hash = format!("{}:", &e.hash[..63]),
    |e| e.hash = format!("`{}", &e.hash[1..]),
    |e| e.hash = format!("{}g", &e.hash[..63]),
    |e| e.prev_hash = e.prev_hash.chars().take(62).collect::<String>() + "é",
    // transfer_id is checked as an id only where it is not the (already
    // checked) stream key: each way it can differ from the key, and an
    // account event naming its own key as the transfer.
    |e| e.transfer_id = e.transfer_id.as_ref().map(|_| "t acme".into()),
    |e| e.transfer_id = e.transfer_id.as_ref().map(|_| "t".repeat(201)),
    |e| e.transfer_id = e.transfer_id.as_ref().map(|x| format!("{x}:é")),
    |e| e.transfer_id = e.transfer_id.as_ref().map(|x| format!("{x}:x")),
    |e| e.transfer_id = Some(e.stream_key.clone()),
    |e| {
        e.stream_key = "t.acme:é".into();
        e.event_id = event_id(e.stream, &e.stream_key, e.seq);
        e.transfer_id = Some(e.stream_key.clone());
    },
    |e| {
        e.stream_key = "t".repeat(200);
        e.event_id = event_id(e.stream, &e.stream_key, e.seq);
        e.transfer_id = Some(e.stream_key.clone());
    },
];

#[test]
fn validate_gives_the_old_results_in_the_old_order() {
    let evs = all_events();
    for ev in &golden() {
        assert_eq!(ev.view().validate(), Ok(()));
    }
    let mut errors = std::collections::BTreeSet::new();
    for ev in &evs {
        let cases = std::iter::once(ev.clone()).chain(BREAKS.iter().map(|brk| {
            let mut e = ev.clone();
            brk(&mut e);
            e
        }));
        for e in cases {
            let old = old_validate(&e);
            assert_eq!(e.view().validate(), old, "{e:?}");
            assert_eq!(e.validate(), old);
            // Once its stream's key passed, the rest gives the same result;
            // a key that fails is what validate reports (after the version).
            match super::check_stream_key(e.stream, &e.stream_key) {
                Ok(()) => assert_eq!(e.view().validate_in_checked_stream(), old, "{e:?}"),
                Err(key) => assert!(
                    matches!(old, Err(SchemaError::UnsupportedVersion { .. })) || old == Err(key),
                    "{e:?}"
                ),
            }
            if let Err(err) = old {
                errors.insert(
                    format!("{err:?}")
                        .split([' ', '('])
                        .next()
                        .unwrap()
                        .to_owned(),
                );
            }
        }
    }
    // Every variant was produced at least once.
    assert_eq!(
        errors.into_iter().collect::<Vec<_>>(),
        [
            "BadCurrency",
            "BadHash",
            "BadId",
            "BadReason",
            "EntryIdMismatch",
            "EventIdMismatch",
            "Missing",
            "Negative",
            "NotPositive",
            "SeqZero",
            "TooLate",
            "TransferIdMismatch",
            "Unexpected",
            "UnknownKind",
            "UnsupportedVersion",
        ]
    );
}

#[test]
fn a_stream_parses_from_its_name_and_nothing_else() {
    for stream in Stream::ALL {
        assert_eq!(Stream::parse(stream.as_str()), Some(stream));
        // The serde name is the same word.
        assert_eq!(
            serde_json::to_string(&stream).unwrap(),
            format!("\"{}\"", stream.as_str())
        );
    }
    for other in ["", "Account", "accounts", "transfer ", "subscriptions"] {
        assert_eq!(Stream::parse(other), None, "{other:?}");
    }
}

#[test]
fn is_event_id_agrees_with_event_id() {
    let streams = Stream::ALL;
    let keys = ["acme.acc-1", "t.acme.k1", "t:x", "a", ""];
    let seqs = [0, 1, 9, 10, 99, 12345, u64::MAX - 1, u64::MAX];
    for stream in streams {
        for key in keys {
            for seq in seqs {
                let id = event_id(stream, key, seq);
                let mut candidates = vec![
                    id.clone(),
                    event_id(stream, key, seq.wrapping_add(1)),
                    event_id(stream, key, seq.wrapping_sub(1)),
                    format!("{id}:"),
                    format!(":{id}"),
                    format!("{id}0"),
                    id.replacen(':', "::", 1),
                    id[..id.len() - 1].to_owned(),
                    format!("{}:{key}:{seq}", stream.as_str().to_uppercase()),
                    format!("{}:{key}:+{seq}", stream.as_str()),
                    format!("{}:{key}:0{seq}", stream.as_str()),
                    format!("{}:{key}:-{seq}", stream.as_str()),
                    format!("{}:{key}:{seq} ", stream.as_str()),
                    format!("{}:{key}:{seq}0", stream.as_str()),
                    format!("{}:{key}:1{seq}", stream.as_str()),
                    format!("{}:{key}:", stream.as_str()),
                    format!("{}:{key}x:{seq}", stream.as_str()),
                    format!("{}{key}:{seq}", stream.as_str()),
                    format!("{}:{key}{seq}", stream.as_str()),
                    String::new(),
                ];
                candidates.extend(streams.map(|s| event_id(s, key, seq)));
                candidates.extend(keys.map(|k| event_id(stream, k, seq)));
                for candidate in candidates {
                    assert_eq!(
                        is_event_id(&candidate, stream, key, seq),
                        candidate == id,
                        "{candidate:?} vs {stream:?} {key:?} {seq}"
                    );
                }
            }
        }
    }
    assert!(is_event_id("account:a:0", Stream::Account, "a", 0));
    assert!(is_event_id(
        "transfer:t:x:18446744073709551615",
        Stream::Transfer,
        "t:x",
        u64::MAX
    ));
    assert!(!is_event_id("account:a:1", Stream::Transfer, "a", 1));
    // Past u64: 2⁶⁴ reads as no seq (not as 0 wrapped around), nor do 21 digits.
    assert!(!is_event_id(
        "account:a:18446744073709551616",
        Stream::Account,
        "a",
        0
    ));
    assert!(!is_event_id(
        "account:a:100000000000000000000",
        Stream::Account,
        "a",
        0
    ));
    assert!(!is_event_id("account:a:a", Stream::Account, "a", 49));
    assert!(!is_event_id("account:a:/", Stream::Account, "a", u64::MAX));
    assert!(!is_event_id("account:a:b:1", Stream::Account, "a", 1));
}

#[test]
fn put_and_same_are_exact_for_every_short_length() {
    let src: Vec<u8> = (0..200u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(11))
        .collect();
    for n in 0..=130 {
        for offset in [0, 1, 7, 15] {
            let v = &src[..n];
            let mut dst = vec![MaybeUninit::new(0xAAu8); offset + n + 20];
            let mut at = offset;
            put(&mut dst, &mut at, v);
            assert_eq!(at, offset + n);
            // SAFETY (test): every slot was initialized above.
            let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
            assert_eq!(&got[offset..offset + n], v, "n={n} offset={offset}");
            assert!(got[..offset]
                .iter()
                .chain(&got[offset + n..])
                .all(|&b| b == 0xAA));
            assert!(same(v, v));
            assert!(!same(v, &src[..n + 1]));
            for i in 0..n {
                let mut w = v.to_vec();
                w[i] ^= 0x20;
                assert!(!same(v, &w), "n={n} differs at {i}");
            }
        }
    }
}

/// rev-s57-ingest 1: a newer version adds fields, which v1's shape refuses as
/// unknown; the version decides the error (an upgrade to make, kept for a
/// reader that knows it), not the first unknown field.
#[test]
fn a_newer_versions_event_is_told_by_its_version_whatever_fields_it_adds() {
    let line = golden()[0].to_json();
    let v2 = line.replacen("\"v\":1", "\"v\":2", 1);
    let v2_field = v2.replacen('{', "{\"added_in_v2\":[1,2],", 1);
    for body in [&v2, &v2_field] {
        let e = decode(body.as_bytes()).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Schema(SchemaError::UnsupportedVersion { v: 2 })
        );
        assert_eq!(e.newer_version(), Some(2), "{body}");
        assert!(e.to_string().contains("upgrade the reader"), "{e}");
    }
    // An unknown field in a version this reader knows is malformed, as is v0
    // with one; v0 alone is older than any version, not newer.
    let v1_field = line.replacen('{', "{\"added\":1,", 1);
    let e = decode(v1_field.as_bytes()).unwrap_err();
    assert!(
        matches!(e, DecodeError::Json(_)) && e.newer_version().is_none(),
        "{e}"
    );
    let v0 = line.replacen("\"v\":1", "\"v\":0", 1);
    assert_eq!(decode(v0.as_bytes()).unwrap_err().newer_version(), None);
    let v0_field = v0.replacen('{', "{\"added\":1,", 1);
    assert!(matches!(
        decode(v0_field.as_bytes()),
        Err(DecodeError::Json(_))
    ));
    assert!(matches!(decode(b"[2]"), Err(DecodeError::Json(_))));
    // `v` named twice is malformed, not newer (rev-s57-diff 5).
    let twice = line.replacen('{', "{\"v\":2,", 1);
    assert!(matches!(
        decode(twice.as_bytes()),
        Err(DecodeError::Json(_))
    ));
    assert_eq!(newer_version_of(twice.as_bytes()), None);
    assert_eq!(newer_version_of(v2_field.as_bytes()), Some(2));
    assert_eq!(newer_version_of(line.as_bytes()), None);
    // A member that is not JSON makes the message malformed whatever its `v`.
    let out_of_range = v2.replacen('{', "{\"x\":1e999,", 1);
    assert_eq!(newer_version_of(out_of_range.as_bytes()), None);
    let mut not_utf8 = v2.replacen('{', "{\"x\":\"\u{1}\",", 1).into_bytes();
    let at = not_utf8.iter().position(|&b| b == 1).unwrap();
    not_utf8[at] = 0xff;
    assert_eq!(newer_version_of(&not_utf8), None);
}
