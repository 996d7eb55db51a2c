"""Hardware facts that need no torch: whether NVIDIA's driver loads, and the CPU's name.

``roofline.hardware`` (the key the fit groups laws by) is the GPU model on CUDA and
:func:`cpu_hardware_name` on CPU; the CUDA half needs torch and lives in
:mod:`mlflow_roofline.train.device`, which also resolves ``--device auto``.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from pathlib import Path


def nvidia_driver_present() -> bool:
    """Whether NVIDIA's driver library loads: without it no CUDA device can be visible."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


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
