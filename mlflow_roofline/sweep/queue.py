"""The sweep's queue: settle every planned unit, once, in this process or by waiting for another.

:func:`run_entries` works through the units to run or wait for, baselines first: each is
looked up again just before it runs (:func:`~mlflow_roofline.sweep.lookup.config_status`)
and claimed and measured (:func:`claim_and_run`); one held by a live run of another
process is put back in the queue and, when nothing else is left, waited for. With a remote
executor, claimed units are submitted while it has room and their outcomes recorded as
they come back; a unit whose node died is claimed and run once more.

:func:`claim_and_run` is what every step shares: it creates the child run
(:func:`~mlflow_roofline.sweep.child_run.create_child_run`), claims the unit with it
(:mod:`mlflow_roofline.sweep.claim`) and, if the claim is won, measures it: with its ranks
forked from the sweep's warm server (:func:`~mlflow_roofline.sweep.warm_child.run_child_warm`,
``launch="warm"``), in an ``mlflow-roofline train`` process of its own
(:func:`~mlflow_roofline.sweep.fresh_child.run_child`, ``launch="fresh"``), or handed to a
remote executor (:func:`~mlflow_roofline.sweep.remote_dispatch.submit_claimed`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import time
from collections.abc import Callable

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.sweep.child_run import create_child_run
from mlflow_roofline.sweep.claim import check_claim, withdraw
from mlflow_roofline.sweep.context import SweepContext
from mlflow_roofline.sweep.fresh_child import run_child
from mlflow_roofline.sweep.lookup import config_status
from mlflow_roofline.sweep.parent_description import update_description
from mlflow_roofline.sweep.parent_run import Progress, mark_killed
from mlflow_roofline.sweep.reconcile import Entry, plan_counts
from mlflow_roofline.sweep.remote.executors import Executor
from mlflow_roofline.sweep.remote_dispatch import abandon_in_flight, collect_one, submit_claimed
from mlflow_roofline.sweep.status import ALIVE, DONE, ELSEWHERE, FAILED, RUN_STATES, Outcome, Status
from mlflow_roofline.sweep.warm_child import run_child_warm
from mlflow_roofline.system.liveness import liveness
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs

POLL_S = 0.5
"""Seconds between two looks at a run another process is measuring."""

CLAIM_ATTEMPTS = 8
"""Claims of one configuration lost to a tie before it is put back in the queue."""

CLAIM_BACKOFF_S = 0.5
"""Upper bound of the random pause after a lost claim, times the attempt number, seconds."""

DEFER = "defer"
"""What :func:`_settle` returns for a configuration held by another process right now."""

SUBMITTED = "submitted"
"""What :func:`claim_and_run` returns, with the run id, for a unit claimed here and handed to a remote executor."""


@dataclasses.dataclass(frozen=True)
class Result:
    """How one planned configuration ended in this sweep."""

    entry: Entry
    outcome: Outcome

    @property
    def config(self) -> TrainConfig:
        """The configuration."""
        return self.entry.config


def run_entries(sweep: SweepContext, entries: list[Entry], echo: Callable[[str], None], show: bool) -> list[Result]:
    """Settle every entry to run or wait for; one held by another process goes back in the queue.

    When every entry left was put back since the last one settled, the sweep waits for
    the run that holds the first of them instead of looking again at once. With a remote
    executor, claimed entries are submitted while it has room, and outcomes are recorded
    as they come back (:mod:`mlflow_roofline.sweep.remote_dispatch`).
    """
    queue = collections.deque(e for e in entries if e.pending)
    results: list[Result] = []

    def describe() -> None:  # the sweep run's Markdown description, rewritten with its counts
        outcomes = {r.entry.key: r.outcome for r in results}
        update_description(sweep.client, sweep.parent_id, sweep.spec, sweep.plan, entries, outcomes)

    progress = Progress(
        sweep.client, sweep.parent_id, plan_counts(entries, sweep.plan), len(queue), show, echo, describe
    )
    in_flight: dict[str, Entry] = {}
    rerun: set[tuple[TrainConfig, int]] = set()
    deferred = 0
    try:
        while queue or in_flight:
            if sweep.executor is not None and in_flight and (not queue or not _has_room(sweep.executor)):
                entry, outcome, node_lost = collect_one(sweep.client, sweep.executor, in_flight)
                if node_lost and entry.key not in rerun and outcome.status != "FINISHED":
                    rerun.add(entry.key)  # once: its node died under it; a new claim runs it elsewhere
                    progress.write(f"{entry.name}: {outcome.summary}; rerunning it (run {outcome.run_id} FAILED)")
                    resubmitted = _reclaim(sweep, entry)
                    if isinstance(resubmitted, tuple):
                        in_flight[resubmitted[1]] = entry
                        continue
                    outcome = resubmitted or outcome
                _record(results, progress, entry, outcome)
                continue
            entry = queue.popleft()
            progress.starting(entry.name)
            settled = _settle(sweep, entry, progress.write, may_wait=deferred >= len(queue) and not in_flight)
            if settled == DEFER:
                queue.append(entry)
                deferred += 1
                continue
            deferred = 0
            if isinstance(settled, tuple):  # (SUBMITTED, run id)
                in_flight[settled[1]] = entry
                continue
            assert not isinstance(settled, str)
            _record(results, progress, entry, settled)
    finally:
        if sweep.executor is not None:
            abandon_in_flight(sweep.client, sweep.executor, in_flight)
        progress.close()
    return results


def _reclaim(sweep: SweepContext, entry: Entry) -> Outcome | tuple[str, str] | None:
    """Claim ``entry`` again after its remote run was lost, and submit it (None: another process holds it)."""
    config_hash = sweep.plan.config_hash(entry.config) or ""
    status = config_status(sweep.client, sweep.experiment_id, config_hash, entry.repeat)
    return claim_and_run(sweep, entry, config_hash, status)


def _has_room(executor: Executor | None) -> bool:
    return executor is not None and (executor.max_in_flight is None or executor.in_flight < executor.max_in_flight)


def _record(results: list[Result], progress: Progress, entry: Entry, outcome: Outcome | None) -> None:
    if outcome is not None:
        results.append(Result(entry, outcome))
        if outcome.status != "FINISHED" and not outcome.elsewhere:
            progress.write(f"FAILED {entry.name} (run {outcome.run_id}): {outcome.summary}")
    progress.settled(outcome)


def _settle(
    sweep: SweepContext, entry: Entry, write: Callable[[str], None], may_wait: bool
) -> Outcome | str | tuple[str, str] | None:
    """Look ``entry`` up again and run it if this sweep wins its claim.

    Returns its outcome (here or in another process), None when it is left alone (it runs
    on another host), or DEFER when another live process holds it and ``may_wait`` is false.
    """
    config_hash = sweep.plan.config_hash(entry.config) or ""
    waited_s = 0.0
    for attempt in range(1, CLAIM_ATTEMPTS + 1):
        status = config_status(sweep.client, sweep.experiment_id, config_hash, entry.repeat)
        settled = _settled_elsewhere(entry, status, sweep.retry_failed, waited_s)
        if settled is not None or status.state == ELSEWHERE:
            return settled
        if status.state == ALIVE:
            if not may_wait:
                return DEFER
            waited_s += _wait_for_live(sweep.client, status.run_id or "", entry, write)
            continue
        for run_id in status.stale_run_ids:
            mark_killed(sweep.client, run_id, sweep.parent_id)
        outcome = claim_and_run(sweep, entry, config_hash, status)
        if outcome is not None:
            return outcome
        time.sleep(random.uniform(0.0, CLAIM_BACKOFF_S * attempt))
    return DEFER


def _settled_elsewhere(entry: Entry, status: Status, retry_failed: bool, waited_s: float) -> Outcome | None:
    """The outcome of a configuration another process finished or failed since it was planned."""
    if status.state == DONE:
        return Outcome(status.run_id or "", "FINISHED", "", waited_s, None, "finished by another process", True)
    planned_failure = entry.status.state == FAILED and entry.status.run_id == status.run_id
    if status.state == FAILED and not (retry_failed and planned_failure):
        summary = f"failed in another process: {status.detail}" if status.detail else "failed in another process"
        return Outcome(status.run_id or "", "FAILED", status.detail, waited_s, None, summary, True)
    return None


def _wait_for_live(client: TrackingClient, run_id: str, entry: Entry, write: Callable[[str], None]) -> float:
    """Wait until run ``run_id``, measured by another process here, ends or its process dies; seconds waited."""
    write(f"waiting for {entry.name}: run {run_id} is still running here")
    started = time.monotonic()
    while True:
        run = client.get_run(run_id)
        if run.info.status not in RUN_STATES or liveness(run.data.tags, run_id) != "alive":
            return time.monotonic() - started
        time.sleep(POLL_S)


def claim_and_run(
    sweep: SweepContext, entry: Entry, config_hash: str, status: Status
) -> Outcome | tuple[str, str] | None:
    """Create the child run, claim the (configuration, repeat) with it, and run it if the claim is won (else None).

    With a remote executor the won claim is submitted instead: ``(SUBMITTED, run id)``.
    """
    client, config = sweep.client, entry.config
    watchdog = sweep.watchdog
    run_id = create_child_run(
        config,
        sweep.experiment_id,
        sweep.parent_id,
        hardware=sweep.plan.hardware or "",
        client=client,
        repeat=entry.repeat,
        # from its creation on, a run this sweep holds ends KILLED if the sweep is killed outright
        on_created=None if watchdog is None else lambda rid: watchdog.call(END_ORPHANED_RUN, **orphan_hook_kwargs(rid)),
    )
    try:
        claim = check_claim(client, sweep.experiment_id, config_hash, run_id, status.run_ids, entry.repeat)
    except BaseException:
        with contextlib.suppress(Exception):
            client.end_run(run_id, "KILLED")
        raise
    if not claim.won:
        withdraw(client, run_id, claim)
        return None
    if sweep.warm is None and watchdog is not None:
        # a remote worker or a fresh train process ends the run itself from now on (a fresh
        # one outlives a killed sweep, and has a watchdog of its own)
        watchdog.cancel(END_ORPHANED_RUN, **orphan_hook_kwargs(run_id))
    if sweep.executor is not None:
        submit_claimed(sweep, sweep.executor, run_id, config)
        return SUBMITTED, run_id
    if sweep.warm is not None:
        return run_child_warm(
            run_id,
            config,
            server=sweep.warm,
            hardware=sweep.plan.hardware or "",
            client=client,
            meter=sweep.spec.meter,
            timeout_s=sweep.spec.timeout_s,
            carbon=sweep.spec.carbon,
            job_root=sweep.log_dir,
            step_flops=sweep.step_flops,
        )
    return run_child(
        run_id,
        config,
        sweep.experiment_id,
        meter=sweep.spec.meter,
        timeout_s=sweep.spec.timeout_s,
        log_dir=sweep.log_dir,
        client=client,
        extra_args=sweep.spec.carbon_args,
    )
