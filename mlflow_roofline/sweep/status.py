"""The types a sweep's plan, store look-ups, child runs and runner share: where a
configuration stands in the store, how one configuration's run ended, and the
interruption of a sweep. Nothing here talks to MLflow or starts a process.
"""

from __future__ import annotations

import dataclasses

# Store states of a configuration (see mlflow_roofline.sweep.lookup.store_status).
NEW = "to run"
DONE = "already done"
FAILED = "failed"
STALE = "stale"
ALIVE = "in progress"
ELSEWHERE = "running elsewhere"

RUN_STATES: tuple[str, ...] = ("RUNNING", "SCHEDULED")
"""MLflow run statuses of a run that has not ended."""


@dataclasses.dataclass(frozen=True)
class Status:
    """Where a configuration stands in the store.

    Attributes:
        state: one of NEW, DONE, FAILED, STALE, ALIVE, ELSEWHERE.
        run_id: the run that decided the state (None for NEW).
        detail: a short explanation (the failure reason, the host...).
        stale_run_ids: RUNNING runs of this config whose process is gone.
        run_ids: every run of this config the look-up saw (whatever its status).
    """

    state: str
    run_id: str | None = None
    detail: str = ""
    stale_run_ids: tuple[str, ...] = ()
    run_ids: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one configuration's run ended.

    Attributes:
        run_id: the child run.
        status: its final MLflow status (FINISHED, FAILED or KILLED).
        reason: why it did not finish ("" when it did).
        wall_s: seconds from process start to exit (or spent waiting for another process's run).
        returncode: the train process's exit status (negative: killed by that signal; None
            when this sweep did not start the process).
        summary: the reason in one line.
        elsewhere: the run was made by another process (another sweep), not by this sweep.
    """

    run_id: str
    status: str
    reason: str
    wall_s: float
    returncode: int | None
    summary: str = ""
    elsewhere: bool = False
