#!/usr/bin/env python3
"""Runs bench/reconcile/checks.sql (the nine reconcile checks in DuckDB SQL) over a lake and
prints the violation count per check, in reconcile's order.

    duckdb_checks.py LAKE --now-ms MS [--json OUT] [--compare REPORT.json] [--threads N] [--memory-limit 2GB]
    duckdb_checks.py --golden            # the SQL hash encoding reproduces edge/events/golden/v1
    duckdb_checks.py LAKE --scan         # the floor: scan.sql, one plain scan of the same columns

--compare REPORT.json: the `reconcile --json` report of the same lake at the same --now-ms;
checks that both engines report the same verdict and count per check, and the same findings
(check, code, key, seq, event id). Exit 0 when they agree, 1 when not (differences printed).
Without --compare: exit 0 when every check holds, 1 otherwise (like reconcile).

Needs the duckdb Python package (scripts/install-lake-readers.sh pins it).
"""
import argparse
import atexit
import collections
import json
import os
import re
import shutil
import sys
import time

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHECKS = [
    "completeness",
    "conflicting_duplicates",
    "balance_integrity",
    "no_overdraft",
    "transfer_conservation",
    "global_conservation",
    "cross_stream_consistency",
    "terminal_convergence",
    "protocol_values",
]


TABLES = ["account", "transfer", "subscription"]
# A lake file's key under events/{table}/ (ingest/core/src/key.rs parse_object_key): any other
# file is not the lake's, and reconcile does not read it (it names it IGNORED).
LAKE_FILE = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}/[ic]-[0-9a-f]{32}\.parquet")
# The schema's 21 fields (docs/EVENTS.md), as the lake files type them: a table without files
# reads as no rows of these types.
COLUMNS = [
    ("v", "USMALLINT"), ("event_id", "VARCHAR"), ("stream", "VARCHAR"), ("stream_key", "VARCHAR"),
    ("seq", "BIGINT"), ("kind", "VARCHAR"), ("occurred_at_ms", "BIGINT"), ("currency", "VARCHAR"),
    ("amount", "BIGINT"), ("balance_after", "BIGINT"), ("held_after", "BIGINT"),
    ("overdraft_limit", "BIGINT"), ("entry_id", "VARCHAR"), ("transfer_id", "VARCHAR"),
    ("counterparty", "VARCHAR"), ("source", "VARCHAR"), ("destination", "VARCHAR"),
    ("deadline_ms", "BIGINT"), ("reason", "VARCHAR"), ("prev_hash", "VARCHAR"), ("hash", "VARCHAR"),
]


def lake_files(lake, tables):
    """The lake files of `tables`, sorted: what reconcile reads, no other file."""
    out = []
    for table in tables:
        base = os.path.join(lake, "events", table)
        for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if not os.path.isdir(os.path.join(base, d)):
                continue
            out += [os.path.join(base, d, f) for f in sorted(os.listdir(os.path.join(base, d)))
                    if LAKE_FILE.fullmatch(f"{d}/{f}") and os.path.isfile(os.path.join(base, d, f))]
    return out


def relation(lake, tables):
    """A FROM-clause relation of the rows of `tables`' lake files (none when they have none)."""
    files = lake_files(os.path.abspath(lake), tables)
    if not files:
        cols = ", ".join(f"NULL::{t} AS {c}" for c, t in COLUMNS)
        return f"(SELECT {cols} WHERE false)"
    quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"read_parquet([{quoted}], hive_partitioning = false)"


def substitute(sql, lake):
    """checks.sql or scan.sql with ${FILES:table,...} read from `lake`."""
    return re.sub(r"\$\{FILES:([a-z,]+)\}", lambda m: relation(lake, m.group(1).split(",")), sql)


def sql_text(lake, now_ms):
    with open(os.path.join(HERE, "checks.sql")) as f:
        sql = f.read()
    return substitute(sql, lake).replace("${NOW_MS}", str(int(now_ms)))


def connect(threads=None, memory_limit=None):
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    # Spill next to other temporary files, never into the working directory (an in-memory
    # database's default is ./.tmp, and DuckDB spills past its default limit too).
    spill = os.path.join(os.environ.get("TMPDIR", "/var/tmp"), f"duckdb-spill-{os.getpid()}")
    con.execute(f"SET temp_directory = '{spill}'")
    atexit.register(shutil.rmtree, spill, True)
    return con


def scan(lake, threads=None, memory_limit=None):
    con = connect(threads, memory_limit)
    with open(os.path.join(HERE, "scan.sql")) as f:
        sql = substitute(f.read(), lake)
    started = time.monotonic()
    rows, int_sum, string_bytes = con.execute(sql).fetchone()
    secs = time.monotonic() - started
    print(f"duckdb {duckdb.__version__} scan {lake}: {rows} rows, int sum {int_sum}, "
          f"{string_bytes} string bytes, {secs:.2f} s, {rows / max(secs, 1e-9):.0f} rows/s")
    return 0


def run(lake, now_ms, threads=None, memory_limit=None):
    con = connect(threads, memory_limit)
    sql = sql_text(lake, now_ms)  # the files listed before the clock starts, as for the scan
    started = time.monotonic()
    con.execute(sql)
    elapsed = time.monotonic() - started
    rows = con.execute(
        "SELECT chk, code, key, seq, event_id, detail FROM findings ORDER BY ALL"
    ).fetchall()
    stats = dict(zip(["rows_read", "distinct_rows", "streams"], con.execute("SELECT * FROM stats").fetchone()))
    return rows, stats, elapsed


