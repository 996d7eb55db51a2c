"""Three simulated GPUs for the roofline generator, and their rows for a hardware table.

The devices differ in peak FLOP/s, memory rate and power the way real generations do
(a fast, efficient one; a reference one; a small, less efficient one), so that their
energy per job is ordered the same way in the memory- and the compute-bound regime:
``Sim Fast`` < ``Sim Base`` < ``Sim Small``. :func:`write_fleet_table` writes the rows a
user would add to the hardware table (``ROOFLINE_HARDWARE_TABLE``) for them: peak
FLOP/s, bandwidth (2 bytes per element of the generator's memory proxy) and board power
(idle + dynamic + memory watts). Their ``source`` marks them simulated: the bandwidth is in the
generator's proxy units, far below a real GPU's, so the table's device ranges do not apply, and
such rows are read only with ``ROOFLINE_ALLOW_SIMULATED_HARDWARE=1`` (:data:`FLEET_ENV`,
:func:`load_fleet_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mlflow_roofline.core.gpu_datasheets import (
    COLUMNS,
    ENV_ALLOW_SIMULATED,
    ENV_HARDWARE_TABLE,
    SIMULATED_SOURCE,
    HardwareTable,
    load_hardware_table,
)
from mlflow_roofline.core.proxies import MEM_BYTES_PER_ELEMENT
from mlflow_roofline.testing.roofline_generator import RooflineHardware

BYTES_PER_ELEMENT = MEM_BYTES_PER_ELEMENT

FLEET: tuple[RooflineHardware, ...] = (
    RooflineHardware(name="Sim Base"),
    RooflineHardware(name="Sim Fast", peak_flops=30e12, mem_rate=2.2e9, idle_w=90.0, dynamic_w=380.0, memory_w=280.0),
    RooflineHardware(name="Sim Small", peak_flops=4e12, mem_rate=0.4e9, idle_w=30.0, dynamic_w=90.0, memory_w=70.0),
)


def fleet_rows(fleet: Sequence[RooflineHardware] = FLEET) -> list[str]:
    """One CSV line per simulated GPU, in the hardware table's columns."""
    return [
        f"{hw.name},{hw.name},{hw.peak_flops:g},{hw.peak_flops / 8:g},{hw.mem_rate * BYTES_PER_ELEMENT:g},"
        f"{hw.idle_w + hw.dynamic_w + hw.memory_w:g},{SIMULATED_SOURCE}mlflow_roofline.testing.hardware_fleet"
        for hw in fleet
    ]


def write_fleet_table(path: Path, fleet: Sequence[RooflineHardware] = FLEET) -> Path:
    """Write the fleet's hardware table (CSV) to ``path``; returns ``path``."""
    path.write_text("\n".join([",".join(COLUMNS), *fleet_rows(fleet)]) + "\n")
    return path


FLEET_ENV: dict[str, str] = {ENV_ALLOW_SIMULATED: "1"}
"""The environment under which a table holding the fleet's simulated rows is read."""


def load_fleet_table(path: Path) -> HardwareTable:
    """The shipped table extended by the fleet's table at ``path`` (simulated rows allowed)."""
    return load_hardware_table(path, env=FLEET_ENV)


def fleet_table_env(path: str | Path) -> dict[str, str]:
    """Environment variables under which a process (a served model) reads the fleet's table at ``path``."""
    return {**FLEET_ENV, ENV_HARDWARE_TABLE: str(path)}
