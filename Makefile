# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The SAM CLI pins boto3 below the range relayflow needs, so it lives in its own tool venv
# (inside .venv, so `make clean` removes it and git ignores it).
SAM_CLI_VERSION := 1.170.0
SAM_VENV := $(VENV)/tools/sam
SAM := $(SAM_VENV)/bin/sam
SAM_STAMP := $(SAM_VENV)/.installed-$(SAM_CLI_VERSION)

.PHONY: venv demo test lint format bench clean sam-cli sam-validate sam-build cold-start browser

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(BIN)/relayflow validate workflows/examples/*.yaml
	$(BIN)/relayflow run workflows/examples/order_triage.yaml --input @events/examples/order_triage.json
	$(BIN)/relayflow run workflows/examples/order_fulfilment.yaml --input @events/examples/order_fulfilment.json \
		--resources workflows/examples/local/order_fulfilment.resources.yaml
	$(BIN)/relayflow run workflows/examples/order_shipping.yaml --input @events/examples/order_shipping.json
	$(BIN)/relayflow run workflows/examples/support_triage.yaml --input @events/examples/support_triage.json \
		--resources workflows/examples/local/support_triage.resources.yaml

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# tests/deploy runs `sam validate --lint` and `sam build`: the SAM CLI comes first. The guest
# approval page is tested in headless Chromium: the browser comes first too.
test: lint sam-cli browser
	RELAYFLOW_REQUIRE_CHROMIUM=1 $(BIN)/python -m pytest -n auto -q

bench: venv
	$(BIN)/python bench/compile_bench.py
	$(BIN)/python bench/runtime_bench.py
	$(BIN)/python bench/cost_bench.py

# Debian's Chromium for tests/integration/test_approval_page_browser.py (run as root, as CI
# does); nothing happens when it is installed already.
browser:
	@test -x /usr/bin/chromium || { \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
			> /dev/null; }

sam-cli: $(SAM_STAMP)

$(SAM_STAMP):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/python -m pip install --quiet 'aws-sam-cli==$(SAM_CLI_VERSION)'
	touch $(SAM_STAMP)

sam-validate: sam-cli
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint
	$(SAM_VENV)/bin/cfn-lint template.yaml

# Needs python3.12 on PATH (the functions' runtime); output in .aws-sam/build.
sam-build: sam-cli
	SAM_CLI_TELEMETRY=0 $(SAM) build

cold-start: venv
	$(BIN)/python bench/cold_start.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
