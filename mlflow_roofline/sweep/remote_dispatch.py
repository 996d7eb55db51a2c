"""The submitting host's side of a remote sweep: hand claimed runs to the executor, take outcomes back.

A claimed configuration (its child run created and the claim won, on this host) goes to
the executor as a :class:`~mlflow_roofline.sweep.remote.claimed_task.RemoteTask`. When the worker
hands back an outcome it is recorded as is; when the worker itself failed (it could not
reach the tracking server, its node or process was lost), the claimed run is ended FAILED
here with that reason, unless the train process had already ended it, so no run is left
RUNNING by a worker that is gone.
"""

from __future__ import annotations

import contextlib

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_ERROR
from mlflow_roofline.sweep.context import SweepContext
from mlflow_roofline.sweep.reconcile import Entry
from mlflow_roofline.sweep.remote.claimed_task import WARM_EXECUTORS, RemoteTask
from mlflow_roofline.sweep.remote.executors import Executor, WorkerFailure
from mlflow_roofline.sweep.status import RUN_STATES, Outcome
from mlflow_roofline.tracking.client import TrackingClient


def submit_claimed(sweep: SweepContext, executor: Executor, run_id: str, config: TrainConfig) -> None:
    """Hand the claimed run ``run_id`` of ``config`` to the sweep's ``executor``.

    Every worker is told to log to the tracking URI this host logs to.
    """
    executor.submit(
        RemoteTask(
            run_id,
            config,
            sweep.experiment_id,
            sweep.client.tracking_uri,
            executor.name,
            sweep.spec.meter,
            sweep.spec.timeout_s,
            hardware=sweep.plan.hardware or "",
            carbon=tuple(sweep.spec.carbon.items()),
            warm=sweep.launch == "warm" and executor.name in WARM_EXECUTORS,
        )
    )


def collect_one(client: TrackingClient, executor: Executor, in_flight: dict[str, Entry]) -> tuple[Entry, Outcome, bool]:
    """Wait for the next configuration to come back: its entry, outcome, and whether its node was lost."""
    task, result = executor.next_done()
    entry = in_flight.pop(task.run_id)
    if isinstance(result, WorkerFailure):
        return entry, fail_claimed(client, task.run_id, result.reason), result.node_lost
    return entry, result, False


def fail_claimed(client: TrackingClient, run_id: str, reason: str) -> Outcome:
    """End the claimed run ``run_id`` FAILED with ``reason`` unless it already ended; its outcome."""
    run = client.get_run(run_id)
    status = run.info.status
    if status in RUN_STATES:
        client.set_tag(run_id, TAG_ERROR, reason)
        client.end_run(run_id, "FAILED")
        status = "FAILED"
    elif status == "FINISHED":  # measured and logged before the worker went away
        return Outcome(run_id, "FINISHED", "", 0.0, None)
    else:
        reason = run.data.tags.get(TAG_ERROR) or reason
    return Outcome(run_id, status, reason, 0.0, None, reason.splitlines()[-1] if reason else status)


def abandon_in_flight(client: TrackingClient, executor: Executor, in_flight: dict[str, Entry]) -> None:
    """The sweep is stopping with runs still out: cancel them and end their runs KILLED."""
    with contextlib.suppress(Exception):
        executor.close()
    for run_id in list(in_flight):
        with contextlib.suppress(Exception):
            if client.get_run(run_id).info.status in RUN_STATES:
                client.set_tag(run_id, TAG_ERROR, "the sweep stopped while this configuration was out")
                client.end_run(run_id, "KILLED")
