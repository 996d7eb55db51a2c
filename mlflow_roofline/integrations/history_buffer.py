"""A run's history points, gathered in memory and written in one store batch every few seconds.

A training loop logs a point (metrics at a step, perhaps a tag) at every logging step; one
store write per point costs the training a write's CPU time (SQLite, HTTP) at every logging
step. :class:`HistoryBuffer` gathers the points (an append: microseconds) and a thread of its
own writes everything gathered as one ``log_batch`` every :data:`FLUSH_S` seconds, sooner
once :data:`FLUSH_POINTS` metric values wait. Each point keeps the time it was logged at
(its metrics' timestamps) and its step.

Nothing gathered is lost when the job ends: :meth:`HistoryBuffer.close` stops the thread
(it waits on an event, so it stops at once, not at its next tick) and writes the rest from
the caller's thread. Writes happen one at a time, in the order the points were logged (a
later value of a tag is never overwritten by an earlier one). The thread is a daemon: at
interpreter exit it never holds the process up, and an exit hook that calls
:meth:`HistoryBuffer.close` still finds it alive (Python ends daemon threads after its exit
hooks). A write that fails is handed to ``on_error`` once; nothing more is written.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mlflow_roofline.tracking.client import MetricPoint, TrackingClient, now_ms

__all__ = ["FLUSH_POINTS", "FLUSH_S", "HistoryBuffer"]

FLUSH_S = 5.0
"""Seconds between two writes of the gathered points to the store."""
FLUSH_POINTS = 900
"""Metric values gathered that wake the writer before :data:`FLUSH_S` (a store batch holds 1000)."""


@dataclass(frozen=True)
class _Point:
    step: int
    timestamp_ms: int
    metrics: Mapping[str, float]
    tags: Mapping[str, str]
    params: Mapping[str, str]


class HistoryBuffer:
    """Gathers ``run_id``'s points; a daemon thread writes them every ``flush_s`` seconds."""

    def __init__(
        self,
        client: TrackingClient,
        run_id: str,
        on_error: Callable[[BaseException], None],
        flush_s: float = FLUSH_S,
        flush_points: int = FLUSH_POINTS,
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.flush_s = flush_s
        self.flush_points = flush_points
        self.batches_written = 0
        """Writes so far (one per flush that had points; each is one ``log_batch``, more past the store's limits)."""
        self._on_error = on_error
        self._points: collections.deque[_Point] = collections.deque()  # append / popleft are thread-safe
        self._waiting = 0  # metric values gathered since the last write (a hint: read without a lock)
        self._write_lock = threading.RLock()  # re-entrant: a signal handler may interrupt a write on its thread
        self._wake = threading.Event()
        self._closed = False
        self._failed = False
        self._thread: threading.Thread | None = None

    def add(
        self,
        step: int,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> None:
        """Gather metrics at ``step`` (timestamped now), tags and params (each param once: the store
        refuses to change one); after :meth:`close`, write them at once."""
        if self._failed:
            return
        self._points.append(_Point(step, now_ms(), dict(metrics or {}), dict(tags or {}), dict(params or {})))
        if self._closed:
            self.flush()
            return
        self._waiting += len(metrics or ())
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="roofline-history", daemon=True)
            try:
                self._thread.start()
            except RuntimeError:  # the interpreter is shutting down: no new thread; write as points come
                self._closed = True
                self.flush()
        elif self._waiting >= self.flush_points:
            self._wake.set()

    def flush(self) -> None:
        """Write every gathered point now, from the caller's thread (one batch per store limit)."""
        with self._write_lock:
            points: list[_Point] = []
            while self._points:
                points.append(self._points.popleft())
            self._waiting = 0
            if not points or self._failed:
                return
            history = [MetricPoint(k, v, p.step, p.timestamp_ms) for p in points for k, v in p.metrics.items()]
            tags: dict[str, str] = {}
            params: dict[str, str] = {}
            for p in points:
                tags.update(p.tags)  # in logging order: the last value of a tag wins
                params.update(p.params)
            try:
                self.client.log_history(self.run_id, history, tags, params)
            except Exception as exc:
                self._failed = True
                self._points.clear()
                self._on_error(exc)
                return
            self.batches_written += 1

    def close(self) -> None:
        """Stop the writer thread and write what is left; later points are written as they come."""
        self._closed = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.flush_s)
            self._wake.clear()
            if self._closed:
                return  # close() writes the rest from its own thread
            self.flush()
