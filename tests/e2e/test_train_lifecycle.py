"""A train run's lifecycle: joining the run MLFLOW_RUN_ID names, and never staying RUNNING.

Failures are real: an allocation beyond the address-space limit (a genuine out-of-memory
inside training), a worker rank killed with SIGKILL, the launching process terminated.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient
from support.cli_args import TINY_SHAPE
from support.processes import descendants_running

from mlflow_roofline.cli import main
from mlflow_roofline.core.schema import M_ENERGY_J, M_PROXY_PARAMS, M_TIME_S, PARAM_NAMES, TAG_DEVICE, TAG_ERROR

TINY = TINY_SHAPE
CLI = [sys.executable, "-m", "mlflow_roofline.cli", "train"]


def test_logs_into_the_run_mlflow_run_id_names(tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("sweep")
    run_id = client.create_run(experiment_id, run_name="child").info.run_id
    # As `mlflow run` logs entry-point parameters: device still "auto", numbers as typed.
    client.log_param(run_id, "device", "auto")
    client.log_param(run_id, "num_layers", "1.0")
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    main(["train", *TINY, "--num-steps", "2", "--warmup-steps", "0", "--meter", "estimate"])
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "single-x1-L1-d32-h2-ff64-S8-B4"
    assert client.search_runs([experiment_id]) and len(client.search_runs([experiment_id])) == 1
    params = run.data.params
    assert set(PARAM_NAMES) <= set(params)
    assert params["device"] == "auto" and run.data.tags[TAG_DEVICE] == "cpu"
    assert params["num_layers"] == "1.0" and params["hidden_size"] == "32" and params["num_steps"] == "2"
    assert params["meter"] == "estimate"
    assert {M_PROXY_PARAMS, M_TIME_S, M_ENERGY_J} <= set(run.data.metrics)


def _tracked_env(tmp_path: Path) -> dict[str, str]:
    MlflowClient().create_experiment("roofline-bert")  # the store exists before the child polls it
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _only_run(experiment: str = "roofline-bert"):
    client = MlflowClient()
    [run] = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return run


def _limit_address_space() -> None:
    limit = 4 * 1024**3  # enough for python + torch + mlflow, not for an 8 GB tensor
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.slow
def test_out_of_memory_in_training_fails_the_run(tracking_uri: str, tmp_path: Path) -> None:
    # d = 65536: the word embedding alone (30522 x 65536 fp32) is 8 GB; it cannot be allocated.
    args = [
        "--num-layers",
        "1",
        "--hidden-size",
        "65536",
        "--num-heads",
        "1",
        "--ffn-size",
        "64",
        "--seq-len",
        "8",
        "--batch-size",
        "1",
        "--num-steps",
        "1",
        "--warmup-steps",
        "0",
    ]
    done = subprocess.run(
        CLI + args,
        env=_tracked_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_address_space,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: training job failed (exit status 1): RuntimeError:") and "allocate" in last
    run = _only_run()
    assert run.info.status == "FAILED"
    assert "can't allocate memory" in run.data.tags[TAG_ERROR]
    error_txt = Path(run.info.artifact_uri.removeprefix("file://")) / "error.txt"
    assert "Traceback" in error_txt.read_text() and "build_model" in error_txt.read_text()


def _job_processes(parent: psutil.Process) -> list[psutil.Process]:
    return descendants_running(parent, "mlflow_roofline.train.worker")


def _wait_for(predicate, process: subprocess.Popen, timeout: float = 120.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"the launcher exited ({process.returncode}) while waiting for {what}: {process.stderr.read()[-3000:]}"
            )
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_worker_rank_killed_fails_the_run_and_stops_the_job(tracking_uri: str, tmp_path: Path) -> None:
    args = [*TINY, "--strategy", "ddp", "--num-devices", "2", "--num-steps", "1000000", "--warmup-steps", "0"]
    process = subprocess.Popen(
        CLI + args, env=_tracked_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        parent = psutil.Process(process.pid)

        def rank1_training() -> psutil.Process | None:
            for p in _job_processes(parent):
                try:
                    if p.environ().get("RANK") == "1" and p.cpu_times().user > 2.0:  # past its imports
                        return p
                except psutil.NoSuchProcess:
                    pass
            return None

        rank1 = _wait_for(rank1_training, process, what="rank 1 to start")
        everything = _job_processes(parent)
        rank1.send_signal(signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 2
    # The rank that died first is named, with its signal, not rank 0's connection error after it.
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("Error: training job failed (exit status 1): rank 1 was killed by SIGKILL"), stderr[-3000:]
    run = _only_run()
    assert run.info.status == "FAILED"
    assert run.data.tags[TAG_ERROR].splitlines()[-1] == last.removeprefix("Error: ")
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in everything)


@pytest.mark.slow
def test_terminating_the_launcher_ends_the_run_killed(tracking_uri: str, tmp_path: Path) -> None:
    args = [*TINY, "--num-steps", "1000000", "--warmup-steps", "0"]
    process = subprocess.Popen(
        CLI + args, env=_tracked_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        parent = psutil.Process(process.pid)
        _wait_for(lambda: _job_processes(parent), process, what="the job to start")
        _wait_for(_run_set_up, process, what="the run to be set up")
        job = _job_processes(parent)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM
    assert stderr.strip().splitlines()[-1] == "Error: interrupted by SIGTERM; the run ended KILLED"
    run = _only_run()
    assert run.info.status == "KILLED" and "interrupted" in run.data.tags[TAG_ERROR]
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in job)


def _run_set_up() -> bool:
    """The run is open and its setup logged."""
    client = MlflowClient()
    experiment = client.get_experiment_by_name("roofline-bert")
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    return bool(runs) and TAG_DEVICE in runs[0].data.tags


@pytest.mark.slow
def test_a_launcher_killed_outright_takes_its_job_along_and_ends_its_run(tracking_uri: str, tmp_path: Path) -> None:
    # SIGKILL cannot be handled: the watchdog stops the job (in a session of its own, it
    # must not train on as an orphan), removes the temp folder and ends the run KILLED.
    args = [*TINY, "--strategy", "ddp", "--num-devices", "2", "--num-steps", "1000000", "--warmup-steps", "0"]
    process = subprocess.Popen(
        CLI + args, env=_tracked_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        parent = psutil.Process(process.pid)
        job = _wait_for(
            lambda: len(_job_processes(parent)) == 3 and _job_processes(parent),
            process,
            what="torchrun and its 2 ranks",
        )
        _wait_for(_run_set_up, process, what="the run to be set up")
        job_dir = Path(job[0].cmdline()[-1])
        assert job_dir.is_dir() and job_dir.name.startswith("roofline-job-")
        process.kill()
        process.wait(timeout=30)
        killed_at = time.monotonic()
        _, alive = psutil.wait_procs(job, timeout=60)
        while _only_run().info.status == "RUNNING" and time.monotonic() - killed_at < 30:
            time.sleep(0.2)
        ended_after_s = time.monotonic() - killed_at
    finally:
        process.kill()
    for p in alive:  # do not leave them behind, even when failing
        p.kill()
    assert alive == []
    run = _only_run()
    assert run.info.status == "KILLED", f"still {run.info.status} {ended_after_s:.1f} s after the SIGKILL"
    assert f"its launcher (pid {process.pid}) died without ending it" in run.data.tags[TAG_ERROR]
    assert ended_after_s < 20
    assert not job_dir.exists()
