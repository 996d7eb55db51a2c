"""The benchmark scripts behind docs/benchmarks.md' figures import and run: a script that no longer
loads (a renamed function, a dataclass the package froze) is a figure nobody can reproduce."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py"))


def _load(name: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Import ``benchmarks/<name>.py`` as its own command line does (its directory on the path)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_there_are_benchmark_scripts() -> None:
    assert {"fit_accuracy", "form_robustness", "serve_latency"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_imports_and_has_a_main(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load(name, monkeypatch)
    assert callable(getattr(module, "main", None)), f"benchmarks/{name}.py has no main()"


def test_form_robustness_scores_a_small_fleet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _load("form_robustness", monkeypatch)
    assert module.main(["--workloads", "6", "--seeds", "2", "--generators", "weak_fleet", "--gpus", "T4"]) == 0
    out = capsys.readouterr().out
    assert "registered by the fit's rule" in out and "weak_fleet" in out
    assert "the pick alone, or its mean" in out and "next seed" in out and "selection rules" in out
