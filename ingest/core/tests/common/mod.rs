#![allow(dead_code)]
//! Shared by the ingest tests: the golden vectors as queue messages.

use std::path::PathBuf;

use ledger_events::{decode, Event};
use ledger_ingest::{ingest, IngestOutput, Message};

pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../edge/events/golden/v1")
}

/// Every golden vector line (every schema version known: today only v1).
pub fn golden_lines() -> Vec<String> {
    let mut lines = Vec::new();
    for name in ["account.jsonl", "transfer.jsonl"] {
        let text = std::fs::read_to_string(golden_dir().join(name)).unwrap();
        lines.extend(text.lines().map(str::to_owned));
    }
    assert!(lines.len() >= 20, "golden vectors missing");
    lines
}

pub fn golden_events() -> Vec<Event> {
    golden_lines()
        .iter()
        .map(|l| decode(l.as_bytes()).unwrap())
        .collect()
}

/// Messages with ids `m{i}` for the given bodies.
pub struct Batch {
    pub ids: Vec<String>,
    pub bodies: Vec<Vec<u8>>,
}

impl Batch {
    pub fn new(bodies: Vec<Vec<u8>>) -> Batch {
        Batch {
            ids: (0..bodies.len()).map(|i| format!("m{i}")).collect(),
            bodies,
        }
    }
    pub fn of_lines(lines: &[String]) -> Batch {
        Batch::new(lines.iter().map(|l| l.as_bytes().to_vec()).collect())
    }
    pub fn of_events(events: &[Event]) -> Batch {
        Batch::new(events.iter().map(|e| e.to_json().into_bytes()).collect())
    }
    pub fn messages(&self) -> Vec<Message<'_>> {
        self.ids
            .iter()
            .zip(&self.bodies)
            .map(|(id, body)| Message { id, body })
            .collect()
    }
    pub fn ingest(&self) -> IngestOutput {
        ingest(&self.messages()).unwrap()
    }
}

/// Events sorted in the lake's order.
pub fn lake_order(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by(|a, b| {
        (a.stream, &a.stream_key, a.seq, &a.hash).cmp(&(b.stream, &b.stream_key, b.seq, &b.hash))
    });
    events
}
