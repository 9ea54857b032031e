//! Violation rows for auditors (`--violations FILE`): every finding of every
//! violated check, one row each, as CSV (RFC 4180) or Parquet, chosen by the
//! file's extension. A clean run writes the header (CSV) or the schema
//! (Parquet) with zero rows, so a job finds the file and its columns on a
//! good night (a CSV has no types: a reader that guesses them from the rows
//! must be given them, docs/RECONCILE.md).

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::report::Report;

/// The columns, in order (CSV header and Parquet schema).
pub const COLUMNS: [&str; 9] = [
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

/// One offending row of one check, with the run's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViolationRow {
    pub check: String,
    pub invariant: String,
    pub code: String,
    pub key: String,
    pub seq: Option<u64>,
    pub event_id: Option<String>,
    pub detail: String,
    pub lake: String,
    pub now_ms: i64,
}

/// Every finding of the report, in report order (checks in their fixed
/// order, findings in each check's deterministic order).
pub fn violation_rows(report: &Report) -> Vec<ViolationRow> {
    rows_of(report, |c| &c.findings)
}

/// Every pending finding of the report (the settle window's), in report
/// order.
pub fn pending_rows(report: &Report) -> Vec<ViolationRow> {
    rows_of(report, |c| &c.pending)
}

fn rows_of(
    report: &Report,
    which: impl Fn(&crate::finding::CheckResult) -> &Vec<crate::finding::Finding>,
) -> Vec<ViolationRow> {
    report
        .checks
        .iter()
        .flat_map(|c| {
            which(c).iter().map(move |f| ViolationRow {
                check: c.name.to_owned(),
                invariant: c.invariant.to_owned(),
                code: f.code.to_owned(),
                key: f.key.clone(),
                seq: f.seq,
                event_id: f.event_id.clone(),
                detail: f.detail.clone(),
                lake: report.lake.clone(),
                now_ms: report.now_ms,
            })
        })
        .collect()
}

/// The file formats `--violations` writes, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Parquet,
}

impl Format {
    pub fn from_path(path: &Path) -> Result<Format, String> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("csv") => Ok(Format::Csv),
            Some("parquet") => Ok(Format::Parquet),
            other => Err(format!(
                "--violations {}: the extension {} is not one this version writes\n\
                 Help: name the file *.csv (RFC 4180) or *.parquet; the extension picks the format",
                path.display(),
                match other {
                    Some(e) => format!("`.{e}`"),
                    None => "(none)".to_owned(),
                }
            )),
        }
    }
}

/// One CSV field per RFC 4180: quoted when it holds a comma, a quote, CR or
/// LF (or starts/ends with a space, which some readers trim); quotes doubled.
fn csv_field(out: &mut String, s: &str) {
    let needs = s.contains([',', '"', '\r', '\n']) || s.starts_with(' ') || s.ends_with(' ');
    if needs {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// A text field's value as a spreadsheet must show it: one `'` in front of a
/// value whose first character other than white space is `=`, `+`, `-`,
/// `@` or a full-width form of one (`＝＋－＠`: spreadsheets take those too),
/// or that starts with a tab or a CR (a spreadsheet would run it as a
/// formula: a key or event id comes from the lake, which a tampered writer
/// fills), or with `'` itself, so that removing one leading `'` always gives
/// the value back. Numbers (`seq`, `now_ms`) are never prefixed; the Parquet
/// file holds every value as it is.
fn spreadsheet_text(s: &str) -> std::borrow::Cow<'_, str> {
    const FORMULA: [char; 8] = ['=', '+', '-', '@', '＝', '＋', '－', '＠'];
    let first = s.trim_start_matches([' ', '\t', '\r', '\n']);
    if first.starts_with(FORMULA) || s.starts_with(['\t', '\r', '\'']) {
        format!("'{s}").into()
    } else {
        s.into()
    }
}

/// The rows as RFC 4180 CSV: a header line, CRLF line ends, a null `seq` or
/// `event_id` as an empty field, text guarded for spreadsheets
/// ([`spreadsheet_text`]).
pub fn to_csv(rows: &[ViolationRow]) -> String {
    let mut out = String::new();
    out.push_str(&COLUMNS.join(","));
    out.push_str("\r\n");
    for r in rows {
        let seq = r.seq.map(|s| s.to_string()).unwrap_or_default();
        let now = r.now_ms.to_string();
        let text = |s| spreadsheet_text(s);
        let fields: [&str; 9] = [
            &text(&r.check),
            &text(&r.invariant),
            &text(&r.code),
            &text(&r.key),
            &seq,
            &text(r.event_id.as_deref().unwrap_or("")),
            &text(&r.detail),
            &text(&r.lake),
            &now,
        ];
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(&mut out, f);
        }
        out.push_str("\r\n");
    }
    out
}

