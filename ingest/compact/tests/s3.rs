//! `ledger-compact --lake s3://BUCKET/PREFIX` against a real S3-compatible
//! endpoint (moto's server, the stand-in for R2's S3 API; see
//! tests/support/s3_server.rs), configured from the environment as in
//! production. The assertions are the local tests' (tests/common).

#[path = "../../../tests/support/layout.rs"]
mod layout;
#[path = "../../../tests/support/s3_server.rs"]
mod s3_server;

mod common;

use std::process::Command;
use std::sync::Arc;

use common::{
    assert_accounted, assert_compacted, assert_mid_way, ingest_into_store, keys,
    small_file_batches, versions, view,
};
use ledger_compact::Lake;
use object_store::aws::AmazonS3Builder;
use object_store::prefix::PrefixStore;
use s3_server::{with_env, Fault, FaultyProxy, S3Server};

const BUCKET: &str = "ledger-lake";
const PREFIX: &str = "prod/v1";

/// The test's own view of the lake, configured explicitly (not from the
/// environment the CLI reads).
fn lake(server: &S3Server) -> Lake {
    let s3 = AmazonS3Builder::new()
        .with_endpoint(server.endpoint())
        .with_allow_http(true)
        .with_region("auto")
        .with_access_key_id(s3_server::ACCESS_KEY)
        .with_secret_access_key(s3_server::SECRET_KEY)
        .with_bucket_name(BUCKET)
        .build()
        .unwrap();
    Lake::from_store(
        Arc::new(PrefixStore::new(s3, PREFIX)),
        &format!("s3://{BUCKET}/{PREFIX}"),
    )
}

fn cli(args: &[&str], env: &[(String, String)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ledger-compact"));
    cmd.args(args).env_remove("LEDGER_LAKE");
    // Every partition merged from runs spilled to local disk, and merged
    // into longer runs first.
    cmd.env("LEDGER_COMPACT_RUN_ROWS", common::TEST_RUN_ROWS.to_string())
        .env("LEDGER_COMPACT_FAN_IN", common::TEST_FAN_IN.to_string());
    with_env(&mut cmd, env);
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A server with the bucket, and the small-file lake ingested under
/// `PREFIX`.
async fn small_file_lake_on_s3() -> (S3Server, Lake) {
    let server = S3Server::start();
    server.create_bucket(BUCKET);
    let lake = lake(&server);
    for batch in small_file_batches() {
        ingest_into_store(&lake, &batch).await;
    }
    (server, lake)
}

#[tokio::test]
async fn compaction_on_s3_keeps_every_event_once_and_readers_mid_way_see_the_same() {
    let (server, lake) = small_file_lake_on_s3().await;
    // One partition of many small ingest files; the others must stay as they are.
    let partition = "events/account/date=2026-01-01/";
    let all_before = keys(&lake).await;
    let inputs: Vec<&String> = all_before
        .iter()
        .filter(|k| k.starts_with(partition))
        .collect();
    assert!(inputs.len() > 5, "{all_before:?}");
    let others: Vec<&String> = all_before
        .iter()
        .filter(|k| !k.starts_with(partition))
        .collect();
    assert!(!others.is_empty());
    let before = view(&lake).await;
    let listed = versions(&lake).await;
    let url = format!("s3://{BUCKET}/{PREFIX}");
    let select = ["--lake", &url, "--table", "account", "--date", "2026-01-01"];

    // A crash after the outputs are written: both layers present, readers
    // still see every event once.
    let mut crash_env = server.env();
    crash_env.push(("LEDGER_COMPACT_CRASH".into(), "after-write".into()));
    let (code, stderr) = cli(&select, &crash_env);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("aborting now"), "{stderr}");
    assert_mid_way(&lake, partition, &before, "s3 after-write").await;

    // The re-run finishes: the inputs are gone, the outputs hold each event once.
    let (code, stderr) = cli(&select, &server.env());
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("inputs deleted"), "{stderr}");
    let after = keys(&lake).await;
    for i in &inputs {
        assert!(!after.contains(i), "{i} deleted");
    }
    assert_compacted(&lake, partition, &before).await;
    // The manifests (the crashed run's and the re-run's) name every input
    // deleted in the version S3 listed, and the outputs as S3 lists them.
    assert_accounted(&lake, &listed).await;
    let untouched: Vec<&String> = after.iter().filter(|k| !k.starts_with(partition)).collect();
    assert_eq!(untouched, others, "the other partitions are untouched");

    // Again: nothing to do.
    let (code, stderr) = cli(&select, &server.env());
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("already compact"), "{stderr}");
}

