"""``make_meter``: build a meter by name, or let ``auto`` pick the best one available.

``auto`` tries, in order: for ``device="cuda"`` ``nvml``, ``nvml_power`` then ``rocm``
(AMD GPUs through amdsmi: PyTorch's ROCm build calls them ``cuda`` too); for
``device="cpu"`` ``rapl`` then ``estimate``; for ``device="auto"`` all five. The chosen
meter's :attr:`~mlflow_roofline.energy.base.EnergyMeter.selection` says which and why
the better ones were passed over; it is also logged at INFO level. A CUDA job never
falls back to a CPU meter silently: without a GPU meter ``auto`` raises, naming
``--meter estimate`` as the explicit way out.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from types import ModuleType
from typing import TypedDict

from mlflow_roofline.core.schema import DEVICE_CHOICES, DEVICES, ENERGY_SOURCE_DEVICE_KINDS
from mlflow_roofline.energy.base import EnergyMeter, MeterError
from mlflow_roofline.energy.estimate import EstimateMeter, resolve_watts_per_core
from mlflow_roofline.energy.nvml import NvmlMeter
from mlflow_roofline.energy.nvml_power import DEFAULT_SAMPLE_HZ, NvmlPowerMeter
from mlflow_roofline.energy.rapl import RaplMeter
from mlflow_roofline.energy.rocm import RocmMeter

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class MeterKind:
    """One meter of the registry: its name (the ``roofline.energy_source`` it logs) and the device kind it
    measures (``cuda`` for GPU meters, AMD's included, as PyTorch's ROCm build names them; ``cpu``)."""

    name: str
    device_kind: str


METER_KINDS: tuple[MeterKind, ...] = tuple(MeterKind(name, kind) for name, kind in ENERGY_SOURCE_DEVICE_KINDS.items())
"""Every meter, in the order ``auto`` tries them (best first): the schema's energy sources and their device kinds."""

METER_NAMES: tuple[str, ...] = ("auto", *(kind.name for kind in METER_KINDS))
METER_DEVICE_KIND: dict[str, str] = {kind.name: kind.device_kind for kind in METER_KINDS}
"""Each meter's device kind (a key of :data:`energy.devices.DEVICE_KINDS`)."""
AUTO_ORDER: dict[str, tuple[str, ...]] = {
    **{device: tuple(k.name for k in METER_KINDS if k.device_kind == device) for device in DEVICES},
    "auto": tuple(k.name for k in METER_KINDS),
}
"""The meters ``auto`` tries for a job on each device kind (``auto``: every one), in registry order."""


class MeterOptions(TypedDict, total=False):
    """The backend options :func:`make_meter` takes by keyword (for callers that pass them through)."""

    nvml: ModuleType | None
    amdsmi: ModuleType | None
    sample_hz: float | None
    rapl_root: str | None
    watts_per_core: float | str | None
    include_self: bool


def make_meter(
    name: str = "auto",
    device: str = "auto",
    gpu_indices: list[int] | None = None,
    *,
    nvml: ModuleType | None = None,
    amdsmi: ModuleType | None = None,
    sample_hz: float | None = None,
    rapl_root: str | None = None,
    watts_per_core: float | str | None = None,
    include_self: bool = True,
) -> EnergyMeter:
    """Build the meter ``name`` (one of :data:`METER_NAMES`) for a job on ``device``.

    Args:
        name: a meter name, or ``auto`` for the best available.
        device: where the job runs: ``cuda``, ``cpu`` or ``auto`` (steers ``auto`` only).
        gpu_indices: CUDA ordinals the NVML meters read, board indices ``rocm`` reads
            (``None``: every visible GPU).
        nvml: a pynvml-compatible module for the NVML meters (default: ``pynvml``).
        amdsmi: an amdsmi-compatible module for ``rocm`` (default: ``amdsmi``, the extra ``amd``).
        sample_hz: power samples per second for ``nvml_power`` (default 20).
        rapl_root: powercap directory for ``rapl`` (default ``/sys/class/powercap``).
        watts_per_core: figure for ``estimate`` (default: env var, else 6 W).
        include_self: whether ``estimate`` counts this process's own CPU time.
    Raises:
        MeterError: an unknown name or device, or a meter not available here (the
            message names the choices).
    """
    if name not in METER_NAMES:
        raise MeterError(f"meter: must be one of {', '.join(METER_NAMES)}, got {name!r}")
    if device not in DEVICE_CHOICES:
        raise MeterError(f"device: must be one of {', '.join(DEVICE_CHOICES)}, got {device!r}")
    if watts_per_core is not None:  # named as such even when auto would pick another meter
        resolve_watts_per_core(watts_per_core)
    builders: dict[str, Callable[[], EnergyMeter]] = {
        "nvml": lambda: _nvml(gpu_indices, nvml),
        "nvml_power": lambda: _nvml_power(gpu_indices, nvml, sample_hz),
        "rocm": lambda: RocmMeter(gpu_indices, amdsmi=amdsmi),
        "rapl": lambda: _rapl(rapl_root),
        "estimate": lambda: _estimate(watts_per_core, include_self),
    }
    if name != "auto":
        try:
            meter = builders[name]()
        except MeterError as exc:
            raise MeterError(f"meter {name} is not available here: {exc} (choices: {', '.join(METER_NAMES)})") from exc
        meter.selection = f"{name}: asked for by name"
        return meter
    passed_over: list[str] = []
    for candidate in AUTO_ORDER[device]:
        try:
            meter = builders[candidate]()
        except MeterError as exc:
            passed_over.append(str(exc))
            continue
        meter.selection = f"auto chose {candidate}" + (f" ({'; '.join(passed_over)})" if passed_over else "")
        logger.info("energy meter: %s", meter.selection)
        return meter
    raise MeterError(
        f"meter auto: no GPU energy meter for device {device} ({'; '.join(passed_over)}); "
        "pass meter estimate to count CPU time only"
    )


def _nvml(gpu_indices: list[int] | None, nvml: ModuleType | None) -> EnergyMeter:
    return NvmlMeter(gpu_indices, nvml=nvml)


def _nvml_power(gpu_indices: list[int] | None, nvml: ModuleType | None, sample_hz: float | None) -> EnergyMeter:
    return NvmlPowerMeter(gpu_indices, sample_hz=sample_hz or DEFAULT_SAMPLE_HZ, nvml=nvml)


def _rapl(root: str | None) -> EnergyMeter:
    return RaplMeter(root)


def _estimate(watts_per_core: float | str | None, include_self: bool) -> EnergyMeter:
    return EstimateMeter(watts_per_core, include_self=include_self)
