//! Threads the OS may refuse. A job's limit on threads or processes
//! (`ulimit -u`, a cgroup's `pids.max`, systemd's `TasksMax`) can leave
//! room for the runtime and not for a thread the proof starts later;
//! `std::thread::scope`'s `spawn` panics then, and a scope whose other
//! thread waits on the refused one never ends (rev-s53-diff M1: a run hung
//! holding its checkpoint's lock). So the proof's threads are started with
//! [`std::thread::Builder::spawn_scoped`]: a refused one is either work done
//! here instead ([`both`]) or an error with [`THREADS_HELP`] ([`refused`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// The Help of a thread (or the runtime's) the OS refused.
pub const THREADS_HELP: &str = "Help: the reconciler runs two worker threads and a few more \
     of its own; the job's limit on threads or processes (ulimit -u, a cgroup's pids.max, systemd's \
     TasksMax), on open files (ulimit -n) or on memory is too low for them: raise it";

/// Set once [`THREADS_HELP`] was printed on stderr (by the binary's panic
/// hook for a refused thread's panic, or by [`both`]'s warning): a run's
/// error that follows names its refusal without repeating the Help (it was
/// printed twice).
static HELP_SAID: AtomicBool = AtomicBool::new(false);

/// [`THREADS_HELP`] on a line of its own, or a pointer to it once printed
/// ([`HELP_SAID`]).
fn help() -> String {
    help_unless(HELP_SAID.load(Ordering::Relaxed))
}

fn help_unless(said: bool) -> String {
    if said {
        " (Help above)".into()
    } else {
        format!("\n{THREADS_HELP}")
    }
}

/// [`THREADS_HELP`] on a line of its own the first time a run prints it,
/// a pointer to it after; for a line printed now (marks it said).
pub fn help_printed() -> String {
    help_unless(HELP_SAID.swap(true, Ordering::Relaxed))
}

/// The run's error for a thread the OS refused to start: exit 2.
pub fn refused(what: &str, e: &std::io::Error) -> crate::Error {
    crate::Error::Lake(format!("cannot start {what}: {e}{}", help()))
}

/// Whether a panic's message is that of a thread the OS refused: tokio's
/// (its workers, its blocking pool) or the standard library's.
pub fn refusal(why: &str) -> bool {
    why.starts_with("OS can't spawn worker thread") || why.starts_with("failed to spawn thread")
}

/// The run's error for a panic that ended a table's proof: a thread the OS
/// refused inside it (its own runtime's blocking pool) is named as such,
/// with the Help; anything else is a panic.
pub fn table_panicked(payload: Box<dyn std::any::Any + Send>) -> crate::Error {
    let why = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    match why {
        Some(why) if refusal(why) => crate::Error::Lake(format!(
            "cannot start a thread for a table's proof: {why}{}",
            help()
        )),
        _ => crate::Error::Scan("a table's proof panicked".into()),
    }
}

/// `a` and `b` at once, `a` on a new thread and `b` on this one; when the
/// OS refuses the thread, `b` then `a` on this one (slower, and said once a
/// run on stderr). A panic in either is resumed here.
pub fn both<RA: Send, RB>(a: impl FnOnce() -> RA + Send, b: impl FnOnce() -> RB) -> (RA, RB) {
    // The thread takes `a` from here; a thread never started leaves it.
    let slot = Mutex::new(Some(a));
    let take = || slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    std::thread::scope(|scope| {
        let started = std::thread::Builder::new().spawn_scoped(scope, || take().map(|a| a()));
        let rb = b();
        let ra = match started {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            Err(e) => {
                static SAID: AtomicBool = AtomicBool::new(false);
                if !SAID.swap(true, Ordering::Relaxed) {
                    crate::say!(
                        "reconcile: warning: cannot start a thread ({e}): its work runs on this one, \
                         slower{}",
                        help_printed()
                    );
                }
                None
            }
        };
        let ra = ra.unwrap_or_else(|| take().expect("a thread not started leaves its work")());
        (ra, rb)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_run_and_return_in_order() {
        let v: Vec<u64> = (1..=1000).collect();
        let (low, high) = v.split_at(500);
        let (a, b) = both(|| low.iter().sum::<u64>(), || high.iter().sum::<u64>());
        assert_eq!((a, b), (125_250, 375_250));
    }

    /// A thread the OS refused inside a table's proof is named, with the
    /// Help; any other panic is only a panic.
    #[test]
    fn a_tables_refused_thread_is_named_with_the_help() {
        let refused = std::panic::catch_unwind(|| {
            panic!("failed to spawn thread: Resource temporarily unavailable (os error 11)")
        })
        .unwrap_err();
        let e = table_panicked(refused).to_string();
        assert!(
            e.contains("cannot start a thread for a table's proof: failed to spawn thread")
                && e.contains(THREADS_HELP),
            "{e}"
        );
        // The standard library's and tokio's carry a `String` (formatted).
        let e = "Resource temporarily unavailable (os error 11)";
        let tokio =
            std::panic::catch_unwind(|| panic!("OS can't spawn worker thread: {e}")).unwrap_err();
        assert!(tokio.is::<String>());
        assert!(table_panicked(tokio).to_string().contains(THREADS_HELP));
        let other = std::panic::catch_unwind(|| panic!("index out of bounds")).unwrap_err();
        assert_eq!(
            table_panicked(other).to_string(),
            "scan failed: a table's proof panicked"
        );
    }

    #[test]
    #[should_panic(expected = "the thread's panic")]
    fn a_panic_on_the_thread_is_resumed_here() {
        both(|| panic!("the thread's panic"), || 1);
    }
}
