//! The corruption tool: copies a lake and injects exactly one violation
//! class, returning the findings the reconciler must report for it.
//!
//! Every injection is minimal: it changes the fewest rows that produce the
//! violation and keeps everything else valid (hash chains are resealed where
//! the class is not about hashes, balances refolded where it is not about
//! balances), so a test can assert exactly which rows each check reports.
//! Every copy of a changed event (plain duplicates in other files) is changed
//! the same way, so dedup never hides or doubles an injection. Files are
//! rewritten through the ingest writer (`ledger_ingest::build_files`), so the
//! damaged lake is still a lake of the current layout: only its content lies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ledger_events::{Event, Stream, GENESIS_HASH};
use ledger_ingest::{build_files, parse_object_key, read_file, FileLayer, Row};

use crate::gen::write_object;

/// The violation classes the tool injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Class {
    /// A dropped event in the middle of a transfer stream (seq gap).
    Gap,
    /// A deposit's amount changed without rehashing (the hash breaks).
    Tamper,
    /// A second, different version of a transfer's last event.
    Conflict,
    /// A captured transfer whose credit is 1 more than its debit.
    Unbalanced,
    /// A withdrawal that takes an account below its overdraft limit.
    Overdraft,
    /// A transfer created and never advanced, past its deadline.
    Dangling,
    /// A hold of its amount placed for a transfer that already failed, never released.
    Leaked,
    /// A balance that changed by 1000 without any entry.
    Nonconservation,
    /// An overdrawing withdrawal whose row raises the account's overdraft
    /// limit to hide it: judged by the limit the account was opened with.
    HiddenOverdraft,
    /// A deposit of 1 whose row raises the account's overdraft limit by
    /// 1000, then a withdrawal that keeps the raised limit and overdraws the
    /// limit the account was opened with by 1 (resealed): the only row that
    /// changes the terms is harmless, the overdrawing one repeats them.
    RaisedLimit,
    /// A captured transfer whose `captured` event records another amount than `created`.
    TermsChanged,
    /// A captured transfer's `credited` event removed, the stream renumbered and resealed.
    PhaseSkipped,
    /// A deposit recorded on a frozen account (a freeze blocks new money).
    FrozenDeposit,
    /// A captured transfer's credit naming its own account, not the source, as
    /// the counterparty (resealed).
    WrongCounterparty,
    /// A captured transfer left at `credited` (its `captured` event gone) and
    /// its credit removed from the destination (the account's later events
    /// renumbered, their balances moved back, resealed): credited, no credit.
    CreditLost,
    /// A captured transfer's hold placed a second time on its source, right
    /// after the first (the account's later events renumbered, their held
    /// that much higher, resealed): money held with no transfer to free it.
    HoldPlacedTwice,
    /// A hold already released, released again at the end of its account's
    /// stream, freeing money held for a transfer still in flight (needs a
    /// lake with transfers in progress: `generate --in-flight`; not in
    /// the list of every class, which runs on lakes without).
    ReleasedTwice,
    /// A transfer in progress (`reserved`) whose credit its destination
    /// already committed, every row of its stream, and its source's hold,
    /// naming a third account of its currency as the destination instead
    /// (resealed): the credit is on an account that is not the transfer's,
    /// while its source's hold is live and every balance refolds. The
    /// credit is then not money in flight, so its currency is not conserved
    /// (needs a lake with transfers in progress: `generate --in-flight`; not
    /// in the list of every class).
    CreditElsewhere,
    /// A transfer that is only `created` whose source holds 1 of its
    /// amount while its destination is credited the whole amount: a token
    /// hold standing behind a credit in flight (money created, and
    /// withdrawable, before any deadline).
    TokenHold,
    /// A transfer only `created`, whose deadline is the year 9999 (the
    /// ledger sets one at most 30 days ahead): it would never be dangling.
    FarDeadline,
    /// A transfer only `created`, that row dated in the year 9999 and its
    /// deadline 5 minutes after it: a deadline in range of its row, yet
    /// the transfer would never be dangling (a writer's clock wrong by
    /// centuries, or a forged row).
    FutureCreated,
    /// A deposit posted again at the end of its account's stream: its entry
    /// id at a second seq, the balance raised by its amount (resealed).
    /// Every balance refolds and the deposits still add up: money created
    /// by replaying an idempotent deposit.
    EntryTwice,
    /// A transfer of another tenant (`t.intruder.…`) between two of the
    /// lake's accounts, only `created`, past its deadline: one tenant's
    /// transfer reaching another's accounts.
    CrossTenant,
    /// A transfer under an id not of the form `t.{tenant}.{key}`
    /// (`x.{tenant}.…`) between two of the lake's accounts, only `created`,
    /// past its deadline: an id that names no tenant, so no tenant check
    /// could judge its accounts.
    ForeignId,
    /// A transfer from the lake's first account to itself, only `created`,
    /// past its deadline (the ledger refuses one).
    SameAccount,
    /// A deposit of 2⁵³ (one more than the ledger moves in one command)
    /// posted at the end of an account's stream, the balance raised by it
    /// (resealed): every balance refolds and the deposits add up.
    AmountOutOfRange,
    /// An account opened with the overdraft limit 2⁵³ (one more than the
    /// ledger allows), every row of its stream recording it (resealed).
    LimitOutOfRange,
    /// A failed transfer's hold of its amount placed on its source and
    /// released again, at the end of the source's stream (resealed): money
    /// neutral, every hold taken whole, nothing left live, yet the source
    /// refused the reserve of a failed transfer.
    FailedWithHold,
    /// A failed transfer's hold released on its source though none was
    /// placed (a tombstone: amount 0, `no_hold`), at the end of the
    /// source's stream (resealed): money-neutral, and what the account
    /// writes for a released transfer whose reserve may still land, yet the
    /// saga never releases a failed one.
    FailedWithRelease,
    /// A released transfer's hold of its amount placed on its source again
    /// after its release, and released again, at the end of the source's
    /// stream (resealed): money-neutral, every hold taken whole, nothing
    /// left live, yet the account refuses a reserve, and answers a release,
    /// after its hold's end.
    HoldAfterRelease,
    /// A captured transfer's hold released on its source after the capture,
    /// though none is left (a tombstone: amount 0, `no_hold`), at the end of
    /// the source's stream (resealed): money-neutral, yet the account
    /// refuses a release after a capture.
    ReleaseAfterCapture,
    /// A captured transfer's hold released on its destination though none
    /// was placed there (a tombstone: amount 0, `no_hold`), at the end of
    /// the destination's stream (resealed): money-neutral, yet the saga
    /// releases only on the source.
    ReleaseOffSource,
    /// A released transfer (its credit refused) whose `releasing` and
    /// `released` rows say `reserve_unavailable` (resealed): a reason of a
    /// reserve given up, after the reserve was granted.
    WrongReason,
    /// A released transfer whose `released` row gives another reason than
    /// its `releasing` (resealed).
    ReasonChanged,
    /// A transfer released after its credit was refused, left at
    /// `releasing` (its `released` row gone) and its refused credit
    /// appended to its destination's stream anyway (resealed): money the
    /// saga never moved, on a transfer being compensated.
    CreditWhileReleasing,
    /// A transfer `reserved`, its hold on its source, whose `created` row
    /// is lost: no deadline of its own, yet dangling 30 days after its
    /// latest row.
    CreatedLost,
    /// A hold on an account for a transfer whose whole stream is lost: a
    /// leg without its transfer and a leaked hold; 30 days after the hold,
    /// the transfer is on the sweeper's list (phase `"unknown"`), not `dangling`.
    TransferLost,
    /// A deposit booked again on a second account of its currency under the
    /// first account's entry id (resealed): entry ids are kept per account,
    /// so only the id's form shows it.
    EntryElsewhere,
}

impl Class {
    pub const ALL: &'static [Class] = &[
        Class::Gap,
        Class::Tamper,
        Class::Conflict,
        Class::Unbalanced,
        Class::Overdraft,
        Class::Dangling,
        Class::Leaked,
        Class::Nonconservation,
        Class::HiddenOverdraft,
        Class::RaisedLimit,
        Class::TermsChanged,
        Class::PhaseSkipped,
        Class::FrozenDeposit,
        Class::WrongCounterparty,
        Class::CreditLost,
        Class::HoldPlacedTwice,
        Class::TokenHold,
        Class::FarDeadline,
        Class::FutureCreated,
        Class::EntryTwice,
        Class::CrossTenant,
        Class::ForeignId,
        Class::SameAccount,
        Class::AmountOutOfRange,
        Class::LimitOutOfRange,
        Class::FailedWithHold,
        Class::FailedWithRelease,
        Class::HoldAfterRelease,
        Class::ReleaseAfterCapture,
        Class::ReleaseOffSource,
        Class::WrongReason,
        Class::ReasonChanged,
        Class::CreditWhileReleasing,
        Class::CreatedLost,
        Class::TransferLost,
        Class::EntryElsewhere,
    ];
}

