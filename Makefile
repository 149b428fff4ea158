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

# uv installs the lock's wheels in parallel and compiles their bytecode, which nothing else
# would write where PYTHONDONTWRITEBYTECODE is set: the whole install took 1 min on 2 cores
# with uv's cache empty, where pip's took about 2 (2026-11-28). It reads no pip config: the
# folder pip is told to find wheels in (the CPU torch wheel here) is passed on as TORCH_WHEELS.
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv pip install --python $(PY) --quiet --no-deps
TORCH_WHEELS ?= $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(UV) $(addprefix --find-links ,$(TORCH_WHEELS)) --compile-bytecode -r requirements.lock
	$(UV) --no-build-isolation -e .
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
# Python may cache the project's bytecode (and pytest its rewritten test modules) where the
# machine sets PYTHONDONTWRITEBYTECODE: otherwise each of the suite's ~300 Python processes
# compiles what it imports again (pytest's collection alone: 10 s against 7 s).
TEST_WORKERS ?= 2
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS)

test: $(STAMP) $(CHROMIUM)
	CHROMIUM=$(CHROMIUM) $(PYTEST)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The loop for every edit (budget 2 min; 2 min 3 s to 2 min 14 s measured: docs/testing.md):
# ruff, the docs, then the tests that need no model, engine, server, cluster, flow, landed run
# or crash sweep (tiers in tests/conftest.py). `make test` runs everything.
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
