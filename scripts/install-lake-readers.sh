#!/usr/bin/env bash
# Install the independent lake reader the ingest tests compare against: DuckDB's Python package
# from PyPI, pinned. Idempotent: skips when the pinned version already imports. Progress on
# stderr. Called by ingest/core/tests/independent_reader.rs before it runs
# scripts/lake-read-duckdb.py; safe to call from `make test` too.
#
# Env: PYTHON (default python3).
set -euo pipefail
DUCKDB_VERSION=2.0.1
PY="${PYTHON:-python3}"
log() { printf '[install-lake-readers] %s\n' "$*" >&2; }

command -v "$PY" >/dev/null || { log "$PY not found: install Python 3 (>= 3.9)"; exit 1; }
if "$PY" -c "import duckdb, sys; sys.exit(0 if duckdb.__version__ == '$DUCKDB_VERSION' else 1)" 2>/dev/null; then
  log "skip: duckdb $DUCKDB_VERSION already importable by $PY"
else
  log "$PY -m pip install duckdb==$DUCKDB_VERSION"
  "$PY" -m pip install --quiet --disable-pip-version-check "duckdb==$DUCKDB_VERSION" >&2
  "$PY" -c "import duckdb; print('[install-lake-readers] ok: duckdb', duckdb.__version__)" >&2
fi
