//! The reconciler's per-event hot path in isolation: the canonical encoding,
//! the batch hash check ([`HashCheck`]), the event-id check and validation, on 200,000
//! `captured` account events shaped like the generated lake's (a 64-byte
//! prev_hash, a transfer id, a counterparty, amounts), fastest of 5 repetitions. Figures in
//! docs/BENCHMARKS.md.
//!
//! `cargo run --release -p ledger-events --example event_hot_path`

use std::time::Instant;

use ledger_events::event::HashCheck;
use ledger_events::{is_event_id, Event, EventRef, Stream};

const EVENTS: u64 = 200_000;

fn main() {
    let events: Vec<Event> = (0..EVENTS)
        .map(|i| {
            let key = format!("acct-{:08}", i % 2000);
            let mut e = Event::new(
                Stream::Account,
                &key,
                i + 1,
                "captured",
                1_700_000_000_000 + i as i64,
                &"a".repeat(64),
            );
            e.currency = Some("USD".into());
            e.amount = Some(12_345 + i as i64);
            e.balance_after = Some(99_999 + i as i64);
            e.held_after = Some(555 + i as i64);
            e.overdraft_limit = Some(0);
            e.transfer_id = Some(format!("t-{:032x}", i * 7919));
            e.entry_id = Some(format!("t-{:032x}:debit", i * 7919));
            e.counterparty = Some(format!("acct-{:08}", (i + 1) % 2000));
            e.seal()
        })
        .collect();
    let views: Vec<EventRef> = events.iter().map(Event::view).collect();
    let refs: Vec<&EventRef> = views.iter().collect();
    let per_event = |t: Instant| t.elapsed().as_nanos() as f64 / EVENTS as f64;
    let (mut canonical, mut check, mut ids, mut valid) = (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
    let mut bytes = 0;
    for _ in 0..5 {
        let mut buf = Vec::with_capacity(1024);
        let t = Instant::now();
        bytes = 0;
        for v in &views {
            buf.clear();
            v.canonical_into(&mut buf);
            bytes += buf.len();
        }
        canonical = canonical.min(per_event(t));

        let (mut hashes, mut ok) = (HashCheck::default(), Vec::with_capacity(refs.len()));
        let t = Instant::now();
        for batch in refs.chunks(1024) {
            hashes.check(batch, &mut ok);
        }
        check = check.min(per_event(t));
        assert!(
            ok.iter().all(|&ok| ok),
            "every sealed event hashes to its hash"
        );

        let t = Instant::now();
        let n = views
            .iter()
            .filter(|v| is_event_id(v.event_id, v.stream, v.stream_key, v.seq))
            .count();
        ids = ids.min(per_event(t));
        assert_eq!(n as u64, EVENTS);

        let t = Instant::now();
        let n = views.iter().filter(|v| v.validate().is_ok()).count();
        valid = valid.min(per_event(t));
        assert_eq!(n as u64, EVENTS);
    }
    println!(
        "{EVENTS} events, {} bytes encoded on average, fastest of 5:",
        bytes as u64 / EVENTS
    );
    println!("  canonical_into      {canonical:6.1} ns an event");
    println!("  HashCheck           {check:6.1} ns an event (batches of 1,024: encoding, SHA-256, compare)");
    println!("  is_event_id         {ids:6.1} ns an event");
    println!("  validate            {valid:6.1} ns an event (every field)");
}
