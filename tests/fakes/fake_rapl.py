"""A fake powercap (RAPL) tree: zone folders with ``name``, ``energy_uj`` and ``max_energy_range_uj``."""

from __future__ import annotations

import os
from pathlib import Path

MAX_UJ = 1_000_000  # a tiny counter range (1 J) so wraps are easy to build


def zone(root: Path, dirname: str, name: str, energy_uj: int, max_uj: int = MAX_UJ) -> Path:
    path = root / dirname
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def set_uj(path: Path, value: int) -> None:
    """Set the counter of the zone folder ``path`` atomically, as a sysfs read is: a meter's sampler thread
    reads it while a test writes it, and a plain rewrite (truncate, then write) can be read empty."""
    tmp = path / "energy_uj.tmp"
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path / "energy_uj")