/// One finding the reconciler must report: (check, code, key, event id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub check: &'static str,
    pub code: &'static str,
    pub key: String,
    pub event_id: Option<String>,
}

fn expect(check: &'static str, code: &'static str, key: &str, event_id: Option<&str>) -> Expected {
    Expected {
        check,
        code,
        key: key.to_owned(),
        event_id: event_id.map(str::to_owned),
    }
}

/// The one finding an injection leaves: `code` of `check` on the stream
/// `key`, at the event `e`.
fn one_at(check: &'static str, code: &'static str, key: &str, e: &Event) -> Vec<Expected> {
    vec![expect(check, code, key, Some(&e.event_id))]
}

/// What an injection did and what must be reported: every finding of every
/// check, exactly (checks not listed must hold).
#[derive(Debug, Clone)]
pub struct Injected {
    pub class: Class,
    pub description: String,
    pub expected: Vec<Expected>,
}

/// Copies every file under `src` to `dst` (created; must not exist, nor be
/// inside `src`: the copy would copy itself until the path grows too long,
/// inside the source lake).
pub fn copy_lake(src: &Path, dst: &Path) -> Result<(), String> {
    if dst.exists() {
        return Err(format!(
            "{} already exists; the copy must be new",
            dst.display()
        ));
    }
    outside(src, dst)?;
    fn walk(from: &Path, to: &Path) -> Result<(), String> {
        std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
        for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
            let entry = entry.map_err(|e| e.to_string())?;
            let target = to.join(entry.file_name());
            if entry.file_type().map_err(|e| e.to_string())?.is_dir() {
                walk(&entry.path(), &target)?;
            } else {
                std::fs::copy(entry.path(), &target)
                    .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            }
        }
        Ok(())
    }
    walk(src, dst)
}

/// An error if `dst` would be inside the lake `src`.
fn outside(src: &Path, dst: &Path) -> Result<(), String> {
    let from = src
        .canonicalize()
        .map_err(|e| format!("{}: {e}", src.display()))?;
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match parent.canonicalize() {
        Ok(parent) if parent.starts_with(&from) => Err(format!(
            "{} is inside the lake {}; the copy must be made elsewhere",
            dst.display(),
            src.display()
        )),
        _ => Ok(()),
    }
}

/// Copies the lake `src` to `dst` and runs `damage` on the copy, all under a
/// temporary name beside `dst`, renamed to `dst` only once `damage` has
/// succeeded: a class the lake cannot take (or any other error) leaves no
/// undamaged copy at `dst` for a script to prove as if damaged. `src` must
/// be a lake (hold `events/`).
pub fn damaged_copy<T>(
    src: &Path,
    dst: &Path,
    damage: impl FnOnce(&Path) -> Result<T, String>,
) -> Result<T, String> {
    if !src.join("events").is_dir() {
        return Err(format!("{}: not a lake (no events/ in it)", src.display()));
    }
    if dst.exists() {
        return Err(format!(
            "{} already exists; the copy must be new",
            dst.display()
        ));
    }
    outside(src, dst)?;
    let name = dst
        .file_name()
        .ok_or_else(|| format!("{}: names no directory", dst.display()))?;
    let tmp = dst.with_file_name(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let done = copy_lake(src, &tmp)
        .and_then(|()| damage(&tmp))
        .and_then(|t| {
            std::fs::rename(&tmp, dst)
                .map(|()| t)
                .map_err(|e| format!("{}: {e}", dst.display()))
        });
    if done.is_err() && tmp.exists() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    done
}

/// The lake's files held in memory, edited, and written back.
struct LocalLake {
    root: PathBuf,
    files: Vec<(String, Vec<Row>)>,
    dirty: BTreeSet<usize>,
    extra: Vec<Row>,
}

impl LocalLake {
    fn load(root: &Path) -> Result<LocalLake, String> {
        let mut keys = Vec::new();
        fn walk(root: &Path, dir: &Path, keys: &mut Vec<String>) -> Result<(), String> {
            for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                let entry = entry.map_err(|e| e.to_string())?;
                let path = entry.path();
                if path.is_dir() {
                    walk(root, &path, keys)?;
                } else if let Ok(rel) = path.strip_prefix(root) {
                    let key = rel.to_string_lossy().replace('\\', "/");
                    if parse_object_key(&key).is_some() {
                        keys.push(key);
                    }
                }
            }
            Ok(())
        }
        walk(
            root,
            &root.join(ledger_ingest::LAKE_EVENTS_PREFIX),
            &mut keys,
        )?;
        keys.sort();
        let mut files = Vec::new();
        for key in keys {
            let bytes = std::fs::read(root.join(&key)).map_err(|e| format!("{key}: {e}"))?;
            let rows = read_file(&key, bytes.into()).map_err(|e| e.to_string())?;
            files.push((key, rows));
        }
        Ok(LocalLake {
            root: root.to_owned(),
            files,
            dirty: BTreeSet::new(),
            extra: Vec::new(),
        })
    }

    /// Every stream, deduplicated, in seq order.
    fn streams(&self, stream: Stream) -> BTreeMap<String, Vec<Event>> {
        let mut m: BTreeMap<String, BTreeMap<u64, Event>> = BTreeMap::new();
        for (_, rows) in &self.files {
            for r in rows.iter().filter(|r| r.event.stream == stream) {
                m.entry(r.event.stream_key.clone())
                    .or_default()
                    .insert(r.event.seq, r.event.clone());
            }
        }
        m.into_iter()
            .map(|(k, v)| (k, v.into_values().collect()))
            .collect()
    }

    fn stream(&self, stream: Stream, key: &str) -> Vec<Event> {
        self.streams(stream).remove(key).unwrap_or_default()
    }

    /// Replaces every copy of every event of the stream by `events` (matched
    /// by seq); events with no copy yet go into a new file; copies of seqs
    /// absent from `events` are removed.
    fn replace_stream(&mut self, events: &[Event]) {
        let Some(first) = events.first() else { return };
        let (stream, key) = (first.stream, first.stream_key.clone());
        let by_seq: BTreeMap<u64, &Event> = events.iter().map(|e| (e.seq, e)).collect();
        let mut placed = BTreeSet::new();
        for (i, (_, rows)) in self.files.iter_mut().enumerate() {
            let before = rows.clone();
            rows.retain(|r| {
                !(r.event.stream == stream && r.event.stream_key == key)
                    || by_seq.contains_key(&r.event.seq)
            });
            for r in rows.iter_mut() {
                if r.event.stream == stream && r.event.stream_key == key {
                    r.event = by_seq[&r.event.seq].clone();
                    placed.insert(r.event.seq);
                }
            }
            if *rows != before {
                self.dirty.insert(i);
            }
        }
        for e in events.iter().filter(|e| !placed.contains(&e.seq)) {
            self.extra.push(Row {
                event: e.clone(),
                conflict: false,
            });
        }
    }

    fn save(mut self) -> Result<(), String> {
        for &i in &self.dirty {
            let (key, rows) = &mut self.files[i];
            std::fs::remove_file(self.root.join(key.as_str()))
                .map_err(|e| format!("{key}: {e}"))?;
            ledger_ingest::sort_rows(rows);
            write_rows(&self.root, std::mem::take(rows))?;
        }
        ledger_ingest::sort_rows(&mut self.extra);
        write_rows(&self.root, std::mem::take(&mut self.extra))
    }
}

fn write_rows(root: &Path, rows: Vec<Row>) -> Result<(), String> {
    if rows.is_empty() {
        return Ok(());
    }
    for f in build_files(rows, FileLayer::Ingest).map_err(|e| e.to_string())? {
        write_object(root, &f.key, &f.bytes)?;
    }
    Ok(())
}

/// Recomputes `prev_hash` and `hash` of `events[from..]` (one stream in seq order).
fn reseal_from(events: &mut [Event], from: usize) {
    for i in from..events.len() {
        let prev = if i == 0 {
            GENESIS_HASH.to_owned()
        } else {
            events[i - 1].hash.clone()
        };
        let mut e = events[i].clone();
        e.prev_hash = prev;
        events[i] = e.seal();
    }
}

/// The event after `last` in its stream: `kind`, a second later, the
/// account state `last` left, then `fill` sets the kind's fields; sealed
/// onto `last`.
pub fn next_event(last: &Event, kind: &str, fill: impl FnOnce(&mut Event)) -> Event {
    let mut e = Event::new(
        last.stream,
        &last.stream_key,
        last.seq + 1,
        kind,
        last.occurred_at_ms + 1_000,
        &last.hash,
    );
    e.currency = last.currency.clone();
    e.balance_after = last.balance_after;
    e.held_after = last.held_after;
    e.overdraft_limit = last.overdraft_limit;
    fill(&mut e);
    e.seal()
}

/// The next event of an account stream ([`next_event`]), appended to it.
fn append(stream: &mut Vec<Event>, kind: &str, fill: impl FnOnce(&mut Event)) -> Event {
    let last = stream.last().expect("streams are not empty");
    let e = next_event(last, kind, fill);
    stream.push(e.clone());
    e
}

