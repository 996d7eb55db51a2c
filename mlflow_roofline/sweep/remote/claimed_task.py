"""The worker side of a remote sweep: one claimed configuration, measured on whatever node runs it.

The submitting host plans, claims (creates the child run) and resumes; a Ray task or a
Slurm job calls :func:`measure_claimed` with a :class:`RemoteTask`. The worker first checks
that it can reach the tracking server (a worker that cannot fails its configuration with
that reason), records its node on the run (tag ``roofline.node``), keeps a heartbeat tag
fresh while the job runs (so a sweep resumed on another host can tell a run whose node
was lost from a live one), and measures into the claimed run.

A Ray worker is a long-lived process that runs task after task: under ``--launch warm``
it keeps a warm server of its own (:mod:`mlflow_roofline.train.warm`, started at its
first task) and forks each job's ranks from it, as a local sweep does; the server, and
so the ranks, end with the worker. A Slurm job is a process of its own per
configuration, so it launches ``mlflow-roofline train`` fresh, which dies with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import TAG_EXECUTOR, TAG_HEARTBEAT, TAG_NODE
from mlflow_roofline.sweep.fresh_child import run_child
from mlflow_roofline.sweep.spec import carbon_args
from mlflow_roofline.sweep.status import Outcome
from mlflow_roofline.tracking.client import TrackingClient

if TYPE_CHECKING:  # the warm server imports torch: only a warm worker loads it
    from mlflow_roofline.train.warm import WarmServer

HEARTBEAT_S = 20.0
"""Seconds between two heartbeats of a remote worker."""
WARM_EXECUTORS: tuple[str, ...] = ("ray",)
"""Executors whose workers outlive a task, so that a warm server pays off."""

_worker_server: WarmServer | None = None
"""This worker's warm server, started at its first warm task."""


@dataclasses.dataclass(frozen=True)
class RemoteTask:
    """Everything a worker needs, picklable: the claimed run and how to measure it.

    Attributes:
        run_id: the child run the submitting host created for this configuration.
        config: the configuration (device resolved).
        experiment_id: the run's experiment.
        tracking_uri: the MLflow tracking server every worker logs to.
        executor: ``ray`` or ``slurm`` (tag ``roofline.executor``).
        meter: the energy meter the train process asks for.
        timeout_s: wall-clock limit of the train process, seconds (None: none).
        hardware: the ``roofline.hardware`` value of the run's hashes (warm launch).
        carbon: the sweep's carbon settings as (key, value) pairs.
        warm: fork the job's ranks from this worker's warm server instead of starting
            ``mlflow-roofline train``.
    """

    run_id: str
    config: TrainConfig
    experiment_id: str
    tracking_uri: str
    executor: str
    meter: str = "auto"
    timeout_s: float | None = None
    hardware: str = ""
    carbon: tuple[tuple[str, float | str], ...] = ()
    warm: bool = False


class WorkerUnreachable(RooflineError):
    """The worker cannot reach the tracking server; its configuration fails with this reason."""


def node_name() -> str:
    """This worker's node: Ray's node id when inside Ray, else the Slurm node, else the host name."""
    with contextlib.suppress(Exception):
        import ray  # optional (the cluster extra): present on a Ray worker only

        if ray.is_initialized():
            return f"ray:{ray.get_runtime_context().get_node_id()}"
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def measure_claimed(task: RemoteTask) -> Outcome:
    """Measure ``task`` into its claimed run on this node; the :class:`Outcome`.

    Raises:
        WorkerUnreachable: the tracking server cannot be reached from this node.
    """
    os.environ["MLFLOW_TRACKING_URI"] = task.tracking_uri
    client = TrackingClient(task.tracking_uri)
    node = node_name()
    try:
        client.set_tag(task.run_id, TAG_NODE, node)
        client.set_tag(task.run_id, TAG_EXECUTOR, task.executor)
    except Exception as exc:
        raise WorkerUnreachable(
            f"worker {node} cannot reach the tracking server {task.tracking_uri}: {str(exc).splitlines()[0][:300]}"
        ) from None
    with heartbeat(client, task.run_id):
        if task.warm:
            # forking ranks warm imports torch; a fresh (Slurm) worker never loads it
            from mlflow_roofline.sweep.warm_child import run_child_warm

            return run_child_warm(
                task.run_id,
                task.config,
                server=worker_server(),
                hardware=task.hardware,
                client=client,
                meter=task.meter,
                timeout_s=task.timeout_s,
                carbon=dict(task.carbon),
            )
        return run_child(
            task.run_id,
            task.config,
            task.experiment_id,
            meter=task.meter,
            timeout_s=task.timeout_s,
            client=client,
            die_with_parent=True,
            extra_args=carbon_args(dict(task.carbon)),
        )


def worker_server() -> WarmServer:
    """This worker's warm server (started at the first call)."""
    global _worker_server
    if _worker_server is None:
        from mlflow_roofline.train.warm import WarmServer  # imports torch: a warm worker's first task loads it

        _worker_server = WarmServer().start()
    return _worker_server


@contextlib.contextmanager
def heartbeat(client: TrackingClient, run_id: str, period_s: float = HEARTBEAT_S) -> Iterator[None]:
    """Set tag ``roofline.heartbeat`` (epoch seconds) on ``run_id`` every ``period_s`` while inside."""
    stop = threading.Event()

    def beat() -> None:
        while True:
            with contextlib.suppress(Exception):
                client.set_tag(run_id, TAG_HEARTBEAT, f"{time.time():.0f}")
            if stop.wait(period_s):
                return

    thread = threading.Thread(target=beat, name="roofline-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
