#!/usr/bin/env python3
"""Read a lake directory with DuckDB (an independent Parquet reader) and print, as JSON, what
the ingest tests compare with their own reading: per table, the row count, the sum of `amount`,
the column types, the partitions, the rows and conflicts left by the dedup rule of docs/LAKE.md, and the exact (event_id, hash, conflict) rows in lake order.

Usage: lake-read-duckdb.py LAKE_DIR [--rows]    (reads LAKE_DIR/events/{table}/date=*/*.parquet)

--rows adds, per table, "events": every deduplicated row (the schema columns, by name), ordered by
stream_key, seq, hash — what the consumer Worker's runtime tests compare with the edge's events.
Exit: 0 ok, 2 error (message on stderr).
"""
import json
import os
import sys

try:
    import duckdb
except ImportError:
    sys.stderr.write("duckdb is not installed: run bash scripts/install-lake-readers.sh\n")
    sys.exit(2)


def main(lake, with_rows=False):
    con = duckdb.connect()
    out = {}
    root = os.path.join(lake, "events")
    for table in sorted(os.listdir(root)):
        glob = os.path.join(root, table, "date=*", "*.parquet")
        src = f"read_parquet('{glob}', hive_partitioning = true)"
        types = {name: typ for name, typ, *_ in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
        count, amount_sum = con.execute(f"SELECT count(*), sum(amount) FROM {src}").fetchone()
        dates = [r[0] for r in con.execute(f"SELECT DISTINCT CAST(date AS VARCHAR) FROM {src} ORDER BY 1").fetchall()]
        rows = con.execute(
            f"SELECT event_id, hash, conflict FROM {src} ORDER BY stream, stream_key, seq, hash, conflict"
        ).fetchall()
        # The reader's dedup rule of docs/LAKE.md, verbatim.
        con.execute(
            f"CREATE OR REPLACE VIEW deduped AS SELECT DISTINCT COLUMNS(* EXCLUDE (conflict, date)) FROM {src}"
        )
        distinct_rows = con.execute("SELECT count(*) FROM deduped").fetchone()[0]
        conflict_ids = [r[0] for r in con.execute(
            "SELECT event_id FROM deduped GROUP BY event_id HAVING count(DISTINCT hash) > 1 ORDER BY 1"
        ).fetchall()]
        events = None
        if with_rows:
            cur = con.execute("SELECT * FROM deduped ORDER BY stream_key, seq, hash")
            names = [d[0] for d in cur.description]
            events = [dict(zip(names, r)) for r in cur.fetchall()]
        out[table] = {
            "distinct_rows": distinct_rows,
            "conflict_ids": conflict_ids,
            "rows": count,
            "amount_sum": int(amount_sum) if amount_sum is not None else None,
            "types": types,
            "dates": dates,
            "ids": [[e, h, bool(c)] for e, h, c in rows],
        }
        if events is not None:
            out[table]["events"] = events
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    with_rows = "--rows" in args
    args = [a for a in args if a != "--rows"]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        sys.exit(2)
    try:
        main(args[0], with_rows)
    except Exception as e:  # an unreadable file must fail the comparison loudly
        sys.stderr.write(f"lake-read-duckdb: {e}\n")
        sys.exit(2)