/// A hold leg of the transfer `t` appended to an account stream: `kind`
/// (`hold_placed` or `hold_released`) of `amount`, which moves `held` by
/// that much (up for a placement, down for a release), naming
/// `counterparty`.
fn append_hold_leg(
    stream: &mut Vec<Event>,
    kind: &str,
    t: &str,
    amount: i64,
    counterparty: Option<String>,
) -> Event {
    let held = if kind == "hold_released" {
        -amount
    } else {
        amount
    };
    append(stream, kind, |e| {
        e.amount = Some(amount);
        e.held_after = e.held_after.map(|h| h + held);
        e.transfer_id = Some(t.to_owned());
        e.counterparty = counterparty;
    })
}

/// The deposit `first` booked again at the end of `stream` (its amount and
/// entry id; the balance raised by it), sealed: returns the new event.
fn deposit_again(stream: &mut Vec<Event>, first: &Event) -> Event {
    let amount = first.amount.unwrap_or(0);
    append(stream, "deposited", |e| {
        e.amount = first.amount;
        e.balance_after = e.balance_after.map(|b| b + amount);
        e.entry_id = first.entry_id.clone();
    })
}

/// The `created` event of a transfer `t` of 100 (dated at its source's first
/// event, its deadline 5 minutes later) from the first of `sources` that is
/// not frozen and can hold 100 at its end, to another account of its
/// currency.
fn created_where_it_can_hold<'a>(
    accounts: &BTreeMap<String, Vec<Event>>,
    mut sources: impl Iterator<Item = (&'a String, &'a Vec<Event>)>,
    t: &str,
) -> Result<Event, String> {
    sources
        .find_map(|(src, s_evs)| {
            let first = &s_evs[0];
            let (dst, _) = accounts
                .iter()
                .find(|(d, d_evs)| *d != src && d_evs[0].currency == first.currency)?;
            let at = first.occurred_at_ms;
            let c = created_event(t, src, dst, first.currency.clone(), 100, at, at + 300_000);
            (!frozen(s_evs) && can_hold(&c, s_evs)).then_some(c)
        })
        .ok_or_else(|| "the lake has no account that can hold 100 at its end".to_owned())
}

/// Whether a stream's events are of `kinds`, in that order.
fn kinds_are(evs: &[Event], kinds: &[&str]) -> bool {
    evs.iter()
        .map(|e| e.kind.as_str())
        .eq(kinds.iter().copied())
}

/// A transfer `t.{tenant}.{suffix}` (the generator's tenant) of 100 from
/// the lake's first account to its second, only `created` (at the first
/// account's first event, with the deadline `deadline(at)`), sealed and put
/// in the lake: its id, when, and the event.
fn created_only(
    l: &mut LocalLake,
    suffix: &str,
    deadline: impl FnOnce(i64) -> i64,
) -> Result<(String, i64, Event), String> {
    let t = format!("t.{}.{suffix}", crate::gen::GEN_TENANT);
    created_only_as(l, &t, false, deadline)
}

/// [`created_only`] under the id `t`, to the first account itself when
/// `to_itself`.
fn created_only_as(
    l: &mut LocalLake,
    t: &str,
    to_itself: bool,
    deadline: impl FnOnce(i64) -> i64,
) -> Result<(String, i64, Event), String> {
    created_only_dated(l, t, to_itself, None, deadline)
}

/// [`created_only_as`], the row dated `at` when given (else at the first
/// account's first event).
fn created_only_dated(
    l: &mut LocalLake,
    t: &str,
    to_itself: bool,
    at: Option<i64>,
    deadline: impl FnOnce(i64) -> i64,
) -> Result<(String, i64, Event), String> {
    let accounts = l.streams(Stream::Account);
    let mut it = accounts.iter();
    let (src, s_evs) = it.next().ok_or("the lake has no account")?;
    let (dst, _) = if to_itself {
        (src, s_evs)
    } else {
        it.next().ok_or("the lake has one account only")?
    };
    let t = t.to_owned();
    let at = at.unwrap_or(s_evs[0].occurred_at_ms);
    let currency = s_evs[0].currency.clone();
    let e = created_event(&t, src, dst, currency, 100, at, deadline(at));
    l.replace_stream(std::slice::from_ref(&e));
    Ok((t, at, e))
}

/// The sealed `created` event of the transfer `t` of `amount` `currency`
/// from `src` to `dst`, at `at`, with the deadline `deadline`.
fn created_event(
    t: &str,
    src: &str,
    dst: &str,
    currency: Option<String>,
    amount: i64,
    at: i64,
    deadline: i64,
) -> Event {
    let mut e = Event::new(Stream::Transfer, t, 1, "created", at, GENESIS_HASH);
    e.currency = currency;
    e.amount = Some(amount);
    e.transfer_id = Some(t.to_owned());
    e.source = Some(src.to_owned());
    e.destination = Some(dst.to_owned());
    e.deadline_ms = Some(deadline);
    e.seal()
}

/// Which account of a transfer.
#[derive(Clone, Copy)]
enum Party {
    Source,
    Destination,
}

impl Party {
    fn of(self, created: &Event) -> Option<&str> {
        match self {
            Party::Source => created.source.as_deref(),
            Party::Destination => created.destination.as_deref(),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Party::Source => "source",
            Party::Destination => "destination",
        }
    }
}

/// The first transfer of the lake whose last row is `last` and whose
/// `party` has a stream that `fits` (given the transfer's `created` row and
/// that stream): the transfer's id, the transfer's `created` row, that
/// account and its stream.
fn transfer_ending(
    l: &LocalLake,
    last: &str,
    party: Party,
    fits: impl Fn(&Event, &[Event]) -> bool,
) -> Option<(String, Event, String, Vec<Event>)> {
    let accounts = l.streams(Stream::Account);
    l.streams(Stream::Transfer)
        .into_iter()
        .filter(|(_, evs)| evs.last().is_some_and(|e| e.kind == last))
        .find_map(|(t, evs)| {
            let acc = party.of(&evs[0])?.to_owned();
            let stream = accounts.get(&acc).filter(|s| fits(&evs[0], s))?;
            Some((t, evs[0].clone(), acc, stream.clone()))
        })
}

/// A hold of its amount placed on the source of the first transfer whose
/// last row is `last` and whose source, not frozen and in the transfer's
/// currency, can hold it now, and released again, at the end of the
/// source's stream (resealed): money-neutral, every hold taken whole.
/// The transfer, its source, the hold and the release.
fn hold_again(l: &mut LocalLake, last: &str) -> Result<(String, String, Event, Event), String> {
    let (t, created, src, mut evs) = transfer_ending(l, last, Party::Source, |created, acc| {
        !frozen(acc) && acc[0].currency == created.currency && can_hold(created, acc)
    })
    .ok_or_else(|| {
        format!("the lake has no {last} transfer whose source can hold its amount now")
    })?;
    let amount = created.amount.unwrap_or(0);
    let dst = &created.destination;
    let hold = append_hold_leg(&mut evs, "hold_placed", &t, amount, dst.clone());
    let release = append_hold_leg(&mut evs, "hold_released", &t, amount, dst.clone());
    l.replace_stream(&evs);
    Ok((t, src, hold, release))
}

/// A release of no hold (a tombstone: amount 0, `no_hold`) of the first
/// transfer whose last row is `last`, at the end of its `party`'s stream
/// (resealed): the transfer, that account and the release.
fn tombstone(
    l: &mut LocalLake,
    last: &str,
    party: Party,
) -> Result<(String, String, Event), String> {
    let (t, _, acc, mut evs) = transfer_ending(l, last, party, |_, _| true).ok_or_else(|| {
        format!(
            "the lake has no {last} transfer whose {} is in it",
            party.as_str()
        )
    })?;
    let release = append(&mut evs, "hold_released", |e| {
        e.amount = Some(0);
        e.transfer_id = Some(t.clone());
        e.reason = Some("no_hold".to_owned());
    });
    l.replace_stream(&evs);
    Ok((t, acc, release))
}

/// Whether the account whose stream is `acc` can hold the amount of the
/// transfer `created` after its last event.
fn can_hold(created: &Event, acc: &[Event]) -> bool {
    let room = acc
        .last()
        .and_then(|last| Some(last.balance_after? - last.held_after? + last.overdraft_limit?));
    room.zip(created.amount)
        .is_some_and(|(room, amount)| room >= amount)
}

/// Whether the account whose events are `evs` is frozen after the last
/// (a deposit, hold or credit appended to it would also be `phase_order`).
fn frozen(evs: &[Event]) -> bool {
    evs.iter()
        .rev()
        .find(|e| e.kind == "frozen" || e.kind == "unfrozen")
        .is_some_and(|e| e.kind == "frozen")
}

/// The lake's first account stream (by key), in seq order.
fn first_account(l: &LocalLake) -> Result<(String, Vec<Event>), String> {
    l.streams(Stream::Account)
        .into_iter()
        .next()
        .ok_or_else(|| "the lake has no account".to_owned())
}

