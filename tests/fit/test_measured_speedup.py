"""Speedup and efficiency from run times (docs/schema.md), and runs without a baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.fit.runs.measured_speedup import fill_from_laws, measure_speedup
from mlflow_roofline.law.speedup import AMDAHL, SpeedupLaw


def _runs() -> pd.DataFrame:
    # Workload w1: three single runs at 0.10, 0.12 and 0.50 s/sample (median 0.12), with
    # different step counts; a ddp x2 run at 0.08 s/sample -> S = 1.5, eta = 0.75.
    return pd.DataFrame(
        {
            "workload_hash": ["w1", "w1", "w1", "w1", "w2"],
            "strategy": ["single", "single", "single", "ddp", "ddp"],
            "num_devices": [1, 1, 1, 2, 4],
            "batch_size": [8, 8, 8, 8, 16],
            "num_steps": [10, 20, 5, 40, 10],
            "time_s": [0.10 * 80, 0.12 * 160, 0.50 * 40, 0.08 * 320, 3.0],
        }
    )


def test_speedup_is_per_sample_against_the_median_single_run() -> None:
    out = measure_speedup(_runs())
    ddp = out.iloc[3]
    assert ddp["t1_per_sample"] == pytest.approx(0.12)
    assert ddp["speedup"] == pytest.approx(1.5)
    assert ddp["eta"] == pytest.approx(0.75)
    assert ddp["eta_source"] == "measured"
    singles = out[out["strategy"] == "single"]
    assert (singles["speedup"] == 1.0).all() and (singles["eta_source"] == "single").all()


def test_runs_without_baseline_get_the_law_and_a_flag() -> None:
    out = measure_speedup(_runs())
    assert out.iloc[4]["eta_source"] == "none" and np.isnan(out.iloc[4]["speedup"])
    law = SpeedupLaw("ddp", AMDAHL, {"p": 0.9, "c": 0.0}, n_points=1)
    filled, dropped = fill_from_laws(out, {"ddp": law})
    assert dropped == 0
    row = filled.iloc[4]
    assert row["eta_source"] == "law"
    assert row["speedup"] == pytest.approx(1.0 / (0.1 + 0.9 / 4))
    assert row["eta"] == pytest.approx(row["speedup"] / 4)


def test_runs_without_baseline_or_law_are_dropped() -> None:
    filled, dropped = fill_from_laws(measure_speedup(_runs()), {})
    assert dropped == 1 and len(filled) == 4


# -- the single-device baseline: same global batch, same per-device batch, the time law ----------


def _workload(**changes: object) -> dict[str, object]:
    """One run's columns (a BERT-like workload on one GPU); ``changes`` overrides any."""
    base: dict[str, object] = dict(
        num_layers=4,
        hidden_size=256,
        num_heads=4,
        ffn_size=1024,
        seq_len=128,
        batch_size=8,
        num_steps=10,
        strategy="single",
        num_devices=1,
        device="cuda",
        precision="fp16",
        hardware="GPU",
    )
    return {**base, **changes}


def _frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["workload_hash"] = [
        "|".join(str(r[k]) for k in ("num_layers", "hidden_size", "seq_len", "batch_size", "precision", "hardware"))
        for r in rows
    ]
    return frame


def test_weak_scaling_run_is_measured_against_the_single_run_at_its_per_device_batch() -> None:
    # Singles at batch 8: 0.10 and 0.14 s/sample (median 0.12). ddp x4 at global batch 32
    # (8 per device) at 0.04 s/sample: S = 3, eta = 0.75, against the per-device single.
    frame = _frame(
        [
            _workload(time_s=0.10 * 80),
            _workload(time_s=0.14 * 80),
            _workload(batch_size=32, strategy="ddp", num_devices=4, time_s=0.04 * 320),
            _workload(batch_size=16, strategy="fsdp", num_devices=2, time_s=0.08 * 160),
        ]
    )
    out = measure_speedup(frame)
    assert list(out["baseline"]) == ["", "", "per_device", "per_device"]
    assert list(out["eta_source"]) == ["single", "single", "measured", "measured"]
    assert out.iloc[2]["t1_per_sample"] == pytest.approx(0.12)
    assert out.iloc[2]["speedup"] == pytest.approx(3.0) and out.iloc[2]["eta"] == pytest.approx(0.75)
    assert out.iloc[3]["speedup"] == pytest.approx(1.5)


def test_same_global_batch_comes_first_and_nothing_else_of_the_workload_may_differ() -> None:
    frame = _frame(
        [
            _workload(time_s=0.10 * 80),  # batch 8
            _workload(batch_size=16, time_s=0.20 * 160),  # batch 16: the strong baseline of the ddp run
            _workload(batch_size=16, strategy="ddp", num_devices=2, time_s=0.10 * 160),
            _workload(batch_size=16, seq_len=64, strategy="ddp", num_devices=2, time_s=1.0),  # no single at S=64
            _workload(batch_size=16, strategy="tp", num_devices=2, num_steps=20, time_s=0.10 * 320),  # strong
            _workload(batch_size=8, num_layers=2, strategy="tp", num_devices=2, time_s=1.0),  # tp: no per-device
            _workload(batch_size=12, strategy="ddp", num_devices=8, time_s=1.0),  # 12 / 8 is no batch
            _workload(batch_size=16, precision="bf16", strategy="fsdp", num_devices=2, time_s=1.0),
        ]
    )
    out = measure_speedup(frame)
    assert list(out["baseline"]) == ["", "", "measured", "", "measured", "", "", ""]
    assert out.iloc[2]["speedup"] == pytest.approx(2.0)
    assert out.iloc[4]["speedup"] == pytest.approx(2.0)
    assert (out.iloc[[3, 5, 6, 7]]["eta_source"] == "none").all() and out.iloc[[3, 5, 6, 7]]["speedup"].isna().all()


def test_without_a_single_run_the_time_law_gives_the_baseline() -> None:
    frame = _frame(
        [
            _workload(time_s=0.10 * 80),
            _workload(batch_size=16, strategy="ddp", num_devices=2, time_s=0.10 * 160),  # per-device
            _workload(num_layers=8, batch_size=16, strategy="ddp", num_devices=2, num_steps=5, time_s=0.1 * 80),
        ]
    )
    asked: list[int] = []

    def single_time(rows: pd.DataFrame) -> np.ndarray:
        asked.extend(rows.index)
        return 0.5 * rows["batch_size"].to_numpy() * rows["num_steps"].to_numpy()  # 0.5 s/sample on one device

    out = measure_speedup(frame, single_time)
    assert asked == [2]  # only the run no single run matches
    assert list(out["baseline"]) == ["", "per_device", "time_law"]
    assert list(out["eta_source"]) == ["single", "measured", "law"]
    assert out.iloc[2]["t1_per_sample"] == pytest.approx(0.5)
    assert out.iloc[2]["speedup"] == pytest.approx(5.0) and out.iloc[2]["eta"] == pytest.approx(2.5)


def test_a_strong_scaling_store_keeps_its_speedups() -> None:
    """The same workload at the same global batch: measured as before, whatever else the frame holds."""
    out = measure_speedup(_runs())
    assert list(out["baseline"]) == ["", "", "", "measured", ""]
    assert out.iloc[3]["speedup"] == pytest.approx(1.5)
