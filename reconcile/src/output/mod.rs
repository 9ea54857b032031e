//! The run's machine outputs beyond the JSON report, each a pure function of
//! the [`Report`] plus a thin edge of I/O (docs/RECONCILE.md):
//!
//! - [`rows`]: every finding of every violated check as CSV or Parquet
//!   (`--violations FILE`), for auditors;
//! - [`metrics`]: the Prometheus text exposition format (`--metrics FILE`),
//!   written atomically for the node_exporter textfile collector;
//! - [`alert`]: a webhook POST when a violation appears that the previous
//!   run did not have (`--alert-webhook URL`, `--alert-state FILE`);
//! - [`sweep`]: the dangling transfers posted to the edge's admin re-drive
//!   route (`--sweep-url URL`, key from `LEDGER_ADMIN_KEY`).
//!
//! Every function here takes the finished report; nothing feeds back into
//! the verdict. A failed output is an error (exit 2), never a silent skip.

pub mod alert;
pub mod http;
pub mod metrics;
pub mod rows;
pub mod sweep;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::report::Report;

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, flushed and synced, then renamed over `path`. A reader (the
/// textfile collector, an auditor's job) sees the old file or the new one,
/// never half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    stage(path, bytes)
        .and_then(Staged::commit)
        .map_err(|e| format!("{e}\n{WRITE_HELP}"))
}

/// The Help of a file that could not be written.
pub const WRITE_HELP: &str = "Help: check that the directory exists and is writable, that its \
     volume has room, and the job's file size limit (ulimit -f; systemd's LimitFSIZE=)";

/// A file written in full, flushed and synced under a temporary name
/// beside its path ([`stage`]), not yet renamed over it ([`Staged::commit`]).
/// Dropped without the rename, the temporary file is removed. The alert
/// writes its next state so before the POST and renames it after the 2xx.
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    name: String,
    renamed: bool,
}

/// Writes `bytes` to the temporary file of `path` (`.NAME.tmp-PID` in its
/// directory; a symbolic link's target's, the link kept). The error names
/// `path` (`cannot write PATH: …`), without a Help line.
pub fn stage(path: &Path, bytes: &[u8]) -> Result<Staged, String> {
    // A symbolic link is kept, and its target written (rev-s50-ops F6: the
    // rename replaced the link by a file, and what read the target, a
    // metrics collector say, kept the last file written before).
    let target = link_target(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .ok_or_else(|| format!("{} is not a file path", target.display()))?
        .to_string_lossy()
        .into_owned();
    let staged = Staged {
        tmp: dir.join(format!(".{name}.tmp-{}", std::process::id())),
        path: target,
        dir,
        name,
        renamed: false,
    };
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&staged.tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    // On an error, dropping `staged` removes what was written.
    written.map_err(|e| format!("cannot write {}: {e}", staged.path.display()))?;
    Ok(staged)
}

impl Staged {
    /// Renames the temporary file over the path; the error names the path
    /// (`cannot write PATH: …`), without a Help line.
    pub fn commit(mut self) -> Result<(), String> {
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        self.renamed = true;
        remove_stale_temporaries(&self.dir, &self.name);
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The file `path` names: itself, or the end of the chain of symbolic links
/// it starts (that file may not exist yet: a link made before the first
/// run).
pub fn link_target(path: &Path) -> Result<PathBuf, String> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&at) {
            Ok(to) => {
                at = match at.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                }
            }
            // Not a link (or not there): the file itself.
            Err(_) => return Ok(at),
        }
    }
    Err("a chain of more than 40 symbolic links (a loop?)".into())
}

