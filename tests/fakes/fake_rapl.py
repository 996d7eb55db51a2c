"""A fake powercap (RAPL) tree: zone folders with ``name``, ``energy_uj`` and ``max_energy_range_uj``."""

from __future__ import annotations

from pathlib import Path

MAX_UJ = 1_000_000  # a tiny counter range (1 J) so wraps are easy to build


def zone(root: Path, dirname: str, name: str, energy_uj: int, max_uj: int = MAX_UJ) -> Path:
    path = root / dirname
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path
