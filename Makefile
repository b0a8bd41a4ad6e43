# Two entry points, both self-contained on a fresh machine with Python 3.11+:
#   make demo   creates .venv, installs jobbridge, runs the main job on SQLite
#   make test   creates .venv, installs the dev extras, runs ruff, lint-imports (the import rules in
#               pyproject.toml), mypy --strict, the docs build and the suite (on two workers, a module each)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint typecheck pytest docs bench clean

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
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy --strict jobbridge compat

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 --dist loadfile

$(VENV)/.installed-docs: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[docs]'
	touch $@

# The manual as a site in site/ (open site/index.html). --strict turns every warning into a failure: a page
# missing from the nav, a broken link or anchor. NO_MKDOCS_2_WARNING silences mkdocs-material's banner about
# its own end of life, printed on every build.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

test: lint typecheck docs pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python -m benchmarks sqlite

clean:
	rm -rf $(VENV) build *.egg-info
