"""Each configuration's status among the train runs of a real SQLite store."""

from __future__ import annotations

import os
import subprocess
import sys

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_RUN_TYPE
from mlflow_roofline.sweep.lookup import store_status, train_runs
from mlflow_roofline.sweep.plan import expand
from mlflow_roofline.sweep.reconcile import plan_counts, plan_table, reconcile
from mlflow_roofline.sweep.spec import parse_spec
from mlflow_roofline.sweep.status import ALIVE, DONE, ELSEWHERE, FAILED, NEW, STALE
from mlflow_roofline.system.liveness import TAG_HOST, TAG_PID, process_tags
from mlflow_roofline.tracking.client import TrackingClient

HW = "cpu:test"


def plan_of(grid: object, cuda_devices: int | None = None, device: str = "cpu", **top: object):
    data = {"device": device, "seq_len": 8, "batch_size": 4, "num_heads": 2, "ffn_ratio": 2, **top, "grid": grid}
    spec = parse_spec({k: v for k, v in data.items() if v is not None})  # None: leave the key out
    return expand(spec, device, HW, cuda_devices)


def _run(client, experiment_id: str, config: TrainConfig, status: str | None, extra: dict | None = None) -> str:
    tags = {TAG_RUN_TYPE: "train", TAG_CONFIG_HASH: config.config_hash(HW), **(extra or {})}
    run = client.create_run(experiment_id, run_name=config.run_name, tags=tags)
    if status:
        client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def test_store_status_for_each_kind_of_earlier_run(tracking_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    exp = client.create_experiment("roofline-test")
    plan = plan_of({"num_layers": [1, 2, 3, 4, 5, 6, 7, 8], "hidden_size": 16})
    done, failed, stale, alive, elsewhere, killed, new, rank = plan.configs
    ids = {
        "done_failed_first": _run(client, exp, done, "FAILED"),
        "done": _run(client, exp, done, "FINISHED"),
        "failed": _run(client, exp, failed, "FAILED", {"roofline.error": "boom\nOOM at step 3"}),
        "stale": _run(client, exp, stale, None),  # RUNNING, no process recorded: its sweep died
        "elsewhere": _run(client, exp, elsewhere, None, {TAG_HOST: "node-17", TAG_PID: "4242"}),
        "killed": _run(client, exp, killed, "KILLED"),
    }
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    # a rank its launcher put in a session of its own, outliving the recorded process group
    ids["rank"] = _run(client, exp, rank, None, {TAG_HOST: process_tags(os.getpid())[TAG_HOST], TAG_PID: "999999"})
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        start_new_session=True,
        env={**os.environ, "MLFLOW_RUN_ID": ids["rank"]},
    )
    try:
        ids["alive"] = _run(client, exp, alive, None, process_tags(sleeper.pid))
        # a train run of another experiment or another run type never counts
        other = client.create_experiment("elsewhere")
        _run(client, other, new, "FINISHED")
        statuses = store_status(plan, train_runs(TrackingClient(), exp))
        assert statuses[(done, 0)].state == DONE and statuses[(done, 0)].run_id == ids["done"]
        assert statuses[(failed, 0)].state == FAILED and statuses[(failed, 0)].detail == "OOM at step 3"
        assert statuses[(stale, 0)].state == STALE and statuses[(stale, 0)].stale_run_ids == (ids["stale"],)
        assert statuses[(alive, 0)].state == ALIVE and statuses[(alive, 0)].run_id == ids["alive"]
        assert statuses[(elsewhere, 0)].state == ELSEWHERE and "node-17" in statuses[(elsewhere, 0)].detail
        assert statuses[(killed, 0)].state == NEW
        assert statuses[(new, 0)].state == NEW
        assert statuses[(rank, 0)].state == ALIVE and statuses[(rank, 0)].run_id == ids["rank"]

        entries = reconcile(plan, statuses, retry_failed=False)
        actions = {e.config: e.action for e in entries}
        assert [actions[c] for c in plan.configs] == ["skip", "skip", "run", "wait", "skip", "run", "run", "wait"]
        assert plan_counts(entries, plan) == {
            "configs": 8,
            "to_run": 3,
            "already_done": 1,
            "failed_earlier": 1,
            "in_progress": 3,
            "skipped_invalid": 0,
        }
        retried = {e.config: e.action for e in reconcile(plan, statuses, retry_failed=True)}
        assert retried[failed] == "run"
        table = plan_table(entries, plan)
        assert f"already done (run {ids['done']})" in table
        assert "failed earlier, not retried (use --retry-failed): OOM at step 3" in table
    finally:
        for proc in (sleeper, orphan):
            proc.kill()
            proc.wait()
    # once their processes are gone, the same RUNNING runs are stale
    after = store_status(plan, train_runs(TrackingClient(), exp))
    assert after[(alive, 0)].state == STALE and after[(rank, 0)].state == STALE
