"""Each run's compute precision, and the runs whose GPU has no peak FLOP/s at it.

A pooled law takes every run's hardware covariates (:meth:`core.gpu_datasheets.HardwareSpec.covariates`)
at the run's ``precision``, and the served model answers a request at its own. A run whose GPU's row
in the hardware table gives no peak at the run's precision (a V100 has no bf16 tensor mode) says
something the table calls impossible; the fit leaves it out, counted under the reason
``with precision <p> that <GPU> has no peak for in the hardware table`` beside the pull's other
reasons (:class:`fit.runs.run_data.RunData`), never silently. A GPU the table does not know keeps
every run: nothing says its precision is wrong.

A GPU's runs at precisions of different peaks (fp32 and bf16 on an A100: 16x) are fitted as one law
whose FLOPs are scaled to one peak (:func:`flops_scale`), so that the law sees the precision.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pandas as pd

from mlflow_roofline.core import job_table
from mlflow_roofline.core.gpu_datasheets import HardwareTable
from mlflow_roofline.core.schema import PRECISION, PRECISIONS
from mlflow_roofline.fit.runs.run_data import RunData
from mlflow_roofline.law.fitted import precisions_of

DEFAULT_PRECISION = str(job_table.column(PRECISION).default)
"""A run without the param (a frame built elsewhere) is the job table's default."""


def run_precisions(frame: pd.DataFrame) -> np.ndarray:
    """The ``precision`` of each run of ``frame`` (text), the job table's default where absent or missing."""
    if PRECISION not in frame:
        return np.full(len(frame), DEFAULT_PRECISION, dtype=object)
    values = frame[PRECISION].to_numpy(dtype=object)
    return np.array([DEFAULT_PRECISION if pd.isna(v) else str(v) for v in values], dtype=object)


def unsupported_reason(hardware: str, precision: str, table: HardwareTable) -> str | None:
    """Why a run of ``precision`` on ``hardware`` cannot enter a fit (None where the table allows it)."""
    spec = table.lookup(hardware)
    if spec is None or spec.supports(precision):
        return None
    return f"with precision {precision} that {spec.name} has no peak for in the hardware table"


def drop_unsupported_precisions(run_data: RunData, table: HardwareTable) -> RunData:
    """``run_data`` without the runs :func:`unsupported_reason` refuses, each counted under its reason."""
    frame = run_data.frame
    precisions = run_precisions(frame)
    reasons = [unsupported_reason(str(hw), str(p), table) for hw, p in zip(frame["hardware"].to_numpy(), precisions)]
    bad = np.array([r is not None for r in reasons], dtype=bool)
    if not bad.any():
        return run_data
    dropped = collections.Counter(run_data.dropped)
    dropped.update(r for r in reasons if r is not None)
    kept = frame[~bad].reset_index(drop=True)
    return dataclasses.replace(run_data, frame=kept, dropped=dict(dropped))


def flops_scale(hardware: str, precisions: np.ndarray, table: HardwareTable) -> dict[str, float]:
    """Per precision a one-GPU law of these runs answers, the FLOPs scale (:attr:`law.fitted.FittedLaw.flops_scale`).

    The reference is the precision most runs have (:func:`law.fitted.precisions_of`); a precision answered
    is one of the runs' or one of the same peak (:mod:`serve.precision_routing`). Empty where the table does
    not know ``hardware`` or the runs' precisions share one peak (nothing to scale: the law is as before).
    """
    spec = table.lookup(hardware)
    fitted = precisions_of(precisions)
    if spec is None or not fitted or not all(spec.supports(p) for p in fitted):
        return {}
    peaks = {spec.peak_flops(p) for p in fitted}
    if len(peaks) < 2:
        return {}
    reference = spec.peak_flops(fitted[0])
    answered = [p for p in PRECISIONS if spec.supports(p) and any(spec.same_peak(p, f) for f in fitted)]
    return {p: reference / spec.peak_flops(p) for p in answered}