/// Removes the temporary files of the output `name` in `dir` that runs
/// killed before their rename left (`.NAME.tmp-PID`, that process gone, the
/// file untouched for an hour): nothing else ever would. Only where `/proc`
/// says which processes run (Linux). A run still writing is left alone: its
/// process is there, or (another container's, on a shared volume, whose
/// processes this one cannot see) it wrote within the hour.
fn remove_stale_temporaries(dir: &Path, name: &str) {
    let proc = Path::new("/proc/self");
    if !proc.exists() {
        return;
    }
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let idle = ledger_s3::local::untouched_for(&e, std::time::Duration::from_secs(3600));
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() && idle {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What the CLI asked for beyond the report; each member runs on its own.
#[derive(Debug, Default, Clone)]
pub struct Outputs {
    pub violations: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
    pub alert: Option<alert::AlertConfig>,
    pub sweep: Option<sweep::SweepConfig>,
    /// Suppress the one-line results of the alert and the sweep on stderr.
    pub quiet: bool,
}

impl Outputs {
    /// Checks what can be checked before the (long) run on `lake`: the
    /// violation file's extension, the sweep's admin key, the alert's state
    /// file. A usage error must not wait an hour.
    pub fn validate(&self, lake: &str) -> Result<(), String> {
        if let Some(p) = &self.violations {
            rows::Format::from_path(p)?;
        }
        if let Some(s) = &self.sweep {
            s.validate()?;
            if let Some(w) = s.warning() {
                crate::say!("reconcile: warning: {w}");
            }
        }
        if let Some(a) = &self.alert {
            a.validate(lake)?;
            if http::clear_text(&a.webhook) {
                crate::say!(
                    "reconcile: warning: --alert-webhook {} is plain http: its token and the violations cross \
                     the network in clear text (use https)",
                    http::redact_path(&a.webhook)
                );
            }
        }
        Ok(())
    }

    /// After a run that stopped before its verdict (exit 2): the metrics
    /// of a failed run ([`metrics::render_failed`]), the file as the last
    /// run left it read for the time of the last verdict. The error, if
    /// they could not be written.
    pub fn write_failed(&self, lake: &str, wall_clock_ms: i64) -> Option<String> {
        let path = self.metrics.as_ref()?;
        let previous = std::fs::read_to_string(path).ok();
        use crate::store::Location;
        let identity = Location::identity(lake);
        // By the spelling's absolute path too: the night the directory is
        // gone (the likely failure), `B` and `./B/` resolve to nothing
        // (rev-s55-diff2 L5).
        let absolute = |l: &str| std::path::absolute(l).ok();
        let same_lake = |was: &str| {
            Location::is_same_lake(was, &identity)
                || (!was.contains("://")
                    && absolute(was).is_some_and(|a| Some(a) == absolute(lake)))
        };
        let text = metrics::render_failed(lake, previous.as_deref(), wall_clock_ms, same_lake);
        write_atomic(path, text.as_bytes()).err()
    }

    /// Writes every requested output, in this order: the violation rows,
    /// the alert (before the sweep, which may take long against a slow
    /// edge: the page goes out first), the sweep, and the metrics last,
    /// counting the outputs that failed before them (`failed`: the caller's
    /// own, such as the JSON report, plus these). With a sweep, the metrics
    /// are also written before it, the sweep counted as failed, so that a
    /// slow or hung edge does not keep the night's verdict from the
    /// dashboards (rev-s51-ops2 F5), and written again after it. Each runs even when another failed; the
    /// errors are returned (one per failed output) for the caller to print
    /// and turn into exit 2. `wall_clock_ms` stamps the metrics.
    pub fn write(
        &self,
        report: &Report,
        rt: &tokio::runtime::Runtime,
        wall_clock_ms: i64,
        failed: usize,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(path) = &self.violations {
            if let Err(e) = rows::write(path, report) {
                errors.push(e);
            }
        }
        if let Some(cfg) = &self.alert {
            match rt.block_on(alert::run(cfg, report)) {
                Ok(outcome) => {
                    if !self.quiet {
                        crate::say!("{}", outcome.line());
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        let metrics = |failed: usize| {
            self.metrics.as_ref().map(|path| {
                let text = metrics::render(report, wall_clock_ms, failed);
                write_atomic(path, text.as_bytes())
            })
        };
        if let Some(cfg) = &self.sweep {
            // The sweep counted as failed until it is done: a job stopped
            // in it (a deadline, a hung edge) leaves metrics that say so,
            // not a run that looks whole (rev-s51-late M1). A failure of
            // this write is the final write's to report: it would fail alike.
            let _ = metrics(failed + errors.len() + 1);
            match rt.block_on(sweep::redrive(cfg, &report.dangling, report.now_ms)) {
                Ok(done) => {
                    if !self.quiet {
                        crate::say!("{}", done.line());
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if let Some(Err(e)) = metrics(failed + errors.len()) {
            errors.push(e);
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    /// rev-s48-outputs L5: a temporary file a killed run left is removed by
    /// the next write of the same output; one of a process still running
    /// (pid 1), one written within the hour (rev-s48-diff L7), or one of
    /// another output, is left alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_killed_runs_temporary_file_is_removed_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let left = dir.path().join(".report.json.tmp-4294967295");
        let running = dir.path().join(".report.json.tmp-1");
        let other = dir.path().join(".metrics.prom.tmp-4294967295");
        let recent = dir.path().join(".report.json.tmp-4294967294");
        let hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for f in [&left, &running, &other, &recent] {
            std::fs::write(f, b"half").unwrap();
            if f != &recent {
                std::fs::File::options()
                    .write(true)
                    .open(f)
                    .and_then(|h| h.set_modified(hours_ago))
                    .unwrap();
            }
        }
        super::write_atomic(&dir.path().join("report.json"), b"{}").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("report.json")).unwrap(),
            b"{}"
        );
        assert!(!left.exists() && running.exists() && other.exists());
        // Written within the hour: perhaps a live run whose process this one
        // cannot see (another container on a shared volume).
        assert!(recent.exists());
    }
}
