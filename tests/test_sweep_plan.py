"""Plan expansion (pure) and each configuration's status against a real SQLite store."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_RUN_TYPE
from mlflow_roofline.sweep.plan import expand
from mlflow_roofline.sweep.reconcile import plan_counts, plan_table, reconcile
from mlflow_roofline.sweep.spec import parse_spec
from mlflow_roofline.sweep.status import ALIVE, DONE, ELSEWHERE, FAILED, NEW, STALE
from mlflow_roofline.sweep.store import store_status, train_runs
from mlflow_roofline.system.liveness import TAG_HOST, TAG_PID, process_tags

HW = "cpu:test"


def plan_of(grid: object, cuda_devices: int | None = None, device: str = "cpu", **top: object):
    data = {"device": device, "seq_len": 8, "batch_size": 4, "num_heads": 2, "ffn_ratio": 2, **top, "grid": grid}
    spec = parse_spec({k: v for k, v in data.items() if v is not None})  # None: leave the key out
    return expand(spec, device, HW, cuda_devices)


def test_cartesian_product_with_baselines_first_and_single_on_one_device() -> None:
    plan = plan_of(
        {"num_layers": [1, 2], "hidden_size": [16, 32], "strategy": ["ddp", "tp", "single"], "num_devices": [1, 2, 4]}
    )
    # 4 workloads x (single x1 + ddp x2, x4 + tp x2) ; tp x4 impossible (2 heads)
    assert len(plan.configs) == 4 * 4
    singles = [c for c in plan.configs if c.strategy == "single"]
    assert plan.configs[: len(singles)] == tuple(singles)  # baselines first
    assert {c.num_devices for c in singles} == {1}
    assert all(c.num_devices >= 2 for c in plan.configs if c.strategy != "single")
    assert len(set(plan.configs)) == len(plan.configs)
    assert [s.label for s in plan.skipped] == [f"L{L}-d{d}-h2-ff{2 * d}-S8-B4-tp-x4" for L in (1, 2) for d in (16, 32)]
    assert all(s.field == "num_heads" and "4 != 0" in s.reason for s in plan.skipped)


def test_every_workload_gets_its_baseline_even_if_the_grid_omits_single() -> None:
    plan = plan_of({"num_layers": [1], "hidden_size": [16, 32], "strategy": ["fsdp"], "num_devices": [2]})
    assert [(c.hidden_size, c.strategy) for c in plan.configs] == [
        (16, "single"),
        (32, "single"),
        (16, "fsdp"),
        (32, "fsdp"),
    ]
    fsdp = plan.configs[2]
    base = plan.configs[0]
    assert fsdp.workload_hash(HW) == base.workload_hash(HW)  # how the fit finds the baseline
    assert fsdp.config_hash(HW) != base.config_hash(HW)


def test_union_of_grids_has_no_duplicates() -> None:
    plan = plan_of([{"num_layers": [1, 2], "hidden_size": 32}, {"num_layers": 1, "hidden_size": [16, 32]}])
    assert sorted((c.num_layers, c.hidden_size) for c in plan.configs) == [(1, 16), (1, 32), (2, 32)]


def test_impossible_points_are_skipped_with_the_rule() -> None:
    plan = plan_of(
        {
            "num_layers": 1,
            "hidden_size": [30, 32],
            "num_heads": 4,
            "strategy": ["single", "ddp"],
            "num_devices": [4],
            "batch_size": [4, 6],
        }
    )
    reasons = {s.label: s.reason for s in plan.skipped}
    assert "hidden_size: must be divisible by num_heads (30 % 4 != 0)" in reasons["L1-d30-h4-ff60-S8-B4-single-x1"]
    assert reasons["L1-d32-h4-ff64-S8-B6-ddp-x4"].startswith("batch_size: must be divisible by num_devices")
    assert {(c.hidden_size, c.batch_size, c.strategy) for c in plan.configs} == {
        (32, 4, "single"),
        (32, 6, "single"),
        (32, 4, "ddp"),
    }


def test_head_size_and_ffn_ratio_become_counts_or_reasons() -> None:
    plan = plan_of({"num_layers": 1, "hidden_size": [64, 96, 100], "head_size": 32, "ffn_ratio": 2.5}, num_heads=None)
    (config,) = [c for c in plan.configs if c.hidden_size == 64]
    assert (config.num_heads, config.ffn_size) == (2, 160)
    (c96,) = [c for c in plan.configs if c.hidden_size == 96]
    assert (c96.num_heads, c96.ffn_size) == (3, 240)
    (skip,) = plan.skipped
    assert skip.field == "hidden_size" and "head_size" in skip.reason


def test_ffn_ratio_that_does_not_give_an_integer_is_skipped() -> None:
    plan = plan_of({"num_layers": 1, "hidden_size": [32, 34], "ffn_ratio": 1.25})
    assert [c.ffn_size for c in plan.configs] == [40]
    assert plan.skipped[0].field == "ffn_size" and "42.5 is not an integer" in plan.skipped[0].reason


def test_cuda_configs_needing_more_gpus_than_visible_are_skipped() -> None:
    plan = plan_of(
        {"num_layers": 1, "hidden_size": 32, "strategy": ["single", "ddp"], "num_devices": [2, 4]},
        cuda_devices=2,
        device="cuda",
        batch_size=8,
    )
    assert [(c.strategy, c.num_devices, c.device) for c in plan.configs] == [("single", 1, "cuda"), ("ddp", 2, "cuda")]
    assert "needs 4 GPUs, 2 visible" in plan.skipped[0].reason


# ---------------------------------------------------------------- status against the store


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
        statuses = store_status(plan, train_runs(client, exp))
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
    after = store_status(plan, train_runs(client, exp))
    assert after[(alive, 0)].state == STALE and after[(rank, 0)].state == STALE


def test_dry_run_shows_done_and_to_run_from_the_store(tracking_uri: str, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.train.device import hardware_name

    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        "experiment: dry\ndevice: cpu\nnum_heads: 2\nffn_size: 32\nseq_len: 8\nbatch_size: 4\n"
        "strategy: [single, ddp]\nnum_devices: 2\ngrid: {num_layers: [1, 2], hidden_size: 16}\n"
    )
    client = MlflowClient()
    exp = client.create_experiment("dry")
    done = TrainConfig(num_layers=2, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4)
    hw = hardware_name("cpu")
    run = client.create_run(exp, tags={TAG_RUN_TYPE: "train", TAG_CONFIG_HASH: done.config_hash(hw)})
    client.set_terminated(run.info.run_id, "FINISHED")
    proc = subprocess.run(
        [sys.executable, "-m", "mlflow_roofline.cli", "sweep", str(spec), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"L2-d16-h2-ff32-S8-B4-single-x1  already done (run {run.info.run_id})" in proc.stdout
    assert "4 configurations: 3 to run, 1 already done" in proc.stdout
    assert len(client.search_runs([exp])) == 1  # a dry run runs nothing
    assert dataclasses.replace(done, num_layers=1).run_name in proc.stdout


def test_a_running_sweep_run_whose_process_is_gone_is_marked_killed(tracking_uri: str) -> None:
    """What the next sweep does when a sweep and its watchdog were both killed (a whole node or cgroup)."""
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.core.schema import TAG_ERROR
    from mlflow_roofline.sweep.parent_run import mark_stale_sweeps
    from mlflow_roofline.system.liveness import sweep_process_tags

    client = MlflowClient()
    exp = client.create_experiment("roofline-stale-sweeps")
    gone = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    dead_tags = sweep_process_tags(gone.pid)  # recorded while it ran
    gone.communicate(b"")  # then it ends

    def sweep_run(tags: dict[str, str]) -> str:
        return client.create_run(exp, tags={TAG_RUN_TYPE: "sweep", **tags}).info.run_id

    dead, alive, current = sweep_run(dead_tags), sweep_run(sweep_process_tags(os.getpid())), sweep_run({})
    mark_stale_sweeps(client, exp, current)
    assert client.get_run(dead).info.status == "KILLED"
    assert client.get_run(dead).data.tags[TAG_ERROR] == f"its process is gone; marked KILLED by sweep run {current}"
    assert client.get_run(alive).info.status == "RUNNING"
    assert client.get_run(current).info.status == "RUNNING"  # the sweep asking is never its own victim
