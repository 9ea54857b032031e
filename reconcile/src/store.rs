//! Where the lake is, and the object store that reaches it.
//!
//! A lake location is a local directory or `s3://BUCKET[/PREFIX]` on any
//! S3-compatible store (R2's S3 API in production). Every store here is
//! DataFusion's object_store (0.13), so the listing and footer reads of
//! [`crate::Lake`] and DataFusion's scan go through the same client.
//!
//! S3 is configured from the environment only, by [`ledger_s3::store`] (the
//! variables are listed there and in docs/RECONCILE.md), as compaction's is:
//! a request gives up after [`S3_REQUEST_TIMEOUT`], a connection attempt and
//! the retries are bounded by `ledger_s3`.

use std::sync::Arc;

use object_store::path::Path;
use object_store::ObjectStore;

/// Timeout of one S3 request, body included (lake reads are ranged: a
/// footer, or a column chunk of at most a few MB).
pub const S3_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// What names the lake at `location` however it is spelled, for the
    /// state files that belong to one lake (the checkpoint, the alert
    /// state) and the alert's `dedup_key`: a local directory's absolute path
    /// with links resolved (`lake`, `./lake`, `lake/` and `/srv/lake` are
    /// one), `s3://BUCKET` or `s3://BUCKET/PREFIX` without slashes at either
    /// end of the prefix, followed by ` at ENDPOINT` when the environment
    /// names one (`ledger_s3::endpoint`: the same bucket name at two R2
    /// accounts is two lakes); the spelling itself when it names nothing
    /// that exists.
    pub fn identity(location: &str) -> String {
        Location::identity_at(location, ledger_s3::endpoint().as_deref())
    }

    /// [`Location::identity`] with the S3 endpoint `endpoint`.
    fn identity_at(location: &str, endpoint: Option<&str>) -> String {
        let s3 = |lake: String| match endpoint {
            Some(e) => format!("{lake} at {e}"),
            None => lake,
        };
        match Location::parse(location) {
            Ok(Location::Local(dir)) => std::path::Path::new(&dir)
                .canonicalize()
                .map_or_else(|_| location.to_owned(), |p| p.display().to_string()),
            Ok(Location::S3 { bucket, prefix }) if prefix.is_empty() => {
                s3(format!("s3://{bucket}"))
            }
            Ok(Location::S3 { bucket, prefix }) => s3(format!("s3://{bucket}/{prefix}")),
            Err(_) => location.to_owned(),
        }
    }

    /// Whether a state file that records the lake `recorded` (an identity,
    /// or the spelling an older reconciler recorded) belongs to the lake
    /// whose identity is `identity`. An S3 lake recorded by a build before
    /// the endpoint was part of its identity (`s3://BUCKET/PREFIX` alone) is
    /// taken to be at this run's endpoint; one recorded at an endpoint is
    /// that endpoint's only.
    pub fn is_same_lake(recorded: &str, identity: &str) -> bool {
        Location::same_lake_at(recorded, identity, ledger_s3::endpoint().as_deref())
    }

    /// [`Location::is_same_lake`] with the S3 endpoint `endpoint`.
    fn same_lake_at(recorded: &str, identity: &str, endpoint: Option<&str>) -> bool {
        let at_an_endpoint = recorded.starts_with("s3://") && recorded.contains(" at ");
        recorded == identity
            || (!at_an_endpoint && Location::identity_at(recorded, endpoint) == identity)
    }

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
            ledger_s3::check_prefix(location, prefix)?;
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

/// The S3 store of `bucket`, configured from the environment (module docs);
/// errors name the lake as given (`location`). Only configuration is checked
/// here; [`probe_s3`] talks to the endpoint.
pub fn s3_store(location: &str, bucket: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Ok(Arc::new(ledger_s3::store(
        location,
        bucket,
        S3_REQUEST_TIMEOUT,
    )?))
}

