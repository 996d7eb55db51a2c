"""Fit the communication-time speedup law (:mod:`law.comm_time`) to measured parallel runs.

The four constants (``p``, ``s_per_element``, ``latency_s``, ``overlap``) are fitted by
bounded least squares on log speedup (relative errors, so a 2x and a 4x speedup weigh
alike), from several starts. The two time constants are solved in units natural to the
data (the median single-device step time over the median volume, and over the median hop
count), so that the solver sees numbers near 1. Bounds: ``0 <= p <= 1``, ``s_per_element
>= 0``, ``latency_s >= 0``, ``0 <= overlap <= OVERLAP_MAX``; inside them, time never falls
below ideal scaling.

Each row needs ``num_devices``, ``speedup``, the job's shape (``num_layers``,
``hidden_size``, ``ffn_size``, ``seq_len``, ``batch_size``) and ``t1_per_sample``, the
single-device seconds per sample of its baseline (:mod:`fit.runs.measured_speedup`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.fit.multistart import best_of_starts
from mlflow_roofline.law.comm_time import (
    COMM_TIME,
    PARAM_NAMES,
    ParallelJob,
    comm_time_speedup,
    comm_volume,
    compute_seconds,
    overlapped_seconds,
)
from mlflow_roofline.law.speedup import SpeedupLaw

OVERLAP_MAX = 0.95
MIN_POINTS = 6
"""Fewest measured parallel runs the law is fitted on (four constants)."""
MIN_SHAPES = 2
"""Fewest distinct model shapes among them: one shape cannot tell volume from a constant."""
SHAPE_COLUMNS: tuple[str, ...] = ("num_layers", "hidden_size", "ffn_size", "seq_len")
STARTS: tuple[tuple[float, float, float, float], ...] = (
    # p, volume-time scale, hop-time scale, overlap
    (1.0, 0.1, 0.0, 0.0),
    (0.95, 0.5, 0.01, 0.3),
    (1.0, 0.02, 0.1, 0.0),
    (0.8, 1.0, 0.0, 0.6),
)


def job_of(rows: pd.DataFrame) -> ParallelJob:
    """The :class:`ParallelJob` of measured runs: their shape and single-device seconds per step."""
    return ParallelJob.of(rows, rows["t1_per_sample"].to_numpy(dtype=float) * rows["batch_size"].to_numpy(dtype=float))


def fittable(rows: pd.DataFrame) -> bool:
    """True when ``rows`` carry enough points and shapes to fit the four constants."""
    if len(rows) < MIN_POINTS or not set(SHAPE_COLUMNS) <= set(rows.columns):
        return False
    return len(rows.drop_duplicates(list(SHAPE_COLUMNS))) >= MIN_SHAPES


def reference_job(rows: pd.DataFrame) -> dict[str, float]:
    """The median job of ``rows``: what the law answers for when asked with N alone."""
    job = job_of(rows)
    return {
        "num_layers": float(np.median(job.num_layers)),
        "hidden_size": float(np.median(job.hidden_size)),
        "ffn_size": float(np.median(job.ffn_size)),
        "seq_len": float(np.median(job.seq_len)),
        "batch_size": float(np.median(job.batch_size)),
        "single_step_s": float(np.median(job.single_step_s)),
    }


def fit_comm_time(strategy: str, rows: pd.DataFrame, s_scale: str | None = None) -> SpeedupLaw:
    """The comm-time law of ``strategy`` fitted on ``rows`` (see the module docstring).

    ``s_scale`` names a column of ``rows`` that multiplies ``s_per_element`` row by row (the
    ratio of a reference interconnect's bandwidth to the row's GPU's, for a law pooled over
    GPUs: :mod:`fit.pooled_speedup`); the law's ``s_per_element`` is then the reference's.

    Raises:
        ValueError: too few points or shapes (:func:`fittable`).
    """
    keep = np.isfinite(rows["speedup"]) & (rows["speedup"] > 0) & np.isfinite(rows["t1_per_sample"])
    rows = rows[keep & (rows["num_devices"] > 1)]
    if not fittable(rows):
        raise ValueError(
            f"{strategy}: the comm_time law needs at least {MIN_POINTS} parallel runs of "
            f"{MIN_SHAPES} model shapes, found {len(rows)}"
        )
    job = job_of(rows)
    scale = np.ones(len(rows)) if s_scale is None else rows[s_scale].to_numpy(dtype=float)
    n = rows["num_devices"].to_numpy(dtype=float)
    log_s = np.log(rows["speedup"].to_numpy(dtype=float))
    volume, hops = comm_volume(strategy, job)
    t1 = float(np.median(job.single_step_s))
    volume_scale = t1 / max(float(np.median(volume)), 1.0)
    hop_scale = t1 / max(float(np.median(hops)), 1.0)

    def params_of(x: np.ndarray) -> dict[str, float]:
        return {"p": x[0], "s_per_element": x[1] * volume_scale, "latency_s": x[2] * hop_scale, "overlap": x[3]}

    t1_rows = job.single_step_s
    per_volume = (n - 1.0) / n * volume * volume_scale * scale  # seconds per unit of x[1]
    per_hop = (n - 1.0) * hops * hop_scale  # seconds per unit of x[2]
    log_t1 = np.log(t1_rows)

    def residuals(x: np.ndarray) -> np.ndarray:
        """log S - log S measured, S = t1 / t_N of :func:`law.comm_time.step_time` (the volumes computed once)."""
        p, volume_x, hop_x, overlap = x
        t_n = overlapped_seconds(compute_seconds(t1_rows, p, n), per_volume * volume_x + per_hop * hop_x, overlap)
        return log_t1 - np.log(t_n) - log_s

    def jacobian(x: np.ndarray) -> np.ndarray:
        """d(log S)/dx = -(dt_N/dx) / t_N, with t_N of :func:`law.comm_time.step_time` in the solver's units."""
        p, volume_x, hop_x, overlap = x
        compute = compute_seconds(t1_rows, p, n)
        comm = per_volume * volume_x + per_hop * hop_x
        t_n = overlapped_seconds(compute, comm, overlap)
        partly_hidden = overlap * comm < compute  # else the compute hides comm's share and t_N = comm
        shown = np.where(partly_hidden, 1.0 - overlap, 1.0)  # share of comm left in t_N
        d_t = np.column_stack(
            [
                np.where(partly_hidden, t1_rows * (1.0 / n - 1.0), 0.0),
                shown * per_volume,
                shown * per_hop,
                np.where(partly_hidden, -comm, 0.0),
            ]
        )
        return -d_t / t_n[:, None]

    lower, upper = [0.0, 0.0, 0.0, 0.0], [1.0, np.inf, np.inf, OVERLAP_MAX]
    best = best_of_starts(residuals, jacobian, [np.array(start) for start in STARTS], (lower, upper))
    params = {name: float(v) for name, v in params_of(best.x).items()}
    speedup = comm_time_speedup(strategy, n, job, {**params, "s_per_element": params["s_per_element"] * scale})
    rmse = float(np.sqrt(np.mean((speedup - np.exp(log_s)) ** 2)))
    return SpeedupLaw(strategy, COMM_TIME, {k: params[k] for k in PARAM_NAMES}, len(rows), rmse, reference_job(rows))
