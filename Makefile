# Both entry points create .venv and install the exact pins on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= configs/embedded.yaml
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

PREFECT_PORT ?= 4200
.PHONY: demo browse test check lint format install clean-out prefect-server deploy worker docs

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/curriculum nightly --profile $(PROFILE)

# The record browser over the demo's catalog (http://127.0.0.1:8765/; BROWSE_PORT to change).
BROWSE_PORT ?= 8765
browse: $(STAMP)
	$(VENV)/bin/curriculum browse --profile $(PROFILE) --port $(BROWSE_PORT)

# The record browser's tests drive Debian's Chromium (through Playwright, pinned in the lock);
# a fresh machine gets it from the system package manager, once.
CHROMIUM ?= /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium

# The suite runs in TEST_WORKERS pytest-xdist workers (one per core here; each loads its own
# embedder and LLM), its heavy fixtures each started once (tests/conftest.py, docs/testing.md);
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS)

test: $(STAMP) $(CHROMIUM)
	CHROMIUM=$(CHROMIUM) $(PYTEST)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The loop for every edit (budget 2 min, 2 min 32 s measured: docs/testing.md): ruff, the docs,
# then the tests that need no model, engine, server, cluster, flow, landed run or crash sweep
# (tiers in tests/conftest.py). `make test` runs everything.
check: $(STAMP) docs
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PYTEST) -m "not slow"

# The documentation site (docs/, mkdocs.yml) into site/, offline; --strict fails on a broken
# link, a missing page or a warning. The reference pages are generated from the code.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Scheduling (docs/operating/scheduling.md): a Prefect server (API + UI), the deployments of
# prefect.yaml, and a worker that runs them. deploy/worker need PREFECT_API_URL set, e.g.
# export PREFECT_API_URL=http://127.0.0.1:$(PREFECT_PORT)/api
prefect-server: $(STAMP)
	$(VENV)/bin/prefect server start --host 127.0.0.1 --port $(PREFECT_PORT)

deploy: $(STAMP)
	$(VENV)/bin/prefect work-pool inspect curriculum >/dev/null 2>&1 || \
		$(VENV)/bin/prefect work-pool create curriculum --type process
	$(VENV)/bin/prefect --no-prompt deploy --all

worker: $(STAMP)
	$(VENV)/bin/prefect worker start --pool curriculum

clean-out:
	rm -rf data/out