/// One listing request under `PREFIX/events/`: proves that the endpoint
/// answers, the bucket exists and the credentials may list it, before any
/// verdict work starts. Errors say which of these failed.
pub async fn probe_s3(store: &dyn ObjectStore, location: &Location) -> Result<(), String> {
    let Location::S3 { bucket, prefix } = location else {
        return Ok(());
    };
    let events = Path::from(format!("{}events", location.key_prefix()));
    match store.list_with_delimiter(Some(&events)).await {
        Ok(_) => Ok(()),
        // Named as given, prefix and all: one bucket may hold several
        // lakes (rev-s55-blackbox F9).
        Err(e) if prefix.is_empty() => Err(describe_s3_error(bucket, &e)),
        Err(e) => Err(describe_s3_error(&format!("{bucket}/{prefix}"), &e)),
    }
}

/// What an S3 error means for the user: missing bucket, refused
/// credentials, a failed TLS handshake, unreachable endpoint, or the store's
/// own words. The error's innermost cause is named, since the store's own
/// message ("error sending request") does not say what failed.
pub fn describe_s3_error(bucket: &str, e: &object_store::Error) -> String {
    let raw = std::env::var("AWS_ENDPOINT_URL").or_else(|_| std::env::var("AWS_ENDPOINT"));
    let secret = raw
        .as_ref()
        .ok()
        .and_then(|r| reqwest::Url::parse(r).ok())
        .and_then(|u| u.password().filter(|p| !p.is_empty()).map(str::to_owned));
    let mut message = describe_s3_error_at(
        bucket,
        e,
        raw.as_deref()
            .map_or_else(|_| "the AWS S3 default endpoint".to_owned(), shown_endpoint),
        secret.as_deref(),
    );
    // Neither an endpoint nor a region: the region is R2's `auto`, which
    // AWS S3 does not know (`s3.auto.amazonaws.com`), whatever else failed
    // (rev-s53-resources L1: the Help blamed the network).
    let region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    if raw.is_err() && !region {
        let at = message.find("\nHelp:").unwrap_or(message.len());
        message.insert_str(
            at,
            "\nNeither AWS_ENDPOINT_URL nor AWS_REGION is set, so the region is `auto` (R2's), which \
             AWS S3 does not know: for R2 set AWS_ENDPOINT_URL to the account's endpoint; for AWS S3 set \
             AWS_REGION to the bucket's region",
        );
    }
    message
}

/// `text` with the endpoint's password hidden where the URL shows it
/// (`:password@`: a short password is not replaced wherever its letters
/// occur). Done before a text is cut, so a cut cannot leave part of it
/// (rev-s55-diff2 L7).
fn without_password(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(secret) => text.replace(&format!(":{secret}@"), ":…@"),
        None => text.to_owned(),
    }
}

/// The endpoint as given, but for user info and a query (secrets).
fn shown_endpoint(raw: &str) -> String {
    match reqwest::Url::parse(raw) {
        Ok(u) if !u.username().is_empty() || u.password().is_some() || u.query().is_some() => {
            crate::output::http::redact(raw)
        }
        _ => raw.to_owned(),
    }
}

/// Whether an error's text (its chain of causes) is a failed TLS handshake,
/// in rustls' words: a certificate it does not trust, or bytes that are not
/// TLS at all (an https URL for a plain-http port). The S3 store's errors
/// and the outputs' HTTP calls alike (`output::http`).
pub(crate) fn tls_failure(text: &str) -> bool {
    tls_refused(text) || text.contains("handshake")
}

/// Whether a TLS failure is one every attempt meets alike: a certificate
/// refused, bytes that are not TLS (https to a plain-http port), no
/// protocol in common. Not a handshake cut short by the peer (`tls
/// handshake eof`: a receiver restarting), which a retry may pass
/// (rev-s52-diff M4).
pub(crate) fn tls_refused(text: &str) -> bool {
    [
        "invalid peer certificate",
        "received corrupt message",
        "InvalidContentType",
        "peer is incompatible",
    ]
    .iter()
    .any(|n| text.contains(n))
}

