"""``rapl``: CPU package and DRAM energy from the Linux powercap interface.

Zones are read from ``<root>/intel-rapl:<n>`` (packages; AMD CPUs expose the same
interface) and ``<root>/intel-rapl:<n>:<m>`` whose ``name`` is ``dram``. Core, uncore
and psys zones are left out: core and uncore are inside their package, psys overlaps
everything. Each zone's ``energy_uj`` counts microjoules and wraps to 0 past
``max_energy_range_uj``; a read lower than the one before means one wrap. A background
read every ``wrap_check_s`` during a window catches every wrap of long windows. Every step
is checked by :mod:`~mlflow_roofline.energy.counters` against
:data:`~mlflow_roofline.energy.counters.MAX_RAPL_ZONE_POWER_W` per zone: a step back that
would be an impossible wrap, a jump past that power, or a reading past
``max_energy_range_uj`` is a glitch that fails the windows open across it.

The counters cover the whole machine (scope ``node``): one process per node reports them.
Since Linux 5.10 ``energy_uj`` is readable by root only (CVE-2020-8694); then this meter
is unavailable and ``auto`` falls back to ``estimate``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

from mlflow_roofline.core.host import cpu_hardware_name
from mlflow_roofline.energy.base import EnergyMeter, MeterError, ReadError, Snapshot
from mlflow_roofline.energy.counters import MAX_RAPL_ZONE_POWER_W, CounterRule
from mlflow_roofline.energy.sampler import PeriodicSampler

DEFAULT_ROOT = "/sys/class/powercap"
ROOT_ENV = "ROOFLINE_RAPL_ROOT"
"""Environment variable overriding the powercap root (for containers that mount it elsewhere)."""

UJ_PER_J = 1e6
ASSUMED_MAX_ZONE_W = MAX_RAPL_ZONE_POWER_W
"""A power no package or DRAM zone reaches (W): sets the wrap-check period from the counter range."""

_ZONE_RE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")


@dataclasses.dataclass
class _Zone:
    key: str
    energy_path: Path
    max_range_uj: int
    last_uj: int = 0
    last_t: float = 0.0
    total_j: float = 0.0


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def discover_zones(root: Path) -> list[_Zone]:
    """The package and DRAM zones under ``root`` (MeterError when none is readable)."""
    if not root.is_dir():
        raise MeterError(f"rapl: no powercap interface at {root}")
    names: dict[str, str] = {}
    entries = sorted(p for p in root.iterdir() if _ZONE_RE.match(p.name))
    for path in entries:
        try:
            names[path.name] = (path / "name").read_text().strip()
        except OSError:
            continue
    zones = []
    for path in entries:
        match = _ZONE_RE.match(path.name)
        name = names.get(path.name)
        if match is None or name is None:
            continue
        if match.group(2) is None and name.startswith("package"):
            key = name
        elif match.group(2) is not None and name == "dram":
            key = f"{names.get(f'intel-rapl:{match.group(1)}', 'package-' + match.group(1))}/dram"
        else:
            continue
        energy = path / "energy_uj"
        try:
            _read_int(energy)
            max_range = _read_int(path / "max_energy_range_uj")
            if max_range <= 0:
                raise ValueError(f"max_energy_range_uj is {max_range}")
        except PermissionError as exc:
            raise MeterError(
                f"rapl: {energy} is not readable by this user (root-only since Linux 5.10); "
                "run as root or use meter estimate"
            ) from exc
        except (OSError, ValueError) as exc:
            raise MeterError(f"rapl: cannot read {energy} ({exc})") from exc
        zones.append(_Zone(key, energy, max_range))
    if not zones:
        raise MeterError(f"rapl: no package zone under {root}")
    return zones


class RaplMeter(EnergyMeter):
    """Energy of the node's CPU packages and DRAM from RAPL (joules per zone).

    Args:
        root: the powercap directory (default ``$ROOFLINE_RAPL_ROOT`` or ``/sys/class/powercap``).
        wrap_check_s: seconds between background reads that catch wraparounds during a
            window (default: the time the fastest-wrapping zone takes at 2 kW, 0.05-60 s).
    Raises:
        MeterError: no readable package zone.
    """

    source = "rapl"
    scope = "node"
    update_period_s = 0.001
    sampled = True  # the wrap-check sampler updates the zones _cumulative reads

    def __init__(self, root: str | os.PathLike[str] | None = None, *, wrap_check_s: float | None = None) -> None:
        super().__init__()
        self.root = Path(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
        self._zones = discover_zones(self.root)
        if wrap_check_s is None:
            shortest = min(z.max_range_uj for z in self._zones) / UJ_PER_J / ASSUMED_MAX_ZONE_W
            wrap_check_s = min(max(shortest, 0.05), 60.0)
        self._rule = CounterRule(self.source)
        self._sampler = PeriodicSampler(self._accumulate_locked, wrap_check_s, "roofline-rapl")

    @property
    def hardware(self) -> str:
        return cpu_hardware_name()

    @property
    def devices(self) -> list[str]:
        """Keys of the measured zones (``package-0``, ``package-0/dram``...)."""
        return [z.key for z in self._zones]

    def _read(self, zone: _Zone) -> int:
        try:
            return _read_int(zone.energy_path)
        except (OSError, ValueError) as exc:
            raise ReadError(f"reading {zone.energy_path} failed: {exc}") from exc

    def _accumulate(self) -> None:
        for zone in self._zones:
            now = self._read(zone)
            t = time.monotonic()
            zone.total_j += self._rule.joules(
                zone.key,
                zone.last_uj,
                now,
                t - zone.last_t,
                1 / UJ_PER_J,
                MAX_RAPL_ZONE_POWER_W,
                zone.max_range_uj,
                " µJ",
            )
            zone.last_uj, zone.last_t = now, t

    def _accumulate_locked(self) -> None:
        with self._lock:
            self._accumulate()

    def _open_session(self) -> None:
        with self._lock:
            for zone in self._zones:
                zone.last_uj = self._read(zone)
                zone.last_t = time.monotonic()
                zone.total_j = 0.0
        self._sampler.start()

    def _cumulative(self) -> Snapshot:
        """Joules per zone since the session opened, wraparounds included, glitches counted."""
        if self._sampler.error is not None:
            raise ReadError(f"RAPL read failed mid-window: {self._sampler.error}")
        self._accumulate()
        rule = self._rule
        return Snapshot({z.key: z.total_j for z in self._zones}, glitches=rule.glitches, glitch=rule.glitch)

    def _close_session(self) -> None:
        self._sampler.stop()

    def _close(self) -> None:
        self._sampler.close()
