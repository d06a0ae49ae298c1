# Quick start: `make standalone` runs a broker, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install standalone test unit integration proto proto-check bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

standalone: $(STAMP)
	$(BIN)/magnetar standalone --data-dir ./data --port 6650 --admin-port 8080

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

bench: $(STAMP)
	$(BIN)/python bench/produce_throughput.py

clean:
	rm -rf $(VENV) build *.egg-info
