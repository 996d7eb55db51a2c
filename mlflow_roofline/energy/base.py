"""The meter interface: named, possibly overlapping windows that return a :class:`Measurement`.

A meter opens a window with :meth:`EnergyMeter.begin_window` and closes it with
:meth:`EnergyMeter.end_window` (like Zeus's ``ZeusMonitor``): a job can measure its
warm-up, its training and its evaluation separately, or a whole job around them.
:meth:`~EnergyMeter.begin` / :meth:`~EnergyMeter.end` and :meth:`~EnergyMeter.window`
use one default window. Backends only say how to read a cumulative energy per device
(:meth:`EnergyMeter._cumulative`) while a *session* is open (from the first window's
begin to the last window's end); a window's energy is the difference of two readings.
The window logic, and the failure rules, live here once:

- a read that fails (at the start, mid-window or at the end) gives ``energy_j=None``
  and ``error`` set: never a silent zero;
- a window shorter than the counter's update period is flagged in ``warning``; if the
  counter did not advance at all, ``energy_j`` is ``None`` and ``error`` says why.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar, NoReturn

from mlflow_roofline.energy.readings import (  # noqa: F401 - re-exported: the meter interface's types
    SCOPES,
    Measurement,
    MeterError,
    ReadError,
    Snapshot,
    Window,
    window_measurement,
)
from mlflow_roofline.energy.timeline import mean_power


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
"""The name of the window :meth:`EnergyMeter.begin` / :meth:`EnergyMeter.end` use."""

MAX_TIMELINE_POINTS = 100_000
"""Points a session's timeline keeps; past it every other point is dropped (the rate halves)."""


