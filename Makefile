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
# AWS's ASL language service and asl-validator (npm), pinned by tools/asl/package-lock.json and
# installed with `npm ci` into a tool folder inside .venv; the stamp follows the lockfile.
ASL_TOOLS := $(VENV)/tools/asl
ASL_STAMP := $(ASL_TOOLS)/.installed-stamp

# The functions' runtime, python3.12, with the layer's requirements (and boto3, which Lambda's
# runtime brings): tests/deploy/test_sam_local_invoke.py runs each built handler in it.
# LAMBDA_BOTO3 is the SDK the runtime is taken to ship. AWS publishes no fixed figure any more
# (docs.aws.amazon.com/lambda/latest/dg/lambda-python.html, "Runtime-included SDK versions":
# it depends on the runtime release and the region; a function printing boto3.__version__
# tells). 1.44.8 is the version this tool venv was installed with, which is also the lowest
# relayflow supports (pyproject: boto3>=1.44): a region whose runtime ships an older SDK needs
# boto3 in the layer. tests/deploy/test_sam_local_invoke.py checks the venv holds this pin.
LAMBDA_BOTO3 := 1.44.8
LAMBDA_PY := $(VENV)/tools/lambda-py312
LAMBDA_PY_STAMP := $(LAMBDA_PY)/.installed-stamp
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12.*/bin/python3.12) python3.12)

# checkov (static analysis of the SAM-translated template), pinned, in its own tool venv.
CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := $(VENV)/tools/checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)

.PHONY: venv demo test lint format bench clean sam-cli sam-validate sam-build cold-start browser console-screenshots lambda-python checkov \
	asl-tools

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
# approval page is tested in headless Chromium: the browser comes first too. Compiled machines
# are checked by AWS's own ASL validators (tests/deploy/test_asl_validators.py): those first too.
test: lint sam-cli lambda-python checkov browser asl-tools
	RELAYFLOW_REQUIRE_CHROMIUM=1 RELAYFLOW_REQUIRE_ASL_TOOLS=1 $(BIN)/python -m pytest -n auto -q

# Every bench in its own process (the list is bench/run.py's BENCHES), logs quieted and kept
# in .bench/; a failing bench does not stop the others, and the target fails at the end.
# cold_start.py measures what `sam build` makes, in the functions' python3.12: those first.
bench: venv sam-cli lambda-python
	$(BIN)/python bench/run.py

# Debian's Chromium for tests/integration/test_approval_page_browser.py (run as root, as CI
# does); nothing happens when it is installed already.
browser:
	@test -x /usr/bin/chromium || { \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
			> /dev/null; }

# The screenshots in docs/console.md, taken by the console's browser tests.
console-screenshots: venv browser
	RELAYFLOW_REQUIRE_CHROMIUM=1 RELAYFLOW_CONSOLE_SCREENSHOTS=docs/console $(BIN)/python -m pytest \
		-n 0 -q -p no:randomly tests/integration/test_console_browser.py

sam-cli: $(SAM_STAMP)

$(SAM_STAMP):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/python -m pip install --quiet 'aws-sam-cli==$(SAM_CLI_VERSION)'
	touch $(SAM_STAMP)

checkov: $(CHECKOV_STAMP)

$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch $(CHECKOV_STAMP)

lambda-python: $(LAMBDA_PY_STAMP)

$(LAMBDA_PY_STAMP): shared/requirements.txt
	$(PYTHON312) -m venv $(LAMBDA_PY)
	$(LAMBDA_PY)/bin/python -m pip install --quiet --upgrade pip
	$(LAMBDA_PY)/bin/python -m pip install --quiet -r shared/requirements.txt \
		'boto3==$(LAMBDA_BOTO3)' 'botocore==$(LAMBDA_BOTO3)'
	touch $(LAMBDA_PY_STAMP)

asl-tools: $(ASL_STAMP)

$(ASL_STAMP): tools/asl/package.json tools/asl/package-lock.json
	mkdir -p $(ASL_TOOLS)
	cp tools/asl/package.json tools/asl/package-lock.json $(ASL_TOOLS)/
	npm ci --prefix $(ASL_TOOLS) --no-audit --no-fund --loglevel=error
	touch $(ASL_STAMP)

# cfn-lint on template.yaml and on what CloudFormation receives (the SAM-translated template:
# only there do reference cycles and the generated resources show).
sam-validate: sam-cli
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint
	$(SAM_VENV)/bin/cfn-lint template.yaml
	mkdir -p .aws-sam
	$(SAM_VENV)/bin/python tests/deploy/sam_translate.py > .aws-sam/translated.json
	$(SAM_VENV)/bin/cfn-lint --non-zero-exit-code error .aws-sam/translated.json

# Needs python3.12 on PATH (the functions' runtime); output in .aws-sam/build.
sam-build: sam-cli
	SAM_CLI_TELEMETRY=0 $(SAM) build

cold-start: venv
	$(BIN)/python bench/cold_start.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
