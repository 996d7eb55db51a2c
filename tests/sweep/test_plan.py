"""Plan expansion (pure): products, baselines, skipped points, progress over large grids."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.sweep.plan import PROGRESS_EVERY, expand, grid_points
from mlflow_roofline.sweep.spec import parse_spec

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
    assert [s.label for s in plan.skipped] == [f"tp-x4-L{L}-d{d}-h2-ff{2 * d}-S8-B4" for L in (1, 2) for d in (16, 32)]
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
    assert "hidden_size: must be divisible by num_heads (30 % 4 != 0)" in reasons["single-x1-L1-d30-h4-ff60-S8-B4"]
    assert reasons["ddp-x4-L1-d32-h4-ff64-S8-B6"].startswith("batch_size: must be divisible by num_devices")
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


def test_planning_reports_progress_over_every_grid_point() -> None:
    spec = parse_spec(
        {
            "device": "cpu",
            "num_heads": 2,
            "ffn_ratio": 2,
            "seq_len": 8,
            "batch_size": 4,
            "grid": {
                "num_layers": list(range(1, 51)),
                "hidden_size": list(range(2, 102, 2)),
                "strategy": ["single", "ddp"],
                "num_devices": [1, 2],
            },
        }
    )
    size = grid_points(spec)
    assert size == 50 * 50 * 2 * 2
    calls: list[int] = []
    plan = expand(spec, "cpu", None, progress=calls.append)
    assert sum(calls) == size and len(calls) == -(-size // PROGRESS_EVERY)
    assert len(plan.configs) == 2 * 50 * 50  # single x1 and ddp x2 per workload
    with pytest.raises(ConfigError, match="has 10,000 grid points, more than the limit of 9,999"):
        expand(spec, "cpu", None, max_points=9999)


def test_repeats_times_grid_size_is_bounded_before_expansion() -> None:
    grid = {"num_layers": [1, 2], "hidden_size": [16, 32]}
    data = {"device": "cpu", "seq_len": 8, "batch_size": 4, "num_heads": 2, "ffn_ratio": 2, "grid": grid}
    spec = parse_spec({**data, "repeats": 10**12})
    with pytest.raises(ConfigError, match=r"repeats: 1,000,000,000,000 x 4 grid points = 4,000,000,000,000 runs"):
        expand(spec, "cpu", None)
    assert len(expand(parse_spec({**data, "repeats": 3}), "cpu", None, max_points=12).units) == 12
    with pytest.raises(ConfigError, match="^repeats: "):
        expand(parse_spec({**data, "repeats": 4}), "cpu", None, max_points=12)
