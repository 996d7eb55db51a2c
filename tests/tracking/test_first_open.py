"""The lock a process holds while it opens a database store for the first time (two first opens raced in
MLflow's migration: tests/e2e/test_import_once.py runs them at once)."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from mlflow_roofline.tracking import first_open as module
from mlflow_roofline.tracking.first_open import first_open, lock_path


def test_one_database_has_one_lock_however_its_uri_spells_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = lock_path(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert absolute is not None and absolute == lock_path("sqlite:///mlflow.db")
    assert absolute != lock_path(f"sqlite:///{tmp_path / 'other.db'}")
    assert lock_path("postgresql+psycopg2://user@db/mlflow") is not None


@pytest.mark.parametrize("uri", ["http://127.0.0.1:5000", "file:///tmp/mlruns", "databricks", "./mlruns"])
def test_a_store_that_is_no_database_opens_without_a_lock(uri: str) -> None:
    assert lock_path(uri) is None


def _locked_elsewhere(path: Path) -> bool:
    """Whether another open file holds the lock at ``path`` (asked without waiting)."""
    with path.open("a") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(other, fcntl.LOCK_UN)
        return False


def test_the_first_open_holds_the_lock_and_a_later_one_takes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "_opened", set())
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = lock_path(uri)
    assert path is not None
    with first_open(uri):
        assert _locked_elsewhere(path)  # a second process opening the store waits here
    assert not _locked_elsewhere(path) and uri in module._opened
    with first_open(uri):  # this process has opened it: its tables exist
        assert not _locked_elsewhere(path)
