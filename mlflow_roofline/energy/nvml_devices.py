"""NVML access shared by the ``nvml`` and ``nvml_power`` meters: load, init, map devices.

CUDA numbers the GPUs a process sees ``0..n-1`` after ``CUDA_VISIBLE_DEVICES``; NVML
numbers all GPUs of the node in PCI bus order. :func:`visible_nvml_indices` maps the
first onto the second the way the CUDA driver reads the variable: a comma-separated
list of indices or UUIDs (``GPU-8932f937-...``, or any unique prefix of one, with or
without ``GPU-``), read up to the first invalid entry; an empty value hides every GPU.
Indices are taken in NVML (PCI) order, which is CUDA's order under
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and on nodes of identical GPUs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from types import ModuleType

from mlflow_roofline.core.host import gpus_hardware_name
from mlflow_roofline.energy.readings import MeterError

logger = logging.getLogger(__name__)

#: Module-level hook: set to a pynvml-compatible module to use it instead of the real
#: ``pynvml`` everywhere (a per-meter ``nvml=`` argument takes precedence).
PYNVML: ModuleType | None = None


def load_pynvml(nvml: ModuleType | None = None) -> ModuleType:
    """The pynvml module to use: the argument, else :data:`PYNVML`, else ``import pynvml``."""
    if nvml is not None:
        return nvml
    if PYNVML is not None:
        return PYNVML
    try:
        import pynvml  # deferred: the NVIDIA library is loaded only by a meter that reads it
    except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
        raise MeterError("nvml: the nvidia-ml-py package (module pynvml) is not installed") from exc
    return pynvml


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _uuid_key(uuid: str) -> str:
    uuid = uuid.strip().lower()
    return uuid[4:] if uuid.startswith("gpu-") else uuid


def visible_nvml_indices(nvml: ModuleType, cuda_visible_devices: str | None) -> list[int]:
    """NVML indices of the GPUs CUDA shows this process, in CUDA ordinal order.

    Args:
        nvml: an initialised pynvml module.
        cuda_visible_devices: the value of ``CUDA_VISIBLE_DEVICES`` (``None``: unset).
    Raises:
        MeterError: an entry names a MIG instance (NVML has no energy per instance).
    """
    count = int(nvml.nvmlDeviceGetCount())
    if cuda_visible_devices is None:
        return list(range(count))
    uuids: list[str] | None = None
    chosen: list[int] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry:
            break
        if entry.lower().startswith("mig-"):
            raise MeterError(
                f"nvml: CUDA_VISIBLE_DEVICES names a MIG instance ({entry}); NVML has no "
                "energy counter per MIG instance, measure the whole GPU instead"
            )
        if entry.lstrip("+-").isdigit():
            index = int(entry)
            if not 0 <= index < count:
                break
        else:
            if uuids is None:
                uuids = [
                    _uuid_key(_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)))) for i in range(count)
                ]
            matches = [i for i, u in enumerate(uuids) if u.startswith(_uuid_key(entry))]
            if len(matches) != 1:
                break
            index = matches[0]
        if index in chosen:
            break
        chosen.append(index)
    return chosen


@dataclasses.dataclass(frozen=True)
class NvmlDevice:
    """One GPU a meter reads: its CUDA ordinal key (``cuda:0``), NVML index, handle, name."""

    key: str
    nvml_index: int
    handle: object  # NVML's opaque device handle
    name: str


def open_devices(nvml: ModuleType, gpu_indices: list[int] | tuple[int, ...] | None, source: str) -> list[NvmlDevice]:
    """Initialise NVML and return the devices to read (caller must ``nvmlShutdown`` later).

    Args:
        gpu_indices: CUDA ordinals (as torch numbers them in this process) to read;
            ``None`` reads every visible GPU.
    Raises:
        MeterError: NVML cannot start, no GPU is visible, or an index is out of range.
    """
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise MeterError(f"{source}: NVML is not available here ({exc})") from exc
    try:
        visible = visible_nvml_indices(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
        if not visible:
            raise MeterError(
                f"{source}: no GPU is visible (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
            )
        ordinals = list(range(len(visible))) if gpu_indices is None else list(gpu_indices)
        if not ordinals:
            raise MeterError(f"{source}: gpu_indices is empty; give at least one CUDA device index")
        devices = []
        for ordinal in ordinals:
            if not 0 <= ordinal < len(visible):
                raise MeterError(
                    f"{source}: gpu_indices holds {ordinal}, expected a CUDA index in 0..{len(visible) - 1}"
                )
            handle = nvml.nvmlDeviceGetHandleByIndex(visible[ordinal])
            name = _text(nvml.nvmlDeviceGetName(handle))
            devices.append(NvmlDevice(f"cuda:{ordinal}", visible[ordinal], handle, name))
        if len({d.name for d in devices}) > 1 and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            logger.warning(
                "%s: GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA may "
                "number them differently from NVML; set CUDA_DEVICE_ORDER=PCI_BUS_ID",
                source,
            )
        return devices
    except nvml.NVMLError as exc:
        nvml.nvmlShutdown()
        raise MeterError(f"{source}: cannot open the GPUs through NVML ({exc})") from exc
    except BaseException:
        nvml.nvmlShutdown()
        raise


class NvmlDevicesMixin:
    """What both NVML meters report about the GPUs they opened (``self._devices``)."""

    _devices: list[NvmlDevice]

    @property
    def hardware(self) -> str:
        return gpus_hardware_name(d.name for d in self._devices)

    @property
    def devices(self) -> list[str]:
        """Keys of the measured GPUs (``cuda:0``...)."""
        return [d.key for d in self._devices]
