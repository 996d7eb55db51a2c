"""One configuration of a sweep: its child MLflow run, measured in a process of its own.

:func:`run_configuration` is the unit a cluster dispatcher could take over: it creates
the child run (:func:`create_child_run`: name, tags, params, ``mlflow.parentRunId``) and
measures it (:func:`run_child`): ``mlflow-roofline train`` starts in a new process group
with ``MLFLOW_RUN_ID`` set to that run, the caller waits, and the run is sure to end:
train ends it FINISHED or FAILED itself; if the process died without doing so (SIGKILL,
OOM killer, timeout), the run is marked FAILED here with the exit code or signal and the
last lines of its output in ``roofline.error`` (:func:`death_reason`).
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
from typing import Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    MAX_TAG_CHARS,
    SOURCE_TRAIN,
    TAG_ERROR,
    TAG_PARENT_RUN_ID,
    TAG_REPEAT,
    TAG_SOURCE,
    TAG_SWEEP_RUN_ID,
)
from mlflow_roofline.sweep.status import RUN_STATES, Outcome, SweepInterrupted
from mlflow_roofline.system import processes
from mlflow_roofline.system.liveness import process_tags, sweep_process_tags
from mlflow_roofline.system.processes import stop_group
from mlflow_roofline.system.signals import ignore_stop_signals

ERROR_TAIL_LINES = 20
"""Lines of a dead train process's output kept in ``roofline.error``."""

KILL_GRACE_S = 15.0
"""Seconds a train process gets to end its run after SIGTERM before SIGKILL."""


def train_command(config: TrainConfig, meter: str = "auto", extra_args: Sequence[str] = ()) -> list[str]:
    """The train CLI invocation measuring ``config`` (one process; it launches its own ranks).

    ``extra_args``: more train options (the sweep's carbon options).
    """
    options = [arg for name, value in config.to_params().items() for arg in (f"--{name.replace('_', '-')}", value)]
    return [sys.executable, "-m", "mlflow_roofline.cli", "train", *options, "--meter", meter, *extra_args]


def create_child_run(
    config: TrainConfig,
    experiment_id: str,
    parent_run_id: str | None,
    *,
    hardware: str,
    client: Any = None,
    repeat: int = 0,
) -> str:
    """Create the RUNNING train run of ``config`` nested under ``parent_run_id``; its id.

    Named and tagged as train names and tags it (``roofline.run_type=train``, the hashes,
    the hardware, ``roofline.repeat``: which measured run of the configuration it is),
    with every param logged, so the run is self-describing even if its
    process never starts. It names this process as the one that waits for it
    (:func:`~mlflow_roofline.system.liveness.sweep_process_tags`), in the same call that
    creates it, so no other sweep ever sees it without a live owner. Whatever executes the
    configuration then logs into this run (``MLFLOW_RUN_ID`` for ``mlflow-roofline train``,
    ``mlflow run -e train --run-id``).
    """
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.train.tracked_run import train_tags

    client = client or MlflowClient()
    tags = {
        **train_tags(config, hardware),
        TAG_SOURCE: SOURCE_TRAIN,
        **sweep_process_tags(os.getpid()),
        TAG_REPEAT: str(repeat),
    }
    if parent_run_id:
        tags[TAG_PARENT_RUN_ID] = parent_run_id
        tags[TAG_SWEEP_RUN_ID] = parent_run_id
    run_id = client.create_run(experiment_id, run_name=config.run_name, tags=tags).info.run_id
    try:
        client.log_batch(run_id, params=[Param(k, v) for k, v in config.to_params().items()])
    except BaseException:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, "FAILED")
        raise
    return run_id


