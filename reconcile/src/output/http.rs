//! The one HTTP call the outputs make: POST a JSON body, with a timeout and
//! a few retries with backoff. The client is `reqwest` (rustls), already in
//! the build through `object_store`'s S3 support, so it adds no crate.

use std::time::Duration;

/// How hard to try one POST.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all (the first plus the retries), at least 1.
    pub attempts: u32,
    /// The wait before the first retry; each further retry waits twice as long.
    pub backoff: Duration,
    /// Per attempt: connect, send and read the answer. Connecting (DNS, TCP
    /// and TLS) has at most [`connect_timeout`] of it, so an attempt that
    /// runs out of time after that had its request sent: the receiver may
    /// have acted on it ([`Failure::maybe_acted`]).
    pub timeout: Duration,
    /// The most of a 2xx answer read (the rest is not: [`Answer::cut`]).
    pub answer_max: usize,
}

impl Default for RetryPolicy {
    /// 3 attempts, 0.5 s then 1 s apart, 10 s each: at most about 32 s; a
    /// 2xx answer read up to [`ERROR_BODY_MAX`]. The alert sets its own
    /// timeout (`--alert-timeout`), the sweep its timeout and bound.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(10),
            answer_max: ERROR_BODY_MAX,
        }
    }
}

/// The most of a non-2xx answer read: its first 2,000 characters are shown,
/// and a receiver (or an intermediary serving a file) that answers with
/// gigabytes must not cost their memory (rev-s51-ops2 F7: 7 GB RSS).
pub const ERROR_BODY_MAX: usize = 64 * 1024;

/// The longest a 429's or a 503's `Retry-After` (in seconds) makes a retry
/// wait: longer is waited for this long (one attempt more, not a night).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(30);

/// The connect phase's share of an attempt's `timeout`: half of it, at
/// most 10 s. Strictly less than the timeout, so an attempt that runs out
/// of time is told apart: in the connect phase (nothing sent) or after it.
pub fn connect_timeout(timeout: Duration) -> Duration {
    (timeout / 2).min(Duration::from_secs(10))
}

/// A 2xx answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// Why `body` is not the whole answer: larger than the policy's
    /// `answer_max` (not read further), or cut short by an error.
    pub cut: Option<String>,
}

impl Answer {
    /// Whether the answer was longer than read ([`read_at_most`]'s bound),
    /// not cut short by an error.
    pub fn too_long(&self) -> bool {
        self.cut
            .as_deref()
            .is_some_and(|c| c.starts_with(LONGER_THAN))
    }
}

const LONGER_THAN: &str = "larger than";

/// Why a POST failed after its last attempt.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The last attempt's failure.
    pub last: Last,
    pub attempts: u32,
    /// Attempts that had their request sent and no answer within the
    /// timeout: the receiver may have acted on them (a slow receiver).
    pub unanswered: u32,
    /// Why the receiver may have acted on an attempt, for the first such
    /// attempt: no answer within the timeout, a gateway's 502 or 504 (the
    /// receiver behind it may have taken the request and failed to answer
    /// in time), or the connection lost after connecting (rev-s51-late:
    /// these were told as "not delivered").
    pub maybe_acted: Option<String>,
}

/// How the last attempt failed.
#[derive(Debug, Clone)]
pub enum Last {
    /// The server answered with a non-2xx status; at most
    /// [`ERROR_BODY_MAX`] of its body read (`cut`: why there was more).
    Status {
        status: u16,
        body: String,
        cut: Option<String>,
    },
    /// No answer: connection refused, timeout, TLS, DNS...
    Transport { error: String },
}

impl Failure {
    /// Whether the last attempt failed in the TLS handshake (an untrusted
    /// certificate, or an https URL for a plain-http port).
    pub fn tls(&self) -> bool {
        matches!(&self.last, Last::Transport { error } if crate::store::tls_refused(error))
    }
}

/// The first 2,000 characters of a receiver's or the edge's text, escaped,
/// with how long it was when longer ([`ledger_s3::text::excerpt`];
/// rev-s51-late M2: a 3 MB answer was one 3.3 MB line of the log).
pub use ledger_s3::text::excerpt;
use ledger_s3::text::excerpt_cut;

