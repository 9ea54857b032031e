//! The dangling list posted to the edge (`--sweep-url URL`): the run's
//! dangling transfers, most overdue first, go to the admin route
//! `POST /v1/admin/transfers/redrive` (docs/API.md) in chunks of
//! [`REDRIVE_CHUNK`] ids, at most `--sweep-max` of them a run (a window
//! that moves each day when more dangle, [`request_bodies`]), with the
//! admin key from `LEDGER_ADMIN_KEY` (never a flag: a key on the command
//! line shows in every process list). An id the route would refuse (not
//! `t.{tenant}.{key}`) is not sent: it would make the route refuse its whole
//! request, every night.

use std::time::Duration;

use crate::checks::convergence::Dangling;

use super::http::{self, RetryPolicy};

/// The route's limit per call (more is `422 too_many_items`).
pub const REDRIVE_ROUTE_MAX: usize = ledger_api::sweep::SWEEP_MAX_PER_RUN;
/// Ids per request. The route re-drives its ids one after another and waits
/// up to [`EDGE_REDRIVE_WAIT`] for each: a request of the route's 100 could
/// take minutes while a few transfer objects hang, past any timeout a client
/// should keep, and a timed-out request leaves its last ids never driven.
pub const REDRIVE_CHUNK: usize = 10;
const _: () = assert!(REDRIVE_CHUNK <= REDRIVE_ROUTE_MAX);
/// How long the edge waits for one re-drive by default (its
/// `SWEEP_REDRIVE_TIMEOUT_MS`, docs/SWEEPER.md).
pub const EDGE_REDRIVE_WAIT: Duration = Duration::from_secs(10);
/// Per attempt of one request: every id of a chunk waited for in full, and
/// 10 s more for the round trip.
pub const REQUEST_TIMEOUT: Duration =
    Duration::from_secs(EDGE_REDRIVE_WAIT.as_secs() * REDRIVE_CHUNK as u64 + 10);
/// The most of an answer read: one for [`REDRIVE_CHUNK`] ids is about a
/// kilobyte; past this bound it is no answer of the route's (an
/// intermediary serving a file, say) and is not read further
/// (rev-s51-ops2 F7: a 3 GB answer took 7 GB of memory).
pub const ANSWER_MAX: usize = 4 << 20;
/// How many dangling transfers one run re-drives by default
/// (`--sweep-max`): a few minutes of requests on a healthy edge. The rest
/// are left to the sweeper's cron (`--publish-dangling`) or the next run.
pub const SWEEP_MAX_DEFAULT: usize = 1000;
/// The route, under the edge's base URL.
pub const REDRIVE_PATH: &str = "/v1/admin/transfers/redrive";
/// The environment variable holding the edge's `ADMIN_KEY`.
pub const ADMIN_KEY_ENV: &str = "LEDGER_ADMIN_KEY";

#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The edge's base URL (`https://ledger.example.com`); the route is appended.
    pub base_url: String,
    /// The admin key, read from [`ADMIN_KEY_ENV`].
    pub admin_key: Option<String>,
    /// At most this many ids a run ([`request_bodies`]).
    pub max: usize,
    pub retry: RetryPolicy,
}

impl SweepConfig {
    /// The config for `--sweep-url URL`, the key from the environment.
    pub fn from_env(base_url: String, max: usize) -> SweepConfig {
        SweepConfig {
            base_url,
            admin_key: std::env::var(ADMIN_KEY_ENV).ok().filter(|k| !k.is_empty()),
            max,
            retry: RetryPolicy {
                timeout: REQUEST_TIMEOUT,
                answer_max: ANSWER_MAX,
                ..RetryPolicy::default()
            },
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        http::check_url("--sweep-url", &self.base_url)?;
        let Some(key) = &self.admin_key else {
            return Err(format!(
                "--sweep-url needs the edge's admin key in the environment variable {ADMIN_KEY_ENV}\n\
                 Help: export {ADMIN_KEY_ENV}=... (the edge's ADMIN_KEY secret); it is never taken \
                 as a flag, so it does not show in process lists"
            ));
        };
        // Sent as `authorization: Bearer KEY`: a key no header can carry (a
        // line feed from a file read with its newline) fails here, not as
        // "no answer" after the night's proof.
        if reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
            return Err(format!(
                "{ADMIN_KEY_ENV}: not usable in an HTTP header (a line feed or another control \
                 character in it?)\nHelp: export it without the trailing newline, e.g. \
                 {ADMIN_KEY_ENV}=\"$(tr -d '\\n' < key-file)\""
            ));
        }
        Ok(())
    }

