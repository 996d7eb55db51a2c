"""The sweep run itself: opening it (or adopting the ``mlflow run`` run), ending the sweep
runs a killed sweep left RUNNING, and logging the plan as its artifacts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from mlflow_roofline.core.schema import (
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
from mlflow_roofline.system.liveness import liveness, process_tags
from mlflow_roofline.tracking.runs import iter_runs


def open_parent(client: Any, spec: SweepSpec, experiment_id: str, plan: Plan, echo: Callable[[str], None]) -> str:
    """The sweep run: the launcher's run when it is in ``experiment_id``, else a new one linked to it."""
    from mlflow.entities import RunTag

    tags = {
        TAG_RUN_TYPE: "sweep",
        TAG_SPEC: spec.source,
        TAG_SPEC_HASH: spec.spec_hash,
        TAG_HARDWARE: plan.hardware or "",
        **process_tags(os.getpid()),
    }
    launcher = os.environ.get("MLFLOW_RUN_ID")
    if launcher:
        run = client.get_run(launcher)
        if run.info.experiment_id == experiment_id:
            client.log_batch(launcher, tags=[RunTag(k, v) for k, v in tags.items()])
            return launcher
    parent = client.create_run(experiment_id, run_name=f"sweep-{spec.name}", tags=tags)
    parent_id = parent.info.run_id
    if launcher:
        # `mlflow run` put its run in another experiment: nest the train runs where the spec
        # says (the fit reads them there) and link the two runs both ways.
        client.set_tag(launcher, TAG_SWEEP_RUN_ID, parent_id)
        client.set_tag(parent_id, TAG_LAUNCHER_RUN_ID, launcher)
        name = client.get_experiment(experiment_id).name  # the spec's, or --experiment's
        echo(
            f"Note: the project run {launcher} is not in experiment {name!r}; "
            f"the sweep's runs go to {name!r} under sweep run {parent_id}."
        )
    return parent_id


def mark_stale_sweeps(client: Any, experiment_id: str, parent_id: str) -> None:
    """End RUNNING sweep runs whose process is gone here (a killed earlier sweep) as KILLED."""
    running = f"tags.`{TAG_RUN_TYPE}` = 'sweep' and attributes.status = 'RUNNING'"
    for run in iter_runs(client, [experiment_id], running):
        if run.info.run_id != parent_id and liveness(run.data.tags, run.info.run_id) == "dead":
            mark_killed(client, run.info.run_id, parent_id)


def mark_killed(client: Any, run_id: str, parent_id: str) -> None:
    """End ``run_id``, whose process is gone, as KILLED, saying which sweep found it so."""
    client.set_tag(run_id, TAG_ERROR, f"its process is gone; marked KILLED by sweep run {parent_id}")
    client.set_terminated(run_id, "KILLED")


def log_plan(client: Any, parent_id: str, spec: SweepSpec, plan: Plan, entries: list[Entry]) -> None:
    """The spec, the plan (table and JSON) and the skipped grid points as artifacts of the sweep run."""
    grids = [{k: list(v) for k, v in g.items()} for g in spec.grids]
    client.log_text(parent_id, spec.text or json.dumps({"grid": grids}, indent=1), "spec.yaml")
    client.log_text(parent_id, plan_table(entries, plan) + "\n", "plan.txt")
    client.log_dict(parent_id, {"entries": [e.to_dict(plan.hardware) for e in entries]}, "plan.json")
    client.log_dict(parent_id, {"skipped": [s.to_dict() for s in plan.skipped]}, "skipped.json")
