"""The sweep run itself: opening it (or adopting the ``mlflow run`` run), ending the sweep
runs a killed sweep left RUNNING, logging the plan as its artifacts, and what a running
sweep shows (:class:`Progress`): a progress bar on stderr and its counts as metrics of the
sweep run.

The counts are logged at every settled configuration (step = configurations settled so
far), so the sweep run's charts show the sweep advance and a sweep killed at any moment
still tells how far it got.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

from tqdm import tqdm

from mlflow_roofline.core.invocation import option
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
    TAG_ERROR,
    TAG_HARDWARE,
    TAG_LAUNCHER_RUN_ID,
    TAG_RUN_TYPE,
    TAG_SPEC,
    TAG_SPEC_HASH,
    TAG_SWEEP_RUN_ID,
)
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.reconcile import Entry, plan_table
from mlflow_roofline.sweep.spec import SweepSpec
from mlflow_roofline.sweep.status import Outcome
from mlflow_roofline.system.liveness import liveness, process_tags
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.project_run import name_project_run


def open_parent(
    client: TrackingClient, spec: SweepSpec, experiment_id: str, plan: Plan, echo: Callable[[str], None]
) -> str:
    """The sweep run: the launcher's run when it is in ``experiment_id``, else a new one linked to it.

    Both are named ``sweep-<spec>`` (the launcher's run unless the user named it).
    """
    tags = {
        TAG_RUN_TYPE: "sweep",
        TAG_SPEC: spec.source,
        TAG_SPEC_HASH: spec.spec_hash,
        TAG_HARDWARE: plan.hardware or "",
        **process_tags(os.getpid()),
    }
    launcher = os.environ.get("MLFLOW_RUN_ID")
    name = f"sweep-{spec.name}"
    if launcher:
        name_project_run(client, launcher, name)
        run = client.get_run(launcher)
        if run.info.experiment_id == experiment_id:
            client.log(launcher, tags=tags)
            return launcher
    parent_id = client.open_run(experiment_id, run_name=name, tags=tags)
    if launcher:
        # `mlflow run` put its run in another experiment: nest the train runs where the spec
        # says (the fit reads them there) and link the two runs both ways.
        client.set_tag(launcher, TAG_SWEEP_RUN_ID, parent_id)
        client.set_tag(parent_id, TAG_LAUNCHER_RUN_ID, launcher)
        where = client.experiment(experiment_id).name  # the spec's, or --experiment's
        echo(
            f"Note: the project run {launcher} is not in experiment {where!r}; "
            f"the sweep's runs go to {where!r} under sweep run {parent_id}."
        )
    return parent_id


def mark_stale_sweeps(client: TrackingClient, experiment_id: str, parent_id: str) -> None:
    """End RUNNING sweep runs whose process is gone here (a killed earlier sweep) as KILLED."""
    running = f"tags.`{TAG_RUN_TYPE}` = 'sweep' and attributes.status = 'RUNNING'"
    for run in client.iter_runs([experiment_id], running):
        if run.info.run_id != parent_id and liveness(run.data.tags, run.info.run_id) == "dead":
            mark_killed(client, run.info.run_id, parent_id)


def mark_killed(client: TrackingClient, run_id: str, parent_id: str) -> None:
    """End ``run_id``, whose process is gone, as KILLED, saying which sweep found it so."""
    client.set_tag(run_id, TAG_ERROR, f"its process is gone; marked KILLED by sweep run {parent_id}")
    client.end_run(run_id, "KILLED")


def log_plan(client: TrackingClient, parent_id: str, spec: SweepSpec, plan: Plan, entries: list[Entry]) -> None:
    """The spec, the plan (table and JSON) and the skipped grid points as artifacts of the sweep run."""
    grids = [{k: list(v) for k, v in g.items()} for g in spec.grids]
    client.log_text(parent_id, spec.text or json.dumps({"grid": grids}, indent=1), "spec.yaml")
    client.log_text(parent_id, plan_table(entries, plan) + "\n", "plan.txt")
    client.log_dict(parent_id, {"entries": [e.to_dict(plan.hardware) for e in entries]}, "plan.json")
    client.log_dict(parent_id, {"skipped": [s.to_dict() for s in plan.skipped]}, "skipped.json")


# -- what a running sweep shows --------------------------------------------------------
TALLIES: tuple[str, ...] = ("finished", "failed", "done_elsewhere", "failed_elsewhere", "left_alone")
"""How a configuration the sweep meant to run can end (left alone: running on another host)."""


def skipped_line(counts: dict[str, int]) -> str:
    """What the sweep skips and why, in one line ("" when it skips nothing)."""
    reasons = {
        "already done": counts["already_done"],
        f"failed earlier ({option('retry_failed', 'true')} reruns them)": counts["failed_earlier"],
        "impossible (--dry-run says why)": counts["skipped_invalid"],
    }
    found = [f"{n} {why}" for why, n in reasons.items() if n]
    return f"skipping {sum(reasons.values())} configuration(s): {', '.join(found)}" if found else ""


class Progress:
    """The bar and the metrics of one sweep run.

    Args:
        client: the tracking store.
        parent_id: the sweep run the metrics go to.
        counts: :func:`~mlflow_roofline.sweep.reconcile.plan_counts` of the plan.
        pending: configurations the sweep means to run or wait for.
        show: draw the bar (else lines go to ``echo``).
        echo: where lines go without a bar.
        on_log: called each time the counts are logged (the sweep run's description is rewritten).
    """

    def __init__(
        self,
        client: TrackingClient,
        parent_id: str,
        counts: dict[str, int],
        pending: int,
        show: bool,
        echo: Callable[[str], None],
        on_log: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.parent_id = parent_id
        self.counts = counts
        self.pending = pending
        self.tally = dict.fromkeys(TALLIES, 0)
        self.step = 0
        self.on_log = on_log
        self.bar = tqdm(total=pending, unit="config", disable=not show, dynamic_ncols=True, file=sys.stderr)
        self.write: Callable[[str], None] = self.bar.write if show else echo
        line = skipped_line(counts)
        if line:
            self.write(line)
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
        c, t = self.counts, self.tally
        metrics: dict[str, float] = {
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
        self.client.log(self.parent_id, metrics=metrics, step=self.step)
        if self.on_log is not None:
            self.on_log()
