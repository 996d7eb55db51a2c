"""Measured speedup and hardware efficiency of train runs (docs/schema.md "Speedup").

Speedup compares work per second: ``t = time_s / (batch_size * num_steps)`` is the
seconds per sample of a run, ``S = t1 / t`` and ``eta = S / num_devices``. A ``single``
run has S = 1 and eta = 1 by definition. ``t1``, a parallel run's single-device seconds
per sample, is, in this order (the ``baseline`` column, tag ``roofline.baseline``):

1. ``measured``: the MEDIAN of the finished ``single`` runs with the same
   ``roofline.workload_hash`` (same global batch: strong scaling; runs with different
   step counts still match);
2. ``per_device``: under ddp/fsdp, the median of the ``single`` runs whose batch is the
   parallel run's per-device batch ``batch_size / num_devices``, everything else of the
   workload equal (layers, width, heads, FFN, sequence, precision, hardware): weak
   scaling, where the per-device batch is held fixed and the global batch grows with N;
3. ``time_law``: the single-device time the hardware's time law predicts for the run's
   job (``single_time``, given by the fit), per sample.

``eta_source`` says what eta rests on: ``single``, ``measured`` (a measured single run,
kinds 1 and 2), ``law`` (the time law, kind 3; or the strategy's fitted speedup law,
:func:`fill_from_laws`, where no time law could be fitted) or ``none`` (no baseline yet).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import (
    BASELINE_MEASURED,
    BASELINE_PER_DEVICE,
    BASELINE_TIME_LAW,
    DATA_PARALLEL_STRATEGIES,
    M_TIME_S,
    WORKLOAD_PARAM_NAMES,
)
from mlflow_roofline.law.speedup import SpeedupLaw

ETA_SINGLE = "single"
ETA_MEASURED = "measured"
ETA_LAW = "law"
ETA_NONE = "none"

NO_BASELINE = ""
"""The ``baseline`` of a single run, or of a parallel run none was found for."""

SingleTime = Callable[[pd.DataFrame], np.ndarray]
"""Predicted single-device seconds of each row's whole job (the hardware's time law)."""

PER_DEVICE_KEY: tuple[str, ...] = tuple(p for p in WORKLOAD_PARAM_NAMES if p not in ("batch_size", "device"))
"""What else of the workload a per-device baseline must share (the device follows from the hardware)."""


def seconds_per_sample(frame: pd.DataFrame) -> pd.Series:
    """Seconds per sample of each run: time_s / (batch_size * num_steps)."""
    return frame[M_TIME_S] / (frame["batch_size"] * frame["num_steps"])


def _per_device_baseline(out: pd.DataFrame, singles: pd.Series, wanted: pd.Series) -> pd.Series:
    """Median seconds per sample of the single runs at each ``wanted`` row's per-device batch (NaN where none)."""
    key = [c for c in (*PER_DEVICE_KEY, "hardware") if c in out.columns]
    if len(key) < len(PER_DEVICE_KEY) or not wanted.any():
        return pd.Series(np.nan, index=out.index)
    medians = out[singles].groupby([*key, "batch_size"], dropna=False)["t_per_sample"].median()
    rows = out[wanted]
    lookup = pd.MultiIndex.from_frame(rows[key].assign(batch_size=rows["batch_size"] // rows["num_devices"]))
    found = medians.reindex(lookup).to_numpy()
    return pd.Series(found, index=rows.index).reindex(out.index)


def measure_speedup(frame: pd.DataFrame, single_time: SingleTime | None = None) -> pd.DataFrame:
    """Add ``t_per_sample``, ``t1_per_sample``, ``speedup``, ``eta``, ``eta_source`` and ``baseline`` columns.

    ``baseline`` is ``measured``, ``per_device`` or ``time_law`` for a parallel run (see the
    module docstring), empty for a single run and for a parallel run without any (no
    ``single_time`` given and no single run matches): its ``speedup`` and ``eta`` are NaN
    and its ``eta_source`` ``none`` until :func:`fill_from_laws`.
    """
    out = frame.copy()
    out["t_per_sample"] = seconds_per_sample(out)
    singles = out["strategy"] == "single"
    baseline = out.loc[singles, "t_per_sample"].groupby(out.loc[singles, "workload_hash"]).median()
    out["t1_per_sample"] = out["workload_hash"].map(baseline)
    kind = pd.Series(np.where(~singles & out["t1_per_sample"].notna(), BASELINE_MEASURED, NO_BASELINE), out.index)
    weak = (
        ~singles
        & out["t1_per_sample"].isna()
        & out["strategy"].isin(DATA_PARALLEL_STRATEGIES)
        & (out["batch_size"] % out["num_devices"] == 0)
    )
    per_device = _per_device_baseline(out, singles, weak)
    found = weak & per_device.notna()
    out.loc[found, "t1_per_sample"] = per_device[found]
    kind[found] = BASELINE_PER_DEVICE
    missing = ~singles & out["t1_per_sample"].isna()
    if single_time is not None and missing.any():
        rows = out[missing]
        predicted = np.asarray(single_time(rows), dtype=float) / (rows["batch_size"] * rows["num_steps"])
        out.loc[missing, "t1_per_sample"] = predicted
        kind[missing & out["t1_per_sample"].notna()] = BASELINE_TIME_LAW
    out["baseline"] = kind
    out["speedup"] = out["t1_per_sample"] / out["t_per_sample"]
    out.loc[singles, "speedup"] = 1.0
    measured = kind.isin([BASELINE_MEASURED, BASELINE_PER_DEVICE])
    source = np.where(measured, ETA_MEASURED, np.where(kind == BASELINE_TIME_LAW, ETA_LAW, ETA_NONE))
    out["eta_source"] = np.where(singles, ETA_SINGLE, source)
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
