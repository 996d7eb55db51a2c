"""A law logged as a pyfunc model, registered and aliased @champion in a store of its own.

Shared by the tests of the pyfunc model and of the ``predict`` command: each module wraps
:func:`registered_law` in a module-scoped fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest

from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.pyfunc_model import log_law_model
from support.module_store import module_store

MODEL_NAME = "roofline-energy-test"


def registered_law(tmp_path_factory: pytest.TempPathFactory, template: Path, law: FittedLaw) -> Iterator[str]:
    """The law logged in a run, registered and aliased @champion; yields its models:/ URI.

    ``template`` is the ``store_template`` fixture (support/store_template).

    One SQLite store for the whole module (creating a store and logging a model take
    seconds); the tests only read from it.
    """
    with module_store(tmp_path_factory.mktemp("pyfunc-store"), template):
        with mlflow.start_run():
            info = log_law_model(law)
        version = mlflow.register_model(info.model_uri, MODEL_NAME)
        mlflow.MlflowClient().set_registered_model_alias(MODEL_NAME, "champion", version.version)
        yield f"models:/{MODEL_NAME}@champion"
