//! Where the lake is, and the object store that reaches it.
//!
//! A lake location is a local directory or `s3://BUCKET[/PREFIX]` on any
//! S3-compatible store (R2's S3 API in production). Every store here is
//! DataFusion's object_store (0.13), so the listing and footer reads of
//! [`crate::Lake`] and DataFusion's scan go through the same client.
//!
//! S3 is configured from the environment only ([`AmazonS3Builder::from_env`]):
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
//! [`S3_CONNECT_TIMEOUT`], a request after [`S3_REQUEST_TIMEOUT`], and failed
//! requests are retried [`S3_MAX_RETRIES`] times within [`S3_RETRY_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{ClientConfigKey, ObjectStore, RetryConfig};

/// Connect timeout of every S3 request.
pub const S3_CONNECT_TIMEOUT: &str = "5s";
/// Timeout of one S3 request, body included (lake reads are ranged: a
/// footer, or a column chunk of at most a few MB).
pub const S3_REQUEST_TIMEOUT: &str = "60s";
/// Retries of a failed S3 request (connection errors, 5xx, throttling).
pub const S3_MAX_RETRIES: usize = 3;
/// No retry starts later than this after the first attempt.
pub const S3_RETRY_TIMEOUT: Duration = Duration::from_secs(20);

/// How to configure S3 access, appended to every S3 configuration error.
pub const S3_ENV_HELP: &str =
    "Help: an s3:// lake is reached with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, \
AWS_ENDPOINT_URL (R2: https://<account>.r2.cloudflarestorage.com), AWS_REGION (default auto) \
and AWS_ALLOW_HTTP=true for a plain-http endpoint; see docs/RECONCILE.md";

/// A parsed lake location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory (the one holding `events/`).
    Local(String),
    /// `s3://bucket/prefix`: `prefix` has no leading or trailing `/` and may
    /// be empty (the lake is the whole bucket).
    S3 { bucket: String, prefix: String },
}

impl Location {
    /// `s3://BUCKET[/PREFIX]`, another `scheme://` (refused), or a local path.
    pub fn parse(location: &str) -> Result<Location, String> {
        if let Some(rest) = location.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!(
                    "{location}: names no bucket\nHelp: use s3://BUCKET or s3://BUCKET/PREFIX"
                ));
            }
            let valid = bucket.len() >= 3
                && bucket.len() <= 63
                && bucket.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                });
            if !valid {
                return Err(format!(
                    "{location}: {bucket:?} is not a bucket name (3 to 63 characters: a-z, 0-9, '-', '.')\n\
                     Help: use s3://BUCKET or s3://BUCKET/PREFIX"
                ));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|part| part == "." || part == "..") {
                return Err(format!(
                    "{location}: the prefix may not contain '.' or '..' segments"
                ));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if let Some((scheme, _)) = location.split_once("://") {
            return Err(format!(
                "{location}: {scheme}:// lakes are not supported\nHelp: pass a local directory or s3://BUCKET/PREFIX"
            ));
        }
        Ok(Location::Local(location.to_owned()))
    }

    /// What precedes a lake key (`events/…`) inside the store: `PREFIX/`
    /// or nothing.
    pub fn key_prefix(&self) -> String {
        match self {
            Location::S3 { prefix, .. } if !prefix.is_empty() => format!("{prefix}/"),
            _ => String::new(),
        }
    }

    /// A lake key as a user finds it: `s3://bucket/prefix/events/…` for S3;
    /// the key itself (relative to the lake directory) for a local lake.
    pub fn display_key(&self, key: &str) -> String {
        match self {
            Location::S3 { bucket, .. } => format!("s3://{bucket}/{}{key}", self.key_prefix()),
            Location::Local(_) => key.to_owned(),
        }
    }
}

/// The environment variables a run needs that are not set, in the order
/// the help names them (empty: nothing missing).
pub fn missing_s3_env(get: impl Fn(&str) -> Option<String>) -> Vec<&'static str> {
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

