"""``nvml``: GPU energy from NVML's cumulative energy counter.

``nvmlDeviceGetTotalEnergyConsumption`` returns the energy a GPU has used since the
driver loaded, in millijoules (Volta and newer). A window's energy per GPU is the
difference of two reads. The counter updates every 20-100 ms, so shorter windows are
flagged and a counter that did not move is reported as unmeasured, not as 0 J.
GPUs without the counter raise ``NVMLError_NotSupported``; ``nvml_power`` covers them.
On a GPU other processes use too, ``energy_j`` is this job's share of it and
``energy_device_j`` the whole (:mod:`~mlflow_roofline.energy.gpu_share`); on a Grace Hopper
module the counter covers the Grace CPU and memory too, and the meter's scope is ``module``.
"""

from __future__ import annotations

from types import ModuleType

from mlflow_roofline.energy.base import EnergyMeter, MeterError, ReadError, Snapshot
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
        except self._nvml.NVMLError as exc:
            self._nvml.nvmlShutdown()
            raise MeterError(
                f"nvml: {device.key} ({device.name}) has no energy counter ({type(exc).__name__}: {exc}); "
                "use meter nvml_power"
            ) from exc
        self._last_mj: list[int] = []
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
            except self._nvml.NVMLError as exc:
                raise ReadError(
                    f"nvmlDeviceGetTotalEnergyConsumption({device.key}) failed: {type(exc).__name__}: {exc}"
                ) from exc
        return values

    def _open_session(self) -> None:
        self._last_mj = []
        self._share_open()

    def _close_session(self) -> None:
        self._share_close()

    def _cumulative(self) -> Snapshot:
        """The counters themselves, in joules since the driver loaded (checked never to go back)."""
        now_mj = self._read()
        for device, last, now in zip(self._devices, self._last_mj, now_mj):
            if now < last:
                raise ReadError(f"energy counter of {device.key} went backwards ({last} -> {now} mJ): driver reloaded?")
        self._last_mj = now_mj
        return Snapshot(
            {device.key: mj / MJ_PER_J for device, mj in zip(self._devices, now_mj)}, shares=self._share_state()
        )

    def _close(self) -> None:
        self._share_release()
        self._nvml.nvmlShutdown()
