"""The physical bounds of a measurement: one table, used by the fit and by ``import``.

A run's ``time_s`` (seconds of the measured window) and ``energy_j`` (joules over the
window and all devices) are measurements only inside these bounds; a value outside them is
a unit mistake, a broken meter or a stored infinity, never a training job. The fit drops
such runs (``fit.runs.run_data`` counts them by reason) and ``import`` refuses such rows (the
message names the field and the bound); both read :data:`PHYSICAL_BOUNDS`.

``energy_j`` is bounded through the average power per device it implies
(``energy_j / time_s / num_devices``, watts), so one bound covers jobs of every length.
"""

from __future__ import annotations

import dataclasses
import sys

from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S

STORED_INFINITY = sys.float_info.max
"""MLflow's SQL stores keep a logged ``inf`` as the largest double: at or beyond it, a value is an infinity."""


@dataclasses.dataclass(frozen=True)
class PhysicalBound:
    """The closed interval ``[low, high]`` (in ``unit``) a measured quantity must lie in.

    Attributes:
        field: the logged metric the bound judges (``time_s``, ``energy_j``).
        quantity: what is compared with the bound (the metric itself, or what it implies).
        unit: the unit of ``low``, ``high`` and the compared value.
        low: the smallest value taken as a measurement.
        high: the largest value taken as a measurement.
        why: why no real train run lies outside.
    """

    field: str
    quantity: str
    unit: str
    low: float
    high: float
    why: str

    @property
    def interval(self) -> str:
        """The bound as text: ``[1e-06, 3.2e+07] s``."""
        return f"[{self.low:g}, {self.high:g}] {self.unit}"

    def holds(self, value: float) -> bool:
        """Whether ``value`` (in :attr:`unit`) lies inside the bound."""
        return self.low <= value <= self.high


TIME_BOUND = PhysicalBound(
    field=M_TIME_S,
    quantity=M_TIME_S,
    unit="s",
    low=1e-6,
    high=3.2e7,
    why="no measured training step takes under 1 us and no fine-tuning job runs a year",
)

POWER_BOUND = PhysicalBound(
    field=M_ENERGY_J,
    quantity="average power",
    unit="W per device",
    low=1e-3,
    high=5000.0,
    why="no device draws over 5 kW (the largest boards draw about 1.2 kW, a CPU node under 1 kW) or under 1 mW",
)

ENERGY_BOUND = PhysicalBound(
    field=M_ENERGY_J,
    quantity="energy per device",
    unit="J per device",
    low=POWER_BOUND.low * TIME_BOUND.low,
    high=POWER_BOUND.high * TIME_BOUND.high,
    why="the power bound over the time bound, for an energy whose window is not known",
)
"""The energy bound where no time is given (the drift check's measured energies): the other two bounds' extremes."""

PHYSICAL_BOUNDS: tuple[PhysicalBound, ...] = (TIME_BOUND, POWER_BOUND)
"""Every bound a measurement must satisfy, checked in this order (the power bound needs a valid time)."""


def average_power_w(energy_j: float, time_s: float, num_devices: int) -> float:
    """Average power per device in watts: ``energy_j`` joules over ``time_s`` seconds on ``num_devices``."""
    return energy_j / time_s / max(num_devices, 1)


def outside_bound(energy_j: float, time_s: float, num_devices: int) -> tuple[PhysicalBound, float] | None:
    """The first bound of :data:`PHYSICAL_BOUNDS` the run breaks, with the value compared (in its unit), or None.

    ``energy_j`` (joules) and ``time_s`` (seconds) must already be finite and positive.
    """
    if not TIME_BOUND.holds(time_s):
        return TIME_BOUND, time_s
    power = average_power_w(energy_j, time_s, num_devices)
    if not POWER_BOUND.holds(power):
        return POWER_BOUND, power
    return None
