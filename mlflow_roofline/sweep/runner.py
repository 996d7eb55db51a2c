"""Run a sweep: one parent MLflow run, each configuration a nested train run.

:func:`run_sweep` reconciles the plan with the store (resume), then works through what is
left, baselines first, with a progress bar. A spec with ``repeats: k`` measures each
configuration k times, each repeat its own train run; the unit planned, claimed and
resumed is one (configuration, repeat). Just before each unit it looks it up again and
claims it (:mod:`mlflow_roofline.sweep.claim`), so sweeps
sharing a store never run one configuration twice; one held by a live run of another
process is put back in the queue and, when nothing else is left, waited for. Each run
is measured, by default, from this process with its ranks forked from a warm server
(:func:`~mlflow_roofline.sweep.warm_child.run_child_warm`, ``launch="warm"``), or in an
``mlflow-roofline train`` process of its own (:func:`~mlflow_roofline.sweep.child_run.run_child`,
``launch="fresh"``, what the remote executors' workers do).

The sweep never holds results only in memory: every finished configuration is a FINISHED
run the moment its process ends, so a sweep killed at any moment loses none. SIGINT and
SIGTERM stop the in-flight train process, mark its run and the parent KILLED, and the
sweep exits 128 + signal.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    MAX_TAG_CHARS,
    TAG_ERROR,
)
from mlflow_roofline.sweep.child_run import create_child_run, run_child
from mlflow_roofline.sweep.claim import check_claim, withdraw
from mlflow_roofline.sweep.description import update_description
from mlflow_roofline.sweep.parent_run import (
    log_plan,
    mark_killed,
    mark_stale_sweeps,
    open_parent,
)
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.progress import Progress
from mlflow_roofline.sweep.reconcile import Entry, plan_counts, reconcile
from mlflow_roofline.sweep.remote_results import abandon_in_flight, collect_one, submit_claimed
from mlflow_roofline.sweep.spec import SweepSpec
from mlflow_roofline.sweep.status import (
    ALIVE,
    DONE,
    ELSEWHERE,
    FAILED,
    RUN_STATES,
    Outcome,
    Status,
    SweepInterrupted,
)
from mlflow_roofline.sweep.store import config_status, store_statuses
from mlflow_roofline.sweep.warm_child import run_child_warm
from mlflow_roofline.system.liveness import liveness
from mlflow_roofline.system.signals import ignore_stop_signals, raising_on_signals
from mlflow_roofline.train.warm import WarmServer

POLL_S = 0.5
"""Seconds between two looks at a run another process is measuring."""

CLAIM_ATTEMPTS = 8
"""Claims of one configuration lost to a tie before it is put back in the queue."""

CLAIM_BACKOFF_S = 0.5
"""Upper bound of the random pause after a lost claim, times the attempt number, seconds."""

DEFER = "defer"
"""What :func:`_settle` returns for a configuration held by another process right now."""

SUBMITTED = "submitted"
"""What :func:`_settle` returns for a configuration claimed here and handed to a remote executor."""


@dataclasses.dataclass(frozen=True)
class Result:
    """How one planned configuration ended in this sweep."""

    entry: Entry
    outcome: Outcome

    @property
    def config(self) -> TrainConfig:
        """The configuration."""
        return self.entry.config


@dataclasses.dataclass
class SweepResult:
    """What a sweep did: its parent run, the plan's entries, what became of them, the exit status.

    ``failed`` holds the configurations that failed in a run of this sweep (not those that
    failed in another process meanwhile).
    """

    parent_run_id: str
    entries: list[Entry]
    results: list[Result]
    failed: list[Result]
    exit_code: int


@dataclasses.dataclass(frozen=True)
class _Sweep:
    """What every step of one sweep needs."""

    client: Any
    spec: SweepSpec
    plan: Plan
    experiment_id: str
    parent_id: str
    retry_failed: bool
    log_dir: str
    executor: Any = None  # a remote executor (sweep.executors), None: here, one after another
    warm: WarmServer | None = None  # the server ranks are forked from (launch="warm"), None: fresh processes


def run_sweep(
    spec: SweepSpec,
    plan: Plan,
    experiment_id: str,
    *,
    retry_failed: bool = False,
    client: Any = None,
    echo: Callable[[str], None] = print,
    progress: bool = True,
    executor: Any = None,
    launch: str = "warm",
) -> SweepResult:
    """Run every configuration of ``plan`` not yet done in ``experiment_id``.

    ``executor``: a remote executor (:mod:`mlflow_roofline.sweep.executors`) the claimed
    configurations are handed to; None runs them here, one after another, each ``launch``
    (:data:`~mlflow_roofline.core.schema.LAUNCHES`): ``warm``, its ranks forked from a
    server that imported torch once for the whole sweep; ``fresh``, an ``mlflow-roofline
    train`` process of its own.

    The parent is the run in ``MLFLOW_RUN_ID`` (``mlflow run . -e sweep``) when it belongs
    to ``experiment_id``; otherwise the sweep opens its own parent there and links the two
    (tags ``roofline.sweep_run_id`` / ``roofline.launcher_run_id``). The exit code is 0,
    1 if a configuration failed in this sweep, 128 + signal when interrupted.
    """
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    parent_id = open_parent(client, spec, experiment_id, plan, echo)
    with raising_on_signals(SweepInterrupted):
        try:
            warm = WarmServer().start() if launch == "warm" and executor is None else None
            return _sweep(client, spec, plan, experiment_id, parent_id, retry_failed, echo, progress, executor, warm)
        except SweepInterrupted as exc:
            ignore_stop_signals()
            client.set_tag(parent_id, TAG_ERROR, str(exc))
            client.set_terminated(parent_id, "KILLED")
            echo(f"Sweep {exc}: in-flight run and sweep run {parent_id} marked KILLED.")
            return SweepResult(parent_id, [], [], [], 128 + exc.signum)
        except BaseException as exc:
            ignore_stop_signals()
            with contextlib.suppress(Exception):
                client.set_tag(parent_id, TAG_ERROR, f"{type(exc).__name__}: {exc}"[:MAX_TAG_CHARS])
                client.set_terminated(parent_id, "FAILED")
            raise


def _sweep(
    client: Any,
    spec: SweepSpec,
    plan: Plan,
    experiment_id: str,
    parent_id: str,
    retry_failed: bool,
    echo: Callable[[str], None],
    progress: bool,
    executor: Any = None,
    warm: WarmServer | None = None,
) -> SweepResult:
    """Reconcile, log the plan, run it, log the results and end the parent run."""
    mark_stale_sweeps(client, experiment_id, parent_id)
    entries = reconcile(plan, store_statuses(client, plan, experiment_id), retry_failed)
    log_plan(client, parent_id, spec, plan, entries)
    log_dir = tempfile.mkdtemp(prefix="roofline-sweep-")
    try:
        sweep = _Sweep(client, spec, plan, experiment_id, parent_id, retry_failed, log_dir, executor, warm)
        results = _run_entries(sweep, entries, echo, progress)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)  # failed runs hold their output as an artifact
    by_key = {r.entry.key: r.outcome for r in results}
    rows = [e.to_dict(plan.hardware, by_key.get(e.key)) for e in entries]
    client.log_dict(parent_id, {"entries": rows}, "results.json")
    failed = [r for r in results if r.outcome.status != "FINISHED" and not r.outcome.elsewhere]
    if failed:
        client.set_tag(parent_id, TAG_ERROR, f"{len(failed)} configuration(s) failed")
    client.set_terminated(parent_id, "FAILED" if failed else "FINISHED")
    return SweepResult(parent_id, entries, results, failed, 1 if failed else 0)


def _run_entries(sweep: _Sweep, entries: list[Entry], echo: Callable[[str], None], show: bool) -> list[Result]:
    """Settle every entry to run or wait for; one held by another process goes back in the queue.

    When every entry left was put back since the last one settled, the sweep waits for
    the run that holds the first of them instead of looking again at once. With a remote
    executor, claimed entries are submitted while it has room, and outcomes are recorded
    as they come back (:mod:`mlflow_roofline.sweep.remote_results`).
    """
    queue = collections.deque(e for e in entries if e.action in ("run", "wait"))
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
            if in_flight and (not queue or not _has_room(sweep.executor)):
                entry, outcome, node_lost = collect_one(sweep, in_flight)
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
            abandon_in_flight(sweep, in_flight)
        progress.close()
    return results


def _reclaim(sweep: _Sweep, entry: Entry) -> Outcome | tuple[str, str] | None:
    """Claim ``entry`` again after its remote run was lost, and submit it (None: another process holds it)."""
    config_hash = sweep.plan.config_hash(entry.config) or ""
    status = config_status(sweep.client, sweep.experiment_id, config_hash, entry.repeat)
    return _claim_and_run(sweep, entry, config_hash, status)


def _has_room(executor: Any) -> bool:
    return executor is not None and (executor.max_in_flight is None or executor.in_flight < executor.max_in_flight)


def _record(results: list[Result], progress: Progress, entry: Entry, outcome: Outcome | None) -> None:
    if outcome is not None:
        results.append(Result(entry, outcome))
        if outcome.status != "FINISHED" and not outcome.elsewhere:
            progress.write(f"FAILED {entry.name} (run {outcome.run_id}): {outcome.summary}")
    progress.settled(outcome)


def _settle(
    sweep: _Sweep, entry: Entry, write: Callable[[str], None], may_wait: bool
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
        outcome = _claim_and_run(sweep, entry, config_hash, status)
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


def _claim_and_run(sweep: _Sweep, entry: Entry, config_hash: str, status: Status) -> Outcome | tuple[str, str] | None:
    """Create the child run, claim the (configuration, repeat) with it, and run it if the claim is won (else None).

    With a remote executor the won claim is submitted instead: ``(SUBMITTED, run id)``.
    """
    client, config = sweep.client, entry.config
    run_id = create_child_run(
        config,
        sweep.experiment_id,
        sweep.parent_id,
        hardware=sweep.plan.hardware or "",
        client=client,
        repeat=entry.repeat,
    )
    try:
        claim = check_claim(client, sweep.experiment_id, config_hash, run_id, status.run_ids, entry.repeat)
    except BaseException:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, "KILLED")
        raise
    if not claim.won:
        withdraw(client, run_id, claim)
        return None
    if sweep.executor is not None:
        submit_claimed(sweep, run_id, config)
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


def _wait_for_live(client: Any, run_id: str, entry: Entry, write: Callable[[str], None]) -> float:
    """Wait until run ``run_id``, measured by another process here, ends or its process dies; seconds waited."""
    write(f"waiting for {entry.name}: run {run_id} is still running here")
    started = time.monotonic()
    while True:
        run = client.get_run(run_id)
        if run.info.status not in RUN_STATES or liveness(run.data.tags, run_id) != "alive":
            return time.monotonic() - started
        time.sleep(POLL_S)
