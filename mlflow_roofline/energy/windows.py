"""Window bookkeeping of an energy meter: open and close named, possibly overlapping windows.

:class:`MeterWindows` is the part of :class:`~mlflow_roofline.energy.base.EnergyMeter`
that keeps the open windows: the default one (:meth:`~MeterWindows.begin` /
:meth:`~MeterWindows.end`, opened around every step, so kept in plain attributes, not in
the dict of named windows: a window costs two reads and one :class:`Measurement`) and
the named ones (:meth:`~MeterWindows.begin_window` / :meth:`~MeterWindows.end_window`).
A window's energy (joules) is the difference of the readings at its two ends; the first
window to open starts the meter's session and the last to close ends it. How a reading
is taken and a session run is the meter's (:mod:`mlflow_roofline.energy.base`).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import ClassVar, NoReturn

from mlflow_roofline.energy.readings import Measurement, MeterError, Snapshot, Window, window_measurement


@dataclasses.dataclass(slots=True)
class _Open:
    """An open named window: its rank among opened windows, when it opened (perf_counter and
    Unix seconds), its first snapshot or why none."""

    order: int
    t0: float
    started_at: float
    start: Snapshot | None
    error: str | None


DEFAULT_WINDOW = "window"
"""The name of the window :meth:`MeterWindows.begin` / :meth:`MeterWindows.end` use."""


class MeterWindows(abc.ABC):
    """The open windows of one meter, and the measurement of each as it closes.

    The meter provides ``source``, ``update_period_s`` (seconds between two updates of its
    counter), ``_closed``, ``_sessions`` (whether a session needs starting and stopping),
    ``_warns`` (whether :meth:`_window_warning` says anything) and the methods below
    marked abstract.
    """

    source: ClassVar[str]
    update_period_s: float
    _closed: bool
    _sessions: bool
    _warns: bool

    def __init__(self) -> None:
        self._windows: dict[str, _Open] = {}  # the named windows
        self._open_count = 0  # named windows + the default one
        self._opened = 0  # windows opened so far: orders open_windows
        self._d_t0: float | None = None  # the default window: perf_counter at its begin, None when closed
        self._d_started_at = 0.0
        self._d_start: Snapshot | None = None
        self._d_error: str | None = None
        self._d_order = 0

    @abc.abstractmethod
    def _snapshot(self) -> tuple[Snapshot | None, str | None]:
        """A snapshot now, or why there is none."""

    @abc.abstractmethod
    def _start_session(self) -> None:
        """Start reading: the first window opens."""

    @abc.abstractmethod
    def _stop_session(self) -> None:
        """Stop reading: the last window closed."""

    _attributes: bool = False
    """Whether :meth:`_attribute` changes a measurement (meters of shared GPUs)."""

    def _attribute(self, measurement: Measurement, start: Snapshot, end: Snapshot) -> Measurement:
        """The window's measurement as this job's share of the devices; default: as it is."""
        return measurement

    @abc.abstractmethod
    def _window_warning(self, start: Snapshot, end: Snapshot, time_s: float) -> str | None:
        """A caveat on one window from its two snapshots."""

    @property
    def is_open(self) -> bool:
        """True while a window is open."""
        return self._open_count > 0

    @property
    def open_windows(self) -> list[str]:
        """The names of the open windows, in the order they opened."""
        ranked = [(w.order, name) for name, w in self._windows.items()]
        if self._d_t0 is not None:
            ranked.append((self._d_order, DEFAULT_WINDOW))
        return [name for _, name in sorted(ranked)]

    def begin(self) -> None:
        """Open the default window (one at a time). A failed read is reported by :meth:`end`."""
        if self._d_t0 is not None or self._closed:
            self._refuse_begin(DEFAULT_WINDOW)
        if not self._open_count and self._sessions:
            self._start_session()
        self._open_count += 1
        self._opened += 1
        self._d_order = self._opened
        self._d_start, self._d_error = self._snapshot()
        self._d_started_at = time.time()
        self._d_t0 = _opened_at(self._d_start)

    def end(self) -> Measurement:
        """Close the default window and return its measurement (failures are in ``error``)."""
        t0 = self._d_t0
        if t0 is None:
            raise MeterError(f"{self.source} meter: end() without begin()")
        time_s = time.perf_counter() - t0
        self._d_t0 = None
        return self._finish(time_s, self._d_start, self._d_error, self._d_started_at)

    def begin_window(self, name: str) -> None:
        """Open the window ``name``; others may be open. A failed read is reported by :meth:`end_window`."""
        if name == DEFAULT_WINDOW:
            return self.begin()
        if self._closed or name in self._windows:
            self._refuse_begin(name)
        if not self._open_count and self._sessions:
            self._start_session()
        self._open_count += 1
        self._opened += 1
        start, error = self._snapshot()
        self._windows[name] = _Open(self._opened, _opened_at(start), time.time(), start, error)
        return None

    def end_window(self, name: str) -> Measurement:
        """Close the window ``name`` and return its measurement (failures are in ``error``)."""
        if name == DEFAULT_WINDOW:
            return self.end()
        window = self._windows.pop(name, None)
        if window is None:
            raise MeterError(f"{self.source} meter: end_window({name!r}) without begin_window")
        time_s = time.perf_counter() - window.t0
        return self._finish(time_s, window.start, window.error, window.started_at)

    def so_far(self, name: str = DEFAULT_WINDOW) -> Measurement:
        """What the open window ``name`` has measured until now (joules, seconds), leaving it open.

        One reading, taken and judged as :meth:`end_window` would (failures in ``error``);
        the system metrics read a window this way while it runs.
        """
        if name == DEFAULT_WINDOW:
            t0, start, error, started_at = self._d_t0, self._d_start, self._d_error, self._d_started_at
        else:
            window = self._windows.get(name)
            t0, start, error, started_at = (
                (None, None, None, 0.0)
                if window is None
                else (window.t0, window.start, window.error, window.started_at)
            )
        if t0 is None:
            raise MeterError(f"{self.source} meter: so_far({name!r}) of a window that is not open")
        return self._measure(time.perf_counter() - t0, start, error, started_at)

    @contextlib.contextmanager
    def window(self, name: str = DEFAULT_WINDOW) -> Iterator[Window]:
        """Measure a block: ``with meter.window() as w: ...``; then ``w.measurement``."""
        handle = Window()
        self.begin_window(name)
        try:
            yield handle
        finally:
            handle.measurement = self.end_window(name)

    def _refuse_begin(self, name: str) -> NoReturn:
        if self._closed:
            raise MeterError(f"{self.source} meter is closed")
        what = (
            "a window is already open; end() it first"
            if name == DEFAULT_WINDOW
            else (f"window {name!r} is already open; end_window({name!r}) first")
        )
        raise MeterError(f"{self.source} meter: {what}")

    def _finish(self, time_s: float, start: Snapshot | None, error: str | None, started_at: float) -> Measurement:
        """The measurement of a window that closed ``time_s`` seconds after it opened; ends the session if last."""
        try:
            return self._measure(time_s, start, error, started_at)
        finally:
            self._open_count -= 1
            if not self._open_count and self._sessions:
                self._stop_session()

    def _measure(self, time_s: float, start: Snapshot | None, error: str | None, started_at: float) -> Measurement:
        """The measurement from ``start`` to a reading taken now, ``time_s`` seconds later."""
        if start is None:
            return self._failed(time_s, f"read failed at window start: {error}", started_at)
        end, error = self._snapshot()
        if end is None:
            return self._failed(time_s, str(error), started_at)
        if start.at is not None and end.at is not None:  # sampled power: the span the joules cover
            time_s = end.at - start.at
        warning = self._window_warning(start, end, time_s) if self._warns else None
        measurement = window_measurement(self.source, self.update_period_s, start, end, time_s, started_at, warning)
        return self._attribute(measurement, start, end) if self._attributes else measurement

    def _failed(self, time_s: float, error: str, started_at: float | None = None) -> Measurement:
        return Measurement(None, {}, time_s, self.source, error=error, started_at=started_at)


def _opened_at(start: Snapshot | None) -> float:
    """``perf_counter`` (s) a window opened at: its snapshot's sample time where the meter gives one, else now."""
    return start.at if start is not None and start.at is not None else time.perf_counter()
