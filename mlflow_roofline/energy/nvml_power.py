"""``nvml_power``: GPU energy by integrating sampled power, for GPUs without the counter.

A background thread reads ``nvmlDeviceGetPowerUsage`` (milliwatts) of every measured GPU
at ``sample_hz`` (default 20 Hz, at least 10 Hz) while a window is open; the window
adds a sample at each end and integrates power over time with the trapezoid rule.
NVML's power reading is itself an average over a short period (up to 1 s on recent
GPUs), so the integral smooths fast swings; windows shorter than two sampling intervals
rest on their end samples only and are flagged.
"""

from __future__ import annotations

import time
from typing import Any

from mlflow_roofline.energy.base import EnergyMeter, MeterError, Reading, ReadError
from mlflow_roofline.energy.nvml_devices import NvmlDevicesMixin, load_pynvml, open_devices
from mlflow_roofline.energy.sampler import PeriodicSampler

MIN_SAMPLE_HZ = 10.0
DEFAULT_SAMPLE_HZ = 20.0
MAX_SAMPLE_HZ = 1000.0
MW_PER_W = 1000.0


def trapezoid_j(samples: list[tuple[float, float]]) -> float:
    """Joules from ``(time_s, power_w)`` samples in time order, by the trapezoid rule."""
    return sum((p0 + p1) / 2.0 * (t1 - t0) for (t0, p0), (t1, p1) in zip(samples, samples[1:]))


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

    def __init__(self, gpu_indices: list[int] | None = None, *, sample_hz: float = DEFAULT_SAMPLE_HZ, nvml: Any = None) -> None:
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
        except self._nvml.NVMLError as exc:
            self._nvml.nvmlShutdown()
            raise MeterError(f"nvml_power: {device.key} ({device.name}) has no power reading ({type(exc).__name__}: {exc})") from exc
        self._samples: list[tuple[float, list[float]]] = []
        self._sampler = PeriodicSampler(self._sample, 1.0 / self.sample_hz, "roofline-nvml-power")

    @property
    def samples_taken(self) -> int:
        """Samples in the last window (its two end samples included)."""
        return len(self._samples)

    def _sample(self) -> None:
        watts = []
        for device in self._devices:
            try:
                watts.append(self._nvml.nvmlDeviceGetPowerUsage(device.handle) / MW_PER_W)
            except self._nvml.NVMLError as exc:
                raise ReadError(f"nvmlDeviceGetPowerUsage({device.key}) failed: {type(exc).__name__}: {exc}") from exc
        self._samples.append((time.perf_counter(), watts))

    def _start(self) -> None:
        self._samples = []
        self._sample()
        self._sampler.start()

    def _stop(self, time_s: float) -> Reading:
        self._sampler.stop()
        if self._sampler.error is not None:
            raise ReadError(f"power sampling failed mid-window: {self._sampler.error}")
        self._sample()
        per_device = {
            device.key: trapezoid_j([(t, w[i]) for t, w in self._samples]) for i, device in enumerate(self._devices)
        }
        warning = None
        if len(self._samples) < 3 and time_s >= self.update_period_s:
            warning = f"the sampler missed the {time_s:.3g} s window: only its two end samples were taken"
        return Reading(per_device, warning)

    def _abort(self) -> None:
        self._sampler.stop()

    def _close(self) -> None:
        self._sampler.close()
        self._nvml.nvmlShutdown()
