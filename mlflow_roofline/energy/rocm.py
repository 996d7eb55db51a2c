"""``rocm``: AMD GPU energy from the accumulator ``amdsmi`` reads (AMD's Python library).

``amdsmi_get_energy_count(handle)`` returns the energy accumulator in ticks
(``energy_accumulator``; ``power`` in amdsmi before ROCm 6.2), ``counter_resolution``
(microjoules per tick, 15.3 µJ on MI200/MI300) and a ``timestamp`` (ns). Joules are
ticks × resolution / 10⁶; a window's energy is the difference of two reads. The library
types the accumulator as 64 bits, but firmware fills it from narrower counters: a reading
lower than the one before may be one wrap, of 2³² ticks while both readings fit in 32 bits,
else of 2⁶⁴. A background read every :data:`WRAP_CHECK_S` seconds during a window
catches each wrap (2³² ticks of 15.3 µJ are 65 kJ: over a minute at 1 kW). Every step is
checked by :mod:`~mlflow_roofline.energy.counters` against the board's power (the hardware
table's, else 2 kW): a step back that would be an impossible wrap, or an impossible jump, is
a glitch that fails the windows open across it. A reading that is not a count (NaN), a
resolution that is not a positive number, or any exception of amdsmi is the window's error
(:class:`~mlflow_roofline.energy.base.MeterError` when the meter is built).

An MI250 (and MI250X) is two dies (GCDs) on one board; amdsmi lists them as two processors
and may report the board's energy on one die and 0 on the other. Dies
with the same board serial (``amdsmi_get_gpu_board_info``'s ``product_serial``) are summed
as one device, ``rocm:<i>`` numbered in the library's order of boards. The hardware name is
the ASIC's ``market_name`` (``amdsmi_get_gpu_asic_info``). ``amdsmi`` is the optional extra
``amd`` (``pip install 'mlflow-roofline[amd]'``); it needs the ROCm driver's ``libamd_smi``.
"""

from __future__ import annotations

import dataclasses
import time
from types import ModuleType

from mlflow_roofline.core.host import gpus_hardware_name
from mlflow_roofline.energy.base import EnergyMeter, MeterError, ReadError, Snapshot
from mlflow_roofline.energy.counters import CounterRule, finite_number, gpu_power_bound_w
from mlflow_roofline.energy.sampler import PeriodicSampler

UJ_PER_J = 1e6
WRAP_CHECK_S = 1.0
"""Seconds between background reads that catch accumulator wraps during a window."""
WRAP_32 = 1 << 32
WRAP_64 = 1 << 64

#: Module-level hook: set to an amdsmi-compatible module to use it instead of ``import amdsmi``.
AMDSMI: ModuleType | None = None


def load_amdsmi(amdsmi: ModuleType | None = None) -> ModuleType:
    """The amdsmi module to use: the argument, else :data:`AMDSMI`, else ``import amdsmi``.

    Raises:
        MeterError: amdsmi is not installed, naming the extra that installs it.
    """
    if amdsmi is not None:
        return amdsmi
    if AMDSMI is not None:
        return AMDSMI
    try:
        import amdsmi as module  # deferred: the ROCm library is loaded only by the meter that reads it
    except ImportError as exc:
        raise MeterError(
            "rocm: the amdsmi package is not installed; install the extra: pip install 'mlflow-roofline[amd]' "
            "(it needs ROCm's libamd_smi)"
        ) from exc
    return module


def _ticks(reading: object, key: str) -> tuple[int, float]:
    """(accumulator ticks, µJ per tick) from one ``amdsmi_get_energy_count`` answer; ReadError when
    the answer holds no count (NaN, "N/A") or no positive resolution."""
    if not isinstance(reading, dict):
        raise ReadError(f"amdsmi_get_energy_count({key}) gave {type(reading).__name__}, not a dict")
    raw = reading.get("energy_accumulator", reading.get("power"))
    if raw is None:
        raise ReadError(f"amdsmi_get_energy_count({key}) gave no accumulator ({sorted(map(str, reading))})")
    number = raw if isinstance(raw, int) and not isinstance(raw, bool) else finite_number(raw)  # ints stay exact
    if number is None or number < 0 or number != int(number):
        raise ReadError(f"amdsmi_get_energy_count({key}) gave the accumulator {raw!r:.40}, not a count of ticks")
    resolution = finite_number(reading.get("counter_resolution"))
    if resolution is None or resolution <= 0:
        raise ReadError(
            f"amdsmi_get_energy_count({key}) gave the counter_resolution "
            f"{reading.get('counter_resolution')!r:.40}, not a positive µJ per tick"
        )
    return int(number), resolution


@dataclasses.dataclass
class _Die:
    handle: object
    last: int = 0
    last_t: float = 0.0
    total_j: float = 0.0


@dataclasses.dataclass
class _Board:
    key: str
    name: str
    dies: list[_Die]
    max_power_w: float = 0.0


