"""The warm server that run-ending jobs are forked from (tests/support/warm_jobs.py) ends each job as ``python`` would.

A plain script, nothing preloaded: the server forks it with the test's folder, environment and
arguments, and reports the exit a fresh ``python SCRIPT`` would have (a code, a traceback and 1,
SIGINT for an uncaught KeyboardInterrupt, the signal that killed it), one job after another.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.warm_jobs import WarmJobs

SCRIPT = """
import json, os, signal, sys
seen = {"name": __name__, "cwd": os.getcwd(), "probe": os.environ.get("WARM_PROBE"), "argv": sys.argv[1:]}
print(json.dumps({**seen, "pid": os.getpid()}), flush=True)
kind = sys.argv[1]
if kind == "exit":
    sys.exit(3)
if kind == "raise":
    raise ValueError("raised in the job")
if kind == "interrupt":
    raise KeyboardInterrupt
if kind == "stall":
    print("stalled", flush=True)
    signal.pause()
"""


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmJobs]:
    script = tmp_path_factory.mktemp("warm") / "job.py"
    script.write_text(SCRIPT)
    warm = WarmJobs(script, preload=())
    yield warm
    warm.close()


def test_a_job_runs_as_main_in_the_tests_folder_environment_and_arguments(
    jobs: WarmJobs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WARM_PROBE", "set by the test")
    done = jobs.run("exit", "more", stderr=tmp_path / "stderr")
    assert done.returncode == 3 and done.stderr == ""
    seen = json.loads(done.stdout)
    assert seen.pop("pid") not in (os.getpid(), jobs.server.pid)
    assert seen == {"name": "__main__", "cwd": str(tmp_path), "probe": "set by the test", "argv": ["exit", "more"]}


@pytest.mark.parametrize(
    ("kind", "code", "says"),
    [("raise", 1, "ValueError: raised in the job"), ("interrupt", -signal.SIGINT, "KeyboardInterrupt")],
)
def test_an_uncaught_exception_ends_the_job_as_it_ends_a_script(
    jobs: WarmJobs, tmp_path: Path, kind: str, code: int, says: str
) -> None:
    done = jobs.run(kind, stderr=tmp_path / "stderr")
    assert done.returncode == code and says in done.stderr.splitlines()[-1], done.stderr


def test_a_signal_ends_the_job_and_the_server_forks_the_next(jobs: WarmJobs, tmp_path: Path) -> None:
    job = jobs.start("stall", stderr=tmp_path / "stderr")
    try:
        assert "stalled\n" in job.stdout  # reads lines up to it; the job then waits for a signal
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == -signal.SIGTERM
    finally:
        job.kill()
    assert jobs.run("exit", stderr=tmp_path / "stderr").returncode == 3


def test_a_job_a_failed_test_left_running_is_killed_before_the_next_starts(jobs: WarmJobs, tmp_path: Path) -> None:
    left = jobs.start("stall", stderr=tmp_path / "left")
    assert "stalled\n" in left.stdout
    assert jobs.run("exit", stderr=tmp_path / "stderr").returncode == 3
    assert left.returncode == -signal.SIGKILL