/// What a TLS Help asks of the far end's certificate: that it is trusted
/// here, and how a private CA is (rustls reads these variables for its
/// roots, the S3 store's and the outputs' alike).
pub(crate) const TRUSTED_CERTIFICATE: &str = "a certificate this machine trusts (the system's \
     roots, or SSL_CERT_FILE / SSL_CERT_DIR for a private CA)";

/// S3's error codes for a session token expired or not valid.
const TOKEN_CODES: [&str; 3] = ["ExpiredToken", "InvalidToken", "TokenRefreshRequired"];

/// S3's error codes for an access key it does not know or a wrong secret.
const KEY_CODES: [&str; 2] = ["InvalidAccessKeyId", "SignatureDoesNotMatch"];

/// What an S3 error says went wrong, from its words and its causes'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S3Failure {
    NoBucket,
    /// A session token (AWS_SESSION_TOKEN) expired or not valid.
    Token,
    /// The region is not the bucket's (AWS S3 answers a redirect or a
    /// malformed authorization; rev-s53-resources L2: named "Other").
    Region,
    Credentials,
    Tls,
    Unreachable,
    Other,
}

impl S3Failure {
    fn of(text: &str) -> S3Failure {
        let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
        if has(&["NoSuchBucket", "The specified bucket does not exist"]) {
            S3Failure::NoBucket
        } else if has(&TOKEN_CODES) {
            S3Failure::Token
        } else if has(&[
            "incorrectly configured region",
            "AuthorizationHeaderMalformed",
            "PermanentRedirect",
            "IllegalLocationConstraintException",
        ]) {
            S3Failure::Region
        } else if has(&KEY_CODES) || has(&["AccessDenied", "403 Forbidden", "401 Unauthorized"]) {
            S3Failure::Credentials
        } else if tls_failure(text) {
            S3Failure::Tls
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
            S3Failure::Unreachable
        } else {
            S3Failure::Other
        }
    }

    /// What to do about it.
    fn help(self) -> String {
        match self {
            S3Failure::NoBucket => {
                "Help: check the bucket name and AWS_ENDPOINT_URL (R2: the account's endpoint)"
                    .into()
            }
            S3Failure::Token => "Help: the session token has expired or is not valid: refresh \
                                 AWS_SESSION_TOKEN with its AWS_ACCESS_KEY_ID and \
                                 AWS_SECRET_ACCESS_KEY, and run again"
                .into(),
            S3Failure::Region => {
                "Help: set AWS_REGION to the bucket's region (AWS S3: the bucket's \
                                  properties name it); for R2, AWS_ENDPOINT_URL is the account's \
                                  endpoint and AWS_REGION is `auto` or unset"
                    .into()
            }
            S3Failure::Credentials => {
                "Help: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (R2: an API token \
                 with Object Read on the bucket; Object Read & Write for --publish-dangling)"
                    .into()
            }
            S3Failure::Tls => format!(
                "Help: the endpoint must speak https with {TRUSTED_CERTIFICATE}; a plain-http \
                 endpoint is http:// with AWS_ALLOW_HTTP=true"
            ),
            S3Failure::Unreachable => "Help: check AWS_ENDPOINT_URL and the network; a plain-http \
                                       endpoint needs AWS_ALLOW_HTTP=true"
                .into(),
            S3Failure::Other => ledger_s3::ENV_HELP.into(),
        }
    }
}

/// The `Help:` line for a store's error met once the lake was reached (a
/// listing, a manifest's read), as the connection check words the same
/// error: credentials revoked or a session token expired mid-run are named
/// as such (rev-s51-ops2 F10: such errors had no Help). With its newline.
/// For an S3 lake's errors only.
pub fn help_line(e: &object_store::Error) -> String {
    let (text, _) = ledger_s3::causes(e);
    match access_help_in(&text) {
        Some(help) => format!("\n{help}"),
        // The connection check reached the endpoint: what failed since is
        // the store or the network, not its address (rev-s51-diff L1).
        None => "\nHelp: the store failed, refused the request or stopped answering: check its \
                 health, the network and the run's access, and run again"
            .to_owned(),
    }
}