class RocmMeter(EnergyMeter):
    """Energy of AMD GPUs from amdsmi's energy accumulator (joules per ``rocm:i`` board).

    Args:
        gpu_indices: indices of the boards to read, in amdsmi's order (``None``: every one).
        amdsmi: an amdsmi-compatible module (default: the installed ``amdsmi``).
    Raises:
        MeterError: amdsmi missing or failing to start, no AMD GPU, a bad index, or a GPU
            without the accumulator (virtual machine guests).
    """

    source = "rocm"
    scope = "device"
    update_period_s = 0.001
    sampled = True  # the wrap-check sampler updates the totals _cumulative reads

    def __init__(self, gpu_indices: list[int] | None = None, *, amdsmi: ModuleType | None = None) -> None:
        super().__init__()
        self._smi = load_amdsmi(amdsmi)
        smi = self._smi
        try:
            smi.amdsmi_init()
        except Exception as exc:  # AmdSmiException, or a RuntimeError of the library underneath
            raise MeterError(f"rocm: amdsmi cannot start here ({type(exc).__name__}: {exc})") from exc
        try:
            self._boards = self._open(gpu_indices)
        except BaseException:
            smi.amdsmi_shut_down()
            raise
        self._rule = CounterRule(self.source)
        self._sampler = PeriodicSampler(self._accumulate_locked, WRAP_CHECK_S, "roofline-rocm")

    def _open(self, gpu_indices: list[int] | None) -> list[_Board]:
        smi = self._smi
        try:
            handles = list(smi.amdsmi_get_processor_handles())
            grouped: dict[str, list[object]] = {}
            names: dict[str, str] = {}
            for i, handle in enumerate(handles):
                serial = str(smi.amdsmi_get_gpu_board_info(handle).get("product_serial") or "").strip()
                group = serial or f"processor-{i}"
                grouped.setdefault(group, []).append(handle)
                names.setdefault(group, str(smi.amdsmi_get_gpu_asic_info(handle)["market_name"]).strip())
        except Exception as exc:  # AmdSmiException, a RuntimeError, an answer without its keys
            raise MeterError(f"rocm: cannot list the AMD GPUs ({type(exc).__name__}: {exc})") from exc
        if not grouped:
            raise MeterError("rocm: amdsmi sees no AMD GPU")
        groups = list(grouped)
        chosen = list(range(len(groups))) if gpu_indices is None else list(gpu_indices)
        if not chosen or any(not 0 <= i < len(groups) for i in chosen):
            raise MeterError(f"rocm: gpu_indices must be board indices in 0..{len(groups) - 1}, got {gpu_indices}")
        boards = [_Board(f"rocm:{i}", names[groups[i]], [_Die(h) for h in grouped[groups[i]]]) for i in chosen]
        for board in boards:
            board.max_power_w = gpu_power_bound_w(board.name)
            for die in board.dies:
                try:
                    answer = smi.amdsmi_get_energy_count(die.handle)
                except smi.AmdSmiException as exc:
                    raise MeterError(
                        f"rocm: {board.key} ({board.name}) has no energy accumulator ({exc}); "
                        "virtual machine guests do not expose it"
                    ) from exc
                except Exception as exc:
                    raise MeterError(
                        f"rocm: {board.key} ({board.name}): amdsmi_get_energy_count failed "
                        f"({type(exc).__name__}: {exc})"
                    ) from exc
                try:
                    _ticks(answer, board.key)
                except ReadError as exc:
                    raise MeterError(f"rocm: {board.key} ({board.name}) gives no usable energy reading: {exc}") from exc
        return boards

    @property
    def hardware(self) -> str:
        return gpus_hardware_name(b.name for b in self._boards)

    @property
    def devices(self) -> list[str]:
        """Keys of the measured boards (``rocm:0``...)."""
        return [b.key for b in self._boards]

    def _read(self, die: _Die, key: str) -> tuple[int, float]:
        try:
            answer = self._smi.amdsmi_get_energy_count(die.handle)
        except Exception as exc:  # AmdSmiException, or a RuntimeError of the library underneath
            raise ReadError(f"amdsmi_get_energy_count({key}) failed: {type(exc).__name__}: {exc}") from exc
        return _ticks(answer, key)

    def _accumulate(self) -> None:
        for board in self._boards:
            for die in board.dies:
                now, resolution_uj = self._read(die, board.key)
                t = time.monotonic()
                wrap = WRAP_32 if max(die.last, now) < WRAP_32 else WRAP_64
                die.total_j += self._rule.joules(
                    board.key,
                    die.last,
                    now,
                    t - die.last_t,
                    resolution_uj / UJ_PER_J,
                    board.max_power_w,
                    wrap,
                    " ticks",
                )
                die.last, die.last_t = now, t

    def _accumulate_locked(self) -> None:
        with self._lock:
            self._accumulate()

    def _open_session(self) -> None:
        with self._lock:
            for board in self._boards:
                for die in board.dies:
                    die.last, _ = self._read(die, board.key)
                    die.last_t = time.monotonic()
                    die.total_j = 0.0
        self._sampler.start()

    def _cumulative(self) -> Snapshot:
        """Joules per board since the session opened (its dies summed, wraps included, glitches counted)."""
        if self._sampler.error is not None:
            raise ReadError(f"amdsmi read failed mid-window: {self._sampler.error}")
        self._accumulate()
        rule = self._rule
        return Snapshot(
            {b.key: sum(d.total_j for d in b.dies) for b in self._boards}, glitches=rule.glitches, glitch=rule.glitch
        )

    def _close_session(self) -> None:
        self._sampler.stop()

    def _close(self) -> None:
        self._sampler.close()
        self._smi.amdsmi_shut_down()