/// `Ok` if `at` is before `now_ms` (a deadline the class needs past at the
/// instant reconcile judges), an error naming both otherwise.
fn before_now(at: i64, now_ms: i64, what: &str) -> Result<(), String> {
    if at < now_ms {
        Ok(())
    } else {
        Err(format!(
            "{what} is {at}, which must be before --now-ms {now_ms}: pass a later --now-ms"
        ))
    }
}

/// The first account not frozen at its end: a deposit or withdrawal
/// appended there is no `phase_order` (a second finding the class does not
/// mean).
fn first_unfrozen_account(l: &LocalLake) -> Result<(String, Vec<Event>), String> {
    l.streams(Stream::Account)
        .into_iter()
        .find(|(_, evs)| !frozen(evs))
        .ok_or_else(|| "the lake has no account that is not frozen at its end".to_owned())
}

/// (balance, held, overdraft limit) after a stream's last event.
fn last_state(evs: &[Event]) -> (i64, i64, i64) {
    let last = evs.last().expect("streams are not empty");
    (
        last.balance_after.unwrap_or(0),
        last.held_after.unwrap_or(0),
        last.overdraft_limit.unwrap_or(0),
    )
}

fn first_captured(l: &LocalLake) -> Result<(String, Vec<Event>), String> {
    l.streams(Stream::Transfer)
        .into_iter()
        .find(|(_, evs)| evs.len() == 4 && evs[3].kind == "captured")
        .ok_or_else(|| "the lake has no captured transfer to corrupt".to_owned())
}

/// The first released transfer whose credit was refused (created,
/// reserved, releasing, released).
fn first_released(l: &LocalLake) -> Result<(String, Vec<Event>), String> {
    l.streams(Stream::Transfer)
        .into_iter()
        .find(|(_, evs)| kinds_are(evs, &["created", "reserved", "releasing", "released"]))
        .ok_or_else(|| "the lake has no transfer released after its credit was refused".to_owned())
}

/// The first captured transfer whose account `party` names (its source or
/// destination) has the transfer's `kind` leg at row `i` and would stay
/// within its overdraft limit with that leg's amount less available at that
/// row and every later one: (transfer id, the transfer's events, the
/// account's events, `i`).
fn captured_with_room(
    l: &LocalLake,
    party: fn(&Event) -> Option<&str>,
    kind: &str,
) -> Option<(String, Vec<Event>, Vec<Event>, usize)> {
    let accounts = l.streams(Stream::Account);
    l.streams(Stream::Transfer)
        .into_iter()
        .filter(|(_, evs)| evs.len() == 4 && evs[3].kind == "captured")
        .find_map(|(t, t_evs)| {
            let evs = accounts.get(party(&t_evs[0])?)?.clone();
            let i = evs
                .iter()
                .position(|e| e.kind == kind && e.transfer_id.as_deref() == Some(&t))?;
            let a = evs[i].amount?;
            let within = evs[i..].iter().all(|e| {
                let (b, h, lim) = (e.balance_after, e.held_after, e.overdraft_limit);
                b.zip(h)
                    .zip(lim)
                    .is_some_and(|((b, h), lim)| b - a - h >= -lim)
            });
            within.then_some((t, t_evs, evs, i))
        })
}

