"""The device kinds a job can run on, declared once: ``cuda`` (NVIDIA and, under PyTorch's ROCm
build, AMD GPUs) and ``cpu``.

Each kind says whether it is an accelerator, how to tell cheaply that it may be present (without
importing torch, about a second), how many devices a job may use (GPUs visible; CPU cores) and the
name of its hardware (``roofline.hardware``). Meters declare the kind they measure
(:data:`energy.select.METER_KINDS`); ``train`` and ``sweep`` resolve ``auto``, count devices and name
the hardware through :data:`DEVICE_KINDS`. A new kind (Gaudi ``hpu``, Apple ``mps``) is one entry here,
one level of the job table's ``device`` column and the meters that read it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from mlflow_roofline.core.host import cpu_hardware_name, nvidia_driver_present
from mlflow_roofline.energy.hardware_naming import hardware_name


def cuda_device_count() -> int:
    """GPUs torch can see (0 without CUDA); imports torch."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cpu_core_count() -> int:
    """Cores of this machine (at least 1)."""
    return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class DeviceKind:
    """One device kind: its name (the job's ``device``), whether it accelerates, a cheap presence probe,
    the count of devices a job may use and the hardware name of its device 0."""

    name: str
    accelerator: bool
    may_be_present: Callable[[], bool]
    """False when no device of the kind can be visible (a cheap check, no torch import)."""
    count: Callable[[], int]
    """Devices of the kind a job may use here (count)."""
    hardware: Callable[[], str]
    """``roofline.hardware`` of the kind's device 0."""


DEVICE_KINDS: dict[str, DeviceKind] = {
    "cuda": DeviceKind("cuda", True, nvidia_driver_present, cuda_device_count, lambda: hardware_name("cuda")),
    "cpu": DeviceKind("cpu", False, lambda: True, cpu_core_count, cpu_hardware_name),
}
"""Every device kind, accelerators first (the order ``auto`` tries them); the job table's ``device`` levels."""


def auto_device() -> str:
    """The first accelerator kind with a visible device, else ``cpu``."""
    for kind in DEVICE_KINDS.values():
        if kind.accelerator and kind.may_be_present() and kind.count() > 0:
            return kind.name
    return next(k.name for k in DEVICE_KINDS.values() if not k.accelerator)
