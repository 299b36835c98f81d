# The two commands a newcomer needs are `make up` and `make test`. `up` installs only what
# running taskyard needs; `test`, `lint`, `fmt`, `bench` and `install` add the development extras.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

.PHONY: install up test lint fmt bench clean

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

bench: $(STAMP)
	$(BIN)/python bench/lifecycle.py
	$(BIN)/python bench/worker.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
