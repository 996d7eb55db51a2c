"""Is the process behind a RUNNING MLflow run still alive? (How a sweep tells stale runs from live ones.)

A run records the host and the processes that work for it: ``roofline.pid`` with its
start time (the train process of a train run, the sweep process of a sweep run) and,
on a train run a sweep created, ``roofline.sweep_pid`` with its start time (the sweep
that waits for it). A process is alive when a process of that pid exists on this host,
is not a zombie and started when recorded (a reused pid started later). Each recorded
process is tested itself, never its process group: a sweep started from a script or by
``mlflow run`` does not lead its group.

A run is ``alive`` when one of its recorded processes is, or when a process of this host
carries its id as ``MLFLOW_RUN_ID`` (the ranks a launcher started in sessions of their
own may outlive it); ``dead`` when none is (a leftover of a killed sweep: stale);
``elsewhere`` when it was recorded on another host, which cannot be checked from here.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

import psutil

from mlflow_roofline.core.schema import (
    TAG_HEARTBEAT,
    TAG_HOST,
    TAG_PID,
    TAG_PID_START,
    TAG_SWEEP_PID,
    TAG_SWEEP_PID_START,
)

__all__ = [
    "TAG_HOST",
    "TAG_PID",
    "TAG_PID_START",
    "group_alive",
    "liveness",
    "process_alive",
    "process_start",
    "process_tags",
    "run_process_alive",
    "sweep_process_tags",
    "this_host",
]

START_TOLERANCE_S = 1.0
"""Seconds a live process's start time may differ from the recorded one (clock rounding)."""


def this_host() -> str:
    """The name this machine records on runs."""
    return socket.gethostname()


def process_start(pid: int) -> float:
    """Start time of process ``pid`` in epoch seconds (0.0 if it cannot be read)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return 0.0


def process_tags(pid: int) -> dict[str, str]:
    """Tags naming process ``pid`` on this host as the one working for a run."""
    return {TAG_HOST: this_host(), TAG_PID: str(pid), TAG_PID_START: f"{process_start(pid):.3f}"}


def sweep_process_tags(pid: int) -> dict[str, str]:
    """Tags naming process ``pid`` on this host as the sweep that created a train run and waits for it."""
    return {TAG_HOST: this_host(), TAG_SWEEP_PID: str(pid), TAG_SWEEP_PID_START: f"{process_start(pid):.3f}"}


def process_alive(pid: int, started: float) -> bool:
    """Whether process ``pid`` of this host lives and started at ``started`` (epoch seconds; 0: any time)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started <= 0 or abs(proc.create_time() - started) < START_TOLERANCE_S
    except psutil.Error:
        return False


def group_alive(pgid: int, not_before: float = 0.0) -> bool:
    """Whether a process of group ``pgid`` started at or after ``not_before`` (epoch seconds) lives.

    How a caller that started a process group (and knows its leader's pid) tells that
    all of it is gone: the leader may have exited while its children still run. A process
    started before the leader cannot belong to that group (its pid was reused). Zombies
    do not count.
    """
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.info["create_time"] + 0.01 < not_before:
                continue
            if os.getpgid(proc.info["pid"]) == pgid:
                return True
        except (psutil.Error, OSError):
            continue
    return False


def run_process_alive(run_id: str) -> bool:
    """Whether a process of this host works for MLflow run ``run_id`` (has it as ``MLFLOW_RUN_ID``).

    Catches the ranks that a launcher started in sessions of their own and that outlive
    the train process that launched them.
    """
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("MLFLOW_RUN_ID") == run_id and proc.pid != os.getpid():
                return True
        except (psutil.Error, OSError):
            continue
    return False


def _recorded_alive(tags: Mapping[str, str], pid_tag: str, start_tag: str) -> bool:
    if pid_tag not in tags:
        return False
    try:
        return process_alive(int(tags[pid_tag]), float(tags.get(start_tag, "0")))
    except ValueError:
        return False


HEARTBEAT_STALE_S = 180.0
"""Seconds after which a remote worker's last heartbeat says its node is gone (it beats every 20 s)."""


def heartbeat_stale(tags: Mapping[str, str], now: float | None = None) -> bool:
    """Whether the run carries a remote worker's heartbeat (tag ``roofline.heartbeat``) that is too old.

    A run measured on another host cannot be checked by pid from here; one whose worker
    has stopped beating for :data:`HEARTBEAT_STALE_S` seconds lost its node. A run
    without a heartbeat is not judged by it.
    """
    raw = tags.get(TAG_HEARTBEAT)
    if raw is None:
        return False
    try:
        last = float(raw)
    except ValueError:
        return False
    return (time.time() if now is None else now) - last > HEARTBEAT_STALE_S


def liveness(tags: Mapping[str, str], run_id: str | None = None) -> str:
    """``alive``, ``dead`` or ``elsewhere`` for a run carrying :func:`process_tags` or :func:`sweep_process_tags`.

    A run without such tags is ``dead`` unless a process here carries ``run_id`` as
    ``MLFLOW_RUN_ID``.
    """
    host = tags.get(TAG_HOST)
    if host is not None and host != this_host():
        return "dead" if heartbeat_stale(tags) else "elsewhere"
    if _recorded_alive(tags, TAG_PID, TAG_PID_START) or _recorded_alive(tags, TAG_SWEEP_PID, TAG_SWEEP_PID_START):
        return "alive"
    if run_id is not None and run_process_alive(run_id):
        return "alive"
    return "dead"
