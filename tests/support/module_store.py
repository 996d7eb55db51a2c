"""A tracking store of a test module's own, for module-scoped fixtures (``tracking_uri`` is per test)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest

from support.store_template import copy_store


@contextlib.contextmanager
def module_store(root: Path, template: Path) -> Iterator[tuple[str, pytest.MonkeyPatch]]:
    """A fresh SQLite store under ``root`` (a copy of ``template``, the ``store_template`` fixture),
    current for this process and its children for the block.

    The working directory moves to ``root`` (artifacts land there); yields the store's URI and
    the monkeypatch, for more environment the block needs. Everything is undone afterwards,
    MLflow's process-wide active experiment included (an id from this store must not follow
    the next test into another store).
    """
    uri = f"sqlite:///{copy_store(template, root / 'mlflow.db')}"
    previous = mlflow.get_tracking_uri()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        mlflow.set_tracking_uri(uri)
        try:
            yield uri, patch
        finally:
            mlflow.set_tracking_uri(previous)
            mlflow.tracking.fluent._active_experiment_id = None
