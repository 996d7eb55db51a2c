"""The meters one rank of a training job reads: its main meter and the companions beside it.

- the main meter (the job's ``meter``) measures the ``warmup`` and ``train`` windows
  (named windows inside one ``job`` window, so its power timeline spans both) and
  records the power timeline;
- beside an NVML meter, the other NVML meter cross-checks it (counter against power
  integral) on the same GPUs, when it can run;
- beside a GPU meter, RAPL measures the node's CPU packages and DRAM (one reader per
  node), when it is readable.

A companion that cannot run is not an error of the run: it says why in the rank's
result, and what it would have measured is absent, never zero.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mlflow_roofline.energy import EnergyMeter, Measurement, MeterError, make_meter
from mlflow_roofline.energy.live import LiveEnergy
from mlflow_roofline.energy.select import METER_DEVICE_KIND
from mlflow_roofline.energy.timeline import downsample, sum_aligned
from mlflow_roofline.train.live_energy import LivePublisher

JOB, WARMUP, TRAIN = "job", "warmup", "train"
TIMELINE_INTERVAL_S = 0.1
"""Seconds between two readings of the main meter's power timeline (nvml_power keeps its own samples)."""
MAX_RANK_TIMELINE_POINTS = 2000
"""Points of one rank's timeline sent to rank 0 (a longer one is averaged down)."""

CROSS_CHECK = {"nvml": "nvml_power", "nvml_power": "nvml"}
"""The meter that cross-checks each NVML meter."""


@dataclasses.dataclass
class RankWindows:
    """What one rank measured besides its main train window (joules, Unix seconds, watts)."""

    warmup_j: float | None = None
    warmup_error: str | None = None
    check_source: str | None = None
    check_j: float | None = None
    check_error: str | None = None
    node_read: bool = False
    cpu_j: float | None = None
    dram_j: float | None = None
    node_error: str | None = None
    window_start: float | None = None
    window_end: float | None = None
    timeline: list[list[float]] = dataclasses.field(default_factory=list)


