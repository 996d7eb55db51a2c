"""Ending a run so that it is ended: through a second and a third Ctrl-C, in the store, with its reason.

MLflow's ``end_run`` takes the run off the active stack before it writes the status, and
that write first shuts MLflow's asynchronous logging down (a flush): a Ctrl-C pressed
again there leaves the run RUNNING and off the stack, where nothing else ends it. Here a
run is ended with the stop signals deferred
(:func:`~mlflow_roofline.system.signals.deferring_stop_signals`), an interrupt raised
anyway is retried (the next attempt ends the run through the client), and the caller
learns whether the store holds the run ended: a caller whose run could not be ended
leaves the run's watchdog hook armed (:meth:`~mlflow_roofline.system.watchdog.Watchdog.arm`),
and the watchdog ends it once the process is gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR
from mlflow_roofline.system.signals import deferring_stop_signals, deliver_noted
from mlflow_roofline.tracking.client import RunStatus, TrackingClient

__all__ = [
    "END_ATTEMPTS",
    "end_run_surely",
    "end_runs",
    "failure_outcome",
    "interrupted_reason",
    "settle_after_failure",
]

END_ATTEMPTS = 5
"""Attempts at ending one run when interrupts keep cutting it short."""


def end_run_surely(
    client: TrackingClient, run_id: str, status: RunStatus, reason: str | None = None, *, redeliver: bool = False
) -> bool:
    """End ``run_id`` with ``status`` (``reason`` in ``roofline.error`` first), taking it off MLflow's
    active stack; True once the store holds it ended, False when interrupts cut every attempt short.

    ``redeliver``: a stop signal that arrived meanwhile is delivered afterwards (a run ended at
    the end of training: the user's Ctrl-C still stops what follows); otherwise it is dropped
    (the process is stopping already).

    Raises:
        TrackingError: the store failed (not an interrupt).
    """
    return not end_runs(client, [run_id], status, reason, redeliver=redeliver)


def end_runs(
    client: TrackingClient,
    run_ids: Sequence[str],
    status: RunStatus,
    reason: str | None = None,
    *,
    redeliver: bool = False,
) -> list[str]:
    """End ``run_ids`` (outermost first, as MLflow stacks them; ended innermost first) as
    :func:`end_run_surely` ends one; returns those left not ended."""
    with deferring_stop_signals() as noted:
        left = [run_id for run_id in reversed(run_ids) if not _end_one(client, run_id, status, reason)]
    if redeliver:
        deliver_noted(noted)
    return left[::-1]


def _end_one(client: TrackingClient, run_id: str, status: RunStatus, reason: str | None) -> bool:
    for _ in range(END_ATTEMPTS):
        try:
            if reason:
                client.set_tag(run_id, TAG_ERROR, reason[:MAX_TAG_CHARS])
            client.end_run_and_deactivate(run_id, status)
            return True
        except (KeyboardInterrupt, Interrupted):
            continue  # pressed again (past the deferral): the next attempt ends it through the client
    return False


def settle_after_failure(client: TrackingClient, run_ids: Sequence[str], status: RunStatus, reason: str) -> list[str]:
    """After training raised: end each of ``run_ids`` still RUNNING with ``status`` and ``reason``;
    one its owner already ended FAILED without a reason (a ``with mlflow.start_run()`` block the
    exception left) gets the reason, and ``status`` (KILLED after an interrupt). Returns those
    left not ended (outermost first).

    Raises:
        TrackingError: the store failed.
    """
    with deferring_stop_signals():
        unsettled = []
        for run_id in run_ids:
            run = client.get_run(run_id)
            if run.info.status == "RUNNING" or (run.info.status == "FAILED" and TAG_ERROR not in run.data.tags):
                unsettled.append(run_id)
        return end_runs(client, unsettled, status, reason)


def interrupted_reason(what: str) -> str:
    """``interrupted: KeyboardInterrupt (Ctrl-C) before training ended``, for ``what`` (``training``)."""
    return f"interrupted: KeyboardInterrupt (Ctrl-C) before {what} ended"


def failure_outcome(error: BaseException | None, unknown: str, what: str = "training") -> tuple[RunStatus, str]:
    """The status and reason of a run whose ``what`` raised ``error``: KILLED after an interrupt (Ctrl-C,
    SIGTERM as :class:`~mlflow_roofline.core.errors.Interrupted`), FAILED naming another exception;
    ``unknown``: the reason when ``error`` is None."""
    if isinstance(error, KeyboardInterrupt):
        return "KILLED", interrupted_reason(what)
    if isinstance(error, Interrupted):
        return "KILLED", error.reason
    if error is None:
        return "FAILED", unknown
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return "FAILED", f"{what} raised {type(error).__name__}" + (f": {first}" if first else "")
