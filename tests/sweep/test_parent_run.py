"""The sweep run: earlier sweep runs whose process is gone are ended KILLED."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mlflow_roofline.core.schema import TAG_RUN_TYPE
from mlflow_roofline.tracking.client import TrackingClient


def test_a_running_sweep_run_whose_process_is_gone_is_marked_killed(tracking_uri: str) -> None:
    """What the next sweep does when a sweep and its watchdog were both killed (a whole node or cgroup)."""
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.core.schema import TAG_ERROR
    from mlflow_roofline.sweep.parent_run import mark_stale_sweeps
    from mlflow_roofline.system.liveness import sweep_process_tags

    client = MlflowClient()
    exp = client.create_experiment("roofline-stale-sweeps")
    gone = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    dead_tags = sweep_process_tags(gone.pid)  # recorded while it ran
    gone.communicate(b"")  # then it ends

    def sweep_run(tags: dict[str, str]) -> str:
        return client.create_run(exp, tags={TAG_RUN_TYPE: "sweep", **tags}).info.run_id

    dead, alive, current = sweep_run(dead_tags), sweep_run(sweep_process_tags(os.getpid())), sweep_run({})
    mark_stale_sweeps(TrackingClient(), exp, current)
    assert client.get_run(dead).info.status == "KILLED"
    assert client.get_run(dead).data.tags[TAG_ERROR] == f"its process is gone; marked KILLED by sweep run {current}"
    assert client.get_run(alive).info.status == "RUNNING"
    assert client.get_run(current).info.status == "RUNNING"  # the sweep asking is never its own victim


def test_what_is_skipped_is_said_with_its_reason_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow_roofline.core.invocation import ENV_INVOCATION, MLPROJECT
    from mlflow_roofline.sweep.parent_run import skipped_line

    monkeypatch.delenv(ENV_INVOCATION, raising=False)
    assert skipped_line({"already_done": 0, "failed_earlier": 0, "skipped_invalid": 0}) == ""
    line = skipped_line({"already_done": 3, "failed_earlier": 1, "skipped_invalid": 0})
    assert line == "skipping 4 configuration(s): 3 already done, 1 failed earlier (--retry-failed true reruns them)"
    monkeypatch.setenv(ENV_INVOCATION, MLPROJECT)
    assert "1 impossible (--dry-run says why)" in skipped_line(
        {"already_done": 0, "failed_earlier": 0, "skipped_invalid": 1}
    )
