//! The ingest core compiled to wasm32 with plain C-ABI exports (no
//! wasm-bindgen), driven by `scripts/check-ingest-wasm.mjs` under node (V8,
//! the engine of workerd): checks that the wasm build writes the same keys
//! and bytes as the native one, and measures events/s.
//!
//! Exports: `golden() -> len` (one "key sha256" line per file of the golden
//! batch, in `out_ptr()`), `prepare(n)` (n synthetic events as messages),
//! `run() -> rows` (ingest the prepared batch once).

use std::cell::RefCell;

use ledger_ingest::{ingest, synth, Message};
use sha2::{Digest, Sha256};

const GOLDEN: [&str; 2] = [
    include_str!("../../../edge/events/golden/v1/account.jsonl"),
    include_str!("../../../edge/events/golden/v1/transfer.jsonl"),
];

thread_local! {
    static OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static BODIES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

fn run_batch(bodies: &[Vec<u8>]) -> ledger_ingest::IngestOutput {
    let ids: Vec<String> = (0..bodies.len()).map(|i| format!("m{i}")).collect();
    let messages: Vec<Message> = ids
        .iter()
        .zip(bodies)
        .map(|(id, body)| Message { id, body })
        .collect();
    ingest(&messages).expect("batch within bounds")
}

#[no_mangle]
pub extern "C" fn golden() -> u32 {
    let bodies: Vec<Vec<u8>> = GOLDEN
        .iter()
        .flat_map(|t| t.lines())
        .map(|l| l.as_bytes().to_vec())
        .collect();
    let mut text = String::new();
    for f in run_batch(&bodies).files {
        let h: String = Sha256::digest(&f.bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        text.push_str(&format!("{} {h}\n", f.key));
    }
    OUT.with(|o| {
        *o.borrow_mut() = text.into_bytes();
        o.borrow().len() as u32
    })
}

#[no_mangle]
pub extern "C" fn out_ptr() -> *const u8 {
    OUT.with(|o| o.borrow().as_ptr())
}

#[no_mangle]
pub extern "C" fn prepare(n: u32) {
    let bodies = synth::events(n as usize, (n as usize / 10).max(2), 1_767_225_600_000)
        .iter()
        .map(|e| e.to_json().into_bytes())
        .collect();
    BODIES.with(|b| *b.borrow_mut() = bodies);
}

#[no_mangle]
pub extern "C" fn run() -> u32 {
    BODIES.with(|b| run_batch(&b.borrow()).rows() as u32)
}
