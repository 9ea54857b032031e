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

/// A run's word to its table threads that one of them failed: the other
/// stops at its next look ([`Cancel::check`], at every row it scans)
/// instead of proving the rest of its table for a run that ends in the
/// first one's error. Without it a damaged account file was reported only
/// once the transfer table's thread was done too (10M: 4.4 s for a file the
/// account thread refused within its first date). What is not a row of a
/// scan (opening a scan's files, a keyed read of a few rows) runs to its
/// end first. With damage in both tables, the run names the file found
/// first; the next run, the other.
#[derive(Default)]
pub struct Cancel(AtomicBool);

impl Cancel {
    /// [`crate::Error::Cancelled`] once another thread of the run failed.
    pub fn check(&self) -> Result<(), crate::Error> {
        if self.0.load(Ordering::Relaxed) {
            Err(crate::Error::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Sets the word when dropped, unless [`OnFailure::done`] said the
    /// thread's work succeeded: an error returned early and a panic
    /// unwinding through it both stop the other thread.
    pub fn on_failure(&self) -> OnFailure<'_> {
        OnFailure(Some(self))
    }

    /// Sets the word: the run's other table thread stops at its next row.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// See [`Cancel::on_failure`].
pub struct OnFailure<'a>(Option<&'a Cancel>);

impl OnFailure<'_> {
    /// The result of the thread's work, passed through; an error sets the
    /// word as the guard goes (a cancellation's own finds it set already).
    pub fn done<T>(mut self, r: Result<T, crate::Error>) -> Result<T, crate::Error> {
        if r.is_ok() {
            self.0 = None;
        }
        r
    }
}

impl Drop for OnFailure<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.0 {
            c.stop();
        }
    }
}

/// The run's error from its two table threads' results: a thread that
/// stopped because the other failed ([`crate::Error::Cancelled`]) yields to
/// that failure, so the run names what went wrong, not that it stopped.
pub fn first_failure<A, B>(
    a: Result<A, crate::Error>,
    b: Result<B, crate::Error>,
) -> Result<(A, B), crate::Error> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(crate::Error::Cancelled), Err(e)) | (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// Says once a run, on stderr, that a thread the OS refused has its work
/// done on the thread that asked for it, slower.
pub fn working_alone(e: &std::io::Error) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        crate::say!(
            "reconcile: warning: cannot start a thread ({e}): its work runs on this one, \
             slower{}",
            help_printed()
        );
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
                working_alone(&e);
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
    fn a_failure_or_a_panic_cancels_and_success_does_not() {
        let c = Cancel::default();
        assert_eq!(c.on_failure().done(Ok(7)).unwrap(), 7);
        assert!(c.check().is_ok(), "a success leaves the word unset");
        let e = c
            .on_failure()
            .done::<()>(Err(crate::Error::Lake("damaged".into())));
        assert!(matches!(e, Err(crate::Error::Lake(_))));
        assert!(matches!(c.check(), Err(crate::Error::Cancelled)));

        let c = Cancel::default();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = c.on_failure();
            panic!("a table's proof panicked");
        }));
        assert!(panicked.is_err());
        assert!(matches!(c.check(), Err(crate::Error::Cancelled)));
    }

    #[test]
    fn the_cancelled_thread_yields_to_the_failure_that_stopped_it() {
        use crate::Error;
        let damaged = || Error::Lake("damaged".into());
        let said = |r: Result<((), ()), Error>| r.unwrap_err().to_string();
        assert_eq!(
            said(first_failure(Err(Error::Cancelled), Err(damaged()))),
            "damaged"
        );
        assert_eq!(
            said(first_failure(Err(damaged()), Err(Error::Cancelled))),
            "damaged"
        );
        assert_eq!(said(first_failure(Ok(()), Err(damaged()))), "damaged");
        // Both failed on their own (each reached its damage before the
        // other's failure stopped it): the account thread's.
        let other = Error::Lake("other".into());
        assert_eq!(said(first_failure(Err(damaged()), Err(other))), "damaged");
        assert!(first_failure::<(), ()>(Ok(()), Ok(())).is_ok());
    }

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