impl std::fmt::Display for Failure {
    /// The receiver's text escaped as the summary escapes lake text
    /// ([`crate::report::plain`]): a body with line feeds or escape
    /// sequences cannot write lines of the job's log (rev-s51-ops2 F8).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attempts = self.attempts;
        match &self.last {
            Last::Status { status, body, cut } => {
                let shown = excerpt_cut(body, cut.as_deref());
                write!(
                    f,
                    "HTTP {status} after {attempts} attempt(s); body: {shown}"
                )
            }
            Last::Transport { error } => {
                let error = crate::report::plain(error);
                write!(f, "no answer after {attempts} attempt(s): {error}")
            }
        }
    }
}

/// Hides the query string and user info of a URL in messages (a webhook
/// URL often carries its secret there).
pub fn redact(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            let _ = u.set_username("");
            if u.query().is_some() {
                u.set_query(Some("…"));
            }
            u.to_string()
        }
        Err(_) => "(unparsable URL)".to_owned(),
    }
}

/// [`redact`], and of the path only its first segment: a webhook URL most
/// often carries its secret in the path (Slack's
/// `/services/T…/B…/<secret>`, Discord's `/api/webhooks/<id>/<token>`), so
/// a message names the receiver's host and no more.
pub fn redact_path(url: &str) -> String {
    let Ok(u) = reqwest::Url::parse(url) else {
        return "(unparsable URL)".to_owned();
    };
    let (Some(host), "http" | "https") = (u.host_str(), u.scheme()) else {
        return redact(url);
    };
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let path = u.path().trim_start_matches('/');
    let first = path.split('/').next().unwrap_or_default();
    let more = if path.len() > first.len() { "/…" } else { "" };
    let query = if u.query().is_some() { "?…" } else { "" };
    format!("{}://{host}{port}/{first}{more}{query}", u.scheme())
}

/// Whether `url` is plain http to another host than this one: what it
/// sends (an admin key, a webhook's token and the violations) crosses the
/// network in clear text.
pub fn clear_text(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| {
        let local = matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        u.scheme() == "http" && !local
    })
}

/// Checks that `url` is an absolute http(s) URL.
pub fn check_url(flag: &str, url: &str) -> Result<reqwest::Url, String> {
    let u = reqwest::Url::parse(url).map_err(|e| {
        format!("{flag}: not a URL ({e})\nHelp: give an absolute URL such as https://host/path")
    })?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(format!(
            "{flag}: scheme {}: is not http or https\nHelp: give an absolute URL such as https://host/path",
            u.scheme()
        ));
    }
    Ok(u)
}

