# Every target installs what it needs first, so each works on a fresh machine by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The tracking store the demo writes to (MLflow's own default); override on the command line.
export MLFLOW_TRACKING_URI ?= sqlite:///mlflow.db

# Python writes a module's bytecode the first time any process imports it, and every later process
# reads it. Where PYTHONDONTWRITEBYTECODE is set (this CI sets it), nothing is written and each of the
# suite's few hundred processes compiled torch, MLflow and transformers again (measured: the suite
# 29 min, not 17): the targets here run without it.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install lint test test-fast demo bench screenshots clean

install: $(STAMP)

# uv (pinned in constraints.txt) installs the pinned set: it unpacks in parallel where pip used one
# core (measured on the 2-core dev machine, cold caches: 145 s with pip, 55 s with uv). It does not
# byte-compile: compiling all ~23,000 modules of the venv took 84 CPU-s (49 s of the 53 s install),
# where a process compiles only what it imports, once (the suite imports about a fifth of them).
# uv reads no pip.conf: the folders of local wheels pip is told about (PIP_FIND_LINKS: this
# machine's CPU torch) are passed on. (Comments here, not in the recipe: make echoes a recipe's lines.)
$(STAMP): setup.cfg pyproject.toml constraints.txt
	@echo "== installing the pinned dependencies into $(VENV) (once; again when setup.cfg or constraints.txt change)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet -c constraints.txt uv
	@$(BIN)/uv pip install --quiet --python $(BIN)/python \
		$(foreach links,$(PIP_FIND_LINKS),--find-links $(links)) -c constraints.txt -e '.[test,cluster,lint]'
	@touch $(STAMP)

# Style, types and the import contracts (.importlinter); CI fails on a violation (`make test` runs them too).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy mlflow_roofline
	$(BIN)/lint-imports

# Two pytest-xdist workers, one per core, each given whole test modules, longest first (the order
# tests/conftest.py collects them in, from tests/module_seconds.json): see its
# pytest_collection_modifyitems. The tests are independent (own store, free ports, temp dirs; Ray
# clusters take turns). `make test PYTEST_WORKERS=0` runs them in one process.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# The suite's temp folders (its SQLite stores, artifacts, job folders) go to a tmpfs where the machine
# has one with TEST_TMPFS_MIN_KB free (a container's 64 MB /dev/shm does not qualify), else to the
# system's temp dir. Every run, metric and model a test logs is an SQLite commit, and its fsync to this
# VM's disk cost the store-heavy modules about 9 % of their wall time at the same CPU (tests/tracking,
# ingest and sweep, -n 2, alternated twice: 94-100 s on disk, 86-88 s in memory). The folder is
# removed after a pass and kept, its path printed, after a failure.
TEST_TMPFS ?= /dev/shm
TEST_TMPFS_MIN_KB ?= 4194304

# ruff first (seconds); then the type check runs beside the suite, and `make test` fails if either
# does. Run one after the other, mypy held a core for 70 s while the other sat idle. Beside the
# CPU-bound suite it runs at the lowest priority (nice 19): it takes what the suite leaves idle (its
# waits on servers, its last tests) instead of 65 CPU-s from it. The suite ends with its 25 slowest
# steps, so that a CI log says where its time went.
test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@log=$$(mktemp); \
	{ nice -n 19 $(BIN)/mypy mlflow_roofline && nice -n 19 $(BIN)/lint-imports; } >"$$log" 2>&1 & checks=$$!; \
	free_kb=$$(df -Pk "$(TEST_TMPFS)" 2>/dev/null | awk 'NR == 2 {print $$4}'); \
	if [ "$${free_kb:-0}" -ge $(TEST_TMPFS_MIN_KB) ]; then tmp=$$(mktemp -d "$(TEST_TMPFS)/rt.XXXXXX"); else tmp=$$(mktemp -d); fi; \
	TMPDIR="$$tmp" PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest tests $(PYTEST_PARALLEL) --durations=25; suite=$$?; \
	if [ $$suite -eq 0 ]; then rm -rf "$$tmp"; else echo "make test: the tests' temp folders are kept in $$tmp" >&2; fi; \
	wait $$checks; typed=$$?; \
	echo "== mypy and lint-imports (run beside the suite)"; cat "$$log"; rm -f "$$log"; \
	if [ $$typed -ne 0 ]; then echo "make test: the type check or an import contract failed (above)" >&2; exit 1; fi; \
	exit $$suite

test-fast: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest tests -m "not slow" $(PYTEST_PARALLEL)

# The demo says what it does itself: make does not echo its recipe.
demo: install
	@PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

bench: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash -c 'for b in benchmarks/*.py; do echo "== $$b"; python $$b || exit 1; done'

# The README's two UI screenshots (docs/img/ui-*.png), from the real-browser test:
# a small real sweep and a fit in a fresh store, mlflow server on loopback, Debian's chromium.
screenshots: install
	ROOFLINE_SCREENSHOT_DIR="$(CURDIR)/docs/img" PATH="$(CURDIR)/$(BIN):$$PATH" \
		$(BIN)/python -m pytest tests/e2e/test_ui_browser.py -p no:cacheprovider

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
