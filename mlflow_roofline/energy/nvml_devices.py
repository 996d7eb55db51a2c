"""NVML access shared by the ``nvml`` and ``nvml_power`` meters: load, init, map devices.

CUDA numbers the GPUs a process sees ``0..n-1`` after ``CUDA_VISIBLE_DEVICES``; NVML
numbers all GPUs of the node in PCI bus order. :func:`visible_nvml_indices` maps the
first onto the second the way the CUDA driver reads the variable: a comma-separated
list of indices or UUIDs (``GPU-8932f937-...``, or any unique prefix of one, with or
without ``GPU-``), read up to the first invalid entry; an empty value hides every GPU.
Indices are taken in NVML (PCI) order, which is CUDA's order under
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and on nodes of identical GPUs.

A MIG instance (``MIG-<uuid>``) has no energy counter of its own: the meters read its parent
GPU and keep the slice's fraction of the parent's compute slices
(``gpuInstanceSliceCount / nvmlDeviceGetMaxMigDeviceCount``), which
:mod:`~mlflow_roofline.energy.gpu_share` applies to the parent's joules.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from types import ModuleType

from mlflow_roofline.core.host import gpus_hardware_name
from mlflow_roofline.energy.gpu_share import POLL_S, ShareState, ShareTracker, attribute
from mlflow_roofline.energy.readings import Measurement, MeterError, Snapshot
from mlflow_roofline.energy.sampler import PeriodicSampler

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


def mig_parent(nvml: ModuleType, entry: str) -> tuple[int, float]:
    """The NVML index of a MIG instance's parent GPU and the slice's fraction of its compute slices.

    Raises:
        MeterError: NVML does not know the instance or cannot tell its parent or size.
    """
    try:
        mig = nvml.nvmlDeviceGetHandleByUUID(entry)
        parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
        slices = int(nvml.nvmlDeviceGetAttributes(mig).gpuInstanceSliceCount)
        total = int(nvml.nvmlDeviceGetMaxMigDeviceCount(parent))
        index = int(nvml.nvmlDeviceGetIndex(parent))
    except nvml.NVMLError as exc:
        raise MeterError(
            f"nvml: CUDA_VISIBLE_DEVICES names the MIG instance {entry}, whose parent GPU NVML cannot tell "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    if not 0 < slices <= total:
        raise MeterError(f"nvml: MIG instance {entry} reports {slices} of {total} slices")
    return index, slices / total


def visible_gpus(nvml: ModuleType, cuda_visible_devices: str | None) -> list[tuple[int, float | None]]:
    """NVML indices of the GPUs CUDA shows this process, in CUDA ordinal order, each with the
    fraction of it a MIG instance holds (None: the whole GPU).

    Args:
        nvml: an initialised pynvml module.
        cuda_visible_devices: the value of ``CUDA_VISIBLE_DEVICES`` (``None``: unset).
    Raises:
        MeterError: a MIG instance whose parent NVML cannot tell.
    """
    count = int(nvml.nvmlDeviceGetCount())
    if cuda_visible_devices is None:
        return [(i, None) for i in range(count)]
    uuids: list[str] | None = None
    chosen: list[tuple[int, float | None]] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry:
            break
        if entry.lower().startswith("mig-"):
            chosen.append(mig_parent(nvml, entry))
            continue
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
        if index in [i for i, _ in chosen]:
            break
        chosen.append((index, None))
    return chosen


def visible_nvml_indices(nvml: ModuleType, cuda_visible_devices: str | None) -> list[int]:
    """NVML indices of the GPUs CUDA shows this process (a MIG instance's parent), in CUDA ordinal order."""
    return [index for index, _ in visible_gpus(nvml, cuda_visible_devices)]


@dataclasses.dataclass(frozen=True)
class NvmlDevice:
    """One GPU a meter reads: its CUDA ordinal key (``cuda:0``), NVML index, handle, name, and
    for a MIG instance the fraction of this (parent) GPU it holds."""

    key: str
    nvml_index: int
    handle: object  # NVML's opaque device handle
    name: str
    mig_fraction: float | None = None


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
    except Exception as exc:  # NVMLError, or a broken library the binding did not foresee
        raise MeterError(f"{source}: NVML is not available here ({exc})") from exc
    try:
        visible = visible_gpus(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
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
            index, mig_fraction = visible[ordinal]
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            devices.append(NvmlDevice(f"cuda:{ordinal}", index, handle, name, mig_fraction))
        if len({d.name for d in devices}) > 1 and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            logger.warning(
                "%s: GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA may "
                "number them differently from NVML; set CUDA_DEVICE_ORDER=PCI_BUS_ID",
                source,
            )
        return devices
    except MeterError:
        nvml.nvmlShutdown()
        raise
    except Exception as exc:  # NVMLError, or anything the binding did not foresee
        nvml.nvmlShutdown()
        raise MeterError(f"{source}: cannot open the GPUs through NVML ({type(exc).__name__}: {exc})") from exc
    except BaseException:
        nvml.nvmlShutdown()
        raise


GRACE_HOPPER_MARKERS: tuple[str, ...] = ("GH200", "GH100", "GRACE")
"""Words of the NVML name of a Grace Hopper superchip, whose power reading covers the whole module."""


def is_grace_hopper(name: str) -> bool:
    """Whether an NVML device name is a Grace Hopper module (``NVIDIA GH200 480GB``)."""
    upper = name.upper()
    return any(marker in upper for marker in GRACE_HOPPER_MARKERS)


class NvmlDevicesMixin:
    """What both NVML meters report about the GPUs they opened (``self._devices``), and the
    attribution of a shared GPU or MIG slice (:mod:`~mlflow_roofline.energy.gpu_share`)."""

    _devices: list[NvmlDevice]
    _tracker: ShareTracker | None = None

    @property
    def hardware(self) -> str:
        return gpus_hardware_name(d.name for d in self._devices)

    def _module_scope(self) -> bool:
        """Every GPU is a Grace Hopper module: the reading covers its CPU and memory too."""
        return all(is_grace_hopper(d.name) for d in self._devices)

    def _start_tracker(self, nvml: ModuleType) -> None:
        """Watch per-process utilization of the measured GPUs (their parents for MIG slices)."""
        self._tracker = ShareTracker(nvml, [(d.key, d.handle) for d in self._devices if d.mig_fraction is None])
        self._poller = PeriodicSampler(self._poll_locked, POLL_S, "roofline-gpu-share")

    def _poll_locked(self) -> None:
        with self._lock:  # type: ignore[attr-defined]
            assert self._tracker is not None
            self._tracker.poll()

    def _share_open(self) -> None:
        if self._tracker is not None:
            with self._lock:  # type: ignore[attr-defined]
                self._tracker.reset()
            self._poller.start()

    def _share_close(self) -> None:
        if self._tracker is not None:
            self._poller.stop()

    def _share_release(self) -> None:
        if self._tracker is not None:
            self._poller.close()

    def _share_state(self) -> dict[str, ShareState] | None:
        """The tracker's sums as the last background poll left them (caller holds the lock)."""
        return None if self._tracker is None else self._tracker.state()

    def _attribute(self, measurement: Measurement, start: Snapshot, end: Snapshot) -> Measurement:
        tracker = self._tracker
        unavailable = tracker.unavailable() if tracker is not None else {}
        migs = {d.key: d.mig_fraction for d in self._devices if d.mig_fraction is not None}
        return attribute(measurement, start.shares or {}, end.shares or {}, unavailable, migs)

    @property
    def devices(self) -> list[str]:
        """Keys of the measured GPUs (``cuda:0``...)."""
        return [d.key for d in self._devices]
