"""One configuration of a sweep: its child MLflow run, measured in a process of its own.

:func:`run_configuration` is the unit a cluster dispatcher could take over: it creates
the child run (:func:`create_child_run`: name, tags, params, ``mlflow.parentRunId``) and
measures it (:func:`run_child`): ``mlflow-roofline train`` starts in a new process group
with ``MLFLOW_RUN_ID`` set to that run, the caller waits, and the run is sure to end:
train ends it FINISHED or FAILED itself; if the process died without doing so (SIGKILL,
OOM killer, timeout), the run is marked FAILED here with the exit code or signal and the
last lines of its output in ``roofline.error`` (:func:`~mlflow_roofline.sweep.fresh_child.death_reason`).

This module creates the child run; measuring and settling it in a fresh train process is
:mod:`mlflow_roofline.sweep.fresh_child` (:func:`run_child` and :func:`train_command` are
re-exported here), with ranks forked warm :mod:`mlflow_roofline.sweep.warm_child`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    SOURCE_TRAIN,
    TAG_PARENT_RUN_ID,
    TAG_REPEAT,
    TAG_SOURCE,
    TAG_SWEEP_RUN_ID,
)
from mlflow_roofline.sweep.fresh_child import run_child, train_command
from mlflow_roofline.sweep.status import Outcome
from mlflow_roofline.system.liveness import sweep_process_tags
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.train.run_logging import train_tags

__all__ = ["create_child_run", "run_child", "run_configuration", "train_command"]


def create_child_run(
    config: TrainConfig,
    experiment_id: str,
    parent_run_id: str | None,
    *,
    hardware: str,
    client: TrackingClient | None = None,
    repeat: int = 0,
    on_created: Callable[[str], None] | None = None,
) -> str:
    """Create the RUNNING train run of ``config`` nested under ``parent_run_id``; its id.

    ``on_created`` gets the run id the moment the run exists, before its params are
    logged (the sweep tells its watchdog then).

    Named and tagged as train names and tags it (``roofline.run_type=train``, the hashes,
    the hardware, ``roofline.repeat``: which measured run of the configuration it is),
    with every param logged, so the run is self-describing even if its
    process never starts. It names this process as the one that waits for it
    (:func:`~mlflow_roofline.system.liveness.sweep_process_tags`), in the same call that
    creates it, so no other sweep ever sees it without a live owner. Whatever executes the
    configuration then logs into this run (``MLFLOW_RUN_ID`` for ``mlflow-roofline train``,
    ``mlflow run -e train --run-id``).
    """
    client = client or TrackingClient()
    tags = {
        **train_tags(config, hardware),
        TAG_SOURCE: SOURCE_TRAIN,
        **sweep_process_tags(os.getpid()),
        TAG_REPEAT: str(repeat),
    }
    if parent_run_id:
        tags[TAG_PARENT_RUN_ID] = parent_run_id
        tags[TAG_SWEEP_RUN_ID] = parent_run_id
    run_id = client.open_run(experiment_id, run_name=config.run_name, tags=tags)
    if on_created is not None:
        on_created(run_id)
    try:
        client.log(run_id, params=config.to_params())
    except BaseException:
        with contextlib.suppress(Exception):
            client.end_run(run_id, "FAILED")
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
    client: TrackingClient | None = None,
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
        client: the tracking store (the current one if None).

    Returns:
        the run's final status. Raises :class:`~mlflow_roofline.core.errors.Interrupted` (after marking the run
        KILLED) if SIGINT/SIGTERM arrives while it runs.
    """
    client = client or TrackingClient()
    run_id = create_child_run(config, experiment_id, parent_run_id, hardware=hardware, client=client)
    return run_child(run_id, config, experiment_id, meter=meter, timeout_s=timeout_s, log_dir=log_dir, client=client)
