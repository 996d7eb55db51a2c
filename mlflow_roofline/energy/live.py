"""The running energy of one window of a meter, opened and closed any number of times.

:class:`LiveEnergy` opens and closes one named window of a meter (the train window, the
``measure`` window, the default window a Trainer callback cuts at every sample) and says at
any moment the joules per device it has measured so far: the closed openings' joules plus
the open one's reading :meth:`~mlflow_roofline.energy.windows.MeterWindows.so_far`. The
system metrics ``system/..._energy_wh`` are these figures, read from the meter already
running; no second reader of the devices is started.

:meth:`LiveEnergy.joules` may be called from another thread: the window's edges and the
reading hold one lock, so a reading is never taken across an edge, and the joules it
gives never exceed what the window reports when it closes (the counters only go up).
"""

from __future__ import annotations

import threading
import time

from mlflow_roofline.energy.base import EnergyMeter
from mlflow_roofline.energy.readings import Measurement
from mlflow_roofline.energy.windows import DEFAULT_WINDOW


class LiveEnergy:
    """Opens and closes window ``name`` of ``meter``; :meth:`joules` is its running total per device.

    Once a reading fails (a failed read, a counter glitch) the total is unknown:
    :meth:`joules` returns None from then on, never a stand-in.
    """

    def __init__(self, meter: EnergyMeter, name: str = DEFAULT_WINDOW) -> None:
        self.meter = meter
        self.name = name
        self.source = meter.source
        self._lock = threading.Lock()
        self._closed_j: dict[str, float] = {}
        self._open = False
        self._failed = False
        self._closed_since_take = False

    @property
    def is_open(self) -> bool:
        """True while the window is open."""
        return self._open

    def begin(self) -> None:
        """Open the window."""
        with self._lock:
            self.meter.begin_window(self.name)
            self._open = True

    def end(self, count: bool = True) -> Measurement:
        """Close the window; its measurement, added to the running total unless ``count`` is False
        (a stretch the job leaves out of its energy, such as the time after its last step: readings
        taken while it was open may have shown some of it)."""
        with self._lock:
            self._open = False
            measurement = self.meter.end_window(self.name)
            if count:
                self._failed = self._failed or not _add(measurement, self._closed_j)
            self._closed_since_take = True
            return measurement

    def close_meter(self) -> None:
        """Close the meter (an open window is dropped, its joules uncounted); readings end here."""
        with self._lock:
            self._open = False
            self.meter.close()

    def joules(self) -> tuple[float, dict[str, float]] | None:
        """``(unix time s, joules per device)`` measured so far; None when a reading failed.

        A failed reading of the open window gives None for this call only (its close says
        whether the window failed); a window that closed failed makes every later call None.
        """
        with self._lock:
            return self._reading()

    def take(self) -> list[tuple[float, dict[str, float]]]:
        """The readings since the last call: :meth:`joules` while the window is open, and once after each close.

        Empty before the window opened, while it stays closed, and when the reading failed.
        """
        with self._lock:
            if not self._open:
                if not self._closed_since_take:
                    return []
                self._closed_since_take = False
            reading = self._reading()
        return [reading] if reading is not None and reading[1] else []

    def _reading(self) -> tuple[float, dict[str, float]] | None:
        """:meth:`joules`, the lock held."""
        if self._failed:
            return None
        total = dict(self._closed_j)
        if self._open and not _add(self.meter.so_far(self.name), total):
            return None
        return time.time(), total


def _add(measurement: Measurement, total: dict[str, float]) -> bool:
    """Add a window's joules per device to ``total``; False (``total`` untouched) when its reading failed.

    A counter that did not advance yet (every device at 0 J) is 0 J, not a failure."""
    per_device = measurement.per_device_j
    if measurement.energy_j is None and not (per_device and not any(per_device.values())):
        return False
    for device, joules in per_device.items():
        total[device] = total.get(device, 0.0) + joules
    return True
