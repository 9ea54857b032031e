//! The lake's S3 store, configured from the environment alike for every tool
//! that reaches it (the reconciler and compaction): the same credential
//! checks, region default, timeouts and retries, so the two cannot drift
//! apart against R2.
//!
//! | variable | meaning |
//! |---|---|
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` | required (R2: an API token's S3 credentials) |
//! | `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`) | R2: `https://<account>.r2.cloudflarestorage.com`; unset = AWS S3 |
//! | `AWS_REGION` | default `auto` (what R2 expects); AWS S3 needs the bucket's region |
//! | `AWS_ALLOW_HTTP` | `true` to allow a plain-http endpoint (local test servers) |
//! | `AWS_SESSION_TOKEN` | temporary credentials |
//!
//! No request waits forever: a connection attempt gives up after
//! [`CONNECT_TIMEOUT`], a request after the caller's request timeout, and
//! failed requests are retried [`MAX_RETRIES`] times within
//! [`retry_timeout`] (the request timeout and [`RETRY_TIMEOUT`] more: a
//! read that stalled until its timeout is retried too).
//!
//! [`text`]: a store's words, and any other text from outside, made one
//! line of a job's log.
//!
//! [`local`]: for a lake in a local directory, the entries `object_store`'s
//! listing passes over (a dangling symbolic link), for every tool alike.

pub mod local;
pub mod text;

use std::error::Error;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ClientConfigKey, RetryConfig};

/// Connect timeout of every S3 request.
pub const CONNECT_TIMEOUT: &str = "5s";
/// Retries of a failed S3 request (connection errors, 5xx, throttling).
pub const MAX_RETRIES: usize = 3;
/// No retry starts later than this after the first attempt's timeout
/// ([`retry_timeout`]).
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(20);

/// No retry starts later than this after the first attempt, for requests
/// that each time out after `request_timeout`: a request that stalled
/// until its timeout (a stuck connection) is retried like one that failed
/// at once. With a budget shorter than the timeout, object_store never
/// retried it, and one stalled read ended the run (rev-s50-ops F4).
pub fn retry_timeout(request_timeout: Duration) -> Duration {
    request_timeout + RETRY_TIMEOUT
}

/// How to configure S3 access, appended to every S3 configuration error.
pub const ENV_HELP: &str =
    "Help: an s3:// lake is reached with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, \
AWS_ENDPOINT_URL (R2: https://<account>.r2.cloudflarestorage.com), AWS_REGION (default auto) \
and AWS_ALLOW_HTTP=true for a plain-http endpoint; see docs/RECONCILE.md, \"The lake on S3 / R2\"";

/// The environment variables a run needs that are not set, in the order
/// the help names them (empty: nothing missing). Without them object_store
/// would ask an instance metadata endpoint, which outside AWS only times out.
pub fn missing_env(get: impl Fn(&str) -> Option<String>) -> Vec<&'static str> {
    let set = |k: &str| get(k).is_some_and(|v| !v.trim().is_empty());
    // Credentials that come from elsewhere (a web identity, a container
    // endpoint) or none at all (a public bucket) need no keys.
    if set("AWS_WEB_IDENTITY_TOKEN_FILE")
        || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        || get("AWS_SKIP_SIGNATURE").is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Vec::new();
    }
    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        .into_iter()
        .filter(|k| !set(k))
        .collect()
}

/// The S3 store of `bucket`, configured from the environment (module docs),
/// each request given at most `request_timeout`. Only configuration is
/// checked here: nothing is sent. Errors start with `location` (the lake as
/// the user gave it, `s3://BUCKET/PREFIX`: a bucket may hold several lakes)
/// and end with [`ENV_HELP`].
pub fn store(location: &str, bucket: &str, request_timeout: Duration) -> Result<AmazonS3, String> {
    let missing = missing_env(|k| std::env::var(k).ok());
    if !missing.is_empty() {
        return Err(format!(
            "{location}: {} not set: no credentials for the bucket\n{ENV_HELP}",
            missing.join(" and ")
        ));
    }
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
    let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
    let allow_http = builder
        .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if let Some(url) = endpoint.filter(|u| u.starts_with("http://") && !allow_http) {
        return Err(format!(
            "{location}: the endpoint {url} is plain http, which is refused unless AWS_ALLOW_HTTP=true \
             (meant for local test servers; R2 is https)\n{ENV_HELP}"
        ));
    }
    if builder
        .get_config_value(&AmazonS3ConfigKey::Region)
        .is_none()
        && builder
            .get_config_value(&AmazonS3ConfigKey::DefaultRegion)
            .is_none()
    {
        builder = builder.with_region("auto");
    }
    builder
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
            CONNECT_TIMEOUT,
        )
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            format!("{}ms", request_timeout.as_millis()),
        )
        .with_retry(RetryConfig {
            max_retries: MAX_RETRIES,
            retry_timeout: retry_timeout(request_timeout),
            ..RetryConfig::default()
        })
        .build()
        .map_err(|e| format!("{location}: cannot configure S3: {e}\n{ENV_HELP}"))
}