    /// A warning for a URL that sends the admin key in clear text (plain
    /// http to another host than this one).
    pub fn warning(&self) -> Option<String> {
        http::clear_text(&self.base_url).then(|| {
            format!(
                "--sweep-url {} is plain http: the admin key crosses the network in clear text \
                 (use https)",
                http::redact(&self.base_url)
            )
        })
    }

    /// The route's full URL.
    pub fn url(&self) -> String {
        format!("{}{REDRIVE_PATH}", self.base_url.trim_end_matches('/'))
    }
}

/// What a run sends: the request bodies, in order, `{"transfer_ids":[...]}`
/// with at most [`REDRIVE_CHUNK`] ids each; and the ids left out.
///
/// Every distinct id the route takes is sent when there are at most `max`
/// (a duplicate id is sent once), most overdue first. With more, the run
/// sends `max` of them in a window that moves by `max` each day: day `d`
/// (of the Unix epoch, the run's `--now-ms`) starts at the
/// `(d * max) mod n`-th most overdue and wraps around the list's end. A
/// fixed prefix would re-drive the same `max` transfers every night when that
/// many are stuck for good (a re-drive cannot fix them) and never reach one
/// behind them; with the window, a list that stays put is covered in full
/// every `ceil(n / max)` days.
/// Where the day's window of `len` entries of a list of `total` starts:
/// `(d * len) mod total` on day `d` of the Unix epoch (of `now_ms`), so the
/// window moves by its length each day and wraps around the list's end
/// (0 for an empty list or window).
pub fn window_start(now_ms: i64, len: usize, total: usize) -> usize {
    if len == 0 || total == 0 {
        return 0;
    }
    let day = now_ms.max(0) as u64 / DAY_MS;
    // u128: day * len cannot overflow.
    ((u128::from(day) * len as u128) % total as u128) as usize
}

pub fn request_bodies(
    dangling: &[Dangling],
    max: usize,
    now_ms: i64,
) -> (Vec<serde_json::Value>, Left) {
    let mut seen = std::collections::HashSet::new();
    let mut left = Left::default();
    let mut ids: Vec<&str> = Vec::new();
    for d in dangling {
        let id = d.transfer_id.as_str();
        if !seen.insert(id) {
            continue;
        }
        if ledger_api::names::parse_transfer_id(id).is_err() {
            left.refused += 1;
            left.first_refused.get_or_insert_with(|| id.to_owned());
        } else {
            ids.push(id);
        }
    }
    if ids.len() > max {
        let n = ids.len();
        let start = window_start(now_ms, max, n);
        left.over_max = n - max;
        left.window_start = start;
        ids.rotate_left(start);
        ids.truncate(max);
    }
    let bodies = ids
        .chunks(REDRIVE_CHUNK)
        .map(|c| serde_json::json!({ "transfer_ids": c }))
        .collect();
    (bodies, left)
}

const DAY_MS: u64 = 86_400_000;

/// Dangling transfers a run does not send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Left {
    /// Ids not of the form `t.{tenant}.{key}` (the route refuses a request
    /// with one), and the first of them.
    pub refused: usize,
    pub first_refused: Option<String>,
    /// Ids past `--sweep-max`, and where this run's window of `max` ids
    /// started in the list, most overdue first (0-based).
    pub over_max: usize,
    pub window_start: usize,
}

/// What the edge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redriven {
    /// Ids sent.
    pub sent: usize,
    pub requests: usize,
    /// Entries the edge answered with a phase (a transfer it has).
    pub redriven: usize,
    /// Of those, the ones now terminal (captured, failed, released).
    pub terminal: usize,
    /// Entries with `phase: null`: no such transfer at the edge.
    pub unknown: usize,
    /// Entries with an `error`: the transfer's object did not answer (a
    /// failed re-drive, not an unknown id), and the first of them.
    pub failed: usize,
    pub first_failure: Option<String>,
    /// Ids not sent.
    pub left: Left,
}