class EnergyMeter(abc.ABC):
    """One energy source behind named, possibly overlapping measurement windows.

    Subclasses set ``source`` and ``scope``, ``update_period_s`` (seconds between two
    updates of the underlying counter) and implement :meth:`_cumulative` and
    :attr:`hardware` (and :meth:`_open_session` / :meth:`_close_session` when a session
    needs a sampler); they raise :class:`ReadError` when a read fails. A backend whose
    own sampler thread shares state with :meth:`_cumulative` sets ``sampled = True``:
    then every :meth:`_cumulative` call holds ``self._lock`` (as it does for any meter
    while a timeline is recorded) and the sampler takes it too.

    The default window (:meth:`begin` / :meth:`end`, the one a step-level hook opens
    around every step) is kept in plain attributes, not in the dict of named windows,
    and an unsampled meter reads without the lock: a window costs two reads and one
    :class:`Measurement`.
    """

    source: ClassVar[str]
    scope: ClassVar[str]
    update_period_s: float = 0.0
    sampled: ClassVar[bool] = False

    #: Set by :func:`mlflow_roofline.energy.make_meter`: why this meter was chosen.
    selection: str = ""

    def __init__(self) -> None:
        self._windows: dict[str, _Open] = {}  # the named windows
        self._open_count = 0  # named windows + the default one
        self._opened = 0  # windows opened so far: orders open_windows
        self._d_t0: float | None = None  # the default window: perf_counter at its begin, None when closed
        self._d_started_at = 0.0
        self._d_start: Snapshot | None = None
        self._d_error: str | None = None
        self._d_order = 0
        self._closed = False
        self._lock = threading.Lock()
        self._locked_reads = self.sampled
        cls = type(self)
        self._warns = cls._window_warning is not EnergyMeter._window_warning  # else skip the no-op call
        self._sessions = (  # else a session needs no start and no stop
            cls._open_session is not EnergyMeter._open_session or cls._close_session is not EnergyMeter._close_session
        )
        self._session_error: str | None = None
        self._timeline_sampler: Any = None
        self._timeline: list[tuple[float, float]] = []

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
    def _cumulative(self) -> Snapshot:
        """Read the cumulative joules per device now (raise :class:`ReadError` on failure)."""

    def _open_session(self) -> None:
        """Prepare reading (start samplers) before the first window opens; default: nothing."""

    def _close_session(self) -> None:
        """Stop what :meth:`_open_session` started, after the last window closed; default: nothing."""

    def _window_warning(self, start: Snapshot, end: Snapshot, time_s: float) -> str | None:
        """A caveat on one window from its two snapshots (sampled meters); default: none."""
        return None

    def _close(self) -> None:
        """Release the backend's resources (library handles, threads)."""

    # -- windows -------------------------------------------------------------------------
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
        self._d_t0 = time.perf_counter()

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
        self._windows[name] = _Open(self._opened, time.perf_counter(), time.time(), start, error)
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
            if start is None:
                return self._failed(time_s, f"read failed at window start: {error}", started_at)
            end, error = self._snapshot()
            if end is None:
                return self._failed(time_s, str(error), started_at)
            warning = self._window_warning(start, end, time_s) if self._warns else None
            return window_measurement(self.source, self.update_period_s, start, end, time_s, started_at, warning)
        finally:
            self._open_count -= 1
            if not self._open_count and self._sessions:
                self._stop_session()

    # -- the power timeline ------------------------------------------------------------
    def enable_timeline(self, interval_s: float) -> None:
        """Record a reading every ``interval_s`` seconds while a session is open (see :meth:`power_timeline`)."""
        from mlflow_roofline.energy.sampler import PeriodicSampler

        if self._timeline_sampler is None:
            self._timeline_sampler = PeriodicSampler(
                self._timeline_sample, interval_s, f"roofline-{self.source}-timeline"
            )
            self._locked_reads = self._sessions = True

    def power_timeline(self) -> list[tuple[float, float]]:
        """``(unix time s, watts)`` of the last session: the mean power between two readings, at the later one.

        Readings closer than half the timeline interval to the one before are merged.

        Empty unless :meth:`enable_timeline` was called (sampled backends may keep their own samples).
        """
        with self._lock:
            points = list(self._timeline)
        min_dt = self._timeline_sampler.interval_s / 2 if self._timeline_sampler is not None else 0.0
        return mean_power(points, min_dt)

    def _timeline_sample(self) -> None:
        with self._lock:
            self._record(self._cumulative())

    def _record(self, snapshot: Snapshot) -> None:
        """Add a reading to the timeline (caller holds the lock)."""
        if self._timeline_sampler is None:
            return
        self._timeline.append((time.time(), sum(snapshot.per_device_j.values())))
        if len(self._timeline) > MAX_TIMELINE_POINTS:
            del self._timeline[1::2]

    # -- sessions ------------------------------------------------------------------------
    def _start_session(self) -> None:
        self._session_error = None
        if self._timeline_sampler is not None:
            self._timeline = []
        try:
            self._open_session()
        except ReadError as exc:
            self._session_error = str(exc)
        if self._timeline_sampler is not None and self._session_error is None:
            self._timeline_sampler.start()

    def _stop_session(self) -> None:
        if self._timeline_sampler is not None:
            self._timeline_sampler.stop()
        self._close_session()

    def _snapshot(self) -> tuple[Snapshot | None, str | None]:
        """A snapshot now, or why there is none (under the lock when a thread may read too)."""
        if self._session_error is not None:
            return None, self._session_error
        try:
            if not self._locked_reads:
                return self._cumulative(), None
            with self._lock:
                snapshot = self._cumulative()
                self._record(snapshot)
        except ReadError as exc:
            return None, str(exc)
        return snapshot, None

    def close(self) -> None:
        """Drop any open window and release the backend. Idempotent."""
        if self._closed:
            return
        if self._open_count:
            self._windows.clear()
            self._d_t0 = None
            self._open_count = 0
            if self._sessions:
                self._stop_session()
        self._closed = True
        if self._timeline_sampler is not None:
            self._timeline_sampler.close()
        self._close()

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} source={self.source} scope={self.scope} hardware={self.hardware!r}>"

    def _failed(self, time_s: float, error: str, started_at: float | None = None) -> Measurement:
        return Measurement(None, {}, time_s, self.source, error=error, started_at=started_at)
