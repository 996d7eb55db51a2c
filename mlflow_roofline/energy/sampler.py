"""A background thread that calls a function at a fixed rate while a window is open.

Used by ``nvml_power`` (power samples to integrate) and ``rapl`` (counter reads that
catch wraparounds in long windows). The thread lives as long as the meter and sleeps
between windows, so opening and closing a window costs a lock and a notify, not a
thread start (the per-step overhead the benchmark checks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mlflow_roofline.energy.readings import ReadError


class PeriodicSampler:
    """Calls ``sample()`` every ``interval_s`` seconds between :meth:`start` and :meth:`stop`.

    ``sample`` runs under the sampler's lock, so after :meth:`stop` returns no sample is
    in flight and the owner may read the state it fills. The first exception a sample
    raises is kept in :attr:`error` (a :class:`ReadError`) and ends sampling until the next start.
    """

    def __init__(self, sample: Callable[[], None], interval_s: float, name: str) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {interval_s!r}")
        self._sample = sample
        self.interval_s = float(interval_s)
        self._name = name
        self._cond = threading.Condition()
        self._active = False
        self._closing = False
        self._generation = 0
        self._thread: threading.Thread | None = None
        self.error: ReadError | None = None

    def start(self) -> None:
        """Start sampling (the first sample comes one interval from now)."""
        with self._cond:
            self.error = None
            self._active = True
            self._generation += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop sampling; returns once no sample is in flight."""
        with self._cond:
            self._active = False
            self._generation += 1
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the thread for good."""
        with self._cond:
            self._active = False
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def _run(self) -> None:
        with self._cond:
            while True:
                while not self._active and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                generation = self._generation
                deadline = time.perf_counter() + self.interval_s
                while self._active and not self._closing and self._generation == generation:
                    remaining = deadline - time.perf_counter()
                    if remaining > 0:
                        self._cond.wait(remaining)
                        continue
                    try:
                        self._sample()
                    except Exception as exc:  # a library's unforeseen failure too: kept, not a dead thread
                        self.error = exc if isinstance(exc, ReadError) else ReadError(f"{type(exc).__name__}: {exc}")
                        self._active = False
                        break
                    deadline += self.interval_s
                    now = time.perf_counter()
                    if deadline <= now:  # fell behind (slow read, busy machine): skip, no burst
                        deadline = now + self.interval_s
