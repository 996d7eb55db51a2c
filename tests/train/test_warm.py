"""The warm launch's server: where its socket goes, and the environment its ranks are forked with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlflow_roofline.train.launch import OMP_WAIT_POLICY
from mlflow_roofline.train.warm import SHORT_TEMP_FOLDERS, SOCKET_PATH_MAX_BYTES

START_AND_FORK = """
import json, multiprocessing, multiprocessing.util, os, tempfile
from mlflow_roofline.train.warm import WarmServer
server = WarmServer().start()
child = server.context.Process(target=os.getpid)
child.start()
child.join(120)
with server.context.Pool(1) as pool:
    wait_policy = pool.apply(os.getenv, ("OMP_WAIT_POLICY",))  # as a process forked from the server has it
print(json.dumps({"exitcode": child.exitcode, "socket_folder": multiprocessing.util.get_temp_dir(),
                  "temp_folder": tempfile.gettempdir(), "wait_policy": wait_policy}))
"""


def _start_and_fork(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", START_AND_FORK], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_under_a_long_tmpdir_the_server_starts_and_forks_ranks_whose_openmp_threads_sleep(tmp_path: Path) -> None:
    long_tmpdir = tmp_path / ("d" * (SOCKET_PATH_MAX_BYTES - len(str(tmp_path))))
    long_tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    started = _start_and_fork({**env, "TMPDIR": str(long_tmpdir)})
    assert started["exitcode"] == 0  # the server started and forked a process
    assert started["temp_folder"] == str(long_tmpdir)  # the process's temp folder is still the user's
    assert not started["socket_folder"].startswith(str(long_tmpdir))
    assert os.path.dirname(started["socket_folder"]) in SHORT_TEMP_FOLDERS
    assert not os.path.exists(started["socket_folder"])  # removed at the process's exit
    assert started["wait_policy"] == OMP_WAIT_POLICY == "PASSIVE"  # OpenMP threads sleep, not spin, in the ranks


def test_the_callers_openmp_wait_policy_reaches_the_ranks() -> None:
    started = _start_and_fork({**os.environ, "OMP_WAIT_POLICY": "ACTIVE"})
    assert started["wait_policy"] == "ACTIVE"
