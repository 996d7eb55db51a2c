"""Run a sweep: one parent MLflow run, each configuration a nested train run.

:func:`run_sweep` reconciles the plan with the store (resume), then works through what is
left, baselines first, with a progress bar. A spec with ``repeats: k`` measures each
configuration k times, each repeat its own train run; the unit planned, claimed and
resumed is one (configuration, repeat). Just before each unit it looks it up again and
claims it (:mod:`mlflow_roofline.sweep.claim`), so sweeps
sharing a store never run one configuration twice; one held by a live run of another
process is put back in the queue and, when nothing else is left, waited for. Each run
is measured, by default, from this process with its ranks forked from a warm server
(:func:`~mlflow_roofline.sweep.warm_child.run_child_warm`, ``launch="warm"``; a Ray
worker does the same with a server of its own), or in an
``mlflow-roofline train`` process of its own (:func:`~mlflow_roofline.sweep.fresh_child.run_child`,
``launch="fresh"``, what Slurm jobs always do).

This module runs a planned sweep (:func:`run_sweep`: the parent run, signals, the results);
the queue loop, and claiming and measuring one unit, are :mod:`mlflow_roofline.sweep.queue`.

The sweep never holds results only in memory: every finished configuration is a FINISHED
run the moment its process ends, so a sweep killed at any moment loses none. SIGINT and
SIGTERM stop the in-flight train process, mark its run and the parent KILLED, and the
sweep exits 128 + signal. A sweep killed outright (SIGKILL, the OOM killer) leaves a
watchdog (:mod:`mlflow_roofline.system.watchdog`) that ends the parent and the in-flight
warm run KILLED and removes the sweep's temp folder within seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shutil
import tempfile
from collections.abc import Callable

from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR
from mlflow_roofline.sweep.context import SweepContext
from mlflow_roofline.sweep.lookup import store_statuses
from mlflow_roofline.sweep.parent_run import log_plan, mark_stale_sweeps, open_parent
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.queue import Result, run_entries
from mlflow_roofline.sweep.reconcile import Entry, reconcile
from mlflow_roofline.sweep.remote.executors import Executor
from mlflow_roofline.sweep.spec import SweepSpec
from mlflow_roofline.sweep.step_flops import StepFlops
from mlflow_roofline.system.signals import ignore_stop_signals, raising_on_signals
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs
from mlflow_roofline.tracking.store_errors import patiently
from mlflow_roofline.train.warm import WarmServer


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


def run_sweep(
    spec: SweepSpec,
    plan: Plan,
    experiment_id: str,
    *,
    retry_failed: bool = False,
    client: TrackingClient | None = None,
    echo: Callable[[str], None] = print,
    progress: bool = True,
    executor: Executor | None = None,
    launch: str = "warm",
) -> SweepResult:
    """Run every configuration of ``plan`` not yet done in ``experiment_id``.

    ``executor``: a remote executor (:mod:`mlflow_roofline.sweep.remote.executors`) the claimed
    configurations are handed to; None runs them here, one after another, each ``launch``
    (:data:`~mlflow_roofline.core.schema.LAUNCHES`): ``warm``, its ranks forked from a
    server that imported torch once for the whole sweep; ``fresh``, an ``mlflow-roofline
    train`` process of its own.

    The parent is the run in ``MLFLOW_RUN_ID`` (``mlflow run . -e sweep``) when it belongs
    to ``experiment_id``; otherwise the sweep opens its own parent there and links the two
    (tags ``roofline.sweep_run_id`` / ``roofline.launcher_run_id``). The exit code is 0,
    1 if a configuration failed in this sweep, 128 + signal when interrupted.
    """
    client = client or TrackingClient()
    parent_id = open_parent(client, spec, experiment_id, plan, echo)
    # SIGKILL (the OOM killer) runs no except below: the watchdog then ends the parent and
    # the in-flight warm run KILLED and removes the sweep's temp folder.
    with Watchdog() as watchdog, raising_on_signals(Interrupted):
        watchdog.call(END_ORPHANED_RUN, **orphan_hook_kwargs(parent_id))
        try:
            return _sweep(
                client,
                spec,
                plan,
                experiment_id,
                parent_id,
                retry_failed,
                echo,
                progress,
                executor,
                launch,
                watchdog,
            )
        except Interrupted as exc:
            ignore_stop_signals()
            patiently(functools.partial(_end_killed, client, parent_id, exc.reason))  # train may still be writing
            echo(f"Sweep {exc.reason}: in-flight run and sweep run {parent_id} marked KILLED.")
            return SweepResult(parent_id, [], [], [], 128 + exc.signum)
        except BaseException as exc:
            ignore_stop_signals()
            with contextlib.suppress(Exception):
                client.set_tag(parent_id, TAG_ERROR, f"{type(exc).__name__}: {exc}"[:MAX_TAG_CHARS])
                client.end_run(parent_id, "FAILED")
            raise


def _end_killed(client: TrackingClient, parent_id: str, reason: str) -> None:
    client.set_tag(parent_id, TAG_ERROR, reason)
    client.end_run(parent_id, "KILLED")


def _sweep(
    client: TrackingClient,
    spec: SweepSpec,
    plan: Plan,
    experiment_id: str,
    parent_id: str,
    retry_failed: bool,
    echo: Callable[[str], None],
    progress: bool,
    executor: Executor | None,
    launch: str,
    watchdog: Watchdog,
) -> SweepResult:
    """Reconcile, log the plan, run it, log the results and end the parent run.

    The warm server (``launch="warm"`` here) starts once the plan holds a configuration to run or
    to wait for: its preload (torch, transformers: seconds of CPU) goes on in the background while
    the plan is logged, and a resumed sweep with nothing left never pays it.
    """
    mark_stale_sweeps(client, experiment_id, parent_id)
    entries = reconcile(plan, store_statuses(client, plan, experiment_id), retry_failed)
    pending = any(e.action != "skip" for e in entries)
    warm = WarmServer().start() if launch == "warm" and executor is None and pending else None
    log_plan(client, parent_id, spec, plan, entries)
    log_dir = tempfile.mkdtemp(prefix="roofline-sweep-")  # output of fresh processes, warm job folders
    watchdog.remove(log_dir)
    planned = [e.config for e in entries if e.pending]
    step_flops = None if warm is None else StepFlops(plan.hardware or "", planned, warm, log_dir)
    try:
        sweep = SweepContext(
            client,
            spec,
            plan,
            experiment_id,
            parent_id,
            retry_failed,
            log_dir,
            executor,
            warm,
            launch,
            watchdog,
            step_flops,
        )
        results = run_entries(sweep, entries, echo, progress)
    finally:
        if step_flops is not None:
            step_flops.close()
        shutil.rmtree(log_dir, ignore_errors=True)  # failed runs hold their output as an artifact
    by_key = {r.entry.key: r.outcome for r in results}
    rows = [e.to_dict(plan.hardware, by_key.get(e.key)) for e in entries]
    client.log_dict(parent_id, {"entries": rows}, "results.json")
    failed = [r for r in results if r.outcome.status != "FINISHED" and not r.outcome.elsewhere]
    if failed:
        client.set_tag(parent_id, TAG_ERROR, f"{len(failed)} configuration(s) failed")
    client.end_run(parent_id, "FAILED" if failed else "FINISHED")
    return SweepResult(parent_id, entries, results, failed, 1 if failed else 0)
