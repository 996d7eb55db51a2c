"""Is the process behind a RUNNING MLflow run still alive? (How a resumed sweep tells stale from live.)

A sweep starts every train run as the leader of its own process group and records on
the run the host, the leader's pid and its start time. A later sweep on the same host
asks whether any process of that group, or any process carrying the run's id as
``MLFLOW_RUN_ID`` (the ranks a launcher starts in sessions of their own), is still
alive; a RUNNING run with none is a leftover of a killed sweep (stale). Runs recorded on another host cannot be
checked from here and are reported as such.
"""

from __future__ import annotations

import os
import socket

import psutil

TAG_HOST = "roofline.host"
TAG_PID = "roofline.pid"
TAG_PID_START = "roofline.pid_start"


def this_host() -> str:
    """The name this machine records on runs."""
    return socket.gethostname()


def process_tags(pid: int) -> dict[str, str]:
    """Tags identifying process ``pid`` on this host (its start time guards against pid reuse)."""
    try:
        start = psutil.Process(pid).create_time()
    except psutil.Error:
        start = 0.0
    return {TAG_HOST: this_host(), TAG_PID: str(pid), TAG_PID_START: f"{start:.3f}"}


def group_alive(pgid: int, not_before: float) -> bool:
    """Whether a process of group ``pgid`` started at or after ``not_before`` (epoch seconds) lives.

    The group's leader may be gone while its children (torchrun workers) still run, so
    every process is checked; one started before the leader cannot belong to that group
    (its pid was reused).
    """
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.info["create_time"] + 0.01 < not_before:
                continue
            if os.getpgid(proc.info["pid"]) == pgid:
                return True
        except (psutil.Error, ProcessLookupError, PermissionError, OSError):
            continue
    return False


def run_process_alive(run_id: str) -> bool:
    """Whether a process of this host works for MLflow run ``run_id`` (has it as ``MLFLOW_RUN_ID``).

    Catches what the process group misses: ranks that a launcher started in sessions of
    their own and that outlive the train process that launched them.
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


def liveness(tags: dict[str, str], run_id: str | None = None) -> str:
    """``alive``, ``dead`` or ``elsewhere`` for a run carrying :func:`process_tags`.

    Alive: a process of the recorded group lives, or (given ``run_id``) a process here
    carries it as ``MLFLOW_RUN_ID``. A run without the tags (its sweep died between
    creating it and starting its process) is ``dead`` unless such a process is found.
    """
    host = tags.get(TAG_HOST)
    if host is not None and host != this_host():
        return "elsewhere"
    if run_id is not None and run_process_alive(run_id):
        return "alive"
    if host is None or TAG_PID not in tags:
        return "dead"
    try:
        pid = int(tags[TAG_PID])
        start = float(tags.get(TAG_PID_START, "0"))
    except ValueError:
        return "dead"
    return "alive" if group_alive(pid, start) else "dead"
