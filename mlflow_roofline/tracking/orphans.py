"""Ending the run of a launcher that died without ending it (called by the watchdog).

The launcher (``train``, ``measure``, the Trainer callback and the Accelerate hook) gives its watchdog
(:mod:`mlflow_roofline.system.watchdog`) the hook :data:`END_ORPHANED_RUN` and the
arguments of :func:`orphan_hook_kwargs`; if the launcher is killed outright, the
watchdog calls :func:`end_orphaned_run` and the run ends KILLED with the reason in
``roofline.error``.
"""

from __future__ import annotations

from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR
from mlflow_roofline.tracking.client import TrackingClient

END_ORPHANED_RUN = "mlflow_roofline.tracking.orphans:end_orphaned_run"


def orphan_hook_kwargs(run_id: str, tracking_uri: str | None = None) -> dict[str, str]:
    """The hook's arguments for ``run_id``: the run and its tracking store (None: the one this process uses)."""
    return {"run_id": run_id, "tracking_uri": tracking_uri or TrackingClient().tracking_uri}


def end_orphaned_run(run_id: str, tracking_uri: str, reason: str) -> bool:
    """End ``run_id`` KILLED with ``reason`` in ``roofline.error``, if it is still RUNNING.

    A reason the launcher tagged before its own ending of the run was cut short is kept.

    Returns:
        whether the run was ended here (``False``: its launcher had ended it already).
    """
    client = TrackingClient(tracking_uri)
    run = client.get_run(run_id)
    if run.info.status != "RUNNING":
        return False
    if TAG_ERROR not in run.data.tags:
        client.set_tag(run_id, TAG_ERROR, reason[:MAX_TAG_CHARS])
    client.end_run(run_id, "KILLED")
    return True
