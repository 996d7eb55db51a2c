"""One hardware's fit on weak-scaling runs: every run kept, its single-device baseline counted by kind."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.schema import (
    M_N_ETA_FROM_LAW,
    M_N_RUNS,
    M_N_RUNS_BASELINE_MEASURED,
    M_N_RUNS_BASELINE_PER_DEVICE,
    M_N_RUNS_BASELINE_TIME_LAW,
    M_N_RUNS_DROPPED,
)
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.testing.synthetic import generate_synthetic_runs

HARDWARE = "Synthetic GPU"


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore")


def weak_runs(seed: int = 7) -> pd.DataFrame:
    """Runs with the per-device batch fixed: ddp/fsdp global batch N times the single runs'."""
    _, frame = generate_synthetic_runs(12, seed=seed, strategies=("single", "ddp", "fsdp"), weak_scaling=True)
    return frame


def test_a_weak_scaling_store_keeps_every_run_and_fits_every_strategy() -> None:
    frame = weak_runs()
    parallel = frame["strategy"] != "single"
    # No parallel run shares a single run's workload hash: the old rule had no baseline for any.
    assert not set(frame.loc[parallel, "workload_hash"]) & set(frame.loc[~parallel, "workload_hash"])
    fit = fit_hardware(frame, HARDWARE)
    metrics = fit.metrics()
    assert fit.dropped == {} and metrics[M_N_RUNS] == len(frame) and metrics[M_N_RUNS_DROPPED] == 0
    assert metrics[M_N_RUNS_BASELINE_PER_DEVICE] == parallel.sum()
    assert metrics[M_N_RUNS_BASELINE_MEASURED] == 0 and metrics[M_N_RUNS_BASELINE_TIME_LAW] == 0
    assert fit.law.strategies == ["ddp", "fsdp", "single"]
    assert {s: f.law.n_points for s, f in fit.speedup.items() if s != "single"} == {"ddp": 24, "fsdp": 24}
    # The measured speedup against the per-device single run is the true one, up to the time noise.
    np.testing.assert_allclose(fit.frame.loc[parallel, "speedup"], frame.loc[parallel, "speedup_true"], rtol=0.1)
    assert f"{int(parallel.sum())} per_device (single runs at the same per-device batch)" in fit.report()


def test_runs_without_any_single_run_take_the_time_law_and_are_counted() -> None:
    frame = weak_runs()
    # The single runs of three per-device workloads are gone: their parallel runs have no single run.
    singles = frame[frame["strategy"] == "single"]
    gone = set(singles["workload_index"].unique()[:3])
    frame = frame[~((frame["strategy"] == "single") & frame["workload_index"].isin(gone))].reset_index(drop=True)
    orphans = int(((frame["strategy"] != "single") & frame["workload_index"].isin(gone)).sum())
    assert orphans > 0
    fit = fit_hardware(frame, HARDWARE)
    metrics = fit.metrics()
    assert len(fit.frame) == len(frame) and fit.dropped == {}
    assert metrics[M_N_RUNS_BASELINE_TIME_LAW] == orphans == metrics[M_N_ETA_FROM_LAW]
    assert metrics[M_N_RUNS_BASELINE_PER_DEVICE] == (frame["strategy"] != "single").sum() - orphans
    orphan_rows = fit.frame[fit.frame["workload_index"].isin(gone)]
    assert (orphan_rows["baseline"] == "time_law").all() and (orphan_rows["eta_source"] == "law").all()
    # The time law of the single runs (2 % time noise) gives speedups near the true ones.
    np.testing.assert_allclose(orphan_rows["speedup"], orphan_rows["speedup_true"], rtol=0.25)
    # The speedup laws stay on the measured points.
    assert fit.speedup["ddp"].law.n_points == int((fit.frame["baseline"] == "per_device").sum() / 2)
    # drop: only the runs with a measured single run (same global or per-device batch) are kept.
    dropped = fit_hardware(frame, HARDWARE, missing_baseline="drop")
    assert dropped.dropped == {"without a single-device baseline": orphans}
    assert dropped.metrics()[M_N_RUNS_BASELINE_TIME_LAW] == 0


def test_a_strong_scaling_store_is_measured_as_before() -> None:
    """Parallel runs with a single run at their global batch: S against the workload's median single run."""
    _, frame = generate_synthetic_runs(10, seed=3, strategies=("single", "ddp", "tp"))
    fit = fit_hardware(frame, HARDWARE)
    singles = frame[frame["strategy"] == "single"]
    t = frame["time_s"] / (frame["batch_size"] * frame["num_steps"])
    t1 = frame["workload_hash"].map(t[singles.index].groupby(singles["workload_hash"]).median())
    parallel = frame["strategy"] != "single"
    expected = (t1 / t)[parallel]
    np.testing.assert_allclose(fit.frame.loc[parallel, "speedup"], expected, rtol=1e-12)
    assert (fit.frame.loc[parallel, "baseline"] == "measured").all()
    assert fit.metrics()[M_N_RUNS_BASELINE_MEASURED] == parallel.sum()
