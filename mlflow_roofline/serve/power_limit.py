"""A served job's average power held to its GPUs' board power: energy and time made to agree with the power limit.

A GPU cannot draw more than its power limit on average over a run: the driver lowers its clocks
to stay under it, and the limit a GPU ships with is its datasheet board power (TDP), the
hardware table's ``board_power_w``. The energy law and the time law are fitted apart, so one
prediction's average power per device, ``P = E / (N t)``, can come out above it: most of all on
a GPU no run measured (its energy from the pooled covariate form, its time scaled from another
GPU by the roofline), and on models bigger than the runs. Such an ``(E, t)`` cannot be right in
both; the answer moves each halfway, in logs, onto ``P = board power``: energy (and its
interval) times ``sqrt(board / P)``, time times ``sqrt(P / board)``. With no reason to trust one
law more than the other, that is the nearest consistent pair (the projection of two estimates
of equal log spread onto the limit).

What it changed on each generator and table is in docs/benchmarks.md ("Energy and time held to the
board power").

It holds only where both are known: energy read from the devices themselves
(:data:`~core.schema.DEVICE_ENERGY_SOURCES`: NVML, ROCm SMI; RAPL and the estimate count other
parts) on hardware the table has a row for (``Synthetic GPU``, a CPU: left as they are).
"""

from __future__ import annotations

import numpy as np

from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.schema import DEVICE_ENERGY_SOURCES


def board_power_w(hardware: str, energy_source: str) -> float:
    """The board power (W) that bounds one device's average power in runs of ``energy_source`` on ``hardware``
    (a law's sources joined by ``+`` where its runs had several: each must be a device meter); NaN where none
    does (a meter that counts more than the devices, hardware the table does not know)."""
    if not all(source in DEVICE_ENERGY_SOURCES for source in energy_source.split("+")):
        return float("nan")
    spec = load_hardware_table().lookup(hardware)
    return float("nan") if spec is None else float(spec.board_power_w)


def power_limit_factor(energy_j: np.ndarray, time_s: np.ndarray, num_devices: np.ndarray, board_w: float) -> np.ndarray:
    """Per job, what multiplies its energy (and divides its time): ``sqrt(board / P)`` where its average power per
    device ``P = E / (N t)`` (W) exceeds ``board_w``, else 1 (also where ``board_w`` is NaN)."""
    if not np.isfinite(board_w):
        return np.ones(len(energy_j))
    with np.errstate(divide="ignore", invalid="ignore"):
        power = energy_j / (num_devices * time_s)
        over = np.isfinite(power) & (power > board_w)
    return np.where(over, np.sqrt(board_w / np.where(over, power, 1.0)), 1.0)
