"""A fake of the ``pynvml`` module (nvidia-ml-py) for the functions the meters call.

Same names, units and error classes as the real module: ``nvmlInit``/``nvmlShutdown``
(reference counted), device handles by index or UUID, ``nvmlDeviceGetTotalEnergyConsumption``
in millijoules since "driver load", ``nvmlDeviceGetPowerUsage`` in milliwatts, and
``NVMLError`` whose constructor returns the subclass of the code
(``NVMLError(NVML_ERROR_NOT_SUPPORTED)`` is an ``NVMLError_NotSupported``).

The module is its own state, like the real one: :func:`configure` sets the GPUs. A
GPU draws a constant ``power_w``; its energy counter follows wall time and moves in
steps of ``counter_period_s``, like the real counter's 20-100 ms updates.

Shared GPUs and MIG: ``nvmlDeviceGetComputeRunningProcesses`` lists a GPU's ``processes``
(``pid`` -> SM utilization percent); ``nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)``
returns one ``c_nvmlProcessUtilizationSample_t``-like sample per process (``pid``,
``timeStamp`` in µs, ``smUtil``, ``memUtil``, ``encUtil``, ``decUtil``) newer than the stamp,
raises ``NVMLError_NotFound`` when there is none and ``NVMLError_NotSupported`` where the GPU
gives no per-process samples. A GPU's ``mig`` slices have UUIDs of their own
(``nvmlDeviceGetHandleByUUID``), their parent (``nvmlDeviceGetDeviceHandleFromMigDeviceHandle``)
and ``gpuInstanceSliceCount`` (``nvmlDeviceGetAttributes``) out of ``nvmlDeviceGetMaxMigDeviceCount``.
"""

from __future__ import annotations

import dataclasses
import math
import string
import sys
import time

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999


class NVMLError(Exception):
    """As in pynvml: ``NVMLError(code)`` builds the subclass registered for ``code``."""

    _valClassMapping: dict[int, type] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    def __new__(typ, value):
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return NVMLError._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NVMLError) and self.value == other.value

    __hash__ = Exception.__hash__


def _extract_error_classes() -> None:
    module = sys.modules[__name__]
    for name in [n for n in dir(module) if n.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        value = getattr(module, name)

        def gen_new(val: int):
            def new(typ, *args):
                return NVMLError.__new__(typ, val)

            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(value)})
        cls.__module__ = __name__
        setattr(module, class_name, cls)
        NVMLError._valClassMapping[value] = cls


_extract_error_classes()


@dataclasses.dataclass
class FakeGPU:
    """One GPU: its identity, its constant draw, and how it misbehaves.

    Attributes:
        power_w: constant power draw in watts.
        energy_counter: False makes the energy counter raise NVMLError_NotSupported.
        counter_period_s: the energy counter moves in steps of this many seconds.
        fail_after_reads: energy/power reads that succeed before every later one
            raises NVMLError_GpuIsLost (``None``: never fails).
        jump_mj, jump_after_reads: reads after the first ``jump_after_reads`` give the energy
            counter off by ``jump_mj`` (a glitch; negative steps back).
    """

    uuid: str
    name: str = "NVIDIA Fake G100"
    power_w: float = 250.0
    energy_counter: bool = True
    counter_period_s: float = 0.02
    fail_after_reads: int | None = None
    jump_mj: int = 0
    jump_after_reads: int | None = None
    base_mj: int = 123_456_789
    reads: int = 0
    processes: dict[int, float] = dataclasses.field(default_factory=dict)
    process_samples: bool = True
    mig: dict[str, int] = dataclasses.field(default_factory=dict)  # MIG UUID -> its gpuInstanceSliceCount
    max_mig_devices: int = 7
    power_read_s: float = 0.0
    """Seconds one power read takes (a driver answers in about a millisecond; a loaded host later)."""


class _Handle:
    def __init__(self, index: int, mig: str | None = None) -> None:
        self.index = index
        self.mig = mig

    def __repr__(self) -> str:
        return f"<c_nvmlDevice_t {self.index}{' ' + self.mig if self.mig else ''}>"


@dataclasses.dataclass
class c_nvmlProcessInfo_t:
    pid: int
    usedGpuMemory: int
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclasses.dataclass
class c_nvmlProcessUtilizationSample_t:
    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int
    encUtil: int = 0
    decUtil: int = 0