/// rev-s50-ops F8: a store (or what stands before it) that keeps an output
/// short while saying the put succeeded. Compaction removes the short
/// object, deletes no input and says so; before, it stayed in the lake, the
/// next compaction refused the partition as damaged and every reconcile
/// stopped on it. The fault comes from a proxy (a mock: moto cannot cut an
/// upload on demand).
#[tokio::test]
async fn an_output_the_store_keeps_short_is_removed_and_nothing_else_changes() {
    let (server, lake) = small_file_lake_on_s3().await;
    let partition = "events/account/date=2026-01-01/";
    let before = (keys(&lake).await, view(&lake).await);
    let url = format!("s3://{BUCKET}/{PREFIX}");
    let select = ["--lake", &url, "--table", "account", "--date", "2026-01-01"];
    // The first put of each output arrives without its body.
    let proxy = FaultyProxy::start(
        server.port,
        Box::new(|method, path, nth| {
            (method == "PUT" && path.contains("/c-") && nth == 0).then_some(Fault::EmptyBody)
        }),
    );
    let env = proxy.env(&server);
    let (code, stderr) = cli(&select, &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("put returned but the store shows 0 bytes")
            && stderr.contains("the short object was removed")
            && stderr.contains("no input was deleted"),
        "{stderr}"
    );
    assert_eq!(
        (keys(&lake).await, view(&lake).await),
        before,
        "nothing changed"
    );
    // The store is whole again: the re-run compacts.
    let (code, stderr) = cli(&select, &server.env());
    assert_eq!(code, 0, "{stderr}");
    assert_compacted(&lake, partition, &before.1).await;
}

/// rev-s50-diff F4: a put the store does not confirm (its HEAD fails) deletes
/// nothing: another compaction of the same inputs puts the same key and may
/// already have deleted the inputs on the strength of it, so deleting it
/// could lose the partition's rows. The output stays, the run says nothing
/// was deleted, and a re-run converges. (Faults from the proxy: a mock.)
#[tokio::test]
async fn an_output_the_store_does_not_confirm_is_not_deleted() {
    let (server, lake) = small_file_lake_on_s3().await;
    let partition = "events/account/date=2026-01-01/";
    let before = (keys(&lake).await, view(&lake).await);
    let url = format!("s3://{BUCKET}/{PREFIX}");
    let select = ["--lake", &url, "--table", "account", "--date", "2026-01-01"];
    let proxy = FaultyProxy::start(
        server.port,
        Box::new(|method, path, _| {
            (method == "HEAD" && path.contains("/c-")).then_some(Fault::Status(503))
        }),
    );
    let env = proxy.env(&server);
    let (code, stderr) = cli(&select, &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nothing was deleted"), "{stderr}");
    let after = keys(&lake).await;
    let outputs: Vec<&String> = after.iter().filter(|k| k.contains("/c-")).collect();
    assert!(!outputs.is_empty(), "the output stays: {after:?}");
    assert!(
        before.0.iter().all(|k| after.contains(k)),
        "no input deleted"
    );
    assert_eq!(view(&lake).await, before.1, "readers see the same rows");
    let (code, stderr) = cli(&select, &server.env());
    assert_eq!(code, 0, "{stderr}");
    assert_compacted(&lake, partition, &before.1).await;
}

#[test]
fn s3_configuration_errors_are_exit_2() {
    let server = S3Server::start();
    server.create_bucket(BUCKET);
    let (code, stderr) = cli(&["--lake", "s3://no-such-bucket/x"], &server.env());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("NoSuchBucket"), "{stderr}");

    let (code, stderr) = cli(&["--lake", &format!("s3://{BUCKET}/x")], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "s3://{BUCKET}/x: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not set"
        )),
        "the lake's prefix named (rev-s55-blackbox F9): {stderr}"
    );

    // A prefix the client escapes in keys listed nothing: "nothing to do",
    // exit 0. Refused by its character.
    let (code, stderr) = cli(&["--lake", &format!("s3://{BUCKET}/a%b")], &server.env());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the prefix holds '%'"), "{stderr}");

    let mut env = server.env();
    env[0].1 = format!("http://127.0.0.1:{}", s3_server::free_port());
    let started = std::time::Instant::now();
    let (code, stderr) = cli(&["--lake", &format!("s3://{BUCKET}/x")], &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    assert!(stderr.contains("list events failed"), "{stderr}");
    // The innermost cause is named, not only "error sending request".
    assert!(stderr.contains("(cause: "), "{stderr}");

    // An https URL for the plain-http server: rustls' reason is named.
    let mut env = server.env();
    env[0].1 = env[0].1.replacen("http://", "https://", 1);
    let (code, stderr) = cli(&["--lake", &format!("s3://{BUCKET}/x")], &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("received corrupt message"), "{stderr}");

    // A plain-http endpoint without AWS_ALLOW_HTTP: refused before any
    // request, as reconcile refuses it (one S3 configuration, ledger-s3).
    let no_http: Vec<_> = server
        .env()
        .into_iter()
        .filter(|(k, _)| k != "AWS_ALLOW_HTTP")
        .collect();
    let (code, stderr) = cli(&["--lake", &format!("s3://{BUCKET}/x")], &no_http);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("is plain http, which is refused"),
        "{stderr}"
    );
}

