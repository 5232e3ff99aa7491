# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv demo test lint format bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(BIN)/relayflow validate workflows/examples/*.yaml
	$(BIN)/relayflow run workflows/examples/order_triage.yaml --input @events/examples/order_triage.json

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: lint
	$(BIN)/python -m pytest -n auto -q

bench: venv
	$(BIN)/python bench/compile_bench.py
	$(BIN)/python bench/runtime_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
