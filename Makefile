# The two commands a newcomer needs are `make up` and `make test`. `up` installs only what
# running taskyard needs, and TaskCluster's Python client (the `client` extra, which the README's
# example uses); `test`, `check`, `lint`, `fmt`, `bench`, `chaos` and `install` add the
# development extras. `test` is the whole suite and CI's command; `check` is the edit-test loop's
# tier (lint, then the tests that run in one process on SQLite; under 2 minutes, see below).
# `chaos` is the fault campaign (bench/chaos.py: kills and restarts under load, on both
# databases), then the API fuzzer at 50,000 requests.
#
# Both install exact versions, each file checked against its hash: `up` from requirements.lock,
# the others from requirements-dev.lock (the dev extras too), then taskyard itself without its
# dependencies. `make lock` writes both files again from pyproject.toml (docs/architecture.md,
# Dependencies and the lock files).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
LOCK := requirements.lock
DEV_LOCK := requirements-dev.lock
# What `make lock` resolves with: pip-tools, in a venv of its own (not the project's).
PIP_TOOLS := pip-tools==7.6.2
LOCK_VENV := $(VENV)/pip-tools
COMPILE = CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--all-build-deps --no-emit-index-url --no-emit-find-links
# `make lock` keeps the versions locked where pyproject.toml still allows them; UPGRADE=all takes
# the newest of everything, UPGRADE=name the newest of that package alone.
UPGRADE_FLAGS = $(if $(filter all,$(UPGRADE)),--upgrade,$(if $(UPGRADE),--upgrade-package $(UPGRADE)))

.PHONY: install up test check lint fmt docs bench chaos lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# setuptools, taskyard's build backend, is in the lock files: taskyard builds with it, not with
# whatever version an isolated build would fetch.
$(RUNTIME): $(LOCK) pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(RUNTIME)

$(STAMP): $(DEV_LOCK) pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r $(DEV_LOCK)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

up: $(RUNTIME)
	$(BIN)/taskyard up

test: $(STAMP)
	$(BIN)/pytest

# check: what `lint` runs, then every test of tests/ except what needs more than this process and
# SQLite: the directories that drive `taskyard` processes, a browser or old releases (e2e, cli,
# browser, upgrade), the fuzzers (`make test` and `make chaos` run them), the RabbitMQ tests, and
# the tests marked `postgres` or `slow`, or run on PostgreSQL by a parameter of their own (`-k`). A
# new test joins by where it lives, its name and its marks. The target prints its own time at the
# end, pass or fail. CHECK_ARGS adds pytest arguments (CHECK_ARGS=-x, --lf, '-n 0'; not -m or -k,
# which would replace the tier's own). docs/architecture.md, Tests, has the tiers.
CHECK_SKIP = --ignore=tests/e2e --ignore=tests/cli --ignore=tests/browser --ignore=tests/upgrade \
	--ignore-glob='tests/api/test_*fuzz*.py' --ignore-glob='tests/events/test_amqp*.py'
CHECK_SELECT = -m 'not postgres and not slow' -k 'not [postgres'

check: $(STAMP)
	@start=$$(date +%s); \
	$(BIN)/ruff check src tests bench && $(BIN)/ruff format --check src tests bench && $(BIN)/mypy && \
	$(BIN)/pytest tests $(CHECK_SKIP) $(CHECK_SELECT) --durations=5 $(CHECK_ARGS); \
	status=$$?; echo "make check: $$(( $$(date +%s) - start )) s"; exit $$status

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

# The development lock first (everything), then the runtime one at the same versions.
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || ($(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install --quiet '$(PIP_TOOLS)')
	$(COMPILE) $(UPGRADE_FLAGS) --extra dev --extra client -o $(DEV_LOCK) pyproject.toml
	$(COMPILE) --upgrade --extra client --constraint $(DEV_LOCK) -o $(LOCK) pyproject.toml

clean:
	rm -rf $(VENV) bench/.peers-venv .pytest_cache .mypy_cache .ruff_cache
