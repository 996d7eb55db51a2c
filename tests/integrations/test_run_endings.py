"""How a measured job's runs end when the process is stopped, the user's own runs included: a second and a
third Ctrl-C while the run ends, SIGTERM inside the user's nested runs, Ctrl-C or an exception inside the
user's ``with mlflow.start_run()``. Real Trainer jobs (tiny BERT, CPU) in real processes (forked from the
worker's warm Python, ``trainer_jobs`` in tests/conftest.py: each its own process, signals and exit), a real SQLite
store; the only thing injected is the Ctrl-C pressed again, raised as a real SIGINT in the flush of MLflow's
asynchronous logging that ending a run begins with."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run
from support.warm_jobs import WarmJobs

from mlflow_roofline.core.schema import TAG_ERROR
from mlflow_roofline.integrations.run_log import INTERRUPTED_REASON, SIGTERM_REASON


def _job(jobs: WarmJobs, how: str, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return jobs.run(how, str(out), *flags, stderr=out.with_suffix(".stderr"))


def _runs(out: Path) -> tuple[Run, Run | None]:
    """The run the job logged to, and the user's outer run (None when not nested)."""
    ids = json.loads(out.read_text())
    client = MlflowClient()
    return client.get_run(ids["run_id"]), client.get_run(ids["parent_id"]) if ids["parent_id"] else None


def _ended(run_id: str, within_s: float = 60.0) -> Run:
    """The run once it is no longer RUNNING (the watchdog ends it after the process is gone), or as it is then."""
    client = MlflowClient()
    deadline = time.monotonic() + within_s
    run = client.get_run(run_id)
    while run.info.status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
        run = client.get_run(run_id)
    return run


@pytest.mark.slow
def test_ctrl_c_pressed_again_while_autolog_ends_the_run_still_ends_it_killed(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    out = tmp_path / "run.json"
    done = _job(
        trainer_jobs, "interrupt", out, "--autolog", "--ctrl-c-at-flush=3"
    )  # the second, third and fourth Ctrl-C
    assert done.returncode == -signal.SIGINT, done.stderr[-3000:]
    assert "Exception ignored in atexit" not in done.stderr, done.stderr[-3000:]
    run, _ = _runs(out)
    assert "learning_rate" in run.data.params  # MLflowCallback's run, joined
    assert run.info.status == "KILLED"
    assert run.data.tags[TAG_ERROR] == INTERRUPTED_REASON


@pytest.mark.slow
def test_a_run_that_interrupts_keep_from_ending_is_ended_by_the_watchdog_once_the_process_is_gone(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    out = tmp_path / "run.json"
    done = _job(
        trainer_jobs, "interrupt", out, "--autolog", "--ctrl-c-at-flush=1000"
    )  # every attempt to end it cut short
    assert done.returncode == -signal.SIGINT, done.stderr[-3000:]
    run = _ended(_runs(out)[0].info.run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags[TAG_ERROR] == INTERRUPTED_REASON  # the reason tagged before the end was cut short


@pytest.mark.slow
def test_sigterm_under_autolog_ends_the_users_nested_runs_killed_with_the_reason(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    out = tmp_path / "run.json"
    job = trainer_jobs.start("stall", str(out), "--autolog", "--nested", stderr=tmp_path / "stderr")
    try:
        for line in job.stdout:
            if line.strip() == "stalled":
                break
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == -signal.SIGTERM  # the signal took its course
    finally:
        job.kill()
    child, parent = _runs(out)
    assert parent is not None and child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    for run in (child, parent):
        assert (run.info.status, run.data.tags.get(TAG_ERROR)) == ("KILLED", SIGTERM_REASON)


@pytest.mark.slow
@pytest.mark.parametrize("autolog", [True, False], ids=["autolog", "callback"])
def test_ctrl_c_inside_the_users_own_runs_ends_them_killed_with_the_reason(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs, autolog: bool
) -> None:
    out = tmp_path / "run.json"
    done = _job(trainer_jobs, "interrupt", out, "--nested", *(["--autolog"] if autolog else []))
    assert done.returncode == -signal.SIGINT, done.stderr[-3000:]
    child, parent = _runs(out)
    assert parent is not None
    for run in (child, parent):
        assert (run.info.status, run.data.tags.get(TAG_ERROR)) == ("KILLED", INTERRUPTED_REASON)
    assert "energy_j" in child.data.metrics  # what was measured before the interrupt is kept


@pytest.mark.slow
@pytest.mark.parametrize("autolog", [True, False], ids=["autolog", "callback"])
def test_an_exception_inside_the_users_own_run_ends_it_failed_with_the_reason(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs, autolog: bool
) -> None:
    out = tmp_path / "run.json"
    done = _job(trainer_jobs, "raise", out, "--nested", *(["--autolog"] if autolog else []))
    assert done.returncode == 1 and "ValueError: the data ran out" in done.stderr, done.stderr[-3000:]
    child, parent = _runs(out)
    assert (child.info.status, child.data.tags.get(TAG_ERROR)) == (
        "FAILED",
        "training raised ValueError: the data ran out",
    )
    assert parent is not None and parent.info.status == "FAILED"  # the user's outer block, ended by MLflow
