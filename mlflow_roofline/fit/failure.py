"""How a fit that fails ends: one line, on its runs as ``roofline.error`` and for the user.

Whatever goes wrong once a fit has started (a plot that cannot be drawn, an artifact
store that cannot be written, the registry refusing a version), every fit run it
started that did not finish, and the ``mlflow run`` project run when there is one, gets
the tag ``roofline.error`` holding one line, and ends FAILED; the caller gets that line
as a :class:`RooflineError` (the command line prints it and exits 2). Registrations
the fit made are undone before (:meth:`fit.registration.RegistryLedger.rollback`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR
from mlflow_roofline.tracking.client import TrackingClient, TrackingError


def failure_line(exc: BaseException, rollback_problems: Sequence[str] = ()) -> str:
    """One line saying why the fit failed (and any registration it could not undo)."""
    if isinstance(exc, RooflineError):
        text = str(exc)
    else:
        first = (str(exc).strip().splitlines() or [""])[0]
        text = f"fit: failed while logging or registering ({type(exc).__name__}: {first})"
    text = " ".join(text.split())
    if rollback_problems:
        text += "; could not undo: " + "; ".join(" ".join(p.split()) for p in rollback_problems)
    return text[:MAX_TAG_CHARS]


def _mark_run(client: TrackingClient, run_id: str, message: str) -> None:
    """Tag ``run_id`` with ``message`` and end it FAILED unless it finished."""
    run = client.get_run(run_id)
    if run.info.status == "FINISHED":
        return
    client.set_tag(run_id, TAG_ERROR, message)
    if run.info.status == "RUNNING":
        client.end_run(run_id, "FAILED")


def record_failure(
    client: TrackingClient | None,
    exc: BaseException,
    run_ids: Sequence[str],
    env_run: str | None,
    rollback_problems: Sequence[str] = (),
) -> RooflineError:
    """Put the failure's line on every unfinished fit run (and the project run); return it as an error.

    ``client``: the fit's client (None when the fit failed before it opened the store: one is opened
    only if the project run must be marked).
    """
    message = failure_line(exc, rollback_problems)
    to_mark = list(dict.fromkeys([*run_ids, *([env_run] if env_run else [])]))
    if not to_mark:
        return RooflineError(message)  # no run was started: the store is not even opened
    client = client or TrackingClient()
    for run_id in to_mark:
        try:
            _mark_run(client, run_id, message)
        except TrackingError:
            continue  # the store itself is what failed: the message still reaches the user
    return RooflineError(message)
