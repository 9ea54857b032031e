//! One reconciliation run: list and check the files, stream each table once
//! in (`stream_key`, `seq`) order, feed every stream to the per-stream checks
//! and into the facts, then run the cross-stream checks on the facts.
//!
//! ```text
//! lake ─list+footers─▶ files ─DataFusion sort─▶ rows ─dedup/group─▶ streams
//!   streams ─▶ completeness, duplicates, balance, overdraft   (per stream)
//!   streams ─▶ facts ─▶ transfer/global conservation, consistency, convergence
//! ```

use std::time::Instant;

use ledger_events::Stream;
use ledger_ingest::Table;

use crate::checks::*;
use crate::facts::Facts;
use crate::finding::{CheckResult, Finding};
use crate::lake::{Error, Lake};
use crate::report::{Report, REPORT_VERSION};
use crate::stream::{Grouper, StreamRows};

#[derive(Debug, Clone)]
pub struct Options {
    /// The instant deadlines are judged against (ms since the epoch).
    pub now_ms: i64,
    /// Progress lines on stderr.
    pub progress: bool,
}

#[derive(Default)]
struct PerStream {
    completeness: Vec<Finding>,
    duplicates: Vec<Finding>,
    balance: Vec<Finding>,
    overdraft: Vec<Finding>,
    facts: Facts,
    wrong_table: Vec<Finding>,
}

impl PerStream {
    fn visit(&mut self, table: Table, s: StreamRows) {
        completeness::check_stream(&s, &mut self.completeness);
        duplicates::check_stream(&s, &mut self.duplicates);
        if Table::of(s.stream) != table {
            self.wrong_table.push(Finding::new(
                "wrong_table",
                &s.key,
                format!(
                    "{} stream found in the {} table",
                    s.stream.as_str(),
                    table.as_str()
                ),
            ));
            return;
        }
        match s.stream {
            Stream::Account => {
                balance::check_stream(&s, &mut self.balance);
                overdraft::check_stream(&s, &mut self.overdraft);
                self.facts.add_account(&s);
            }
            Stream::Transfer => self.facts.add_transfer(&s),
            Stream::Subscription => {}
        }
    }
}

pub async fn reconcile(lake: &Lake, opts: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let mut per = PerStream::default();
    let mut stats = crate::stream::ScanStats::default();
    let mut files_total = 0usize;
    for table in [Table::Account, Table::Transfer, Table::Subscription] {
        let files = lake.files(table).await?;
        files_total += files.len();
        if opts.progress {
            let rows: i64 = files.iter().map(|f| f.rows).sum();
            eprintln!(
                "reconcile: {}: {} files, {rows} rows (footers checked)",
                table.as_str(),
                files.len()
            );
        }
        let mut g = Grouper::default();
        lake.scan_sorted(&files, |events| {
            for ev in events {
                if let Some(s) = g.push(ev) {
                    per.visit(table, s);
                }
            }
            Ok(())
        })
        .await?;
        if let Some(s) = g.finish() {
            per.visit(table, s);
        }
        if opts.progress {
            eprintln!(
                "reconcile: {}: {} rows read, {} plain duplicates, {} streams ({:.1} s)",
                table.as_str(),
                g.stats.rows_read,
                g.stats.plain_duplicates,
                g.stats.streams,
                started.elapsed().as_secs_f64()
            );
        }
        stats.rows_read += g.stats.rows_read;
        stats.plain_duplicates += g.stats.plain_duplicates;
        stats.distinct_rows += g.stats.distinct_rows;
        stats.streams += g.stats.streams;
    }
    if files_total == 0 {
        return Err(Error::Lake(format!(
            "{} holds no lake files under events/\nHelp: check the path (the lake root, not events/); \
             an empty lake proves nothing, so it is an error",
            lake.name
        )));
    }
    let f = &per.facts;
    let mut completeness_rows = per.completeness;
    completeness_rows.extend(per.wrong_table);
    let checks = vec![
        CheckResult::new(
            completeness::NAME,
            completeness::INVARIANT,
            completeness::PROVES,
            completeness_rows,
        ),
        CheckResult::new(
            duplicates::NAME,
            duplicates::INVARIANT,
            duplicates::PROVES,
            per.duplicates,
        ),
        CheckResult::new(
            balance::NAME,
            balance::INVARIANT,
            balance::PROVES,
            per.balance,
        ),
        CheckResult::new(
            overdraft::NAME,
            overdraft::INVARIANT,
            overdraft::PROVES,
            per.overdraft,
        ),
        CheckResult::new(
            transfer_conservation::NAME,
            transfer_conservation::INVARIANT,
            transfer_conservation::PROVES,
            transfer_conservation::check(f),
        ),
        CheckResult::new(
            global_conservation::NAME,
            global_conservation::INVARIANT,
            global_conservation::PROVES,
            global_conservation::check(f),
        ),
        CheckResult::new(
            consistency::NAME,
            consistency::INVARIANT,
            consistency::PROVES,
            consistency::check(f),
        ),
        CheckResult::new(
            convergence::NAME,
            convergence::INVARIANT,
            convergence::PROVES,
            convergence::check(f, opts.now_ms),
        ),
    ];
    Ok(Report {
        version: REPORT_VERSION,
        lake: lake.name.clone(),
        now_ms: opts.now_ms,
        holds: checks.iter().all(|c| c.holds),
        files: files_total,
        stats,
        accounts: f.currencies.values().map(|c| c.accounts).sum(),
        transfers: f.transfers.len() as u64,
        elapsed_ms: started.elapsed().as_millis() as u64,
        dangling: convergence::dangling(f, opts.now_ms),
        checks,
    })
}
