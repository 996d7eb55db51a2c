"""A watchdog: a process that outlives its launcher only long enough to clean up after it.

A launcher that is killed outright (SIGKILL, the OOM killer) runs no ``finally``: its
run would stay RUNNING, its temp folder and its children would stay behind. The
launcher starts :class:`Watchdog` (``python -m mlflow_roofline.system.watchdog``, in a
session of its own, out of reach of signals sent to the launcher's group) and tells it,
one JSON line at a time on the watchdog's stdin, what to clean: process groups, process
trees, folders, and hooks to call (``module:function`` with keyword arguments; the
launcher's MLflow runs are ended KILLED that way; a hook can be taken back when another
process takes the run over).

The launcher's death is the end of that pipe: no polling, no pid that could be reused.
When the launcher finishes normally it says ``done`` and the watchdog leaves without
touching anything. Otherwise the watchdog, within a few seconds: stops the process
trees and groups (SIGTERM, SIGKILL after a grace), removes the folders, calls the hook.
A hook given with :meth:`Watchdog.arm` is more insistent: it stays armed until it is taken
back, a normal exit included. A launcher whose run could not be ended (the store
interrupted by a second Ctrl-C) leaves it armed, and the watchdog ends the run once the
launcher is gone.

A process that runs many short jobs (a notebook, a script calling ``Trainer.train()``
in a loop) shares one watchdog, :func:`process_watchdog`: each job gives it its hook and
takes it back at its end; it is released when the process exits. Starting one costs a
Python start-up (about 0.1 s of CPU) and releasing it waits for its exit (tens of ms):
paid once per process, not once per job.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import psutil

STOP_GRACE_S = 5.0
RELEASE_WAIT_S = 5.0
DIED_REASON = "its launcher (pid {pid}) died without ending it (killed, e.g. by SIGKILL or the OOM killer)"
LEFT_REASON = "its launcher (pid {pid}) exited without ending it (ending it was interrupted or failed)"


JsonScalar = str | int | float | bool | None
"""A hook argument: it travels to the watchdog as JSON."""
Order = dict[str, Any]
"""One instruction as the watchdog decoded it from JSON (its keys say which kind)."""


class Watchdog:
    """The launcher's side: start the watchdog, tell it what to clean, release it at the end."""

    def __init__(self) -> None:
        self.launcher_pid = os.getpid()
        self.armed: list[tuple[str, dict[str, JsonScalar]]] = []
        """The hooks :meth:`arm` gave and :meth:`cancel` has not taken back."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid())],
            stdin=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a terminal's Ctrl-C or a group kill reaches the launcher, not this
        )

    def _send(self, message: Mapping[str, object]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
        except (
            BrokenPipeError,
            OSError,
            ValueError,
        ):  # the watchdog is gone: nothing to tell
            pass

    def stop_group(self, pgid: int) -> None:
        """If the launcher dies, stop every process of group ``pgid``."""
        self._send({"group": pgid})

    def stop_tree(self, pid: int) -> None:
        """If the launcher dies, stop process ``pid`` and its descendants (if still the same process)."""
        try:
            started = psutil.Process(pid).create_time()
        except psutil.Error:
            return
        self._send({"tree": pid, "started": started})

    def remove(self, path: str | Path) -> None:
        """If the launcher dies, remove the folder ``path``."""
        self._send({"remove": str(path)})

    def call(self, hook: str, **kwargs: JsonScalar) -> None:
        """If the launcher dies, call ``hook`` (``package.module:function``) with ``kwargs`` (JSON values)."""
        self._send({"hook": hook, "kwargs": kwargs})

    def arm(self, hook: str, **kwargs: JsonScalar) -> None:
        """Call ``hook`` once the launcher is gone, died or exited, unless :meth:`cancel` takes it back first."""
        self.armed.append((hook, kwargs))
        self.call(hook, **kwargs)

    def cancel(self, hook: str, **kwargs: JsonScalar) -> None:
        """Take back an earlier :meth:`call` or :meth:`arm` of ``hook`` with the same ``kwargs`` (done, taken over)."""
        self.armed = [(h, k) for h, k in self.armed if (h, k) != (hook, kwargs)]
        self._send({"cancel": {"hook": hook, "kwargs": kwargs}})

    def release(self) -> None:
        """The launcher ends normally: the watchdog leaves without doing anything, unless a hook is still
        :meth:`arm`-ed; then it is left to clean up as if the launcher had died (not waited for)."""
        if self.armed:
            self._send({"leaving": True})
            self._close()
            return
        self._send({"done": True})
        self._close()
        try:
            self.process.wait(timeout=RELEASE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_shared: Watchdog | None = None
_shared_lock = threading.Lock()


def process_watchdog() -> Watchdog:
    """This process's shared watchdog: started at the first call (again if it died, or in a
    forked child), released when the process exits normally. Take back what you gave it
    (:meth:`Watchdog.cancel`) when your job ends."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.launcher_pid != os.getpid() or _shared.process.poll() is not None:
            _shared = Watchdog()
            atexit.register(_shared.release)
        return _shared


