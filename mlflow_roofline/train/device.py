"""Which device a job runs on, and the hardware name runs are grouped by.

``roofline.hardware`` is the key the fit groups laws by: the GPU model on CUDA, the CPU
model on CPU, so that runs from different machines never share a law by accident. torch is
imported only when a CUDA answer is needed (about a second before a job can start).
"""

from __future__ import annotations

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.host import nvidia_driver_present
from mlflow_roofline.core.schema import DEVICE_CHOICES
from mlflow_roofline.energy.hardware_naming import hardware_name

__all__ = ["cuda_device_count", "hardware_name", "resolve_device"]


def cuda_device_count() -> int:
    """GPUs torch can see (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(requested: str) -> str:
    """Turn ``auto`` into ``cuda`` when a GPU is visible, else ``cpu``; check the others.

    Raises:
        ConfigError: an unknown device, or ``cuda`` on a machine without one.
    """
    if requested not in DEVICE_CHOICES:
        raise ConfigError("device", f"must be one of {', '.join(DEVICE_CHOICES)}, got {requested!r}")
    if requested == "cpu" or (requested == "auto" and not nvidia_driver_present()):
        return "cpu"  # no torch import needed
    if requested == "auto":
        return "cuda" if cuda_device_count() > 0 else "cpu"
    if requested == "cuda" and cuda_device_count() == 0:
        raise ConfigError("device", "cuda was asked for but no CUDA device is visible here")
    return requested
