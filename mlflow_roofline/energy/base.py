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
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from mlflow_roofline.energy.readings import (  # noqa: F401 - re-exported: the meter interface's types
    SCOPES,
    Measurement,
    MeterError,
    ReadError,
    Reading,
    Snapshot,
    Window,
)


@dataclasses.dataclass
class _Open:
    """An open window: when it opened (perf_counter and Unix seconds), its first snapshot or why none."""

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
    needs a sampler); they raise :class:`ReadError` when a read fails. Every
    :meth:`_cumulative` call holds ``self._lock``; a backend's sampler takes it too.
    """

    source: ClassVar[str]
    scope: ClassVar[str]
    update_period_s: float = 0.0

    #: Set by :func:`mlflow_roofline.energy.make_meter`: why this meter was chosen.
    selection: str = ""

    def __init__(self) -> None:
        self._windows: dict[str, _Open] = {}
        self._closed = False
        self._lock = threading.Lock()
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
        return bool(self._windows)

    @property
    def open_windows(self) -> list[str]:
        """The names of the open windows, in the order they opened."""
        return list(self._windows)

    def begin_window(self, name: str) -> None:
        """Open the window ``name``; others may be open. A failed read is reported by :meth:`end_window`."""
        if self._closed:
            raise MeterError(f"{self.source} meter is closed")
        if name in self._windows:
            what = (
                "a window is already open; end() it first"
                if name == DEFAULT_WINDOW
                else (f"window {name!r} is already open; end_window({name!r}) first")
            )
            raise MeterError(f"{self.source} meter: {what}")
        if not self._windows:
            self._start_session()
        start, error = self._snapshot()
        self._windows[name] = _Open(time.perf_counter(), time.time(), start, error)

    def end_window(self, name: str) -> Measurement:
        """Close the window ``name`` and return its measurement (failures are in ``error``)."""
        window = self._windows.pop(name, None)
        if window is None:
            what = "end() without begin()" if name == DEFAULT_WINDOW else f"end_window({name!r}) without begin_window"
            raise MeterError(f"{self.source} meter: {what}")
        time_s = time.perf_counter() - window.t0
        try:
            if window.start is None:
                return self._failed(time_s, f"read failed at window start: {window.error}", window.started_at)
            end, error = self._snapshot()
            if end is None:
                return self._failed(time_s, str(error), window.started_at)
            per_device = {k: max(end.per_device_j[k] - v, 0.0) for k, v in window.start.per_device_j.items()}
            reading = Reading(per_device, self._window_warning(window.start, end, time_s))
            return self._measurement(reading, time_s, window.started_at)
        finally:
            if not self._windows:
                self._stop_session()

    def begin(self) -> None:
        """Open the default window (one at a time)."""
        self.begin_window(DEFAULT_WINDOW)

    def end(self) -> Measurement:
        """Close the default window and return its measurement."""
        return self.end_window(DEFAULT_WINDOW)

    @contextlib.contextmanager
    def window(self, name: str = DEFAULT_WINDOW) -> Iterator[Window]:
        """Measure a block: ``with meter.window() as w: ...``; then ``w.measurement``."""
        handle = Window()
        self.begin_window(name)
        try:
            yield handle
        finally:
            handle.measurement = self.end_window(name)

    # -- the power timeline ------------------------------------------------------------
    def enable_timeline(self, interval_s: float) -> None:
        """Record a reading every ``interval_s`` seconds while a session is open (see :meth:`power_timeline`)."""
        from mlflow_roofline.energy.sampler import PeriodicSampler

        if self._timeline_sampler is None:
            self._timeline_sampler = PeriodicSampler(
                self._timeline_sample, interval_s, f"roofline-{self.source}-timeline"
            )

    def power_timeline(self) -> list[tuple[float, float]]:
        """``(unix time s, watts)`` of the last session: the mean power between two readings, at the later one.

        Readings closer than half the timeline interval to the one before are merged.

        Empty unless :meth:`enable_timeline` was called (sampled backends may keep their own samples).
        """
        with self._lock:
            points = list(self._timeline)
        min_dt = self._timeline_sampler.interval_s / 2 if self._timeline_sampler is not None else 0.0
        kept: list[tuple[float, float]] = []
        for point in points:  # window-edge readings close to a periodic one would give a noisy power
            if not kept or point[0] - kept[-1][0] >= min_dt:
                kept.append(point)
        if len(points) > 1 and kept[-1] is not points[-1]:
            kept[-1] = points[-1]  # end on the last reading, so the timeline spans the whole session
        return [(t1, (j1 - j0) / (t1 - t0)) for (t0, j0), (t1, j1) in itertools.pairwise(kept) if t1 > t0]

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
        """A snapshot now, or why there is none."""
        if self._session_error is not None:
            return None, self._session_error
        try:
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
        if self._windows:
            self._windows.clear()
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

    # -- helpers -----------------------------------------------------------------------
    def _failed(self, time_s: float, error: str, started_at: float | None = None) -> Measurement:
        return Measurement(None, {}, time_s, self.source, error=error, started_at=started_at)

    def _measurement(self, reading: Reading, time_s: float, started_at: float | None = None) -> Measurement:
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
                started_at=started_at,
            )
        stalled = sorted(k for k, v in reading.per_device_j.items() if v <= 0.0)
        if stalled:
            warnings.append(f"counter of {', '.join(stalled)} did not advance")
        return Measurement(
            total,
            dict(reading.per_device_j),
            time_s,
            self.source,
            warning="; ".join(warnings) or None,
            started_at=started_at,
        )
