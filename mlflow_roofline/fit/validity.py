"""Which stored energies and times are measurements: the bounds a fit trusts, and why a run fails them.

MLflow's SQL stores cannot hold infinity: a logged ``inf`` comes back as the largest
double (``sys.float_info.max``, about 1.8e308). A stored value at or beyond that bound is
therefore an infinity, not a measurement. Values that no real train run can produce are
refused too:

- ``time_s`` (seconds of the measured window): between :data:`MIN_TIME_S` (1 us: no
  measured training step finishes faster) and :data:`MAX_TIME_S` (about one year);
- ``energy_j`` (joules over the window and all devices), through the average power it
  implies: ``energy_j / time_s / num_devices`` between :data:`MIN_POWER_W` (1 mW) and
  :data:`MAX_POWER_W` (5 kW) per device. The largest accelerator boards draw about
  1.2 kW and a two-socket CPU node under RAPL well under 1 kW, so 5 kW leaves a wide
  margin for measurement scopes that cover a whole node.

Each check returns the reason a run is left out (counted by :mod:`fit.run_data`), or None.
"""

from __future__ import annotations

import math
import sys

from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S

STORED_INFINITY = sys.float_info.max
MIN_TIME_S = 1e-6
MAX_TIME_S = 3.2e7
MIN_POWER_W = 1e-3
MAX_POWER_W = 5000.0


def _number_problem(name: str, value: float) -> str | None:
    """The reason ``value`` of metric ``name`` is no number a fit can use, or None."""
    if math.isinf(value) or (math.isfinite(value) and abs(value) >= STORED_INFINITY):
        return f"with {name} stored as infinity (MLflow keeps inf as the largest double)"
    if not math.isfinite(value) or value <= 0:
        return f"with NaN or non-positive {name}"
    return None


def time_problem(time_s: float) -> str | None:
    """Why ``time_s`` (seconds) is not a measured run time, or None."""
    problem = _number_problem(M_TIME_S, time_s)
    if problem is None and not MIN_TIME_S <= time_s <= MAX_TIME_S:
        problem = f"with {M_TIME_S} outside [{MIN_TIME_S:g}, {MAX_TIME_S:g}] s"
    return problem


def energy_problem(energy_j: float, time_s: float, num_devices: int) -> str | None:
    """Why ``energy_j`` (joules over ``time_s`` seconds on ``num_devices``) is not a measurement, or None."""
    problem = _number_problem(M_ENERGY_J, energy_j)
    if problem is None:
        power = energy_j / time_s / max(num_devices, 1)
        if not MIN_POWER_W <= power <= MAX_POWER_W:
            problem = (
                f"with {M_ENERGY_J} implying an average power outside [{MIN_POWER_W:g}, {MAX_POWER_W:g}] W per device"
            )
    return problem
