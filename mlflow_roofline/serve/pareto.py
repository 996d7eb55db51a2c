"""Pareto mode: for each row's job, every placement no other placement beats in both energy and time.

A placement (strategy, N <= max_devices) is on the energy-time frontier of a job when no
other valid placement is at least as good in both energy and time and strictly better in
one. Sorted by time, the frontier runs from the fastest choice to the greenest, each
step trading seconds for joules, so a user sees the whole trade-off rather than two ends.

The output is long: one output row per frontier point, ``row`` naming the input row
(0-based); rows follow the input order, points within a row go from fastest to slowest.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.candidates import Candidates, search
from mlflow_roofline.serve.emissions import add_emissions
from mlflow_roofline.serve.params import (
    DEFAULT_MAX_DEVICES,
    DEFAULT_OBJECTIVE,
    check_params,
)

PARETO_OUTPUT_COLUMNS: tuple[str, ...] = (
    "row",
    "strategy",
    "num_devices",
    M_ENERGY_J,
    "energy_j_lower",
    "energy_j_upper",
    M_TIME_S,
    "extrapolated",
)
"""Columns of a pareto answer; the emission columns follow where the carbon figures are known."""


def frontier(energy: np.ndarray, time_s: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The energy-time frontier of each row of a rows x candidates grid.

    Returns:
        ``order`` (each row's candidates sorted by time, then energy) and ``on_front``
        (same shape, in that order): True where the candidate is non-dominated.
    """
    e = np.where(valid, energy, np.inf)
    t = np.where(valid, time_s, np.inf)
    order = np.lexsort((e, t), axis=-1)
    e_sorted = np.take_along_axis(e, order, axis=1)
    # Sorted by time, a candidate is dominated exactly when an earlier (no slower) one used no more energy.
    least_before = np.minimum.accumulate(e_sorted, axis=1)
    least_before = np.concatenate([np.full((len(e), 1), np.inf), least_before[:, :-1]], axis=1)
    return order, np.isfinite(e_sorted) & (e_sorted < least_before)


def pareto_frame(
    law: FittedLaw,
    frame: pd.DataFrame,
    max_devices: int = DEFAULT_MAX_DEVICES,
    carbon: CarbonSettings | None = None,
) -> pd.DataFrame:
    """Each row's energy-time frontier over every valid (strategy, N <= max_devices).

    The row's own ``strategy``, ``num_devices`` and ``speedup`` are ignored, as in
    recommend mode.

    Returns:
        :data:`PARETO_OUTPUT_COLUMNS` (energies in joules with their 95 % interval, time
        in seconds), one row per frontier point, then ``co2e_g`` and ``cost`` where
        ``carbon`` knows them (the co2e interval is the energy interval times the same
        factor; it is left out to keep large answers small: the scoring server's JSON
        encoding is most of a pareto request's time).

    Raises:
        InputError: INVALID_PARAMETER_VALUE for bad rows or params.
    """
    _, max_devices, _ = check_params("pareto", max_devices, DEFAULT_OBJECTIVE, carbon)
    out = search(law, frame, max_devices, _frontier_rows)
    return add_emissions(out, carbon, interval=False)


def _frontier_rows(cands: Candidates, valid: np.ndarray, grid: dict[str, np.ndarray], first_row: int) -> pd.DataFrame:
    order, on_front = frontier(grid[M_ENERGY_J], grid[M_TIME_S], valid)
    rows, position = np.nonzero(on_front)  # row-major: by row, then by time
    choice = order[rows, position]
    result: dict[str, np.ndarray] = {
        "row": (rows + first_row).astype(np.int64),
        "strategy": cands.strategy[choice],
        "num_devices": cands.num_devices[choice].astype(np.int64),
    }
    result.update({k: grid[k][rows, choice] for k in PARETO_OUTPUT_COLUMNS[3:]})
    return pd.DataFrame(result)