class JobMeters:
    """The main meter and its companions of one rank, opened and closed together.

    Args:
        meter: the job's meter name (``auto``, ``nvml`` ...).
        device: ``cuda`` or ``cpu``.
        gpu_indices: the GPUs this rank drives (NVML meters).
        local_rank: this rank's index on its node (node-wide meters are read by local rank 0).
        options: passed to :func:`~mlflow_roofline.energy.make_meter` (``nvml``, ``rapl_root``).
    """

    def __init__(
        self,
        meter: str,
        device: str,
        gpu_indices: list[int] | None,
        local_rank: int,
        **options: Any,
    ) -> None:
        self.main = make_meter(meter, device=device, gpu_indices=gpu_indices, **options)
        self.reads = self.main.scope != "node" or local_rank == 0
        self.train_window = LiveEnergy(self.main, TRAIN)  # the train window's running total, for the system metrics
        self.publisher: LivePublisher | None = None
        self.check: EnergyMeter | None = None
        self.node: EnergyMeter | None = None
        self.extra = RankWindows()
        if not self.reads:
            return
        self.main.enable_timeline(TIMELINE_INTERVAL_S)
        other = CROSS_CHECK.get(self.main.source)
        if other is not None:
            self.extra.check_source = other
            self.check = _companion(
                other,
                self.extra,
                "check_error",
                device=METER_DEVICE_KIND[other],
                gpu_indices=gpu_indices,
                **options,
            )
        if self.main.scope == "device":
            if local_rank == 0:
                self.extra.node_read = True
                self.node = _companion("rapl", self.extra, "node_error", **options)
        elif self.main.source == "rapl":
            self.extra.node_read = True
        elif self.main.scope == "module":
            self.extra.node_error = (
                f"{self.main.source} meter: a Grace Hopper module's reading covers its CPU and memory; RAPL not added"
            )
        else:
            self.extra.node_error = f"{self.main.source} meter: the node's CPU and DRAM energy is not measured"

    def _meters(self) -> list[EnergyMeter]:
        if not self.reads:
            return []
        return [m for m in (self.main, self.check, self.node) if m is not None]

    def publish_to(self, path: Path, interval_s: float) -> None:
        """Append the train window's running energy to ``path`` (see :mod:`~mlflow_roofline.train.live_energy`)."""
        if self.reads:
            self.publisher = LivePublisher(self.train_window, path, interval_s)

    def step_done(self) -> None:
        """A training step ended: publish the train window's running energy when due."""
        if self.publisher is not None:
            self.publisher.publish()

    def begin(self, name: str) -> None:
        """Open window ``name`` on every meter this rank reads."""
        for meter in self._meters():
            if meter is self.main and name == TRAIN:
                self.train_window.begin()
            else:
                meter.begin_window(name)
        if name == TRAIN and self.publisher is not None:
            self.publisher.publish(force=True)

    def end(self, name: str) -> Measurement | None:
        """Close window ``name`` everywhere; the main meter's measurement (None if this rank reads none)."""
        if not self.reads:
            return None
        main = self.train_window.end() if name == TRAIN else self.main.end_window(name)
        if name == TRAIN and self.publisher is not None:
            self.publisher.publish(force=True)
        check = self.check.end_window(name) if self.check is not None else None
        node = self.node.end_window(name) if self.node is not None else None
        if name == WARMUP:
            self.extra.warmup_j, self.extra.warmup_error = main.energy_j, main.error
        elif name == TRAIN:
            self._record_train(main, check, node)
        return main

    def _record_train(self, main: Measurement, check: Measurement | None, node: Measurement | None) -> None:
        extra = self.extra
        extra.window_start = main.started_at  # Unix seconds; None if the meter did not say
        extra.window_end = None if main.started_at is None else main.started_at + main.time_s
        if check is not None:
            extra.check_j, extra.check_error = (
                check.energy_j,
                check.error and f"{extra.check_source}: {check.error}",
            )
        if self.main.source == "rapl":
            node = main
        if node is not None:
            split_rapl(node, extra)

    def finish(self) -> RankWindows:
        """The companions' figures and the main meter's timeline (averaged down), after the last window."""
        self.extra.timeline = [list(p) for p in downsample(self.main.power_timeline(), MAX_RANK_TIMELINE_POINTS)]
        return self.extra

    def close(self) -> None:
        """Close every meter (open windows are dropped) and the published file."""
        if self.publisher is not None:
            self.publisher.close()
        for meter in (self.main, self.check, self.node):
            if meter is not None:
                meter.close()


def _companion(name: str, extra: RankWindows, error_field: str, **options: Any) -> EnergyMeter | None:
    """Build a companion meter, or record in ``extra`` why it cannot run here."""
    try:
        return make_meter(name, **options)
    except MeterError as exc:
        setattr(extra, error_field, str(exc))
        return None


def split_rapl(measurement: Measurement, extra: RankWindows) -> None:
    """Fill ``extra``'s CPU package and DRAM joules from a RAPL measurement (zones ``package-i``, ``…/dram``)."""
    if measurement.energy_j is None:
        extra.node_error = f"rapl: {measurement.error}"
        return
    zones = measurement.per_device_j
    extra.cpu_j = sum(v for k, v in zones.items() if not k.endswith("/dram"))
    drams = [v for k, v in zones.items() if k.endswith("/dram")]
    if drams:
        extra.dram_j = sum(drams)
    else:
        extra.node_error = "rapl: this CPU exposes no DRAM zone; energy_node_j leaves DRAM out"


MAX_LOGGED_POWER_POINTS = 1000
"""Points of the job's power timeline logged as the ``power_w`` history (a longer one is averaged down)."""


