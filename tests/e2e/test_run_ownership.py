"""A run named by MLFLOW_RUN_ID that may not be joined is refused in one line, exit 2, untouched.

Real SQLite store under tmp_path, the real CLI in this process (``train`` starts its real job
before the run is checked, and must stop it), real child commands for ``measure``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from support.cli_args import TINY_SHAPE
from support.cli_in_process import run_cli

from mlflow_roofline.cli import main
from mlflow_roofline.core.schema import (
    M_ENERGY_J,
    M_LOSS,
    M_TIME_S,
    TAG_ERROR,
    TAG_RUN_TYPE,
)

TINY = [
    *TINY_SHAPE,
    "--num-steps",
    "2",
    "--warmup-steps",
    "0",
    "--meter",
    "estimate",
]
TINY_PARAMS = {
    "num_layers": "1",
    "hidden_size": "32",
    "num_heads": "2",
    "ffn_size": "64",
    "seq_len": "8",
    "batch_size": "4",
    "num_steps": "2",
    "warmup_steps": "0",
    "strategy": "single",
    "num_devices": "1",
    "device": "cpu",
    "precision": "fp32",
    "meter": "estimate",
}


def _measured_run(client: MlflowClient, status: str, params: dict[str, str] | None = None) -> str:
    """A train run as a finished train leaves it: params, energy, a loss history, a status."""
    experiment_id = client.create_experiment("owned")
    run_id = client.create_run(experiment_id, run_name="original", tags={TAG_RUN_TYPE: "train"}).info.run_id
    metrics = [Metric(M_ENERGY_J, 12.5, 1000, 0), Metric(M_TIME_S, 2.0, 1000, 0)]
    metrics += [Metric(M_LOSS, 1.0 / (step + 1), 1000, step) for step in range(3)]
    values = TINY_PARAMS if params is None else params
    client.log_batch(
        run_id,
        metrics=metrics,
        params=[Param(k, v) for k, v in values.items()],
        tags=[RunTag("user.note", "keep me")],
    )
    if status != "RUNNING":
        client.set_terminated(run_id, status)
    return run_id


def _snapshot(client: MlflowClient, run_id: str) -> dict[str, Any]:
    run = client.get_run(run_id)
    return {
        "run": run.to_dictionary(),
        "loss": [(m.step, m.value) for m in client.get_metric_history(run_id, M_LOSS)],
        "artifacts": [f.path for f in client.list_artifacts(run_id)],
    }


def _refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("Error:")]
    assert len(lines) == 1
    return lines[0]


@pytest.mark.slow  # train starts its job before the run is checked, and stops it
@pytest.mark.parametrize("status", ["FINISHED", "FAILED", "KILLED"])
def test_train_never_reopens_an_ended_run(
    tracking_uri: str,
    status: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    client = MlflowClient()
    run_id = _measured_run(client, status)
    before = _snapshot(client, run_id)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    line = _refused(["train", *TINY], capsys)
    assert line == (
        f"Error: MLFLOW_RUN_ID: run {run_id} is {status}, not RUNNING: "
        "a run that has ended is never reopened; it was left unchanged"
    )
    assert _snapshot(client, run_id) == before
    assert len(client.search_runs([client.get_experiment_by_name("owned").experiment_id])) == 1


def test_bad_input_does_not_fail_an_ended_run(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    client = MlflowClient()
    run_id = _measured_run(client, "FINISHED")
    before = _snapshot(client, run_id)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    line = _refused(["train", *TINY, "--hidden-size", "33"], capsys)
    assert "is FINISHED, not RUNNING" in line
    assert _snapshot(client, run_id) == before


@pytest.mark.slow
def test_a_running_run_of_another_config_or_already_measured_is_refused(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    client = MlflowClient()
    run_id = _measured_run(client, "RUNNING", {**TINY_PARAMS, "num_layers": "3"})
    before = _snapshot(client, run_id)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    line = _refused(["train", *TINY], capsys)
    assert line.startswith(f"Error: MLFLOW_RUN_ID: run {run_id} already holds a measurement (time_s)")
    assert _snapshot(client, run_id) == before

    fresh = client.create_run(client.get_experiment_by_name("owned").experiment_id).info.run_id
    client.log_param(fresh, "num_layers", "3.0")  # as `mlflow run` logs it, for another config
    before = _snapshot(client, fresh)
    monkeypatch.setenv("MLFLOW_RUN_ID", fresh)
    line = _refused(["train", *TINY], capsys)
    assert line == (
        f"Error: MLFLOW_RUN_ID: run {fresh} has num_layers='3.0', which contradicts num_layers='1'; "
        "it was left unchanged"
    )
    after = _snapshot(client, fresh)
    assert after == before and after["run"]["info"]["status"] == "RUNNING"


@pytest.mark.slow
def test_a_run_id_that_does_not_exist_is_one_line(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    MlflowClient().create_experiment("owned")
    missing = "0123456789abcdef0123456789abcdef"
    monkeypatch.setenv("MLFLOW_RUN_ID", missing)
    expected = f"Error: MLFLOW_RUN_ID: run {missing} does not exist in the tracking store; it was left unchanged"
    assert _refused(["train", *TINY], capsys) == expected
    assert _refused(["measure", "--", "true"], capsys) == expected
    assert MlflowClient().search_runs([MlflowClient().get_experiment_by_name("owned").experiment_id]) == []


def _measure(run_id: str, monkeypatch: pytest.MonkeyPatch, *command: str) -> subprocess.CompletedProcess[str]:
    """``mlflow-roofline measure -- COMMAND`` in this process with ``MLFLOW_RUN_ID`` set; COMMAND is a real child."""
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    return run_cli("measure", "--", *command)


def test_measure_refuses_an_ended_run_and_runs_nothing(
    tracking_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = MlflowClient()
    run_id = _measured_run(client, "FINISHED")
    before = _snapshot(client, run_id)
    marker = tmp_path / "ran"
    done = _measure(run_id, monkeypatch, "touch", str(marker))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        (
            f"Error: MLFLOW_RUN_ID: run {run_id} is FINISHED, not RUNNING: a run that has ended is never reopened; "
            "it was left unchanged"
        )
    ]
    assert not marker.exists()
    assert _snapshot(client, run_id) == before


def test_measure_joins_the_fresh_run_mlflow_run_hands_over(
    tracking_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = MlflowClient()
    run_id = client.create_run(client.create_experiment("given")).info.run_id
    done = _measure(run_id, monkeypatch, sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags[TAG_RUN_TYPE] == "measure"
    assert M_TIME_S in run.data.metrics and TAG_ERROR not in run.data.tags
    assert len(client.search_runs([run.info.experiment_id])) == 1
