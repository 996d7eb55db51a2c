"""The `mlflow run` project run: reading its command line, and names MLflow made up."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlflow_roofline.tracking.project_run import is_generated_name, name_project_run, project_launch

MLFLOW = "/venv/bin/mlflow"


def test_mlflows_made_up_names_are_told_from_the_users() -> None:
    from mlflow.utils.name_utils import _generate_random_name

    made_up = [_generate_random_name() for _ in range(50)]
    assert sum(is_generated_name(n) for n in made_up) >= 45  # MLflow cuts a few past 20 characters
    for mine in ("sweep-smoke", "fit-roofline-bert", "single-x1-L1-d16-h2-ff32-S8-B4", "my-own-run", "bert-base-1"):
        assert not is_generated_name(mine)


def test_the_command_line_is_read_as_mlflow_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    argv = [MLFLOW, "run", str(tmp_path), "-e", "sweep", "--env-manager", "local", "-P", "spec=a=b.yaml"]
    launch = project_launch(argv)
    assert launch is not None and launch.project_dir == tmp_path.resolve()
    assert launch.entry_point == "sweep" and launch.params == {"spec": "a=b.yaml"}
    assert project_launch([MLFLOW, "run", str(tmp_path)]).entry_point == "main"  # type: ignore[union-attr]
    assert project_launch(["/venv/lib/mlflow/__main__.py", "run", str(tmp_path)]) is not None  # python -m mlflow
    # the user named the experiment, or it is not `mlflow run` of a local directory: MLflow decides
    assert project_launch([*argv, "--experiment-name", "mine"]) is None
    assert project_launch([MLFLOW, "ui"]) is None and project_launch(["/bin/pytest", "run", str(tmp_path)]) is None
    assert project_launch([MLFLOW, "run", "https://github.com/x/y"]) is None
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "mine")
    assert project_launch(argv) is None


def test_a_run_the_user_named_keeps_its_name(tracking_uri: str) -> None:
    from mlflow import MlflowClient

    from mlflow_roofline.tracking.client import TrackingClient

    client = MlflowClient()
    random = client.create_run("0").info.run_id  # MLflow names it
    named = client.create_run("0", run_name="my-run").info.run_id
    assert name_project_run(TrackingClient(), random, "sweep-smoke") is True
    assert name_project_run(TrackingClient(), named, "sweep-smoke") is False
    assert client.get_run(random).info.run_name == "sweep-smoke" and client.get_run(named).info.run_name == "my-run"