def watch(stream: TextIO, launcher_pid: int) -> bool:
    """Read the launcher's instructions until the pipe ends; clean up unless it said ``done``.

    Returns:
        whether the launcher died (and the cleanup ran).
    """
    orders: dict[str, list[Order]] = {"group": [], "tree": [], "remove": [], "hook": []}
    reason = DIED_REASON
    for line in stream:
        message = json.loads(line)
        if message.get("done"):
            return False
        if message.get("leaving"):
            reason = LEFT_REASON
        if "cancel" in message:
            orders["hook"] = [
                o for o in orders["hook"] if {"hook": o["hook"], "kwargs": o["kwargs"]} != message["cancel"]
            ]
        for key, found in orders.items():
            if key in message:
                found.append(message)
    cleanup(orders, launcher_pid, reason)
    return True


def cleanup(orders: Mapping[str, list[Order]], launcher_pid: int, reason: str = DIED_REASON) -> None:
    """Stop the trees and groups, remove the folders, call the hooks (each step whatever the others do)."""
    victims: list[psutil.Process] = []
    for order in orders["tree"]:
        victims += _tree(order["tree"], order["started"])
    for proc in victims:
        _quietly(proc.terminate)
    for order in orders["group"]:
        _quietly(os.killpg, order["group"], signal.SIGTERM)
    _, alive = psutil.wait_procs(victims, timeout=STOP_GRACE_S)
    for proc in alive:
        _quietly(proc.kill)
    for order in orders["group"]:
        _wait_group_or_kill(order["group"])
    for order in orders["remove"]:
        shutil.rmtree(order["remove"], ignore_errors=True)
    for order in orders["hook"]:
        module, _, function = order["hook"].partition(":")
        try:
            getattr(importlib.import_module(module), function)(
                **order["kwargs"], reason=reason.format(pid=launcher_pid)
            )
        except Exception:
            print(
                f"watchdog: {order['hook']} failed:\n{traceback.format_exc()}",
                file=sys.stderr,
            )


def _tree(pid: int, started: float) -> list[psutil.Process]:
    """Process ``pid`` (if it is still the one started at ``started``) and its descendants."""
    try:
        root = psutil.Process(pid)
        if abs(root.create_time() - started) > 0.01:
            return []
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _wait_group_or_kill(pgid: int) -> None:
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    _quietly(os.killpg, pgid, signal.SIGKILL)


def _quietly(action: Callable[..., object], *args: object) -> None:
    try:
        action(*args)
    except (psutil.Error, ProcessLookupError, PermissionError, OSError):
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m mlflow_roofline.system.watchdog LAUNCHER_PID``: instructions on stdin."""
    args = sys.argv[1:] if argv is None else argv
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # a closing terminal must not take the cleanup along
    watch(sys.stdin, int(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
