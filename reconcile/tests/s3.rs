//! `reconcile s3://BUCKET/PREFIX` against a real S3-compatible endpoint
//! (moto's server, the stand-in for R2's S3 API; see
//! tests/support/s3_server.rs): a lake uploaded under a prefix gets the same
//! verdict and the same findings as the same lake read from a directory, and
//! every S3 failure is exit 2 with a message that says which one.

mod common;
#[path = "../../tests/support/s3_server.rs"]
mod s3_server;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{config, files_under, runtime, NOW_MS};
use futures::StreamExt;
use ledger_reconcile::corrupt::{copy_lake, inject, Class};
use ledger_reconcile::gen::generate_lake;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use s3_server::{with_env, Fault, FaultyProxy, S3Server};

const BUCKET: &str = "ledger-lake";

/// The test's own client of the bucket (configured explicitly, not from
/// the environment, so it cannot mask what the binary reads).
fn bucket_store(server: &S3Server) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(server.endpoint())
            .with_allow_http(true)
            .with_region("auto")
            .with_access_key_id(s3_server::ACCESS_KEY)
            .with_secret_access_key(s3_server::SECRET_KEY)
            .with_bucket_name(BUCKET)
            .build()
            .unwrap(),
    )
}

/// Puts every file of the local lake `dir` under `prefix/` and checks
/// that the bucket holds exactly those bytes.
fn upload(store: &Arc<dyn ObjectStore>, dir: &Path, prefix: &str) -> Vec<String> {
    let keys = files_under(dir, "");
    assert!(keys.len() > 3, "{keys:?}");
    runtime().block_on(async {
        for k in &keys {
            let bytes = std::fs::read(dir.join(k)).unwrap();
            let path = ObjectPath::from(format!("{prefix}/{k}"));
            store
                .put(&path, PutPayload::from(bytes.clone()))
                .await
                .unwrap();
            let back = store.get(&path).await.unwrap().bytes().await.unwrap();
            assert_eq!(back.len(), bytes.len(), "{k}: uploaded whole");
        }
    });
    keys
}

fn put(store: &Arc<dyn ObjectStore>, key: &str, bytes: Vec<u8>) {
    runtime().block_on(async {
        store
            .put(&ObjectPath::from(key), PutPayload::from(bytes))
            .await
            .unwrap();
    });
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    /// The JSON report, when one was written.
    report: Option<serde_json::Value>,
    elapsed: Duration,
}

/// The binary under test: Cargo's build of it, or `RECONCILE_BIN` (another
/// build, for example a release one, or a copy kept away from a target
/// directory other checkouts build into).
fn reconcile_bin() -> std::path::PathBuf {
    std::env::var_os("RECONCILE_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_reconcile").into())
}

/// Runs the `reconcile` binary on `lake` with exactly `env` for AWS_*.
fn reconcile(lake: &str, env: &[(String, String)]) -> Run {
    reconcile_with(lake, env, &[])
}

/// [`reconcile`] with more arguments.
fn reconcile_with(lake: &str, env: &[(String, String)], extra: &[&str]) -> Run {
    let json = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(reconcile_bin());
    cmd.args([lake, "--quiet", "--now-ms", &NOW_MS.to_string(), "--json"])
        .arg(json.path())
        .args(extra)
        .env_remove("LEDGER_LAKE");
    with_env(&mut cmd, env);
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let elapsed = started.elapsed();
    let text = std::fs::read_to_string(json.path()).unwrap_or_default();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        report: (!text.is_empty()).then(|| serde_json::from_str(&text).unwrap()),
        elapsed,
    }
}

/// The report without what differs by nature between two runs (the lake's
/// name and the elapsed time): verdict, stats, every check and finding.
fn verdict(r: &Run) -> serde_json::Value {
    let mut j = r
        .report
        .clone()
        .unwrap_or_else(|| panic!("no report: {}\n{}", r.stdout, r.stderr));
    let o = j.as_object_mut().unwrap();
    o.remove("lake");
    o.remove("lake_identity");
    o.remove("elapsed_ms");
    j
}

