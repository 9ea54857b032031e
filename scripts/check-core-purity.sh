#!/usr/bin/env bash
# The ledger core must stay pure: it builds for wasm32-unknown-unknown and its
# dependency tree for that target contains no Workers runtime, no async
# runtime and no clock or randomness source (time, ids and randomness are
# arguments). Exits non-zero, naming the offender, if that ever changes.
set -euo pipefail
cd "$(dirname "$0")/.."

FORBIDDEN='worker|worker-sys|tokio|async-std|chrono|time|instant|web-time|js-sys|wasm-bindgen|getrandom|rand'

rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || { echo "installing the wasm32-unknown-unknown target" >&2; rustup target add wasm32-unknown-unknown >&2; }

for crate in ledger-events ledger-core; do
  echo "building $crate for wasm32-unknown-unknown" >&2
  cargo build --quiet -p "$crate" --target wasm32-unknown-unknown
  deps=$(cargo tree -p "$crate" --target wasm32-unknown-unknown -e normal,build --prefix none --format '{p}' \
    | awk '{print $1}' | sort -u)
  bad=$(grep -Ex "$FORBIDDEN" <<<"$deps" || true)
  if [ -n "$bad" ]; then
    echo "error: $crate depends on $(echo $bad | tr '\n' ' ')for wasm32; the core must not use a runtime, a clock or randomness" >&2
    exit 1
  fi
  echo "$crate: wasm32 build ok, $(wc -l <<<"$deps") crates in its tree, none of: ${FORBIDDEN//|/, }" >&2
done
