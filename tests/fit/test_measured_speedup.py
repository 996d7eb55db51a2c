"""Speedup and efficiency from run times (DESIGN.md), and runs without a baseline."""

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