/// The summary on stdout after its first line (which names the lake and
/// the elapsed time): one line per check, then the verdict; the lake, which
/// a `help:` line names, as `LAKE`.
fn summary_checks(r: &Run, lake: &str) -> String {
    let (first, rest) = r.stdout.split_once('\n').unwrap_or((&r.stdout, ""));
    assert!(first.contains(lake), "{first}");
    rest.replace(lake, "LAKE")
}

fn assert_same_as_local(dir: &Path, s3_lake: &str, server: &S3Server, expected_code: i32) {
    let local = reconcile(dir.to_str().unwrap(), &[]);
    assert_eq!(
        local.code, expected_code,
        "{}\n{}",
        local.stdout, local.stderr
    );
    let remote = reconcile(s3_lake, &server.env());
    assert_eq!(
        remote.code, expected_code,
        "{s3_lake}: {}\n{}",
        remote.stdout, remote.stderr
    );
    assert_eq!(verdict(&remote), verdict(&local), "{s3_lake}");
    assert_eq!(remote.report.as_ref().unwrap()["lake"], s3_lake);
    // The bucket and prefix at the endpoint: one bucket name at two
    // endpoints is two lakes.
    assert_eq!(
        remote.report.as_ref().unwrap()["lake_identity"],
        format!("{} at {}", s3_lake.trim_end_matches('/'), server.endpoint())
    );
    let local_identity = dir.canonicalize().unwrap();
    assert_eq!(
        local.report.as_ref().unwrap()["lake_identity"],
        local_identity.to_str().unwrap()
    );
    assert_eq!(
        summary_checks(&remote, s3_lake),
        summary_checks(&local, dir.to_str().unwrap())
    );
}

/// A server with the bucket, a client of it, and the generated clean lake
/// in `tmp/clean` uploaded under `prefix/`.
fn clean_lake_on_s3(prefix: &str) -> (S3Server, Arc<dyn ObjectStore>, tempfile::TempDir) {
    let server = S3Server::start();
    server.create_bucket(BUCKET);
    let store = bucket_store(&server);
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    generate_lake(&config(), &clean).unwrap();
    upload(&store, &clean, prefix);
    (server, store, tmp)
}

