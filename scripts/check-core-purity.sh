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

# Exceptions, one crate each, with the reason. Proc-macros are left out of the tree
# (`no-proc-macro`): they run on the build host at compile time, never in the wasm module
# (arrow's const-random-macro uses getrandom there, to seed ahash at compile time).
#   ledger-ingest: chrono. arrow-array depends on it unconditionally (its date/time arrays,
#   with chrono's `clock` feature); the ingest core never calls it, which the source check
#   below enforces.
allowed() { case "$1" in ledger-ingest) echo chrono ;; esac; }
src_dir() { case "$1" in ledger-ingest) echo ingest/core/src ;; esac; }

for crate in ledger-events ledger-core ledger-ingest; do
  echo "building $crate for wasm32-unknown-unknown" >&2
  cargo build --quiet -p "$crate" --target wasm32-unknown-unknown
  deps=$(cargo tree -p "$crate" --target wasm32-unknown-unknown -e normal,build,no-proc-macro --prefix none --format '{p}' \
    | awk '{print $1}' | sort -u)
  bad=$(grep -Ex "$FORBIDDEN" <<<"$deps" | grep -vxF "$(allowed "$crate")" || true)
  if [ -n "$(src_dir "$crate")" ] && grep -rnE '\b(chrono|SystemTime|Instant|getrandom|rand)\b' "$(src_dir "$crate")" >&2; then
    echo "error: $crate's source uses a clock or randomness (above); time and randomness must be arguments" >&2
    exit 1
  fi
  if [ -n "$bad" ]; then
    echo "error: $crate depends on $(echo $bad | tr '\n' ' ')for wasm32; the core must not use a runtime, a clock or randomness" >&2
    exit 1
  fi
  note=""; [ -n "$(allowed "$crate")" ] && note=" (except the allowed $(allowed "$crate"), see above)"
  echo "$crate: wasm32 build ok, $(wc -l <<<"$deps") crates in its tree, none of: ${FORBIDDEN//|/, }$note" >&2
done
