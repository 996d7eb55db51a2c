"""Look each planned (configuration, repeat) up among the experiment's train runs: where it stands.

A configuration is found by ``roofline.config_hash`` among the active train runs of the
experiment, and one repeat of it by ``roofline.repeat`` (a run without that tag is repeat
0, as every run was before repeats existed); :func:`store_status` turns the runs of one
(hash, repeat) into a :class:`Status` (done, failed, live here, live elsewhere, stale,
new). :func:`config_status` looks one up again, as a sweep does just before it runs it.
A configuration measured ``k`` times is done when each of its ``k`` repeats is.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_ERROR, TAG_REPEAT, TAG_RUN_TYPE
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.status import (
    ALIVE,
    DONE,
    ELSEWHERE,
    FAILED,
    NEW,
    RUN_STATES,
    STALE,
    Status,
)
from mlflow_roofline.system.liveness import TAG_HOST, liveness
from mlflow_roofline.tracking.client import Run, TrackingClient

PAGE_SIZE = 1000


Unit = tuple[TrainConfig, int]
"""What a sweep claims, runs and resumes: one configuration and one repeat index."""


def repeat_of(run: Run) -> int:
    """The run's ``roofline.repeat`` (0 when absent or not an integer)."""
    value = run.data.tags.get(TAG_REPEAT, "0")
    return int(value) if value.isdigit() else 0


def store_status(plan: Plan, runs: Iterable[Run]) -> dict[Unit, Status]:
    """Each planned (configuration, repeat)'s state, from the train runs of the experiment.

    ``runs`` are stored runs (:meth:`TrackingClient.search_runs` results). Per config
    hash and repeat: any FINISHED run -> DONE; else a RUNNING run whose process lives ->
    ALIVE (or ELSEWHERE when recorded on another host), RUNNING runs whose process is
    gone -> STALE; else the latest FAILED run -> FAILED; else (none, or only KILLED) -> NEW.
    """
    by_key: dict[tuple[str, int], list[Run]] = {}
    for run in runs:
        tags = run.data.tags
        if tags.get(TAG_RUN_TYPE) == "train" and TAG_CONFIG_HASH in tags:
            by_key.setdefault((tags[TAG_CONFIG_HASH], repeat_of(run)), []).append(run)
    statuses: dict[Unit, Status] = {}
    for config, repeat in plan.units:
        key = plan.config_hash(config)
        statuses[(config, repeat)] = status_of(by_key.get((key, repeat), []) if key else [])
    return statuses


def status_of(runs: list[Run]) -> Status:
    """The state of one configuration from its runs (all of one config hash)."""
    seen = frozenset(r.info.run_id for r in runs)
    finished = [r for r in runs if r.info.status == "FINISHED"]
    if finished:
        return Status(DONE, finished[0].info.run_id, run_ids=seen)
    stale: list[str] = []
    for run in sorted((r for r in runs if r.info.status in RUN_STATES), key=_started):
        where = liveness(run.data.tags, run.info.run_id)
        if where == "alive":
            return Status(ALIVE, run.info.run_id, "its train process is still running here", run_ids=seen)
        if where == "elsewhere":
            host = run.data.tags.get(TAG_HOST, "?")
            return Status(ELSEWHERE, run.info.run_id, f"RUNNING on host {host}", run_ids=seen)
        stale.append(run.info.run_id)
    failed = sorted((r for r in runs if r.info.status == "FAILED"), key=_started)
    if failed:
        last = failed[-1]
        reason = last.data.tags.get(TAG_ERROR, "").strip().splitlines()
        return Status(FAILED, last.info.run_id, reason[-1] if reason else "", tuple(stale), seen)
    if stale:
        return Status(STALE, stale[-1], "RUNNING, but its process is gone", tuple(stale), seen)
    return Status(NEW, run_ids=seen)


def _started(run: Run) -> int:
    return run.info.start_time or 0


def store_statuses(client: TrackingClient, plan: Plan, experiment_id: str) -> dict[Unit, Status]:
    """Each planned (configuration, repeat)'s status among the experiment's train runs."""
    return store_status(plan, train_runs(client, experiment_id))


def train_runs(client: TrackingClient, experiment_id: str, config_hash: str | None = None) -> list[Run]:
    """Every active train run of the experiment (of one config hash if given), all pages."""
    query = f"tags.`{TAG_RUN_TYPE}` = 'train'"
    if config_hash is not None:
        query += f" and tags.`{TAG_CONFIG_HASH}` = '{config_hash}'"
    return list(client.iter_runs([experiment_id], query, page_size=PAGE_SIZE))


def repeat_runs(client: TrackingClient, experiment_id: str, config_hash: str, repeat: int) -> list[Run]:
    """Every active train run of one (config hash, repeat), all pages."""
    return [run for run in train_runs(client, experiment_id, config_hash) if repeat_of(run) == repeat]


def config_status(client: TrackingClient, experiment_id: str, config_hash: str, repeat: int = 0) -> Status:
    """The state of one (configuration, repeat), looked up now."""
    return status_of(repeat_runs(client, experiment_id, config_hash, repeat))
