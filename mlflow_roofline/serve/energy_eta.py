"""The efficiency the energy law's eta term sees for a workload-aware speedup law (``comm_time``).

Every energy form is ``log E = log W + alpha_eta * log eta`` (plus terms free of eta), with
``W`` the energy at eta = 1 (joules) and, for a comm-time law, ``eta = t1 / (N t_N(t1, t_x))``.
Energy must never fall when a model grows: physically ``E_N = P N t_N``, and ``t_N`` never
falls. But ``W`` (the energy law) and ``t1`` (the time law) are two separate fits; where the
time law's ``t1`` grows faster than ``W^(1/|alpha_eta|)`` with the size and communication
dominates ``t_N`` (a tiny latency-bound tp job), eta rises faster than ``W`` and the served
energy falls. So the eta term is evaluated on the energy law's own clock: the comm-time law
is given the single-device time

    t1_E = t1(ref) * (W / W(ref)) ** beta,      beta = min(1, 1 / |alpha_eta|)

where ``ref`` is the law's reference job (the median job it was fitted on) at the row's
steps, device count and strategy, so ``t1_E = t1`` there. With ``beta = 1`` (constant
single-device power, any ``-1 <= alpha_eta < 0``) ``log E = (1 - |alpha_eta|) log W +
|alpha_eta| log(N t_N) + const``, and with ``beta = 1 / |alpha_eta|`` (a fit past -1)
``log E = |alpha_eta| log(N t_N) + const``: both are non-decreasing in every size wherever
``W`` is (what :mod:`fit.forms.sanity` checks before a law is registered), because ``t_N``
grows with ``t1_E`` and with the bytes moved. An ``alpha_eta >= 0`` (energy not rising with
the wasted device time: unphysical) gets the eta of the reference job, as the N-only laws give
every job one eta. The served ``time_s``, ``speedup`` and ``eta`` columns keep the time law's
``t1``; only the energy's eta term uses ``t1_E``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from mlflow_roofline.core.membership import is_in
from mlflow_roofline.law.comm_time import ParallelJob
from mlflow_roofline.law.fitted import FittedLaw

LogEnergy = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""Log E (log joules) and its prediction interval from the law's features of the rows."""
LogTime = Callable[[Mapping[str, np.ndarray]], np.ndarray]
"""Log seconds one device takes for each job of the sizes given (the served single-device time)."""
Features = Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]
"""The law's features of the jobs of the sizes given (eta 1)."""

REFERENCE_FIELDS: tuple[str, ...] = ("num_layers", "hidden_size", "ffn_size", "seq_len", "batch_size")
"""The sizes a comm-time law's ``reference`` job fixes (the row keeps its own num_steps)."""


def energy_clock_rows(law: FittedLaw, strategy: np.ndarray, use_law: np.ndarray) -> np.ndarray:
    """True for the rows whose eta comes from a workload-aware speedup law (the rows this module serves)."""
    aware = [name for name, speedup_law in law.speedup_laws.items() if speedup_law.workload_aware]
    return use_law & is_in(strategy, aware)


def reference_sizes(law: FittedLaw, sizes: Mapping[str, np.ndarray], strategy: np.ndarray) -> dict[str, np.ndarray]:
    """Each row's sizes with its strategy's reference job in place of the shape (steps and the rest kept)."""
    out = {key: np.array(values, copy=True) for key, values in sizes.items()}  # kind columns may be text
    for key in REFERENCE_FIELDS:
        out[key] = out[key].astype(float)
    for name in dict.fromkeys(strategy):
        mask = strategy == name
        for key in REFERENCE_FIELDS:
            out[key][mask] = law.speedup_laws[name].reference[key]
    return out


def energy_log_eta(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    features: Features,
    log_time: LogTime,
    log_energy: LogEnergy,
) -> np.ndarray:
    """Log of the eta the energy law's eta term sees, per row (see the module docstring).

    Every row must have a workload-aware speedup law (:func:`energy_clock_rows`).

    Args:
        law: the law whose speedup laws hold the reference jobs.
        sizes: the rows' integer columns (``num_layers``, ``hidden_size``, ``ffn_size``,
            ``seq_len``, ``batch_size``, ``num_steps``), one array each.
        strategy, n: each row's strategy and device count.
        features: the law's features of jobs, eta 1.
        log_time: the served single-device log seconds of jobs.
        log_energy: the energy law's log joules of the rows' features.

    Where a size overflows the laws the result is NaN, and the served energy with it.
    """
    own = features(sizes)
    ref_sizes = reference_sizes(law, sizes, strategy)
    ref = features(ref_sizes)
    log_w = log_energy(own)[0]
    log_w_ref = log_energy(ref)[0]
    alpha = log_energy({**own, "log_eta": np.ones(len(n))})[0] - log_w  # every form is linear in log_eta
    rises = alpha < 0.0
    beta = np.where(rises, np.minimum(1.0, 1.0 / np.where(rises, -alpha, 1.0)), 0.0)
    log_t1_e = log_time(ref_sizes) + beta * (log_w - log_w_ref)
    shape = {key: np.where(rises, np.asarray(sizes[key], dtype=float), ref_sizes[key]) for key in REFERENCE_FIELDS}
    with np.errstate(over="ignore", invalid="ignore"):
        job = ParallelJob.of(shape, np.exp(log_t1_e) / np.asarray(sizes["num_steps"], dtype=float))
        return np.log(law.speedup(strategy, n, job) / n)
