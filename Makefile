# Quick start: `make standalone` runs a broker, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install standalone cluster test unit integration proto proto-check bench bench-quick profile clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

standalone: $(STAMP)
	$(BIN)/magnetar standalone --data-dir ./data --port 6650 --admin-port 8080

# A local 3-broker cluster with its own etcd (docs/cluster.md); Ctrl-C stops it all.
cluster: $(STAMP)
	$(BIN)/magnetar cluster up --brokers 3 --data-dir ./cluster-data

test: $(STAMP)
	$(BIN)/python -m pytest -q

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

integration: $(STAMP)
	$(BIN)/python -m pytest -q tests/integration

proto: $(STAMP)
	$(BIN)/python -m magnetar.protocol.generate

proto-check: $(STAMP)
	$(BIN)/python -m magnetar.protocol.generate --check

BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

# Magnetar vs NATS JetStream, every workload (~10 min on 2 cores); see bench/README.md.
bench: $(BENCH_STAMP)
	$(BIN)/python bench/run.py

bench-quick: $(BENCH_STAMP)
	$(BIN)/python bench/run.py --quick

# py-spy profile of the broker under workload 1.
profile: $(BENCH_STAMP)
	$(BIN)/python bench/profile.py

clean:
	rm -rf $(VENV) build *.egg-info