/// The Arrow schema of the Parquet file: strings are UTF-8, `seq` is a
/// nullable UInt64, `event_id` a nullable string, `now_ms` an Int64.
pub fn arrow_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("check", DataType::Utf8, false),
        Field::new("invariant", DataType::Utf8, false),
        Field::new("code", DataType::Utf8, false),
        Field::new("key", DataType::Utf8, false),
        Field::new("seq", DataType::UInt64, true),
        Field::new("event_id", DataType::Utf8, true),
        Field::new("detail", DataType::Utf8, false),
        Field::new("lake", DataType::Utf8, false),
        Field::new("now_ms", DataType::Int64, false),
    ]))
}

/// The rows as one Parquet file (Snappy; row groups of at most the
/// writer's default 1,048,576 rows).
pub fn to_parquet(rows: &[ViolationRow]) -> Result<Vec<u8>, String> {
    let strings = |f: fn(&ViolationRow) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let columns: Vec<ArrayRef> = vec![
        strings(|r| &r.check),
        strings(|r| &r.invariant),
        strings(|r| &r.code),
        strings(|r| &r.key),
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.seq))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.event_id.as_deref()),
        )),
        strings(|r| &r.detail),
        strings(|r| &r.lake),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.now_ms))),
    ];
    let batch = RecordBatch::try_new(arrow_schema(), columns).map_err(|e| e.to_string())?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut w =
        ArrowWriter::try_new(&mut out, arrow_schema(), Some(props)).map_err(|e| e.to_string())?;
    w.write(&batch).map_err(|e| e.to_string())?;
    w.close().map_err(|e| e.to_string())?;
    Ok(out)
}

/// Writes the report's violation rows to `path` (atomically), in the format
/// its extension names.
pub fn write(path: &Path, report: &Report) -> Result<(), String> {
    let format = Format::from_path(path)?;
    let rows = violation_rows(report);
    let bytes = match format {
        Format::Csv => to_csv(&rows).into_bytes(),
        Format::Parquet => to_parquet(&rows)
            .map_err(|e| format!("cannot encode the violation rows as Parquet: {e}"))?,
    };
    super::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(detail: &str, seq: Option<u64>) -> ViolationRow {
        ViolationRow {
            check: "completeness".into(),
            invariant: "lake".into(),
            code: "seq_gap".into(),
            key: "t.a.k1".into(),
            seq,
            event_id: seq.map(|s| format!("transfer:t.a.k1:{s}")),
            detail: detail.into(),
            lake: "/l".into(),
            now_ms: 5,
        }
    }

    #[test]
    fn csv_quotes_per_rfc_4180() {
        let csv = to_csv(&[row("a, \"b\"\nc", Some(2)), row("plain", None)]);
        assert_eq!(
            csv,
            "check,invariant,code,key,seq,event_id,detail,lake,now_ms\r\n\
             completeness,lake,seq_gap,t.a.k1,2,transfer:t.a.k1:2,\"a, \"\"b\"\"\nc\",/l,5\r\n\
             completeness,lake,seq_gap,t.a.k1,,,plain,/l,5\r\n"
        );
    }

    #[test]
    fn csv_text_a_spreadsheet_would_run_as_a_formula_gets_a_leading_quote() {
        let mut r = row("-5 in flight", Some(3));
        r.key = "=HYPERLINK(\"http://x\",\"a\")".into();
        r.event_id = Some("@SUM(A1)".into());
        r.lake = "'quoted".into();
        r.now_ms = -7;
        let plain = row("+1", None);
        let csv = to_csv(&[r, plain]);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[1],
            "completeness,lake,seq_gap,\"'=HYPERLINK(\"\"http://x\"\",\"\"a\"\")\",3,'@SUM(A1),\
             '-5 in flight,''quoted,-7"
        );
        assert_eq!(lines[2], "completeness,lake,seq_gap,t.a.k1,,,'+1,/l,5");
        // Tab and CR too; a value with a quote elsewhere, or none, is as it was.
        assert_eq!(spreadsheet_text("\tx"), "'\tx");
        assert_eq!(spreadsheet_text("\rx"), "'\rx");
        // A trigger after white space, or in its full-width form (rev-s47-session L5).
        for v in ["  =1+1", "\n=1+1", " \t@A1", "＝1+1", "－5", "＋1", "＠A1"] {
            assert_eq!(spreadsheet_text(v), format!("'{v}"), "{v:?}");
        }
        assert_eq!(spreadsheet_text(" x=1"), " x=1");
        assert_eq!(spreadsheet_text("a'b=c"), "a'b=c");
        assert_eq!(spreadsheet_text(""), "");
    }

    #[test]
    fn only_csv_and_parquet_are_accepted() {
        assert_eq!(Format::from_path(Path::new("x.CSV")), Ok(Format::Csv));
        assert_eq!(
            Format::from_path(Path::new("a/x.parquet")),
            Ok(Format::Parquet)
        );
        let e = Format::from_path(Path::new("x.json")).unwrap_err();
        assert!(
            e.contains("`.json`") && e.contains("*.csv") && e.contains("*.parquet"),
            "{e}"
        );
        let e = Format::from_path(Path::new("x")).unwrap_err();
        assert!(e.contains("(none)"), "{e}");
    }
}
