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
    /// Per attempt: connect, send and read the answer.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    /// 3 attempts, 0.5 s then 1 s apart, 10 s each: at most about 32 s.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(10),
        }
    }
}

/// A 2xx answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// Why a POST failed after its last attempt.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The server answered with a non-2xx status (the last answer).
    Status {
        status: u16,
        body: String,
        attempts: u32,
    },
    /// No answer: connection refused, timeout, TLS, DNS...
    Transport { error: String, attempts: u32 },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Status {
                status,
                body,
                attempts,
            } => {
                let body = body.trim();
                let body = if body.chars().count() > 2000 {
                    let head: String = body.chars().take(2000).collect();
                    format!("{head}… ({} bytes)", body.len())
                } else {
                    body.to_owned()
                };
                write!(f, "HTTP {status} after {attempts} attempt(s); body: {body}")
            }
            Failure::Transport { error, attempts } => {
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
/// 5xx and on 408/429; any other non-2xx answer is final at once (retrying
/// a refused request changes nothing).
pub async fn post_json(
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
    policy: &RetryPolicy,
) -> Result<Answer, Failure> {
    let client = reqwest::Client::builder()
        .timeout(policy.timeout)
        .connect_timeout(policy.timeout)
        .user_agent(concat!("ledger-reconcile/", env!("CARGO_PKG_VERSION")))
        // A redirect is an answer, not followed: a 301/302/303 turns the
        // POST into a GET without its body, which the target may well
        // answer 2xx, and the alert or the sweep would count as delivered.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Failure::Transport {
            error: format!("cannot build the HTTP client: {e}"),
            attempts: 0,
        })?;
    let attempts = policy.attempts.max(1);
    let mut wait = policy.backoff;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let failure = match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                if resp.status().is_redirection() {
                    let to = resp
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .map_or_else(|| "nowhere named".to_owned(), redact_path);
                    return Err(Failure::Status {
                        status,
                        body: format!(
                            "a redirect to {to}, not followed (it would resend the POST as a GET \
                             without its body); give the URL it redirects to"
                        ),
                        attempts: attempt,
                    });
                }
                let text = resp.text().await.unwrap_or_default();
                if (200..300).contains(&status) {
                    return Ok(Answer { status, body: text });
                }
                let retryable = status >= 500 || status == 408 || status == 429;
                let f = Failure::Status {
                    status,
                    body: text,
                    attempts: attempt,
                };
                if !retryable {
                    return Err(f);
                }
                f
            }
            Err(e) => Failure::Transport {
                // Without the URL: it may carry a secret (the caller names
                // the redacted URL).
                error: error_chain(&e.without_url()),
                attempts: attempt,
            },
        };
        if attempt >= attempts {
            return Err(failure);
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
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
