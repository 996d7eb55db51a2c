"""``measure`` follows the command's whole process tree: crashes, daemons that detach, SIGTERM.

Real commands (Python scripts that fork, detach with ``setsid`` and crash on a signal), the
real CLI and a real SQLite store; the ``estimate`` meter counts CPU time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mlflow
import psutil
import pytest

from mlflow_roofline.core.schema import TAG_ERROR, TAG_EXIT_CODE

CLI = str(Path(sys.executable).parent / "mlflow-roofline")
PY = sys.executable

# A command that starts a daemon (double fork + setsid: its parent exits at once) and
# writes the daemon's pid to PIDFILE. The daemon runs BODY; the command then waits for
# the daemon to close the pipe, or sleeps when WAIT is false.
DAEMONISING = textwrap.dedent(
    """
    import os, sys, time
    pidfile, wait = sys.argv[1], sys.argv[2] == "wait"
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(read_end)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # a daemon lets go of its command's stdio
                os.dup2(devnull, fd)
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            BODY
            os._exit(0)
        os._exit(0)
    os.close(write_end)
    os.wait()  # the intermediate parent, gone at once: the daemon is an orphan now
    print("ready", flush=True)
    if wait:
        os.read(read_end, 1)
    else:
        time.sleep(120)
    """
)

BURN = """
workers = []
for _ in range(2):  # two children of the daemon, 0.6 s of CPU each
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.6
        while time.process_time() < end:
            pass
        os._exit(0)
    workers.append(pid)
for pid in workers:
    os.waitpid(pid, 0)
os.close(write_end)  # the command may exit now; the daemon stays
time.sleep(120)
"""


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "daemonise.py"
    path.write_text(DAEMONISING.replace("BODY", textwrap.indent(body.strip(), " " * 8).lstrip()))
    return path


def _daemon(pidfile: Path) -> psutil.Process:
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        assert time.monotonic() < deadline, "the daemon did not start"
        time.sleep(0.05)
    return psutil.Process(int(pidfile.read_text()))


def _run() -> mlflow.entities.Run:
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "sig", "description"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", signal.SIGSEGV, "Segmentation fault"),
        ("import os; os.abort()", signal.SIGABRT, "Aborted"),
    ],
)
def test_a_command_that_crashes_on_a_signal_is_failed_with_the_signal(
    tracking_uri: str, code: str, sig: signal.Signals, description: str
) -> None:
    done = subprocess.run([CLI, "measure", "--", PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 128 + sig
    run = _run()
    assert run.info.status == "FAILED"  # KILLED is for an interruption of measure itself
    assert run.data.tags[TAG_ERROR] == f"the command crashed: killed by {sig.name} ({description})"
    assert run.data.tags[TAG_EXIT_CODE] == str(128 + sig)


@pytest.mark.slow
def test_the_cpu_time_of_a_daemons_children_is_counted_and_the_daemon_named(tracking_uri: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    script = _script(tmp_path, BURN)
    daemon = None
    try:
        done = subprocess.run(
            [CLI, "measure", "--meter", "estimate", "--", PY, str(script), str(pidfile), "wait"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        daemon = _daemon(pidfile)
        assert done.returncode == 0, done.stderr
        run = _run()
        # 1.2 s of CPU in the daemon's children at 6 W per busy core; the command itself
        # (interpreter start-up, a fork, a read) spends well under 0.5 s.
        assert run.data.metrics["energy_j"] >= 1.2 * 6
        line = f"1 process(es) the command started still run after it exited (pid {daemon.pid})"
        assert line in done.stderr, done.stderr
        assert daemon.is_running()  # left as it was: a daemon is meant to outlive its command
    finally:
        if daemon is not None:
            daemon.kill()


@pytest.mark.slow
def test_sigterm_takes_the_whole_tree_down_detached_daemons_included(tracking_uri: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    script = _script(tmp_path, "time.sleep(120)")
    proc = subprocess.Popen(
        [CLI, "measure", "--", PY, str(script), str(pidfile), "sleep"], stdout=subprocess.PIPE, text=True
    )
    daemon = None
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        daemon = _daemon(pidfile)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        _, alive = psutil.wait_procs([daemon], timeout=10)
        assert alive == [], "the detached daemon outlived the interrupted measure"
    finally:
        proc.kill()
        if daemon is not None and daemon.is_running():
            daemon.kill()
    run = _run()
    assert run.info.status == "KILLED"
    assert run.data.tags[TAG_ERROR] == "killed by SIGTERM"
