"""Which device a job runs on, and the hardware name runs are grouped by.

``roofline.hardware`` is the key the fit groups laws by: the GPU model on CUDA, the CPU
model on CPU, so that runs from different machines never share a law by accident. The device
kinds, their counts and names are declared once in :mod:`energy.devices`; torch is imported only
when an accelerator's answer is needed (about a second before a job can start).
"""

from __future__ import annotations

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import DEVICE_CHOICES
from mlflow_roofline.energy.devices import DEVICE_KINDS, auto_device, cuda_device_count
from mlflow_roofline.energy.hardware_naming import hardware_name

__all__ = ["DEVICE_KINDS", "cuda_device_count", "hardware_name", "resolve_device"]


def resolve_device(requested: str) -> str:
    """Turn ``auto`` into the first accelerator kind with a visible device, else ``cpu``; check the others.

    Raises:
        ConfigError: an unknown device, or an accelerator kind with no device visible here.
    """
    if requested not in DEVICE_CHOICES:
        raise ConfigError("device", f"must be one of {', '.join(DEVICE_CHOICES)}, got {requested!r}")
    if requested not in DEVICE_KINDS:
        return auto_device()
    kind = DEVICE_KINDS[requested]
    if kind.accelerator and (not kind.may_be_present() or kind.count() == 0):
        raise ConfigError("device", f"{requested} was asked for but no {requested} device is visible here")
    return requested