#[test]
fn an_s3_lake_gets_the_same_verdict_and_findings_as_the_same_lake_on_disk() {
    let (server, store, tmp) = clean_lake_on_s3("nightly/clean");
    let clean = tmp.path().join("clean");
    assert_same_as_local(&clean, &format!("s3://{BUCKET}/nightly/clean"), &server, 0);
    let r = reconcile(&format!("s3://{BUCKET}/nightly/clean"), &server.env());
    let files = r.report.as_ref().unwrap()["files"].as_u64().unwrap();
    assert_eq!(
        files as usize,
        files_under(&clean, "").len(),
        "every object read"
    );

    // Corrupted lakes: the same findings, row for row.
    for class in [
        Class::Tamper,
        Class::Conflict,
        Class::Overdraft,
        Class::Dangling,
    ] {
        let dir = tmp.path().join(format!("{class:?}"));
        copy_lake(&clean, &dir).unwrap();
        let injected = inject(&dir, class, NOW_MS).unwrap();
        assert!(!injected.expected.is_empty());
        let prefix = format!("nightly/{class:?}").to_lowercase();
        upload(&store, &dir, &prefix);
        let lake = format!("s3://{BUCKET}/{prefix}");
        assert_same_as_local(&dir, &lake, &server, 1);
        let r = reconcile(&lake, &server.env());
        let findings: usize = r.report.as_ref().unwrap()["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["findings"].as_array().unwrap().len())
            .sum();
        assert_eq!(findings, injected.expected.len(), "{class:?}");
        if class == Class::Dangling {
            // Published into the bucket under the lake's prefix, where no
            // sweeper reads it (the edge's reads the bucket's root): the
            // run says so.
            let mut cmd = Command::new(reconcile_bin());
            cmd.args([lake.as_str(), "--quiet", "--publish-dangling"])
                .args(["--now-ms", &NOW_MS.to_string()])
                .env_remove("LEDGER_LAKE");
            let out = with_env(&mut cmd, &server.env()).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains(&format!(
                    "warning: --publish-dangling writes {prefix}/reconcile/dangling/latest.json"
                )) && stderr
                    .contains("reads only reconcile/dangling/latest.json at its bucket's root"),
                "{stderr}"
            );
            let key = ObjectPath::from(format!("{prefix}/reconcile/dangling/latest.json"));
            let body =
                runtime().block_on(async { store.get(&key).await.unwrap().bytes().await.unwrap() });
            let list =
                ledger_api::sweep::parse_dangling(std::str::from_utf8(&body).unwrap()).unwrap();
            let want: Vec<String> = r.report.as_ref().unwrap()["dangling"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["transfer_id"].as_str().unwrap().to_owned())
                .collect();
            assert!(!want.is_empty());
            assert_eq!(list.transfers, want);
        }
    }

    // The whole bucket as the lake (no prefix): the clean lake at the root.
    let root = tmp.path().join("root");
    copy_lake(&clean, &root).unwrap();
    let server2 = S3Server::start();
    server2.create_bucket(BUCKET);
    upload(&bucket_store(&server2), &root, "");
    assert_same_as_local(&root, &format!("s3://{BUCKET}"), &server2, 0);
    // Its dangling list lands at the bucket's root, where the edge's
    // sweeper cron reads it; no warning.
    let mut cmd = Command::new(reconcile_bin());
    cmd.args([&format!("s3://{BUCKET}"), "--quiet", "--publish-dangling"])
        .args(["--now-ms", &NOW_MS.to_string()])
        .env_remove("LEDGER_LAKE");
    let out = with_env(&mut cmd, &server2.env()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let key = ObjectPath::from(ledger_api::sweep::DANGLING_KEY);
    let body = runtime().block_on(async {
        bucket_store(&server2)
            .get(&key)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    });
    let list = ledger_api::sweep::parse_dangling(std::str::from_utf8(&body).unwrap()).unwrap();
    assert!(list.transfers.is_empty());
}

#[test]
fn a_night_on_s3_accounts_for_what_compaction_replaced_and_not_for_a_deleted_object() {
    use ledger_compact::{compact_partition, Lake, Options};
    use object_store::prefix::PrefixStore;
    let (server, store, tmp) = clean_lake_on_s3("prod");
    let lake = format!("s3://{BUCKET}/prod");
    let ckpt = tmp.path().join("checkpoint");
    let night = || {
        let r = reconcile_with(
            &lake,
            &server.env(),
            &["--checkpoint", ckpt.to_str().unwrap()],
        );
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        r
    };
    night();
    // The nightly compaction on the bucket: the ETags its manifests record
    // are the ones reconcile's listing sees.
    let compactor = Lake::from_store(
        Arc::new(PrefixStore::new(bucket_store(&server), "prod")),
        &lake,
    );
    runtime().block_on(async {
        for p in compactor.partitions(None).await.unwrap() {
            compact_partition(&compactor, &p, &Options::default())
                .await
                .unwrap();
        }
    });
    let r = night();
    let i = &r.report.as_ref().unwrap()["incremental"];
    assert!(i["files_gone"].as_u64().unwrap() > 0, "{i}");
    assert_eq!(
        (&i["files_lost"], &i["reproved_in_full"]),
        (&0.into(), &false.into()),
        "{i}"
    );
    assert!(i["rows_already_proved"].as_u64().unwrap() > 0, "{i}");
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    // An object deleted by hand: lost, and the night proves the lake in full.
    let victim = runtime().block_on(async {
        let path = ObjectPath::from("prod/events/transfer");
        let first = store.list(Some(&path)).next().await.unwrap().unwrap();
        store.delete(&first.location).await.unwrap();
        first.location.to_string()
    });
    let r = reconcile_with(
        &lake,
        &server.env(),
        &["--checkpoint", ckpt.to_str().unwrap()],
    );
    let i = &r.report.as_ref().unwrap()["incremental"];
    assert_eq!(
        (&i["files_lost"], &i["reproved_in_full"]),
        (&1.into(), &true.into()),
        "{i}"
    );
    let key = victim.strip_prefix("prod/").unwrap();
    assert!(
        r.stderr.contains(key) && r.stderr.contains("not accounted for by compaction"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_damaged_object_is_exit_2_naming_its_s3_key() {
    let server = S3Server::start();
    server.create_bucket(BUCKET);
    let store = bucket_store(&server);
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    generate_lake(&config(), &clean).unwrap();
    let keys = upload(&store, &clean, "lake");
    let victim = keys
        .iter()
        .find(|k| k.starts_with("events/transfer/"))
        .unwrap();
    let full = format!("s3://{BUCKET}/lake/{victim}");

    // Truncated (a crashed copy): the footer is gone.
    let bytes = std::fs::read(clean.join(victim)).unwrap();
    put(
        &store,
        &format!("lake/{victim}"),
        bytes[..bytes.len() / 2].to_vec(),
    );
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &server.env());
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains(&full), "names {full}: {}", r.stderr);
    assert!(r.stderr.contains("Help:"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "no verdict: {}", r.stdout);
    assert!(r.report.is_none());

    // Not Parquet at all.
    put(
        &store,
        &format!("lake/{victim}"),
        b"not parquet, just bytes".to_vec(),
    );
    let r = reconcile(&format!("s3://{BUCKET}/lake/"), &server.env());
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains(&full), "names {full}: {}", r.stderr);
    assert!(r.stderr.contains("not a Parquet file"), "{}", r.stderr);

    // Restored, plus a key that is not a lake file (a temporary upload): ignored.
    put(&store, &format!("lake/{victim}"), bytes);
    put(
        &store,
        "lake/events/account/date=2026-01-01/.tmp-upload",
        b"partial".to_vec(),
    );
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &server.env());
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// rev-s50-ops F1: a store that fails a lake file's reads once the scan
/// has begun (parquet's reader keeps the failure only as text) is named as
/// the store's failure, never as a damaged file to move out of the lake;
/// a file the store no longer has left the lake during the run. The
/// faults come from a proxy (a mock: moto cannot fail on demand).
#[test]
fn a_store_failing_mid_scan_is_not_called_a_damaged_file() {
    let (server, store, tmp) = clean_lake_on_s3("lake");
    let keys = upload(&store, &tmp.path().join("clean"), "lake");
    let victim = keys
        .iter()
        .find(|k| k.starts_with("events/transfer/"))
        .unwrap()
        .clone();
    let name = victim.rsplit('/').next().unwrap().to_owned();
    // The footer pass reads the file twice (its tail, its footer), the
    // scan's planning once more: every read of it from the third (the
    // planning's, with the store's error kept as a cause) or the fourth
    // (the scan's, with it kept only as text) fails, and every read again.
    for (status, from) in [(500u16, 2), (500, 3), (404, 2), (404, 3)] {
        let name = name.clone();
        let faulted = std::sync::atomic::AtomicBool::new(false);
        let proxy = FaultyProxy::start(
            server.port,
            // Once faulted, every later request of the file is: a 404 is
            // an object gone (its HEAD says so too).
            Box::new(move |method, path, nth| {
                let this = path.contains(&name);
                let now = this && method == "GET" && nth >= from;
                let gone = this && (status == 404 || method == "GET") && faulted.load(SeqCst);
                if now {
                    faulted.store(true, SeqCst);
                }
                (now || gone).then_some(Fault::Status(status))
            }),
        );
        let env = proxy.env(&server);
        let r = reconcile(&format!("s3://{BUCKET}/lake"), &env);
        assert_eq!(r.code, 2, "{status}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(&victim), "{status}: {}", r.stderr);
        assert!(!r.stderr.contains("quarantine"), "{status}: {}", r.stderr);
        let says = if status == 404 {
            "nothing needs moving"
        } else {
            "do not move the file"
        };
        assert!(r.stderr.contains(says), "{status}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "no verdict: {}", r.stdout);
    }
}

/// rev-s51-ops2 F10: credentials refused once the connection check passed
/// (a session token that expired mid-run, a key revoked) are named as such
/// at the listing, with the Help the check gives; they had no Help, and an
/// expired token was never tied to AWS_SESSION_TOKEN. The refusals come
/// from a proxy (a mock: moto cannot expire a token on demand).
#[test]
fn credentials_refused_after_the_connection_check_are_named() {
    let (server, store, tmp) = clean_lake_on_s3("lake");
    upload(&store, &tmp.path().join("clean"), "lake");
    for (code, says) in [
        ("ExpiredToken", "refresh AWS_SESSION_TOKEN"),
        (
            "InvalidAccessKeyId",
            "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        ),
    ] {
        // Every listing after the first (the connection check's) refused.
        let lists = std::sync::atomic::AtomicUsize::new(0);
        let proxy = FaultyProxy::start(
            server.port,
            Box::new(move |method, path, _| {
                let list = method == "GET" && path.contains("list-type=2");
                (list && lists.fetch_add(1, SeqCst) >= 1).then_some(Fault::S3Error(403, code))
            }),
        );
        let r = reconcile(&format!("s3://{BUCKET}/lake"), &proxy.env(&server));
        assert_eq!(r.code, 2, "{code}: {}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("cannot list") && r.stderr.contains(code) && r.stderr.contains(says),
            "{code}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "no verdict: {}", r.stdout);
    }
}

#[test]
fn s3_failures_are_exit_2_saying_which() {
    let server = S3Server::start();
    server.create_bucket(BUCKET);

    // A bucket that does not exist.
    let r = reconcile("s3://no-such-bucket/lake", &server.env());
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("s3://no-such-bucket/lake: the bucket does not exist"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());

    // A prefix that holds no lake: no verdict either.
    let r = reconcile(&format!("s3://{BUCKET}/empty"), &server.env());
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no lake files"), "{}", r.stderr);

    // Credentials not set: named, and no request is made.
    let without_secret: Vec<_> = server
        .env()
        .into_iter()
        .filter(|(k, _)| k != "AWS_SECRET_ACCESS_KEY")
        .collect();
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &without_secret);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("AWS_SECRET_ACCESS_KEY not set") && r.stderr.contains("Help:"),
        "{}",
        r.stderr
    );
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "s3://{BUCKET}/lake: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not set"
        )),
        "the lake's prefix named (rev-s55-blackbox F9): {}",
        r.stderr
    );

    // Not a bucket URL at all.
    for (lake, says) in [
        ("s3://", "names no bucket"),
        ("s3://Not_A_Bucket/x", "is not a bucket name"),
        ("gs://lake/x", "gs:// lakes are not supported"),
    ] {
        let r = reconcile(lake, &server.env());
        assert_eq!(r.code, 2, "{lake}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{lake}: {}", r.stderr);
    }

    // Credentials the endpoint does not know (a server that authenticates).
    let strict = S3Server::start_authenticating();
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &strict.env());
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the credentials were refused")
            && r.stderr.contains("InvalidAccessKeyId"),
        "{}",
        r.stderr
    );

    // An endpoint nobody listens on: a bounded wait, then a clear error.
    let closed = s3_server::free_port();
    let mut env = server.env();
    env[0].1 = format!("http://127.0.0.1:{closed}");
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &env);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("http://127.0.0.1:{closed} is unreachable")),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(40), "{:?}", r.elapsed);
    // An endpoint with user info: named, its password never printed.
    env[0].1 = format!("http://user:pw-s3cret@127.0.0.1:{closed}");
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &env);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{closed}")) && !r.stderr.contains("pw-s3cret"),
        "{}",
        r.stderr
    );

    // An https URL for the plain-http server: the TLS handshake fails, and
    // the error says so and names rustls' cause, not "error sending request".
    let mut env = server.env();
    let https = env[0].1.replacen("http://", "https://", 1);
    env[0].1 = https.clone();
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &env);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("the TLS connection to {https} failed"))
            && r.stderr.contains("SSL_CERT_FILE"),
        "{}",
        r.stderr
    );

    // A plain-http endpoint without AWS_ALLOW_HTTP is refused, not hung on.
    let no_http: Vec<_> = server
        .env()
        .into_iter()
        .filter(|(k, _)| k != "AWS_ALLOW_HTTP")
        .collect();
    let r = reconcile(&format!("s3://{BUCKET}/lake"), &no_http);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("AWS_ALLOW_HTTP"), "{}", r.stderr);
}

