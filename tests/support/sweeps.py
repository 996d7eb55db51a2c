"""What the sweep tests share: the CLI, a tiny spec, the runs of an experiment, waiting for a condition."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_RUN_TYPE

CLI = [sys.executable, "-m", "mlflow_roofline.cli"]

BASE = {"num_layers": [1], "hidden_size": [32], "num_heads": [2], "ffn_size": [64], "seq_len": [8], "batch_size": [4]}
"""A one-configuration grid (tiny BERT on CPU) that spec tests change one key at a time."""

TOP = "device: cpu\nnum_heads: 2\nffn_size: 32\nseq_len: 8\nbatch_size: 4\n"
"""The top of a spec YAML sharing :data:`BASE`'s shape, for tests that write grids as text."""


def spec_with(**changes: object) -> dict:
    """A spec mapping of :data:`BASE` with ``changes`` (``grid_<field>`` replaces a grid list)."""
    data: dict = {"device": "cpu", "grid": dict(BASE)}
    for key, value in changes.items():
        if key.startswith("grid_"):
            data["grid"][key[5:]] = value
        else:
            data[key] = value
    return data


def write_spec(path: Path, experiment: str, grid: str, steps: int = 2, **top: object) -> Path:
    """A CPU spec of tiny BERTs (h=2, ff=2d, S=8, B=4, one warm-up step, the estimate meter) over ``grid``."""
    lines = [
        f"experiment: {experiment}",
        "device: cpu",
        "meter: estimate",
        f"num_steps: {steps}",
        "warmup_steps: 1",
        "num_heads: 2",
        "ffn_ratio: 2",
        "seq_len: 8",
        "batch_size: 4",
    ]
    lines += [f"{k}: {v}" for k, v in top.items()]
    path.write_text("\n".join(lines + [f"grid: {grid}", ""]))
    return path


def unsplittable_tp_config():
    """A tiny TP config whose 3 heads cannot split over its 2 ranks: planning skips it, so a test forces it past
    planning to see a train run fail (on ``num_heads``)."""
    from mlflow_roofline.core.config import TrainConfig

    return TrainConfig(
        num_layers=1,
        hidden_size=24,
        num_heads=3,
        ffn_size=48,
        seq_len=8,
        batch_size=4,
        num_steps=2,
        warmup_steps=1,
        strategy="tp",
        num_devices=2,
    )


def runs_of(experiment: str, run_type: str) -> list:
    """The runs of ``run_type`` (``train``, ``sweep``) in ``experiment`` of the current store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`{TAG_RUN_TYPE}` = '{run_type}'", max_results=1000
    )


def log_baselines_measured(spec: Path, experiment: str) -> list[str]:
    """Log the ``single`` baselines the sweep of ``spec`` adds for its multi-device configs as FINISHED
    train runs of ``experiment``, as an earlier sweep leaves them; their run ids.

    The sweep then skips them (resume), where it would first train each one for the spec's steps: a
    test that needs its multi-device job long-lived (to kill it in flight) does not pay for a
    baseline as long. The hashes come from the sweep's own planning, so they cannot drift from it.
    """
    import dataclasses

    from mlflow.tracking import MlflowClient

    from mlflow_roofline.sweep.plan import expand
    from mlflow_roofline.sweep.spec import load_spec
    from mlflow_roofline.train.device import hardware_name

    plan = expand(load_spec(str(spec)), "cpu", hardware_name("cpu"))
    multi = {dataclasses.replace(c, strategy="single", num_devices=1) for c in plan.configs if c.num_devices > 1}
    client = MlflowClient()
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    run_ids = []
    for config in (c for c in plan.configs if c in multi):
        tags = {TAG_RUN_TYPE: "train", TAG_CONFIG_HASH: str(plan.config_hash(config))}
        run_id = client.create_run(experiment_id, run_name=config.run_name, tags=tags).info.run_id
        client.set_terminated(run_id, "FINISHED")
        run_ids.append(run_id)
    assert run_ids, f"{spec} plans no baseline for a multi-device configuration"
    return run_ids


def init_store() -> None:
    """Create the store's tables before a second process opens it (two first opens race in MLflow's migration)."""
    from mlflow.tracking import MlflowClient

    MlflowClient().search_experiments()


HANG_GUARD_S = 400.0
"""Seconds a wait on processes, runs and the watchdog gives up after: a guard against a hang, never a
speed check. What is waited for (imports, training steps, a store write) takes seconds idle and several
times longer on a loaded 2-core machine; a test's own pytest timeout (600 s) stays above it."""


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = HANG_GUARD_S) -> None:
    """Poll ``condition`` every 0.3 s until it holds; fail naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")