impl Redriven {
    /// The one line printed on stderr.
    pub fn line(&self) -> String {
        let mut line = if self.sent == 0 && self.left.refused > 0 {
            "sweep: nothing sent".to_owned()
        } else if self.sent == 0 {
            "sweep: no dangling transfer; nothing to re-drive".to_owned()
        } else {
            format!(
                "sweep: re-drove {} of {} dangling transfer(s) in {} request(s): {} now terminal, {} unknown to the edge",
                self.redriven, self.sent, self.requests, self.terminal, self.unknown
            )
        };
        if self.left.over_max > 0 {
            line += &format!(
                "; {} more not sent (--sweep-max: this run's window starts at position {} of the list, most \
                 overdue first, wrapping around, and moves by --sweep-max a day; the sweeper's cron takes \
                 the published list, --publish-dangling)",
                self.left.over_max,
                self.left.window_start + 1
            );
        }
        if let Some(first) = &self.left.first_refused {
            line += &format!(
                "; {} not sent: not a transfer id the edge takes (t.{{tenant}}.{{key}}), first {first:?}",
                self.left.refused
            );
        }
        line
    }

    /// Adds one answer `{"redriven":[{"transfer_id","phase"}]}` to the
    /// request that sent `ids`: one entry for each id sent, no other (an
    /// answer that leaves one out is an edge, or a proxy, in trouble, not a
    /// re-drive).
    fn add(&mut self, answer: &str, ids: &[&str]) -> Result<(), String> {
        // The edge's text as the summary shows lake text: it cannot write
        // lines of the job's log (rev-s51-ops2 F8), nor one line of megabytes.
        let shown = super::http::excerpt(answer);
        let answer_shown = &*shown;
        let v: serde_json::Value = serde_json::from_str(answer)
            .map_err(|e| format!("the answer is not JSON ({e}): {answer_shown}"))?;
        let list = v["redriven"]
            .as_array()
            .ok_or_else(|| format!("the answer has no `redriven` array: {answer_shown}"))?;
        let answered: std::collections::BTreeSet<&str> = list
            .iter()
            .filter_map(|e| e["transfer_id"].as_str())
            .collect();
        let sent: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
        if answered != sent || list.len() != sent.len() {
            let missing = sent.difference(&answered).next();
            let extra = answered.difference(&sent).next();
            return Err(format!(
                "the answer does not account for the ids sent: {} entries for {} ids{}{}: {answer_shown}",
                list.len(),
                sent.len(),
                missing
                    .map(|m| format!(", none for {m:?}"))
                    .unwrap_or_default(),
                extra
                    .map(|x| format!(", one for {x:?}, not sent"))
                    .unwrap_or_default(),
            ));
        }
        for e in list {
            if let Some(error) = e.get("error") {
                self.failed += 1;
                self.first_failure.get_or_insert_with(|| {
                    format!(
                        "{}: {}",
                        crate::report::plain(e["transfer_id"].as_str().unwrap_or("?")),
                        crate::report::plain(error.as_str().unwrap_or_default())
                    )
                });
                continue;
            }
            match e["phase"].as_str() {
                Some(p) => {
                    self.redriven += 1;
                    if matches!(p, "captured" | "failed" | "released") {
                        self.terminal += 1;
                    }
                }
                None => self.unknown += 1,
            }
        }
        Ok(())
    }
}

