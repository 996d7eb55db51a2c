"""Where a sweep's configurations run: here one after another, on a Ray cluster, or as Slurm jobs.

Planning, claiming (creating each child run) and resume stay on the submitting host; an
executor (:class:`Executor`) only carries :class:`~mlflow_roofline.sweep.remote.claimed_task.RemoteTask`
objects to workers, which call :func:`~mlflow_roofline.sweep.remote.claimed_task.measure_claimed`, and
hands back each outcome, or the failure of the worker itself (:class:`WorkerFailure`), as it
completes.

- ``ray``: one task per configuration, ``max_retries=0`` (a lost node is the sweep's to
  handle: it ends the claimed run FAILED with the reason and resubmits once, as a new
  claim). On CUDA a task reserves ``num_gpus=num_devices`` (Ray sets
  ``CUDA_VISIBLE_DEVICES``); on CPU it reserves the per-node resource
  :data:`NODE_METER_RESOURCE` (1 per node), so that a node measures one configuration at a
  time while its energy meter is node-wide.
- ``slurm``: one submitit job per configuration (``AutoExecutor``), ``gpus_per_node =
  num_devices``, partition, account and time limit from options or the spec; on CPU
  ``--exclusive``. ``cluster=local`` is submitit's local executor (the same job objects,
  run as local processes; one at a time, since they share this node's meter).

Workers find the tracking server through ``MLFLOW_TRACKING_URI``, which the task carries.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.energy.devices import DEVICE_KINDS
from mlflow_roofline.sweep.remote.claimed_task import RemoteTask, measure_claimed
from mlflow_roofline.sweep.status import Outcome

NODE_METER_RESOURCE = "roofline_meter_slot"
"""Ray custom resource, 1 per node: one measured CPU configuration per node at a time."""
LOCAL_WORKER_NICENESS = 0
"""Nice value of the task workers of a local Ray instance (Ray's default is 15): a niced worker's job time
and energy measure the machine's other load, not the job. A cluster's nodes are started by the user
(``RAY_worker_niceness=0 ray start ...``, docs/sweep.md)."""

LOCAL_STORE_SCHEMES: tuple[str, ...] = ("sqlite", "file")


@dataclasses.dataclass(frozen=True)
class ExecutorSettings:
    """How to run a sweep's configurations (CLI options, else the spec's ``slurm`` section).

    Attributes:
        kind: ``local``, ``ray`` or ``slurm``.
        ray_address: the Ray cluster (None: ``RAY_ADDRESS``, else a local Ray instance).
        slurm_partition: Slurm partition (None: the cluster's default).
        slurm_account: Slurm account (None: the user's default).
        slurm_time_min: Slurm time limit per configuration, minutes.
        slurm_cluster: ``auto`` (submitit picks Slurm where it runs) or ``local``.
        slurm_folder: where submitit keeps job scripts and logs.
        workers_on_this_host: allow a ``sqlite:``/``file:`` store (every worker shares this host).
    """

    kind: str = "local"
    ray_address: str | None = None
    slurm_partition: str | None = None
    slurm_account: str | None = None
    slurm_time_min: int = 60
    slurm_cluster: str = "auto"
    slurm_folder: str = "roofline-slurm"
    workers_on_this_host: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, object], spec_slurm: Mapping[str, str | int]) -> ExecutorSettings:
        """The settings of the sweep command's executor options, the spec's ``slurm`` section filling gaps.

        ``options``: the values of ``--executor``, ``--ray-address``, ``--slurm-*`` and
        ``--workers-on-this-host``, by their click names (``slurm_partition``).
        """
        return cls(
            kind=str(options["executor"]),
            ray_address=_text(options["ray_address"]),
            slurm_partition=_text(options["slurm_partition"] or spec_slurm.get("partition")),
            slurm_account=_text(options["slurm_account"] or spec_slurm.get("account")),
            slurm_time_min=int(str(options["slurm_time_min"] or spec_slurm.get("time_min") or 60)),
            slurm_cluster=str(options["slurm_cluster"]),
            slurm_folder=str(options["slurm_folder"]),
            workers_on_this_host=bool(options["workers_on_this_host"]),
        )


@dataclasses.dataclass(frozen=True)
class WorkerFailure:
    """A worker that did not hand back an outcome.

    Attributes:
        reason: what happened, in one line.
        node_lost: the node or its worker process died (the configuration may run elsewhere).
    """

    reason: str
    node_lost: bool


class Executor(Protocol):
    """What the sweep asks of a remote executor (:class:`RayExecutor`, :class:`SlurmExecutor`).

    Attributes:
        name: ``ray`` or ``slurm`` (tag ``roofline.executor``).
        max_in_flight: most tasks out at once (None: as many as the cluster takes).
    """

    name: str
    max_in_flight: int | None

    @property
    def in_flight(self) -> int:
        """Tasks submitted and not yet handed back."""
        ...

    def submit(self, task: RemoteTask) -> None:
        """Send ``task`` to a worker."""
        ...

    def next_done(self) -> tuple[RemoteTask, Outcome | WorkerFailure]:
        """Block until a task completes; it and its Outcome, or a :class:`WorkerFailure`."""
        ...

    def close(self) -> None:
        """Cancel what is still out and let the cluster go."""
        ...


def check_tracking_uri(settings: ExecutorSettings, uri: str) -> None:
    """Refuse a store that remote workers cannot share, unless they run on this host.

    Raises:
        ConfigError: naming the tracking URI and the fix (an ``mlflow server``).
    """
    scheme = uri.split(":", 1)[0] if ":" in uri else "file"
    if settings.kind != "local" and scheme in LOCAL_STORE_SCHEMES and not settings.workers_on_this_host:
        raise ConfigError(
            "tracking_uri",
            f"{uri} is a local store that {settings.kind} workers on other hosts cannot share: start "
            "`mlflow server --backend-store-uri postgresql://... --artifacts-destination ...` and set "
            "MLFLOW_TRACKING_URI to its http:// address (or pass --workers-on-this-host)",
        )


class RayExecutor:
    """Configurations as Ray tasks on a cluster (or on a local Ray instance)."""

    name = "ray"

    def __init__(self, settings: ExecutorSettings, device: str) -> None:
        import ray  # optional (the cluster extra), and heavy: only a Ray sweep imports it

        address = settings.ray_address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, ignore_reinit_error=True)
        else:
            ray.init(
                resources={NODE_METER_RESOURCE: 1},
                _system_config={"worker_niceness": LOCAL_WORKER_NICENESS},
                logging_level=logging.ERROR,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
        self._ray: types.ModuleType = ray
        self._device = device
        self._remote = ray.remote(max_retries=0)(measure_claimed)
        self._pending: dict[ray.ObjectRef[Outcome], RemoteTask] = {}
        if not DEVICE_KINDS[device].accelerator and NODE_METER_RESOURCE not in ray.cluster_resources():
            raise ConfigError(
                "ray_address",
                f"the Ray cluster at {address} has no resource {NODE_METER_RESOURCE!r}: start each node with "
                f"`ray start ... --resources '{{\"{NODE_METER_RESOURCE}\": 1}}'`",
            )
        self.max_in_flight: int | None = None

    def submit(self, task: RemoteTask) -> None:
        """Send ``task`` to the cluster with the resources its configuration needs."""
        if DEVICE_KINDS[self._device].accelerator:
            remote = self._remote.options(num_cpus=1, num_gpus=task.config.num_devices)
        else:
            remote = self._remote.options(num_cpus=0, resources={NODE_METER_RESOURCE: 1})
        self._pending[remote.remote(task)] = task

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def next_done(self) -> tuple[RemoteTask, Outcome | WorkerFailure]:
        """Block until a task completes; it and its Outcome, or a :class:`WorkerFailure`."""
        ray = self._ray
        (ref,), _ = ray.wait(list(self._pending), num_returns=1)
        task = self._pending.pop(ref)
        try:
            return task, ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the worker function raised: unreachable server, ...
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            return task, WorkerFailure(_one_line(cause), node_lost=False)
        except ray.exceptions.RayError as exc:  # node, raylet or worker process lost
            return task, WorkerFailure(f"Ray lost the worker ({type(exc).__name__}): {_one_line(exc)}", True)

    def close(self) -> None:
        self._ray.shutdown()


class SlurmExecutor:
    """Configurations as Slurm jobs through submitit (or submitit's local executor)."""

    name = "slurm"

    def __init__(self, settings: ExecutorSettings, device: str) -> None:
        import submitit  # optional (the cluster extra): only a Slurm sweep imports it

        cluster = None if settings.slurm_cluster == "auto" else settings.slurm_cluster
        self._executor = submitit.AutoExecutor(folder=settings.slurm_folder, cluster=cluster)
        self._settings = settings
        self._device = device
        self._pending: list[tuple[submitit.Job[Outcome], RemoteTask]] = []
        # submitit's local executor runs every job at once on this node: one at a time keeps
        # node-wide energy windows from overlapping.
        self.max_in_flight: int | None = 1 if self._executor.cluster == "local" else None

    def submit(self, task: RemoteTask) -> None:
        """Submit ``task`` as one job on one node with ``num_devices`` GPUs (CUDA) or the node (CPU)."""
        params: dict[str, object] = {
            "timeout_min": self._settings.slurm_time_min,
            "nodes": 1,
            "tasks_per_node": 1,
            "name": f"roofline-{task.config.run_name}",
        }
        if DEVICE_KINDS[self._device].accelerator:
            params["gpus_per_node"] = task.config.num_devices
        if self._settings.slurm_partition:
            params["slurm_partition"] = self._settings.slurm_partition
        if self._settings.slurm_account:
            params["slurm_account"] = self._settings.slurm_account
        if not DEVICE_KINDS[self._device].accelerator and self._executor.cluster == "slurm":
            params["slurm_additional_parameters"] = {"exclusive": True}
        self._executor.update_parameters(**params)
        self._pending.append((self._executor.submit(measure_claimed, task), task))

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def next_done(self) -> tuple[RemoteTask, Outcome | WorkerFailure]:
        """Block until a job completes; its task and Outcome, or a :class:`WorkerFailure`."""
        while True:
            for index, (job, task) in enumerate(self._pending):
                if job.done():
                    del self._pending[index]
                    try:
                        return task, job.result()
                    except Exception as exc:  # submitit re-raises the job's error or its end
                        lost = type(exc).__name__ in ("UncompletedJobError",)
                        return task, WorkerFailure(f"Slurm job {job.job_id}: {_one_line(exc)}", lost)
            time.sleep(0.5)

    def close(self) -> None:
        for job, _ in self._pending:
            job.cancel(check=False)


def make_executor(settings: ExecutorSettings, device: str) -> Executor:
    """The remote executor ``settings.kind`` names (``ray`` or ``slurm``)."""
    if settings.kind == "ray":
        return RayExecutor(settings, device)
    if settings.kind == "slurm":
        Path(settings.slurm_folder).mkdir(parents=True, exist_ok=True)
        return SlurmExecutor(settings, device)
    raise ConfigError("executor", f"must be local, ray or slurm, got {settings.kind!r}")


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:500]


def _text(value: object) -> str | None:
    """An option's text, None when it is not given."""
    return None if value is None else str(value)