/// The connection check's `Help:` line (without its newline) for an S3
/// error whose words name what to fix: an expired session token, refused
/// credentials, the bucket's region, no such bucket, TLS. None when they
/// do not (a 5xx, a timeout): the store's health is then the Help.
fn access_help_in(text: &str) -> Option<String> {
    match S3Failure::of(text) {
        S3Failure::Other | S3Failure::Unreachable => None,
        failure => Some(failure.help()),
    }
}

/// The `Help:` line, with its newline, for one object's read (a manifest's)
/// the store refused or failed on an S3 lake, once the listing worked: a
/// session token or key that changed mid-run is named as such
/// ([`read_refused_help_in`]); anything else, a 403 included, is that
/// object's or the store's, not the run's credentials (rev-s55-diff M1,
/// rev-s58-fixes 6).
pub fn read_help_line(e: &object_store::Error) -> String {
    let (text, _) = ledger_s3::causes(e);
    format!("\n{}", read_help_in(&text))
}

fn read_help_in(text: &str) -> String {
    read_refused_help_in(text).unwrap_or_else(|| {
        "Help: do not move anything: the store failed, or refused this one object while the \
         listing worked (its storage class, its KMS key, a bucket policy); check the store's \
         health and the run's access to that object, and run again"
            .into()
    })
}

/// The `Help:` line (without its newline) for a lake file's read the store
/// refused with an S3 error code that says the run's identity changed
/// since the listing worked: a session token that expired mid-run, an
/// access key revoked or rotated. None for anything else, a 403 included:
/// one object refused while the rest read is that object's (archived to
/// Glacier, `InvalidObjectState`; its KMS key; a bucket policy), or the
/// clock's (`RequestTimeTooSkewed`), and the store's-access Help names
/// those better than "check the keys" would (rev-s55-diff M1). The codes
/// are S3's, so a local lake's error never has one.
pub fn read_refused_help_in(text: &str) -> Option<String> {
    let has = |codes: &[&str]| codes.iter().any(|c| text.contains(c));
    if has(&TOKEN_CODES) {
        Some(S3Failure::Token.help())
    } else if has(&KEY_CODES) {
        Some(S3Failure::Credentials.help())
    } else {
        None
    }
}