/// Injects `class` into the lake at `root` (edited in place: pass a copy).
/// `now_ms` is the instant the reconciler will judge deadlines at.
pub fn inject(root: &Path, class: Class, now_ms: i64) -> Result<Injected, String> {
    let mut l = LocalLake::load(root)?;
    let (description, expected) = match class {
        Class::Gap => {
            let (t, mut evs) = first_captured(&l)?;
            let dropped = evs.remove(1);
            l.replace_stream(&evs);
            (
                format!("dropped {} ({})", dropped.event_id, dropped.kind),
                one_at("completeness", "seq_gap", &t, &dropped),
            )
        }
        Class::Tamper => {
            let (acc, mut evs, i) = l
                .streams(Stream::Account)
                .into_iter()
                .find_map(|(k, evs)| {
                    let i = evs.iter().position(|e| e.kind == "deposited")?;
                    Some((k, evs, i))
                })
                .ok_or("the lake has no deposit to tamper with")?;
            let amount = evs[i].amount.unwrap_or(0);
            evs[i].amount = Some(amount + 1);
            let e = evs[i].clone();
            let currency = e.currency.clone().unwrap_or_default();
            l.replace_stream(&evs);
            (
                format!(
                    "{}: amount {amount} → {} without rehashing",
                    e.event_id,
                    amount + 1
                ),
                vec![
                    expect("completeness", "hash_mismatch", &acc, Some(&e.event_id)),
                    expect(
                        "balance_integrity",
                        "balance_mismatch",
                        &acc,
                        Some(&e.event_id),
                    ),
                    expect("global_conservation", "not_conserved", &currency, None),
                ],
            )
        }
        Class::Conflict => {
            let (t, evs) = first_captured(&l)?;
            let mut other = evs[3].clone();
            other.occurred_at_ms += 1;
            let other = other.seal();
            l.extra.push(Row {
                event: other.clone(),
                conflict: false,
            });
            (
                format!("second version of {} (occurred_at_ms + 1)", other.event_id),
                one_at("conflicting_duplicates", "conflict", &t, &other),
            )
        }
        Class::Unbalanced => {
            let (t, evs) = first_captured(&l)?;
            let dst = evs[0].destination.clone().unwrap_or_default();
            let mut acc = l.stream(Stream::Account, &dst);
            let i = acc
                .iter()
                .position(|e| e.kind == "credited" && e.transfer_id.as_deref() == Some(&t))
                .ok_or("the destination has no credit for the transfer")?;
            acc[i].amount = acc[i].amount.map(|a| a + 1);
            for e in &mut acc[i..] {
                e.balance_after = e.balance_after.map(|b| b + 1);
            }
            reseal_from(&mut acc, i);
            let currency = acc[i].currency.clone().unwrap_or_default();
            let desc = format!("{}: credit 1 more than the debit", acc[i].event_id);
            l.replace_stream(&acc);
            (
                desc,
                vec![
                    expect("transfer_conservation", "captured_legs_mismatch", &t, None),
                    expect("global_conservation", "not_conserved", &currency, None),
                ],
            )
        }
        Class::Overdraft => {
            let (acc, mut evs) = first_unfrozen_account(&l)?;
            let (bal, held, limit) = last_state(&evs);
            let amount = bal - held + limit + 1;
            let e = append(&mut evs, "withdrawn", |e| {
                e.amount = Some(amount);
                e.balance_after = Some(bal - amount);
                e.entry_id = Some(format!("wd:{acc}:injected-overdraft"));
            });
            l.replace_stream(&evs);
            (
                format!(
                    "{}: withdrawal of {amount} leaves available −{} below the limit",
                    e.event_id,
                    limit + 1
                ),
                one_at("no_overdraft", "overdraft", &acc, &e),
            )
        }
        Class::HiddenOverdraft => {
            let (acc, mut evs) = first_unfrozen_account(&l)?;
            let (bal, held, limit) = last_state(&evs);
            // Below the limit by 1 (at least 1: the account may be overdrawn already), and the
            // row's limit exactly what hides it.
            let amount = (bal - held + limit + 1).max(1);
            let hiding = held - (bal - amount);
            let e = append(&mut evs, "withdrawn", |e| {
                e.amount = Some(amount);
                e.balance_after = Some(bal - amount);
                e.overdraft_limit = Some(hiding);
                e.entry_id = Some(format!("wd:{acc}:injected-hidden-overdraft"));
            });
            l.replace_stream(&evs);
            (
                format!(
                    "{}: withdrawal of {amount} overdraws the limit {limit}, the row records a limit of {hiding}",
                    e.event_id
                ),
                vec![
                    expect("balance_integrity", "terms_changed", &acc, Some(&e.event_id)),
                    expect("no_overdraft", "overdraft", &acc, Some(&e.event_id)),
                ],
            )
        }
        Class::RaisedLimit => {
            let (acc, mut evs) = first_unfrozen_account(&l)?;
            let (bal, held, limit) = last_state(&evs);
            let raised = limit + 1000;
            let raise = append(&mut evs, "deposited", |e| {
                e.amount = Some(1);
                e.balance_after = Some(bal + 1);
                e.overdraft_limit = Some(raised);
                e.entry_id = Some(format!("dep:{acc}:injected-raised-limit"));
            });
            // Available −(limit + 1) after it (at least 1 withdrawn: the
            // account may be overdrawn already), within the raised limit.
            let amount = (bal + 1 - held + limit + 1).max(1);
            let e = append(&mut evs, "withdrawn", |e| {
                e.amount = Some(amount);
                e.balance_after = Some(bal + 1 - amount);
                e.entry_id = Some(format!("wd:{acc}:injected-raised-limit"));
            });
            l.replace_stream(&evs);
            (
                format!(
                    "{}: deposit of 1 raises the limit {limit} to {raised}; {}: withdrawal of {amount} overdraws {limit}, within {raised}",
                    raise.event_id, e.event_id
                ),
                vec![
                    expect("balance_integrity", "terms_changed", &acc, Some(&raise.event_id)),
                    expect("no_overdraft", "overdraft", &acc, Some(&e.event_id)),
                ],
            )
        }
        Class::TermsChanged => {
            let (t, mut evs) = first_captured(&l)?;
            evs[3].amount = evs[3].amount.map(|a| a + 1);
            reseal_from(&mut evs, 3);
            let e = evs[3].clone();
            l.replace_stream(&evs);
            (
                format!("{}: amount 1 more than created", e.event_id),
                one_at("transfer_conservation", "terms_changed", &t, &e),
            )
        }
        Class::PhaseSkipped => {
            let (t, mut evs) = first_captured(&l)?;
            let dropped = evs.remove(2);
            evs[2].seq = 3;
            evs[2].event_id = ledger_events::event_id(Stream::Transfer, &t, 3);
            reseal_from(&mut evs, 2);
            let e = evs[2].clone();
            l.replace_stream(&evs);
            (
                format!(
                    "{} ({}) removed, {} renumbered: captured right after reserved",
                    dropped.event_id, dropped.kind, e.event_id
                ),
                one_at("completeness", "phase_order", &t, &e),
            )
        }
        Class::FrozenDeposit => {
            let (acc, mut evs) = first_account(&l)?;
            if !frozen(&evs) {
                append(&mut evs, "frozen", |_| {});
            }
            let e = append(&mut evs, "deposited", |e| {
                e.amount = Some(1);
                e.balance_after = e.balance_after.map(|b| b + 1);
                e.entry_id = Some(format!("dep:{acc}:injected-frozen-deposit"));
            });
            l.replace_stream(&evs);
            (
                format!("{}: a deposit of 1 while the account is frozen", e.event_id),
                one_at("completeness", "phase_order", &acc, &e),
            )
        }
        Class::EntryTwice => {
            // An account not frozen at its end (a deposit there is
            // refused: that would be a second finding) with a deposit.
            let (acc, mut evs, first) = l
                .streams(Stream::Account)
                .into_iter()
                .find_map(|(acc, evs)| {
                    let first = evs.iter().find(|e| e.kind == "deposited")?.clone();
                    (!frozen(&evs)).then_some((acc, evs, first))
                })
                .ok_or("the lake has no account with a deposit that is not frozen")?;
            let e = deposit_again(&mut evs, &first);
            l.replace_stream(&evs);
            (
                format!(
                    "{}: deposit {} (seq {}) posted again",
                    e.event_id,
                    first.entry_id.as_deref().unwrap_or_default(),
                    first.seq
                ),
                one_at("balance_integrity", "entry_posted_twice", &acc, &e),
            )
        }
        Class::EntryElsewhere => {
            // A deposit, and another account of its currency not frozen at
            // its end, which gets it too.
            let accounts = l.streams(Stream::Account);
            let (first, other) = accounts
                .iter()
                .find_map(|(acc, evs)| {
                    let first = evs.iter().find(|e| e.kind == "deposited")?;
                    let (other, _) = accounts.iter().find(|(o, o_evs)| {
                        *o != acc && o_evs[0].currency == first.currency && !frozen(o_evs)
                    })?;
                    Some((first.clone(), other.clone()))
                })
                .ok_or("the lake has no deposit and a second account of its currency")?;
            let mut evs = accounts[other.as_str()].clone();
            let e = deposit_again(&mut evs, &first);
            l.replace_stream(&evs);
            (
                format!(
                    "{}: deposit {} of {} booked on {other} too",
                    e.event_id,
                    first.entry_id.as_deref().unwrap_or_default(),
                    first.stream_key
                ),
                one_at("balance_integrity", "entry_not_the_accounts", &other, &e),
            )
        }
        Class::CreditLost => {
            // A captured transfer whose destination stays within its limit
            // without the credit at every later event (no overdraft follows).
            let (t, t_evs, mut evs, i) =
                captured_with_room(&l, |t| t.destination.as_deref(), "credited")
                    .ok_or("the lake has no captured transfer whose credit can be lost")?;
            let credit = evs.remove(i);
            let amount = credit.amount.unwrap_or(0);
            for e in &mut evs[i..] {
                e.seq -= 1;
                e.event_id = ledger_events::event_id(Stream::Account, &e.stream_key, e.seq);
                e.balance_after = e.balance_after.map(|b| b - amount);
            }
            reseal_from(&mut evs, i);
            l.replace_stream(&evs);
            l.replace_stream(&t_evs[..3]);
            let currency = t_evs[0].currency.clone().unwrap_or_default();
            (
                format!(
                    "{t}: its `captured` event and its credit {} removed (the destination's later events renumbered, their balances {amount} lower, resealed): phase credited, the source debited, no credit",
                    credit.event_id
                ),
                vec![
                    expect("cross_stream_consistency", "phase_without_credit", &t, None),
                    expect("global_conservation", "not_conserved", &currency, None),
                    // Left in progress: past its deadline at `now`.
                    expect(
                        "terminal_convergence",
                        "dangling",
                        &t,
                        Some(&t_evs[2].event_id),
                    ),
                ],
            )
        }
        Class::HoldPlacedTwice => {
            // A captured transfer whose source stays within its limit with
            // the hold's amount held once more at every later event.
            let (t, _, mut evs, i) = captured_with_room(&l, |t| t.source.as_deref(), "hold_placed")
                .ok_or(
                    "the lake has no captured transfer whose source can hold its amount twice",
                )?;
            let amount = evs[i].amount.unwrap_or(0);
            let mut again = evs[i].clone();
            again.seq += 1;
            again.event_id = ledger_events::event_id(Stream::Account, &again.stream_key, again.seq);
            evs.insert(i + 1, again);
            for e in &mut evs[i + 1..] {
                e.held_after = e.held_after.map(|h| h + amount);
            }
            for e in &mut evs[i + 2..] {
                e.seq += 1;
                e.event_id = ledger_events::event_id(Stream::Account, &e.stream_key, e.seq);
            }
            reseal_from(&mut evs, i + 1);
            l.replace_stream(&evs);
            let acc = evs[i].stream_key.clone();
            (
                format!(
                    "{}: transfer {t}'s hold of {amount} placed again on {acc} (later events renumbered, held {amount} higher, resealed)",
                    evs[i + 1].event_id
                ),
                one_at("balance_integrity", "hold_placed_twice", &acc, &evs[i + 1]),
            )
        }
        Class::ReleasedTwice => {
            // An account holding at least what one of its earlier releases
            // freed: that release again, at the end.
            let (acc, mut evs, first) = l
                .streams(Stream::Account)
                .into_iter()
                .find_map(|(acc, evs)| {
                    let (_, held, _) = last_state(&evs);
                    let first = evs
                        .iter()
                        .find(|e| {
                            e.kind == "hold_released" && e.amount.is_some_and(|a| a > 0 && a <= held)
                        })?
                        .clone();
                    Some((acc, evs, first))
                })
                .ok_or("the lake has no account holding as much as one of its releases freed (generate it with --in-flight)")?;
            let amount = first.amount.unwrap_or(0);
            let e = append(&mut evs, "hold_released", |e| {
                e.amount = Some(amount);
                e.held_after = e.held_after.map(|h| h - amount);
                e.transfer_id = first.transfer_id.clone();
                e.counterparty = first.counterparty.clone();
                e.reason = first.reason.clone();
            });
            l.replace_stream(&evs);
            (
                format!(
                    "{}: {acc} releases {amount} for {} again ({} released it), freeing money held for another transfer",
                    e.event_id,
                    first.transfer_id.as_deref().unwrap_or_default(),
                    first.event_id
                ),
                [
                    one_at("balance_integrity", "release_without_hold", &acc, &e),
                    // On the transfer's source, after its hold's end.
                    one_at(
                        "cross_stream_consistency",
                        "release_after_end",
                        first.transfer_id.as_deref().unwrap_or_default(),
                        &e,
                    ),
                ]
                .concat(),
            )
        }
        Class::CreditElsewhere => {
            let accounts = l.streams(Stream::Account);
            let credited: BTreeSet<&str> = accounts
                .values()
                .flatten()
                .filter(|e| e.kind == "credited")
                .filter_map(|e| e.transfer_id.as_deref())
                .collect();
            let (t, mut t_evs, other) = l
                .streams(Stream::Transfer)
                .into_iter()
                .find_map(|(t, evs)| {
                    if !kinds_are(&evs, &["created", "reserved"]) || !credited.contains(t.as_str()) {
                        return None;
                    }
                    let c = &evs[0];
                    // Of the transfer's tenant (`t.{tenant}.` → `{tenant}.`)
                    // and currency, neither of its parties.
                    let tenant = t.strip_prefix("t.")?.split_once('.')?.0;
                    let other = accounts
                        .iter()
                        .find(|(a, a_evs)| {
                            a.strip_prefix(tenant).is_some_and(|r| r.starts_with('.'))
                                && Some(a.as_str()) != c.source.as_deref()
                                && Some(a.as_str()) != c.destination.as_deref()
                                && a_evs[0].currency == c.currency
                        })?
                        .0
                        .clone();
                    Some((t, evs, other))
                })
                .ok_or("the lake has no transfer reserved whose credit its destination committed (generate it with --in-flight)")?;
            let dst = t_evs[0].destination.clone().unwrap_or_default();
            let src = t_evs[0].source.clone().unwrap_or_default();
            let currency = t_evs[0].currency.clone().unwrap_or_default();
            for e in &mut t_evs {
                e.destination = Some(other.clone());
            }
            reseal_from(&mut t_evs, 0);
            l.replace_stream(&t_evs);
            let mut s_evs = accounts[&src].clone();
            let i = s_evs
                .iter()
                .position(|e| e.kind == "hold_placed" && e.transfer_id.as_deref() == Some(&t))
                .ok_or("the reserved transfer has no hold on its source")?;
            s_evs[i].counterparty = Some(other.clone());
            reseal_from(&mut s_evs, i);
            l.replace_stream(&s_evs);
            (
                format!(
                    "{t}: reserved, its credit committed on {dst}, every row of its stream and its hold on {src} naming {other} as the destination (resealed)"
                ),
                vec![
                    expect(
                        "transfer_conservation",
                        "credit_not_the_transfers",
                        &t,
                        None,
                    ),
                    expect("global_conservation", "not_conserved", &currency, None),
                ],
            )
        }
        Class::WrongCounterparty => {
            let (t, t_evs) = first_captured(&l)?;
            let (src, dst) = (t_evs[0].source.clone(), t_evs[0].destination.clone());
            let dst = dst.ok_or("the captured transfer has no destination")?;
            let mut evs = l
                .streams(Stream::Account)
                .remove(&dst)
                .ok_or("the captured transfer's destination has no stream")?;
            let i = evs
                .iter()
                .position(|e| e.kind == "credited" && e.transfer_id.as_deref() == Some(&t))
                .ok_or("the captured transfer has no credit on its destination")?;
            evs[i].counterparty = Some(dst.clone());
            reseal_from(&mut evs, i);
            let e = evs[i].clone();
            l.replace_stream(&evs);
            (
                format!(
                    "{}: the credit names {dst} (its own account) as the counterparty, not the source {}, resealed",
                    e.event_id,
                    src.unwrap_or_default()
                ),
                one_at("cross_stream_consistency", "counterparty_mismatch", &t, &e),
            )
        }
        Class::Dangling => {
            let (t, at, e) = created_only(&mut l, "injected-dangling", |at| at + 300_000)?;
            before_now(at + 300_000, now_ms, "the injected deadline")?;
            (
                format!("{t}: created, never advanced, deadline {}", at + 300_000),
                one_at("terminal_convergence", "dangling", &t, &e),
            )
        }
        Class::Leaked => {
            let (t, created, src, mut evs) =
                transfer_ending(&l, "failed", Party::Source, |created, acc| {
                    !frozen(acc) && can_hold(created, acc)
                })
                .ok_or("the lake has no failed transfer whose source can hold its amount now")?;
            // A hold of the transfer's amount (one of another amount is
            // also `hold_amount_mismatch`): only the leak is wrong.
            let amount = created.amount.unwrap_or(0);
            let e = append_hold_leg(&mut evs, "hold_placed", &t, amount, created.destination);
            l.replace_stream(&evs);
            (
                format!("{}: hold for the failed transfer {t} on {src}", e.event_id),
                // Left live: a leak, and a hold the source never granted.
                vec![
                    expect("terminal_convergence", "leaked_hold", &t, Some(&e.event_id)),
                    expect(
                        "cross_stream_consistency",
                        "failed_with_hold",
                        &t,
                        Some(&e.event_id),
                    ),
                ],
            )
        }
        Class::CrossTenant | Class::ForeignId | Class::SameAccount => {
            let tenant = crate::gen::GEN_TENANT;
            let (t, to_itself, code) = match class {
                Class::CrossTenant => (
                    "t.intruder.injected-cross-tenant".to_owned(),
                    false,
                    "cross_tenant",
                ),
                Class::ForeignId => (
                    format!("x.{tenant}.injected-foreign-id"),
                    false,
                    "transfer_id_form",
                ),
                _ => (
                    format!("t.{tenant}.injected-same-account"),
                    true,
                    "same_account",
                ),
            };
            let (t, _, e) = created_only_as(&mut l, &t, to_itself, |at| at + 300_000)?;
            (
                format!(
                    "{t}: created from {} to {}, never advanced",
                    e.source.as_deref().unwrap_or_default(),
                    e.destination.as_deref().unwrap_or_default()
                ),
                vec![
                    expect("terminal_convergence", "dangling", &t, Some(&e.event_id)),
                    expect("transfer_conservation", code, &t, Some(&e.event_id)),
                ],
            )
        }
        Class::FarDeadline => {
            let far = |_: i64| ledger_events::event::TIME_MS_MAX;
            let (t, at, e) = created_only(&mut l, "injected-far-deadline", far)?;
            let bound = at + ledger_events::TRANSFER_DEADLINE_MS_MAX;
            before_now(bound, now_ms, "the deadline's bound")?;
            (
                format!(
                    "{t}: created, never advanced, deadline {} (the bound: {bound})",
                    ledger_events::event::TIME_MS_MAX
                ),
                vec![
                    expect("terminal_convergence", "dangling", &t, Some(&e.event_id)),
                    expect(
                        "transfer_conservation",
                        "deadline_out_of_range",
                        &t,
                        Some(&e.event_id),
                    ),
                ],
            )
        }
        Class::FutureCreated => {
            let t = format!("t.{}.injected-future", crate::gen::GEN_TENANT);
            let at = ledger_events::event::TIME_MS_MAX - 300_000;
            if at <= now_ms {
                return Err(format!(
                    "the injected row is dated {at}, which must be after --now-ms {now_ms}: pass an earlier --now-ms"
                ));
            }
            let (t, at, _) = created_only_dated(&mut l, &t, false, Some(at), |at| at + 300_000)?;
            (
                format!(
                    "{t}: created at {at}, never advanced, deadline {}",
                    at + 300_000
                ),
                vec![expect(
                    "terminal_convergence",
                    "committed_in_future",
                    &t,
                    None,
                )],
            )
        }
        Class::TokenHold => {
            // Two accounts of one currency, the source with room to hold 1.
            let accounts = l.streams(Stream::Account);
            let (src, s_evs) = accounts
                .iter()
                .find(|(_, evs)| {
                    let (balance, held, limit) = last_state(evs);
                    balance - held + limit >= 1 && !frozen(evs)
                })
                .ok_or("the lake has no account that can hold 1 more")?;
            let (dst, d_evs) = accounts
                .iter()
                .find(|(k, evs)| *k != src && evs[0].currency == s_evs[0].currency && !frozen(evs))
                .ok_or("the lake has no second account in the source's currency")?;
            let (mut s_evs, mut d_evs) = (s_evs.clone(), d_evs.clone());
            let t = format!("t.{}.injected-token", crate::gen::GEN_TENANT);
            let amount = 1_000_000;
            let at = s_evs
                .last()
                .unwrap()
                .occurred_at_ms
                .max(d_evs.last().unwrap().occurred_at_ms);
            let currency = s_evs[0].currency.clone();
            let created = created_event(&t, src, dst, currency, amount, at, at + 300_000);
            before_now(at + 300_000, now_ms, "the injected deadline")?;
            let hold = append_hold_leg(&mut s_evs, "hold_placed", &t, 1, Some(dst.clone()));
            let credit = append(&mut d_evs, "credited", |e| {
                e.amount = Some(amount);
                e.balance_after = e.balance_after.map(|b| b + amount);
                e.transfer_id = Some(t.clone());
                e.counterparty = Some(src.clone());
                e.entry_id = Some(format!("{t}:credit"));
            });
            l.replace_stream(std::slice::from_ref(&created));
            l.replace_stream(&s_evs);
            l.replace_stream(&d_evs);
            let currency = created.currency.clone().unwrap_or_default();
            (
                format!(
                    "{t}: created for {amount}; {} holds 1 on {src}; {} credits {amount} to {dst}",
                    hold.event_id, credit.event_id
                ),
                vec![
                    expect(
                        "cross_stream_consistency",
                        "hold_amount_mismatch",
                        &t,
                        Some(&hold.event_id),
                    ),
                    expect("global_conservation", "not_conserved", &currency, None),
                    expect(
                        "terminal_convergence",
                        "dangling",
                        &t,
                        Some(&created.event_id),
                    ),
                ],
            )
        }
        Class::AmountOutOfRange => {
            let amount = crate::checks::protocol::AMOUNT_MINOR_MAX + 1;
            // An account not frozen at its end (a deposit there is refused).
            let (acc, mut evs) = l
                .streams(Stream::Account)
                .into_iter()
                .find(|(_, evs)| !frozen(evs))
                .ok_or("the lake has no account that is not frozen")?;
            let e = append(&mut evs, "deposited", |e| {
                e.amount = Some(amount);
                e.balance_after = e.balance_after.map(|b| b + amount);
                e.entry_id = Some(format!("dep:{acc}:injected-amount-out-of-range"));
            });
            l.replace_stream(&evs);
            (
                format!("{}: a deposit of {amount}", e.event_id),
                one_at("protocol_values", "amount_out_of_range", &acc, &e),
            )
        }
        Class::LimitOutOfRange => {
            let limit = crate::checks::protocol::AMOUNT_MINOR_MAX + 1;
            let (acc, mut evs) = first_account(&l)?;
            for e in &mut evs {
                e.overdraft_limit = Some(limit);
            }
            reseal_from(&mut evs, 0);
            let opened = evs[0].clone();
            l.replace_stream(&evs);
            (
                format!("{acc}: opened with the overdraft limit {limit}, every row recording it"),
                one_at(
                    "protocol_values",
                    "overdraft_limit_out_of_range",
                    &acc,
                    &opened,
                ),
            )
        }
        Class::FailedWithHold => {
            let (t, src, hold, release) = hold_again(&mut l, "failed")?;
            (
                format!(
                    "{}: a hold for the failed transfer {t} on {src}, released by {}",
                    hold.event_id, release.event_id
                ),
                one_at("cross_stream_consistency", "failed_with_hold", &t, &hold),
            )
        }
        Class::FailedWithRelease => {
            let (t, src, release) = tombstone(&mut l, "failed", Party::Source)?;
            (
                format!(
                    "{}: a release of no hold for the failed transfer {t} on {src}",
                    release.event_id
                ),
                one_at(
                    "cross_stream_consistency",
                    "failed_with_release",
                    &t,
                    &release,
                ),
            )
        }
        Class::HoldAfterRelease => {
            let (t, src, hold, release) = hold_again(&mut l, "released")?;
            (
                format!(
                    "{}: a hold for the released transfer {t} placed again on {src}, released by {}",
                    hold.event_id, release.event_id
                ),
                [
                    one_at("cross_stream_consistency", "hold_after_end", &t, &hold),
                    one_at("cross_stream_consistency", "release_after_end", &t, &release),
                ]
                .concat(),
            )
        }
        Class::ReleaseAfterCapture => {
            let (t, src, release) = tombstone(&mut l, "captured", Party::Source)?;
            (
                format!(
                    "{}: a release of no hold for the captured transfer {t} on its source {src}",
                    release.event_id
                ),
                one_at(
                    "cross_stream_consistency",
                    "release_after_end",
                    &t,
                    &release,
                ),
            )
        }
        Class::ReleaseOffSource => {
            let (t, dst, release) = tombstone(&mut l, "captured", Party::Destination)?;
            (
                format!(
                    "{}: a release of no hold for the captured transfer {t} on its destination {dst}",
                    release.event_id
                ),
                one_at("cross_stream_consistency", "hold_on_wrong_account", &t, &release),
            )
        }
        Class::CreditWhileReleasing => {
            let accounts = l.streams(Stream::Account);
            let (t, evs, mut d_evs) = l
                .streams(Stream::Transfer)
                .into_iter()
                .find_map(|(t, evs)| {
                    if !kinds_are(&evs, &["created", "reserved", "releasing", "released"]) {
                        return None;
                    }
                    let d_evs = accounts.get(evs[0].destination.as_deref()?)?;
                    (!frozen(d_evs) && d_evs.last()?.currency == evs[0].currency)
                        .then(|| (t, evs, d_evs.clone()))
                })
                .ok_or(
                    "the lake has no released transfer whose destination could take its credit",
                )?;
            let created = &evs[0];
            let amount = created.amount.unwrap_or(0);
            let credit = append(&mut d_evs, "credited", |e| {
                e.amount = Some(amount);
                e.balance_after = e.balance_after.map(|b| b + amount);
                e.transfer_id = Some(t.clone());
                e.counterparty = created.source.clone();
                e.entry_id = Some(format!("{t}:credit"));
            });
            l.replace_stream(&d_evs);
            l.replace_stream(&evs[..3]);
            let currency = created.currency.clone().unwrap_or_default();
            (
                format!(
                    "{t}: its released row removed (left releasing), and {} credits its refused {amount} to {}",
                    credit.event_id, credit.stream_key
                ),
                vec![
                    expect(
                        "transfer_conservation",
                        "credit_while_releasing",
                        &t,
                        Some(&credit.event_id),
                    ),
                    // The source released the hold: the credit is not in
                    // flight, and has no hold behind it.
                    expect(
                        "cross_stream_consistency",
                        "credit_without_live_hold",
                        &t,
                        Some(&credit.event_id),
                    ),
                    expect("global_conservation", "not_conserved", &currency, None),
                    // Left in progress: past its deadline at `now`.
                    expect(
                        "terminal_convergence",
                        "dangling",
                        &t,
                        Some(&evs[2].event_id),
                    ),
                ],
            )
        }
        Class::CreatedLost => {
            // From the first account that can hold 100 at its end, to
            // another of its currency, at its first event.
            let accounts = l.streams(Stream::Account);
            let t = format!("t.{}.injected-created-lost", crate::gen::GEN_TENANT);
            let created = created_where_it_can_hold(&accounts, accounts.iter(), &t)?;
            let (src, dst) = (created.source.clone(), created.destination.clone());
            let amount = created.amount.unwrap_or(0);
            let reserved = next_event(&created, "reserved", |e| {
                e.amount = Some(amount);
                e.transfer_id = Some(t.clone());
                e.source = src.clone();
                e.destination = dst.clone();
            });
            let mut s_evs = accounts[src.as_deref().unwrap_or_default()].clone();
            let hold = append_hold_leg(&mut s_evs, "hold_placed", &t, amount, dst.clone());
            l.replace_stream(&s_evs);
            // Its `created` row (seq 1) is never written: the stream holds
            // seq 2 alone.
            l.replace_stream(std::slice::from_ref(&reserved));
            let mut expected = vec![
                expect("completeness", "seq_gap", &t, Some(&created.event_id)),
                expect("transfer_conservation", "leg_without_transfer", &t, None),
            ];
            // Kept in whole seconds: from the last ms of its row's second.
            let bound = crate::facts::ms_of(crate::facts::secs(reserved.occurred_at_ms))
                + ledger_events::TRANSFER_DEADLINE_MS_MAX;
            if bound < now_ms {
                expected.push(expect(
                    "terminal_convergence",
                    "dangling",
                    &t,
                    Some(&reserved.event_id),
                ));
            }
            (
                format!(
                    "{t}: {} dropped, {} left and the hold {} on its source",
                    created.event_id, reserved.event_id, hold.event_id
                ),
                expected,
            )
        }
        Class::TransferLost => {
            // The last account that can hold 100 at its end, for a transfer
            // to another account of its currency; no row of the transfer.
            let accounts = l.streams(Stream::Account);
            let t = format!("t.{}.injected-transfer-lost", crate::gen::GEN_TENANT);
            let created = created_where_it_can_hold(&accounts, accounts.iter().rev(), &t)?;
            let src = created.source.clone().unwrap_or_default();
            let mut s_evs = accounts[src.as_str()].clone();
            let hold = append_hold_leg(&mut s_evs, "hold_placed", &t, 100, created.destination);
            l.replace_stream(&s_evs);
            (
                format!("{t}: no row of it; the hold {} on {src}", hold.event_id),
                vec![
                    expect("transfer_conservation", "leg_without_transfer", &t, None),
                    expect(
                        "terminal_convergence",
                        "leaked_hold",
                        &t,
                        Some(&hold.event_id),
                    ),
                ],
            )
        }
        Class::WrongReason => {
            let (t, mut evs) = first_released(&l)?;
            let was = evs[2].reason.clone().unwrap_or_default();
            for e in &mut evs[2..] {
                e.reason = Some("reserve_unavailable".to_owned());
            }
            reseal_from(&mut evs, 2);
            let e = evs[2].clone();
            l.replace_stream(&evs);
            (
                format!(
                    "{}: releasing after reserved with reason reserve_unavailable (was {was}), its released too",
                    e.event_id
                ),
                one_at("protocol_values", "unexpected_reason", &t, &e),
            )
        }
        Class::ReasonChanged => {
            let (t, mut evs) = first_released(&l)?;
            let was = evs[3].reason.clone().unwrap_or_default();
            let other = if was == "account_frozen" {
                "currency_mismatch"
            } else {
                "account_frozen"
            };
            evs[3].reason = Some(other.to_owned());
            reseal_from(&mut evs, 3);
            let e = evs[3].clone();
            l.replace_stream(&evs);
            (
                format!(
                    "{}: released with reason {other}, its releasing with {was}",
                    e.event_id
                ),
                one_at("protocol_values", "reason_changed", &t, &e),
            )
        }
        Class::Nonconservation => {
            let (acc, mut evs) = l
                .streams(Stream::Account)
                .into_iter()
                .find(|(_, evs)| evs.len() >= 2)
                .ok_or("the lake has no account with two events")?;
            let i = evs.len() - 1;
            evs[i].balance_after = evs[i].balance_after.map(|b| b + 1_000);
            reseal_from(&mut evs, i);
            let e = evs[i].clone();
            let currency = e.currency.clone().unwrap_or_default();
            l.replace_stream(&evs);
            (
                format!("{}: balance_after + 1000 without an entry", e.event_id),
                vec![
                    expect(
                        "balance_integrity",
                        "balance_mismatch",
                        &acc,
                        Some(&e.event_id),
                    ),
                    expect("global_conservation", "not_conserved", &currency, None),
                ],
            )
        }
    };
    l.save()?;
    Ok(Injected {
        class,
        description,
        expected,
    })
}

