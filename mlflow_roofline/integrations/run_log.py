"""The MLflow side of a job measured inside the user's loop (main process only).

It joins the active run when there is one (the run MLflow's own ``MLflowCallback`` or the
user opened), else opens its own in ``experiment`` (else ``MLFLOW_EXPERIMENT_ID`` /
``_NAME``, else ``roofline-bert``, where ``fit`` looks by default). History points are
logged asynchronously (MLflow's queue) so a logging step does not wait for the store;
:meth:`RunLog.finish` waits for them.

A param the run already holds with another value (``MLflowCallback`` logs the Trainer's
``warmup_steps``, the learning-rate warm-up) is left as it is: MLflow cannot change a
logged param. The value measured here goes to the ``roofline.param_conflict`` tag.

The Trainer calls no callback when training raises; an own run still open when the
process exits is ended FAILED with ``roofline.error`` saying so, never left RUNNING.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Mapping

from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR, TAG_PARAM_CONFLICT
from mlflow_roofline.tracking.client import PendingWrite, TrackingClient
from mlflow_roofline.tracking.experiments import experiment_id_for
from mlflow_roofline.tracking.run_ownership import same_param

logger = logging.getLogger(__name__)


class RunLog:
    """One MLflow run this job's measurements go to."""

    def __init__(self, experiment: str | None, run_name: str | None) -> None:
        self.client = TrackingClient()
        active = self.client.active_run_id()
        self.own = active is None
        if active is not None:
            self.run_id = active
        else:
            self.run_id = self.client.open_run(experiment_id_for(self.client, experiment), run_name)
            atexit.register(self._left_open)
        self._pending: list[PendingWrite] = []

    def log(self, step: int, metrics: Mapping[str, float] | None = None, tags: Mapping[str, str] | None = None) -> None:
        """Queue metrics at ``step`` and tags (returns at once; :meth:`finish` waits)."""
        short_tags = {k: str(v)[:MAX_TAG_CHARS] for k, v in (tags or {}).items()}
        pending = self.client.log_async(self.run_id, metrics, short_tags, step)
        if pending is not None:
            self._pending.append(pending)

    def log_params(self, params: Mapping[str, str]) -> None:
        """Log the params the run does not hold yet; tag those it holds with another value."""
        existing = self.client.get_run(self.run_id).data.params
        new = {k: v for k, v in params.items() if k not in existing}
        conflicts = [
            f"{k}={v} (the run has {existing[k]})"
            for k, v in params.items()
            if k in existing and not same_param(k, existing[k], v)
        ]
        tags = {TAG_PARAM_CONFLICT: "; ".join(conflicts)[:MAX_TAG_CHARS]} if conflicts else {}
        if conflicts:
            logger.warning("roofline: the run already holds %s; kept as it is", "; ".join(conflicts))
        self.client.log(self.run_id, params=new, tags=tags)

    def log_text(self, text: str, path: str) -> None:
        """Store ``text`` as the artifact ``path``."""
        self.client.log_text(self.run_id, text, path)

    def finish(self, failed: bool = False) -> None:
        """Wait for the queued logging; end the run when it is this job's own."""
        for operation in self._pending:
            operation.wait()
        self._pending = []
        if self.own:
            atexit.unregister(self._left_open)
            self.client.end_run(self.run_id, "FAILED" if failed else "FINISHED")

    def _left_open(self) -> None:
        """At exit, an own run training never ended: FAILED, with the reason."""
        try:
            self.client.set_tag(self.run_id, TAG_ERROR, "training stopped before its end (an exception?)")
            self.client.end_run(self.run_id, "FAILED")
        except Exception:  # the interpreter is exiting; nothing more to do
            logger.exception("could not end run %s", self.run_id)
