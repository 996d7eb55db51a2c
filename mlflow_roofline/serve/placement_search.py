"""Recommend and pareto mode: every placement of a job, evaluated at once, searched for the best or the frontier.

A placement is a (strategy, device count): ``single`` on one device, every other strategy
the law knows on 2 to ``max_devices`` devices. A candidate is valid for a row when it
satisfies the placement rules of :data:`mlflow_roofline.core.rules.PLACEMENT_RULES` (tp
splits heads and ffn, ddp/fsdp split the batch). Both modes ignore a row's own
``strategy``, ``num_devices`` and ``speedup``, evaluate the row's job under every candidate
with the law's speedups (:func:`search`, in chunks so that memory stays bounded) through
the one evaluation of :func:`mlflow_roofline.serve.predict.evaluate_jobs` (a law pooled over
several hardware: :func:`~mlflow_roofline.serve.predict.evaluate_pooled`, the named hardware's
own speedups and time with the pooled energy, exactly as predict mode prices a row), then:

- recommend mode (:func:`recommend_frame`) picks, for each row's job, the placement that
  minimises an objective, beside the energy-optimal and time-optimal ones;
- pareto mode (:func:`pareto_frame`) keeps, for each row's job, every placement no other
  beats in both energy and time. A placement is on the energy-time frontier when no other
  valid placement is at least as good in both energy and time and strictly better in one.
  Sorted by time, the frontier runs from the fastest choice to the greenest, each step
  trading seconds for joules, so a user sees the whole trade-off rather than two ends. The
  output is long: one output row per frontier point, ``row`` naming the input row
  (0-based); rows follow the input order, points within a row go from fastest to slowest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.core.rules import PLACEMENT_RULES, satisfied
from mlflow_roofline.core.schema import HARDWARE_COLUMN, M_ENERGY_J, M_TIME_S
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.emissions import add_emissions, unit_factors
from mlflow_roofline.serve.errors import invalid
from mlflow_roofline.serve.hardware_routing import law_for_search
from mlflow_roofline.serve.params import DEFAULT_MAX_DEVICES, DEFAULT_OBJECTIVE, check_params
from mlflow_roofline.serve.precision_routing import PRECISION, check_one_hardware
from mlflow_roofline.serve.predict import (
    PREDICT_OUTPUT_COLUMNS,
    check_finite,
    evaluate_jobs,
    evaluate_pooled,
    law_speedup,
)
from mlflow_roofline.serve.validate import validate_sizes

_RECOMMEND_CHUNK = 250_000
"""Rows x candidates evaluated at once by recommend and pareto mode (bounds memory)."""


@dataclasses.dataclass(frozen=True)
class Candidates:
    """The placements considered: ``strategy[j]`` on ``num_devices[j]`` devices with law speedup ``speedup[j]``.

    ``speedup[j]`` is NaN where the strategy's law is workload-aware: each row's job gets its own.
    """

    strategy: np.ndarray
    num_devices: np.ndarray
    speedup: np.ndarray

    def __len__(self) -> int:
        return len(self.num_devices)


def candidate_grid(law: FittedLaw, max_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (strategy, N) the law can evaluate with at most ``max_devices`` devices.

    ``single`` with N = 1; every other strategy with 2 <= N <= max_devices. Row-specific
    divisibility is applied per row by :func:`evaluate_candidates`.
    """
    strategies: list[str] = []
    devices: list[int] = []
    for name in law.strategies:
        counts = [1] if name == "single" else list(range(2, max_devices + 1))
        strategies += [name] * len(counts)
        devices += counts
    return np.array(strategies, dtype=object), np.array(devices, dtype=float)


def candidates(law: FittedLaw, max_devices: int) -> Candidates:
    """The candidate grid with each placement's speedup from the law.

    Raises:
        InputError: naming ``max_devices`` when no strategy fits, or a speedup law gives
            no positive speedup at some device count.
    """
    strategy, n = candidate_grid(law, max_devices)
    if len(n) == 0:
        raise invalid(
            "max_devices", f"no strategy the law knows ({', '.join(law.strategies)}) runs on {max_devices} device(s)"
        )
    speedup = law_speedup(law, strategy, n, field="max_devices", advice="; ask for fewer")
    # A workload-aware law's speedup depends on each row's job: evaluate_jobs computes it per row.
    aware = np.array([law.speedup_laws[name].workload_aware for name in strategy], dtype=bool)
    speedup[aware] = np.nan
    return Candidates(strategy=strategy, num_devices=n, speedup=speedup)


