//! The borrowed view does the reconciler's per-event work without touching
//! the heap: canonical encoding into a grown buffer, the hash check,
//! validation of a valid event and the event id check. Counted with a global
//! allocator that tallies this thread's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ledger_events::{decode, is_event_id, Event, Stream};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn golden() -> Vec<Event> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/v1");
    let mut evs = Vec::new();
    for name in ["account.jsonl", "transfer.jsonl"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        evs.extend(text.lines().map(|l| decode(l.as_bytes()).unwrap()));
    }
    evs
}

#[test]
fn verifying_a_valid_event_allocates_nothing_once_the_scratch_has_grown() {
    let evs = golden();
    let mut scratch = Vec::with_capacity(1024);
    let n = allocations_in(|| {
        for ev in &evs {
            let view = ev.view();
            assert!(view.validate().is_ok());
            assert!(view.hash_matches(&mut scratch));
            assert!(is_event_id(
                view.event_id,
                view.stream,
                view.stream_key,
                view.seq
            ));
            assert!(view.account_kind().is_some() || view.transfer_kind().is_some());
            scratch.clear();
            view.canonical_into(&mut scratch);
        }
    });
    assert_eq!(n, 0, "allocations while verifying {} events", evs.len());
    // A mismatch is found without allocating too.
    let mut bad = evs[3].clone();
    bad.hash = bad.hash.to_uppercase();
    let n = allocations_in(|| assert!(!bad.view().hash_matches(&mut scratch)));
    assert_eq!(n, 0);
    // The counter does count.
    assert!(allocations_in(|| drop(evs[0].compute_hash())) > 0);
}

#[test]
fn the_canonical_encoding_reserves_once() {
    let mut longest = Event::new(
        Stream::Transfer,
        &"k".repeat(200),
        u64::MAX,
        "releasing",
        i64::MIN,
        &"0".repeat(64),
    );
    longest.v = u16::MAX;
    longest.currency = Some("USD".into());
    for v in [
        &mut longest.amount,
        &mut longest.balance_after,
        &mut longest.held_after,
        &mut longest.overdraft_limit,
        &mut longest.deadline_ms,
    ] {
        *v = Some(i64::MIN);
    }
    for v in [
        &mut longest.entry_id,
        &mut longest.transfer_id,
        &mut longest.counterparty,
        &mut longest.source,
        &mut longest.destination,
        &mut longest.reason,
    ] {
        *v = Some("x".repeat(200));
    }
    for ev in golden().iter().chain([&longest]) {
        let mut out = Vec::new();
        let n = allocations_in(|| ev.view().canonical_into(&mut out));
        assert_eq!(n, 1, "one reservation for {} bytes", out.len());
        assert_eq!(out, ev.canonical().as_bytes());
    }
}
