# Every target bootstraps .venv with the system python3 when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_WORKERS ?= 2  # make test's processes: two cores here; each test's servers, files and PostgreSQL schemas are its own
STAMP := $(VENV)/.installed
CORE := $(VENV)/.installed-core
DEMO_DIR ?= demo
PORT ?= 5433

.PHONY: help demo test test-spark bench lint docs clean mutants

help:  ## this list
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z]+):.*## /\1\t/' | expand -t 10

# `make demo` installs what serving needs; `make test` (and lint, docs, bench) the dev extras on top.
$(CORE): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(CORE)

$(STAMP): $(CORE)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(CORE)  ## build the synthetic demo (once) and serve it in the foreground (PORT=5433 by default)
	test -f $(DEMO_DIR)/veil.toml || $(BIN)/veil init-demo $(DEMO_DIR)
	@echo
	@echo 'connect with:  psql "postgresql://alice:veil-demo@127.0.0.1:$(PORT)/demo"'
	@echo 'budget:        $(BIN)/veil budget show --config $(DEMO_DIR)/veil.toml'
	@echo
	$(BIN)/veil serve --config $(DEMO_DIR)/veil.toml --port $(PORT)

test: $(STAMP)  ## the whole suite but the Spark tests, in TEST_WORKERS processes (pytest-xdist; 6–9 min on 2 cores)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

test-spark: $(STAMP)  ## the tests marked spark: a local Spark session and a Spark Connect server (Java 17)
	$(BIN)/python -m pytest -q -m spark

bench: $(STAMP)  ## benchmarks; results go into docs/benchmarks.md
	$(BIN)/python -m pytest -q -m bench tests/bench -s

MUTATION := $(VENV)/.installed-mutation
$(MUTATION): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,mutation]'
	touch $(MUTATION)

# PATHS: files or packages to mutate (default: all the privacy-critical code, docs/testing.md);
# CHANGED=main: only the files changed since that ref; SAMPLE=40: that many mutants at random (SEED);
# RERUN=survivors: run the mutants that survived again (after adding tests); RERUN=timeouts: those stopped
# by the clock (with SLACK=10 on a loaded machine: seconds added to each mutant's limit); RERUN=all: all.
PATHS ?=
CHANGED ?=
SAMPLE ?= 0
SEED ?= 0
RERUN ?= none
SLACK ?=
mutants: $(MUTATION)  ## mutation testing (not part of `make test`); report in mutants/veil-report.md
	PYTHONPATH=$(CURDIR)/mutants nice -n 10 $(BIN)/python tests/mutation/run.py \
		$(if $(PATHS),--paths $(PATHS)) $(if $(CHANGED),--changed $(CHANGED)) \
		--sample $(SAMPLE) --seed $(SEED) --rerun $(RERUN) $(if $(SLACK),--slack $(SLACK))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

docs: $(STAMP)  ## regenerate docs/cli.md, errors.md, settings.md and the function table of sql.md from the code
	$(BIN)/python -m proxy.cli.reference_docs

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache mutants