def evaluate_candidates(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    cands: Candidates,
    first_row: int,
    hardware: str | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each row's job under each candidate (on ``hardware`` of a pooled ``law``; None for a one-hardware law),
    at the row's precision (``sizes["precision"]``, :mod:`serve.precision_routing`).

    Returns:
        ``valid`` (rows x candidates, booleans) and the predict outputs of every
        (row, candidate), each an array of shape rows x candidates.

    Raises:
        InputError: naming ``max_devices`` (and the row) where no candidate is valid.
    """
    n_rows, n_cand = len(next(iter(sizes.values()))), len(cands)
    grid_sizes = {k: np.repeat(v, n_cand) for k, v in sizes.items()}
    strategy = np.tile(cands.strategy, n_rows)
    n = np.tile(cands.num_devices, n_rows)
    valid = satisfied({**grid_sizes, "strategy": strategy, "num_devices": n}, PLACEMENT_RULES).reshape(n_rows, n_cand)
    none_valid = np.flatnonzero(~valid.any(axis=1))
    if len(none_valid):
        raise invalid(
            "max_devices",
            f"no valid configuration of {', '.join(np.unique(cands.strategy))} with at most "
            f"{int(cands.num_devices.max())} devices divides this row's heads, ffn and batch",
            none_valid + first_row,
        )
    speedup = np.tile(cands.speedup, n_rows)
    request_rows = np.repeat(np.arange(n_rows) + first_row, n_cand)
    if hardware is None:
        out = evaluate_jobs(law, grid_sizes, strategy, n, speedup)
    else:
        on = np.full(len(n), hardware, dtype=object)
        out = evaluate_pooled(law, grid_sizes, strategy, n, speedup, on, request_rows)
    check_finite(out, request_rows)
    return valid, {k: v.reshape(n_rows, n_cand) for k, v in out.items()}


def by_chunks(
    sizes: Mapping[str, np.ndarray],
    n_cand: int,
    rows_fn: Callable[[dict[str, np.ndarray], int], pd.DataFrame],
) -> pd.DataFrame:
    """``rows_fn(sizes of a chunk of rows, index of its first row)`` over all rows, concatenated."""
    n_rows = len(next(iter(sizes.values())))
    chunk = max(1, _RECOMMEND_CHUNK // max(1, n_cand))
    parts = [
        rows_fn({k: v[start : start + chunk] for k, v in sizes.items()}, start) for start in range(0, n_rows, chunk)
    ]
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def search(
    law: FittedLaw,
    frame: pd.DataFrame,
    max_devices: int,
    rows_fn: Callable[[Candidates, np.ndarray, dict[str, np.ndarray], int], pd.DataFrame],
) -> pd.DataFrame:
    """Every row of ``frame`` under every candidate, chunk by chunk, turned into output rows.

    ``rows_fn(cands, valid, grid, first_row)`` receives one chunk's
    :func:`evaluate_candidates` answer and the index of its first row.

    Raises:
        InputError: for bad rows (:func:`~mlflow_roofline.serve.validate.validate_sizes`)
            or a ``max_devices`` no candidate fits.
    """
    sizes = validate_sizes(frame)
    own, _ = law_for_search(frame, law)  # a pooled law: the named hardware's (its strategies, speedups)
    hardware = None if own is law else str(frame[HARDWARE_COLUMN].iloc[0])
    if hardware is None:
        check_one_hardware(law, sizes[PRECISION])
    cands = candidates(own, max_devices)

    def chunk_rows(chunk: dict[str, np.ndarray], first_row: int) -> pd.DataFrame:
        valid, grid = evaluate_candidates(law, chunk, cands, first_row, hardware)
        return rows_fn(cands, valid, grid, first_row)

    return by_chunks(sizes, len(cands), chunk_rows)


# -- recommend mode ------------------------------------------------------------------
CHOICE_COLUMNS: tuple[str, ...] = (M_ENERGY_J, M_TIME_S, "energy_j_lower", "energy_j_upper", "extrapolated")
"""What the answer tells of the energy-optimal and the time-optimal choice besides its placement."""
RECOMMEND_OUTPUT_COLUMNS: tuple[str, ...] = (
    ("strategy", "num_devices")
    + PREDICT_OUTPUT_COLUMNS
    + ("objective", "candidates")
    + tuple(
        f"{prefix}_{what}"
        for prefix in ("energy_optimal", "time_optimal")
        for what in ("strategy", "num_devices", *CHOICE_COLUMNS)
    )
)


def objective_scores(grid: Mapping[str, np.ndarray], carbon: CarbonSettings | None = None) -> dict[str, np.ndarray]:
    """What each objective minimises, per (row, candidate).

    Joules, seconds, joule-seconds (as their log: the product of an energy and a time that
    are each finite can lie past float64, and every candidate's ``inf`` would tie, leaving
    the first candidate, valid or not), and where known grams CO2e and cost. One request
    has one carbon intensity, PUE and price, so carbon and cost rank the choices as energy
    does; they say it in the unit the user pays in.
    """
    with np.errstate(divide="ignore"):  # a time that underflowed to 0 s ranks first, as its product would
        log_edp = np.log(grid[M_ENERGY_J]) + np.log(grid[M_TIME_S])
    scores = {"energy": grid[M_ENERGY_J], "time": grid[M_TIME_S], "edp": log_edp}
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
        (``energy_optimal_*``, ``time_optimal_*``: strategy, num_devices, energy_j, time_s, the energy's
        95 % interval ``energy_j_lower``/``_upper`` and ``extrapolated``: outside the measured ranges,
        device counts and sizes included).
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
        for what in CHOICE_COLUMNS:
            result[f"{prefix}_{what}"] = grid[what][rows, choice]
    return pd.DataFrame(result)


# -- pareto mode ---------------------------------------------------------------------
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
