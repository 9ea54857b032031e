#!/usr/bin/env bash
# Build a Worker crate with worker-build into CRATE_DIR/build/ (index.js + index_bg.wasm).
# Usage: build-edge.sh [CRATE_DIR]   (relative to the repo root; default edge/worker, e.g.
# ingest/worker for the queue consumer). Release profile; wasm-opt is skipped unless EDGE_OPT=1.
#
# Env:
#   EDGE_TARGET_DIR   default /var/tmp/ledger-target-wasm (outside the clone, so repeated builds
#                     on the same machine are incremental; a fresh machine builds from scratch)
#   EDGE_OPT=1        run wasm-opt (binaryen from node_modules) — ~40 s more, smaller wasm
#   WASM_BINDGEN_BIN / WASM_OPT_BIN  override the tool paths
# worker-build would otherwise try to download wasm-bindgen / wasm-opt from GitHub (fails here).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRATE_DIR="${1:-edge/worker}"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
log() { printf '[build-edge] %s\n' "$*" >&2; }

# Its own variable: the native workspace's CARGO_TARGET_DIR (set by .ci/run) must not be shared
# with this separate workspace, whose dependency features differ.
export CARGO_TARGET_DIR="${EDGE_TARGET_DIR:-/var/tmp/ledger-target-wasm}"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$CARGO_BIN/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$ROOT/node_modules/.bin/wasm-opt}"

missing=()
command -v worker-build >/dev/null || missing+=("worker-build")
[[ -x "$WASM_BINDGEN_BIN" ]] || missing+=("wasm-bindgen ($WASM_BINDGEN_BIN)")
if [[ "${EDGE_OPT:-0}" == 1 && ! -x "$WASM_OPT_BIN" ]]; then missing+=("wasm-opt ($WASM_OPT_BIN)"); fi
if (( ${#missing[@]} )); then
  log "missing: ${missing[*]} — run: bash scripts/install-toolchain.sh"
  exit 1
fi

args=(--release)
if [[ "${EDGE_OPT:-0}" == 1 ]]; then
  log "wasm-opt ON ($WASM_OPT_BIN)"
else
  args+=(--no-opt)
  log "wasm-opt OFF (--no-opt; set EDGE_OPT=1 to optimise)"
fi

cd "$ROOT/$CRATE_DIR"
log "$CRATE_DIR: worker-build ${args[*]} (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
s=$SECONDS
worker-build "${args[@]}"
for f in build/index.js build/index_bg.wasm; do
  [[ -s "$f" ]] || { log "expected output $f is missing"; exit 1; }
done
log "$CRATE_DIR built in $((SECONDS - s)) s: $(du -h build/index_bg.wasm | cut -f1) wasm"