fn describe_s3_error_at(
    bucket: &str,
    e: &object_store::Error,
    endpoint: String,
    secret: Option<&str>,
) -> String {
    let (text, cause) = ledger_s3::causes(e);
    // The store's words hold the endpoint's answer: cut and escaped, as a
    // receiver's are (rev-s55-blackbox F9: a web server's HTML page was
    // printed whole, line by line, into the job's log); whatever quotes the
    // endpoint (a transport error names its URL) shows no password.
    let shown = |t: &str| crate::output::http::excerpt(&without_password(t, secret));
    let said = shown(&ledger_s3::with_cause(e));
    let (e, cause) = (shown(&e.to_string()), shown(&cause));
    let failure = S3Failure::of(&text);
    let help = failure.help();
    match failure {
        S3Failure::NoBucket => {
            format!("s3://{bucket}: the bucket does not exist at {endpoint}\n{help}")
        }
        S3Failure::Token => format!(
            "s3://{bucket}: {endpoint} refused the session token (expired, or not valid): {e}\n{help}"
        ),
        S3Failure::Region => format!(
            "s3://{bucket}: {endpoint} says the region is not the bucket's: {said}\n{help}"
        ),
        S3Failure::Credentials => format!(
            "s3://{bucket}: the credentials were refused by {endpoint} (access key unknown, wrong secret, \
             or no permission to list the bucket): {e}\n{help}"
        ),
        S3Failure::Tls => {
            format!("s3://{bucket}: the TLS connection to {endpoint} failed: {cause}\n{help}")
        }
        S3Failure::Unreachable => format!(
            "s3://{bucket}: the endpoint {endpoint} is unreachable (connect timeout {}, a request's \
             timeout {} s, at most {} retries started within {} s): {said}\n{help}",
            ledger_s3::CONNECT_TIMEOUT,
            S3_REQUEST_TIMEOUT.as_secs(),
            ledger_s3::MAX_RETRIES,
            ledger_s3::retry_timeout(S3_REQUEST_TIMEOUT).as_secs()
        ),
        S3Failure::Other => format!("s3://{bucket}: {said}\n{help}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One object's read refused on an S3 lake: a 403 names that object's
    /// access, not the run's keys (which listed the lake); an expired token
    /// names the token (rev-s58-fixes 6).
    #[test]
    fn a_refused_read_of_one_object_does_not_blame_the_keys() {
        let denied = read_help_in("403 Forbidden: <Code>AccessDenied</Code>");
        assert!(
            denied.contains("this one object") && !denied.contains("AWS_ACCESS_KEY_ID"),
            "{denied}"
        );
        let expired = read_help_in("400 Bad Request: <Code>ExpiredToken</Code>");
        assert_eq!(expired, S3Failure::Token.help());
        // The listing's Help, for the same 403, names the keys.
        assert_eq!(
            access_help_in("403 Forbidden: <Code>AccessDenied</Code>"),
            Some(S3Failure::Credentials.help())
        );
    }

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
        // rev-s47-lake L2: a prefix the S3 client would escape in keys found
        // nothing; refused by the character.
        for (bad, c) in [
            ("s3://lake/a%b", '%'),
            ("s3://lake/x/y~z", '~'),
            ("s3://lake/n#1", '#'),
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert!(e.contains(&format!("the prefix holds {c:?}")), "{bad}: {e}");
        }
        for good in [
            "s3://lake/sp ace",
            "s3://lake//prod//",
            "s3://lake/a-b_c.d/e",
        ] {
            assert!(Location::parse(good).is_ok(), "{good}");
        }
    }

    /// rev-s55 carried "S3 identity excludes the endpoint": one bucket name
    /// at two endpoints (production's and staging's R2 accounts) is two
    /// lakes, for the checkpoint, the alert state and the alert's dedup key.
    #[test]
    fn an_s3_lakes_identity_names_its_endpoint() {
        let (prod, staging) = (
            Some("https://prod.r2.cloudflarestorage.com"),
            Some("https://staging.r2.cloudflarestorage.com"),
        );
        let at_prod = Location::identity_at("s3://lake/v1/", prod);
        assert_eq!(
            at_prod,
            "s3://lake/v1 at https://prod.r2.cloudflarestorage.com"
        );
        assert_eq!(Location::identity_at("s3://lake//v1", None), "s3://lake/v1");
        let at_staging = Location::identity_at("s3://lake/v1", staging);
        assert_ne!(at_prod, at_staging);
        assert!(Location::same_lake_at(&at_prod, &at_prod, prod));
        assert!(!Location::same_lake_at(&at_prod, &at_staging, staging));
        // Recorded by an older build, without the endpoint: this run's.
        assert!(Location::same_lake_at("s3://lake/v1", &at_staging, staging));
        assert!(Location::same_lake_at("s3://lake/v1/", &at_prod, prod));
        assert!(!Location::same_lake_at("s3://lake/v2", &at_prod, prod));
        // A local lake has no endpoint.
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().to_str().unwrap();
        assert_eq!(
            Location::identity_at(local, prod),
            dir.path().canonicalize().unwrap().display().to_string()
        );
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
        let page = describe_s3_error(
            "lake/prod",
            &s3_error(&[
                "GET 501 Not Implemented: <!DOCTYPE HTML>\n<html lang=\"en\">\n<body>\nnot S3\n</body>",
            ]),
        );
        let first = page.lines().next().unwrap();
        assert!(
            first.starts_with("s3://lake/prod: ")
                && first.contains("<!DOCTYPE HTML>\\n<html")
                && page
                    .lines()
                    .skip(1)
                    .all(|l| !l.contains("<body") && !l.contains("</body"))
                && page.contains("\nHelp:"),
            "{page}"
        );
        let other = describe_s3_error("lake", &s3_error(&["something else"]));
        assert!(
            other.starts_with("s3://lake: Generic S3 error: something else\n"),
            "{other}"
        );
        assert!(!other.contains("cause:"), "{other}");
    }
}