/// POSTs `body` (JSON) to `url` with `headers`. Retries on no answer, on
/// 5xx and on 408/429; any other non-2xx answer, and a failed TLS
/// handshake that every attempt meets alike (a certificate refused, https
/// to a plain-http port), is final at once (retrying a refused request changes
/// nothing). A 429's or 503's `Retry-After` in
/// seconds sets the wait before the retry, up to [`RETRY_AFTER_MAX`].
pub async fn post_json(
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
    policy: &RetryPolicy,
) -> Result<Answer, Failure> {
    let client = reqwest::Client::builder()
        .timeout(policy.timeout)
        .connect_timeout(connect_timeout(policy.timeout))
        .user_agent(concat!("ledger-reconcile/", env!("CARGO_PKG_VERSION")))
        // A redirect is an answer, not followed: a 301/302/303 turns the
        // POST into a GET without its body, which the target may well
        // answer 2xx, and the alert or the sweep would count as delivered;
        // and a 307/308 would send the body (the violations, the admin key)
        // to a place the operator never named.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Failure {
            last: Last::Transport {
                error: format!("cannot build the HTTP client: {e}"),
            },
            attempts: 0,
            unanswered: 0,
            maybe_acted: None,
        })?;
    let attempts = policy.attempts.max(1);
    let mut wait = policy.backoff;
    let mut attempt = 0;
    let mut unanswered = 0;
    let mut maybe_acted: Option<String> = None;
    loop {
        attempt += 1;
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut retry_after = None;
        let last = match req.send().await {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                if resp.status().is_redirection() {
                    // A relative Location (`/v2/hook/…`) is of the URL asked
                    // (rev-s51-late L1: it was shown as "unparsable").
                    let to = resp
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .map_or_else(
                            || "nowhere named".to_owned(),
                            |to| {
                                resp.url()
                                    .join(to)
                                    .map_or_else(|_| redact_path(to), |u| redact_path(u.as_str()))
                            },
                        );
                    return Err(Failure {
                        last: Last::Status {
                            status,
                            body: redirect_said(status, &to),
                            cut: None,
                        },
                        attempts: attempt,
                        unanswered,
                        maybe_acted,
                    });
                }
                if (200..300).contains(&status) {
                    let (bytes, cut) = read_at_most(&mut resp, policy.answer_max).await;
                    return Ok(Answer {
                        status,
                        body: String::from_utf8_lossy(&bytes).into_owned(),
                        cut,
                    });
                }
                if status == 429 || status == 503 {
                    retry_after = retry_after_secs(resp.headers());
                }
                let (bytes, cut) = read_at_most(&mut resp, ERROR_BODY_MAX).await;
                let last = Last::Status {
                    status,
                    body: String::from_utf8_lossy(&bytes).into_owned(),
                    cut,
                };
                if matches!(status, 502 | 504) && maybe_acted.is_none() {
                    maybe_acted = Some(format!(
                        "attempt {attempt} was answered HTTP {status}, a gateway's: the receiver behind it may have taken the request"
                    ));
                }
                let retryable = status >= 500 || status == 408 || status == 429;
                if !retryable {
                    return Err(Failure {
                        last,
                        attempts: attempt,
                        unanswered,
                        maybe_acted,
                    });
                }
                last
            }
            Err(e) => {
                // Out of time past the connect phase (which has less than
                // the whole timeout): the request went out, and only the
                // answer is missing.
                if !e.is_connect() && !e.is_builder() && maybe_acted.is_none() {
                    maybe_acted = Some(if e.is_timeout() {
                        format!("no answer within {} s", policy.timeout.as_secs())
                    } else {
                        format!("attempt {attempt} lost its connection after connecting")
                    });
                }
                if e.is_timeout() && !e.is_connect() {
                    unanswered += 1;
                }
                let error = error_chain(&e.without_url());
                // A certificate not trusted here, or https to a plain-http
                // port, fails the same way on every attempt.
                if crate::store::tls_refused(&error) {
                    return Err(Failure {
                        last: Last::Transport { error },
                        attempts: attempt,
                        unanswered,
                        maybe_acted,
                    });
                }
                // Without the URL: it may carry a secret (the caller names
                // the redacted URL).
                Last::Transport { error }
            }
        };
        if attempt >= attempts {
            return Err(Failure {
                last,
                attempts: attempt,
                unanswered,
                maybe_acted,
            });
        }
        let asked = retry_after.map(|s| Duration::from_secs(s).min(RETRY_AFTER_MAX));
        tokio::time::sleep(asked.map_or(wait, |a| a.max(wait))).await;
        wait *= 2;
    }
}

/// What a redirect answer says: not followed, and where it points.
fn redirect_said(status: u16, to: &str) -> String {
    // Only these turn the POST into a GET without its body when followed;
    // a 307 or 308 would resend it as it is.
    let why = if matches!(status, 301..=303) {
        " (a client that follows this one resends the POST as a GET without its body)"
    } else {
        ""
    };
    format!("a redirect to {to} (its Location); redirects are not followed{why}: give the URL it redirects to")
}

/// A `Retry-After` in seconds (its date form is not honoured: the backoff
/// applies).
fn retry_after_secs(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// At most `max` bytes of the answer's body, and why there is more when
/// there is: past `max` the rest is left unread (the connection is
/// dropped), and an error mid-body keeps what came before it.
async fn read_at_most(resp: &mut reqwest::Response, max: usize) -> (Vec<u8>, Option<String>) {
    let mut bytes = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - bytes.len();
                if chunk.len() > room {
                    bytes.extend_from_slice(&chunk[..room]);
                    return (
                        bytes,
                        Some(format!("{LONGER_THAN} {}: not read further", size(max))),
                    );
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return (bytes, None),
            Err(e) => {
                let why = format!(
                    "cut short after {} bytes: {}",
                    bytes.len(),
                    error_chain(&e.without_url())
                );
                return (bytes, Some(why));
            }
        }
    }
}

