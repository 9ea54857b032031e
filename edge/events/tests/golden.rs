//! The golden vectors are the frozen wire format of schema v1 (written by the
//! core, see `edge/core/tests/golden.rs`). Every reader of the contract is
//! held to them here: they decode, verify, re-encode byte for byte, chain,
//! cover every kind, and agree with `docs/EVENTS.md`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use ledger_events::{
    decode, is_event_id, AccountKind, ChainCursor, DecodeError, Event, SchemaError, Stream,
    TransferKind, FIELDS,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden() -> Vec<String> {
    let mut lines = Vec::new();
    for name in ["account.jsonl", "transfer.jsonl"] {
        let text = std::fs::read_to_string(root().join("golden/v1").join(name)).unwrap();
        lines.extend(text.lines().map(str::to_owned));
    }
    lines
}

fn events() -> Vec<Event> {
    golden()
        .iter()
        .map(|l| decode(l.as_bytes()).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn vectors_decode_verify_and_reencode_byte_for_byte() {
    for line in golden() {
        let ev = decode(line.as_bytes()).unwrap();
        assert_eq!(ev.to_json(), line);
    }
}

#[test]
fn vectors_form_contiguous_hash_chains() {
    let mut cursors: Vec<ChainCursor> = Vec::new();
    for ev in events() {
        let i = match cursors
            .iter()
            .position(|c| c.stream == ev.stream && c.stream_key == ev.stream_key)
        {
            Some(i) => i,
            None => {
                cursors.push(ChainCursor::genesis(ev.stream, &ev.stream_key));
                cursors.len() - 1
            }
        };
        cursors[i].push(&ev).unwrap();
    }
    assert_eq!(cursors.len(), 4, "one account and three transfer streams");
}

#[test]
fn vectors_cover_every_kind_of_schema_v1() {
    let evs = events();
    for k in AccountKind::ALL {
        assert!(
            evs.iter().any(|e| e.account_kind() == Some(*k)),
            "no golden {k:?}"
        );
    }
    for k in TransferKind::ALL {
        assert!(
            evs.iter().any(|e| e.transfer_kind() == Some(*k)),
            "no golden transfer {k:?}"
        );
    }
}

#[test]
fn the_canonical_encoding_is_frozen() {
    let first = &events()[0];
    let expected = "v=1\nevent_id=account:acme.acc-1:1\nstream=account\nstream_key=acme.acc-1\nseq=1\nkind=opened\n\
        occurred_at_ms=1767225601000\ncurrency=USD\namount=\nbalance_after=0\nheld_after=0\noverdraft_limit=0\n\
        entry_id=\ntransfer_id=\ncounterparty=\nsource=\ndestination=\ndeadline_ms=\nreason=\n\
        prev_hash=0000000000000000000000000000000000000000000000000000000000000000";
    assert_eq!(first.canonical(), expected);
    // SHA-256 of the string above, computed independently (`printf ... | sha256sum`).
    assert_eq!(
        first.hash,
        "4573deb2afaf0126bd4006d79eae49f58f59585be0846e49f7eac795f7a59e6c"
    );
}

#[test]
fn golden_hashes_hold_through_the_borrowed_view() {
    let evs = events();
    let first = evs[0].view();
    assert_eq!(first.canonical(), evs[0].canonical());
    assert_eq!(
        first.compute_hash(),
        "4573deb2afaf0126bd4006d79eae49f58f59585be0846e49f7eac795f7a59e6c"
    );
    let mut scratch = Vec::new();
    for ev in &evs {
        let view = ev.view();
        assert_eq!(view.compute_hash(), ev.hash, "{}", ev.event_id);
        assert!(view.hash_matches(&mut scratch), "{}", ev.event_id);
        assert_eq!(view.validate(), Ok(()));
        assert!(is_event_id(
            view.event_id,
            view.stream,
            view.stream_key,
            view.seq
        ));
        assert_eq!(view.to_event(), *ev);
    }
}

/// A golden event's JSON with one edit applied.
fn mutate(edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> Vec<u8> {
    let line = &golden()[2]; // hold_placed: has amount, transfer_id, counterparty
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
    edit(v.as_object_mut().unwrap());
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn bad_messages_are_refused_with_a_specific_reason() {
    use serde_json::json;
    let schema = |e: DecodeError| match e {
        DecodeError::Schema(s) => s,
        other => panic!("expected a schema error, got {other}"),
    };
    let json_err = |bytes: &[u8]| match decode(bytes) {
        Err(DecodeError::Json(m)) => m,
        other => panic!("expected a JSON error, got {other:?}"),
    };
    assert!(json_err(b"{not json").contains("key must be a string"));
    assert!(json_err(&mutate(|m| {
        m.insert("amount".into(), json!("2500"));
    }))
    .contains("invalid type"));
    assert!(json_err(&mutate(|m| {
        m.remove("seq");
    }))
    .contains("missing field `seq`"));
    assert!(json_err(&mutate(|m| {
        m.insert("colour".into(), json!("red"));
    }))
    .contains("unknown field `colour`"));
    assert!(json_err(&mutate(|m| {
        m.insert("seq".into(), json!(-3));
    }))
    .contains("invalid value"));

    let cases: Vec<(Vec<u8>, SchemaError)> = vec![
        (
            mutate(|m| {
                m.insert("v".into(), json!(2));
            }),
            SchemaError::UnsupportedVersion { v: 2 },
        ),
        (
            mutate(|m| {
                m.insert("kind".into(), json!("created"));
            }),
            SchemaError::UnknownKind {
                stream: Stream::Account,
                kind: "created".into(),
            },
        ),
        (
            mutate(|m| {
                m.remove("transfer_id");
            }),
            SchemaError::Missing {
                field: "transfer_id",
                kind: "hold_placed".into(),
            },
        ),
        (
            mutate(|m| {
                m.insert("reason".into(), json!("x"));
            }),
            SchemaError::Unexpected {
                field: "reason",
                kind: "hold_placed".into(),
            },
        ),
        (
            mutate(|m| {
                m.insert("currency".into(), json!("usd"));
            }),
            SchemaError::BadCurrency {
                found: "usd".into(),
            },
        ),
        (
            mutate(|m| {
                m.insert("amount".into(), json!(-5));
            }),
            SchemaError::NotPositive {
                field: "amount",
                value: -5,
            },
        ),
        (
            mutate(|m| {
                m.insert("event_id".into(), json!("account:acme.acc-1:4"));
            }),
            SchemaError::EventIdMismatch {
                expected: "account:acme.acc-1:3".into(),
                found: "account:acme.acc-1:4".into(),
            },
        ),
        (
            mutate(|m| {
                m.insert("seq".into(), json!(0));
                m.insert("event_id".into(), json!("account:acme.acc-1:0"));
            }),
            SchemaError::SeqZero,
        ),
        (
            mutate(|m| {
                m.insert("hash".into(), json!("abc"));
            }),
            SchemaError::BadHash {
                field: "hash",
                found: "abc".into(),
            },
        ),
    ];
    for (bytes, expected) in cases {
        assert_eq!(
            schema(decode(&bytes).unwrap_err()),
            expected,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }

    // A tampered amount keeps the shape but breaks the hash.
    match decode(&mutate(|m| {
        m.insert("amount".into(), json!(2501));
    })) {
        Err(DecodeError::HashMismatch { event_id, .. }) => {
            assert_eq!(event_id, "account:acme.acc-1:3")
        }
        other => panic!("expected a hash mismatch, got {other:?}"),
    }
}

#[test]
fn the_schema_document_lists_exactly_the_fields_in_order_and_quotes_real_vectors() {
    let doc = std::fs::read_to_string(root().join("../../docs/EVENTS.md")).unwrap();
    // The field table of the "## Fields" section: rows that start with "| `name` |".
    let section = doc
        .split("\n## Fields")
        .nth(1)
        .expect("docs/EVENTS.md has a ## Fields section");
    let section = section.split("\n## ").next().unwrap();
    let documented: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        documented, FIELDS,
        "docs/EVENTS.md field table differs from FIELDS"
    );
    // Every kind the crate defines is documented.
    for k in AccountKind::ALL
        .iter()
        .map(|k| k.as_str())
        .chain(TransferKind::ALL.iter().map(|k| k.as_str()))
    {
        assert!(
            doc.contains(&format!("`{k}`")),
            "docs/EVENTS.md does not document kind {k}"
        );
    }
    // Every JSON example in the document is a golden vector, verbatim.
    let vectors: BTreeSet<String> = golden().into_iter().collect();
    let mut examples = 0;
    let mut in_json = false;
    for line in doc.lines() {
        match line.trim() {
            "```json" => in_json = true,
            "```" => in_json = false,
            l if in_json && l.starts_with('{') => {
                assert!(
                    vectors.contains(l),
                    "docs/EVENTS.md example is not a golden vector: {l}"
                );
                examples += 1;
            }
            _ => {}
        }
    }
    assert!(examples >= 2, "docs/EVENTS.md should quote golden vectors");
}
