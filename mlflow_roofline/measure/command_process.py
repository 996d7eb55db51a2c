"""The measured command as a child process: started, followed, and its exit read.

The child gets this terminal's stdin/stdout/stderr. SIGTERM and SIGHUP sent to the
wrapper are passed on to it; SIGINT is ignored while it runs (a terminal's Ctrl-C reaches
the child directly, being in the same process group). The watchdog stops the child's
process tree if the wrapper dies first.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess

from mlflow_roofline.system.signals import forwarding_signals
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.client import RunStatus


@dataclasses.dataclass(frozen=True)
class CommandExit:
    """How the command ended: the wrapper's exit ``code``, the run's ``status`` and, when a signal
    killed it, the ``error`` for ``roofline.error``."""

    code: int
    status: RunStatus
    error: str | None = None


def command_exit(returncode: int) -> CommandExit:
    """The exit of a child whose ``Popen.returncode`` is ``returncode`` (-N: killed by signal N).

    Exit code 0 is FINISHED, another code FAILED, a signal KILLED with the shell's 128+N.
    """
    if returncode >= 0:
        return CommandExit(returncode, "FINISHED" if returncode == 0 else "FAILED")
    return CommandExit(128 - returncode, "KILLED", f"killed by {signal.Signals(-returncode).name}")


def run_forwarding_signals(command: list[str], watchdog: Watchdog) -> int:
    """Run the command; pass SIGTERM/SIGHUP on to it; return its returncode (-N: signal N).

    Raises:
        OSError: the command cannot be started.
    """
    proc = subprocess.Popen(command)
    watchdog.stop_tree(proc.pid)
    with forwarding_signals(proc):
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # pragma: no cover - SIGINT is ignored while waiting
                continue
