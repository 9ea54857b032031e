//! The run's outputs beyond the JSON report, end to end through the
//! `reconcile` binary on generated and corrupted lakes, each checked by an
//! independent reader or a real HTTP server:
//!
//! - `--violations` CSV read back by Python's `csv` module and Parquet by
//!   DuckDB (`scripts/install-lake-readers.sh`), row for row the report's;
//! - `--metrics` parsed by `prometheus_client` (`scripts/install-metrics-reader.sh`),
//!   value for value the JSON report of the same run;
//! - `--alert-webhook` against a local HTTP server: new violations only,
//!   state advanced only after delivery, retries then exit 2 on a 500;
//! - `--sweep-url` against a local HTTP server: chunks of 10, at most `--sweep-max`, the admin key
//!   from the environment, exit 2 with the status and body on a refusal;
//! - `.parquet` objects under events/ not named as lake files: listed in the
//!   report, counted in the metrics and named in the summary, full runs and
//!   resumed ones alike, the exit code the lake files' verdict.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{config, run_lib, NOW_MS};
use ledger_events::{Event, Stream, GENESIS_HASH};
use ledger_reconcile::corrupt::{copy_lake, inject, Class};
use ledger_reconcile::gen::{generate_lake, GEN_TENANT};
use ledger_reconcile::Report;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn clean_lake(dir: &Path) {
    generate_lake(&config(), dir).unwrap();
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `reconcile` with `args`, `--now-ms`, a clean environment for the
/// variables it reads, and `env` on top.
fn run_bin(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reconcile"));
    cmd.args(args).args(["--now-ms", &NOW_MS.to_string()]);
    for v in [
        "LEDGER_LAKE",
        "LEDGER_ALERT_WEBHOOK",
        "LEDGER_ALERT_STATE",
        "LEDGER_ADMIN_KEY",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The report's findings as the rows `--violations` must hold, as JSON
/// values in column order.
fn expected_rows(r: &Report) -> Vec<Vec<serde_json::Value>> {
    use serde_json::json;
    r.checks
        .iter()
        .flat_map(|c| {
            c.findings.iter().map(move |f| {
                vec![
                    json!(c.name),
                    json!(c.invariant),
                    json!(f.code),
                    json!(f.key),
                    json!(f.seq),
                    json!(f.event_id),
                    json!(f.detail),
                    json!(r.lake),
                    json!(r.now_ms),
                ]
            })
        })
        .collect()
}

/// What Python's csv module and DuckDB read from the two files.
fn read_back(csv: &Path, parquet: &Path) -> serde_json::Value {
    let install = Command::new("bash")
        .arg(repo().join("scripts/install-lake-readers.sh"))
        .status()
        .expect("run scripts/install-lake-readers.sh");
    assert!(install.success(), "installing duckdb failed: see above");
    let script = r#"
import csv, json, sys, duckdb
with open(sys.argv[1], newline="", encoding="utf-8") as f:
    rows = list(csv.reader(f, strict=True))
con = duckdb.connect()
cur = con.execute("select * from read_parquet(?)", [sys.argv[2]])
cols = [d[0] for d in cur.description]
pq = [list(r) for r in cur.fetchall()]
types = [[r[0], r[1], r[2]] for r in con.execute("describe select * from read_parquet(?)", [sys.argv[2]]).fetchall()]
print(json.dumps({"csv": rows, "columns": cols, "parquet": pq, "types": types}))
"#;
    let out = Command::new(python())
        .args(["-c", script, s(csv), s(parquet)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python could not read the files: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const COLUMNS: [&str; 9] = [
    "check",
    "invariant",
    "code",
    "key",
    "seq",
    "event_id",
    "detail",
    "lake",
    "now_ms",
];

/// A lake with several classes injected, in a directory whose name needs
/// quoting in CSV and escaping in a Prometheus label.
fn corrupted_lake(tmp: &Path, classes: &[Class]) -> PathBuf {
    let clean = tmp.join("clean");
    if !clean.exists() {
        clean_lake(&clean);
    }
    let dir = tmp.join("bad, \"quoted\" \\ lake");
    copy_lake(&clean, &dir).unwrap();
    for &c in classes {
        inject(&dir, c, NOW_MS).unwrap();
    }
    dir
}

#[test]
fn violation_rows_as_csv_and_parquet_equal_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    // Conflict details list hashes with ", "; tamper adds rows without a seq
    // (`not_conserved` is about a currency).
    let dir = corrupted_lake(
        tmp.path(),
        &[Class::Conflict, Class::Dangling, Class::Tamper],
    );
    let report = run_lib(&dir).unwrap();
    let want = expected_rows(&report);
    assert!(want.len() >= 5, "{}", report.summary());
    assert!(want.iter().any(|r| r[4].is_null()), "a row without seq");
    assert!(want.iter().any(|r| r[6].as_str().unwrap().contains(',')));

    let csv = tmp.path().join("v.csv");
    let pq = tmp.path().join("v.parquet");
    let a = run_bin(&[s(&dir), "--quiet", "--violations", s(&csv)], &[]);
    assert_eq!(a.code, 1, "{}\n{}", a.stdout, a.stderr);
    let b = run_bin(&[s(&dir), "--quiet", "--violations", s(&pq)], &[]);
    assert_eq!(b.code, 1, "{}\n{}", b.stdout, b.stderr);
    assert!(b.stderr.is_empty(), "{}", b.stderr);
    let seen = read_back(&csv, &pq);

    // CSV: the header, then every row; nulls are empty fields; a text value
    // a spreadsheet would run as a formula (or one starting with `'`) has one
    // `'` in front.
    let csv_rows = seen["csv"].as_array().unwrap();
    assert_eq!(csv_rows[0], serde_json::json!(COLUMNS));
    let as_csv = |v: &serde_json::Value| match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s)
            if s.trim_start_matches([' ', '\t', '\r', '\n'])
                .starts_with(['=', '+', '-', '@', '＝', '＋', '－', '＠'])
                || s.starts_with(['\t', '\r', '\'']) =>
        {
            format!("'{s}")
        }
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let want_csv: Vec<Vec<String>> = want
        .iter()
        .map(|r| r.iter().map(as_csv).collect())
        .collect();
    let got_csv: Vec<Vec<String>> =
        serde_json::from_value(serde_json::Value::Array(csv_rows[1..].to_vec())).unwrap();
    assert_eq!(got_csv, want_csv);

    // Parquet through DuckDB: the same rows with types (null seq is NULL).
    assert_eq!(seen["columns"], serde_json::json!(COLUMNS));
    assert_eq!(seen["parquet"], serde_json::json!(want));
    let types: Vec<(String, String, String)> =
        serde_json::from_value(seen["types"].clone()).unwrap();
    let ty: BTreeMap<&str, (&str, &str)> = types
        .iter()
        .map(|(n, t, null)| (n.as_str(), (t.as_str(), null.as_str())))
        .collect();
    assert_eq!(ty["seq"].0, "UBIGINT");
    assert_eq!(ty["now_ms"].0, "BIGINT");
    assert_eq!(ty["detail"].0, "VARCHAR");

    // A clean lake: the header / the schema and zero rows.
    let clean_csv = tmp.path().join("clean.csv");
    let clean_pq = tmp.path().join("clean.parquet");
    let clean = tmp.path().join("clean");
    for f in [&clean_csv, &clean_pq] {
        let r = run_bin(&[s(&clean), "--quiet", "--violations", s(f)], &[]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    }
    let seen = read_back(&clean_csv, &clean_pq);
    assert_eq!(seen["csv"], serde_json::json!([COLUMNS]));
    assert_eq!(seen["columns"], serde_json::json!(COLUMNS));
    assert_eq!(seen["parquet"], serde_json::json!([]));

    // Another extension: exit 2 before the run, naming the accepted ones.
    let r = run_bin(
        &[s(&clean), "--violations", s(&tmp.path().join("v.json"))],
        &[],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("`.json`")
            && r.stderr.contains("*.csv")
            && r.stderr.contains("*.parquet"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "no run on a usage error: {}", r.stdout);
}

#[test]
fn an_output_path_that_cannot_be_placed_is_exit_2_before_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    clean_lake(&clean);
    let missing = tmp.path().join("no-such-dir").join("out");
    for flag in [
        "--json",
        "--dangling",
        "--checkpoint",
        "--violations",
        "--metrics",
    ] {
        // The violations file must name its format to get past the usage check.
        let file = if flag == "--violations" {
            missing.with_extension("csv")
        } else {
            missing.clone()
        };
        let r = run_bin(&[s(&clean), flag, s(&file)], &[]);
        assert_eq!(r.code, 2, "{flag}: {}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(flag)
                && r.stderr.contains("no-such-dir")
                && r.stderr.contains("does not exist"),
            "{flag}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "{flag}: no run: {}", r.stdout);
        assert!(
            !r.stderr.contains("rows to read"),
            "{flag}: the lake was read: {}",
            r.stderr
        );
    }
    // A directory where a file is meant.
    let r = run_bin(&[s(&clean), "--json", s(tmp.path())], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("is a directory"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "no run: {}", r.stdout);
    // A bare file name is in the working directory, which exists.
    // Runs reconcile NOW_MS in the temporary directory with `args` and `more`.
    let in_dir = |args: &[&str], more: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_reconcile"))
            .current_dir(tmp.path())
            .args(args)
            .args(more)
            .args(["--now-ms", &NOW_MS.to_string()])
            .env_remove("LEDGER_LAKE")
            .output()
            .unwrap()
    };
    let r = in_dir(&[s(&clean), "--quiet", "--json", "report.json"], &[]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(tmp.path().join("report.json").is_file());
    // Two outputs on one file (here as `x` and `./x`), or one inside the
    // lake: exit 2 before the run, nothing written.
    let r = in_dir(
        &[
            s(&clean),
            "--quiet",
            "--checkpoint",
            "ck",
            "--metrics",
            "./ck",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--metrics and --checkpoint name the same file"),
        "{err}"
    );
    assert!(r.stdout.is_empty() && !tmp.path().join("ck").exists());
    // Nor on a file of the checkpoint's (rev-s48-outputs M2): its lock,
    // its temporary file, a file of its state.
    for (flag, name) in [
        ("--json", "ck.lock"),
        ("--metrics", "ck.0123456789abcdef.seg"),
        ("--alert-state", "ck.tmp"),
    ] {
        let alert: &[&str] = if flag == "--alert-state" {
            &["--alert-webhook", "http://127.0.0.1:9/"]
        } else {
            &[]
        };
        let r = in_dir(
            &[s(&clean), "--quiet", "--checkpoint", "ck", flag, name],
            alert,
        );
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{flag} {name}: {err}");
        assert!(err.contains("is a file of the checkpoint"), "{err}");
        assert!(r.stdout.is_empty() && !tmp.path().join("ck").exists());
    }
    // A name that only starts like the checkpoint's is not one of its files
    // (rev-s48-diff M1): `ck.json` beside `ck`.
    let r = in_dir(
        &[
            s(&clean),
            "--quiet",
            "--checkpoint",
            "ck",
            "--json",
            "ck.json",
        ],
        &[],
    );
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(tmp.path().join("ck.json").is_file() && tmp.path().join("ck").is_file());
    let lake_file = common::files_under(&clean, "events").remove(0);
    let before = std::fs::read(clean.join(&lake_file)).unwrap();
    let r = run_bin(
        &[s(&clean), "--violations", s(&clean.join(&lake_file))],
        &[],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("--violations") && r.stderr.contains("is inside the lake"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(clean.join(&lake_file)).unwrap(), before);
}

/// Runs `reconcile ARGS --now-ms NOW_MS` with stdout and stderr piped,
/// `close` dropping one of them (a reader gone) before it is waited for.
fn run_closing(
    args: &[&str],
    close: impl FnOnce(&mut std::process::Child),
) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reconcile"))
        .args(args)
        .args(["--now-ms", &NOW_MS.to_string()])
        .env_remove("LEDGER_LAKE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    close(&mut child);
    child.wait_with_output().unwrap()
}

/// stdout closed by its reader (`reconcile … | head -0`): the summary
/// cannot be written, which is exit 2, and every other output still is.
#[test]
fn a_closed_stdout_is_exit_2_and_the_other_outputs_are_still_written() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    clean_lake(&clean);
    let (json, ck) = (tmp.path().join("r.json"), tmp.path().join("ck"));
    let args = [
        s(&clean),
        "--quiet",
        "--json",
        s(&json),
        "--checkpoint",
        s(&ck),
    ];
    let out = run_closing(&args, |c| drop(c.stdout.take()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot write the summary to stdout") && !err.contains("panicked"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["holds"], true);
    assert!(ck.is_file());
}

/// stdout closed before the run starts (`reconcile … >&-`, a wrapper that
/// closes it): the runtime puts `/dev/null` there, so without a look before
/// it the summary vanished and the exit was the verdict's (rev-s55-blackbox
/// F7). Now exit 2 with the reason, the other outputs written; stdout sent
/// to `/dev/null` on purpose stays a good night.
#[test]
fn a_stdout_closed_at_start_is_exit_2_and_dev_null_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    clean_lake(&clean);
    let (json, metrics) = (tmp.path().join("r.json"), tmp.path().join("m.prom"));
    let now = NOW_MS.to_string();
    let args = [
        s(&clean),
        "--quiet",
        "--now-ms",
        &now,
        "--json",
        s(&json),
        "--metrics",
        s(&metrics),
    ];
    // Closed, or open for reading only (a write to it fails with EBADF,
    // which Rust's stdout takes as written).
    for redirect in [">&-", "1</dev/null"] {
        std::fs::remove_file(&json).ok();
        let closed = Command::new("sh")
            .arg("-c")
            .arg(format!(r#"exec "$0" "$@" {redirect}"#))
            .arg(env!("CARGO_BIN_EXE_reconcile"))
            .args(args)
            .env_remove("LEDGER_LAKE")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&closed.stderr);
        assert_eq!(closed.status.code(), Some(2), "{redirect}: {err}");
        assert!(
            err.contains(
                "cannot write the summary to stdout: stdout was closed, or not open for \
                 writing, when the run started"
            ),
            "{redirect}: {err}"
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["holds"], true);
        let prom = std::fs::read_to_string(&metrics).unwrap();
        assert!(prom.contains("\nreconcile_outputs_failed 1\n"), "{prom}");
    }

    let discarded = Command::new(env!("CARGO_BIN_EXE_reconcile"))
        .args(args)
        .env_remove("LEDGER_LAKE")
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&discarded.stderr);
    assert_eq!(discarded.status.code(), Some(0), "{err}");
    let prom = std::fs::read_to_string(&metrics).unwrap();
    assert!(prom.contains("\nreconcile_outputs_failed 0\n"), "{prom}");
}

/// stderr closed by its reader (`reconcile … 2>&1 | head -1`, a log pipe
/// restarted): the progress lines and warnings go nowhere, and the run
/// still proves the lake, writes its outputs and exits with its verdict
/// (writing to a closed stderr once panicked: exit 101, nothing written).
#[test]
fn a_closed_stderr_changes_nothing_but_the_progress_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let json = tmp.path().join("r.json");
    let out = run_closing(&[s(&dir), "--json", s(&json)], |c| drop(c.stderr.take()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("verdict: VIOLATED"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["holds"], false);
}

/// The samples of a metrics file as the `prometheus_client` parser reads
/// it (installed by scripts/install-metrics-reader.sh): family, type,
/// help, name, labels and value of each; fails the test if it refuses the
/// file.
fn prom_samples(prom: &Path) -> Vec<serde_json::Value> {
    let install = Command::new("bash")
        .arg(repo().join("scripts/install-metrics-reader.sh"))
        .status()
        .expect("run scripts/install-metrics-reader.sh");
    assert!(install.success(), "installing prometheus_client failed");
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(open(sys.argv[1], encoding="utf-8").read()):
    for s in fam.samples:
        out.append({"family": fam.name, "type": fam.type, "help": fam.documentation,
                    "name": s.name, "labels": s.labels, "value": s.value})
print(json.dumps(out))
"#;
    let out = Command::new(python())
        .args(["-c", script, s(prom)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused the file: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(prom).unwrap()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn metrics_parse_with_prometheus_client_and_equal_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft, Class::Dangling]);
    let metrics_dir = tmp.path().join("textfile");
    std::fs::create_dir(&metrics_dir).unwrap();
    let prom = metrics_dir.join("reconcile.prom");
    let json = tmp.path().join("report.json");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let r = run_bin(
        &[
            s(&dir),
            "--quiet",
            "--metrics",
            s(&prom),
            "--json",
            s(&json),
        ],
        &[],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    // Atomic: only the file itself is left in the directory.
    let names: Vec<String> = std::fs::read_dir(&metrics_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["reconcile.prom".to_owned()]);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();

    let samples = prom_samples(&prom);
    for smp in &samples {
        assert_eq!(smp["type"], "gauge", "{smp}");
        assert!(!smp["help"].as_str().unwrap().is_empty(), "{smp}");
    }
    let one = |name: &str| -> f64 {
        let v: Vec<f64> = samples
            .iter()
            .filter(|x| x["name"] == name)
            .map(|x| x["value"].as_f64().unwrap())
            .collect();
        assert_eq!(v.len(), 1, "{name}: {samples:?}");
        v[0]
    };
    let n = |v: &serde_json::Value| v.as_f64().unwrap();
    assert_eq!(one("reconcile_verdict_holds"), 0.0);
    assert_eq!(one("reconcile_rows_read"), n(&report["stats"]["rows_read"]));
    assert_eq!(
        one("reconcile_plain_duplicates"),
        n(&report["stats"]["plain_duplicates"])
    );
    assert_eq!(
        one("reconcile_distinct_events"),
        n(&report["stats"]["distinct_rows"])
    );
    assert_eq!(one("reconcile_streams"), n(&report["stats"]["streams"]));
    assert_eq!(one("reconcile_files"), n(&report["files"]));
    assert_eq!(one("reconcile_accounts"), n(&report["accounts"]));
    assert_eq!(one("reconcile_transfers"), n(&report["transfers"]));
    // A full run: not resumed, nothing skipped, reopened, copied or pulled.
    for (name, _) in ledger_reconcile::output::metrics::INCREMENTAL {
        assert_eq!(one(name), 0.0, "{name}");
    }
    assert_eq!(one("reconcile_dangling_transfers"), 1.0);
    assert_eq!(
        one("reconcile_dangling_transfers"),
        report["dangling"].as_array().unwrap().len() as f64
    );
    // The run's time: the report's stops at the verdict, the metrics' at
    // their own write, after the other outputs (rev-s60-scale 5).
    let (run, verdict) = (
        one("reconcile_duration_seconds"),
        n(&report["elapsed_ms"]) / 1000.0,
    );
    assert!(run >= verdict && run < verdict + 60.0, "{run} {verdict}");
    assert_eq!(
        one("reconcile_judged_at_timestamp_seconds"),
        NOW_MS as f64 / 1000.0
    );
    let last = one("reconcile_last_run_timestamp_seconds");
    assert!(
        last >= before.floor() && last < before + 600.0,
        "{last} vs {before}"
    );
    assert_eq!(one("reconcile_run_failed"), 0.0);
    assert_eq!(one("reconcile_last_attempt_timestamp_seconds"), last);
    // The lake label survives its quote, backslash and comma.
    let info: Vec<&serde_json::Value> = samples
        .iter()
        .filter(|x| x["name"] == "reconcile_run_info")
        .collect();
    assert_eq!(info.len(), 1);
    assert_eq!(info[0]["labels"]["lake"], s(&dir));
    assert!(s(&dir).contains('"') && s(&dir).contains('\\'));

    // Per check: holds and violations, labelled by check and invariant.
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 9);
    let mut violated = 0;
    for c in checks {
        let pick = |name: &str| -> f64 {
            let v: Vec<f64> = samples
                .iter()
                .filter(|x| {
                    x["name"] == name
                        && x["labels"]["check"] == c["name"]
                        && x["labels"]["invariant"] == c["invariant"]
                })
                .map(|x| x["value"].as_f64().unwrap())
                .collect();
            assert_eq!(v.len(), 1, "{name} {c}");
            v[0]
        };
        let holds = c["holds"].as_bool().unwrap();
        assert_eq!(pick("reconcile_check_holds"), if holds { 1.0 } else { 0.0 });
        assert_eq!(pick("reconcile_check_violations"), n(&c["violations"]));
        let pending = c["pending"].as_array().unwrap().len();
        assert_eq!(pick("reconcile_check_pending"), pending as f64);
        violated += usize::from(!holds);
    }
    assert!(violated >= 2, "overdraft and dangling: {report}");
}

/// rev-s52-contracts M2: a run that stops before its verdict wrote no
/// metrics, so nothing said the night failed. Now `reconcile_run_failed 1`
/// and the attempt's time say it, beside the last verdict's metrics, kept
/// (rev-s52-diff M3: a violated verdict's alert keeps firing), across failed
/// nights; a file of another lake, or none, keeps nothing.
#[test]
fn a_run_that_stops_before_its_verdict_says_so_in_the_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let prom = tmp.path().join("reconcile.prom");
    let r = run_bin(&[s(&dir), "--quiet", "--metrics", s(&prom)], &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let value = |samples: &[serde_json::Value], name: &str| -> Option<f64> {
        let v: Vec<f64> = samples
            .iter()
            .filter(|x| x["name"] == name)
            .map(|x| x["value"].as_f64().unwrap())
            .collect();
        assert!(v.len() <= 1, "{name}: {samples:?}");
        v.first().copied()
    };
    let good = prom_samples(&prom);
    let verdict_at = value(&good, "reconcile_last_run_timestamp_seconds").unwrap();
    assert_eq!(value(&good, "reconcile_verdict_holds"), Some(1.0));

    // A damaged file: exit 2 before any verdict, twice.
    let file = common::files_under(&dir, "events/account").swap_remove(0);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(&file))
        .unwrap();
    f.set_len(100).unwrap();
    for night in 0..2 {
        std::thread::sleep(Duration::from_millis(20));
        let r = run_bin(&[s(&dir), "--quiet", "--metrics", s(&prom)], &[]);
        assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
        let failed = prom_samples(&prom);
        assert_eq!(
            value(&failed, "reconcile_run_failed"),
            Some(1.0),
            "night {night}"
        );
        // The last verdict's, kept.
        assert_eq!(value(&failed, "reconcile_verdict_holds"), Some(1.0));
        assert_eq!(
            value(&failed, "reconcile_rows_read"),
            value(&good, "reconcile_rows_read")
        );
        assert_eq!(
            value(&failed, "reconcile_last_run_timestamp_seconds"),
            Some(verdict_at),
            "the last verdict's time is kept"
        );
        assert!(value(&failed, "reconcile_last_attempt_timestamp_seconds").unwrap() > verdict_at);
        let info: Vec<&serde_json::Value> = failed
            .iter()
            .filter(|x| x["name"] == "reconcile_run_info")
            .collect();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0]["labels"]["lake"], s(&dir));
    }
    // The same lake spelled otherwise (rev-s55-blackbox F4): kept too.
    let slashed = format!("{}/", s(&dir));
    let r = run_bin(&[&slashed, "--quiet", "--metrics", s(&prom)], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let failed = prom_samples(&prom);
    assert_eq!(value(&failed, "reconcile_verdict_holds"), Some(1.0));
    assert_eq!(
        value(&failed, "reconcile_last_run_timestamp_seconds"),
        Some(verdict_at)
    );
    // And the night the directory is gone (rev-s55-diff2 L5): spelled
    // otherwise still, the last verdict stays.
    let gone = tmp.path().join("lake-gone");
    std::fs::rename(&dir, &gone).unwrap();
    let dotted = format!("{}/./", s(&dir));
    let r = run_bin(&[&dotted, "--quiet", "--metrics", s(&prom)], &[]);
    std::fs::rename(&gone, &dir).unwrap();
    assert_eq!(r.code, 2, "{}", r.stderr);
    let failed = prom_samples(&prom);
    assert_eq!(value(&failed, "reconcile_verdict_holds"), Some(1.0));
    // Without an earlier file of this lake (another lake's here): only
    // that the run failed, nothing of the other lake's.
    let other = tmp.path().join("other");
    clean_lake(&other);
    let other_prom = tmp.path().join("other.prom");
    let r = run_bin(&[s(&other), "--quiet", "--metrics", s(&other_prom)], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::copy(&other_prom, &prom).unwrap();
    let r = run_bin(&[s(&dir), "--quiet", "--metrics", s(&prom)], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let failed = prom_samples(&prom);
    assert_eq!(value(&failed, "reconcile_run_failed"), Some(1.0));
    for gone in [
        "reconcile_verdict_holds",
        "reconcile_check_holds",
        "reconcile_last_run_timestamp_seconds",
        "reconcile_rows_read",
    ] {
        assert_eq!(value(&failed, gone), None, "{gone}: {failed:?}");
    }
}

// ---- a real HTTP server on 127.0.0.1 ----

#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: String,
    /// When the request was read.
    at: Instant,
}

type Respond = dyn Fn(&Req) -> (u16, String) + Send + Sync;
/// Writes the whole answer itself (headers, a body of its own size, a
/// pause).
type RespondRaw = dyn Fn(&Req, &mut TcpStream) + Send + Sync;

#[derive(Clone)]
enum Handler {
    Reply(Arc<Respond>),
    Raw(Arc<RespondRaw>),
}

/// An HTTP/1.1 server on an ephemeral loopback port, one request per
/// connection, recording every request (before it answers: a client that
/// gave up on a slow answer has still sent it) and answering with
/// `respond`.
struct Server {
    base: String,
    requests: Arc<Mutex<Vec<Req>>>,
    respond: Arc<Mutex<Handler>>,
}

impl Server {
    fn start(respond: impl Fn(&Req) -> (u16, String) + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<Req>>> = Arc::default();
        let respond = Arc::new(Mutex::new(Handler::Reply(Arc::new(respond))));
        let (reqs, resp) = (requests.clone(), respond.clone());
        let base_url = base.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or_default().to_owned();
                let path = parts.next().unwrap_or_default().to_owned();
                let mut headers = BTreeMap::new();
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    let h = h.trim_end();
                    if h.is_empty() {
                        break;
                    }
                    let (k, v) = h.split_once(':').unwrap();
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                }
                let len: usize = headers
                    .get("content-length")
                    .map_or(0, |l| l.parse().unwrap());
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                let req = Req {
                    method,
                    path,
                    headers,
                    body: String::from_utf8(body).unwrap(),
                    at: Instant::now(),
                };
                reqs.lock().unwrap().push(req.clone());
                let f = match resp.lock().unwrap().clone() {
                    Handler::Reply(f) => f,
                    Handler::Raw(f) => {
                        f(&req, &mut conn);
                        continue;
                    }
                };
                let (status, text) = f(&req);
                // A redirect names the server's /moved.
                let location = if (300..400).contains(&status) {
                    format!("location: {base_url}/moved\r\n")
                } else {
                    String::new()
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{location}content-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        Server {
            base,
            requests,
            respond,
        }
    }

    fn set(&self, respond: impl Fn(&Req) -> (u16, String) + Send + Sync + 'static) {
        *self.respond.lock().unwrap() = Handler::Reply(Arc::new(respond));
    }

    fn set_raw(&self, respond: impl Fn(&Req, &mut TcpStream) + Send + Sync + 'static) {
        *self.respond.lock().unwrap() = Handler::Raw(Arc::new(respond));
    }

    fn take(&self) -> Vec<Req> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

/// The report's findings as the webhook's identity tuple.
type Id = (String, String, String, Option<u64>, Option<String>);

fn ids(r: &Report) -> BTreeSet<Id> {
    r.checks
        .iter()
        .flat_map(|c| {
            c.findings.iter().map(|f| {
                (
                    c.name.to_owned(),
                    f.code.to_owned(),
                    f.key.clone(),
                    f.seq,
                    f.event_id.clone(),
                )
            })
        })
        .collect()
}

fn body_ids(body: &serde_json::Value) -> BTreeSet<Id> {
    body["new_violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["check"].as_str().unwrap().to_owned(),
                v["code"].as_str().unwrap().to_owned(),
                v["key"].as_str().unwrap().to_owned(),
                v["seq"].as_u64(),
                v["event_id"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn the_alert_webhook_posts_only_new_violations_and_advances_after_delivery() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(|_| (204, String::new()));
    let hook = format!("{}/hooks/reconcile?token=s3cret", server.base);
    let state = tmp.path().join("alert-state.json");
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let alert = |extra_env: &[(&str, &str)]| {
        run_bin(
            &[
                s(&dir),
                "--alert-webhook",
                &hook,
                "--alert-state",
                s(&state),
            ],
            extra_env,
        )
    };

    // First run: every violation is new.
    let first = run_lib(&dir).unwrap();
    let r = alert(&[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("verdict: VIOLATED"), "{}", r.stdout);
    let reqs = server.take();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/hooks/reconcile?token=s3cret");
    assert_eq!(reqs[0].headers["content-type"], "application/json");
    let body: serde_json::Value = serde_json::from_str(&reqs[0].body).unwrap();
    assert_eq!(body["version"], 1);
    assert_eq!(body["lake"], s(&dir));
    assert_eq!(body["verdict"], "violated");
    assert_eq!(body["now_ms"], NOW_MS);
    assert_eq!(body_ids(&body), ids(&first));
    let total = ids(&first).len();
    assert_eq!(body["counts"]["new"], total);
    assert_eq!(body["counts"]["violations"], total);
    assert_eq!(body["counts"]["known"], 0);
    assert_eq!(body["counts"]["resolved"], 0);
    assert_eq!(body["new_violations_omitted"], 0);
    assert!(body["new_violations"][0]["detail"].as_str().is_some());
    assert_eq!(body["checks"].as_array().unwrap().len(), 9);
    assert!(r.stderr.contains("alert: sent"), "{}", r.stderr);
    assert!(state.exists());

    // Second identical run (the URL from the environment): nothing is posted.
    let r = run_bin(
        &[s(&dir), "--alert-state", s(&state)],
        &[("LEDGER_ALERT_WEBHOOK", hook.as_str())],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 0);
    assert!(r.stderr.contains("nothing new"), "{}", r.stderr);

    // A new violation: posted alone.
    inject(&dir, Class::Dangling, NOW_MS).unwrap();
    let second = run_lib(&dir).unwrap();
    let new: BTreeSet<Id> = ids(&second).difference(&ids(&first)).cloned().collect();
    assert!(!new.is_empty());
    // An ad-hoc replay in the job's environment with --no-alert: nothing
    // posted, the state as it was, so the nightly run still alerts.
    let state_before = std::fs::read(&state).unwrap();
    let r = run_bin(
        &[s(&dir), "--no-alert"],
        &[
            ("LEDGER_ALERT_WEBHOOK", hook.as_str()),
            ("LEDGER_ALERT_STATE", s(&state)),
        ],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 0);
    assert!(r.stderr.contains("alert: off (--no-alert)"), "{}", r.stderr);
    assert_eq!(std::fs::read(&state).unwrap(), state_before);
    // With only the webhook in the environment (rev-s48-cli L5): off too,
    // not a usage error about a flag never typed.
    let r = run_bin(
        &[s(&dir), "--no-alert"],
        &[("LEDGER_ALERT_WEBHOOK", hook.as_str())],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 0);
    let r = alert(&[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&reqs[0].body).unwrap();
    assert_eq!(body_ids(&body), new);
    assert_eq!(body["counts"]["new"], new.len());
    assert_eq!(
        body["counts"]["known"],
        ids(&second).intersection(&ids(&first)).count()
    );

    // The receiver fails: three attempts, exit 2, the state not advanced.
    inject(&dir, Class::Leaked, NOW_MS).unwrap();
    let third = run_lib(&dir).unwrap();
    let newer: BTreeSet<Id> = ids(&third).difference(&ids(&second)).cloned().collect();
    assert!(!newer.is_empty());
    server.set(|_| (500, "{\"error\":\"receiver down\"}".to_owned()));
    let state_before = std::fs::read(&state).unwrap();
    let r = alert(&[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("verdict: VIOLATED"),
        "the summary still prints"
    );
    assert_eq!(server.take().len(), 3, "three attempts");
    assert!(
        r.stderr.contains("HTTP 500")
            && r.stderr.contains("receiver down")
            && r.stderr.contains("not delivered"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("s3cret"),
        "the URL's query is hidden: {}",
        r.stderr
    );
    assert_eq!(std::fs::read(&state).unwrap(), state_before);

    // The webhook redirects (say http to https at a load balancer): not
    // followed, since following would resend the POST as a GET without its
    // body, which the target may answer 2xx. Exit 2, the state not
    // advanced, and the metrics, written last, count the failed output.
    server.set(|r| {
        if r.path.starts_with("/hooks") {
            (302, String::new())
        } else {
            (200, "{}".to_owned())
        }
    });
    let metrics = tmp.path().join("m.prom");
    let r = run_bin(
        &[
            s(&dir),
            "--alert-webhook",
            &hook,
            "--alert-state",
            s(&state),
            "--metrics",
            s(&metrics),
        ],
        &[],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert!(
        reqs.len() == 1 && reqs[0].method == "POST",
        "the redirect is not followed: {reqs:?}"
    );
    assert!(
        r.stderr.contains("HTTP 302")
            && r.stderr.contains("a redirect to")
            && r.stderr.contains("/moved")
            && r.stderr.contains("not delivered"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&state).unwrap(), state_before);
    let text = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        text.lines().any(|l| l == "reconcile_outputs_failed 1"),
        "{text}"
    );

    // The receiver is back: the undelivered violations are sent again.
    server.set(|_| (200, "{}".to_owned()));
    let r = alert(&[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&reqs[0].body).unwrap();
    assert_eq!(body_ids(&body), newer);

    // Everything resolved (the same lake path, now clean): nothing posted,
    // the state emptied; when the violations come back they alert again.
    let bad = tmp.path().join("bad-aside");
    std::fs::rename(&dir, &bad).unwrap();
    copy_lake(&tmp.path().join("clean"), &dir).unwrap();
    let r = alert(&[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(server.take().is_empty());
    assert!(
        r.stderr.contains(&format!(
            "nothing new to send (0 violation(s) already alerted, {} resolved)",
            ids(&third).len()
        )),
        "{}",
        r.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::rename(&bad, &dir).unwrap();
    let r = alert(&[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&reqs[0].body).unwrap();
    assert_eq!(body_ids(&body), ids(&third));

    // One state file per lake: another lake's state is refused, not reused.
    let other = tmp.path().join("clean");
    let r = run_bin(
        &[
            s(&other),
            "--alert-webhook",
            &hook,
            "--alert-state",
            s(&state),
        ],
        &[],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("belongs to the lake"), "{}", r.stderr);
    assert!(server.take().is_empty());

    // A damaged state file: exit 2 before the lake is read.
    let damaged = tmp.path().join("damaged-state.json");
    std::fs::write(&damaged, "not json").unwrap();
    let with_damaged = || {
        run_bin(
            &[
                s(&dir),
                "--alert-webhook",
                &hook,
                "--alert-state",
                s(&damaged),
            ],
            &[],
        )
    };
    let r = with_damaged();
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("is not an alert state"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "no run: {}", r.stdout);
    assert!(server.take().is_empty());
    // Not JSON at all (rev-s55-blackbox F8): the path first, not "delete
    // it"; a state's own fields, damaged: delete it to start over. Both
    // left as they are.
    assert!(
        r.stderr.contains("check the --alert-state path")
            && std::fs::read(&damaged).unwrap() == b"not json",
        "{}",
        r.stderr
    );
    std::fs::write(&damaged, r#"{"version": 1, "fingerprints": 3}"#).unwrap();
    let r = with_damaged();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("Help: delete the file to start over")
            && !r.stderr.contains("check the --alert-state path"),
        "{}",
        r.stderr
    );

    // --alert-webhook without --alert-state is a usage error, and so is the
    // variable without its state, which the error names.
    let r = run_bin(&[s(&dir), "--alert-webhook", &hook], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--alert-state"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "no run: {}", r.stdout);
    let r = run_bin(&[s(&dir)], &[("LEDGER_ALERT_WEBHOOK", hook.as_str())]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("LEDGER_ALERT_WEBHOOK (or --alert-webhook) is set"),
        "{}",
        r.stderr
    );
    let r = run_bin(&[s(&dir), "--alert-state", s(&state)], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--alert-state is set, but not --alert-webhook"),
        "{}",
        r.stderr
    );
    // --alert-timeout with no webhook is a job that meant to alert
    // (rev-s55-blackbox F10); the variable alone is the environment's
    // setting and proves as usual.
    let r = run_bin(&[s(&dir), "--alert-timeout", "5"], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--alert-timeout is given, but no webhook")
            && r.stdout.is_empty(),
        "{}",
        r.stderr
    );
    let r = run_bin(&[s(&dir)], &[("LEDGER_ALERT_TIMEOUT", "5")]);
    assert_eq!(r.code, 1, "the lake's verdict: {}", r.stderr);
    assert!(r.stdout.contains("VIOLATED"), "{}", r.stdout);
    assert!(server.take().is_empty());
}

/// `reconcile DIR --alert-webhook HOOK --alert-state STATE`, and `extra`.
fn alert_run(dir: &Path, hook: &str, state: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec![s(dir), "--alert-webhook", hook, "--alert-state", s(state)];
    args.extend_from_slice(extra);
    run_bin(&args, env)
}

/// The body's `dedup_key` as docs/RECONCILE.md defines it: SHA-256 over
/// the JSON array of the body's `lake` and the array of the new
/// violations' fingerprints, sorted, in hex.
fn documented_dedup_key(body: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    let sorted: BTreeSet<&str> = body["new_violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["fingerprint"].as_str().unwrap())
        .collect();
    let array = serde_json::json!([body["lake_identity"], sorted]).to_string();
    ledger_events::event::hex(&Sha256::digest(array.as_bytes()))
}

/// rev-s51-ops2 F4: a receiver slower than the timeout acts on every
/// attempt. The timeout is `--alert-timeout`; every attempt, and the next
/// run's, carries the same `dedup_key`; the error says the alert may have
/// been delivered, not that the receiver is down.
#[test]
fn a_receiver_slower_than_the_timeout_may_have_the_alert_and_gets_one_dedup_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let state = tmp.path().join("alert-state.json");
    // Answers 200, after 2 s: past a 1 s timeout.
    let server = Server::start(|_| {
        std::thread::sleep(Duration::from_secs(2));
        (200, "{}".to_owned())
    });
    let hook = format!("{}/hook/SECRET", server.base);
    let r = alert_run(&dir, &hook, &state, &["--alert-timeout", "1"], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 3, "three attempts: {reqs:?}");
    let bodies: Vec<serde_json::Value> = reqs
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    let key = bodies[0]["dedup_key"].as_str().unwrap().to_owned();
    assert_eq!(key, documented_dedup_key(&bodies[0]));
    assert!(
        key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{key}"
    );
    assert!(bodies.iter().all(|b| b["dedup_key"] == key.as_str()));
    assert!(
        r.stderr
            .contains("may have been delivered (no answer within 1 s)")
            && r.stderr.contains(&format!("same dedup_key ({key})"))
            && r.stderr.contains("--alert-timeout"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("not delivered") && !r.stderr.contains("receiver is up"),
        "{}",
        r.stderr
    );
    assert!(!state.exists(), "the state is not advanced");
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp-")),
        "the staged state is removed"
    );

    // The next run, the timeout from the environment: the same key, once.
    server.set(|_| (200, "{}".to_owned()));
    let r = alert_run(&dir, &hook, &state, &[], &[("LEDGER_ALERT_TIMEOUT", "30")]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&reqs[0].body).unwrap();
    assert_eq!(body["dedup_key"], key.as_str());
    assert!(state.exists());

    // Out of range: a usage error before the run.
    for bad in ["0", "301", "ten"] {
        let r = alert_run(&dir, &hook, &state, &["--alert-timeout", bad], &[]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "no run: {}", r.stdout);
    }
    assert!(server.take().is_empty());
}

/// rev-s51-late: a gateway's 502 or 504 may hide a receiver that took the
/// request (and a timeout then a refusal needs the refusal mended): neither
/// is told as "not delivered", and the state stays as it was.
#[test]
fn a_gateway_error_or_a_refusal_after_a_timeout_is_told_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let state = tmp.path().join("alert-state.json");
    let server = Server::start(|_| (502, "upstream timed out".to_owned()));
    let hook = format!("{}/hook", server.base);
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 3, "502 is retried");
    assert!(
        r.stderr
            .contains("may have been delivered (attempt 1 was answered HTTP 502, a gateway's")
            && r.stderr.contains("deduplicate on the body's dedup_key")
            && !r.stderr.contains("not delivered"),
        "{}",
        r.stderr
    );
    assert!(!state.exists(), "the state is not advanced");

    // The first attempt out of time, the second refused.
    let calls = Arc::new(Mutex::new(0));
    server.set(move |_| {
        let mut n = calls.lock().unwrap();
        *n += 1;
        if *n == 1 {
            std::thread::sleep(Duration::from_secs(2));
            (200, "{}".to_owned())
        } else {
            (401, "bad token".to_owned())
        }
    });
    let r = alert_run(&dir, &hook, &state, &["--alert-timeout", "1"], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 2, "a 401 is final");
    assert!(
        r.stderr
            .contains("may have been delivered (no answer within 1 s)")
            && r.stderr.contains("the last attempt was refused (HTTP 401)")
            && !r.stderr.contains("more time"),
        "{}",
        r.stderr
    );
    assert!(!state.exists(), "the state is not advanced");
}

/// rev-s53-resources M3: a state that cannot be written does not hold the
/// page back (rev-s51-ops2 F6 had it send nothing): the alert is sent and
/// the run says it was delivered, exit 2, and so does a state that cannot
/// be put in place after a delivered POST. The next run sends it again with
/// the same dedup_key.
#[test]
fn an_alert_state_that_cannot_be_written_still_sends_the_alert_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let server = Server::start(|_| (200, "{}".to_owned()));
    let hook = format!("{}/hook", server.base);
    // A state whose temporary file cannot be created: with `.tmp-PID` its
    // name passes the 255-byte limit of a file name (no permission makes a
    // directory read-only to root, who may run the tests).
    let unwritable = tmp.path().join("s".repeat(250));
    let r = alert_run(&dir, &hook, &unwritable, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let sent = server.take();
    assert_eq!(sent.len(), 1, "the page goes out");
    assert!(
        r.stderr.contains("the alert WAS delivered (HTTP 200")
            && r.stderr.contains("cannot write")
            && r.stderr
                .contains("The next run sends it again, with the same dedup_key"),
        "{}",
        r.stderr
    );
    // The next night, the state still unwritable: the same page, the same
    // key.
    let again = alert_run(&dir, &hook, &unwritable, &[], &[]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    let resent = server.take();
    let key = |r: &[Req]| -> String {
        let body: serde_json::Value = serde_json::from_str(&r[0].body).unwrap();
        body["dedup_key"].as_str().unwrap().to_owned()
    };
    assert_eq!(resent.len(), 1);
    assert_eq!(key(&resent), key(&sent));
    // Refused as well (rev-s53-diff L3): both are said, not the refusal
    // alone, which would leave the state for the next night to find.
    server.set(|_| (401, "{}".to_owned()));
    let refused = alert_run(&dir, &hook, &unwritable, &[], &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert_eq!(server.take().len(), 1);
    assert!(
        refused.stderr.contains("was not delivered")
            // None was ever written (rev-s55-blackbox F8: "unchanged").
            && refused.stderr.contains("No state file is written")
            && refused.stderr.contains("Also, the state cannot be written")
            && refused.stderr.contains("cannot write"),
        "{}",
        refused.stderr
    );

    // Delivered, and then the state cannot be renamed into place (a
    // directory stands there by then).
    let state = tmp.path().join("alert-state.json");
    let blocker = state.clone();
    server.set(move |_| {
        std::fs::create_dir(&blocker).unwrap();
        (200, "{}".to_owned())
    });
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 1);
    assert!(
        r.stderr.contains("the alert WAS delivered (HTTP 200")
            && r.stderr.contains("the state could not be advanced")
            && r.stderr
                .contains("The next run sends it again, with the same dedup_key"),
        "{}",
        r.stderr
    );
}

/// rev-s51-ops2 F7: an answer is read up to a bound, not whole: 64 KiB of
/// an error's or an alert's 2xx, 4 MiB of the sweep's (parsed: past it, an
/// error).
#[test]
fn answers_are_read_up_to_a_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let state = tmp.path().join("alert-state.json");
    let server = Server::start(|_| (400, "x".repeat(1 << 20)));
    let hook = format!("{}/hook", server.base);
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 1);
    assert!(
        r.stderr
            .contains("… (larger than 64 KiB: not read further)"),
        "{}",
        &r.stderr[r.stderr.len().saturating_sub(500)..]
    );

    // A 2xx with 64 MiB: delivered, and the client hangs up after the
    // first 64 KiB (the server's writes of the rest fail).
    let whole = Arc::new(Mutex::new(None));
    let said = whole.clone();
    server.set_raw(move |_, conn| {
        let size = 64 << 20;
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n");
        let chunk = vec![b' '; 1 << 20];
        let sent = conn.write_all(head.as_bytes()).is_ok()
            && (0..64).all(|_| conn.write_all(&chunk).is_ok());
        *said.lock().unwrap() = Some(sent);
    });
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 1);
    assert!(state.exists(), "delivered");
    // The server's last write fails once the run is gone, at the latest.
    let deadline = Instant::now() + Duration::from_secs(10);
    while whole.lock().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(*whole.lock().unwrap(), Some(false), "not read whole");

    // The sweep: an answer past 4 MiB is not parsed (this one would be
    // valid), an error that says so.
    let ids = add_dangling(&dir, 1);
    server.set(|req| {
        let (status, text) = redriven(
            req,
            |_, id| serde_json::json!({"transfer_id": id, "phase": "captured"}),
        );
        (status, text + &" ".repeat(5 << 20))
    });
    let r = run_bin(
        &[s(&dir), "--quiet", "--sweep-url", &server.base],
        &[("LEDGER_ADMIN_KEY", "k")],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 1, "one request for {ids:?}");
    assert!(
        r.stderr
            .contains("the answer is larger than 4 MiB: not read further"),
        "{}",
        r.stderr
    );
}

/// rev-s51-ops2 F8: the receiver's or the edge's text is shown escaped, as
/// the summary shows lake text: it cannot write lines of the job's log.
#[test]
fn a_receivers_answer_cannot_write_lines_of_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let state = tmp.path().join("alert-state.json");
    let forged = "oops\nerror: alert: nothing new to send (forged)\n\u{1b}[2Jreconcile: verdict: every invariant holds";
    let server = Server::start(move |_| (400, forged.to_owned()));
    let hook = format!("{}/hook", server.base);
    let r = alert_run(&dir, &hook, &state, &["--quiet"], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let clean = |stderr: &str| {
        assert!(
            !stderr.contains('\u{1b}')
                && !stderr
                    .lines()
                    .any(|l| l.starts_with("error: alert: nothing new")
                        || l.starts_with("reconcile: verdict")),
            "{stderr}"
        );
        assert!(
            stderr.contains(r"oops\nerror: alert: nothing new to send (forged)\n\u{1b}[2J"),
            "{stderr}"
        );
    };
    clean(&r.stderr);

    // The sweep's answer that is not JSON, alike.
    add_dangling(&dir, 1);
    server.set(move |_| (200, forged.to_owned()));
    let r = run_bin(
        &[s(&dir), "--quiet", "--sweep-url", &server.base],
        &[("LEDGER_ADMIN_KEY", "k")],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("the answer is not JSON"), "{}", r.stderr);
    clean(&r.stderr);
}

/// rev-s51-ops2 F9: a 307 is named as a redirect not followed (not as a
/// POST turned into a GET); a 429's Retry-After sets the retry's wait; a
/// failed TLS handshake says how a certificate is trusted.
#[test]
fn redirects_retry_after_and_tls_failures_are_told_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let state = tmp.path().join("alert-state.json");
    let server = Server::start(|_| (307, String::new()));
    let hook = format!("{}/hook", server.base);
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 1, "not followed");
    assert!(
        r.stderr.contains("HTTP 307")
            && r.stderr.contains("redirects are not followed")
            && r.stderr
                .contains(&format!("a redirect to {}/moved", server.base))
            && !r.stderr.contains("as a GET"),
        "{}",
        r.stderr
    );
    // A relative Location is of the URL asked (rev-s51-late L1).
    server.set_raw(|_, conn| {
        let _ = conn.write_all(
            b"HTTP/1.1 308 Permanent Redirect\r\nlocation: /v2/hooks/SECRET\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
    });
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    server.take();
    assert!(
        r.stderr
            .contains(&format!("a redirect to {}/v2/", server.base))
            && !r.stderr.contains("SECRET")
            && !r.stderr.contains("unparsable"),
        "{}",
        r.stderr
    );

    // 429 with `Retry-After: 2`, then 200: the retry waits the 2 s (the
    // backoff alone is 0.5 s).
    let seen = std::sync::atomic::AtomicUsize::new(0);
    server.set_raw(move |_, conn| {
        let answer: &[u8] = if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
        };
        let _ = conn.write_all(answer);
    });
    let r = alert_run(&dir, &hook, &state, &[], &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let waited = reqs[1].at - reqs[0].at;
    assert!(waited >= Duration::from_millis(1900), "{waited:?}");

    // An https URL for a plain-http port (bytes that are not TLS): the
    // TLS Help, naming the variables that trust a private CA, after one
    // attempt (every attempt fails the same way).
    std::fs::remove_file(&state).unwrap();
    let plain = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = plain.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in plain.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let https = format!("https://127.0.0.1:{port}/hook");
    let r = alert_run(&dir, &https, &state, &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("not delivered")
            && r.stderr.contains("after 1 attempt(s)")
            && r.stderr.contains("SSL_CERT_FILE / SSL_CERT_DIR")
            && !r.stderr.contains("receiver is up"),
        "{}",
        r.stderr
    );
}

/// Adds `n` transfers created and never advanced, deadlines past, so the
/// lake has `n` dangling transfers (most overdue: `sweep-00000`; five
/// digits keep the keys in the lake's order up to 100,000).
fn add_dangling(dir: &Path, n: usize) -> Vec<String> {
    // Source, destination and currency from a real transfer of the lake.
    let rel = common::files_under(dir, "events/transfer").swap_remove(0);
    let rows =
        ledger_ingest::read_file(&rel, std::fs::read(dir.join(&rel)).unwrap().into()).unwrap();
    let model = rows
        .iter()
        .map(|r| &r.event)
        .find(|e| e.kind == "created")
        .unwrap()
        .clone();
    let mut ids = Vec::new();
    let mut new_rows = Vec::new();
    for i in 0..n {
        let t = format!("t.{GEN_TENANT}.sweep-{i:05}");
        let at = model.occurred_at_ms;
        let mut e = Event::new(Stream::Transfer, &t, 1, "created", at, GENESIS_HASH);
        e.currency = model.currency.clone();
        e.amount = Some(100);
        e.transfer_id = Some(t.clone());
        e.source = model.source.clone();
        e.destination = model.destination.clone();
        e.deadline_ms = Some(at + 300_000 + i as i64);
        new_rows.push(ledger_ingest::Row {
            event: e.seal(),
            conflict: false,
        });
        ids.push(t);
    }
    for f in ledger_ingest::build_files(new_rows, ledger_ingest::FileLayer::Ingest).unwrap() {
        ledger_reconcile::gen::write_object(dir, &f.key, &f.bytes).unwrap();
    }
    ids
}

/// The edge's answer to a re-drive request: `entry(i, id)` for each id.
fn redriven(
    req: &Req,
    entry: impl Fn(usize, &serde_json::Value) -> serde_json::Value,
) -> (u16, String) {
    let v: serde_json::Value = serde_json::from_str(&req.body).unwrap();
    let ids = v["transfer_ids"].as_array().unwrap();
    let out: Vec<serde_json::Value> = ids.iter().enumerate().map(|(i, id)| entry(i, id)).collect();
    (200, serde_json::json!({ "redriven": out }).to_string())
}

/// rev-s51-ops2 F5: the metrics are written before the sweep, so a slow
/// or hung edge does not keep the night's verdict from the dashboards, the
/// sweep counted as failed until it is done (rev-s51-late M1: a job stopped
/// in it must not leave metrics of a whole run), and again after it,
/// counting its outcome (they were written only after it: a hung edge held
/// them 5 minutes). A sweep that succeeds leaves no failure counted.
#[test]
fn the_metrics_are_written_before_the_sweep_and_again_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    add_dangling(&dir, 15);
    let prom = tmp.path().join("m.prom");
    // What the metrics said when each re-drive request came.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (at_request, path) = (seen.clone(), prom.clone());
    let server = Server::start(move |_| {
        at_request
            .lock()
            .unwrap()
            .push(std::fs::read_to_string(&path).unwrap_or_default());
        (503, "overloaded".into())
    });
    let r = run_bin(
        &[
            s(&dir),
            "--quiet",
            "--sweep-url",
            &server.base,
            "--metrics",
            s(&prom),
        ],
        &[("LEDGER_ADMIN_KEY", "admin-key-0123456789abcdef")],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|m| m.contains("reconcile_verdict_holds 0")
                && m.contains("reconcile_outputs_failed 1")),
        "{seen:?}"
    );
    let last = std::fs::read_to_string(&prom).unwrap();
    assert!(last.contains("reconcile_outputs_failed 1"), "{last}");
    drop(seen);
    server.set(|req| {
        redriven(
            req,
            |_, id| serde_json::json!({"transfer_id": id, "phase": "captured"}),
        )
    });
    let r = run_bin(
        &[
            s(&dir),
            "--quiet",
            "--sweep-url",
            &server.base,
            "--metrics",
            s(&prom),
        ],
        &[("LEDGER_ADMIN_KEY", "admin-key-0123456789abcdef")],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let last = std::fs::read_to_string(&prom).unwrap();
    assert!(last.contains("reconcile_outputs_failed 0"), "{last}");
}

#[test]
fn the_sweep_posts_dangling_ids_in_chunks_of_10_with_the_admin_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let want = add_dangling(&dir, 150);
    let report = run_lib(&dir).unwrap();
    let listed: Vec<&str> = report
        .dangling
        .iter()
        .map(|d| d.transfer_id.as_str())
        .collect();
    assert_eq!(listed, want, "most overdue first");

    // The edge: even ids re-driven to captured, odd ones unknown (phase null).
    let server = Server::start(|req| {
        let v: serde_json::Value = serde_json::from_str(&req.body).unwrap();
        let out: Vec<serde_json::Value> = v["transfer_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| {
                let i: usize = id
                    .as_str()
                    .unwrap()
                    .rsplit('-')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let phase = if i.is_multiple_of(2) {
                    Some("captured")
                } else {
                    None
                };
                serde_json::json!({"transfer_id": id, "phase": phase})
            })
            .collect();
        (200, serde_json::json!({ "redriven": out }).to_string())
    });
    let key = "admin-key-0123456789abcdef";
    let base = format!("{}/", server.base); // a trailing slash is fine
    let r = run_bin(
        &[s(&dir), "--sweep-url", &base],
        &[("LEDGER_ADMIN_KEY", key)],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let reqs = server.take();
    assert_eq!(reqs.len(), 15, "150 ids: 15 requests of 10");
    let mut sent = Vec::new();
    for (req, size) in reqs.iter().zip([10; 15]) {
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/v1/admin/transfers/redrive");
        assert_eq!(req.headers["authorization"], format!("Bearer {key}"));
        assert_eq!(req.headers["content-type"], "application/json");
        let v: serde_json::Value = serde_json::from_str(&req.body).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 1, "only transfer_ids: {v}");
        let chunk: Vec<String> = serde_json::from_value(v["transfer_ids"].clone()).unwrap();
        assert_eq!(chunk.len(), size);
        // What the edge's own code makes of the request (rev-s52-contracts
        // L5): its admin check, its body limit and its parser.
        let limits = ledger_api::parse::Limits::default();
        ledger_api::auth::ApiKeys::parse(None, Some(key))
            .unwrap()
            .admin(Some(&req.headers["authorization"]))
            .unwrap();
        limits.check_body_len(req.body.len()).unwrap();
        assert_eq!(
            ledger_api::parse::redrive(&req.body, &limits).unwrap(),
            chunk
        );
        sent.extend(chunk);
    }
    assert_eq!(sent, want, "every id once, most overdue first");
    assert!(
        r.stderr.contains(
            "re-drove 75 of 150 dangling transfer(s) in 15 request(s): 75 now terminal, 75 unknown"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("verdict: VIOLATED"), "{}", r.stdout);

    // The edge answers, but some transfer objects did not (an incident at
    // the edge): not "unknown to the edge", exit 2 naming the first.
    server.set(|req| {
        redriven(req, |i, id| match i {
            0 => serde_json::json!({"transfer_id": id, "phase": null, "error": "503 overloaded"}),
            _ => serde_json::json!({"transfer_id": id, "phase": "captured"}),
        })
    });
    let r = run_bin(
        &[s(&dir), "--sweep-url", &base],
        &[("LEDGER_ADMIN_KEY", key)],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 15, "every chunk is still sent");
    assert!(
        r.stderr.contains("could not re-drive 15 of 150")
            && r.stderr
                .contains(&format!("first: {}: 503 overloaded", want[0]))
            && r.stderr.contains("0 unknown"),
        "{}",
        r.stderr
    );

    // An answer that leaves ids out (a proxy, an edge in trouble) is no
    // re-drive of them (rev-s48-outputs L2): exit 2 naming the first.
    server.set(|_| (200, serde_json::json!({ "redriven": [] }).to_string()));
    let r = run_bin(
        &[s(&dir), "--sweep-url", &base],
        &[("LEDGER_ADMIN_KEY", key)],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("does not account for the ids sent: 0 entries for 10 ids")
            && r.stderr.contains(&format!("none for {:?}", want[0])),
        "{}",
        r.stderr
    );
    server.take();

    // At most --sweep-max; the rest are named not sent.
    server.set(|req| {
        redriven(
            req,
            |_, id| serde_json::json!({"transfer_id": id, "phase": "captured"}),
        )
    });
    let r = run_bin(
        &[s(&dir), "--sweep-url", &base, "--sweep-max", "25"],
        &[("LEDGER_ADMIN_KEY", key)],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let sent: Vec<String> = server
        .take()
        .iter()
        .flat_map(|req| {
            let v: serde_json::Value = serde_json::from_str(&req.body).unwrap();
            serde_json::from_value::<Vec<String>>(v["transfer_ids"].clone()).unwrap()
        })
        .collect();
    // The day's window of 25 in the list, most overdue first, wrapping
    // around: it moves by 25 a day, so no transfer waits for good behind 25
    // stuck ones (the unit tests in output/sweep.rs walk the days).
    let start = (NOW_MS / 86_400_000 * 25) as usize % want.len();
    let window: Vec<String> = want.iter().cycle().skip(start).take(25).cloned().collect();
    assert_eq!(sent, window, "the day's 25");
    assert!(
        r.stderr
            .contains("re-drove 25 of 25 dangling transfer(s) in 3 request(s)")
            && r.stderr.contains(&format!(
                "125 more not sent (--sweep-max: this run's window starts at position {} of the list",
                start + 1
            )),
        "{}",
        r.stderr
    );

    // The edge refuses the key: exit 2 with the status and body, no retry.
    server.set(|_| {
        (
            403,
            r#"{"type":"https://ledger.example/problems/forbidden","code":"forbidden"}"#.to_owned(),
        )
    });
    let r = run_bin(
        &[s(&dir), "--quiet", "--sweep-url", &server.base],
        &[("LEDGER_ADMIN_KEY", "wrong-key-0123456789")],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(server.take().len(), 1, "a 4xx is not retried");
    assert!(
        r.stderr.contains("HTTP 403") && r.stderr.contains("problems/forbidden"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("wrong-key"), "{}", r.stderr);

    // No key in the environment: exit 2 before the run, nothing sent.
    let r = run_bin(&[s(&dir), "--sweep-url", &server.base], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("LEDGER_ADMIN_KEY"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    assert!(server.take().is_empty());

    // A clean lake: nothing to re-drive, no request.
    let clean = tmp.path().join("clean");
    clean_lake(&clean);
    let r = run_bin(
        &[s(&clean), "--sweep-url", &server.base],
        &[("LEDGER_ADMIN_KEY", key)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("nothing to re-drive"), "{}", r.stderr);
    assert!(server.take().is_empty());
}

/// `--publish-dangling`: the list lands in the lake where the edge's sweeper
/// reads it, and the sweeper's own parser (`ledger_api::sweep`) accepts it;
/// a list over the sweeper's size limit keeps the most overdue that fit.
#[test]
fn the_dangling_list_is_published_into_the_lake_for_the_sweeper() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let want = add_dangling(&dir, 150);
    let file = tmp.path().join("dangling.json");
    let r = run_bin(
        &[s(&dir), "--publish-dangling", "--dangling", s(&file)],
        &[],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let published = std::fs::read_to_string(dir.join("reconcile/dangling/latest.json")).unwrap();
    let list = ledger_api::sweep::parse_dangling(&published).unwrap();
    assert_eq!(list.transfers, want, "most overdue first");
    assert!(list.skipped.is_empty(), "{:?}", list.skipped);
    // The same list as --dangling writes (up to the generation instant).
    let local: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let remote: serde_json::Value = serde_json::from_str(&published).unwrap();
    assert_eq!(local["transfers"], remote["transfers"]);
    // The lake is still a lake: the published object is not a lake file.
    let again = run_bin(&[s(&dir), "--publish-dangling"], &[]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    // A list that cannot be written: exit 2, with the write Help
    // (rev-s53-resources M6: none), the other outputs written.
    let published = dir.join("reconcile/dangling/latest.json");
    std::fs::remove_file(&published).unwrap();
    std::fs::create_dir(&published).unwrap();
    let json = tmp.path().join("r.json");
    let failed = run_bin(&[s(&dir), "--publish-dangling", "--json", s(&json)], &[]);
    assert_eq!(failed.code, 2, "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains("cannot write reconcile/dangling/latest.json")
            && failed
                .stderr
                .contains("Help: check that the directory exists and is writable"),
        "{}",
        failed.stderr
    );
    assert!(json.exists());
    std::fs::remove_dir(&published).unwrap();

    // Over the limit: a window of the list, most overdue first, marked
    // truncated, and still a document the sweeper accepts. The window moves
    // by its length a day, wrapping around: a fixed prefix would keep the
    // transfers behind stuck ones off the list for good (rev-s48-outputs L3).
    let mut report = run_lib(&dir).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for day in 0..3 {
        report.now_ms = NOW_MS + day * 86_400_000;
        let (bytes, listed) = report.dangling_document(NOW_MS, 4_000);
        assert!(
            bytes.len() <= 4_000 && listed > 0 && listed < 150,
            "{listed}"
        );
        let text = String::from_utf8(bytes).unwrap();
        let list = ledger_api::sweep::parse_dangling(&text).unwrap();
        let start = ((report.now_ms / 86_400_000) as usize * listed) % 150;
        let window: Vec<String> = want
            .iter()
            .cycle()
            .skip(start)
            .take(listed)
            .cloned()
            .collect();
        assert_eq!(list.transfers, window, "day {day}");
        seen.extend(list.transfers);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (
                v["truncated"].clone(),
                v["dangling_total"].clone(),
                v["window_start"].clone()
            ),
            (true.into(), 150.into(), start.into())
        );
    }
    assert!(
        seen.len() > 100,
        "three days cover most of the list: {}",
        seen.len()
    );
    let (_, all) = report.dangling_document(NOW_MS, 1 << 20);
    assert_eq!(all, 150, "everything fits in the sweeper's 1 MiB");
}

/// rev-s55-blackbox F11: a dangling list cut at the sweeper's 1 MiB says so
/// on stderr even with --quiet (the sweeper will not re-drive the rest).
#[test]
fn a_dangling_list_cut_short_is_said_even_with_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    add_dangling(&dir, 15_000);
    let file = tmp.path().join("dangling.json");
    let r = run_bin(&[s(&dir), "--quiet", "--dangling", s(&file)], &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: dangling list:")
            && r.stderr.contains("of 15000 transfers listed")
            && r.stderr.contains("past the sweeper's 1 MiB"),
        "{}",
        r.stderr
    );
    assert!(std::fs::metadata(&file).unwrap().len() <= 1 << 20);
}

// ---- objects under events/ the proof does not read ----

/// Puts a copy of the first lake file of `table` beside it under a name
/// that is not a lake file's (an export, a copy made by hand): it holds
/// events, but the proof does not read it. Returns its key.
fn misnamed_copy(dir: &Path, table: &str) -> String {
    let real = common::files_under(dir, &format!("events/{table}")).swap_remove(0);
    let key = format!("{}/part-0.parquet", real.rsplit_once('/').unwrap().0);
    std::fs::copy(dir.join(&real), dir.join(&key)).unwrap();
    key
}

/// What a run of `reconcile LAKE --json --metrics ARGS…` says of the
/// objects it did not read: the run, its JSON report, the metric
/// `reconcile_files_ignored`, and the summary's `IGNORED` and verdict lines.
struct Ignored {
    run: Run,
    report: serde_json::Value,
    metric: String,
    lines: Vec<String>,
}

fn ignored(dir: &Path, args: &[&str]) -> Ignored {
    let out = tempfile::tempdir().unwrap();
    let (json, prom) = (out.path().join("r.json"), out.path().join("m.prom"));
    let mut all = vec![s(dir), "--quiet", "--json", s(&json), "--metrics", s(&prom)];
    all.extend(args);
    let run = run_bin(&all, &[]);
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let metric = std::fs::read_to_string(&prom)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("reconcile_files_ignored "))
        .unwrap_or_else(|| panic!("no reconcile_files_ignored in {}", prom.display()))
        .to_owned();
    let lines = run
        .stdout
        .lines()
        .filter(|l| l.contains("IGNORED") || l.starts_with("verdict"))
        .map(str::to_owned)
        .collect();
    Ignored {
        run,
        report,
        metric,
        lines,
    }
}

/// A `.parquet` object under events/ that is not named as a lake file is
/// not read: the JSON report lists it, the metric counts it, the summary
/// names it and says the verdict covers the lake files as named; the exit
/// code stays the lake files' verdict (0 or 1).
#[test]
fn objects_not_named_as_lake_files_are_listed_counted_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let clean = ignored(&dir, &[]);
    assert_eq!(clean.run.code, 0, "{}", clean.run.stderr);
    assert!(
        clean.report.get("files_ignored").is_none(),
        "{}",
        clean.report
    );
    assert_eq!(clean.metric, "0");
    assert_eq!(clean.lines, ["verdict: every invariant holds"]);

    // Copies of real lake files, so each holds events: one per table.
    let t = misnamed_copy(&dir, "transfer");
    let a = misnamed_copy(&dir, "account");
    let got = ignored(&dir, &[]);
    assert_eq!(got.run.code, 0, "{}\n{}", got.run.stdout, got.run.stderr);
    assert_eq!(got.report["files_ignored"], serde_json::json!([a, t]));
    assert_eq!(got.metric, "2");
    assert_eq!(got.lines.len(), 2, "{:?}", got.lines);
    assert!(
        got.lines[0].contains("IGNORED   2 object(s)") && got.lines[0].ends_with(&a),
        "{:?}",
        got.lines
    );
    assert_eq!(
        got.lines[1],
        "verdict: every invariant holds (in the lake files as named; \
         2 object(s) ending in .parquet beside them not read)"
    );
    // Not read indeed: the same files and rows as without them.
    for member in ["files", "stats"] {
        assert_eq!(got.report[member], clean.report[member], "{member}");
    }

    // A violated lake stays exit 1, and still lists them.
    let bad = corrupted_lake(tmp.path(), &[Class::Overdraft]);
    let a = misnamed_copy(&bad, "account");
    let got = ignored(&bad, &[]);
    assert_eq!(got.run.code, 1, "{}\n{}", got.run.stdout, got.run.stderr);
    assert_eq!(got.report["files_ignored"], serde_json::json!([a]));
    assert_eq!(got.metric, "1");
    assert_eq!(
        got.lines.last().unwrap(),
        "verdict: VIOLATED (in the lake files as named; 1 object(s) ending in .parquet beside them not read)"
    );
}

/// rev-s47-lake M1: a `.parquet` object under `events/` outside the tables'
/// directories (a table's directory misspelled, a file directly in
/// `events/`), or one named `.PARQUET`, is listed, counted and named as well,
/// by a run without a checkpoint and by one resumed from it; other objects
/// there are not.
#[test]
fn parquet_objects_outside_the_tables_or_in_upper_case_are_listed_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let real = common::files_under(&dir, "events/account").swap_remove(0);
    let moved = real.replacen("events/account/", "events/Account/", 1);
    let upper = format!("{}.PARQUET", real.strip_suffix(".parquet").unwrap());
    let loose = "events/x.parquet".to_owned();
    for key in [&moved, &upper, &loose] {
        std::fs::create_dir_all(dir.join(key).parent().unwrap()).unwrap();
        std::fs::copy(dir.join(&real), dir.join(key)).unwrap();
    }
    std::fs::write(dir.join("events/README.txt"), "not a lake file").unwrap();
    std::fs::write(dir.join("events/Account/notes.json"), "{}").unwrap();
    let mut want = vec![moved, upper, loose];
    want.sort();
    let ckpt = tmp.path().join("ckpt");
    for args in [
        &[][..],
        &["--checkpoint", s(&ckpt)][..],
        &["--checkpoint", s(&ckpt)][..],
    ] {
        let got = ignored(&dir, args);
        assert_eq!(got.run.code, 0, "{args:?}: {}", got.run.stderr);
        assert_eq!(
            got.report["files_ignored"],
            serde_json::json!(want),
            "{args:?}"
        );
        assert_eq!(got.metric, "3", "{args:?}");
        assert!(
            got.run
                .stderr
                .contains("warning: 2 object(s) ending in .parquet under events/ are outside the tables' directories")
                && got.run.stderr.contains("warning: account: 1 object(s) ending in .parquet are not named"),
            "{args:?}: {}",
            got.run.stderr
        );
    }
}

/// A run resumed from a checkpoint lists the tables before its proofs, and
/// a `--full` run past a checkpoint proves from the first event: each lists
/// the objects it did not read, as a run without a checkpoint does.
#[test]
fn resumed_and_full_runs_past_a_checkpoint_list_them_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let a = misnamed_copy(&dir, "account");
    let ckpt = tmp.path().join("ckpt");
    let ck = s(&ckpt);
    // `incremental`: the run read a checkpoint (resumed, or `--full` past
    // one).
    for (args, read_one) in [
        (&["--checkpoint", ck][..], false),
        (&["--checkpoint", ck][..], true),
        (&["--checkpoint", ck, "--full"][..], true),
    ] {
        let got = ignored(&dir, args);
        let args = format!("{args:?} (a checkpoint read: {read_one})");
        assert_eq!(got.run.code, 0, "{args}: {}", got.run.stderr);
        assert_eq!(
            got.report.get("incremental").is_some(),
            read_one,
            "{args}: {}",
            got.report
        );
        assert_eq!(
            got.report["files_ignored"],
            serde_json::json!([a]),
            "{args}"
        );
        assert_eq!(got.metric, "1", "{args}");
        assert!(
            got.lines.len() == 2
                && got.lines[0].ends_with(&a)
                && got.lines[1].contains("in the lake files as named"),
            "{args}: {:?}",
            got.lines
        );
    }
}

/// A checkpoint with no settled transfer archived (here: a lake of account
/// rows only): the resumed run's listing is the one its proofs read, so an
/// object not read is named once (the files were dropped and the account
/// table listed again, each object named twice).
#[test]
fn a_resumed_run_with_nothing_archived_names_what_it_ignores_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    std::fs::remove_dir_all(dir.join("events/transfer")).unwrap();
    let a = misnamed_copy(&dir, "account");
    let ckpt = tmp.path().join("ckpt");
    let ck = s(&ckpt);
    for args in [&["--checkpoint", ck][..], &["--checkpoint", ck][..]] {
        let got = ignored(&dir, args);
        assert_eq!(
            got.report["files_ignored"],
            serde_json::json!([a]),
            "{args:?}: {}",
            got.run.stderr
        );
        assert_eq!(got.metric, "1", "{args:?}");
        let warned = got
            .run
            .stderr
            .matches("object(s) ending in .parquet are not named as lake files")
            .count();
        assert_eq!(warned, 1, "{args:?}: {}", got.run.stderr);
    }
    assert!(
        !std::fs::read_dir(tmp.path()).unwrap().any(|e| e
            .unwrap()
            .path()
            .extension()
            .is_some_and(|x| x == "seg")),
        "nothing archived"
    );
}

/// rev-s47-lake M3: a row that does not verify is named by its event id;
/// the summary gives the DuckDB query that finds the file holding it, and
/// the query, run as printed, finds it.
#[test]
fn the_summary_gives_the_query_that_finds_the_file_of_a_row_that_does_not_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lake");
    clean_lake(&dir);
    let injected = inject(&dir, Class::Tamper, NOW_MS).unwrap();
    let r = run_bin(&[s(&dir)], &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let sql = r
        .stdout
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("help: the file that holds a row, in DuckDB (docs/LAKE.md): ")
        })
        .unwrap_or_else(|| panic!("no help line: {}", r.stdout))
        .to_owned();
    let event_id = injected
        .expected
        .iter()
        .find(|e| e.code == "hash_mismatch")
        .and_then(|e| e.event_id.clone())
        .expect("tamper names its row");
    assert!(sql.contains(&format!("event_id = '{event_id}'")), "{sql}");
    let install = Command::new("bash")
        .arg(repo().join("scripts/install-lake-readers.sh"))
        .status()
        .unwrap();
    assert!(install.success());
    let out = Command::new(python())
        .args([
            "-c",
            "import duckdb, sys; print('\\n'.join(r[0] for r in duckdb.sql(sys.argv[1]).fetchall()))",
            &sql,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(!files.is_empty(), "{sql}");
    for f in &files {
        assert!(f.starts_with(s(&dir)) && f.ends_with(".parquet"), "{f}");
        assert!(Path::new(f).is_file(), "{f}");
    }
}
