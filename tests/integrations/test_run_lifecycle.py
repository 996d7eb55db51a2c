"""The run of a measured training job ends with what happened to the process: Ctrl-C, SIGTERM,
SIGKILL, a store that cannot be written. Real Trainer jobs in real processes, a real SQLite store. The jobs
are forked from the worker's warm Python (``trainer_jobs`` in tests/conftest.py: each its own process, signals
and exit); the read-only store's job loses root's file-mode override before it starts (support/file_modes.py)."""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path

import mlflow
import pytest
from integration_jobs import run_trainer, tiny_bert
from mlflow import MlflowClient
from support.warm_jobs import WarmJob, WarmJobs

from mlflow_roofline.core.schema import TAG_ERROR
from mlflow_roofline.integrations.transformers import RooflineCallback


def _run_id(out: Path) -> str:
    return str(json.loads(out.read_text())["run_id"])


def _history_steps(run_id: str) -> dict[str, list[int]]:
    """The steps of the run's energy history (points gathered in memory until the run's end wrote them)."""
    client = MlflowClient()
    return {k: [m.step for m in client.get_metric_history(run_id, k)] for k in ("energy_j", "energy_forecast_j")}


def _stalled_job(jobs: WarmJobs, tmp_path: Path) -> tuple[WarmJob, str]:
    """A Trainer job, own run, sleeping at step 4; its run id."""
    out = tmp_path / "run.json"
    job = jobs.start("stall", str(out), stderr=tmp_path / "stderr")
    for line in job.stdout:  # the Trainer prints its logs before
        if line.strip() == "stalled":
            break
    else:
        raise AssertionError(f"the job ended before step 4 (exit {job.wait()})")
    return job, _run_id(out)


@pytest.mark.slow
def test_ctrl_c_under_report_to_mlflow_ends_the_run_killed_with_the_reason(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    out = tmp_path / "run.json"
    done = trainer_jobs.run("interrupt", str(out), stderr=tmp_path / "stderr")
    assert done.returncode == -signal.SIGINT, done.stderr[-2000:]  # Python's exit on an uncaught KeyboardInterrupt
    run = MlflowClient().get_run(_run_id(out))
    assert "learning_rate" in run.data.params  # MLflowCallback's run, joined
    assert run.info.status == "KILLED"
    assert run.data.tags[TAG_ERROR] == "interrupted: KeyboardInterrupt (Ctrl-C) before training ended"
    # Every point logged before the interrupt (steps 2 to 4, before the first write at 5 s) is in the store.
    assert _history_steps(run.info.run_id) == {"energy_j": [2, 3, 4], "energy_forecast_j": [3, 4]}


@pytest.mark.slow
def test_sigterm_of_the_training_process_ends_its_run_killed(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    job, run_id = _stalled_job(trainer_jobs, tmp_path)
    try:
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == -signal.SIGTERM  # the signal took its course
    finally:
        job.kill()
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags[TAG_ERROR] == "the training process got SIGTERM"
    assert _history_steps(run_id) == {"energy_j": [2, 3, 4], "energy_forecast_j": [3, 4]}


@pytest.mark.slow
def test_a_training_process_killed_outright_has_its_run_ended_by_the_watchdog(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    job, run_id = _stalled_job(trainer_jobs, tmp_path)
    try:
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=60)
    finally:
        job.kill()
    killed_at = time.monotonic()
    client = MlflowClient()
    run = client.get_run(run_id)
    while run.info.status == "RUNNING" and time.monotonic() - killed_at < 60:
        time.sleep(0.2)
        run = client.get_run(run_id)
    assert run.info.status == "KILLED"
    assert f"its launcher (pid {job.pid}) died without ending it" in run.data.tags[TAG_ERROR]


def test_a_store_that_cannot_be_written_leaves_training_going_with_one_warning(
    tracking_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be\n")
    bad = f"sqlite:///{blocker / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", bad)
    mlflow.set_tracking_uri(bad)
    callback = RooflineCallback(meter="estimate", warmup_steps=1, forecast_after_steps=2)
    with caplog.at_level(logging.WARNING):
        state = run_trainer(tiny_bert(), callback, max_steps=6)
    assert state.global_step == 6  # trained to the end
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"roofline: tracking store {bad} cannot be created: {blocker} is a file")
    assert warnings[0].endswith("training goes on, not measured")


@pytest.mark.slow
def test_a_read_only_store_is_one_warning_and_the_job_trains_to_its_end(
    tracking_uri: str, tmp_path: Path, trainer_jobs: WarmJobs
) -> None:
    store = Path(tracking_uri.removeprefix("sqlite:///"))
    MlflowClient().create_experiment("launched")  # the store exists, then cannot be written
    store.chmod(0o444)
    out = tmp_path / "run.json"
    try:
        done = trainer_jobs.run(
            "trainer", str(out), stderr=tmp_path / "stderr", prepare="support.file_modes:honour_file_modes_now"
        )
    finally:
        store.chmod(0o644)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "'train_runtime'" in done.stdout  # the Trainer's summary: it trained to the end
    ours = [line for line in done.stderr.splitlines() if "roofline" in line or "mlflow" in line.lower()]
    assert ours == [
        f"roofline: tracking store {tracking_uri} cannot be written (attempt to write a readonly database): "
        "check the file's and its folder's permissions; training goes on, not measured"
    ]
    assert not out.exists()  # no run