/// Posts every dangling transfer to the edge. The first failed request ends
/// the sweep with an error naming the status and body (the chunks before it
/// were re-driven; re-driving is idempotent, so the next run may repeat them).
pub async fn redrive(
    cfg: &SweepConfig,
    dangling: &[Dangling],
    now_ms: i64,
) -> Result<Redriven, String> {
    cfg.validate()?;
    let key = cfg.admin_key.as_deref().unwrap_or_default();
    let auth = format!("Bearer {key}");
    let url = cfg.url();
    let (bodies, left) = request_bodies(dangling, cfg.max, now_ms);
    let mut done = Redriven {
        left,
        ..Redriven::default()
    };
    let total: usize = bodies
        .iter()
        .map(|b| b["transfer_ids"].as_array().map_or(0, |a| a.len()))
        .sum();
    for (i, body) in bodies.iter().enumerate() {
        let ids: Vec<&str> = body["transfer_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let n = ids.len();
        // How every failed request's message ends.
        let sent_before = |help: &str| {
            format!(
                "{} of {total} dangling transfer(s) were sent before it.\n\
                 Help: {help}; re-driving is idempotent, so the next run may send them again",
                done.sent
            )
        };
        let answer = http::post_json(
            &url,
            &[("authorization", &auth)],
            &body.to_string(),
            &cfg.retry,
        )
        .await
        .map_err(|f| {
            let help = if f.tls() {
                format!(
                    "the edge must speak https with {}",
                    crate::store::TRUSTED_CERTIFICATE
                )
            } else {
                format!(
                    "401/403 mean {ADMIN_KEY_ENV} is not the edge's ADMIN_KEY; 503 that the edge has \
                     no ADMIN_KEY configured; 413 that the edge's BODY_BYTES_MAX is below a request of \
                     {REDRIVE_CHUNK} ids (about a kilobyte; its default is 16 KiB); no answer, that --sweep-url is not the edge's base URL or \
                     that the edge took longer than {} s for {REDRIVE_CHUNK} re-drives (transfer \
                     objects that hang: see its logs)",
                    REQUEST_TIMEOUT.as_secs()
                )
            };
            format!(
                "sweep: POST {} (request {} of {}, {n} ids) failed: {f}\n{}",
                http::redact(&url),
                i + 1,
                bodies.len(),
                sent_before(&help),
            )
        })?;
        if let Some(why) = &answer.cut {
            // Too long is another server's page; cut short is the
            // connection lost while the edge's answer came.
            let help = if answer.too_long() {
                "--sweep-url must be the edge's base URL, its admin route answered by the edge \
                 itself (not a proxy's or a file server's page)"
            } else {
                "the connection to the edge was lost while it answered: check the network between \
                 the job and the edge, and the edge's logs"
            };
            return Err(format!(
                "sweep: POST {} (request {} of {}): the answer is {why} (one for {REDRIVE_CHUNK} ids is \
                 about a kilobyte), so what the edge did with them is not known\n{}",
                http::redact(&url),
                i + 1,
                bodies.len(),
                sent_before(help),
            ));
        }
        done.add(&answer.body, &ids).map_err(|e| {
            format!(
                "sweep: POST {} (request {} of {}): {e}",
                http::redact(&url),
                i + 1,
                bodies.len()
            )
        })?;
        done.sent += n;
        done.requests += 1;
    }
    if done.failed > 0 {
        // An edge in trouble must not read as a list of ids it does not know.
        return Err(format!(
            "sweep: the edge could not re-drive {} of {total} dangling transfer(s) (first: {}); {}\n\
             Help: the edge's transfer objects did not answer: see its logs (`sweeper: re-drive … failed`)",
            done.failed,
            done.first_failure.as_deref().unwrap_or_default(),
            done.line()
        ));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: &str) -> Dangling {
        Dangling {
            transfer_id: id.to_owned(),
            phase: "reserved".into(),
            deadline_ms: 1,
            last_seq: 2,
            hold_only: false,
        }
    }

    #[test]
    fn bodies_are_chunks_in_order_without_duplicates_up_to_the_max() {
        let mut list: Vec<Dangling> = (0..25).map(|i| d(&format!("t.a.k{i}"))).collect();
        list.push(d("t.a.k0"));
        let (b, left) = request_bodies(&list, 1000, 0);
        assert_eq!(b.len(), 3);
        assert_eq!(
            b[0]["transfer_ids"].as_array().unwrap().len(),
            REDRIVE_CHUNK
        );
        assert_eq!(b[2]["transfer_ids"].as_array().unwrap().len(), 5);
        assert_eq!(b[0]["transfer_ids"][0], "t.a.k0");
        assert_eq!(b[1]["transfer_ids"][0], "t.a.k10");
        assert_eq!(b[2]["transfer_ids"][4], "t.a.k24");
        assert_eq!(left, Left::default());
        // Day 0: the most overdue `max` only; a duplicate does not count.
        let (b, left) = request_bodies(&list, 12, 0);
        let sent: Vec<&serde_json::Value> = b
            .iter()
            .flat_map(|b| b["transfer_ids"].as_array().unwrap())
            .collect();
        assert_eq!((sent.len(), left.over_max), (12, 13));
        assert_eq!(*sent[11], "t.a.k11");
        assert!(request_bodies(&[], 1000, 0).0.is_empty());
    }

    fn sent(bodies: &[serde_json::Value]) -> Vec<String> {
        bodies
            .iter()
            .flat_map(|b| b["transfer_ids"].as_array().unwrap())
            .map(|id| id.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn past_the_max_the_window_moves_each_day_so_no_transfer_waits_behind_stuck_ones() {
        // 1500 dangle (the first 1000 stuck for good, say), 1000 a run: a
        // fixed prefix would never send k1000..k1499.
        let list: Vec<Dangling> = (0..1500).map(|i| d(&format!("t.a.k{i}"))).collect();
        let day = 86_400_000;
        let (b, left) = request_bodies(&list, 1000, 3 * day + 5);
        // Day 3: 3000 mod 1500 = 0, the most overdue 1000.
        assert_eq!(sent(&b), sent_range(0..1000));
        assert_eq!((left.over_max, left.window_start), (500, 0));
        // Day 4 starts at 4000 mod 1500 = 1000 and wraps around.
        let (b, left) = request_bodies(&list, 1000, 4 * day);
        let ids = sent(&b);
        assert_eq!(ids[..500], sent_range(1000..1500)[..]);
        assert_eq!(ids[500..], sent_range(0..500)[..]);
        assert_eq!((left.over_max, left.window_start), (500, 1000));
        // Two consecutive days cover every one of them; one day never sends
        // an id twice.
        let mut both: Vec<String> = ids.clone();
        both.extend(sent(&request_bodies(&list, 1000, 5 * day).0));
        both.sort();
        both.dedup();
        assert_eq!(both.len(), 1500);
        let mut once = ids;
        once.sort();
        once.dedup();
        assert_eq!(once.len(), 1000);
        // At most `max`: all of them, most overdue first, whatever the day.
        let (b, left) = request_bodies(&list[..1000], 1000, 4 * day);
        assert_eq!((sent(&b), left), (sent_range(0..1000), Left::default()));
        // A clock before 1970 is day 0.
        assert_eq!(request_bodies(&list, 1000, -1).1.window_start, 0);
        // A day far ahead does not overflow.
        let far = request_bodies(&list, 1000, i64::MAX).1.window_start;
        assert!(far < 1500);
    }

    fn sent_range(r: std::ops::Range<usize>) -> Vec<String> {
        r.map(|i| format!("t.a.k{i}")).collect()
    }

    #[test]
    fn an_id_the_route_would_refuse_is_left_out_and_named_not_sent() {
        // The route refuses a whole request with one id not of the form
        // t.{tenant}.{key}: such an id stays out, the rest go.
        let list = [d("t.a.k1"), d("t.acme"), d("x.a.k2"), d("t.a.k3")];
        let (b, left) = request_bodies(&list, 1000, 0);
        assert_eq!(
            b,
            [serde_json::json!({ "transfer_ids": ["t.a.k1", "t.a.k3"] })]
        );
        assert_eq!(
            (left.refused, left.first_refused.as_deref()),
            (2, Some("t.acme"))
        );
        let done = Redriven {
            sent: 2,
            requests: 1,
            redriven: 2,
            left,
            ..Redriven::default()
        };
        assert!(
            done.line()
                .contains("2 not sent: not a transfer id the edge takes"),
            "{}",
            done.line()
        );
    }

    #[test]
    fn the_base_url_may_end_with_a_slash() {
        let mut c = SweepConfig::from_env("http://h:1/".into(), SWEEP_MAX_DEFAULT);
        c.admin_key = Some("k".into());
        assert_eq!(c.url(), "http://h:1/v1/admin/transfers/redrive");
        c.admin_key = None;
        assert!(c.validate().unwrap_err().contains(ADMIN_KEY_ENV));
    }

    #[test]
    fn a_key_no_header_can_carry_is_refused_and_plain_http_elsewhere_is_warned_of() {
        let mut c = SweepConfig::from_env("https://edge.example".into(), SWEEP_MAX_DEFAULT);
        c.admin_key = Some("k\n".into());
        assert!(c
            .validate()
            .unwrap_err()
            .contains("not usable in an HTTP header"));
        c.admin_key = Some("k".into());
        assert!(c.validate().is_ok() && c.warning().is_none());
        c.base_url = "http://127.0.0.1:8787".into();
        assert!(c.warning().is_none(), "this machine");
        c.base_url = "http://edge.example".into();
        assert!(c.warning().unwrap().contains("clear text"));
    }
}
