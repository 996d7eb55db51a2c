"""``measure`` when its command cannot start (the shell's exit codes) and when it is killed outright.

Exit codes are compared with what bash itself returns for the same command; the killed
launcher is a real SIGKILL, its command a real process tree.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import psutil
import pytest
from mlflow.tracking import MlflowClient
from support.processes import descendants_running_exactly

from mlflow_roofline.core.schema import TAG_ERROR

CLI = str(Path(sys.executable).parent / "mlflow-roofline")


def _script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _bash_code(program: str, env: dict[str, str]) -> int:
    return subprocess.run(["bash", "-c", 'exec "$0"', program], env=env, capture_output=True, check=False).returncode


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("missing-path", 127, "is not found (no such file)"),
        ("not-executable", 126, "is not executable: permission denied"),
        ("directory", 126, "is a directory"),
        ("not-executable-on-path", 126, "is not executable: permission denied"),
        (
            "missing-interpreter",
            127,
            "the interpreter of its #! line, '/no/such/interpreter', is not found",
        ),
        ("interpreter-not-executable", 126, "is not executable"),
    ],
)
def test_a_command_that_cannot_start_gets_the_shells_code_and_no_run(
    unopened_tracking_uri: str, tmp_path: Path, case: str, code: int, message: str
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    plain = _script(tmp_path / "plain.txt", "not a program\n", 0o644)
    programs = {
        "missing-path": str(tmp_path / "nope.sh"),
        "not-executable": str(_script(tmp_path / "job.sh", "#!/bin/sh\necho hi\n", 0o644)),
        "directory": str(tools),
        "not-executable-on-path": _script(tools / "mytool", "#!/bin/sh\necho hi\n", 0o644).name,
        "missing-interpreter": str(_script(tmp_path / "bad.sh", "#!/no/such/interpreter -x\necho hi\n")),
        "interpreter-not-executable": str(_script(tmp_path / "odd.sh", f"#!{plain}\necho hi\n")),
    }
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    program = programs[case]
    assert _bash_code(program, env) == code  # the convention, as the shell itself applies it
    done = subprocess.run(
        [CLI, "measure", "--", program, "arg"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == code
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: COMMAND: {program!r}") and message in lines[0], lines
    assert not Path("mlflow.db").exists() or mlflow.search_runs(search_all_experiments=True).empty


@pytest.mark.slow
def test_a_measure_killed_outright_takes_its_command_down_and_ends_its_run(tracking_uri: str, tmp_path: Path) -> None:
    MlflowClient().create_experiment("measured")
    # A process tree: a shell, and a python it waits for.
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    command = ["sh", "-c", f"{shlex.join(sleeper)} & wait"]
    launcher = subprocess.Popen(
        [CLI, "measure", "--experiment", "measured", "--", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        tree: list[psutil.Process] = []
        while time.monotonic() < deadline and not tree:
            assert launcher.poll() is None, launcher.stderr.read() if launcher.stderr else ""
            # the command's python itself: a child the launcher is just forking has the launcher's
            # command line, which holds the command too, and the run may not exist yet
            sleepers = descendants_running_exactly(psutil.Process(launcher.pid), sleeper)
            if sleepers:
                tree = [sleepers[0].parent(), sleepers[0]]
            time.sleep(0.2)
        assert tree, "the command did not start"
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=30)
        killed_at = time.monotonic()
        _, alive = psutil.wait_procs(tree, timeout=30)
        client = MlflowClient()
        [run] = client.search_runs([client.get_experiment_by_name("measured").experiment_id])
        while run.info.status == "RUNNING" and time.monotonic() - killed_at < 30:
            time.sleep(0.2)
            run = client.get_run(run.info.run_id)
        ended_after_s = time.monotonic() - killed_at
    finally:
        launcher.kill()
    for proc in alive:
        proc.kill()
    assert alive == [], "the command outlived its launcher"
    assert run.info.status == "KILLED"
    assert f"its launcher (pid {launcher.pid}) died without ending it" in run.data.tags[TAG_ERROR]
    assert ended_after_s < 20