/// rev-s53-resources L2: a region that is not the bucket's is named as
/// such, at the connection check and after it, with a Help that names
/// AWS_REGION; it was "Other" (the environment's Help). AWS S3's two
/// answers to it come from a proxy (a mock: moto takes any region): a 301
/// without a Location, and a 400 AuthorizationHeaderMalformed.
#[test]
fn a_region_that_is_not_the_buckets_is_named_as_such() {
    let (server, store, tmp) = clean_lake_on_s3("lake");
    upload(&store, &tmp.path().join("clean"), "lake");
    for (fault, from) in [
        (Fault::Status(301), 0),
        (Fault::S3Error(400, "AuthorizationHeaderMalformed"), 0),
        (Fault::S3Error(400, "AuthorizationHeaderMalformed"), 1),
    ] {
        let lists = std::sync::atomic::AtomicUsize::new(0);
        let proxy = FaultyProxy::start(
            server.port,
            Box::new(move |method, path, _| {
                let list = method == "GET" && path.contains("list-type=2");
                (list && lists.fetch_add(1, SeqCst) >= from).then_some(fault)
            }),
        );
        let r = reconcile(&format!("s3://{BUCKET}/lake"), &proxy.env(&server));
        assert_eq!(r.code, 2, "{fault:?}: {}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr
                .contains("Help: set AWS_REGION to the bucket's region"),
            "{fault:?} from listing {from}: {}",
            r.stderr
        );
        if from == 0 {
            assert!(
                r.stderr.contains("says the region is not the bucket's"),
                "{fault:?}: {}",
                r.stderr
            );
        }
        assert!(r.stdout.is_empty(), "no verdict: {}", r.stdout);
    }
}

/// rev-s53-resources L1: neither an endpoint nor a region makes the region
/// R2's `auto`, which AWS S3 does not know (`s3.auto.amazonaws.com`): the
/// error says so, before its Help, not only "check the network".
#[test]
fn no_endpoint_and_no_region_is_named_as_such() {
    let env = [
        ("AWS_ACCESS_KEY_ID".to_owned(), "k".to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), "s".to_owned()),
    ];
    let r = reconcile("s3://no-such-bucket-here/lake", &env);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let said = "Neither AWS_ENDPOINT_URL nor AWS_REGION is set, so the region is `auto`";
    let (before, help) = r.stderr.split_once("\nHelp:").unwrap();
    assert!(
        before.contains(said) && !help.contains(said),
        "{}",
        r.stderr
    );
    // With a region, not said.
    let env = [
        &env[..],
        &[("AWS_REGION".to_owned(), "eu-west-1".to_owned())],
    ]
    .concat();
    let r = reconcile("s3://no-such-bucket-here/lake", &env);
    assert!(r.code == 2 && !r.stderr.contains(said), "{}", r.stderr);
}
