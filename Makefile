# Every target installs what it needs first, so each works on a fresh machine by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The tracking store the demo writes to (MLflow's own default); override on the command line.
export MLFLOW_TRACKING_URI ?= sqlite:///mlflow.db

.PHONY: install lint test test-fast demo bench screenshots clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# pip byte-compiles what it installs (about 70 CPU-s). Keep it: where PYTHONDONTWRITEBYTECODE
	# is set (this CI sets it), a --no-compile venv never gets its .pyc files and every test
	# process compiles torch, MLflow and transformers again (measured: the suite 29 min, not 17).
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,cluster,lint]'
	touch $(STAMP)

# Style, types and the import contracts (.importlinter); `make test` runs it first, so CI fails on a violation.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy mlflow_roofline
	$(BIN)/lint-imports

# Two pytest-xdist workers, one per core; idle workers steal queued tests from busy ones. The
# tests are independent (own store, free ports, temp dirs; Ray clusters take turns).
# `make test PYTEST_WORKERS=0` runs them in one process.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist worksteal)

test: lint
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest tests $(PYTEST_PARALLEL)

test-fast: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest tests -m "not slow" $(PYTEST_PARALLEL)

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

bench: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash -c 'for b in benchmarks/*.py; do echo "== $$b"; python $$b || exit 1; done'

# The README's two UI screenshots (docs/img/ui-*.png), from the real-browser test:
# a small real sweep and a fit in a fresh store, mlflow server on loopback, Debian's chromium.
screenshots: install
	ROOFLINE_SCREENSHOT_DIR="$(CURDIR)/docs/img" PATH="$(CURDIR)/$(BIN):$$PATH" \
		$(BIN)/python -m pytest tests/e2e/test_ui_browser.py -p no:cacheprovider

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
