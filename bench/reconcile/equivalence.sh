#!/usr/bin/env bash
# Equivalence of bench/reconcile/checks.sql (DuckDB) and `reconcile`: on a generated clean lake
# on one with sagas in progress (`generate --in-flight`), and on one corrupted copy per class
# (`reconcile-testdata corrupt --class X`), both must give
# the same verdict and count per check and the same findings (check, code, key, seq, event id).
# Small lakes: runs in seconds once the binaries are built.
#
#   bash bench/reconcile/equivalence.sh [BIN_DIR]    # BIN_DIR holds reconcile and reconcile-testdata
#
# Then ROUNDS random rounds (`reconcile-testdata mutate`: EDITS random edits of random events
# per round, seeded by the round number plus SEED, of the clean lake for odd seeds and of the
# one with sagas in progress for even ones), compared the same way: a differential test where
# each engine is the other's oracle.
#
# Env: OPERATIONS (default 3000), ACCOUNTS (default 30), ROUNDS (default 0), EDITS (default 3),
# SEED (default 0), PYTHON (default python3).
# Exit 0 when every lake agrees, 1 otherwise.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
PY="${PYTHON:-python3}"
NOW_MS=1798761600000 # 2027-01-01T00:00:00Z, after every generated deadline
for b in reconcile reconcile-testdata; do
  [ -x "$BIN/$b" ] || { echo "equivalence: $BIN/$b not found; build with cargo build --release -p ledger-reconcile --bins" >&2; exit 2; }
done
# Every class the corruption tool knows (its --class values), but those that need sagas in
# progress (released-twice, credit-elsewhere), which run on that lake below: a class added to
# the tool is compared here without a list to keep up to date.
IN_FLIGHT_CLASSES="released-twice credit-elsewhere"
CLASSES="$("$BIN/reconcile-testdata" corrupt --help | sed -n 's/^ *- \([a-z][a-z-]*\)\(:.*\)\{0,1\}$/\1/p' | grep -vxF -e released-twice -e credit-elsewhere | tr '\n' ' ')"
case " $CLASSES " in
  *" gap "*" reason-changed "*) ;;
  *) echo "equivalence: could not read the classes from reconcile-testdata corrupt --help (got: $CLASSES)" >&2; exit 2 ;;
esac
bash "$ROOT/scripts/install-lake-readers.sh"
W="$(mktemp -d "${TMPDIR:-/tmp}/reconcile-equiv.XXXXXX")"
trap 'rm -rf "$W"' EXIT
"$PY" "$HERE/duckdb_checks.py" --golden
"$BIN/reconcile-testdata" generate "$W/clean" --operations "${OPERATIONS:-3000}" --accounts "${ACCOUNTS:-30}" --duplicates 25 >/dev/null
fail=0
check() { # name lake
  local name=$1 lake=$2 rc=0
  "$BIN/reconcile" "$lake" --json "$W/$name.json" --now-ms "$NOW_MS" --quiet >/dev/null || rc=$?
  [ "$rc" -le 1 ] || { echo "equivalence: reconcile exit $rc on $name" >&2; fail=1; return; }
  if "$PY" "$HERE/duckdb_checks.py" "$lake" --now-ms "$NOW_MS" --compare "$W/$name.json" >"$W/$name.out"; then
    printf '%-16s agree   %s\n' "$name" "$(grep -E 'VIOLATED' "$W/$name.out" | awk '{print $2"="$3}' | tr '\n' ' ')"
  else
    printf '%-16s DISAGREE\n' "$name"; cat "$W/$name.out"; fail=1
  fi
}
check clean "$W/clean"
# A lake read while sagas run: the transfers of the last 200 operations stopped mid-saga
# (money in flight, captures committed but not recorded; dangling at NOW_MS).
"$BIN/reconcile-testdata" generate "$W/in-flight" --operations "${OPERATIONS:-3000}" --accounts "${ACCOUNTS:-30}" --duplicates 25 --in-flight 200 >/dev/null
check in-flight "$W/in-flight"
for c in $CLASSES; do
  "$BIN/reconcile-testdata" corrupt "$W/clean" "$W/$c" --class "$c" --now-ms "$NOW_MS" >/dev/null
  check "$c" "$W/$c"
done
# A hold released twice needs money held at the end, a credit elsewhere a credit committed for
# a transfer not yet recorded as credited: the lake with sagas in progress.
for c in $IN_FLIGHT_CLASSES; do
  "$BIN/reconcile-testdata" corrupt "$W/in-flight" "$W/$c" --class "$c" --now-ms "$NOW_MS" >/dev/null
  check "$c" "$W/$c"
done
for r in $(seq 1 "${ROUNDS:-0}"); do
  seed=$(( ${SEED:-0} + r ))
  # Odd seeds edit the clean lake, even ones the lake with sagas in progress.
  base=clean; [ $(( seed % 2 )) = 0 ] && base=in-flight
  "$BIN/reconcile-testdata" mutate "$W/$base" "$W/random-$seed" --seed "$seed" --count "${EDITS:-3}" >"$W/random-$seed.edits"
  before=$fail
  check "random-$seed" "$W/random-$seed"
  [ "$fail" = "$before" ] || sed 's/^/  edit: /' "$W/random-$seed.edits"
  rm -rf "$W/random-$seed"
done
[ "$fail" = 0 ] && echo "equivalence: SQL and reconcile agree on the clean lake and every class" || echo "equivalence: FAILED"
exit "$fail"
