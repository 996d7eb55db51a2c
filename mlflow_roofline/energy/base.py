"""The meter interface: named, possibly overlapping windows that return a :class:`Measurement`.

A meter opens a window with :meth:`EnergyMeter.begin_window` and closes it with
:meth:`EnergyMeter.end_window` (like Zeus's ``ZeusMonitor``): a job can measure its
warm-up, its training and its evaluation separately, or a whole job around them.
:meth:`~EnergyMeter.begin` / :meth:`~EnergyMeter.end` and :meth:`~EnergyMeter.window`
use one default window. Backends only say how to read a cumulative energy per device
(:meth:`EnergyMeter._cumulative`) while a *session* is open (from the first window's
begin to the last window's end); a window's energy is the difference of two readings.
The window logic (:mod:`mlflow_roofline.energy.windows`), and the failure rules, live
once for every backend:

- a read that fails (at the start, mid-window or at the end) gives ``energy_j=None``
  and ``error`` set: never a silent zero;
- a window shorter than the counter's update period is flagged in ``warning``; if the
  counter did not advance at all, ``energy_j`` is ``None`` and ``error`` says why;
- a counter step beyond the device's physical bound is a glitch, never energy: every window
  open across it has ``energy_j=None`` and the glitch as ``error``
  (:mod:`mlflow_roofline.energy.counters`, shared by ``nvml``, ``rapl`` and ``rocm``);
- a library that fails in a way it does not document (a ``RuntimeError``, a NaN) is the
  window's one-line ``error`` naming the meter, never a traceback.
"""

from __future__ import annotations

import abc
import threading
import time
from typing import ClassVar

from mlflow_roofline.energy.readings import (  # noqa: F401 - re-exported: the meter interface's types
    SCOPES,
    Measurement,
    MeterError,
    ReadError,
    Snapshot,
    Window,
    read_failure,
    window_measurement,
)
from mlflow_roofline.energy.sampler import PeriodicSampler
from mlflow_roofline.energy.timeline import mean_power
from mlflow_roofline.energy.windows import (  # noqa: F401 - DEFAULT_WINDOW re-exported
    DEFAULT_WINDOW,
    MeterWindows,
)

MAX_TIMELINE_POINTS = 100_000
"""Points a session's timeline keeps; past it every other point is dropped (the rate halves)."""
BRACKET_S = 0.002
"""Widest gap (s) between the clocks read either side of a timeline reading for it to be dated by their middle."""
BRACKET_TRIES = 3
"""Readings tried for one timeline point before the last is kept, however wide its bracket."""


class EnergyMeter(MeterWindows):
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
    scope: str
    update_period_s: float = 0.0
    sampled: ClassVar[bool] = False

    #: Set by :func:`mlflow_roofline.energy.make_meter`: why this meter was chosen.
    selection: str = ""

    def __init__(self) -> None:
        super().__init__()
        self._closed = False
        self._lock = threading.Lock()
        self._locked_reads = self.sampled
        cls = type(self)
        self._warns = cls._window_warning is not EnergyMeter._window_warning  # else skip the no-op call
        self._sessions = (  # else a session needs no start and no stop
            cls._open_session is not EnergyMeter._open_session or cls._close_session is not EnergyMeter._close_session
        )
        self._session_error: str | None = None
        self._timeline_sampler: PeriodicSampler | None = None
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

    def leave_out(self, pid: int) -> None:
        """Process ``pid`` is this tool's own helper (a watchdog), not the measured job: a meter that
        counts processes leaves it out; one that reads devices has nothing to do (the default)."""

    # -- the power timeline ------------------------------------------------------------
    def enable_timeline(self, interval_s: float) -> None:
        """Record a reading every ``interval_s`` seconds while a session is open (see :meth:`power_timeline`)."""
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
            self._record(*self._bracketed_reading())

    def _bracketed_reading(self) -> tuple[Snapshot, float]:
        """A reading and the Unix time (s) it was taken at: read again (up to :data:`BRACKET_TRIES` times)
        while the clocks read either side of it lie more than :data:`BRACKET_S` apart. A thread preempted
        between the reading and its clock dates the reading late: that interval's power reads low and the
        next one's high (twice one busy core's CPU time, at 20 Hz on a loaded machine)."""
        for _ in range(BRACKET_TRIES):
            before = time.time()
            snapshot = self._cumulative()
            after = time.time()
            if after - before <= BRACKET_S:
                break
        return snapshot, (before + after) / 2.0

    def _record(self, snapshot: Snapshot, at: float | None = None) -> None:
        """Add a reading taken at Unix time ``at`` (s; None: now) to the timeline (caller holds the lock)."""
        if self._timeline_sampler is None:
            return
        self._timeline.append((time.time() if at is None else at, sum(snapshot.per_device_j.values())))
        if len(self._timeline) > MAX_TIMELINE_POINTS:
            del self._timeline[1::2]

    # -- sessions ------------------------------------------------------------------------
    def _start_session(self) -> None:
        self._session_error = None
        if self._timeline_sampler is not None:
            self._timeline = []
        try:
            self._open_session()
        except Exception as exc:  # a ReadError, or a library's unforeseen failure: one line, not a traceback
            self._session_error = read_failure(self.source, exc)
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
                snapshot, at = self._bracketed_reading()
                self._record(snapshot, at)
        except Exception as exc:  # a ReadError, or a library's unforeseen failure: one line, not a traceback
            return None, read_failure(self.source, exc)
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
