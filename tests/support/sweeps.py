"""What the sweep tests share: the CLI, a tiny spec, the runs of an experiment, waiting for a condition."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from mlflow_roofline.core.schema import TAG_RUN_TYPE

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
