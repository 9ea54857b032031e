#!/usr/bin/env bash
# Install the S3-compatible server the S3 tests run against: moto's server mode from PyPI
# (`moto[server]`), pinned. It stands in for R2's S3 API (no Docker engine is needed). Idempotent:
# skips when the pinned version and its server dependencies already import. Progress on stderr.
# Called by reconcile/tests/s3.rs and ingest/compact/tests/s3.rs before they start
# `python3 -m moto.server` on a free loopback port; safe to call from `make test` too.
#
# Env: PYTHON (default python3).
set -euo pipefail
MOTO_VERSION=5.2.1
PY="${PYTHON:-python3}"
log() { printf '[install-s3-server] %s\n' "$*" >&2; }

command -v "$PY" >/dev/null || { log "$PY not found: install Python 3 (>= 3.9)"; exit 1; }
if "$PY" -c "import moto, moto.server, flask, flask_cors, sys; sys.exit(0 if moto.__version__ == '$MOTO_VERSION' else 1)" 2>/dev/null; then
  log "skip: moto[server] $MOTO_VERSION already importable by $PY"
else
  log "$PY -m pip install moto[server]==$MOTO_VERSION"
  "$PY" -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
  "$PY" -c "import moto, moto.server; print('[install-s3-server] ok: moto', moto.__version__)" >&2
fi
