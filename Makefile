# The two commands of the quickstart:
#   make demo   run the main job end to end on local defaults
#   make test   every test: native (core, schema, simulation, ingest, compaction, DuckDB as an
#               independent lake reader), wasm purity and the ingest core under V8, the edge on workerd
# Deeper simulation: SIM_SEEDS=100000 make test-native

SHELL := /bin/bash
.PHONY: test test-native check-core toolchain test-edge demo

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
