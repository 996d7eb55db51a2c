"""One energy window over a training loop, cut into samples at optimizer-step boundaries.

Each process reads its own meter (a node-wide meter, such as RAPL, on local rank 0 only,
as the train job does). The window is cut every ``sample_steps`` steps and at every
logging step: closing one meter window and opening the next costs two counter reads, so
the cuts lose no energy worth counting and the samples sum to the window. A counter that
did not advance during a short sample (its update period is longer than the sample)
reads as 0 J there and the energy shows up in a later sample: the sum stays exact.

At a logging step every process hands its samples since the last one to the others
(``torch.distributed.all_gather_object``, the collective the train job gathers its
ranks' energy with); the job's sample is the sum of the readers' joules and the longest
time. Every rank sees the same gathered data, so decisions taken from it (stop on a
budget) are the same on every rank without another collective.
"""

from __future__ import annotations

import dataclasses
import time

import torch.distributed as dist

from mlflow_roofline.energy.base import EnergyMeter, Measurement
from mlflow_roofline.energy.live import LiveEnergy


@dataclasses.dataclass(frozen=True)
class Sample:
    """Optimizer steps, joules (None: the reading failed) and seconds of one cut of the window."""

    steps: int
    energy_j: float | None
    time_s: float


@dataclasses.dataclass
class RankReport:
    """What one process hands over at a logging step (``tokens``/``rows``: its totals so far)."""

    rank: int
    read: bool
    samples: list[Sample]
    tokens: int
    rows: int
    error: str | None
    warning: str | None


class RankWindow:
    """This process's meter window: :meth:`open`, :meth:`cut` at step ends, :meth:`close`."""

    def __init__(self, meter: EnergyMeter, reads: bool) -> None:
        self.meter = meter
        self.reads = reads
        self.live = LiveEnergy(meter)  # the window's running total over its cuts: the run's system metrics
        self.pending: list[Sample] = []
        self.error: str | None = None
        self.warnings: list[str] = []
        self._t0 = 0.0

    def open(self) -> None:
        """Open the window (the first sample starts now); also resumes it after a paused cut."""
        if self.reads:
            self.live.begin()
        self._t0 = time.perf_counter()

    def cut(self, steps: int, reopen: bool = True) -> None:
        """End the current sample, which held ``steps`` optimizer steps; start the next one.

        With ``reopen=False`` the window pauses until :meth:`open`: what runs in between
        (gathering, logging, loading the law) is not part of the measured training.
        """
        now = time.perf_counter()
        energy: float | None = 0.0
        if self.reads:
            energy = self._joules(self.live.end())
            if reopen:
                self.live.begin()
        self.pending.append(Sample(steps, energy, now - self._t0))
        self._t0 = now

    def close(self, steps: int) -> None:
        """End the window; a last sample without steps (time after the last step) is dropped."""
        if steps > 0:
            self.cut(steps, reopen=False)
        elif self.reads and self.live.is_open:
            self.live.end(count=False)

    def take(self, rank: int, tokens: int, rows: int) -> RankReport:
        """The samples since the last call, as a report to gather."""
        report = RankReport(rank, self.reads, self.pending, tokens, rows, self.error, "; ".join(self.warnings) or None)
        self.pending = []
        return report

    def _joules(self, m: Measurement) -> float | None:
        if m.warning and m.warning not in self.warnings and "shorter than" not in m.warning:
            self.warnings.append(m.warning)
        if m.energy_j is not None:
            return m.energy_j
        if m.per_device_j and sum(m.per_device_j.values()) == 0.0:
            return 0.0  # a counter that did not advance yet: its joules land in a later sample
        self.error = self.error or m.error or "the meter gave no reading"
        return None


def gather(report: RankReport) -> list[RankReport]:
    """Every process's report, on every process (just ``[report]`` without a process group)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [report]
    reports: list[RankReport | None] = [None] * dist.get_world_size()
    dist.all_gather_object(reports, report)
    return [r for r in reports if r is not None]


def combine(reports: list[RankReport]) -> list[Sample]:
    """The job's samples: joules summed over the processes that read a meter, the longest time."""
    readers = [r for r in reports if r.read] or reports[:1]
    combined = []
    for index, first in enumerate(reports[0].samples):
        joules = [r.samples[index].energy_j for r in readers]
        energy = None if any(j is None for j in joules) else float(sum(joules))  # type: ignore[arg-type]
        seconds = max(r.samples[index].time_s for r in reports)
        combined.append(Sample(first.steps, energy, seconds))
    return combined
