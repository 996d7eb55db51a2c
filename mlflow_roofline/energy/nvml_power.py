"""``nvml_power``: GPU energy by integrating sampled power, for GPUs without the counter.

A background thread reads ``nvmlDeviceGetPowerUsage`` (milliwatts) of every measured GPU
at ``sample_hz`` (default 20 Hz, at least 10 Hz) while a window is open; each window
adds a sample at each end, and power is integrated over time with the trapezoid rule
as the samples come (a running integral per GPU, so windows may overlap). The samples
are kept as the meter's power timeline.
NVML's power reading is itself an average over a short period (up to 1 s on recent
GPUs), so the integral smooths fast swings; windows shorter than two sampling intervals
rest on their end samples only and are flagged. A sample outside 0 to the GPU's bound (the
hardware table's board power × 2, else 2 kW; :mod:`~mlflow_roofline.energy.counters`) is a
glitch: it is not integrated, and every window open across it reports no energy.
"""

from __future__ import annotations

import itertools
import time
from types import ModuleType

from mlflow_roofline.energy.base import MAX_TIMELINE_POINTS, EnergyMeter, MeterError, ReadError, Snapshot
from mlflow_roofline.energy.counters import CounterRule, gpu_power_bound_w
from mlflow_roofline.energy.nvml_devices import NvmlDevicesMixin, load_pynvml, open_devices
from mlflow_roofline.energy.sampler import PeriodicSampler

MIN_SAMPLE_HZ = 10.0
DEFAULT_SAMPLE_HZ = 20.0
MAX_SAMPLE_HZ = 1000.0
MW_PER_W = 1000.0


def trapezoid_j(samples: list[tuple[float, float]]) -> float:
    """Joules from ``(time_s, power_w)`` samples in time order, by the trapezoid rule."""
    return sum((p0 + p1) / 2.0 * (t1 - t0) for (t0, p0), (t1, p1) in itertools.pairwise(samples))


class NvmlPowerMeter(NvmlDevicesMixin, EnergyMeter):
    """Energy of this process's GPUs from sampled NVML power (joules per ``cuda:i``).

    Args:
        gpu_indices: CUDA ordinals of the GPUs to read (``None``: every visible GPU).
        sample_hz: power samples per second, in [10, 1000].
        nvml: a pynvml-compatible module (default: the installed ``pynvml``).
    Raises:
        MeterError: NVML unavailable, no GPU, no power reading, or a bad ``sample_hz``.
    """

    source = "nvml_power"
    scope = "device"
    sampled = True  # the power sampler updates the integral _cumulative reads

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        *,
        sample_hz: float = DEFAULT_SAMPLE_HZ,
        nvml: ModuleType | None = None,
    ) -> None:
        super().__init__()
        if not MIN_SAMPLE_HZ <= float(sample_hz) <= MAX_SAMPLE_HZ:
            raise MeterError(
                f"nvml_power: sample_hz must be in [{MIN_SAMPLE_HZ:g}, {MAX_SAMPLE_HZ:g}] samples/s, got {sample_hz!r}"
            )
        self.sample_hz = float(sample_hz)
        self.update_period_s = 2.0 / self.sample_hz
        self._nvml = load_pynvml(nvml)
        self._devices = open_devices(self._nvml, gpu_indices, self.source)
        try:
            for device in self._devices:
                self._nvml.nvmlDeviceGetPowerUsage(device.handle)
        except Exception as exc:  # NVMLError, or anything the binding did not foresee
            self._nvml.nvmlShutdown()
            raise MeterError(
                f"nvml_power: {device.key} ({device.name}) has no power reading ({type(exc).__name__}: {exc})"
            ) from exc
        self._rule = CounterRule(self.source)
        self._bounds_w = [gpu_power_bound_w(device.name) for device in self._devices]
        self._count = 0  # samples this session
        self._last: tuple[float, list[float]] | None = None  # (perf_counter s, watts per GPU)
        self._joules: list[float] = [0.0] * len(self._devices)  # running trapezoid integral per GPU
        self._kept: list[tuple[float, float]] = []  # (unix s, total watts): the timeline
        self._fresh = False
        self._sampler = PeriodicSampler(self._sample_locked, 1.0 / self.sample_hz, "roofline-nvml-power")
        if self._module_scope():
            self.scope = "module"
        self._start_tracker(self._nvml)
        self._attributes = True

    @property
    def samples_taken(self) -> int:
        """Samples in the last session (its windows' end samples included)."""
        return self._count

    def enable_timeline(self, interval_s: float) -> None:
        """The power samples are the timeline already: nothing more to record."""

    def power_timeline(self) -> list[tuple[float, float]]:
        """``(unix time s, watts summed over the GPUs)`` of every power sample of the last session."""
        with self._lock:
            return list(self._kept)

    def _sample(self) -> None:
        """Read every GPU's power and add the trapezoid since the previous sample (caller holds the lock)."""
        watts = []
        for device in self._devices:
            try:
                watts.append(float(self._nvml.nvmlDeviceGetPowerUsage(device.handle)) / MW_PER_W)
            except Exception as exc:  # NVMLError, or anything the binding did not foresee
                raise ReadError(f"nvmlDeviceGetPowerUsage({device.key}) failed: {type(exc).__name__}: {exc}") from exc
        for i, (device, w) in enumerate(zip(self._devices, watts)):
            if not self._rule.watts(device.key, w, self._bounds_w[i]):  # a glitch: integrate the last sample
                watts[i] = 0.0 if self._last is None else self._last[1][i]
        now = time.perf_counter()
        if self._last is not None:
            t0, w0 = self._last
            for i, w in enumerate(watts):
                self._joules[i] += trapezoid_j([(t0, w0[i]), (now, w)])
        self._last = (now, watts)
        self._count += 1
        self._kept.append((time.time(), sum(watts)))
        if len(self._kept) > MAX_TIMELINE_POINTS:
            del self._kept[1::2]

    def _sample_locked(self) -> None:
        with self._lock:
            self._sample()

    def _open_session(self) -> None:
        with self._lock:
            self._count, self._last, self._kept = 0, None, []
            self._joules = [0.0] * len(self._devices)
            self._sample()
            self._fresh = True  # the first window's opening snapshot uses this sample
        self._sampler.start()
        self._share_open()

    def _cumulative(self) -> Snapshot:
        """Joules per GPU integrated since the session opened, up to a sample taken now."""
        if self._sampler.error is not None:
            raise ReadError(f"power sampling failed mid-window: {self._sampler.error}")
        if not self._fresh:
            self._sample()
        self._fresh = False
        rule = self._rule
        return Snapshot(
            {d.key: j for d, j in zip(self._devices, self._joules)},
            samples=self._count,
            shares=self._share_state(),
            glitches=rule.glitches,
            glitch=rule.glitch,
            at=None if self._last is None else self._last[0],
        )

    def _window_warning(self, start: Snapshot, end: Snapshot, time_s: float) -> str | None:
        if end.samples - start.samples < 2 and time_s >= self.update_period_s:
            return f"the sampler missed the {time_s:.3g} s window: only its two end samples were taken"
        return None

    def _close_session(self) -> None:
        self._sampler.stop()
        self._share_close()

    def _close(self) -> None:
        self._sampler.close()
        self._share_release()
        self._nvml.nvmlShutdown()
