"""A fake of the ``amdsmi`` module (AMD SMI's Python library) for the functions the ``rocm`` meter calls.

Same names and shapes as the real module: ``amdsmi_init``/``amdsmi_shut_down`` (reference
counted), ``amdsmi_get_processor_handles``, ``amdsmi_get_gpu_asic_info`` (``market_name``...),
``amdsmi_get_gpu_board_info`` (``product_serial``...), ``amdsmi_get_energy_count`` returning
``{"energy_accumulator", "power" (its older name), "counter_resolution" (µJ per tick),
"timestamp" (ns)}``, and ``AmdSmiException`` / ``AmdSmiLibraryException`` with ``err_code``.

:func:`configure` sets the processors. A die draws a constant ``power_w``; its accumulator
follows wall time in ticks of ``resolution_uj``, starting at ``start_ticks`` and wrapping at
``wrap_ticks`` (2**32 models firmware that fills the 64-bit field from a 32-bit counter).
``misbehave`` models a glitching device or library: it gets the read's number (1 for the
first) and the true answer, and returns the answer to give, or raises.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NOT_INIT = 32


class AmdSmiException(Exception):
    """Base of amdsmi's exceptions."""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int) -> None:
        super().__init__(f"Error code:\n\t{err_code}")
        self.err_code = err_code
        self.err_info = "AMDSMI_STATUS_NOT_SUPPORTED" if err_code == AMDSMI_STATUS_NOT_SUPPORTED else "error"


@dataclasses.dataclass
class FakeDie:
    """One processor (a GPU, or one die of an MI250) as amdsmi lists it."""

    market_name: str = "AMD Instinct MI300X"
    board_serial: str = "692251001124"
    power_w: float = 500.0
    resolution_uj: float = 15.259
    start_ticks: int = 1_000_000
    wrap_ticks: int = 1 << 64
    energy: bool = True
    misbehave: Callable[[int, dict[str, object]], dict[str, object]] | None = None
    reads: int = 0


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


_dies: list[FakeDie] = []
_init_count = 0
_t0 = time.perf_counter()


def configure(dies: list[FakeDie]) -> None:
    """Set the node's processors; reset the init count and the clock."""
    global _dies, _init_count, _t0
    _dies = list(dies)
    _init_count = 0
    _t0 = time.perf_counter()


def init_count() -> int:
    """amdsmi_init calls not yet matched by amdsmi_shut_down."""
    return _init_count


def _die(handle: _Handle) -> FakeDie:
    if _init_count <= 0:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    return _dies[handle.index]


def amdsmi_init(flags: int = 2) -> None:
    global _init_count
    _init_count += 1


def amdsmi_shut_down() -> None:
    global _init_count
    if _init_count <= 0:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    _init_count -= 1


def amdsmi_get_processor_handles() -> list[_Handle]:
    if _init_count <= 0:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    return [_Handle(i) for i in range(len(_dies))]


def amdsmi_get_gpu_asic_info(handle: _Handle) -> dict[str, object]:
    die = _die(handle)
    return {
        "market_name": die.market_name,
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": "0x74a1",
        "rev_id": "0x00",
        "asic_serial": f"0x{0xA0 + handle.index:016X}",
        "oam_id": handle.index,
    }


def amdsmi_get_gpu_board_info(handle: _Handle) -> dict[str, object]:
    die = _die(handle)
    return {"model_number": "102-G30211-00", "product_serial": die.board_serial, "product_name": die.market_name}


def amdsmi_get_energy_count(handle: _Handle) -> dict[str, object]:
    """The accumulator (ticks of ``counter_resolution`` µJ) now, with the timestamp in ns."""
    die = _die(handle)
    if not die.energy:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    elapsed = time.perf_counter() - _t0
    ticks = (die.start_ticks + int(die.power_w * elapsed * 1e6 / die.resolution_uj)) % die.wrap_ticks
    die.reads += 1
    answer: dict[str, object] = {
        "energy_accumulator": ticks,
        "power": ticks,
        "counter_resolution": die.resolution_uj,
        "timestamp": time.time_ns(),
    }
    return answer if die.misbehave is None else die.misbehave(die.reads, answer)
