//! I4, terminal convergence: every transfer reaches captured, failed or
//! released by its deadline (dangling: not terminal and `deadline_ms` before
//! the run's `now`; a transfer whose `created` row the lake lacks, by the
//! ledger's longest deadline after its latest row), and no hold outlives
//! its transfer (leaked: a hold still
//! live at the account's last event whose transfer is terminal or unknown).
//! An open transfer with a row dated after the run's `now` (by more than its
//! settle window, and an hour) cannot be judged by its deadline:
//! `committed_in_future`.
//!
//! Dangling transfers are also what the sweeper re-drives (docs/SWEEPER.md):
//! [`dangling`] lists them most overdue first.

use crate::facts::{ms_of, Facts};
use crate::finding::Finding;

pub const NAME: &str = "terminal_convergence";
pub const INVARIANT: &str = "I4";
pub const PROVES: &str =
    "every transfer is terminal by its deadline and no hold outlives its transfer";

/// One dangling transfer, in the sweeper's terms.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Dangling {
    pub transfer_id: String,
    pub phase: String,
    pub deadline_ms: i64,
    pub last_seq: u64,
    /// The lake has no row of its stream, only a live hold of it
    /// ([`HOLD_ONLY_PHASE`], `last_seq` 0): handed to the sweeper, reported
    /// as a `leaked_hold`, never as `dangling`.
    #[serde(skip)]
    pub hold_only: bool,
}

/// The phase a dangling transfer is listed with when the lake holds no row of
/// its stream, only a live hold of it.
pub const HOLD_ONLY_PHASE: &str = "unknown";

/// Non-terminal transfers past their deadline, most overdue first (then by
/// id); and, for the sweeper, transfers the lake knows only by a live hold,
/// once the ledger's longest deadline after the hold has passed (their whole
/// stream is missing: the edge's object, if it has one, holds the saga that
/// would release or capture the hold; [`check_with`] reports the hold as a
/// `leaked_hold`, not as `dangling`).
pub fn dangling(f: &Facts, now_ms: i64) -> Vec<Dangling> {
    let mut out: Vec<Dangling> = f
        .transfers
        .open()
        .into_iter()
        .map(|(_, id, s)| (id, &s.facts))
        .filter_map(|(id, t)| {
            // Without its `created` row (lost, or not valid: completeness
            // names it), by the ledger's longest deadline after its latest
            // row (the last ms of the second it is kept in): never sooner
            // than its real one, and never never.
            let deadline_ms = t
                .deadline_ms()
                .unwrap_or_else(|| longest_deadline_after(t.last_at_s));
            (deadline_ms < now_ms).then(|| Dangling {
                transfer_id: id.to_owned(),
                phase: f.names.get(t.phase).to_owned(),
                deadline_ms,
                last_seq: t.last_seq,
                hold_only: false,
            })
        })
        .collect();
    // A hold is committed after its transfer's `created` row, so its
    // deadline is at most the longest one after the hold (the last ms of its
    // second). One entry a transfer, by its earliest hold.
    let mut hold_only: std::collections::BTreeMap<&str, i64> = Default::default();
    for (t, leg) in &f.live_holds {
        // An id the edge never names a transfer by (not `t.{tenant}.{key}`)
        // is no object to re-drive: the sweeper would skip it every run.
        if f.transfers.get(t).is_some() || ledger_api::names::parse_transfer_id(t).is_err() {
            continue;
        }
        let deadline_ms = longest_deadline_after(leg.at_s);
        if deadline_ms < now_ms {
            let d = hold_only.entry(t).or_insert(deadline_ms);
            *d = (*d).min(deadline_ms);
        }
    }
    out.extend(hold_only.into_iter().map(|(t, deadline_ms)| Dangling {
        transfer_id: t.to_owned(),
        phase: HOLD_ONLY_PHASE.to_owned(),
        deadline_ms,
        last_seq: 0,
        hold_only: true,
    }));
    out.sort_by(|a, b| (a.deadline_ms, &a.transfer_id).cmp(&(b.deadline_ms, &b.transfer_id)));
    out
}

/// The latest deadline a transfer can have whose row was kept at the
/// second `at_s`: the ledger's longest after the last ms of that second.
fn longest_deadline_after(at_s: u32) -> i64 {
    ms_of(at_s).saturating_add(ledger_events::TRANSFER_DEADLINE_MS_MAX)
}

/// The findings of a run at `now_ms` whose writers' clocks may be up to
/// `ahead_ms` ahead of its own (its settle window).
pub fn check(f: &Facts, now_ms: i64, ahead_ms: i64) -> Vec<Finding> {
    check_with(f, now_ms, ahead_ms, &dangling(f, now_ms))
}

