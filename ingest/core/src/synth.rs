//! Synthetic, valid event streams for tests and benchmarks (deterministic:
//! the output is a function of the arguments only).

use ledger_events::{Event, Stream, GENESIS_HASH};

/// `n` valid events: account streams (opened, then deposits) and transfer
/// streams (created → reserved → credited → captured) interleaved, each
/// stream hash-chained from genesis, one event per second from `start_ms`.
pub fn events(n: usize, streams: usize, start_ms: i64) -> Vec<Event> {
    let streams = streams.max(2);
    // (stream, key, last seq, last hash, balance)
    let mut state: Vec<(Stream, String, u64, String, i64)> = (0..streams)
        .map(|i| {
            if i % 2 == 0 {
                (
                    Stream::Account,
                    format!("acc-{i}"),
                    0,
                    GENESIS_HASH.to_owned(),
                    0,
                )
            } else {
                (
                    Stream::Transfer,
                    format!("t.synth.{i}"),
                    0,
                    GENESIS_HASH.to_owned(),
                    0,
                )
            }
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    let mut i = 0usize;
    while out.len() < n {
        let s = &mut state[i % streams];
        let at = start_ms + 1_000 * out.len() as i64;
        let seq = s.2 + 1;
        let ev = match s.0 {
            Stream::Account => {
                let kind = if seq == 1 { "opened" } else { "deposited" };
                let mut e = Event::new(Stream::Account, &s.1, seq, kind, at, &s.3);
                e.currency = Some("USD".into());
                if seq > 1 {
                    let amount = 100 + (seq as i64 % 997);
                    s.4 += amount;
                    e.amount = Some(amount);
                    e.entry_id = Some(format!("dep.{}.{seq}", s.1));
                }
                e.balance_after = Some(s.4);
                e.held_after = Some(0);
                e.overdraft_limit = Some(0);
                e
            }
            _ => {
                // Restart a new transfer stream every four phases.
                if seq > 4 {
                    s.1 = format!("{}x", s.1);
                    s.2 = 0;
                    s.3 = GENESIS_HASH.to_owned();
                    continue;
                }
                let kind = ["created", "reserved", "credited", "captured"][(seq - 1) as usize];
                let mut e = Event::new(Stream::Transfer, &s.1, seq, kind, at, &s.3);
                e.currency = Some("USD".into());
                e.amount = Some(2_500 + i as i64 % 100);
                e.transfer_id = Some(s.1.clone());
                e.source = Some("acc-0".into());
                e.destination = Some("acc-2".into());
                if seq == 1 {
                    e.deadline_ms = Some(at + 300_000);
                }
                e
            }
        }
        .seal();
        s.2 = seq;
        s.3 = ev.hash.clone();
        out.push(ev);
        i += 1;
    }
    out
}
