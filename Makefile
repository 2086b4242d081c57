# The two commands: `make demo` runs the main job, `make test` runs the tests.
# Both create the virtual environment they need.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv demo test lint typecheck check bench soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check majordomus tests bench
	$(BIN)/ruff format --check majordomus tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict majordomus tests bench

check: lint typecheck test

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache .hypothesis