/// [`check`], given the transfers [`dangling`] finds (a run also reports them).
pub fn check_with(f: &Facts, now_ms: i64, ahead_ms: i64, dangling: &[Dangling]) -> Vec<Finding> {
    let mut out: Vec<Finding> = dangling
        .iter()
        .filter(|d| !d.hold_only)
        .map(|d| {
            let id = ledger_events::event_id(
                ledger_events::Stream::Transfer,
                &d.transfer_id,
                d.last_seq,
            );
            Finding::new(
                "dangling",
                &d.transfer_id,
                format!(
                    "phase {} past its deadline {} by {} ms",
                    d.phase,
                    d.deadline_ms,
                    // i128: a deadline from an invalid row can be i64::MIN
                    // (rev-s51-exact F5: the difference wrapped).
                    i128::from(now_ms) - i128::from(d.deadline_ms)
                ),
            )
            .at(d.last_seq, &id)
            // Its terminal row may be committed and still in delivery: the
            // claim is decided once the deadline is older than the window.
            .absence(d.deadline_ms)
        })
        .collect();
    out.extend(from_the_future(f, now_ms, ahead_ms));
    let n = &f.names;
    let mut leaked: Vec<&(String, crate::facts::Leg)> = f
        .live_holds
        .iter()
        .filter(|(t, _)| f.transfers.get(t).is_none_or(|t| t.is_terminal()))
        .collect();
    leaked.sort_by(|a, b| {
        (&a.0, n.get(a.1.account), a.1.seq).cmp(&(&b.0, n.get(b.1.account), b.1.seq))
    });
    for (t, leg) in leaked {
        let account = n.get(leg.account);
        let transfer = f.transfers.get(t);
        let phase = transfer.map(|t| n.get(t.phase)).unwrap_or("unknown");
        // The capture or release was committed before the transfer's
        // terminal row, an unknown transfer's `created` before the hold:
        // they may be in delivery. A failed transfer never had a hold. Not
        // the hold's date with the terminal row's: a hold dated after the
        // transfer ended cannot be followed by the release the terminal row
        // shows, so it cannot put the decision off (rev-s56-pending 1).
        let young = transfer.map_or(leg.at_s, |t| t.last_at_s);
        let absent = phase != "failed";
        let f = Finding::new(
            "leaked_hold",
            t,
            format!(
                "hold of {} on {account} still live; the transfer is {phase}",
                leg.amount
            ),
        )
        .at(leg.seq, &leg.event_id(n));
        out.push(if absent { f.absence(ms_of(young)) } else { f });
    }
    out
}

/// How far ahead of a run's now a row may be dated before it is
/// `committed_in_future`, at the least (a shorter settle window, or none,
/// still allows this): the run's now is taken when it starts, and rows keep
/// coming while it lists the lake, and while `--settle-wait` waits and runs
/// again; a reconciler's clock may be behind. A date years ahead, which
/// would keep a transfer from ever dangling, is far past it.
pub const AHEAD_MIN_MS: i64 = 3_600_000;

