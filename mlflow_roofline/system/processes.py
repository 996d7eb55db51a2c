"""Stopping a process group: the one way every launcher here ends what it started.

A launcher starts its job as the leader of a new session (``start_new_session=True``), so
that one signal to the group reaches every process of the job (torchrun's agent and its
ranks, a server and its workers) and none of the launcher's own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time

from mlflow_roofline.system.liveness import group_alive

PR_SET_PDEATHSIG = 1  # linux/prctl.h

POLL_S = 0.1
"""Seconds between two looks at a group that is shutting down."""


Process = subprocess.Popen[bytes] | subprocess.Popen[str]
"""A child process, started in binary or text mode."""


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to every process of group ``pgid``; a group that is gone is no error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def stop_group(proc: Process, grace_s: float) -> int:
    """End the process group ``proc`` leads: SIGTERM, up to ``grace_s`` seconds to exit, then SIGKILL.

    The leader is waited for first, then the rest of its group (ranks that take a moment
    longer to end their work); whatever still lives when the grace period is over gets
    SIGKILL. The leader is reaped in every case, and the call returns once the group id is
    free (or after another ``grace_s``). Safe to call on a group that already ended.

    Args:
        proc: a process started with ``start_new_session=True`` (its pid is its group id).
        grace_s: seconds the group gets to end by itself after SIGTERM.

    Returns:
        the leader's exit status (negative: killed by that signal).
    """
    pgid = proc.pid  # the kernel hands out no pid still in use as a group id: no reuse to fear here
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if proc.poll() is None or group_alive(pgid):
        signal_group(pgid, signal.SIGKILL)
    returncode = proc.wait()
    # Members whose parent was the leader are reaped by init once they exit: wait for that
    # too (bounded), so that the group id no longer answers when this returns.
    reap_deadline = time.monotonic() + grace_s
    while _group_exists(pgid) and time.monotonic() < reap_deadline:
        time.sleep(POLL_S)
    return returncode


def _group_exists(pgid: int) -> bool:
    """Whether group ``pgid`` still holds any process, exited ones not yet reaped included."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent() -> None:
    """In a child, before exec (``preexec_fn``): get SIGTERM when the process that started it dies.

    A job runs in a session of its own (so that :func:`stop_group` reaches all of it), out
    of reach of a signal sent to its launcher's group; if the launcher is SIGKILLed, this
    keeps the job from running on orphaned (torchrun's agent stops its workers on SIGTERM,
    the train command ends its run KILLED). Linux only.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the launcher died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)
