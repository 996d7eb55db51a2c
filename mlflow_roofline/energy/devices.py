"""The device kinds a job can run on, declared once: ``cuda`` (NVIDIA and, under PyTorch's ROCm
build, AMD GPUs) and ``cpu``.

Each kind says whether it is an accelerator, how to tell cheaply that it may be present (without
importing torch, about a second), how many devices a job may use (GPUs visible; CPU cores) and the
name of its hardware (``roofline.hardware``). Meters declare the kind they measure
(:data:`energy.select.METER_KINDS`); ``train`` and ``sweep`` resolve ``auto``, count devices and name
the hardware through :data:`DEVICE_KINDS`; the callback's and autolog's measurement
(:mod:`integrations.measurement`) asks it which devices its process computes on and waits on them
there. A new kind (Gaudi ``hpu``, Apple ``mps``) is one entry here, one level of the job table's
``device`` column and the meters that read it.
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


def cuda_current_indices() -> list[int]:
    """The GPU this process computes on (torch's current device), as a meter's device indices; imports torch."""
    import torch

    return [torch.cuda.current_device()]


def cuda_synchronize() -> None:
    """Wait until this process's current GPU has run its queued work; imports torch."""
    import torch

    torch.cuda.synchronize()


def host_indices() -> None:
    """No device indices: a host meter measures the processes, not a device."""
    return None


def host_synchronize() -> None:
    """Nothing to wait for: the host ran the work as it was called."""


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
    current_indices: Callable[[], list[int] | None]
    """The devices of the kind this process computes on, as its meter's indices (None: not a device meter)."""
    synchronize: Callable[[], None]
    """Wait until the process's device has run its queued work, so that an energy window's edge is where the
    work is."""


DEVICE_KINDS: dict[str, DeviceKind] = {
    "cuda": DeviceKind(
        "cuda",
        True,
        nvidia_driver_present,
        cuda_device_count,
        lambda: hardware_name("cuda"),
        cuda_current_indices,
        cuda_synchronize,
    ),
    "cpu": DeviceKind("cpu", False, lambda: True, cpu_core_count, cpu_hardware_name, host_indices, host_synchronize),
}
"""Every device kind, accelerators first (the order ``auto`` tries them); the job table's ``device`` levels."""


def auto_device() -> str:
    """The first accelerator kind with a visible device, else ``cpu``."""
    for kind in DEVICE_KINDS.values():
        if kind.accelerator and kind.may_be_present() and kind.count() > 0:
            return kind.name
    return next(k.name for k in DEVICE_KINDS.values() if not k.accelerator)
