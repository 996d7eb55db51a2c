"""``estimate``: energy from CPU time, for machines without a readable energy counter.

``energy_j = cpu_seconds * watts_per_core`` where ``cpu_seconds`` is the user + system
CPU time the measured process tree spent in the window. This is a model, not a
measurement, and is always labelled with source ``estimate``.

The default, :data:`DEFAULT_WATTS_PER_CORE` = 6 W per busy core, is the thermal design
power per core of current server CPUs at full load: AMD EPYC 9654 360 W / 96 cores =
3.75 W, Intel Xeon Platinum 8480+ 350 W / 56 cores = 6.25 W; we take the upper one.
It leaves out idle power, DRAM and the rest of the node. Override it with the
``watts_per_core`` argument or the environment variable
``ROOFLINE_ESTIMATE_WATTS_PER_CORE`` (the argument wins).

The process tree is: this process (``time.process_time``, every thread), its children
that have exited and been waited for (``getrusage(RUSAGE_CHILDREN)``: a child's waited-for
descendants roll up into it), and its live descendants (``/proc`` via psutil, with
their own waited-for children). The sum is continuous when a child exits and is reaped,
so nothing is counted twice. Descendants that detach (double fork) are counted only when
this process adopts them as a child subreaper (``measure`` does:
:mod:`mlflow_roofline.system.process_tree`); otherwise they leave the tree. A helper of
this tool's own that the caller names (:meth:`EstimateMeter.leave_out`: the watchdog a
training job's run starts) is not counted, and its CPU time is not read at every edge.
Listing live descendants scans ``/proc`` (about 1 ms), so the list is refreshed at most
every ``rescan_s`` seconds and at every window's end when it is older than that; the CPU
time of known descendants is read at every window edge.
"""

from __future__ import annotations

import os
import resource
import time

import psutil

from mlflow_roofline.core.host import cpu_hardware_name
from mlflow_roofline.energy.base import EnergyMeter, MeterError, ReadError, Snapshot

DEFAULT_WATTS_PER_CORE = 6.0
WATTS_ENV = "ROOFLINE_ESTIMATE_WATTS_PER_CORE"
MAX_WATTS_PER_CORE = 100.0
"""Largest figure taken, watts per busy core: the hungriest parts (8 cores under 280 W) draw about 35."""


def resolve_watts_per_core(watts_per_core: float | str | None = None) -> float:
    """The argument, else ``$ROOFLINE_ESTIMATE_WATTS_PER_CORE``, else the default (watts).

    Raises:
        MeterError: a value that is not a number in (0, :data:`MAX_WATTS_PER_CORE`], naming where it came from.
    """
    origin = "watts_per_core"
    if watts_per_core is None:
        watts_per_core = os.environ.get(WATTS_ENV) or None
        origin = WATTS_ENV
    if watts_per_core is None:
        return DEFAULT_WATTS_PER_CORE
    try:
        value = float(watts_per_core)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 < value <= MAX_WATTS_PER_CORE:
        raise MeterError(
            f"{origin}: must be a positive number of watts per busy core, at most {MAX_WATTS_PER_CORE:g} "
            f"(no CPU core draws more), got {watts_per_core!r}"
        )
    return value


class EstimateMeter(EnergyMeter):
    """Estimated energy of this process tree: CPU seconds x watts per core.

    Args:
        watts_per_core: watts per fully busy core (default: env var, else 6 W).
        include_self: count this process's own CPU time (``measure`` counts only its child).
        include_children: count descendants, live and exited.
        rescan_s: seconds between two scans for new live descendants.
    """

    source = "estimate"
    scope = "process"

    def __init__(
        self,
        watts_per_core: float | str | None = None,
        *,
        include_self: bool = True,
        include_children: bool = True,
        rescan_s: float = 1.0,
    ) -> None:
        super().__init__()
        if not (include_self or include_children):
            raise MeterError("estimate: include_self and include_children are both false; nothing to measure")
        self.watts_per_core = resolve_watts_per_core(watts_per_core)
        self.include_self = include_self
        self.include_children = include_children
        self.rescan_s = rescan_s
        self._me = psutil.Process()
        self._live: dict[int, psutil.Process] = {}
        self._left_out: set[int] = set()
        self._scanned_at = float("-inf")

    @property
    def hardware(self) -> str:
        return cpu_hardware_name()

    @property
    def devices(self) -> list[str]:
        """The one key this meter reports: ``cpu``."""
        return ["cpu"]

    def cpu_seconds(self, rescan: bool = False) -> float:
        """User + system CPU seconds of the process tree so far (see the module doc).

        A due scan for live descendants runs before this process's CPU time is read: its own
        cost (a walk of ``/proc``, milliseconds on a busy machine) then falls before a window
        that this reading opens, and never into it. Read after the scan, it was charged to the
        first sample of every training window (the first scan), about 15-20 mJ on a tiny BERT's
        ~55 mJ steps, which the first forecast extrapolated to the whole job.
        """
        if self.include_children:
            now = time.perf_counter()
            if rescan or now - self._scanned_at >= self.rescan_s:
                self._scanned_at = now
                try:
                    found = self._me.children(recursive=True)
                except psutil.Error as exc:
                    raise ReadError(f"listing the child processes failed: {exc}") from exc
                self._live = {p.pid: self._live.get(p.pid, p) for p in found if p.pid not in self._left_out}
        total = time.process_time() if self.include_self else 0.0
        if not self.include_children:
            return total
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += usage.ru_utime + usage.ru_stime
        if not self._live:
            return total
        for pid, proc in list(self._live.items()):
            try:
                t = proc.cpu_times()
            except psutil.NoSuchProcess:
                del self._live[pid]  # exited: its time is in RUSAGE_CHILDREN once reaped
                continue
            except psutil.Error as exc:
                raise ReadError(f"reading the CPU time of process {pid} failed: {exc}") from exc
            total += t.user + t.system + t.children_user + t.children_system
        return total

    def leave_out(self, pid: int) -> None:
        """Count no more of live descendant ``pid`` (a helper of this tool's own, not the job's)."""
        self._left_out.add(pid)
        self._live.pop(pid, None)

    def _cumulative(self) -> Snapshot:
        """CPU seconds of the process tree so far times watts per core (a timeline of it is CPU utilisation)."""
        return Snapshot({"cpu": self.cpu_seconds() * self.watts_per_core})
