#!/usr/bin/env bash
# Interleaved A/B rounds of the full proof against DuckDB's plain scan, for comparing builds of
# `reconcile` on one lake in one invocation (a host's speed drifts between invocations, so
# only ratios within one compare: docs/BENCHMARKS.md).
#
#   bash bench/reconcile/ab.sh LAKE ROUNDS BIN...
#
# First one untimed pass of the scan and of each BIN (the page cache warm for every round).
# Then each round: DuckDB's scan of the columns the checks read (duckdb_checks.py LAKE --scan),
# then each BIN's full proof (BIN LAKE --now-ms 4102444800000), the BINs in turn first (round r
# starts at BIN r mod n), all under `nice -n 10` as scripts/bench-reconcile.sh runs them. One
# line per round on stdout: the scan's time inside DuckDB (without Python's start and
# `import duckdb`, which its process time also holds), and per BIN its wall time (user + system
# CPU), peak RSS, wall / scan, exit. Needs /usr/bin/time and the DuckDB reader
# (scripts/install-lake-readers.sh).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 LAKE ROUNDS BIN..." >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LAKE=$1; ROUNDS=$2; shift 2
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ab: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2; }
BINS=("$@")
PY="${PYTHON:-python3}"
T="$(mktemp -d "${TMPDIR:-/tmp}/reconcile-ab.XXXXXX")"
trap 'rm -rf "$T"' EXIT
scan() { # prints the scan's seconds inside DuckDB
  nice -n 10 "$PY" "$HERE/duckdb_checks.py" "$LAKE" --scan 2>/dev/null | sed -n 's/.*, \([0-9.]*\) s, [0-9]* rows\/s$/\1/p'
}
proof() { # BIN: runs the full proof, its figures in $T/proof
  /usr/bin/time -f '%e %U %S %M' -o "$T/proof" nice -n 10 "$1" "$LAKE" --now-ms 4102444800000 >/dev/null 2>"$T/err"
}
scan >/dev/null
for b in "${BINS[@]}"; do proof "$b" || true; done
n=${#BINS[@]}
for r in $(seq 1 "$ROUNDS"); do
  d=$(scan)
  [ -n "$d" ] || { echo "ab: the DuckDB scan printed no time" >&2; exit 2; }
  line="round $r: DuckDB scan $d s"
  for ((k = 0; k < n; k++)); do
    b=${BINS[$(( (r + k) % n ))]}
    rc=0
    proof "$b" || rc=$?
    read -r e u s m < "$T/proof"
    line="$line | $(basename "$b"): $e s ($u + $s) $((m / 1024)) MB x$("$PY" -c "print(f'{$e / $d:.2f}')") exit $rc"
  done
  echo "$line"
done