/// Random damage, for differential tests against an independent formulation of the checks
/// (bench/reconcile/equivalence.sh's random rounds compare `reconcile` with checks.sql): `count`
/// edits, each to a random event of a random account or transfer stream, of a random kind
/// below. Unlike [`inject`] there is no expected list: the oracle is the other engine. Several
/// edits may land on one stream and combine. The lake stays readable (every file rewritten
/// through the ingest writer); only its content lies. Returns one line per edit.
pub fn mutate(root: &Path, seed: u64, count: usize) -> Result<Vec<String>, String> {
    let mut l = LocalLake::load(root)?;
    // The seed hashed first: seeds s and s + 1 must not give one sequence shifted by a draw.
    let mut state = ledger_core::retry::splitmix64(seed ^ 0x6d75_7461_7465);
    let mut rng = move |n: usize| -> usize {
        state = state.wrapping_add(1);
        (ledger_core::retry::splitmix64(state) % n.max(1) as u64) as usize
    };
    let transfer_ids: Vec<String> = l.streams(Stream::Transfer).into_keys().collect();
    let mut done = Vec::with_capacity(count);
    // An edit that changes nothing (a field the row lacks, a value set to
    // itself, the last row dropped) is drawn again: every printed edit is
    // one the lake shows. Bounded, though no lake needs many draws.
    let mut draws = 0usize;
    while done.len() < count && draws < count.saturating_mul(50).max(50) {
        draws += 1;
        let stream = if rng(2) == 0 {
            Stream::Account
        } else {
            Stream::Transfer
        };
        let mut streams = l.streams(stream);
        if streams.is_empty() {
            continue;
        }
        let key = streams.keys().nth(rng(streams.len())).cloned().unwrap();
        let mut evs = streams.remove(&key).unwrap();
        let (before, extra_before) = (evs.clone(), l.extra.len());
        let i = rng(evs.len());
        let id = evs[i].event_id.clone();
        let delta = [1, -1, 1_000, -7][rng(4)];
        let bump = |v: &mut Option<i64>| *v = v.map(|x| x.saturating_add(delta));
        let what = match rng(22) {
            0 => {
                bump(&mut evs[i].amount);
                reseal_from(&mut evs, i);
                format!("{id}: amount {delta:+}, resealed")
            }
            1 => {
                bump(&mut evs[i].amount);
                format!("{id}: amount {delta:+}, hash not recomputed")
            }
            2 => {
                bump(&mut evs[i].balance_after);
                reseal_from(&mut evs, i);
                format!("{id}: balance_after {delta:+}, resealed")
            }
            3 => {
                bump(&mut evs[i].held_after);
                reseal_from(&mut evs, i);
                format!("{id}: held_after {delta:+}, resealed")
            }
            4 => {
                evs.remove(i);
                reseal_from(&mut evs, i);
                format!("{id}: dropped, the rest resealed")
            }
            5 => {
                evs.remove(i);
                format!("{id}: dropped")
            }
            6 => {
                let kinds: &[&str] = match stream {
                    Stream::Account => &[
                        "deposited",
                        "withdrawn",
                        "hold_placed",
                        "hold_released",
                        "captured",
                        "credited",
                    ],
                    _ => &["reserved", "credited", "captured", "failed", "released"],
                };
                evs[i].kind = kinds[rng(kinds.len())].to_owned();
                reseal_from(&mut evs, i);
                format!("{id}: kind {}, resealed", evs[i].kind)
            }
            7 => {
                let c = ["EUR", "USD", "JPY"][rng(3)];
                evs[i].currency = evs[i].currency.as_ref().map(|_| c.to_owned());
                reseal_from(&mut evs, i);
                format!("{id}: currency {c}, resealed")
            }
            8 => {
                // A lake may hold no transfer stream yet (its first night).
                let other = transfer_ids.get(rng(transfer_ids.len())).cloned();
                if let Some(other) =
                    other.filter(|_| evs[i].transfer_id.is_some() && stream == Stream::Account)
                {
                    evs[i].transfer_id = Some(other.clone());
                    reseal_from(&mut evs, i);
                    format!("{id}: transfer_id {other}, resealed")
                } else {
                    bump(&mut evs[i].amount);
                    reseal_from(&mut evs, i);
                    format!("{id}: amount {delta:+}, resealed")
                }
            }
            9 => {
                let mut other = evs[i].clone();
                other.amount = other.amount.map(|a| a.saturating_add(delta));
                other.occurred_at_ms += 1;
                let other = other.seal();
                l.extra.push(Row {
                    event: other,
                    conflict: false,
                });
                format!("{id}: a second version added")
            }
            10 => {
                // Never before the first row (that would drop the stream).
                let cut = i.max(1);
                let named = evs.get(cut).map_or(id.clone(), |e| e.event_id.clone());
                evs.truncate(cut);
                format!("{named}: the stream cut before it")
            }
            11 => {
                if evs[i].deadline_ms.is_some() {
                    evs[i].deadline_ms = Some(0);
                    reseal_from(&mut evs, i);
                    format!("{id}: deadline_ms 0, resealed")
                } else {
                    evs[i].occurred_at_ms += 1;
                    reseal_from(&mut evs, i);
                    format!("{id}: occurred_at_ms + 1, resealed")
                }
            }
            12 => {
                bump(&mut evs[i].overdraft_limit);
                reseal_from(&mut evs, i);
                format!("{id}: overdraft_limit {delta:+}, resealed")
            }
            13 => {
                let a = [0, -5][rng(2)];
                evs[i].amount = evs[i].amount.map(|_| a);
                reseal_from(&mut evs, i);
                format!("{id}: amount {a}, resealed")
            }
            14 => {
                evs[i].kind = "refunded".to_owned();
                reseal_from(&mut evs, i);
                format!("{id}: kind refunded (unknown), resealed")
            }
            15 => {
                evs[i].currency = None;
                reseal_from(&mut evs, i);
                format!("{id}: currency removed, resealed")
            }
            16 => {
                evs[i].prev_hash = "not a hash".to_owned();
                evs[i] = evs[i].clone().seal();
                format!("{id}: prev_hash not hex, its own hash recomputed")
            }
            17 => {
                let e = &mut evs[i];
                if e.source.is_some() {
                    std::mem::swap(&mut e.source, &mut e.destination);
                    reseal_from(&mut evs, i);
                    format!("{id}: source and destination swapped, resealed")
                } else {
                    e.counterparty = Some("nobody".to_owned());
                    reseal_from(&mut evs, i);
                    format!("{id}: counterparty nobody, resealed")
                }
            }
            18 => {
                // A different event under the next event's seq (a conflict of kinds).
                let mut other = evs[i].clone();
                other.seq += 1;
                other.event_id =
                    ledger_events::event_id(other.stream, &other.stream_key, other.seq);
                other.prev_hash = evs[i].hash.clone();
                let other = other.seal();
                let oid = other.event_id.clone();
                l.extra.push(Row {
                    event: other,
                    conflict: false,
                });
                format!("{oid}: a copy of {id} under its seq")
            }
            19 => {
                evs[i].event_id = format!("{}x", evs[i].event_id);
                reseal_from(&mut evs, i);
                format!("{id}: event_id mismatch, resealed")
            }
            20 => {
                // A reason the ledger writes on some kind, or none.
                let reasons = [
                    None,
                    Some("no_hold"),
                    Some("deadline_exceeded"),
                    Some("account_frozen"),
                    Some("insufficient_funds"),
                    Some("unknown_account"),
                ];
                let r = reasons[rng(reasons.len())];
                evs[i].reason = r.map(str::to_owned);
                reseal_from(&mut evs, i);
                format!("{id}: reason {}, resealed", r.unwrap_or("removed"))
            }
            _ => {
                // Amounts near the top of i64: sums and folds must not wrap.
                let big = i64::MAX / 2;
                if evs[i].amount.is_some() {
                    evs[i].amount = Some(big);
                    for e in &mut evs[i..] {
                        e.balance_after = e.balance_after.map(|b| b.saturating_add(big));
                    }
                }
                reseal_from(&mut evs, i);
                format!("{id}: amount {big}, later balances raised by it, resealed")
            }
        };
        if evs.is_empty() || (evs == before && l.extra.len() == extra_before) {
            continue;
        }
        l.replace_stream(&evs);
        done.push(what);
    }
    l.save()?;
    Ok(done)
}
