"""Measured speedup and hardware efficiency of train runs (DESIGN.md "Speedup").

Speedup compares work per second: ``t = time_s / (batch_size * num_steps)`` is the
seconds per sample of a run, ``t1`` the MEDIAN seconds per sample of the finished
``single`` runs with the same ``roofline.workload_hash`` (so runs with different step
counts still match), ``S = t1 / t`` and ``eta = S / num_devices``. A ``single`` run
has S = 1 and eta = 1 by definition.

A parallel run whose workload has no single-device run gets its speedup from the
strategy's fitted speedup law (:func:`fill_from_laws`), flagged ``eta_source = "law"``;
those runs enter the energy fit but never the speedup-law fit. Where the strategy has
no law either (no measured speedup at all), the run is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import M_TIME_S
from mlflow_roofline.law.speedup import SpeedupLaw

ETA_SINGLE = "single"
ETA_MEASURED = "measured"
ETA_LAW = "law"
ETA_NONE = "none"


def seconds_per_sample(frame: pd.DataFrame) -> pd.Series:
    """Seconds per sample of each run: time_s / (batch_size * num_steps)."""
    return frame[M_TIME_S] / (frame["batch_size"] * frame["num_steps"])


def measure_speedup(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``t_per_sample``, ``t1_per_sample``, ``speedup``, ``eta`` and ``eta_source`` columns.

    ``eta_source`` is ``single``, ``measured`` (against the workload's median single run)
    or ``none`` (no baseline: ``speedup`` and ``eta`` are NaN until :func:`fill_from_laws`).
    """
    out = frame.copy()
    out["t_per_sample"] = seconds_per_sample(out)
    singles = out["strategy"] == "single"
    baseline = out.loc[singles, "t_per_sample"].groupby(out.loc[singles, "workload_hash"]).median()
    out["t1_per_sample"] = out["workload_hash"].map(baseline)
    out["speedup"] = out["t1_per_sample"] / out["t_per_sample"]
    out.loc[singles, "speedup"] = 1.0
    out["eta_source"] = np.where(singles, ETA_SINGLE, np.where(out["speedup"].notna(), ETA_MEASURED, ETA_NONE))
    out["eta"] = out["speedup"] / out["num_devices"]
    return out


def fill_from_laws(frame: pd.DataFrame, laws: Mapping[str, SpeedupLaw]) -> tuple[pd.DataFrame, int]:
    """Give runs without a baseline the speedup of their strategy's law (``eta_source = law``).

    Returns:
        the frame without the runs no law covers, and how many were dropped.
    """
    out = frame.copy()
    missing = out["eta_source"] == ETA_NONE
    has_law = out["strategy"].isin([s for s, law in laws.items() if law.n_points > 0])
    fill = missing & has_law
    for strategy, rows in out[fill].groupby("strategy"):
        out.loc[rows.index, "speedup"] = laws[strategy](rows["num_devices"].to_numpy())
    out.loc[fill, "eta_source"] = ETA_LAW
    out["eta"] = out["speedup"] / out["num_devices"]
    drop = missing & ~has_law
    return out[~drop].copy(), int(drop.sum())