/// `bytes` in KiB or MiB, as a bound is named.
pub fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s += &format!(": {c}");
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_url_is_named_by_its_host_and_first_path_segment() {
        let slack = "https://hooks.slack.com/services/T0/B0/SECRET?token=QUERYSECRET";
        let shown = redact_path(slack);
        assert_eq!(shown, "https://hooks.slack.com/services/…?…");
        assert!(!shown.contains("SECRET"), "{shown}");
        let discord = redact_path("https://user:pw@discord.com/api/webhooks/1/TOKEN");
        assert!(
            !discord.contains("TOKEN") && !discord.contains("pw"),
            "{discord}"
        );
        assert!(discord.starts_with("https://discord.com/api/"), "{discord}");
        // Nothing past the first segment: as given.
        assert_eq!(
            redact_path("http://127.0.0.1:9/hook"),
            "http://127.0.0.1:9/hook"
        );
        assert_eq!(redact_path("not a url"), "(unparsable URL)");
    }

    fn failure(last: Last) -> Failure {
        Failure {
            last,
            attempts: 3,
            unanswered: 0,
            maybe_acted: None,
        }
    }

    /// rev-s51-ops2 F9: a certificate not trusted here is told from a
    /// receiver that is down, in rustls' words as the S3 store tells it.
    #[test]
    fn a_tls_failure_is_told_from_a_receiver_that_is_down() {
        let tls = failure(Last::Transport {
            error: "error sending request: client error (Connect): invalid peer certificate: \
                    UnknownIssuer"
                .into(),
        });
        assert!(tls.tls());
        let refused = failure(Last::Transport {
            error: "error sending request: client error (Connect): tcp connect error: Connection \
                    refused (os error 111)"
                .into(),
        });
        assert!(!refused.tls());
    }

    /// rev-s51-ops2 F8, F7: the body is shown escaped, its first 2,000
    /// characters, and a body not read whole says so.
    #[test]
    fn a_body_is_shown_escaped_and_cut() {
        let f = failure(Last::Status {
            status: 500,
            body: "oops\nerror: forged\u{1b}[2J".into(),
            cut: None,
        });
        assert_eq!(
            f.to_string(),
            r"HTTP 500 after 3 attempt(s); body: oops\nerror: forged\u{1b}[2J"
        );
        let f = failure(Last::Status {
            status: 500,
            body: "x".repeat(3000),
            cut: Some("larger than 64 KiB: not read further".into()),
        });
        let shown = f.to_string();
        assert!(
            shown.ends_with(&format!(
                "{}… (larger than 64 KiB: not read further)",
                "x".repeat(2000)
            )),
            "{shown}"
        );
        assert_eq!(size(ERROR_BODY_MAX), "64 KiB");
        assert_eq!(size(4 << 20), "4 MiB");
        // A backslash is doubled: the text `\n` is not a line feed.
        assert_eq!(excerpt("a\nb"), r"a\nb");
        assert_eq!(excerpt(r"a\nb"), r"a\\nb");
        // A long answer read whole (the sweep's, up to 4 MiB) is shown by
        // its start and its size, not as one line of megabytes
        // (rev-s51-late M2).
        let long = format!("<html>\n{}", "y".repeat(3_000_000));
        let shown = excerpt(&long);
        assert_eq!(
            shown,
            format!(r"<html>\n{}… (3000007 bytes)", "y".repeat(1993))
        );
    }

    #[test]
    fn a_redirect_is_named_not_followed_and_only_a_303_said_to_turn_into_a_get() {
        let temporary = redirect_said(307, "https://hooks.example/new");
        assert!(
            temporary.contains("a redirect to https://hooks.example/new")
                && temporary.contains("redirects are not followed")
                && !temporary.contains("GET"),
            "{temporary}"
        );
        assert!(redirect_said(303, "x").contains("as a GET without its body"));
    }

    #[test]
    fn plain_http_is_clear_text_except_to_this_machine() {
        assert!(clear_text("http://hooks.example/x"));
        assert!(!clear_text("https://hooks.example/x"));
        for local in [
            "http://127.0.0.1:9/x",
            "http://localhost/x",
            "http://[::1]:8/x",
        ] {
            assert!(!clear_text(local), "{local}");
        }
    }
}
