"""Bad input to `train`: one line naming the param and the rule, exit 2, a FAILED run, no process.

In-process through the CLI (fast), plus once through `mlflow run` to see the same from
the entry point.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from support.cli_args import mlflow_run_train
from support.store_template import copy_store

import mlflow_roofline.train.run as train_run
from mlflow_roofline.cli import main
from mlflow_roofline.core.schema import DEFAULT_EXPERIMENT, TAG_ERROR
from mlflow_roofline.energy.devices import DEVICE_KINDS

REPO = Path(__file__).resolve().parents[2]
GOOD = {
    "num-layers": "2",
    "hidden-size": "32",
    "num-heads": "2",
    "ffn-size": "64",
    "seq-len": "16",
    "batch-size": "4",
    "num-steps": "2",
    "warmup-steps": "0",
}

CASES = [
    ({"hidden-size": "30", "num-heads": "4"}, "hidden_size: must be divisible by num_heads"),
    (
        {"strategy": "tp", "num-devices": "2", "hidden-size": "48", "num-heads": "3"},
        "num_heads: must be divisible by num_devices under tp",
    ),
    ({"strategy": "tp", "num-devices": "2", "ffn-size": "65"}, "ffn_size: must be divisible by num_devices under tp"),
    (
        {"strategy": "ddp", "num-devices": "2", "batch-size": "5"},
        "batch_size: must be divisible by num_devices under ddp",
    ),
    (
        {"strategy": "fsdp", "num-devices": "4", "batch-size": "6"},
        "batch_size: must be divisible by num_devices under fsdp",
    ),
    ({"strategy": "single", "num-devices": "2"}, "num_devices: must be 1 under strategy single"),
    ({"strategy": "ddp", "num-devices": "1"}, "num_devices: must be at least 2 under strategy ddp"),
    ({"num-layers": "0"}, "num_layers: must be a positive integer"),
    ({"seq-len": "-8"}, "seq_len: must be a positive integer"),
    ({"batch-size": "2.5"}, "batch_size: must be an integer"),
    ({"strategy": "pipeline"}, "strategy: must be one of single, ddp, fsdp, tp"),
    ({"precision": "fp4"}, "precision: must be one of fp32, tf32, bf16, fp16, fp8"),
    ({"precision": "fp8"}, "precision: fp8 training needs Transformer Engine, which this trainer does not use"),
    ({"precision": "tf32"}, "precision: tf32 is a mode of NVIDIA tensor cores: on cpu use one of fp32, bf16, fp16"),
    ({"device": "gpu"}, "device: must be one of auto, cuda, cpu"),
    ({"device": "cuda"}, "device: cuda was asked for but no cuda device is visible"),
    ({"meter": "joulemeter"}, "meter: must be one of auto, nvml, nvml_power, rocm, rapl, estimate"),
    ({"num-layers": None}, "num_layers: is required"),
]


def _argv(overrides: dict[str, str]) -> list[str]:
    values = {**GOOD, **overrides}
    return ["train"] + [item for key, value in values.items() if value is not None for item in (f"--{key}", value)]


@pytest.fixture
def no_job(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a training process was started despite bad input")

    monkeypatch.setattr(train_run, "Job", refuse)


def _error_line(capsys: pytest.CaptureFixture) -> str:
    """The one line our error makes (MLflow's own INFO logging shares stderr)."""
    lines = capsys.readouterr().err.strip().splitlines()
    ours = [line for line in lines if not line[:4].isdigit()]  # MLflow log lines start with a date
    assert len(ours) == 1 and ours == lines[-1:], lines
    return ours[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[str]:
    """One SQLite store for the in-process cases (creating one costs seconds); a case per experiment."""
    tmp = tmp_path_factory.mktemp("bad_input")
    uri = f"sqlite:///{copy_store(store_template, tmp / 'mlflow.db')}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"):
            patch.delenv(name, raising=False)
        mlflow.set_tracking_uri(uri)
        yield uri


def _only_run(experiment: str) -> mlflow.entities.Run:
    client = MlflowClient()
    [run] = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return run


@pytest.mark.parametrize(
    ("overrides", "message"), CASES, ids=[m.split(":")[0] + f"-{i}" for i, (_, m) in enumerate(CASES)]
)
def test_bad_input_fails_the_run_before_any_process(
    store: str,
    no_job: None,
    capsys: pytest.CaptureFixture,
    overrides: dict,
    message: str,
    request: pytest.FixtureRequest,
) -> None:
    experiment = request.node.callspec.id
    with pytest.raises(SystemExit) as exit_info:
        main(_argv(overrides) + ["--experiment", experiment])
    assert exit_info.value.code == 2
    assert _error_line(capsys).startswith(f"Error: {message}")
    run = _only_run(experiment)
    assert run.info.status == "FAILED"
    assert message in run.data.tags[TAG_ERROR]


def test_more_devices_than_gpus_is_refused(
    store: str, no_job: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # No GPU can exist here: the device registry's cuda kind pretends to see one device.
    one_gpu = dataclasses.replace(DEVICE_KINDS["cuda"], may_be_present=lambda: True, count=lambda: 1)
    monkeypatch.setitem(DEVICE_KINDS, "cuda", one_gpu)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)  # set by earlier cases' set_experiment
    with pytest.raises(SystemExit) as exit_info:
        main(_argv({"strategy": "ddp", "num-devices": "2", "device": "cuda"}))  # default experiment
    assert exit_info.value.code == 2
    message = "num_devices: must be at most the 1 visible cuda device(s), got 2"
    assert _error_line(capsys) == f"Error: {message}"
    run = _only_run(DEFAULT_EXPERIMENT)
    assert run.info.status == "FAILED" and run.data.tags[TAG_ERROR] == message
    assert run.info.run_name == "ddp-x2-L2-d32-h2-ff64-S16-B4"


def test_a_param_the_run_already_holds_differently_refuses_it_untouched(
    store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # The sweep (or `mlflow run`) created the run with its params; this job disagrees.
    client = MlflowClient()
    experiment_id = client.create_experiment("given")
    run_id = client.create_run(experiment_id).info.run_id
    client.log_param(run_id, "num_layers", "3")
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    with pytest.raises(SystemExit):
        main(_argv({"meter": "estimate"}))
    assert (
        f"MLFLOW_RUN_ID: run {run_id} has num_layers='3', which contradicts num_layers='2'" in capsys.readouterr().err
    )
    run = client.get_run(run_id)
    assert run.info.status == "RUNNING" and TAG_ERROR not in run.data.tags


@pytest.mark.slow
def test_bad_input_through_mlflow_run(tracking_uri: str, tmp_path: Path) -> None:
    client = MlflowClient()
    client.create_experiment("bad", artifact_location=(tmp_path / "artifacts").as_uri())
    params = {**GOOD, "batch-size": "6", "strategy": "ddp", "num-devices": "4"}
    command = mlflow_run_train("bad", {key.replace("-", "_"): value for key, value in params.items()})
    done = subprocess.run(command, cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Error: batch_size: must be divisible by num_devices under ddp (6 % 4 != 0)" in done.stderr
    [run] = client.search_runs([client.get_experiment_by_name("bad").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags[TAG_ERROR] == "batch_size: must be divisible by num_devices under ddp (6 % 4 != 0)"
    assert run.data.params["batch_size"] == "6"  # logged by `mlflow run` itself


def test_run_name_even_for_a_config_that_breaks_a_rule() -> None:
    options = {
        "num_layers": "2",
        "hidden_size": "30",
        "num_heads": "4",
        "ffn_size": "64",
        "seq_len": "8",
        "batch_size": "4",
        "strategy": "tp",
        "num_devices": "2",
        "device": "cuda",
    }
    assert train_run._run_name(options) == "tp-x2-L2-d30-h4-ff64-S8-B4"
    assert train_run._run_name({**options, "num_layers": "two"}) is None