/// Open transfers a row of which is dated more than `ahead_ms` (at least
/// [`AHEAD_MIN_MS`]) after `now_ms` (the latest commit time their rows record,
/// `TransferFacts::last_at_s`): a writer's clock wrong by that much, or a
/// forged row. Such a transfer's deadline is reckoned from its `created`
/// row's date (at most 30 days after it), so a `created` row dated years
/// ahead would keep it from ever being dangling, and the hold its source
/// keeps from ever leaking, while a credit that hold covers counts as money
/// in flight: every other check would hold. A wrong row: never pending.
/// Only open transfers: a terminal one moves to the settled archive, where
/// an incremental run no longer sees its date, and its holds are judged
/// ended or leaked by its terminal row.
fn from_the_future(f: &Facts, now_ms: i64, ahead_ms: i64) -> Vec<Finding> {
    let latest = now_ms.saturating_add(ahead_ms.max(AHEAD_MIN_MS));
    // `open` lists the transfers in id order.
    f.transfers
        .open()
        .into_iter()
        .filter(|(_, _, s)| i64::from(s.facts.last_at_s).saturating_mul(1000) > latest)
        .map(|(_, id, s)| {
            let at_ms = i64::from(s.facts.last_at_s) * 1000;
            // Dates are kept in whole seconds up to 2106 (`facts::secs`).
            // The distance from a capped date is a bound too
            // (rev-s56-outputs 2: it read as exact).
            let (or_later, at_least) = if s.facts.last_at_s == u32::MAX {
                (" or later", "at least ")
            } else {
                ("", "")
            };
            Finding::new(
                "committed_in_future",
                id,
                format!(
                    "phase {}: a row of it is dated {at_ms} ms{or_later}, {at_least}{} s after this run's now, more than \
                     the settle window (and an hour) ahead: its deadline, and whether it is dangling, rest on that date",
                    f.names.get(s.facts.phase),
                    (at_ms - now_ms) / 1000
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{secs, TransferState, Transfers};

    /// Facts holding one transfer `t.acme.k` at `phase` (terminal or not),
    /// its last row seq `last_seq` dated `at_ms`, and `deadline_ms`.
    fn one_transfer(
        phase: &str,
        terminal: bool,
        last_seq: u64,
        at_ms: i64,
        deadline_ms: Option<i64>,
    ) -> Facts {
        let mut f = Facts::default();
        let mut st = TransferState::default();
        st.facts.phase = f.names.id(phase);
        st.facts.set_terminal(terminal);
        st.facts.set_deadline_ms(deadline_ms);
        st.facts.last_seq = last_seq;
        st.facts.last_at_s = secs(at_ms);
        f.transfers = Transfers::from_sorted(vec![("t.acme.k".into(), st)]);
        f.finish_transfers();
        f
    }

    /// The `committed_in_future` findings of an open (or terminal) transfer
    /// whose latest row is dated `at_ms`, judged at `now_ms` with the
    /// settle window `ahead_ms`.
    fn future(at_ms: i64, terminal: bool, now_ms: i64, ahead_ms: i64) -> usize {
        let phase = if terminal { "captured" } else { "reserved" };
        let f = one_transfer(phase, terminal, 2, at_ms, Some(at_ms + 300_000));
        check(&f, now_ms, ahead_ms)
            .iter()
            .filter(|x| x.code == "committed_in_future")
            .count()
    }

    #[test]
    fn an_open_transfer_dated_past_the_window_and_an_hour_is_from_the_future() {
        let now = 1_800_000_000_000;
        // Rows a little ahead (the run's now is taken when it starts; a
        // clock behind): not with no window, nor with a short one.
        assert_eq!(future(now + 30 * 60_000, false, now, 0), 0);
        assert_eq!(future(now + AHEAD_MIN_MS, false, now, 60_000), 0);
        // Past the hour, or past a longer window.
        assert_eq!(future(now + AHEAD_MIN_MS + 1_000, false, now, 0), 1);
        assert_eq!(
            future(now + 2 * AHEAD_MIN_MS, false, now, 3 * AHEAD_MIN_MS),
            0
        );
        // Years ahead, the date capped at 2106: still found. Terminal: not
        // judged (its deadline no longer matters).
        assert_eq!(future(253_402_300_000_000, false, now, 600_000), 1);
        assert_eq!(future(253_402_300_000_000, true, now, 600_000), 0);
        // The distance from a capped date is said as the bound it is.
        let f = one_transfer("reserved", false, 2, 253_402_300_000_000, Some(now));
        let said = check(&f, now, 600_000)
            .into_iter()
            .find(|x| x.code == "committed_in_future")
            .unwrap()
            .detail;
        assert!(
            said.contains("4294967295000 ms or later, at least 2494967295 s after"),
            "{said}"
        );
        let f = one_transfer("reserved", false, 2, now + 2 * AHEAD_MIN_MS, Some(now));
        let said = &check(&f, now, 0)[0].detail;
        assert!(said.contains(" ms, 7200 s after"), "{said}");
    }

    /// rev-s45-checks L2: a transfer whose `created` row the lake lacks has
    /// no deadline of its own; it is dangling once the ledger's longest
    /// deadline after its latest row has passed, not never.
    #[test]
    fn a_transfer_without_its_created_row_dangles_by_the_longest_deadline() {
        let latest = 1_800_000_000_000;
        let dangling_at =
            |now_ms: i64| dangling(&one_transfer("reserved", false, 2, latest, None), now_ms);
        let bound = ms_of(secs(latest)) + ledger_events::TRANSFER_DEADLINE_MS_MAX;
        assert_eq!(
            bound,
            latest + 999 + ledger_events::TRANSFER_DEADLINE_MS_MAX
        );
        assert!(dangling_at(bound).is_empty());
        let d = dangling_at(bound + 1);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].deadline_ms, d[0].last_seq), (bound, 2));
    }

    /// rev-s46-late L4: a transfer the lake knows only by a live hold (its
    /// whole stream missing) goes to the sweeper once the longest deadline
    /// after its earliest hold has passed, one entry however many holds;
    /// its finding is the `leaked_hold`, not a `dangling`.
    #[test]
    fn a_transfer_known_only_by_a_live_hold_goes_to_the_sweeper_not_to_dangling() {
        let hold_at = 1_800_000_000_000;
        let mut f = one_transfer("reserved", false, 2, hold_at, Some(hold_at + 1));
        let (a, b, usd) = (
            f.names.id("acme.a"),
            f.names.id("acme.b"),
            f.names.id("USD"),
        );
        let hold = |account, at_ms| crate::facts::Leg {
            account,
            amount: 100,
            currency: usd,
            counterparty: b,
            seq: 4,
            at_s: secs(at_ms),
        };
        f.live_holds
            .push(("t.acme.lost".to_owned(), hold(a, hold_at + 5_000)));
        f.live_holds
            .push(("t.acme.lost".to_owned(), hold(b, hold_at)));
        // A hold of the known transfer is not its: it has a stream. Nor is
        // one of an id of another form than `t.{tenant}.{key}`: no object.
        f.live_holds.push(("t.acme.k".to_owned(), hold(a, hold_at)));
        f.live_holds
            .push(("acme-lost".to_owned(), hold(a, hold_at)));
        let bound = ms_of(secs(hold_at)) + ledger_events::TRANSFER_DEADLINE_MS_MAX;
        let ids = |now| {
            dangling(&f, now)
                .into_iter()
                .map(|d| {
                    (
                        d.transfer_id,
                        d.phase,
                        d.deadline_ms,
                        d.last_seq,
                        d.hold_only,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(bound),
            [(
                "t.acme.k".to_owned(),
                "reserved".to_owned(),
                hold_at + 1,
                2,
                false
            )]
        );
        let list = dangling(&f, bound + 1);
        assert_eq!(list.len(), 2, "{list:?}");
        assert_eq!(
            ids(bound + 1)[1],
            (
                "t.acme.lost".to_owned(),
                "unknown".to_owned(),
                bound,
                0,
                true
            )
        );
        let out = check_with(&f, bound + 1, 0, &list);
        let codes: Vec<_> = out.iter().map(|x| (x.code, x.key.as_str())).collect();
        assert_eq!(
            codes,
            [
                ("dangling", "t.acme.k"),
                ("leaked_hold", "acme-lost"),
                ("leaked_hold", "t.acme.lost"),
                ("leaked_hold", "t.acme.lost"),
            ]
        );
    }

    /// A hold live after its transfer ended rests on the capture or release
    /// not in the lake yet (committed before the transfer's terminal row):
    /// an absence, pending while young. A failed transfer's never: its
    /// source never held money for it.
    #[test]
    fn a_leaked_hold_is_an_absence_unless_its_transfer_failed() {
        let now = 1_800_000_000_000;
        for (phase, absent) in [("captured", true), ("released", true), ("failed", false)] {
            let mut f = one_transfer(phase, true, 3, now - 60_000, None);
            let (a, b, usd) = (
                f.names.id("acme.a"),
                f.names.id("acme.b"),
                f.names.id("USD"),
            );
            let hold = crate::facts::Leg {
                account: a,
                amount: 100,
                currency: usd,
                counterparty: b,
                seq: 7,
                at_s: secs(now - 120_000),
            };
            f.live_holds.push(("t.acme.k".to_owned(), hold));
            let out = check(&f, now, 0);
            let leaked: Vec<_> = out.iter().filter(|x| x.code == "leaked_hold").collect();
            assert_eq!(leaked.len(), 1, "{phase}: {out:?}");
            assert_eq!(leaked[0].event_id.as_deref(), Some("account:acme.a:7"));
            // The youngest row it rests on: the transfer's terminal one
            // (kept in whole seconds: the last ms of its second).
            let young = absent.then_some(ms_of(secs(now - 60_000)));
            assert_eq!(leaked[0].youngest_ms, young, "{phase}");
            // A hold dated after the terminal row cannot put the decision
            // off: the capture or release was committed before that row
            // (rev-s56-pending 1).
            if absent {
                let mut later = hold;
                later.seq = 9;
                later.at_s = secs(now - 1_000);
                f.live_holds = vec![("t.acme.k".to_owned(), later)];
                let out = check(&f, now, 0);
                let leaked = out.iter().find(|x| x.code == "leaked_hold").unwrap();
                assert_eq!(leaked.youngest_ms, young, "{phase}");
            }
        }
    }
}
