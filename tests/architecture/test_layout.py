"""The package's shape, checked: MLflow behind one door, no cycles, rooms named and sized by idea.

The import contracts live in ``.importlinter`` (run by ``make lint``); these tests show that
the MLflow contract really fails on a breach, and hold the limits the layout promises.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "mlflow_roofline"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

MAX_LOOSE_FIT_MODULES = 20
MAX_ANY = 150
SAME_KIND_NAMES = {
    "__init__.py",
    "errors.py",  # core's and serve's errors: both hold the exceptions of their stage
    "predict.py",  # serve's law evaluation and the `predict` command that calls it
    "options.py",  # click options of the commands; the callback's options
    "pyfunc_model.py",  # the served model's class, and the 0.1.0 import path that re-exports it
}
"""Module names that may repeat across stages, because they hold the same kind of thing."""


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / ".importlinter"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is part of the lint extra")
def test_the_mlflow_contract_fails_on_a_direct_import_outside_tracking(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "mlflow_roofline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    assert _lint_imports(tmp_path).returncode == 0

    breach = tmp_path / "mlflow_roofline" / "fit" / "pipeline.py"
    breach.write_text(breach.read_text() + "\n\nimport mlflow  # a deliberate breach\n")
    broken = _lint_imports(tmp_path)
    assert broken.returncode != 0
    assert "MLflow only through tracking" in broken.stdout and "BROKEN" in broken.stdout
    assert "mlflow_roofline.fit.pipeline -> mlflow" in broken.stdout


def test_fit_has_at_most_twenty_loose_modules() -> None:
    loose = sorted(p.name for p in (PACKAGE / "fit").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_FIT_MODULES, loose


def test_no_module_name_repeats_across_stages_unless_it_means_the_same_kind() -> None:
    stages_of: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        stage = path.relative_to(PACKAGE).parts[0] if len(path.relative_to(PACKAGE).parts) > 1 else "."
        stages_of[path.name].add(stage)
    repeated = {name: sorted(stages) for name, stages in stages_of.items() if len(stages) > 1}
    unexpected = {name: stages for name, stages in repeated.items() if name not in SAME_KIND_NAMES}
    assert not unexpected


def test_any_is_kept_to_where_a_type_is_truly_open() -> None:
    uses = sum(len(re.findall(r"\bAny\b", p.read_text())) for p in PACKAGE.rglob("*.py"))
    assert uses <= MAX_ANY


@pytest.mark.parametrize(
    "result",
    [
        "mlflow_roofline.fit.hardware_fit:HardwareFit",
        "mlflow_roofline.fit.fleet_fit:FleetFit",
        "mlflow_roofline.fit.fit_runs:FitOutcome",
        "mlflow_roofline.fit.pooled:PooledFit",
        "mlflow_roofline.fit.forms.fitted_form:FittedForm",
        "mlflow_roofline.fit.forms.ols:FormFit",
        "mlflow_roofline.fit.forms.nonlinear:RooflineFormFit",
        "mlflow_roofline.fit.forms.energy_laws:EnergyFits",
        "mlflow_roofline.fit.forms.extrapolation:Extrapolation",
        "mlflow_roofline.fit.registration:Registration",
        "mlflow_roofline.fit.runs.run_data:RunData",
    ],
)
def test_fit_results_are_built_once(result: str) -> None:
    """Scoring, logging and registration return new results (``dataclasses.replace``); none assigns to one."""
    module, name = result.split(":")
    cls = getattr(importlib.import_module(module), name)
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, f"{result} is not a frozen dataclass"


def _functions_longer_than(limit: int) -> list[str]:
    """Every function of the package (and the scripts beside it) over ``limit`` lines, as ``path:name (lines)``."""
    found = []
    for root in ("mlflow_roofline", "entrypoints", "benchmarks", "scripts"):
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        found.append(f"{path.relative_to(REPO)}:{node.name} ({lines})")
    return found


def test_no_function_is_longer_than_seventy_lines() -> None:
    assert _functions_longer_than(70) == []