@dataclasses.dataclass
class JobExtras:
    """The job's figures beside ``energy_j``, over every rank (joules, Unix seconds, watts).

    Attributes:
        warmup_energy_j: the warm-up window's joules; None if not measured (no warm-up, or ``warmup_error``).
        energy_cpu_j, energy_dram_j: the nodes' CPU packages and DRAM (RAPL) over the train window.
        energy_node_j: ``energy_j`` plus CPU and DRAM (a GPU meter), or ``energy_j`` itself (RAPL).
        node_error: why the node figures are missing or partial.
        meter_check: the meter that cross-checked ``energy_j`` and its joules, or why none could.
        meter_disagreement: ``|check - energy_j| / energy_j`` when the cross-check ran.
        power_timeline: ``[unix s, watts]`` of the main meters, summed over the ranks that read.
        window_start, window_end: the train window (Unix seconds).
    """

    warmup_energy_j: float | None = None
    warmup_error: str | None = None
    energy_cpu_j: float | None = None
    energy_dram_j: float | None = None
    energy_node_j: float | None = None
    node_error: str | None = None
    meter_check: str | None = None
    meter_disagreement: float | None = None
    power_timeline: list[list[float]] = dataclasses.field(default_factory=list)
    window_start: float | None = None
    window_end: float | None = None


def _sum_or_errors(values: list[tuple[int, float | None, str | None]], prefix: bool) -> tuple[float | None, str | None]:
    """The sum of ``(rank, joules, error)`` readings, or None and their errors joined when one failed."""
    errors = [f"rank {r}: {e}" if prefix else e for r, _, e in values if e]
    if errors:
        return None, "; ".join(errors)
    if not values or any(v is None for _, v, _ in values):
        return None, None
    return sum(v for _, v, _ in values), None  # type: ignore[misc]


def combine(readers: list[tuple[int, RankWindows]], energy_j: float | None, scope: str) -> JobExtras:
    """The job's :class:`JobExtras` from the windows of every rank that read a meter (rank order)."""
    prefix = len(readers) > 1
    out = JobExtras()
    out.warmup_energy_j, out.warmup_error = _sum_or_errors(
        [(r, w.warmup_j, w.warmup_error) for r, w in readers], prefix
    )
    checked = [(r, w) for r, w in readers if w.check_source]
    if checked:
        check_j, check_error = _sum_or_errors([(r, w.check_j, w.check_error) for r, w in checked], prefix)
        source = checked[0][1].check_source
        out.meter_check = check_error or f"{source}: {check_j:.6g} J"
        if check_j is not None and energy_j:
            out.meter_disagreement = abs(check_j - energy_j) / energy_j
    _combine_node(out, readers, energy_j, scope, prefix)
    if readers:
        timelines = [w.timeline for _, w in readers]
        out.power_timeline = [
            list(p) for p in downsample(sum_aligned(timelines[0], timelines[1:]), MAX_LOGGED_POWER_POINTS)
        ]
        starts = [w.window_start for _, w in readers if w.window_start is not None]
        ends = [w.window_end for _, w in readers if w.window_end is not None]
        out.window_start, out.window_end = (
            (min(starts) if starts else None),
            (max(ends) if ends else None),
        )
    return out


def _combine_node(
    out: JobExtras,
    readers: list[tuple[int, RankWindows]],
    energy_j: float | None,
    scope: str,
    prefix: bool,
) -> None:
    node = [(r, w) for r, w in readers if w.node_read]
    if not node:
        out.node_error = next((w.node_error for _, w in readers if w.node_error), None)
        return
    notes = [f"rank {r}: {w.node_error}" if prefix else w.node_error for r, w in node if w.node_error]
    out.node_error = "; ".join(n for n in notes if n) or None
    if any(w.cpu_j is None for _, w in node):
        return
    out.energy_cpu_j = sum(w.cpu_j for _, w in node)  # type: ignore[misc]
    if all(w.dram_j is not None for _, w in node):
        out.energy_dram_j = sum(w.dram_j for _, w in node)  # type: ignore[misc]
    if energy_j is None:
        return
    out.energy_node_j = energy_j if scope == "node" else energy_j + out.energy_cpu_j + (out.energy_dram_j or 0.0)
