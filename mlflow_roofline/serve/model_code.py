"""The code a logged law model carries, so that it loads without this package installed.

A registered model must load in an environment built from its own ``requirements.txt``
alone (``mlflow models serve`` with the virtualenv or conda env manager,
``mlflow models generate-dockerfile``, a scoring container). The package is on no
public index, so the model carries the part of it that loading and predicting import, as
MLflow ``code_paths``: the package's ``__init__`` and the ``core``, ``law`` and ``serve``
subpackages (plus packaged data files), which import nothing beyond mlflow, numpy,
pandas and scipy. Training, sweeping and fitting code (torch, statsmodels) stays out.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import mlflow_roofline

SERVE_TIME_PARTS: tuple[str, ...] = ("__init__.py", "pyfunc_model.py", "core", "law", "serve", "data")
"""What loading a law model imports, relative to the package root (missing parts are skipped)."""


def copy_serving_code(destination: Path) -> Path:
    """Copy the serve-time part of the package to ``destination/mlflow_roofline``; return that folder."""
    source = Path(mlflow_roofline.__file__).parent
    target = destination / "mlflow_roofline"
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in SERVE_TIME_PARTS:
        path = source / part
        if path.is_dir():
            shutil.copytree(path, target / part, ignore=ignore)
        elif path.is_file():
            shutil.copy2(path, target / part)
    return target
