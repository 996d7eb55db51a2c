"""The meter interface: measurement windows that return a :class:`Measurement`.

A meter opens a window with :meth:`EnergyMeter.begin` and closes it with
:meth:`EnergyMeter.end` (or wraps a block with :meth:`EnergyMeter.window`). Backends only
say how to start and stop one reading; the window logic that turns a reading into a
measurement, and the failure rules, live here once:

- a read that fails (at the start, mid-window or at the end) gives ``energy_j=None``
  and ``error`` set: never a silent zero;
- a window shorter than the counter's update period is flagged in ``warning``; if the
  counter did not advance at all, ``energy_j`` is ``None`` and ``error`` says why.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import ClassVar

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
    """

    energy_j: float | None
    per_device_j: dict[str, float]
    time_s: float
    source: str
    error: str | None = None
    warning: str | None = None

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
    """What a backend returns when it closes a window: joules per device and a caveat."""

    per_device_j: dict[str, float]
    warning: str | None = None


@dataclasses.dataclass
class Window:
    """Handle yielded by :meth:`EnergyMeter.window`; ``measurement`` is set after the block."""

    measurement: Measurement | None = None


class EnergyMeter(abc.ABC):
    """One energy source behind measurement windows; one window open at a time.

    Subclasses set ``source`` and ``scope``, ``update_period_s`` (seconds between two
    updates of the underlying counter) and implement :meth:`_start`, :meth:`_stop` and
    :attr:`hardware`; they raise :class:`ReadError` when a read fails.
    """

    source: ClassVar[str]
    scope: ClassVar[str]
    update_period_s: float = 0.0

    #: Set by :func:`mlflow_roofline.energy.make_meter`: why this meter was chosen.
    selection: str = ""

    def __init__(self) -> None:
        self._t0: float | None = None
        self._start_error: str | None = None
        self._closed = False

    # -- what backends implement -------------------------------------------------------
    @property
    @abc.abstractmethod
    def hardware(self) -> str:
        """The value of tag ``roofline.hardware`` for what this meter measures."""

    @property
    @abc.abstractmethod
    def devices(self) -> list[str]:
        """The keys of ``Measurement.per_device_j`` this meter reports."""

    @abc.abstractmethod
    def _start(self) -> None:
        """Take the opening reading (raise :class:`ReadError` on failure)."""

    @abc.abstractmethod
    def _stop(self, time_s: float) -> Reading:
        """Take the closing reading and return joules per device over the window."""

    def _abort(self) -> None:
        """Drop an open window without reading (stop samplers); default: nothing."""

    def _close(self) -> None:
        """Release the backend's resources (library handles, threads)."""

    # -- the window logic --------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """True while a window is open."""
        return self._t0 is not None

    def begin(self) -> None:
        """Open a window. A failed opening read is reported by :meth:`end`, not raised."""
        if self._closed:
            raise MeterError(f"{self.source} meter is closed")
        if self._t0 is not None:
            raise MeterError(f"{self.source} meter: a window is already open; end() it first")
        self._start_error = None
        try:
            self._start()
        except ReadError as exc:
            self._start_error = str(exc)
        self._t0 = time.perf_counter()

    def end(self) -> Measurement:
        """Close the window and return its measurement (failures are in ``error``)."""
        if self._t0 is None:
            raise MeterError(f"{self.source} meter: end() without begin()")
        time_s = time.perf_counter() - self._t0
        self._t0 = None
        if self._start_error is not None:
            self._abort()
            return self._failed(time_s, f"read failed at window start: {self._start_error}")
        try:
            reading = self._stop(time_s)
        except ReadError as exc:
            return self._failed(time_s, str(exc))
        return self._measurement(reading, time_s)

    @contextlib.contextmanager
    def window(self) -> Iterator[Window]:
        """Measure a block: ``with meter.window() as w: ...``; then ``w.measurement``."""
        handle = Window()
        self.begin()
        try:
            yield handle
        finally:
            handle.measurement = self.end()

    def close(self) -> None:
        """Drop any open window and release the backend. Idempotent."""
        if self._closed:
            return
        if self._t0 is not None:
            self._t0 = None
            self._abort()
        self._closed = True
        self._close()

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} source={self.source} scope={self.scope} hardware={self.hardware!r}>"

    # -- helpers -----------------------------------------------------------------------
    def _failed(self, time_s: float, error: str) -> Measurement:
        return Measurement(None, {}, time_s, self.source, error=error)

    def _measurement(self, reading: Reading, time_s: float) -> Measurement:
        warnings = [reading.warning] if reading.warning else []
        short = self.update_period_s > 0 and time_s < self.update_period_s
        if short:
            warnings.append(
                f"window of {time_s:.3g} s is shorter than the {self.source} counter's "
                f"update period (~{self.update_period_s:g} s): the reading is coarse"
            )
        total = sum(reading.per_device_j.values())
        if not reading.per_device_j or total <= 0.0:
            why = "too short a window" if short else "no update in the window"
            return Measurement(
                None,
                dict(reading.per_device_j),
                time_s,
                self.source,
                error=f"{self.source} counter did not advance during the {time_s:.3g} s window ({why})",
                warning="; ".join(warnings) or None,
            )
        stalled = sorted(k for k, v in reading.per_device_j.items() if v <= 0.0)
        if stalled:
            warnings.append(f"counter of {', '.join(stalled)} did not advance")
        return Measurement(
            total, dict(reading.per_device_j), time_s, self.source, warning="; ".join(warnings) or None
        )
