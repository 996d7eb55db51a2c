"""Shared fixtures: every test gets its own SQLite tracking store in a temp dir."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from support.warm_jobs import WarmJobs

REPO_ROOT = Path(__file__).resolve().parents[1]

# Keep each worker process to one thread: the CI machine has 2 cores and the
# distributed tests start several processes at once.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MLFLOW_TRACKING_INSECURE_TLS", "false")
# The pip/conda the session runs under must see the venv's console scripts.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


MODULE_SECONDS: dict[str, float] = json.loads((REPO_ROOT / "tests" / "module_seconds.json").read_text())
"""Seconds each test module took in a recent run (``scripts/module_seconds.py`` writes them)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Collect the modules longest first (a module not in :data:`MODULE_SECONDS` first of all).

    ``make test`` hands whole modules to the two xdist workers in this order (``--dist loadfile``).
    The long modules, most of them waiting on a server, a cluster or a child process, start while
    the other worker has short ones to fill their waits; the run ends on short modules, not on a
    long one with a core idle; and a module's fixtures are set up once, on one worker (work stealing
    split the UI module over both and set its sweep, fit and server up three times in one run).
    A module's tests keep their order.
    """
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.nodeid.split("::")[0], math.inf))


@pytest.fixture(scope="session")
def store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This worker's empty migrated SQLite store, for :func:`tracking_uri` to copy (support/store_template)."""
    from support.store_template import make_store_template

    return make_store_template(tmp_path_factory.mktemp("store-template"))


@pytest.fixture
def unopened_tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URI of an SQLite store under tmp_path whose file does not exist yet, set for this process and its children.

    For tests that check a command never touched the store; the others take :func:`tracking_uri`.
    The working directory moves to tmp_path too, so that artifacts (./mlruns by
    default next to an SQLite store) never land in the repository.
    """
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    # mlflow.set_experiment sets a process-wide active experiment (and MLFLOW_EXPERIMENT_ID):
    # an id from this store must not follow the next test into another store.
    mlflow.tracking.fluent._active_experiment_id = None
    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)


@pytest.fixture
def tracking_uri(unopened_tracking_uri: str, tmp_path: Path, store_template: Path) -> str:
    """A fresh empty SQLite store under tmp_path (a copy of the migrated template), set for this process and children.

    As :func:`unopened_tracking_uri`, but the file exists: the test and its children skip
    MLflow's schema migration. The Default experiment appears on first open, as on a new store.
    """
    from support.store_template import copy_store

    copy_store(store_template, tmp_path / "mlflow.db")
    return unopened_tracking_uri


@pytest.fixture(scope="session")
def trainer_jobs() -> Iterator[WarmJobs]:
    """This worker's warm Python for ``tests/integration_jobs.py`` (support/warm_jobs): the run-ending and
    lifecycle modules fork their jobs from it, its torch, transformers and MLflow imports paid once."""
    from support.warm_jobs import WarmJobs

    warm = WarmJobs(REPO_ROOT / "tests" / "integration_jobs.py")
    yield warm
    warm.close()