/// The S3 store of `bucket`, configured from the environment (module docs).
/// Only configuration is checked here; [`probe_s3`] talks to the endpoint.
pub fn s3_store(bucket: &str) -> Result<Arc<dyn ObjectStore>, String> {
    let missing = missing_s3_env(|k| std::env::var(k).ok());
    if !missing.is_empty() {
        return Err(format!(
            "s3://{bucket}: {} not set: no credentials for the bucket\n{S3_ENV_HELP}",
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
            "s3://{bucket}: the endpoint {url} is plain http, which is refused unless AWS_ALLOW_HTTP=true \
             (meant for local test servers; R2 is https)\n{S3_ENV_HELP}"
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
    let store = builder
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
            S3_CONNECT_TIMEOUT,
        )
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            S3_REQUEST_TIMEOUT,
        )
        .with_retry(RetryConfig {
            max_retries: S3_MAX_RETRIES,
            retry_timeout: S3_RETRY_TIMEOUT,
            ..RetryConfig::default()
        })
        .build()
        .map_err(|e| format!("s3://{bucket}: cannot configure S3: {e}\n{S3_ENV_HELP}"))?;
    Ok(Arc::new(store))
}

/// One listing request under `PREFIX/events/`: proves that the endpoint
/// answers, the bucket exists and the credentials may list it, before any
/// verdict work starts. Errors say which of these failed.
pub async fn probe_s3(store: &dyn ObjectStore, location: &Location) -> Result<(), String> {
    let Location::S3 { bucket, .. } = location else {
        return Ok(());
    };
    let events = Path::from(format!("{}events", location.key_prefix()));
    match store.list_with_delimiter(Some(&events)).await {
        Ok(_) => Ok(()),
        Err(e) => Err(describe_s3_error(bucket, &e)),
    }
}

/// An error's own words and every cause under it, joined by ` | `, and the
/// innermost cause alone (what went wrong at the bottom: a refused
/// connection, a certificate).
fn causes(e: &dyn std::error::Error) -> (String, String) {
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

/// What an S3 error means for the user: missing bucket, refused
/// credentials, a failed TLS handshake, unreachable endpoint, or the store's
/// own words. The error's innermost cause is named, since the store's own
/// message ("error sending request") does not say what failed.
pub fn describe_s3_error(bucket: &str, e: &object_store::Error) -> String {
    let (text, cause) = causes(e);
    let said = if text == cause || e.to_string().contains(&cause) {
        e.to_string()
    } else {
        format!("{e} (cause: {cause})")
    };
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT"))
        .unwrap_or_else(|_| "the AWS S3 default endpoint".to_owned());
    let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    if has(&["NoSuchBucket", "The specified bucket does not exist"]) {
        format!(
            "s3://{bucket}: the bucket does not exist at {endpoint}\n\
             Help: check the bucket name and AWS_ENDPOINT_URL (R2: the account's endpoint)"
        )
    } else if has(&[
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "AccessDenied",
        "403 Forbidden",
        "401 Unauthorized",
    ]) {
        format!(
            "s3://{bucket}: the credentials were refused by {endpoint} (access key unknown, wrong secret, \
             or no permission to list the bucket): {e}\n\
             Help: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (R2: an API token with Object Read \
             on the bucket)"
        )
    } else if has(&[
        // rustls' words: a certificate it does not trust, or bytes that are
        // not TLS at all (an https URL for a plain-http port).
        "invalid peer certificate",
        "received corrupt message",
        "InvalidContentType",
        "peer is incompatible",
        "handshake",
    ]) {
        format!(
            "s3://{bucket}: the TLS connection to {endpoint} failed: {cause}\n\
             Help: the endpoint must speak https with a certificate this machine trusts (the system's \
             roots, or SSL_CERT_FILE / SSL_CERT_DIR for a private CA); a plain-http endpoint is \
             http:// with AWS_ALLOW_HTTP=true"
        )
    } else if has(&[
        "error sending request",
        "Connection refused",
        "connection refused",
        "dns error",
        "timed out",
        "operation timed out",
        "tcp connect",
        "connection closed",
        "Connection reset",
    ]) {
        format!(
            "s3://{bucket}: the endpoint {endpoint} is unreachable (gave up after {S3_MAX_RETRIES} retries \
             within {}s): {said}\n\
             Help: check AWS_ENDPOINT_URL and the network; a plain-http endpoint needs AWS_ALLOW_HTTP=true",
            S3_RETRY_TIMEOUT.as_secs()
        )
    } else {
        format!("s3://{bucket}: {said}\n{S3_ENV_HELP}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        assert_eq!(
            Location::parse("s3://lake/prod/v1/").unwrap(),
            Location::S3 {
                bucket: "lake".into(),
                prefix: "prod/v1".into()
            }
        );
        let whole = Location::parse("s3://ledger-lake").unwrap();
        assert_eq!(whole.key_prefix(), "");
        assert_eq!(
            whole.display_key("events/a.parquet"),
            "s3://ledger-lake/events/a.parquet"
        );
        let p = Location::parse("s3://lake/prod").unwrap();
        assert_eq!(p.key_prefix(), "prod/");
        assert_eq!(
            p.display_key("events/a.parquet"),
            "s3://lake/prod/events/a.parquet"
        );
        assert_eq!(
            Location::parse(".lake").unwrap(),
            Location::Local(".lake".into())
        );
        for bad in [
            "s3://",
            "s3:///x",
            "s3://Bad_Bucket/x",
            "s3://ab",
            "s3://b-1/a/../x",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
        let e = Location::parse("gs://lake/x").unwrap_err();
        assert!(e.contains("gs:// lakes are not supported"), "{e}");
    }

    /// An error with a cause, as the HTTP stack nests them.
    #[derive(Debug)]
    struct Nested(&'static str, Option<Box<Nested>>);

    impl std::fmt::Display for Nested {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Nested {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|n| n as _)
        }
    }

    fn s3_error(chain: &[&'static str]) -> object_store::Error {
        let nested = chain
            .iter()
            .rev()
            .fold(None, |under, what| Some(Box::new(Nested(what, under))))
            .unwrap();
        object_store::Error::Generic {
            store: "S3",
            source: nested,
        }
    }

    #[test]
    fn an_s3_error_is_named_by_its_innermost_cause() {
        let tls = describe_s3_error(
            "lake",
            &s3_error(&[
                "error sending request",
                "client error (Connect)",
                "invalid peer certificate: UnknownIssuer",
            ]),
        );
        assert!(
            tls.contains("the TLS connection to")
                && tls.contains("failed: invalid peer certificate: UnknownIssuer")
                && tls.contains("SSL_CERT_FILE"),
            "{tls}"
        );
        let refused = describe_s3_error(
            "lake",
            &s3_error(&[
                "error sending request",
                "tcp connect error",
                "Connection refused (os error 111)",
            ]),
        );
        assert!(
            refused.contains("is unreachable")
                && refused.contains("(cause: Connection refused (os error 111))"),
            "{refused}"
        );
        let other = describe_s3_error("lake", &s3_error(&["something else"]));
        assert!(
            other.starts_with("s3://lake: Generic S3 error: something else\n"),
            "{other}"
        );
        assert!(!other.contains("cause:"), "{other}");
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
            missing_s3_env(env(&[])),
            vec!["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        );
        assert_eq!(
            missing_s3_env(env(&[
                ("AWS_ACCESS_KEY_ID", "k"),
                ("AWS_SECRET_ACCESS_KEY", " ")
            ])),
            vec!["AWS_SECRET_ACCESS_KEY"]
        );
        assert!(missing_s3_env(env(&[
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s")
        ]))
        .is_empty());
        assert!(missing_s3_env(env(&[("AWS_SKIP_SIGNATURE", "true")])).is_empty());
    }
}