def run_configuration(
    config: TrainConfig,
    experiment_id: str,
    parent_run_id: str | None,
    *,
    hardware: str,
    meter: str = "auto",
    timeout_s: float | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
) -> Outcome:
    """Measure one configuration as a child run of ``parent_run_id``, in its own process.

    Args:
        config: a validated configuration (its ``device`` already resolved).
        experiment_id: where the run goes.
        parent_run_id: the sweep run it nests under (None: a top-level run).
        hardware: the ``roofline.hardware`` value its hashes use.
        meter: energy meter the train process asks for.
        timeout_s: wall-clock limit in seconds; past it the process group is killed and
            the run is FAILED.
        log_dir: where the process's output is kept (a temp dir, removed afterwards, if
            None); it is logged as the run's artifact ``sweep/<run id>.log`` on failure.
        client: an ``MlflowClient`` (a new one if None).

    Returns:
        the run's final status. Raises :class:`SweepInterrupted` (after marking the run
        KILLED) if SIGINT/SIGTERM arrives while it runs.
    """
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    run_id = create_child_run(config, experiment_id, parent_run_id, hardware=hardware, client=client)
    return run_child(run_id, config, experiment_id, meter=meter, timeout_s=timeout_s, log_dir=log_dir, client=client)


def run_child(
    run_id: str,
    config: TrainConfig,
    experiment_id: str,
    *,
    meter: str = "auto",
    timeout_s: float | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    client: Any,
    die_with_parent: bool = False,
    extra_args: Sequence[str] = (),
) -> Outcome:
    """Measure ``config`` into the existing RUNNING run ``run_id`` (see :func:`run_configuration`).

    ``die_with_parent``: the train process gets SIGTERM (and ends its run KILLED) if this
    process dies; a remote worker whose node is lost must not leave a measurement running
    on that the sweep has already given up on and rerun elsewhere.
    """
    proc: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    own_dir = None if log_dir is not None else tempfile.mkdtemp(prefix="roofline-sweep-")
    log_path = Path(own_dir if own_dir is not None else log_dir) / f"{run_id}.log"  # type: ignore[arg-type]
    try:
        proc = start_train(config, meter, run_id, experiment_id, log_path, die_with_parent, extra_args)
        log_tags(client, run_id, process_tags(proc.pid))
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
    die_with_parent: bool = False,
    extra_args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``mlflow-roofline train`` for ``config`` logging into ``run_id``, output to ``log_path``.

    A session of its own: a Ctrl-C at the terminal reaches the sweep, which then stops
    this process group itself, in order, and marks the run.
    """
    env = {
        **os.environ,
        "MLFLOW_RUN_ID": run_id,
        "MLFLOW_EXPERIMENT_ID": experiment_id,
        "MLFLOW_TRACKING_URI": _tracking_uri(),
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


def settle(
    client: Any,
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
        client.set_terminated(run_id, "FAILED")
        status = "FAILED"
    else:
        # train ended the run itself; its error's last line says what happened
        reason = client.get_run(run_id).data.tags.get(TAG_ERROR) or reason
        lines = [line.strip() for line in reason.splitlines() if line.strip()]
        summary = lines[-1] if lines else status
    with contextlib.suppress(Exception):
        client.log_artifact(run_id, str(log_path), artifact_path="sweep")
    return Outcome(run_id, status, reason, wall_s, returncode, summary)


def _abandon(client: Any, run_id: str, proc: subprocess.Popen[bytes] | None, exc: BaseException) -> None:
    """The sweep is stopping while ``run_id`` runs: stop its process, mark the run KILLED with why."""
    ignore_stop_signals()  # a second Ctrl-C must not cut the bookkeeping short
    if proc is not None and proc.poll() is None:
        stop_group(proc, KILL_GRACE_S)
    mark_abandoned(client, run_id, exc)


def mark_abandoned(client: Any, run_id: str, exc: BaseException) -> None:
    """End ``run_id`` KILLED (unless it FINISHED), saying why the sweep stopped; its processes are stopped."""
    with contextlib.suppress(Exception):
        if client.get_run(run_id).info.status != "FINISHED":
            why = str(exc) if isinstance(exc, SweepInterrupted) else f"sweep stopped ({type(exc).__name__})"
            client.set_tag(run_id, TAG_ERROR, f"{why}; the train process was stopped")
            client.set_terminated(run_id, "KILLED")


def log_tags(client: Any, run_id: str, tags: dict[str, str]) -> None:
    from mlflow.entities import RunTag

    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _tracking_uri() -> str:
    import mlflow

    return mlflow.get_tracking_uri()


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None) -> bool:
    """Wait for ``proc``; on timeout stop its whole group. Returns whether it timed out."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        stop_group(proc, KILL_GRACE_S)
        return True


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
