"""Measure a child run in a fresh ``mlflow-roofline train`` process (the sweep's ``launch="fresh"``).

:func:`run_child` starts ``mlflow-roofline train`` in a new process group with
``MLFLOW_RUN_ID`` set to the existing RUNNING child run, waits for it (a wall-clock limit
kills the group) and settles the run (:func:`settle`), so the run is sure to end. A sweep
stopping meanwhile stops the process and marks the run KILLED (:func:`mark_abandoned`).

:func:`settle` reads the run once its ``mlflow-roofline train`` process ended: train ended
it FINISHED or FAILED itself, or the process died without doing so (SIGKILL, OOM killer,
timeout) and the run is marked FAILED here, ``roofline.error`` saying how it died and
the last lines of its output (:func:`death_reason`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR
from mlflow_roofline.sweep.status import RUN_STATES, Outcome
from mlflow_roofline.system import processes
from mlflow_roofline.system.liveness import process_tags
from mlflow_roofline.system.processes import stop_group
from mlflow_roofline.system.signals import ignore_stop_signals
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.store_errors import patiently

KILL_GRACE_S = 15.0
"""Seconds a train process gets to end its run after SIGTERM before SIGKILL."""

ERROR_TAIL_LINES = 20
"""Lines of a dead train process's output kept in ``roofline.error``."""

LOG_ARTIFACT_DIR = "sweep"
"""Artifact folder of a failed run's output: ``sweep/<run id>.log``."""


def train_command(config: TrainConfig, meter: str = "auto", extra_args: Sequence[str] = ()) -> list[str]:
    """The train CLI invocation measuring ``config`` (one process; it launches its own ranks).

    ``extra_args``: more train options (the sweep's carbon options).
    """
    options = [arg for name, value in config.to_params().items() for arg in (f"--{name.replace('_', '-')}", value)]
    return [sys.executable, "-m", "mlflow_roofline.cli", "train", *options, "--meter", meter, *extra_args]


def run_child(
    run_id: str,
    config: TrainConfig,
    experiment_id: str,
    *,
    meter: str = "auto",
    timeout_s: float | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    client: TrackingClient,
    die_with_parent: bool = False,
    extra_args: Sequence[str] = (),
) -> Outcome:
    """Measure ``config`` into the existing RUNNING run ``run_id``.

    See :func:`~mlflow_roofline.sweep.child_run.run_configuration` for the arguments.

    ``die_with_parent``: the train process gets SIGTERM (and ends its run KILLED) if this
    process dies; a remote worker whose node is lost must not leave a measurement running
    on that the sweep has already given up on and rerun elsewhere.
    """
    proc: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    own_dir = tempfile.mkdtemp(prefix="roofline-sweep-") if log_dir is None else None
    log_path = Path(log_dir or own_dir or ".") / f"{run_id}.log"  # one of the two is set
    try:
        proc = start_train(
            config, meter, run_id, experiment_id, log_path, client.tracking_uri, die_with_parent, extra_args
        )
        client.log(run_id, tags=process_tags(proc.pid))
        timed_out = _wait(proc, timeout_s)
        return settle(client, run_id, proc.returncode, timed_out, timeout_s, log_path, time.monotonic() - started)
    except BaseException as exc:
        _abandon(client, run_id, proc, exc)
        raise
    finally:
        if own_dir is not None and (proc is None or proc.poll() is not None):
            shutil.rmtree(own_dir, ignore_errors=True)


