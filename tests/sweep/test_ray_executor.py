"""A local Ray instance (a sweep with ``--executor ray`` and no address) runs its task workers at nice 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os

import ray

from mlflow_roofline.sweep.remote.executors import NODE_METER_RESOURCE, ExecutorSettings, RayExecutor

executor = RayExecutor(ExecutorSettings(kind="ray", workers_on_this_host=True), "cpu")  # starts the local instance
niceness = ray.remote(num_cpus=0, resources={NODE_METER_RESOURCE: 1})(lambda: os.nice(0))
print("worker niceness", ray.get(niceness.remote()))
executor.close()
"""


def test_a_local_ray_instance_runs_its_workers_at_nice_zero(tmp_path: Path) -> None:
    """Ray's default (15) would hand a measured job's CPU to any other load on the node."""
    pytest.importorskip("ray")
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    # a HOME of its own: a local ray.init leaves ~/.ray/auth_token behind (see tests/e2e/test_sweep_remote.py)
    env = {**os.environ, "PYTHONPATH": pythonpath, "HOME": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_worker_niceness", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "worker niceness 0" in done.stdout, done.stdout
