"""``nvml``: GPU energy from NVML's cumulative energy counter.

``nvmlDeviceGetTotalEnergyConsumption`` returns the energy a GPU has used since the
driver loaded, in millijoules (Volta and newer). A window's energy per GPU is the
difference of two reads. The counter updates every 20-100 ms, so shorter windows are
flagged and a counter that did not move is reported as unmeasured, not as 0 J. Every step
between two reads is checked by :mod:`~mlflow_roofline.energy.counters` against the GPU's
board power (the hardware table's × 2, else 2 kW): a counter that goes back (it never wraps)
or jumps past that bound is a glitch that fails the windows open across it.
GPUs without the counter raise ``NVMLError_NotSupported``; ``nvml_power`` covers them.
On a GPU other processes use too, ``energy_j`` is this job's share of it and
``energy_device_j`` the whole (:mod:`~mlflow_roofline.energy.gpu_share`); on a Grace Hopper
module the counter covers the Grace CPU and memory too, and the meter's scope is ``module``.
"""

from __future__ import annotations

import time
from types import ModuleType

from mlflow_roofline.energy.base import EnergyMeter, MeterError, ReadError, Snapshot
from mlflow_roofline.energy.counters import CounterRule, gpu_power_bound_w
from mlflow_roofline.energy.nvml_devices import NvmlDevicesMixin, load_pynvml, open_devices

MJ_PER_J = 1000.0


class NvmlMeter(NvmlDevicesMixin, EnergyMeter):
    """Energy of this process's GPUs from NVML's energy counter (joules per ``cuda:i``).

    Args:
        gpu_indices: CUDA ordinals of the GPUs to read (``None``: every visible GPU).
        nvml: a pynvml-compatible module (default: the installed ``pynvml``).
    Raises:
        MeterError: NVML unavailable, no GPU, or a GPU without the energy counter.
    """

    source = "nvml"
    scope = "device"
    update_period_s = 0.1

    def __init__(self, gpu_indices: list[int] | None = None, *, nvml: ModuleType | None = None) -> None:
        super().__init__()
        self._nvml = load_pynvml(nvml)
        self._devices = open_devices(self._nvml, gpu_indices, self.source)
        try:
            for device in self._devices:
                self._nvml.nvmlDeviceGetTotalEnergyConsumption(device.handle)
        except Exception as exc:  # NVMLError, or anything the binding did not foresee
            self._nvml.nvmlShutdown()
            raise MeterError(
                f"nvml: {device.key} ({device.name}) has no energy counter ({type(exc).__name__}: {exc}); "
                "use meter nvml_power"
            ) from exc
        self._last_mj: list[int] = []
        self._last_t = 0.0
        self._total_j = [0.0] * len(self._devices)
        self._bounds_w = [gpu_power_bound_w(device.name) for device in self._devices]
        self._rule = CounterRule(self.source)
        if self._module_scope():
            self.scope = "module"
        self._start_tracker(self._nvml)
        self._attributes = True
        self._locked_reads = True  # the share poller and the reads share the tracker

    def _read(self) -> list[int]:
        values = []
        for device in self._devices:
            try:
                values.append(int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(device.handle)))
            except Exception as exc:  # NVMLError, or anything the binding did not foresee
                raise ReadError(
                    f"nvmlDeviceGetTotalEnergyConsumption({device.key}) failed: {type(exc).__name__}: {exc}"
                ) from exc
        return values

    def _open_session(self) -> None:
        self._last_mj = []
        self._total_j = [0.0] * len(self._devices)
        self._share_open()

    def _close_session(self) -> None:
        self._share_close()

    def _cumulative(self) -> Snapshot:
        """Joules per GPU since the session opened, each step between two reads checked."""
        now_mj = self._read()
        t = time.monotonic()
        totals, rule = self._total_j, self._rule
        if self._last_mj:
            seconds = t - self._last_t
            for i, (device, last, now) in enumerate(zip(self._devices, self._last_mj, now_mj)):
                if now != last:
                    totals[i] += rule.joules(
                        device.key, last, now, seconds, 1 / MJ_PER_J, self._bounds_w[i], None, " mJ"
                    )
        self._last_mj, self._last_t = now_mj, t
        return Snapshot(
            {device.key: joules for device, joules in zip(self._devices, totals)},
            shares=self._share_state(),
            glitches=rule.glitches,
            glitch=rule.glitch,
        )

    def _close(self) -> None:
        self._share_release()
        self._nvml.nvmlShutdown()
