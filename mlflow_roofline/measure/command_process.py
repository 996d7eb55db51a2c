"""The measured command as a child process: started, followed whole, and its exit read.

The child gets this terminal's stdin/stdout/stderr. This process becomes a child
subreaper (:mod:`mlflow_roofline.system.process_tree`): whatever the command starts
stays in its tree, daemons that detach (double fork, ``setsid``) included, so that the
``estimate`` meter counts their CPU time and a stop reaches them.

SIGTERM and SIGHUP sent to the wrapper are passed on to every process of the tree; a
SIGINT is not passed on (a terminal's Ctrl-C reaches the command directly, being in the
same process group) but noted. After such an interruption, what is left of the tree
once the command has exited is stopped (SIGTERM, SIGKILL after a grace). The watchdog
stops the tree if the wrapper dies first.

How it ended: exit code 0 is FINISHED, another code FAILED; a signal that killed the
command is KILLED when the wrapper was interrupted (its signal passed on or Ctrl-C),
else FAILED (a crash: SIGSEGV, SIGABRT, SIGKILL from the OOM killer), naming the signal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import psutil

from mlflow_roofline.system.process_tree import ProcessTree, subreaping
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.client import RunStatus

POLL_S = 0.5
"""Seconds between two looks at the tree while the command runs (adopted orphans reaped, the watchdog told)."""
STOP_GRACE_S = 5.0
"""Seconds the rest of an interrupted tree gets between SIGTERM and SIGKILL."""
FORWARDED = (signal.SIGTERM, signal.SIGHUP)
NOTED = (signal.SIGINT,)


@dataclasses.dataclass(frozen=True)
class CommandExit:
    """How the command ended: the wrapper's exit ``code``, the run's ``status`` and, when a signal
    killed it or interrupted the wrapper, the ``error`` for ``roofline.error``."""

    code: int
    status: RunStatus
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What the command did: its ``Popen.returncode`` (-N: killed by signal N), the signal that
    interrupted the wrapper (None: none), and what of its tree was still running when it exited."""

    returncode: int
    interrupted_by: int | None = None
    followed: bool = True
    left_running: tuple[int, ...] = ()
    stopped: int = 0


def command_exit(returncode: int, interrupted_by: int | None = None) -> CommandExit:
    """The exit of a child whose ``Popen.returncode`` is ``returncode``; ``interrupted_by``: the
    signal the wrapper got (passed on, or Ctrl-C), None when nobody interrupted it.

    The code is the shell's: the exit code, or 128+N for signal N.
    """
    if returncode == 0:
        return CommandExit(0, "FINISHED")
    if returncode > 0:
        if interrupted_by is not None:
            reason = f"interrupted by {_name(interrupted_by)}; the command then exited {returncode}"
            return CommandExit(returncode, "KILLED", reason)
        return CommandExit(returncode, "FAILED")
    sig = -returncode
    if interrupted_by is None:
        return CommandExit(128 + sig, "FAILED", f"the command crashed: killed by {_name(sig)} ({_describe(sig)})")
    if interrupted_by == sig:
        return CommandExit(128 + sig, "KILLED", f"killed by {_name(sig)}")
    return CommandExit(128 + sig, "KILLED", f"killed by {_name(sig)} after an interruption by {_name(interrupted_by)}")


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _describe(sig: int) -> str:
    return signal.strsignal(sig) or f"signal {sig}"


def run_command(command: list[str], watchdog: Watchdog) -> CommandResult:
    """Run the command and follow its whole tree until the command exits (see the module doc).

    Raises:
        OSError: the command cannot be started.
    """
    with subreaping() as followed:
        return _run_followed(command, watchdog, followed)


def _run_followed(command: list[str], watchdog: Watchdog, followed: bool) -> CommandResult:
    """:func:`run_command`, this process a subreaper where ``followed``."""
    foreign = {p.pid for p in psutil.Process().children()}  # the watchdog
    proc = subprocess.Popen(command)
    watchdog.stop_tree(proc.pid)
    tree = ProcessTree(proc.pid, foreign)
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if signum in FORWARDED:
            tree.signal(signum)

    with _handling(on_signal):
        while True:
            try:
                returncode = proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                for pid in tree.adopt():
                    watchdog.stop_tree(pid)
    tree.adopt(thorough=True)  # orphans that exited: reaped now, so that the meter's end counts them
    interrupted = received[0] if received else None
    if interrupted is not None:
        return CommandResult(returncode, interrupted, followed, stopped=tree.stop(STOP_GRACE_S))
    left = tuple(p.pid for p in tree.members() if p.pid != proc.pid and _running(p))
    return CommandResult(returncode, None, followed, left)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@contextlib.contextmanager
def _handling(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """Inside the block, the forwarded and noted signals go to ``handler`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (*FORWARDED, *NOTED)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
