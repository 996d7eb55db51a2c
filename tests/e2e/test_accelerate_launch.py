"""Jobs under ``accelerate launch`` with 2 CPU processes (gloo): what ran is what is recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

REPO = Path(__file__).resolve().parents[2]
ACCELERATE = [
    sys.executable,
    "-m",
    "accelerate.commands.launch",
    "--num_processes",
    "2",
    "--num_machines",
    "1",
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
]


def _launch(flags: list[str], kind: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{kind}.json"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*ACCELERATE, *flags, str(REPO / "tests" / "integration_jobs.py"), kind, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = MlflowClient().get_run(json.loads(out.read_text())["run_id"])
    assert run.info.status == "FINISHED"
    return {"params": run.data.params, "metrics": run.data.metrics, "tags": run.data.tags}


@pytest.mark.slow
def test_trainer_under_ddp_records_two_devices_and_ddp(tracking_uri: str, tmp_path: Path) -> None:
    run = _launch(["--multi_gpu"], "trainer", tmp_path)  # torchrun-style launch; the Trainer runs gloo DDP on CPU
    assert run["params"]["strategy"] == "ddp" and run["params"]["num_devices"] == "2"
    assert run["params"]["batch_size"] == "8"  # 4 per device x 2 processes x 1 accumulation step
    m = run["metrics"]
    assert m["energy_j"] == pytest.approx(m["energy_j_rank_0"] + m["energy_j_rank_1"], rel=1e-9)
    assert m["energy_j_rank_1"] > 0 and run["tags"]["roofline.source"] == "trainer"
    client = MlflowClient()
    assert len(client.search_runs([client.get_experiment_by_name("launched").experiment_id])) == 1  # main logs only


@pytest.mark.slow
def test_an_fsdp_request_that_fell_back_records_what_ran(tracking_uri: str, tmp_path: Path) -> None:
    # On CPU, Accelerate(cpu=True) turns an FSDP launch into gloo DDP without a word.
    run = _launch(["--use_fsdp", "--fsdp_version", "2"], "loop", tmp_path)
    assert run["params"]["strategy"] == "ddp" and run["params"]["num_devices"] == "2"
    assert run["tags"]["roofline.source"] == "accelerate" and run["params"]["num_steps"] == "8"
    assert run["metrics"]["energy_j"] == pytest.approx(
        run["metrics"]["energy_j_rank_0"] + run["metrics"]["energy_j_rank_1"], rel=1e-9
    )


CRASHING_JOB = """
import torch
from integration_jobs import run_trainer, tiny_bert
from mlflow_roofline.integrations.transformers import RooflineCallback

model = tiny_bert()
steps = []
def explode(module, args, kwargs):
    steps.append(1)
    if len(steps) == 5:
        raise RuntimeError("boom at the fifth batch")
model.register_forward_pre_hook(explode, with_kwargs=True)
run_trainer(model, RooflineCallback(meter="estimate", experiment="crash"), max_steps=10)
"""


@pytest.mark.slow
def test_a_trainer_job_that_raises_leaves_no_run_running(tracking_uri: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_JOB],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1 and "boom at the fifth batch" in done.stderr
    client = MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("crash").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags["roofline.error"] == "training raised RuntimeError: boom at the fifth batch"
