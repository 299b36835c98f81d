# The two commands a newcomer needs are `make up` and `make test`. `up` installs only what
# running taskyard needs; `test`, `lint`, `fmt`, `bench`, `chaos` and `install` add the development
# extras. `chaos` is the fault campaign (bench/chaos.py: kills and restarts under load, on both
# databases), then the API fuzzer at 50,000 requests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

.PHONY: install up test lint fmt docs bench chaos clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

up: $(RUNTIME)
	$(BIN)/taskyard up

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

# docs: rewrite docs/operations.md's table of options from their declaration (src/taskyard/cli/settings.py).
docs: $(STAMP)
	$(BIN)/python -m taskyard.cli.settings --write docs/operations.md

# bench: every bench with --json into one directory (BENCH_OUT, else a new temporary one), then
# bench/aims.py's table of the six speed aims, the peers beside taskyard (~13 min on a quiet 2-core
# machine, more on a busy one). QUICK=1 runs each bench at its --quick size (~6 min); SCALE=full
# runs bench/scale.py at the aims' own sizes (1M pending tasks, ~15 min more) instead of its
# --quick ones. bench/peers.py installs procrastinate and Celery into bench/.peers-venv, not here.
BENCH_QUICK = $(if $(QUICK),--quick)
SCALE_SIZE = $(if $(filter full,$(SCALE)),,--quick)

bench: $(STAMP)
	out=$${BENCH_OUT:-$$(mktemp -d -t taskyard-bench.XXXXXX)}; mkdir -p $$out; \
	$(BIN)/python bench/budgets.py --json $$out/budgets.json; \
	$(BIN)/python bench/lifecycle.py $(BENCH_QUICK) --json $$out/lifecycle.json; \
	$(BIN)/python bench/worker.py $(BENCH_QUICK) --json $$out/worker.json; \
	$(BIN)/python bench/scale.py $(SCALE_SIZE) --json $$out/scale.json; \
	$(BIN)/python bench/peers.py $(BENCH_QUICK) --json $$out/peers.json; \
	$(BIN)/python bench/aims.py $$out

chaos: $(STAMP)
	$(BIN)/python bench/chaos.py
	TASKYARD_FUZZ_COUNT=50000 $(BIN)/pytest -q tests/api/test_fuzz.py

clean:
	rm -rf $(VENV) bench/.peers-venv .pytest_cache .mypy_cache .ruff_cache
