"""Speedup laws for a GPU no run measured: the comm-time law pooled over the measured GPUs.

One GPU's comm-time constants do not carry over to another: where its communication hides
behind compute, its effective bandwidth and its overlap trade off, and scaling the
bandwidth alone by the ratio of two interconnects missed a left-out T4 by 22 %. Pooled over
several GPUs whose interconnects differ, the trade-off is pinned down: one law per strategy
with shared ``p``, ``latency_s`` and ``overlap``, and seconds per element moved inversely
proportional to each GPU's interconnect bandwidth (the hardware table's
``interconnect_bytes_per_s``)::

    s_per_element(GPU) = s_per_element * link_reference / link(GPU)

Each strategy's pooled law is scored by leave one GPU out (fitted on the others, predicting
the left-out GPU's measured speedups, MAPE %) against what an unmeasured GPU gets otherwise,
the reference GPU's N-only law, both as served (the pooled law only for an interconnect within
``LINK_REACH`` of the fitted ones, the N-only law beyond); it serves unmeasured GPUs only
where it predicts better. It
needs every measured GPU's interconnect in the table and at least :data:`MIN_GPUS` GPUs with
enough runs of the strategy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.core.gpu_datasheets import HardwareTable
from mlflow_roofline.fit.comm_time_fit import fit_comm_time, fittable, job_of
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.law.speedup import LINK_RANGE, REFERENCE_LINK, SpeedupLaw, on_link, within_reach

MIN_GPUS = 3
"""Fewest measured GPUs a pooled comm-time law is fitted over (two to fit, one left out, at least)."""
LINK_SCALE = "link_scale"


@dataclasses.dataclass(frozen=True)
class PooledSpeedup:
    """The pooled comm-time laws and how they scored.

    Attributes:
        laws: the pooled law of each strategy where it beat the N-only law by leave one GPU out.
        loho: per strategy, the leave-one-GPU-out MAPE of speedup (%) of ``comm_time`` (pooled)
            and of ``n_only`` (the reference's N-only law).
    """

    laws: dict[str, SpeedupLaw]
    loho: dict[str, dict[str, float]]


def _parallel_rows(fit: HardwareFit, strategy: str) -> pd.DataFrame:
    """``fit``'s runs of ``strategy`` with a measured single-device baseline and a usable speedup."""
    frame = fit.frame
    rows = frame[(frame["strategy"] == strategy) & (frame["eta_source"] == "measured") & (frame["num_devices"] > 1)]
    return rows[np.isfinite(rows["speedup"]) & (rows["speedup"] > 0) & np.isfinite(rows["t1_per_sample"])]


def _mape(predicted: np.ndarray, actual: np.ndarray) -> float:
    return float(100.0 * np.mean(np.abs(predicted / actual - 1.0)))


def _scaled(rows_by_gpu: Mapping[str, pd.DataFrame], links: Mapping[str, float], reference: float) -> pd.DataFrame:
    return pd.concat([rows.assign(**{LINK_SCALE: reference / links[gpu]}) for gpu, rows in rows_by_gpu.items()])


def _served(law: SpeedupLaw, n_only: SpeedupLaw, rows: pd.DataFrame, link: float) -> np.ndarray:
    """Speedups of ``rows`` on a GPU with interconnect ``link`` (bytes/s) as the served model gives
    them: the pooled law where the link is within its reach, else the N-only law."""
    n = rows["num_devices"].to_numpy(dtype=float)
    if within_reach(law, link):
        return np.asarray(on_link(law, link)(n, job_of(rows)), dtype=float)
    return np.asarray(n_only(n), dtype=float)


def fit_pooled_speedup(fits: Sequence[HardwareFit], table: HardwareTable, workload_aware: bool = True) -> PooledSpeedup:
    """The pooled comm-time law of every parallel strategy ``fits`` share (see the module docstring);
    none with ``workload_aware=False`` (N-only laws alone)."""
    if not workload_aware:
        return PooledSpeedup({}, {})
    links = {f.hardware: spec.interconnect_bytes_per_s for f in fits if (spec := table.lookup(f.hardware))}
    if len(fits) < MIN_GPUS or any(not links.get(f.hardware) for f in fits):
        return PooledSpeedup({}, {})
    reference = fits[0]
    laws: dict[str, SpeedupLaw] = {}
    loho: dict[str, dict[str, float]] = {}
    strategies = [s for s, law in reference.law.speedup_laws.items() if s != "single"]
    for strategy in strategies:
        rows_by_gpu = {f.hardware: _parallel_rows(f, strategy) for f in fits}
        if any(not fittable(rows) for rows in rows_by_gpu.values()):
            continue
        gpu_links = {gpu: float(links[gpu] or 0.0) for gpu in rows_by_gpu}
        comm_errors, n_only_errors = [], []
        for left_out, rows in rows_by_gpu.items():
            others = {gpu: r for gpu, r in rows_by_gpu.items() if gpu != left_out}
            base = next(f for f in fits if f.hardware != left_out)
            law = _pooled_law(strategy, others, gpu_links, gpu_links[base.hardware])
            n_only = base.law.n_only_speedup_laws.get(strategy) or base.law.speedup_laws[strategy]
            served = _served(law, n_only, rows, gpu_links[left_out])
            comm_errors.append(_mape(served, rows["speedup"].to_numpy(dtype=float)))
            predicted = np.asarray(n_only(rows["num_devices"].to_numpy(dtype=float)), dtype=float)
            n_only_errors.append(_mape(predicted, rows["speedup"].to_numpy(dtype=float)))
        loho[strategy] = {"comm_time": float(np.mean(comm_errors)), "n_only": float(np.mean(n_only_errors))}
        if loho[strategy]["comm_time"] < loho[strategy]["n_only"]:
            own = reference.law.speedup_laws[strategy]
            pooled = _pooled_law(strategy, rows_by_gpu, gpu_links, gpu_links[reference.hardware])
            laws[strategy] = dataclasses.replace(pooled, baseline=own.baseline)
    return PooledSpeedup(laws, loho)


def _pooled_law(
    strategy: str, rows_by_gpu: Mapping[str, pd.DataFrame], links: Mapping[str, float], reference_link: float
) -> SpeedupLaw:
    """One comm-time law over the GPUs of ``rows_by_gpu``, its ``s_per_element`` at ``reference_link``."""
    law = fit_comm_time(strategy, _scaled(rows_by_gpu, links, reference_link), s_scale=LINK_SCALE)
    fitted = [links[gpu] for gpu in rows_by_gpu]
    reach = dict(zip(LINK_RANGE, (min(fitted), max(fitted))))
    return dataclasses.replace(law, reference={**law.reference, REFERENCE_LINK: reference_link, **reach})