@dataclasses.dataclass
class c_nvmlDeviceAttributes_t:
    multiprocessorCount: int
    gpuInstanceSliceCount: int
    computeInstanceSliceCount: int
    memorySizeMB: int = 0


_gpus: list[FakeGPU] = []
_init_count = 0
_library_present = True
_t0 = time.perf_counter()


def configure(gpus: list[FakeGPU], library_present: bool = True) -> None:
    """Set the node's GPUs (in NVML/PCI order); reset the init count and the clock."""
    global _gpus, _init_count, _library_present, _t0
    _gpus = list(gpus)
    _init_count = 0
    _library_present = library_present
    _t0 = time.perf_counter()


def init_count() -> int:
    """How many nvmlInit calls are not yet matched by nvmlShutdown."""
    return _init_count


def _check_init() -> None:
    if _init_count <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


def _gpu(handle: _Handle) -> FakeGPU:
    _check_init()
    if not isinstance(handle, _Handle) or not 0 <= handle.index < len(_gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _gpus[handle.index]


def _count_read(gpu: FakeGPU) -> None:
    if gpu.fail_after_reads is not None and gpu.reads >= gpu.fail_after_reads:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    gpu.reads += 1


def nvmlInit() -> None:
    global _init_count
    if not _library_present:
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
    _init_count += 1


def nvmlShutdown() -> None:
    global _init_count
    _check_init()
    _init_count -= 1


def nvmlDeviceGetCount() -> int:
    _check_init()
    return len(_gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    _check_init()
    if not 0 <= index < len(_gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index)


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> _Handle:
    _check_init()
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    for i, gpu in enumerate(_gpus):
        if gpu.uuid == uuid:
            return _Handle(i)
        if uuid in gpu.mig:
            return _Handle(i, uuid)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetIndex(handle: _Handle) -> int:
    _gpu(handle)
    return handle.index


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle: _Handle) -> _Handle:
    _gpu(handle)
    if handle.mig is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(handle.index)


def nvmlDeviceGetAttributes(handle: _Handle) -> c_nvmlDeviceAttributes_t:
    gpu = _gpu(handle)
    slices = gpu.mig[handle.mig] if handle.mig is not None else gpu.max_mig_devices
    return c_nvmlDeviceAttributes_t(16 * slices, slices, slices)


def nvmlDeviceGetMaxMigDeviceCount(handle: _Handle) -> int:
    return _gpu(handle).max_mig_devices


def nvmlDeviceGetComputeRunningProcesses(handle: _Handle) -> list[c_nvmlProcessInfo_t]:
    return [c_nvmlProcessInfo_t(pid, 1 << 30) for pid in _gpu(handle).processes]


def nvmlDeviceGetProcessUtilization(handle: _Handle, timeStamp: int) -> list[c_nvmlProcessUtilizationSample_t]:
    """One sample per process stamped now (µs), if newer than ``timeStamp``."""
    gpu = _gpu(handle)
    if not gpu.process_samples:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    now_us = int(time.time() * 1e6)
    if not gpu.processes or now_us <= timeStamp:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return [c_nvmlProcessUtilizationSample_t(pid, now_us, int(util), 0) for pid, util in gpu.processes.items()]


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    return _gpu(handle).uuid


def nvmlDeviceGetName(handle: _Handle) -> str:
    return _gpu(handle).name


def nvmlDeviceGetTotalEnergyConsumption(handle: _Handle) -> int:
    """Millijoules since the fake driver loaded, updated every ``counter_period_s``."""
    gpu = _gpu(handle)
    if not gpu.energy_counter:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    _count_read(gpu)
    elapsed = time.perf_counter() - _t0
    updated = math.floor(elapsed / gpu.counter_period_s) * gpu.counter_period_s
    glitch = gpu.jump_mj if gpu.jump_after_reads is not None and gpu.reads > gpu.jump_after_reads else 0
    return gpu.base_mj + int(gpu.power_w * updated * 1000) + glitch


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    """Milliwatts now."""
    gpu = _gpu(handle)
    _count_read(gpu)
    if gpu.power_read_s:
        time.sleep(gpu.power_read_s)
    return int(gpu.power_w * 1000)
