"""Facts of this host that need neither torch nor NVML: whether NVIDIA's driver loads, and
how ``roofline.hardware`` spells a CPU and a set of GPUs.

``roofline.hardware`` (the key the fit groups laws by) is the GPU model on CUDA and
:func:`cpu_hardware_name` on CPU; :func:`mlflow_roofline.energy.hardware_naming.hardware_name`
reads the GPU's name from NVML, as the NVML meters do.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from collections.abc import Iterable
from pathlib import Path


def nvidia_driver_present() -> bool:
    """Whether NVIDIA's driver library loads: without it no CUDA device can be visible."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def gpus_hardware_name(names: Iterable[str]) -> str:
    """``roofline.hardware`` of a set of GPUs from their NVML names: the model, or the models joined by ``+``."""
    distinct = sorted(set(names))
    return distinct[0] if len(distinct) == 1 else "+".join(distinct)


@functools.cache
def cpu_hardware_name() -> str:
    """The hardware name of a CPU run: ``cpu:`` plus the CPU model."""
    return f"cpu:{_cpu_model()}"


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"
