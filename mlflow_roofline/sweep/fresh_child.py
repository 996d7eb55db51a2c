"""Measure a child run in a fresh ``mlflow-roofline train`` process (the sweep's ``launch="fresh"``).

:func:`run_child` starts ``mlflow-roofline train`` in a new process group with
``MLFLOW_RUN_ID`` set to the existing RUNNING child run, waits for it (a wall-clock limit
kills the group) and settles the run (:func:`~mlflow_roofline.sweep.child_outcome.settle`),
so the run is sure to end. A sweep stopping meanwhile stops the process and marks the
run KILLED (:func:`mark_abandoned`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import TAG_ERROR
from mlflow_roofline.sweep.child_outcome import settle
from mlflow_roofline.sweep.status import Outcome
from mlflow_roofline.system import processes
from mlflow_roofline.system.liveness import process_tags
from mlflow_roofline.system.processes import stop_group
from mlflow_roofline.system.signals import ignore_stop_signals

KILL_GRACE_S = 15.0
"""Seconds a train process gets to end its run after SIGTERM before SIGKILL."""


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
    client: Any,
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
            why = exc.reason if isinstance(exc, Interrupted) else f"sweep stopped ({type(exc).__name__})"
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
