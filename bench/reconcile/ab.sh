#!/usr/bin/env bash
# Interleaved A/B rounds of the full proof against DuckDB's plain scan, for comparing builds of
# `reconcile` on one lake in one invocation (a host's speed drifts between invocations, so
# only ratios within one compare: docs/BENCHMARKS.md).
#
#   bash bench/reconcile/ab.sh LAKE ROUNDS BIN...
#
# Each round: DuckDB's scan of the columns the checks read (duckdb_checks.py LAKE --scan), then
# each BIN's full proof (BIN LAKE --now-ms 4102444800000). One line per round on stdout: the
# scan's wall time, and per BIN its wall time (user + system CPU), peak RSS, wall / scan, exit.
# Needs /usr/bin/time and the DuckDB reader (scripts/install-lake-readers.sh).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 LAKE ROUNDS BIN..." >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LAKE=$1; ROUNDS=$2; shift 2
PY="${PYTHON:-python3}"
T="$(mktemp -d "${TMPDIR:-/tmp}/reconcile-ab.XXXXXX")"
trap 'rm -rf "$T"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  /usr/bin/time -f '%e %U %S %M' -o "$T/scan" "$PY" "$HERE/duckdb_checks.py" "$LAKE" --scan >/dev/null 2>&1
  read -r d _ < "$T/scan"
  line="round $r: DuckDB scan $d s"
  for b in "$@"; do
    rc=0
    /usr/bin/time -f '%e %U %S %M' -o "$T/proof" "$b" "$LAKE" --now-ms 4102444800000 >/dev/null 2>"$T/err" || rc=$?
    read -r e u s m < "$T/proof"
    line="$line | $(basename "$b"): $e s ($u + $s) $((m / 1024)) MB x$("$PY" -c "print(f'{$e / $d:.2f}')") exit $rc"
  done
  echo "$line"
done
