"""Claim one (configuration, repeat) of a sweep and measure it: what every step of a sweep shares.

:func:`claim_and_run` creates the child run (:func:`~mlflow_roofline.sweep.child_run.create_child_run`),
claims the unit with it (:mod:`mlflow_roofline.sweep.claim`) and, if the claim is won,
measures it: with its ranks forked from the sweep's warm server
(:func:`~mlflow_roofline.sweep.warm_child.run_child_warm`, ``launch="warm"``), in an
``mlflow-roofline train`` process of its own (:func:`~mlflow_roofline.sweep.fresh_child.run_child`,
``launch="fresh"``), or handed to a remote executor
(:func:`~mlflow_roofline.sweep.remote_results.submit_claimed`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from mlflow_roofline.sweep.child_run import create_child_run
from mlflow_roofline.sweep.claim import check_claim, withdraw
from mlflow_roofline.sweep.fresh_child import run_child
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.reconcile import Entry
from mlflow_roofline.sweep.remote_results import submit_claimed
from mlflow_roofline.sweep.spec import SweepSpec
from mlflow_roofline.sweep.status import Outcome, Status
from mlflow_roofline.sweep.warm_child import run_child_warm
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs
from mlflow_roofline.train.warm import WarmServer

SUBMITTED = "submitted"
"""What :func:`claim_and_run` returns, with the run id, for a unit claimed here and handed to a remote executor."""


@dataclasses.dataclass(frozen=True)
class SweepContext:
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
    launch: str = "warm"  # what remote Ray workers do too (Slurm jobs always launch fresh)
    watchdog: Watchdog | None = None  # ends the sweep's runs KILLED if it is killed outright


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
            client.set_terminated(run_id, "KILLED")
        raise
    if not claim.won:
        withdraw(client, run_id, claim)
        return None
    if sweep.warm is None and watchdog is not None:
        # a remote worker or a fresh train process ends the run itself from now on (a fresh
        # one outlives a killed sweep, and has a watchdog of its own)
        watchdog.cancel(END_ORPHANED_RUN, **orphan_hook_kwargs(run_id))
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
            job_root=sweep.log_dir,
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
