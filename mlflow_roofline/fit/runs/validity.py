"""Which stored energies and times a fit trusts, and the reason a run fails them.

MLflow's SQL stores cannot hold infinity: a logged ``inf`` comes back as the largest
double (:data:`core.bounds.STORED_INFINITY`), so a stored value at or beyond it is an
infinity, not a measurement. Finite positive values must then lie inside the physical
bounds of :data:`core.bounds.PHYSICAL_BOUNDS` (``time_s`` in seconds; ``energy_j`` in
joules, through the average power per device it implies).

Each check returns the reason a run is left out (counted by :mod:`fit.runs.run_data`), or None.
"""

from __future__ import annotations

import math

from mlflow_roofline.core.bounds import STORED_INFINITY, TIME_BOUND, PhysicalBound, outside_bound
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S


def _number_problem(name: str, value: float) -> str | None:
    """The reason ``value`` of metric ``name`` is no number a fit can use, or None."""
    if math.isinf(value) or (math.isfinite(value) and abs(value) >= STORED_INFINITY):
        return f"with {name} stored as infinity (MLflow keeps inf as the largest double)"
    if not math.isfinite(value) or value <= 0:
        return f"with NaN or non-positive {name}"
    return None


def _outside(bound: PhysicalBound) -> str:
    implied = "" if bound.quantity == bound.field else f" implying an {bound.quantity}"
    return f"with {bound.field}{implied} outside {bound.interval}"


def time_problem(time_s: float) -> str | None:
    """Why ``time_s`` (seconds) is not a measured run time, or None."""
    problem = _number_problem(M_TIME_S, time_s)
    if problem is None and not TIME_BOUND.holds(time_s):
        problem = _outside(TIME_BOUND)
    return problem


def energy_problem(energy_j: float, time_s: float, num_devices: int) -> str | None:
    """Why ``energy_j`` (joules over ``time_s`` seconds on ``num_devices``) is not a measurement, or None.

    ``time_s`` must already have passed :func:`time_problem`.
    """
    problem = _number_problem(M_ENERGY_J, energy_j)
    if problem is None:
        broken = outside_bound(energy_j, time_s, num_devices)
        if broken is not None:
            problem = _outside(broken[0])
    return problem
