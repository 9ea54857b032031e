//! The DuckDB formulation of the checks (bench/reconcile/checks.sql, the benchmark's
//! competitor) agrees with `reconcile` on a generated clean lake and on one corrupted copy per
//! class the corruption tool knows: same verdict and count per check, same findings (check, code, key, seq, event id).
//!
//! Then random rounds (`reconcile-testdata mutate`: a few random edits of random events per
//! round, the two engines each other's oracle): 20 by default, `RECONCILE_EQUIV_ROUNDS=N` for
//! a deeper run (`RECONCILE_EQUIV_SEED` moves the seeds).
//!
//! Runs bench/reconcile/equivalence.sh on this build's binaries (seconds). Setup:
//! `scripts/install-lake-readers.sh` (idempotent, pinned duckdb), run by the script.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn duckdb_checks_sql_agrees_with_reconcile_on_every_class() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reconcile"));
    let testdata = PathBuf::from(env!("CARGO_BIN_EXE_reconcile-testdata"));
    assert_eq!(bin.parent(), testdata.parent());
    let out = Command::new("bash")
        .arg(repo.join("bench/reconcile/equivalence.sh"))
        .arg(bin.parent().expect("binaries live in a directory"))
        .env("TMPDIR", std::env::temp_dir())
        .env(
            "ROUNDS",
            std::env::var("RECONCILE_EQUIV_ROUNDS").unwrap_or_else(|_| "20".into()),
        )
        .env(
            "SEED",
            std::env::var("RECONCILE_EQUIV_SEED").unwrap_or_else(|_| "0".into()),
        )
        .output()
        .expect("run bench/reconcile/equivalence.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "SQL and reconcile disagree: see above"
    );
    assert!(stdout.contains("agree on the clean lake and every class"));
}