/// rev-s55-diff L2: a partition with a newer writer's file, whose other
/// files are read only to look for damage: a store's refusal to read one of
/// them says nothing of the file, so the partition stays the newer writer's
/// (exit 2, upgrade), and the run goes on to the other partitions. (The
/// refusal comes from the proxy: a mock.)
#[tokio::test]
async fn a_store_failure_after_a_newer_writers_file_leaves_it_the_partitions_error() {
    use object_store::{path::Path as ObjectPath, ObjectStoreExt, PutPayload};
    let (server, lake) = small_file_lake_on_s3().await;
    let mut in_partition: Vec<String> = keys(&lake)
        .await
        .into_iter()
        .filter(|k| k.starts_with("events/transfer/"))
        .collect();
    let dir_of = |k: &str| k.rsplit_once('/').unwrap().0.to_owned();
    let partition = dir_of(&in_partition[0]);
    in_partition.retain(|k| dir_of(k) == partition);
    assert!(in_partition.len() >= 2, "{in_partition:?}");
    let (first, last) = (
        in_partition[0].clone(),
        in_partition.last().unwrap().clone(),
    );
    // The first file of the partition as a newer writer wrote it.
    let local = tempfile::tempdir().unwrap();
    let bytes = lake
        .store
        .get(&ObjectPath::from(first.as_str()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let path = local.path().join(&first);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    layout::rewrite_in_layout(local.path(), &first, "lake-v9");
    lake.store
        .put(
            &ObjectPath::from(first.as_str()),
            PutPayload::from(std::fs::read(&path).unwrap()),
        )
        .await
        .unwrap();
    // Every read of the partition's last file refused.
    let name = last.rsplit_once('/').unwrap().1.to_owned();
    let proxy = FaultyProxy::start(
        server.port,
        Box::new(move |method, path, _| {
            (method == "GET" && path.contains(&name)).then_some(Fault::Status(403))
        }),
    );
    let url = format!("s3://{BUCKET}/{PREFIX}");
    let (code, stderr) = cli(&["--lake", &url], &proxy.env(&server));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("1 left untouched because a newer writer wrote a file there")
            && stderr.contains("upgrade ledger-compact")
            && !stderr.contains("damaged file"),
        "{stderr}"
    );
    let after = keys(&lake).await;
    assert!(
        in_partition.iter().all(|k| after.contains(k)),
        "the partition is left as it was: {after:?}"
    );
    assert!(
        after
            .iter()
            .any(|k| k.starts_with("events/account/") && k.contains("/c-")),
        "the run went on to the other partitions: {after:?}"
    );
}
