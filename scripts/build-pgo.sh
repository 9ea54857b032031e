#!/usr/bin/env bash
# Builds `reconcile` with profile-guided optimisation (docs/BENCHMARKS.md, "Thirty-ninth
# session"): an instrumented build proves a small generated training lake (its own seed, not
# the benchmark's lake) and resumes from that proof's checkpoint, and the profile those runs
# leave guides a second release build. Same source, same results: only the code layout and
# inlining follow the profile. Prints the optimised binary's path on stdout; logs on stderr.
#
#   bash scripts/build-pgo.sh                   # → /var/tmp/ledger-target-pgo/release/reconcile
#
# Env:
#   PGO_TARGET_DIR   the optimised build's target dir (default /var/tmp/ledger-target-pgo); the
#                    instrumented build uses "$PGO_TARGET_DIR-gen"
#   CARGO_TARGET_DIR the plain release build that generates the training lake (default
#                    /var/tmp/ledger-target-release)
#   TRAIN_EVENTS     the training lake's size in events (default 1000000)
#   TRAIN_LAKE       where it is kept (default /var/tmp/pgo-train-lake-$TRAIN_EVENTS; generated
#                    once, reused)
#   PGO_RETRAIN=1    make the profile again (it is kept in $PGO_TARGET_DIR.profdata and reused:
#                    rustc rebuilds every crate when it changes)
#
# Needs llvm-profdata of rustc's own LLVM: the rustup component llvm-tools, added when missing
# (its download needs the network once). Each build is a full release build (~20 min on 2 cores
# the first time).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[build-pgo] %s\n' "$*" >&2; }
PGO_TARGET_DIR="${PGO_TARGET_DIR:-/var/tmp/ledger-target-pgo}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/ledger-target-release}"
TRAIN_EVENTS="${TRAIN_EVENTS:-1000000}"
TRAIN_LAKE="${TRAIN_LAKE:-/var/tmp/pgo-train-lake-$TRAIN_EVENTS}"
NOW_MS=4102444800000

host="$(rustc -vV | sed -n 's/^host: //p')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  log "adding the rustup component llvm-tools (llvm-profdata)"
  rustup component add llvm-tools >&2 || {
    log "cannot add llvm-tools: PGO needs llvm-profdata of rustc's LLVM ($profdata)"
    exit 2
  }
fi

# The training lake: generated and compacted as the benchmark's lakes are, at another seed.
if [ ! -f "$TRAIN_LAKE/.pgo-train" ]; then
  log "building the generator and ledger-compact (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
  (cd "$ROOT" && cargo build --release -q -p ledger-reconcile -p ledger-compact --bins)
  bin="$CARGO_TARGET_DIR/release"
  rm -rf "$TRAIN_LAKE" && mkdir -p "$TRAIN_LAKE"
  ops=$((TRAIN_EVENTS / 3))
  args=(--seed 7 --accounts $((TRAIN_EVENTS / 5000 < 20 ? 20 : TRAIN_EVENTS / 5000)) --operations "$ops"
    --batches $(((TRAIN_EVENTS + 9999) / 10000)) --duplicates $((TRAIN_EVENTS / 1000))
    --step-ms $((30 * 86400000 / ops > 0 ? 30 * 86400000 / ops : 1)))
  log "generating the training lake: reconcile-testdata generate $TRAIN_LAKE ${args[*]}"
  "$bin/reconcile-testdata" generate "$TRAIN_LAKE" "${args[@]}" >/dev/null
  "$bin/ledger-compact" --lake "$TRAIN_LAKE" >/dev/null 2>&1
  echo "reconcile-testdata generate ${args[*]}, compacted" >"$TRAIN_LAKE/.pgo-train"
fi

# rustc tracks the profile as an input: a new one rebuilds every crate. So the profile is made
# once and kept; after changes to the code, PGO_RETRAIN=1 makes it again (a stale profile still
# builds a correct binary: code it does not match is optimised without it).
if [ -f "$PGO_TARGET_DIR.profdata" ] && [ "${PGO_RETRAIN:-0}" != 1 ]; then
  log "optimised build with the kept profile $PGO_TARGET_DIR.profdata (PGO_RETRAIN=1 makes it again)"
  (cd "$ROOT" && CARGO_TARGET_DIR="$PGO_TARGET_DIR" RUSTFLAGS="-Cprofile-use=$PGO_TARGET_DIR.profdata" \
    cargo build --release -q -p ledger-reconcile --bin reconcile)
  echo "$PGO_TARGET_DIR/release/reconcile"
  exit 0
fi
raw="$PGO_TARGET_DIR-gen/pgo-raw"
rm -rf "$raw" && mkdir -p "$raw"
log "instrumented build (CARGO_TARGET_DIR=$PGO_TARGET_DIR-gen)"
(cd "$ROOT" && CARGO_TARGET_DIR="$PGO_TARGET_DIR-gen" RUSTFLAGS="-Cprofile-generate=$raw" \
  cargo build --release -q -p ledger-reconcile --bin reconcile)
W="$(mktemp -d "${TMPDIR:-/tmp}/build-pgo.XXXXXX")"
trap 'rm -rf "$W"' EXIT
# The nightly job's two shapes: a full proof that writes its checkpoint, then a night resumed
# from it. Exit 0 or 1 (a verdict) is a profile; 2 is not.
for night in full resumed; do
  log "training run: $night"
  rc=0
  "$PGO_TARGET_DIR-gen/release/reconcile" "$TRAIN_LAKE" --now-ms "$NOW_MS" \
    --checkpoint "$W/checkpoint" >/dev/null 2>"$W/$night.err" || rc=$?
  [ "$rc" -le 1 ] || { log "the $night training run failed (exit $rc): $(tail -3 "$W/$night.err")"; exit 2; }
done
"$profdata" merge -o "$W/merged.profdata" "$raw"
cp "$W/merged.profdata" "$PGO_TARGET_DIR.profdata"
log "optimised build (CARGO_TARGET_DIR=$PGO_TARGET_DIR, profile $PGO_TARGET_DIR.profdata)"
(cd "$ROOT" && CARGO_TARGET_DIR="$PGO_TARGET_DIR" RUSTFLAGS="-Cprofile-use=$PGO_TARGET_DIR.profdata" \
  cargo build --release -q -p ledger-reconcile --bin reconcile)
echo "$PGO_TARGET_DIR/release/reconcile"