def golden():
    """The canonical encoding of checks.sql, applied to the golden vectors (JSON lines)."""
    sql = open(os.path.join(HERE, "checks.sql")).read()
    start = sql.index("canon AS (")
    canon = sql[start + len("canon AS (") : sql.index("    FROM raw\n", start)]
    con = duckdb.connect()
    bad = 0
    n = 0
    gdir = os.path.join(ROOT, "edge", "events", "golden", "v1")
    cols = {
        "v": "USMALLINT", "event_id": "VARCHAR", "stream": "VARCHAR", "stream_key": "VARCHAR",
        "seq": "BIGINT", "kind": "VARCHAR", "occurred_at_ms": "BIGINT", "currency": "VARCHAR",
        "amount": "BIGINT", "balance_after": "BIGINT", "held_after": "BIGINT",
        "overdraft_limit": "BIGINT", "entry_id": "VARCHAR", "transfer_id": "VARCHAR",
        "counterparty": "VARCHAR", "source": "VARCHAR", "destination": "VARCHAR",
        "deadline_ms": "BIGINT", "reason": "VARCHAR", "prev_hash": "VARCHAR", "hash": "VARCHAR",
    }
    spec = "{" + ", ".join(f"'{k}': '{t}'" for k, t in cols.items()) + "}"
    for name in sorted(os.listdir(gdir)):
        if not name.endswith(".jsonl"):
            continue
        path = os.path.join(gdir, name).replace("'", "''")
        q = (
            f"WITH raw AS (SELECT * FROM read_json('{path}', format = 'newline_delimited', columns = {spec})), "
            f"canon AS ({canon} FROM raw) "
            "SELECT event_id, hash, sha256(text) AS computed FROM canon"
        )
        for event_id, recorded, computed in con.execute(q).fetchall():
            n += 1
            if recorded != computed:
                bad += 1
                print(f"MISMATCH {name} {event_id}: recorded {recorded}, SQL {computed}")
    print(f"golden vectors: {n} events, {n - bad} hashes reproduced by the SQL encoding")
    return 0 if bad == 0 and n > 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lake", nargs="?")
    ap.add_argument("--now-ms", type=int)
    ap.add_argument("--json", help="write {stats, counts, findings} to this file")
    ap.add_argument("--compare", help="reconcile --json report of the same lake and --now-ms")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 2GB (default: DuckDB's, 80%% of RAM)")
    ap.add_argument("--golden", action="store_true")
    ap.add_argument("--scan", action="store_true", help="run scan.sql (the floor) instead of the checks")
    args = ap.parse_args()
    if args.golden:
        return golden()
    if args.scan and args.lake:
        return scan(args.lake, args.threads, args.memory_limit)
    if not args.lake or args.now_ms is None:
        ap.error("LAKE and --now-ms are required")
    rows, stats, elapsed = run(args.lake, args.now_ms, args.threads, args.memory_limit)
    counts = collections.Counter(r[0] for r in rows)
    print(
        f"duckdb {duckdb.__version__} {args.lake}: {stats['rows_read']} rows read, "
        f"{stats['distinct_rows']} distinct, {stats['streams']} streams, {elapsed:.1f} s"
    )
    for c in CHECKS:
        n = counts.get(c, 0)
        print(f"  {'held' if n == 0 else 'VIOLATED':8}  {c:26} {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"stats": stats, "elapsed_s": elapsed, "counts": {c: counts.get(c, 0) for c in CHECKS},
                 "findings": [dict(zip(["check", "code", "key", "seq", "event_id", "detail"], r)) for r in rows]},
                f, indent=1, default=str)
    if not args.compare:
        return 0 if not rows else 1
    with open(args.compare) as f:
        rep = json.load(f)
    if rep.get("now_ms") != args.now_ms:
        print(f"warning: the report was judged at now_ms {rep.get('now_ms')}, not {args.now_ms}")
    ok = True
    # The event id too: a transfer's finding on one of its account rows carries that account's
    # seq, and only the event id names the account.
    mine = collections.Counter((r[0], r[1], r[2], r[3], r[4]) for r in rows)
    theirs = collections.Counter()
    for chk in rep["checks"]:
        n = counts.get(chk["name"], 0)
        if chk["violations"] != n or chk["holds"] != (n == 0):
            ok = False
            print(f"DIFF {chk['name']}: reconcile {chk['violations']}, SQL {n}")
        for fd in chk["findings"]:
            theirs[(chk["name"], fd["code"], fd["key"], fd.get("seq"), fd.get("event_id"))] += 1
    for k in sorted((mine - theirs).keys(), key=str):
        ok = False
        print(f"DIFF only in SQL: {k}")
    for k in sorted((theirs - mine).keys(), key=str):
        ok = False
        print(f"DIFF only in reconcile: {k}")
    st = rep["stats"]
    if (st["rows_read"], st["distinct_rows"], st["streams"]) != (
        stats["rows_read"], stats["distinct_rows"], stats["streams"]):
        ok = False
        print(f"DIFF stats: reconcile {st}, SQL {stats}")
    print("agree: same verdicts, counts and findings" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
