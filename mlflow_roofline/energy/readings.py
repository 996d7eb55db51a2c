"""What meters return: :class:`Measurement` of a window, the errors, and the readings backends produce.

Imports only core; never mlflow.
"""

from __future__ import annotations

import dataclasses

from mlflow_roofline.core.errors import RooflineError

SCOPES: tuple[str, ...] = ("device", "node", "process")
"""What a meter's joules cover: the GPUs of this process, the whole machine, or this
process tree. A ``node`` reading must be reported by one process per node only."""


class MeterError(RooflineError):
    """A meter that cannot be built or used here (unknown, unavailable, misused)."""


class ReadError(Exception):
    """A counter read failed; the window it belongs to reports it as ``error``."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The result of one measurement window.

    Attributes:
        energy_j: total energy over the window in joules; ``None`` when it could not be
            measured (then ``error`` says why). Never a stand-in zero.
        per_device_j: joules per measured device (``cuda:0``, ``package-0``, ``cpu``...).
        time_s: wall time of the window in seconds (``time.perf_counter``).
        source: the meter that measured it (``nvml``, ``nvml_power``, ``rapl``, ``estimate``).
        error: why ``energy_j`` is ``None``; ``None`` when the reading is good.
        warning: a caveat on a good reading (too short a window, a stalled device...).
        started_at: when the window opened, Unix time in seconds (``time.time``).
    """

    energy_j: float | None
    per_device_j: dict[str, float]
    time_s: float
    source: str
    error: str | None = None
    warning: str | None = None
    started_at: float | None = None

    @property
    def ok(self) -> bool:
        """True when ``energy_j`` holds a reading."""
        return self.energy_j is not None

    @property
    def avg_power_w(self) -> float | None:
        """Average power over the window in watts (``energy_j / time_s``), if measured."""
        if self.energy_j is None or self.time_s <= 0:
            return None
        return self.energy_j / self.time_s


@dataclasses.dataclass(frozen=True)
class Reading:
    """What a window's two snapshots give: joules per device over the window and a caveat."""

    per_device_j: dict[str, float]
    warning: str | None = None


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A cumulative reading: joules per device since an origin the backend chooses.

    Attributes:
        per_device_j: cumulative joules per device (only differences of two snapshots mean anything).
        samples: samples the backend had taken when the snapshot was made (sampled meters).
    """

    per_device_j: dict[str, float]
    samples: int = 0


@dataclasses.dataclass
class Window:
    """Handle yielded by :meth:`EnergyMeter.window`; ``measurement`` is set after the block."""

    measurement: Measurement | None = None
