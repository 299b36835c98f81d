# The two commands a newcomer needs are `make up` and `make test`. `up` installs only what
# running taskyard needs; `test`, `lint`, `fmt`, `bench`, `chaos` and `install` add the development
# extras. `chaos` is the fault campaign (bench/chaos.py: kills and restarts under load, on both
# databases), then the API fuzzer at 50,000 requests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

.PHONY: install up test lint fmt bench chaos clean

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

# bench: taskyard's own figures first, then bench/peers.py, which puts taskyard beside procrastinate
# and Celery (installed into bench/.peers-venv, not here) and ends with the comparison table.
bench: $(STAMP)
	$(BIN)/python bench/lifecycle.py
	$(BIN)/python bench/worker.py
	$(BIN)/python bench/peers.py

chaos: $(STAMP)
	$(BIN)/python bench/chaos.py
	TASKYARD_FUZZ_COUNT=50000 $(BIN)/pytest -q tests/api/test_fuzz.py

clean:
	rm -rf $(VENV) bench/.peers-venv .pytest_cache .mypy_cache .ruff_cache