/// The endpoint the environment names (`AWS_ENDPOINT_URL` or
/// `AWS_ENDPOINT`, as [`store`] reads them), trimmed, without a trailing `/`
/// and in lower case: with the bucket, what names a lake, since two R2
/// accounts (production's and staging's) may each have a bucket of one
/// name. `None` for AWS S3, whose bucket names are global.
pub fn endpoint() -> Option<String> {
    AmazonS3Builder::from_env()
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .map(|u| u.trim().trim_end_matches('/').to_ascii_lowercase())
        .filter(|u| !u.is_empty())
}

/// Refuses a lake prefix (of `s3://BUCKET/PREFIX`, slashes trimmed) that
/// holds a character object_store escapes in keys (`%` as `%25`, `~`, `[`,
/// `#`, …): a listing under it asks for another key and finds nothing, which
/// reads as an empty lake ("nothing to do", "holds no lake files"). The
/// error names the character.
pub fn check_prefix(location: &str, prefix: &str) -> Result<(), String> {
    let escaped = |s: &str| object_store::path::PathPart::from(s).as_ref() != s;
    let Some(part) = prefix.split('/').find(|part| escaped(part)) else {
        return Ok(());
    };
    let c = part
        .chars()
        .find(|c| escaped(c.encode_utf8(&mut [0; 4])))
        .unwrap_or('?');
    Err(format!(
        "{location}: the prefix holds {c:?}, which the S3 client escapes in keys, so no object \
         under it would be found\nHelp: keep the lake under a prefix of letters, digits, '-', '_', \
         '.' and '/'"
    ))
}

/// An error's own words and every cause under it, joined by ` | `, and the
/// innermost cause alone (what went wrong at the bottom: a refused
/// connection, a certificate).
pub fn causes(e: &dyn Error) -> (String, String) {
    let mut text = e.to_string();
    let mut last = text.clone();
    let mut source = e.source();
    while let Some(s) = source {
        last = s.to_string();
        text.push_str(" | ");
        text.push_str(&last);
        source = s.source();
    }
    (text, last)
}

/// The error's own words, with its innermost cause when they do not already
/// say it: object_store's "error sending request" names no reason.
pub fn with_cause(e: &dyn Error) -> String {
    let said = e.to_string();
    let (_, cause) = causes(e);
    if said.contains(&cause) {
        said
    } else {
        format!("{said} (cause: {cause})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rev-s50-ops F4: object_store retries no request once its budget
    /// (from the first attempt) is spent, so a budget shorter than a
    /// request's timeout never retried a read that stalled until it timed
    /// out, and one stuck connection ended the run. The tools' timeouts
    /// (reconcile 60 s, compaction 120 s) leave room for a retry after one.
    #[test]
    fn a_request_that_timed_out_leaves_budget_for_a_retry() {
        for secs in [1, 60, 120] {
            let timeout = Duration::from_secs(secs);
            let budget = retry_timeout(timeout);
            assert!(
                budget >= timeout + Duration::from_secs(10),
                "{secs} s: {budget:?}"
            );
        }
    }

    #[test]
    fn a_prefix_the_client_would_escape_is_refused_by_its_character() {
        for (prefix, c) in [("a%b", '%'), ("x/y~z", '~'), ("n#1", '#'), ("l[1]", '[')] {
            let e = check_prefix("s3://lake/P", prefix).unwrap_err();
            assert!(
                e.contains(&format!("the prefix holds {c:?}")),
                "{prefix}: {e}"
            );
        }
        for prefix in ["", "prod", "a-b_c.d/e", "sp ace", "nightly/2026"] {
            assert_eq!(check_prefix("s3://lake/P", prefix), Ok(()), "{prefix}");
        }
    }

    /// An error with a cause, as the HTTP stack nests them.
    #[derive(Debug)]
    struct Nested(&'static str, Option<Box<Nested>>);

    impl std::fmt::Display for Nested {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Nested {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|n| n as _)
        }
    }

    #[test]
    fn the_innermost_cause_is_named_once() {
        let e = Nested(
            "error sending request",
            Some(Box::new(Nested(
                "client error (Connect)",
                Some(Box::new(Nested("Connection refused", None))),
            ))),
        );
        assert_eq!(
            causes(&e),
            (
                "error sending request | client error (Connect) | Connection refused".to_owned(),
                "Connection refused".to_owned()
            )
        );
        assert_eq!(
            with_cause(&e),
            "error sending request (cause: Connection refused)"
        );
        let alone = Nested("NoSuchBucket", None);
        assert_eq!(with_cause(&alone), "NoSuchBucket");
    }

    #[test]
    fn missing_credentials_are_named() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            missing_env(env(&[])),
            vec!["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        );
        assert_eq!(
            missing_env(env(&[
                ("AWS_ACCESS_KEY_ID", "k"),
                ("AWS_SECRET_ACCESS_KEY", " ")
            ])),
            vec!["AWS_SECRET_ACCESS_KEY"]
        );
        assert!(missing_env(env(&[
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s")
        ]))
        .is_empty());
        assert!(missing_env(env(&[("AWS_SKIP_SIGNATURE", "true")])).is_empty());
    }
}
