#!/usr/bin/env bash
# Install the independent Prometheus text-format parser the reconcile metrics test compares
# against: the `prometheus_client` package from PyPI, pinned. Idempotent: skips when the pinned
# version already imports. Progress on stderr. Called by reconcile/tests/outputs.rs; safe to call
# from `make test` too.
#
# Env: PYTHON (default python3).
set -euo pipefail
PROMETHEUS_CLIENT_VERSION=0.26.0
PY="${PYTHON:-python3}"
log() { printf '[install-metrics-reader] %s\n' "$*" >&2; }

command -v "$PY" >/dev/null || { log "$PY not found: install Python 3 (>= 3.9)"; exit 1; }
if "$PY" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('prometheus_client') == '$PROMETHEUS_CLIENT_VERSION' else 1)" 2>/dev/null; then
  log "skip: prometheus_client $PROMETHEUS_CLIENT_VERSION already importable by $PY"
else
  log "$PY -m pip install prometheus_client==$PROMETHEUS_CLIENT_VERSION"
  "$PY" -m pip install --quiet --disable-pip-version-check "prometheus_client==$PROMETHEUS_CLIENT_VERSION" >&2
  "$PY" -c "import importlib.metadata as m; print('[install-metrics-reader] ok: prometheus_client', m.version('prometheus_client'))" >&2
fi
