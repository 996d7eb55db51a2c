"""What a running sweep shows: a progress bar on stderr and its counts as metrics of the sweep run.

The counts are logged at every settled configuration (step = configurations settled so
far), so the sweep run's charts show the sweep advance and a sweep killed at any moment
still tells how far it got.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from mlflow_roofline.core.schema import (
    M_CONFIGS_ALREADY_DONE,
    M_CONFIGS_DONE_ELSEWHERE,
    M_CONFIGS_FAILED,
    M_CONFIGS_FAILED_EARLIER,
    M_CONFIGS_FAILED_ELSEWHERE,
    M_CONFIGS_FINISHED,
    M_CONFIGS_PLANNED,
    M_CONFIGS_REMAINING,
    M_CONFIGS_SKIPPED_INVALID,
)
from mlflow_roofline.sweep.status import Outcome

TALLIES: tuple[str, ...] = ("finished", "failed", "done_elsewhere", "failed_elsewhere", "left_alone")
"""How a configuration the sweep meant to run can end (left alone: running on another host)."""


class Progress:
    """The bar and the metrics of one sweep run.

    Args:
        client: an ``MlflowClient``.
        parent_id: the sweep run the metrics go to.
        counts: :func:`~mlflow_roofline.sweep.reconcile.plan_counts` of the plan.
        pending: configurations the sweep means to run or wait for.
        show: draw the bar (else lines go to ``echo``).
        echo: where lines go without a bar.
        on_log: called each time the counts are logged (the sweep run's description is rewritten).
    """

    def __init__(
        self,
        client: Any,
        parent_id: str,
        counts: dict[str, int],
        pending: int,
        show: bool,
        echo: Callable[[str], None],
        on_log: Callable[[], None] | None = None,
    ) -> None:
        from tqdm import tqdm

        self.client = client
        self.parent_id = parent_id
        self.counts = counts
        self.pending = pending
        self.tally = dict.fromkeys(TALLIES, 0)
        self.step = 0
        self.on_log = on_log
        self.bar = tqdm(total=pending, unit="config", disable=not show, dynamic_ncols=True, file=sys.stderr)
        self.write: Callable[[str], None] = self.bar.write if show else echo
        self._show()

    def starting(self, label: str) -> None:
        """Name the configuration being worked on."""
        self.bar.set_description(label)

    def settled(self, outcome: Outcome | None) -> None:
        """One configuration is settled (None: left alone, it runs on another host)."""
        if outcome is None:
            key = "left_alone"
        elif outcome.elsewhere:
            key = "done_elsewhere" if outcome.status == "FINISHED" else "failed_elsewhere"
        else:
            key = "finished" if outcome.status == "FINISHED" else "failed"
        self.tally[key] += 1
        self.step += 1
        self.bar.update(1)
        self._show()

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()

    def _show(self) -> None:
        c, t = self.counts, self.tally
        self.bar.set_postfix(
            done=t["finished"],
            failed=t["failed"],
            elsewhere=t["done_elsewhere"] + t["failed_elsewhere"] + t["left_alone"],
            skipped=c["already_done"] + c["failed_earlier"] + c["skipped_invalid"],
            refresh=True,
        )
        self._log()

    def _log(self) -> None:
        from mlflow.entities import Metric

        c, t = self.counts, self.tally
        metrics = {
            M_CONFIGS_PLANNED: c["configs"],
            M_CONFIGS_SKIPPED_INVALID: c["skipped_invalid"],
            M_CONFIGS_ALREADY_DONE: c["already_done"],
            M_CONFIGS_FAILED_EARLIER: c["failed_earlier"],
            M_CONFIGS_FINISHED: t["finished"],
            M_CONFIGS_FAILED: t["failed"],
            M_CONFIGS_DONE_ELSEWHERE: t["done_elsewhere"],
            M_CONFIGS_FAILED_ELSEWHERE: t["failed_elsewhere"],
            M_CONFIGS_REMAINING: self.pending - sum(t.values()),
        }
        now = int(time.time() * 1000)
        self.client.log_batch(self.parent_id, metrics=[Metric(k, float(v), now, self.step) for k, v in metrics.items()])
        if self.on_log is not None:
            self.on_log()
