"""What every step of one sweep needs: its store, spec, plan, runs, and where configurations run.

Built once by the runner (:func:`~mlflow_roofline.sweep.runner.run_sweep`) and handed to
the queue (:mod:`mlflow_roofline.sweep.queue`) and to the remote side
(:mod:`mlflow_roofline.sweep.remote_dispatch`).
"""

from __future__ import annotations

import dataclasses

from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.remote.executors import Executor
from mlflow_roofline.sweep.spec import SweepSpec
from mlflow_roofline.sweep.step_flops import StepFlops
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.train.warm import WarmServer


@dataclasses.dataclass(frozen=True)
class SweepContext:
    """What every step of one sweep needs."""

    client: TrackingClient
    spec: SweepSpec
    plan: Plan
    experiment_id: str
    parent_id: str
    retry_failed: bool
    log_dir: str
    executor: Executor | None = None  # a remote executor (sweep.remote.executors), None: here, one after another
    warm: WarmServer | None = None  # the server ranks are forked from (launch="warm"), None: fresh processes
    launch: str = "warm"  # what remote Ray workers do too (Slurm jobs always launch fresh)
    watchdog: Watchdog | None = None  # ends the sweep's runs KILLED if it is killed outright
    # counted FLOPs of one step by workload, the next one counted ahead (launch="warm"; None otherwise)
    step_flops: StepFlops | None = None
