# Two entry points, both self-contained on a fresh machine with Python 3.11+:
#   make demo   creates .venv, installs jobbridge, runs the main job on SQLite
#   make test   creates .venv, installs the dev extras, runs ruff, mypy --strict and the suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/jobbridge demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check jobbridge compat tests benchmarks

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy --strict jobbridge compat

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python -m benchmarks sqlite

clean:
	rm -rf $(VENV) build *.egg-info
