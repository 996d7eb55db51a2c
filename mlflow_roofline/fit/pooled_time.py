"""The single-device time of a GPU no run measured: the roofline in time, pooled over the measured GPUs.

Without it, a GPU no run measured is timed from one GPU, the reference (the measured one with the most
runs): its time law times the ratio of the two GPUs' roofline seconds per FLOP
(:func:`serve.hardware_routing.unmeasured_time_shift`). That ratio takes every second of the step to scale
with peak FLOP/s or bandwidth, so a GPU with eight times the tensor peak is predicted eight times as fast,
although the host's share of a step, the kernel launches and the narrow matrices do not speed up with the
peak; and the reference's own time law does not see a job's kind (a decoder's eager attention, LoRA).

Pooled, the costs of the datasheet-pooled energy roofline (:mod:`fit.forms.hardware_roofline`) add up to
seconds instead of joules: FLOPs at the GPU's tensor and vector peaks, bytes at its bandwidth, and the costs
per token, step and layer-step that no datasheet figure speeds up, times a factor per kind measured at both
levels, with coefficients shared by every GPU, fitted on the measured GPUs' single-device runs
(:class:`~law.roofline_efficiency.HardwareRooflineTimeLaw`). A GPU no run measured is then its datasheet row.

Both are scored by leave one GPU out on the single-device runs (each GPU's seconds predicted by the pooled
law fitted on the other GPUs, and by the reference among the others scaled by the roofline, as served):
``time_loho_mape_pooled`` and ``time_loho_mape_scaled``. The pooled law times a GPU no run measured wherever
it can be fitted, whatever the two scores of one fit say: chosen on five fleets of different physics (three
simulated generators, a table written blind to the law, the public Zeus table), it was the better of the two
on 23 of their 25 left-out GPUs and on the worst fleet (single-device time MAPE 39 % against 77 %), while a
choice by the fit's own scores picked the scaled time for Zeus's P100 (165 % off, the pooled law 24 %): three
GPUs are too few to choose on (docs/benchmarks.md). It needs at least :data:`MIN_GPUS` GPUs with
:data:`~fit.forms.time_law.MIN_SINGLE_RUNS_TIME_LAW` single-device runs each, all in the hardware table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import HARDWARE_COLUMN
from mlflow_roofline.fit.forms.cv import fold_mape
from mlflow_roofline.fit.forms.hardware_roofline import fit_hardware_roofline_time
from mlflow_roofline.fit.forms.time_law import MIN_SINGLE_RUNS_TIME_LAW
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.law.roofline_efficiency import HardwareRooflineTimeLaw
from mlflow_roofline.serve.hardware_routing import log_seconds_per_flop

MIN_GPUS = 2
"""Fewest measured GPUs the pooled time law is fitted over (one to fit, one left out, at least)."""
POOLED, SCALED = "pooled", "scaled"
"""The two ways of timing a GPU no run measured: the pooled roofline in time, the reference's law scaled."""


@dataclasses.dataclass(frozen=True)
class PooledTime:
    """The pooled time law and how it scored.

    Attributes:
        law: the pooled roofline in time (None where it cannot be fitted: a GPU no run measured is then timed
            from the reference).
        loho: leave-one-GPU-out MAPE (%) of single-device time, of ``pooled`` and of ``scaled`` (empty where
            the runs cannot score them).
        note: why there is no pooled time law ("" where there is one).
    """

    law: HardwareRooflineTimeLaw | None
    loho: dict[str, float]
    note: str = ""


def _singles(data: pd.DataFrame) -> pd.DataFrame:
    """The single-device runs of ``data`` with a time, of GPUs with enough of them."""
    singles = data[(data["strategy"].astype(str) == "single") & np.isfinite(data["log_t"].to_numpy(dtype=float))]
    counts = singles[HARDWARE_COLUMN].astype(str).value_counts()
    enough = counts[counts >= MIN_SINGLE_RUNS_TIME_LAW].index
    return singles[singles[HARDWARE_COLUMN].astype(str).isin(enough)].reset_index(drop=True)


def scaled_log_time(reference: HardwareFit, rows: pd.DataFrame, start: dict[str, float]) -> np.ndarray:
    """Log seconds of single-device ``rows`` (pooled features, their covariates per row) from ``reference``'s
    time law scaled by the roofline from its covariates ``start``, as a GPU no run measured is served without a
    pooled time law (:func:`serve.hardware_routing.unmeasured_time_shift`)."""
    columns = {c: rows[c].to_numpy() for c in rows.columns}
    intensity = np.exp(columns["log_C"] - columns["log_M"])
    target = {name: rows[name].to_numpy(dtype=float) for name in ("log_peak", "log_ridge")}
    shift = log_seconds_per_flop(target, intensity) - log_seconds_per_flop(start, intensity)
    return np.asarray(reference.law.time_law.mean(columns), dtype=float) + shift


def fit_pooled_time(
    data: pd.DataFrame, fits: Sequence[HardwareFit], covariates: dict[str, dict[str, float]]
) -> PooledTime:
    """The pooled time law over ``data`` (:func:`fit.pooled.pooled_data` with every GPU's covariates), scored
    against the reference's law scaled (``fits``: the GPUs' own fits, most runs first; ``covariates``: each
    GPU's at its law's first precision)."""
    singles = _singles(data)
    gpus = list(dict.fromkeys(singles[HARDWARE_COLUMN].astype(str)))
    if len(gpus) < MIN_GPUS:
        return PooledTime(
            None, {}, f"fewer than {MIN_GPUS} GPUs with {MIN_SINGLE_RUNS_TIME_LAW} single-device runs each"
        )
    folds = [np.flatnonzero((singles[HARDWARE_COLUMN].astype(str) == gpu).to_numpy()) for gpu in gpus]
    actual = singles["log_t"].to_numpy(dtype=float)
    pooled, scaled = np.empty(len(singles)), np.empty(len(singles))
    for gpu, test in zip(gpus, folds):
        train = singles.drop(index=test)
        rows = singles.iloc[test]
        pooled[test] = fit_hardware_roofline_time(train).law.mean({c: rows[c].to_numpy() for c in rows.columns})
        reference = next(f for f in fits if f.hardware != gpu)
        scaled[test] = scaled_log_time(reference, rows, covariates[reference.hardware])
    loho = {POOLED: fold_mape(actual, pooled, folds)[0], SCALED: fold_mape(actual, scaled, folds)[0]}
    law = fit_hardware_roofline_time(singles).law
    assert isinstance(law, HardwareRooflineTimeLaw)
    return PooledTime(law, loho)
