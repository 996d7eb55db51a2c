"""The watchdog's protocol against a real launcher that is SIGKILLed: what it was told
to do is done, what was taken back is not, and a launcher that ends normally leaves
everything alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.sweeps import wait_until

from mlflow_roofline.system.watchdog import DIED_REASON

HOOK = "support.watchdog_hooks:touch"
TESTS = Path(__file__).resolve().parent.parent  # tests/, where the shared helpers live

# A launcher: starts its watchdog, gives it a folder and three hooks, takes one hook back,
# then dies by SIGKILL (argv[2] == "kill") or ends normally.
LAUNCHER = f"""
import os, signal, sys
from mlflow_roofline.system.watchdog import Watchdog
out, how = sys.argv[1], sys.argv[2]
watchdog = Watchdog()
watchdog.remove(out + "/scratch")
for name in ("parent", "child", "handed-over"):
    watchdog.call({HOOK!r}, path=out + "/" + name)
watchdog.cancel({HOOK!r}, path=out + "/handed-over")
print(watchdog.process.pid, flush=True)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
watchdog.release()
"""


# A process running two jobs one after the other on its shared watchdog: the first takes its
# hook back at its end, the second is still running when the process dies or exits.
SHARING = f"""
import os, signal, sys
from mlflow_roofline.system.watchdog import process_watchdog
out, how = sys.argv[1], sys.argv[2]
first = process_watchdog()
first.call({HOOK!r}, path=out + "/first-job")
first.cancel({HOOK!r}, path=out + "/first-job")
second = process_watchdog()
assert second is first
second.call({HOOK!r}, path=out + "/second-job")
print(second.process.pid, flush=True)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _launch(tmp_path: Path, how: str, launcher_code: str = LAUNCHER) -> tuple[int, int]:
    (tmp_path / "scratch").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    launcher = subprocess.run(
        [sys.executable, "-c", launcher_code, str(tmp_path), how], capture_output=True, text=True, env=env, timeout=60
    )
    assert launcher.stdout, launcher.stderr
    return launcher.returncode, int(launcher.stdout.split()[0])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie of ours counts as gone
        return stat.read().split(") ")[1].startswith("Z")


def test_a_killed_launcher_gets_its_hooks_called_and_folders_removed_but_not_what_it_took_back(
    tmp_path: Path,
) -> None:
    returncode, watchdog_pid = _launch(tmp_path, "kill")
    assert returncode == -9
    wait_until(lambda: _gone(watchdog_pid), "the watchdog to finish its cleanup")
    assert not (tmp_path / "scratch").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child", "parent"]
    reason = (tmp_path / "parent").read_text()
    assert reason.startswith(DIED_REASON.split("{")[0]) and "SIGKILL" in reason


def test_a_launcher_that_ends_normally_leaves_everything_alone(tmp_path: Path) -> None:
    returncode, watchdog_pid = _launch(tmp_path, "release")
    assert returncode == 0
    wait_until(lambda: _gone(watchdog_pid), "the watchdog to leave")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"]


def test_the_shared_watchdog_serves_a_process_s_jobs_and_leaves_at_its_exit(tmp_path: Path) -> None:
    returncode, watchdog_pid = _launch(tmp_path, "kill", SHARING)
    assert returncode == -9
    wait_until(lambda: _gone(watchdog_pid), "the watchdog to finish its cleanup")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch", "second-job"]  # the first job's hook: taken back
    (tmp_path / "second-job").unlink()
    (tmp_path / "scratch").rmdir()
    returncode, watchdog_pid = _launch(tmp_path, "exit", SHARING)
    assert returncode == 0
    wait_until(lambda: _gone(watchdog_pid), "the watchdog to leave")  # released at the process's exit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"]  # no hook called
