"""The one name of the hardware a run used: the value of ``roofline.hardware``.

``roofline.hardware`` is the key the fit groups laws by, so a GPU must get the same name
whichever path logs it: the train and sweep runs (:func:`hardware_name` of their device)
and the NVML meters of ``measure`` and ``track_energy`` (:func:`~mlflow_roofline.core.host.gpus_hardware_name` of
the GPUs they read). Both take the name NVML reports (``NVIDIA H200``); a CPU run is ``cpu:``
plus the CPU model (:func:`~mlflow_roofline.core.host.cpu_hardware_name`).
"""

from __future__ import annotations

import functools

from mlflow_roofline.core.host import cpu_hardware_name, gpus_hardware_name
from mlflow_roofline.energy.nvml_devices import load_pynvml, open_devices
from mlflow_roofline.energy.readings import MeterError


@functools.cache
def hardware_name(device: str) -> str:
    """A readable, stable name of the hardware ``device`` runs on.

    CUDA: the NVML name of GPU 0 (CUDA's ordinal 0 after ``CUDA_VISIBLE_DEVICES``), as the
    NVML meters name it; CPU: ``cpu:`` plus the CPU model.
    """
    if device != "cuda":
        return cpu_hardware_name()
    try:
        nvml = load_pynvml()
        devices = open_devices(nvml, [0], "hardware")
    except MeterError:
        # NVML cannot be read (a driver without its management library): CUDA's own name,
        # which is NVML's on every driver that has both. torch is deferred: it is heavy.
        import torch

        return str(torch.cuda.get_device_name(0))
    try:
        return gpus_hardware_name(d.name for d in devices)
    finally:
        nvml.nvmlShutdown()
