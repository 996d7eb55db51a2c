"""One plausibility rule for every cumulative energy counter (``nvml``, ``rapl``, ``rocm``),
and for the power samples ``nvml_power`` integrates (a sample outside 0 to the GPU's bound).

A counter meter reads a raw counter per device and turns two consecutive reads into joules
with :meth:`CounterRule.joules`, which applies the rule:

- a step forward is energy only if it is within the device's physical bound over the time
  between the two reads: ``max_power_w × (seconds + SLACK_S)`` joules, where the power is the
  hardware table's board power × :data:`BOARD_POWER_MARGIN` for a GPU it knows, else
  :data:`MAX_GPU_POWER_W` per GPU, and :data:`MAX_RAPL_ZONE_POWER_W` per RAPL zone;
- a step back is a wraparound only where the counter's range is known (RAPL's
  ``max_energy_range_uj``, ROCm's counter width), and then only if the wrapped step is within
  the same bound; a reading outside the range is a glitch;
- any other step is a glitch: it adds nothing, the next read starts from the new value, and
  every window open across it reports ``energy_j=None`` with the glitch as its ``error``
  (:func:`~mlflow_roofline.energy.readings.window_measurement` compares the glitch count of
  the window's two snapshots), so an impossible reading is never logged as measured.

A read that fails, or gives no number (NaN, a zero or NaN resolution), is a
:class:`~mlflow_roofline.energy.readings.ReadError` of the meter: the window's one-line error.
"""

from __future__ import annotations

import math

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table

SLACK_S = 1.0
"""Seconds added to the time between two reads in the bound: a counter's update period
(NVML's 20-100 ms), a read delayed on a busy machine."""
BOARD_POWER_MARGIN = 2.0
"""Times its datasheet board power (W) a GPU may draw between two reads (boost, transients)."""
MAX_GPU_POWER_W = 2000.0
"""W per GPU the hardware table does not know: more than any board draws today."""
MAX_RAPL_ZONE_POWER_W = 2000.0
"""W per RAPL zone (a CPU package or its DRAM): more than any package draws today."""


def gpu_power_bound_w(hardware: str) -> float:
    """The most watts a GPU named ``hardware`` can draw: board power × margin where the table knows it."""
    try:
        spec = load_hardware_table().lookup(hardware)
    except ConfigError:  # a broken user table: measure with the fixed bound (the table's users say why)
        spec = None
    return MAX_GPU_POWER_W if spec is None else spec.board_power_w * BOARD_POWER_MARGIN


class CounterRule:
    """The plausibility rule of one meter's counters, and the glitches it found.

    Args:
        source: the meter's name (``rocm``), which starts every glitch's text.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.glitches = 0
        self.glitch: str | None = None

    def joules(
        self,
        key: str,
        last: int,
        now: int,
        seconds: float,
        joules_per_unit: float,
        max_power_w: float,
        wrap: int | None = None,
        unit: str = "",
    ) -> float:
        """Joules between two raw reads ``last`` and ``now`` of device ``key``, ``seconds`` apart.

        ``joules_per_unit`` converts the counter's units (``unit``, for messages) to joules;
        ``wrap`` is the counter's range (it counts ``0 .. wrap - 1``), None when it never wraps.
        Returns 0 for a glitch and records it (:attr:`glitches`, :attr:`glitch`).
        """
        if wrap is not None and not 0 <= now < wrap:
            return self._refuse(f"counter of {key} reads {now}{unit}, outside its range 0..{wrap - 1}")
        step = now - last
        back = step < 0
        if back:
            if wrap is None:
                return self._refuse(f"counter of {key} went back from {last} to {now}{unit} (it never wraps)")
            step += wrap
            if step < 0:  # from a reading past the range: no wrap explains it
                return self._refuse(f"counter of {key} went back from {last} to {now}{unit}, past its range")
        joules = step * joules_per_unit
        bound = max_power_w * (max(seconds, 0.0) + SLACK_S)
        if joules <= bound:
            return joules
        what = f"went back from {last} to {now}{unit}: as a wraparound" if back else "jumped"
        return self._refuse(
            f"counter of {key} {what} {joules:.3g} J in {seconds:.3g} s, over the device's bound of "
            f"{bound:.3g} J ({max_power_w:g} W)"
        )

    def watts(self, key: str, watts: float, max_power_w: float) -> bool:
        """Whether a power sample (``nvml_power``) is within the device's bound, the same bound's
        power; a glitch is recorded when it is not (NaN, negative, above ``max_power_w``)."""
        if 0.0 <= watts <= max_power_w:
            return True
        self._refuse(f"power of {key} read {watts:g} W, outside the device's bound of 0-{max_power_w:g} W", "sample")
        return False

    def _refuse(self, why: str, reading: str = "counter") -> float:
        self.glitches += 1
        self.glitch = f"{self.source}: {why}: a {reading} glitch, not energy"
        return 0.0


def finite_number(value: object) -> float | None:
    """``value`` as a finite float, None when it is not one (NaN, infinite, text, None)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
