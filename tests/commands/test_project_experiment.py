"""MLflow's default experiment for `mlflow run` of this project: the one the entry point writes to."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sweeps import write_spec

from mlflow_roofline.commands.project_experiment import ProjectExperiment, _experiment_name

REPO = Path(__file__).resolve().parents[2]
MLFLOW = "/venv/bin/mlflow"


@pytest.fixture(autouse=True)
def _no_experiment_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    _experiment_name.cache_clear()


def _name(*args: str) -> str | None:
    return _experiment_name((MLFLOW, "run", str(REPO), "--env-manager", "local", *args))


def test_each_entry_point_lands_where_it_writes(tmp_path: Path) -> None:
    assert _name("-e", "sweep") == "roofline-bert"  # the MLproject's default spec, smoke
    assert _name("-e", "sweep", "-P", "spec=decoder-smoke") == "roofline-decoder"
    mine = write_spec(tmp_path / "mine.yaml", "my-grid", "{num_layers: 1, hidden_size: 16}")
    assert _name("-e", "sweep", "-P", f"spec={mine}") == "my-grid"
    assert _name("-e", "fit") == "roofline-bert"
    assert _name("-e", "fit", "-P", "experiment=a,b") == "a"
    assert _name("-e", "train", "-P", "num_layers=1") == "roofline-bert"


def test_no_answer_elsewhere(tmp_path: Path) -> None:
    assert _name("-e", "sweep", "-P", "spec=no-such-spec") is None  # the sweep says what is wrong
    assert _name("-e", "sweep", "--experiment-name", "mine") is None
    assert _name("-e", "nope") is None
    (tmp_path / "MLproject").write_text("name: someone-else\nentry_points: {sweep: {command: x}}\n")
    assert _experiment_name((MLFLOW, "run", str(tmp_path), "-e", "sweep")) is None
    assert _experiment_name(("/bin/python", "-m", "pytest")) is None


def test_the_provider_creates_the_experiment_as_model_training(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    monkeypatch.setattr("sys.argv", [MLFLOW, "run", str(REPO), "-e", "fit", "-P", "experiment=fresh"])
    provider = ProjectExperiment()
    assert provider.in_context()
    experiment = MlflowClient().get_experiment(provider.get_experiment_id())
    assert experiment.name == "fresh" and experiment.tags["mlflow.experimentKind"] == "custom_model_development"
