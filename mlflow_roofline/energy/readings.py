"""What meters return: :class:`Measurement` of a window, the errors, and the snapshots backends produce.

Imports only core; never mlflow.
"""

from __future__ import annotations

import dataclasses

from mlflow_roofline.core.errors import RooflineError

SCOPES: tuple[str, ...] = ("device", "node", "process", "module")
"""What a meter's joules cover: the GPUs of this process, the whole machine, this process
tree, or a Grace Hopper module (GPU, Grace CPU and their memory: no RAPL is added on top).
A ``node`` reading must be reported by one process per node only."""


class MeterError(RooflineError):
    """A meter that cannot be built or used here (unknown, unavailable, misused)."""


class ReadError(Exception):
    """A counter read failed; the window it belongs to reports it as ``error``."""


def read_failure(source: str, exc: BaseException) -> str:
    """One line naming the meter for a failed read: a :class:`ReadError`'s text
    (``rapl: reading .../energy_uj failed: ...``), or for a failure the meter's library does not
    document, its type too (``rocm: RuntimeError: busy``)."""
    text = " ".join(str(exc).split())  # one line
    if not isinstance(exc, ReadError):
        text = f"{type(exc).__name__}: {text}"
    return (text if text.startswith(f"{source}: ") else f"{source}: {text}")[:500]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The result of one measurement window.

    Attributes:
        energy_j: total energy over the window in joules; ``None`` when it could not be
            measured (then ``error`` says why). Never a stand-in zero.
        per_device_j: joules per measured device (``cuda:0``, ``package-0``, ``cpu``...).
        time_s: wall time of the window in seconds (``time.perf_counter``).
        source: the meter that measured it (``nvml``, ``nvml_power``, ``rapl``, ``estimate``).
        error: why ``energy_j`` is ``None``; ``None`` when the reading is good.
        warning: a caveat on a good reading (too short a window, a stalled device...).
        started_at: when the window opened, Unix time in seconds (``time.time``).
        energy_device_j: the whole devices' joules when ``energy_j`` is this job's share of
            shared GPUs (see :mod:`mlflow_roofline.energy.gpu_share`); None otherwise.
        gpu_share: how the share was told (``exclusive``, ``process_utilization``, ``mig``,
            ``device (<why not>)``); None for a meter that does not attribute.
    """

    energy_j: float | None
    per_device_j: dict[str, float]
    time_s: float
    source: str
    error: str | None = None
    warning: str | None = None
    started_at: float | None = None
    energy_device_j: float | None = None
    gpu_share: str | None = None

    @classmethod
    def good(
        cls, energy_j: float, per_device_j: dict[str, float], time_s: float, source: str, started_at: float | None
    ) -> Measurement:
        """A good reading without caveats: the object ``Measurement(energy_j, per_device_j, time_s, source,
        started_at=started_at)`` is, built in a third of its time (the frozen ``__init__`` sets each of the
        nine fields through ``object.__setattr__``; a window around every training step builds one)."""
        measurement = _new_object(cls)
        fields = measurement.__dict__
        fields.update(_MEASUREMENT_DEFAULTS)
        fields.update(zip(_MEASUREMENT_REQUIRED, (energy_j, per_device_j, time_s, source)))
        fields["started_at"] = started_at
        return measurement

    @property
    def ok(self) -> bool:
        """True when ``energy_j`` holds a reading."""
        return self.energy_j is not None

    @property
    def avg_power_w(self) -> float | None:
        """Average power over the window in watts (``energy_j / time_s``), if measured."""
        if self.energy_j is None or self.time_s <= 0:
            return None
        return self.energy_j / self.time_s


_new_object = object.__new__
_MEASUREMENT_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(Measurement) if f.default is not dataclasses.MISSING
}
"""Every field of :class:`Measurement` with a default, and the default: what :meth:`Measurement.good` starts from."""
_MEASUREMENT_REQUIRED = tuple(f.name for f in dataclasses.fields(Measurement) if f.default is dataclasses.MISSING)
"""The fields of :class:`Measurement` without a default, in order (energy, per device, time, source)."""


@dataclasses.dataclass(slots=True)
class Snapshot:
    """A cumulative reading: joules per device since an origin the backend chooses (read-only by convention).

    Not frozen: a frozen dataclass costs several microseconds more to build, and two are
    built per window around every training step.

    Attributes:
        per_device_j: cumulative joules per device (only differences of two snapshots mean anything).
        samples: samples the backend had taken when the snapshot was made (sampled meters).
        shares: per GPU, the running sums of :class:`~mlflow_roofline.energy.gpu_share.ShareTracker`
            (meters that attribute a shared GPU).
        glitches: counter glitches the meter had found when the snapshot was made (see
            :mod:`~mlflow_roofline.energy.counters`): a window whose two snapshots differ is not measured.
        glitch: the last glitch, one line.
        at: ``time.perf_counter()`` (s) of the sample the joules are integrated up to, for meters that
            integrate sampled power: a window's time then spans its two snapshots exactly, so its energy
            and time cover the same interval however late the snapshot is taken. None: the window's clock.
    """

    per_device_j: dict[str, float]
    samples: int = 0
    shares: dict[str, tuple[float, float, int, int]] | None = None
    glitches: int = 0
    glitch: str | None = None
    at: float | None = None


@dataclasses.dataclass
class Window:
    """Handle yielded by :meth:`EnergyMeter.window`; ``measurement`` is set after the block."""

    measurement: Measurement | None = None


def window_measurement(
    source: str,
    update_period_s: float,
    start: Snapshot,
    end: Snapshot,
    time_s: float,
    started_at: float | None,
    warning: str | None = None,
) -> Measurement:
    """The :class:`Measurement` of a window of ``time_s`` seconds from its two snapshots.

    Joules per device are ``end - start`` (never below 0). A window shorter than
    ``update_period_s`` (seconds between two counter updates) is flagged; one where no
    counter advanced, or across which a counter glitched (an impossible step, see
    :mod:`~mlflow_roofline.energy.counters`), has ``energy_j=None`` and an ``error``; a device
    whose counter did not advance is named in ``warning``, after the backend's own ``warning``.
    """
    if end.glitches != start.glitches:
        return Measurement(None, {}, time_s, source, end.glitch, warning, started_at)
    now = end.per_device_j
    per_device: dict[str, float] = {}
    total = 0.0
    stalled = False
    for key, before in start.per_device_j.items():  # a plain loop: this runs around every training step
        joules = now[key] - before
        if joules > 0.0:
            per_device[key] = joules
            total += joules
        else:
            per_device[key] = 0.0
            stalled = True
    short = time_s < update_period_s
    if not stalled and not short and warning is None and per_device:
        return Measurement.good(total, per_device, time_s, source, started_at)  # the common case
    warnings = [warning] if warning else []
    if short:
        warnings.append(
            f"window of {time_s:.3g} s is shorter than the {source} counter's "
            f"update period (~{update_period_s:g} s): the reading is coarse"
        )
    if not per_device or total <= 0.0:
        why = "too short a window" if short else "no update in the window"
        error = f"{source} counter did not advance during the {time_s:.3g} s window ({why})"
        return Measurement(None, per_device, time_s, source, error, "; ".join(warnings) or None, started_at)
    if stalled:
        names = sorted(k for k, v in per_device.items() if v <= 0.0)
        warnings.append(f"counter of {', '.join(names)} did not advance")
    return Measurement(total, per_device, time_s, source, None, "; ".join(warnings) or None, started_at)
