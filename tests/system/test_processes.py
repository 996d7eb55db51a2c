"""Stopping a process group: real processes, one of them deaf to SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from mlflow_roofline.system.liveness import group_alive
from mlflow_roofline.system.processes import stop_group
from mlflow_roofline.train.launch import Job

# A leader that starts a child which ignores SIGTERM, writes the child's pid, and waits.
LEADER = """
import signal, subprocess, sys, time
deaf = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"],
    stdout=subprocess.PIPE, text=True)
deaf.stdout.readline()
open(sys.argv[1], "w").write(str(deaf.pid))
time.sleep(120)
"""


def start_group(tmp_path: Path) -> subprocess.Popen[bytes]:
    pid_file = tmp_path / "deaf.pid"
    leader = subprocess.Popen([sys.executable, "-c", LEADER, str(pid_file)], start_new_session=True)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the group did not start"
        time.sleep(0.1)
    return leader


def test_stop_group_terminates_the_leader_and_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    leader = start_group(tmp_path)
    assert group_alive(leader.pid)
    returncode = stop_group(leader, grace_s=1.0)
    assert returncode == -signal.SIGTERM  # the leader ended on SIGTERM
    assert not group_alive(leader.pid)  # the deaf child got SIGKILL after the grace period
    assert stop_group(leader, grace_s=1.0) == -signal.SIGTERM  # a group that already ended is no error


# A job's one process that leaves a child deaf to SIGTERM behind and exits.
ORPHANER = """
import subprocess, sys
deaf = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
deaf.stdout.readline()
"""


def test_a_job_stops_its_whole_group_even_after_its_leader_exited(tmp_path: Path) -> None:
    (tmp_path / "orphaner.py").write_text(ORPHANER)
    with open(tmp_path / "job.log", "w") as log:
        job = Job(1, "orphaner", [], env={"PYTHONPATH": str(tmp_path)}, echo=log)
        assert job.wait().ok
    assert group_alive(job.process.pid)  # the child outlived the job's process
    job.stop(grace_s=1.0)
    assert not group_alive(job.process.pid)
