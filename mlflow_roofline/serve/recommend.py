"""Recommend mode: for each row's job, the strategy and device count that minimise an objective."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.candidates import Candidates, search
from mlflow_roofline.serve.emissions import add_emissions, unit_factors
from mlflow_roofline.serve.params import (
    DEFAULT_MAX_DEVICES,
    DEFAULT_OBJECTIVE,
    check_params,
)
from mlflow_roofline.serve.predict import PREDICT_OUTPUT_COLUMNS

RECOMMEND_OUTPUT_COLUMNS: tuple[str, ...] = (
    ("strategy", "num_devices")
    + PREDICT_OUTPUT_COLUMNS
    + ("objective", "candidates")
    + tuple(
        f"{prefix}_{what}"
        for prefix in ("energy_optimal", "time_optimal")
        for what in ("strategy", "num_devices", M_ENERGY_J, M_TIME_S)
    )
)


def objective_scores(grid: Mapping[str, np.ndarray], carbon: CarbonSettings | None = None) -> dict[str, np.ndarray]:
    """What each objective minimises, per (row, candidate).

    Joules, seconds, joule-seconds, and where known grams CO2e and cost. One request has
    one carbon intensity, PUE and price, so carbon and cost rank the choices as energy
    does; they say it in the unit the user pays in.
    """
    scores = {"energy": grid[M_ENERGY_J], "time": grid[M_TIME_S], "edp": grid[M_ENERGY_J] * grid[M_TIME_S]}
    for objective, per_joule in (unit_factors(carbon) if carbon is not None else {}).items():
        scores[objective] = grid[M_ENERGY_J] * per_joule
    return scores


def recommend_frame(
    law: FittedLaw,
    frame: pd.DataFrame,
    max_devices: int = DEFAULT_MAX_DEVICES,
    objective: str = DEFAULT_OBJECTIVE,
    carbon: CarbonSettings | None = None,
) -> pd.DataFrame:
    """For each row's job, the best strategy and device count for ``objective``.

    The row's own ``strategy``, ``num_devices`` and ``speedup`` are ignored; every valid
    (strategy, N <= max_devices) the law knows is evaluated with the speedup laws.

    Returns:
        One row per input row: the chosen ``strategy``, ``num_devices`` and its
        :data:`PREDICT_OUTPUT_COLUMNS`, the ``objective``, the number of ``candidates``
        evaluated, and the energy-optimal and time-optimal choices side by side
        (``energy_optimal_*``, ``time_optimal_*``: strategy, num_devices, energy_j, time_s).
        With ``carbon`` known, the chosen row's ``co2e_g`` (interval) and ``cost`` follow.

    Raises:
        InputError: INVALID_PARAMETER_VALUE for bad rows or params.
    """
    _, max_devices, objective = check_params("recommend", max_devices, objective, carbon)
    out = search(
        law, frame, max_devices, lambda cands, valid, grid, _: _recommend_rows(cands, valid, grid, objective, carbon)
    )
    return add_emissions(out, carbon)


def _recommend_rows(
    cands: Candidates,
    valid: np.ndarray,
    grid: dict[str, np.ndarray],
    objective: str,
    carbon: CarbonSettings | None,
) -> pd.DataFrame:
    scores = objective_scores(grid, carbon)

    def best(score: np.ndarray) -> np.ndarray:
        return np.argmin(np.where(valid, score, np.inf), axis=1)

    rows = np.arange(valid.shape[0])
    pick, pick_e, pick_t = best(scores[objective]), best(scores["energy"]), best(scores["time"])
    result: dict[str, np.ndarray] = {
        "strategy": cands.strategy[pick],
        "num_devices": cands.num_devices[pick].astype(np.int64),
    }
    result.update({k: grid[k][rows, pick] for k in PREDICT_OUTPUT_COLUMNS})
    result["objective"] = np.full(len(rows), objective, dtype=object)
    result["candidates"] = valid.sum(axis=1).astype(np.int64)
    for prefix, choice in (("energy_optimal", pick_e), ("time_optimal", pick_t)):
        result[f"{prefix}_strategy"] = cands.strategy[choice]
        result[f"{prefix}_num_devices"] = cands.num_devices[choice].astype(np.int64)
        result[f"{prefix}_energy_j"] = grid[M_ENERGY_J][rows, choice]
        result[f"{prefix}_time_s"] = grid[M_TIME_S][rows, choice]
    return pd.DataFrame(result)