def start_train(
    config: TrainConfig,
    meter: str,
    run_id: str,
    experiment_id: str,
    log_path: Path,
    tracking_uri: str,
    die_with_parent: bool = False,
    extra_args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``mlflow-roofline train`` for ``config`` logging into ``run_id``, output to ``log_path``.

    ``tracking_uri``: the store the process logs to (``MLFLOW_TRACKING_URI``).

    A session of its own: a Ctrl-C at the terminal reaches the sweep, which then stops
    this process group itself, in order, and marks the run.
    """
    env = {
        **os.environ,
        "MLFLOW_RUN_ID": run_id,
        "MLFLOW_EXPERIMENT_ID": experiment_id,
        "MLFLOW_TRACKING_URI": tracking_uri,
    }
    env.pop("MLFLOW_EXPERIMENT_NAME", None)
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            train_command(config, meter, extra_args),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=processes.die_with_parent if die_with_parent else None,
        )


def _abandon(client: TrackingClient, run_id: str, proc: subprocess.Popen[bytes] | None, exc: BaseException) -> None:
    """The sweep is stopping while ``run_id`` runs: stop its process, mark the run KILLED with why."""
    ignore_stop_signals()  # a second Ctrl-C must not cut the bookkeeping short
    if proc is not None and proc.poll() is None:
        stop_group(proc, KILL_GRACE_S)
    mark_abandoned(client, run_id, exc)


def mark_abandoned(client: TrackingClient, run_id: str, exc: BaseException) -> None:
    """End ``run_id`` KILLED (unless it FINISHED), saying why the sweep stopped; its processes are stopped.

    A store still locked by the stopped process's last writes is waited for (:func:`patiently`).
    """
    why = exc.reason if isinstance(exc, Interrupted) else f"sweep stopped ({type(exc).__name__})"

    def end_killed() -> None:
        if client.get_run(run_id).info.status != "FINISHED":
            client.set_tag(run_id, TAG_ERROR, f"{why}; the train process was stopped")
            client.end_run(run_id, "KILLED")

    with contextlib.suppress(Exception):
        patiently(end_killed)


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None) -> bool:
    """Wait for ``proc``; on timeout stop its whole group. Returns whether it timed out."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        stop_group(proc, KILL_GRACE_S)
        return True


# -- settling the run once its process ended ------------------------------------------
def settle(
    client: TrackingClient,
    run_id: str,
    returncode: int | None,
    timed_out: bool,
    timeout_s: float | None,
    log_path: Path,
    wall_s: float,
) -> Outcome:
    """The outcome of run ``run_id`` once its train process ended; the run is sure to be ended.

    Train ended the run itself (FINISHED or FAILED, its own error in ``roofline.error``),
    or the process died without doing so and the run is marked FAILED here with
    :func:`death_reason`. A run that finished just as the timeout struck stays FINISHED.
    """
    status = client.get_run(run_id).info.status
    if status == "FINISHED":
        return Outcome(run_id, "FINISHED", "", wall_s, returncode)
    reason = death_reason(returncode, timed_out, timeout_s, log_path)
    summary = reason.splitlines()[0]
    if status in RUN_STATES or timed_out:
        client.set_tag(run_id, TAG_ERROR, _head_and_tail(reason, summary))
        client.end_run(run_id, "FAILED")
        status = "FAILED"
    else:
        # train ended the run itself; its error's last line says what happened
        reason = client.get_run(run_id).data.tags.get(TAG_ERROR) or reason
        lines = [line.strip() for line in reason.splitlines() if line.strip()]
        summary = lines[-1] if lines else status
    with contextlib.suppress(Exception):
        client.log_artifact(run_id, str(log_path), artifact_path=LOG_ARTIFACT_DIR)
    return Outcome(run_id, status, reason, wall_s, returncode, summary)


def _head_and_tail(reason: str, summary: str) -> str:
    """``reason`` within MAX_TAG_CHARS: its first line and as much of its end as fits."""
    if len(reason) <= MAX_TAG_CHARS:
        return reason
    return f"{summary}\n...\n{reason[-(MAX_TAG_CHARS - len(summary) - 5) :]}"


def death_reason(returncode: int | None, timed_out: bool, timeout_s: float | None, log_path: Path) -> str:
    """Why a train process ended without ending its run: timeout, signal or exit code, then its output's tail."""
    if timed_out:
        head = f"train process timed out after {timeout_s:g} s and was killed"
    elif returncode is not None and returncode < 0:
        head = f"train process killed by {signal.Signals(-returncode).name} without ending its run"
    else:
        head = f"train process exited with code {returncode} without ending its run"
    tail = _tail(log_path, ERROR_TAIL_LINES)
    return f"{head}\n{tail}" if tail else head


def _tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the file at ``path`` (at most its last 16 KiB)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
