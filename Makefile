# The two commands: `make demo` runs the main job, `make test` runs the tests.
# Both create the virtual environment they need.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv demo test lint typecheck check bench soak clean golden wheel-check e2e

# An editable install of the "compat" kind: a path in a .pth file, as cheap at start-up as
# a regular install. The default kind installs an import finder that every Python start
# in the venv loads (pathlib, urllib, ipaddress: ~8 ms), which no user's install pays.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		--config-settings editable_mode=compat -e '.[dev,mcp]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

# Four workers on two cores: many tests wait on the processes they start (git, hooks,
# daemons, signals). loadfile keeps a module on one worker, so a module-scoped fixture
# (a planted corpus, a published remote) is built once, not once per worker.
# The workers keep their compiled test modules (PYTHONDONTWRITEBYTECODE set by a shell
# made every worker rewrite and compile them all again). The run's folders live in one
# base folder of this checkout's own, outside any repository, emptied when the next run
# starts: pytest's numbered folders under /tmp are shared by every checkout, and each
# run's end waited while it deleted the oldest one, a whole earlier run's repositories.
# That folder is in memory (/dev/shm) where there is one: a passed test's repositories
# are deleted at its teardown (a failed test's stay for a look), which keeps the folder
# at a few MB instead of a whole run's 100 MB; those deletions on this machine's ext4
# disk took 33-40 s of system time against 12-13 s in memory (wall time 43-45 s against
# 29-31 s), so a plain `pytest` run, on disk, keeps pytest's default of keeping them all.
TEST_TMP_ROOT ?= $(if $(wildcard /dev/shm/.),/dev/shm,$(or $(TMPDIR),/tmp))
TEST_TMP := $(TEST_TMP_ROOT)/majordomus-test-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1)

test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n 4 --dist loadfile --basetemp=$(TEST_TMP) \
		-o tmp_path_retention_policy=failed

# The real coding agents (Claude Code, Codex CLI, Gemini CLI) and the MCP Inspector, their
# versions pinned in tests/e2e/clients.py and installed from npm (node 20 or later) into
# $${XDG_CACHE_HOME:-~/.cache}/majordomus-e2e, outside the repository, each run against a fake
# model server on 127.0.0.1 (tests/e2e/stubs.py): never the internet, never your own
# ~/.claude, ~/.codex or ~/.gemini. Not part of `make test`. One test at a time: each starts
# a client, its hooks and often an MCP server, which is plenty for two cores.
E2E_TMP := $(TEST_TMP_ROOT)/majordomus-e2e-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1)

e2e: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest tests/e2e -p no:cacheprovider \
		--basetemp=$(E2E_TMP) -o tmp_path_retention_policy=failed

lint: $(STAMP)
	$(BIN)/ruff check majordomus tests bench soak
	$(BIN)/ruff format --check majordomus tests bench soak

# bench/ and soak/ are scripts, each with its own run.py: checked one folder at a time.
typecheck: $(STAMP)
	$(BIN)/mypy --strict majordomus tests
	$(BIN)/mypy --strict bench
	$(BIN)/mypy --strict soak

check: lint typecheck test

# The package a user installs: sdist and wheel built with no warning, the wheel installed
# into a clean virtual environment and walked through (scripts/wheel-check.sh). CI runs it.
wheel-check: $(STAMP)
	bash scripts/wheel-check.sh $(BIN)/python

# Rewrite the golden transcripts in fixtures/golden/ after an intended change of output;
# review the diff like code.
golden: $(STAMP)
	$(BIN)/python -m tests.support.golden

# Every size, 1,000,000 commits included (by far the longest part of the run), and the
# fetch rows; `make bench BENCH_ARGS=--no-1m` leaves the largest size out.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache .hypothesis

soak: $(STAMP)
	$(BIN)/python -m soak.run
