"""Recommend and pareto mode: every placement of a job, evaluated at once, searched for the best or the frontier.

A placement is a (strategy, device count): ``single`` on one device, every other strategy
the law knows on 2 to ``max_devices`` devices. A candidate is valid for a row when it
satisfies the placement rules of :data:`mlflow_roofline.core.rules.PLACEMENT_RULES` (tp
splits heads and ffn, ddp/fsdp split the batch). Both modes ignore a row's own
``strategy``, ``num_devices`` and ``speedup``, evaluate the row's job under every valid
candidate with the law's speedups, once per distinct job however many rows ask it
(:mod:`serve.distinct_jobs`; :func:`search`, in chunks so that memory stays bounded) through
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
from mlflow_roofline.serve.distinct_jobs import DistinctJobs, distinct_jobs
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

_PLACEMENT_FIELDS = frozenset(field for rule in PLACEMENT_RULES for field in rule.fields)
"""The job columns the placement rules read."""

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


@dataclasses.dataclass(frozen=True)
class Evaluated:
    """A chunk of jobs under every candidate: which (job, candidate) pairs are valid, and the valid pairs' answers.

    Attributes:
        valid: jobs x candidates, True where the placement rules hold.
        at: jobs x candidates, the index of each valid pair in ``out`` (-1 where invalid).
        out: the predict outputs of each valid pair, row-major (by job, then candidate).
    """

    valid: np.ndarray
    at: np.ndarray
    out: dict[str, np.ndarray]

    def dense(self, key: str, fill: float = np.inf) -> np.ndarray:
        """Output ``key`` as a jobs x candidates array, ``fill`` where the pair is invalid."""
        grid = np.full(self.valid.shape, fill)
        grid[self.valid] = self.out[key]
        return grid

    def pick(self, key: str, jobs: np.ndarray, choice: np.ndarray) -> np.ndarray:
        """Output ``key`` of candidate ``choice[i]`` of job ``jobs[i]`` (each a valid pair)."""
        return self.out[key][self.at[jobs, choice]]


def evaluate_candidates(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    cands: Candidates,
    rows_of: Callable[[np.ndarray], np.ndarray],
    hardware: str | None = None,
    first_rows: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Evaluated:
    """Each job of ``sizes`` under each valid candidate (on ``hardware`` of a pooled ``law``; None for a
    one-hardware law), at the job's precision (``sizes["precision"]``, :mod:`serve.precision_routing`).

    Only the valid (job, candidate) pairs are evaluated, each once. ``rows_of`` maps jobs (indices
    into ``sizes``) to the input rows an error names.

    Raises:
        InputError: naming ``max_devices`` (and the row) where no candidate is valid, or
            ``model_input`` where a valid candidate's energy or time leaves float64's range.
    """
    n_jobs, n_cand = len(next(iter(sizes.values()))), len(cands)
    grid = {k: np.repeat(v, n_cand) for k, v in sizes.items() if k in _PLACEMENT_FIELDS}  # what the rules read
    grid.update(strategy=np.tile(cands.strategy, n_jobs), num_devices=np.tile(cands.num_devices, n_jobs))
    valid = satisfied(grid, PLACEMENT_RULES).reshape(n_jobs, n_cand)
    none_valid = np.flatnonzero(~valid.any(axis=1))
    if len(none_valid):
        raise invalid(
            "max_devices",
            f"no valid configuration of {', '.join(np.unique(cands.strategy))} with at most "
            f"{int(cands.num_devices.max())} devices divides this row's heads, ffn and batch",
            rows_of(none_valid),
        )
    job, cand = np.nonzero(valid)
    pair_sizes = {k: v[job] for k, v in sizes.items()}
    speedup = cands.speedup[cand]
    if hardware is None:
        out = evaluate_jobs(law, pair_sizes, cands.strategy[cand], cands.num_devices[cand], speedup)
    else:
        on = np.full(len(job), hardware, dtype=object)
        out = evaluate_pooled(
            law, pair_sizes, cands.strategy[cand], cands.num_devices[cand], speedup, on, (first_rows or rows_of)(job)
        )
    check_finite(out, job, rows_of)
    at = np.full((n_jobs, n_cand), -1, dtype=np.int64)
    at[job, cand] = np.arange(len(job))
    return Evaluated(valid=valid, at=at, out=out)


Columns = dict[str, np.ndarray]
"""An answer column by column."""


def by_chunks(sizes: Mapping[str, np.ndarray], n_cand: int, rows_fn: Callable[[Columns, int], Columns]) -> Columns:
    """``rows_fn(sizes of a chunk of jobs, index of its first job)`` over all jobs, column by column concatenated."""
    n_jobs = len(next(iter(sizes.values())))
    chunk = max(1, _RECOMMEND_CHUNK // max(1, n_cand))
    parts = [
        rows_fn({k: v[start : start + chunk] for k, v in sizes.items()}, start) for start in range(0, n_jobs, chunk)
    ]
    return parts[0] if len(parts) == 1 else {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def search(
    law: FittedLaw,
    frame: pd.DataFrame,
    max_devices: int,
    rows_fn: Callable[[Candidates, Evaluated, int], Columns],
) -> tuple[DistinctJobs, Columns]:
    """Every distinct job of ``frame`` under every candidate, chunk by chunk, turned into answer columns.

    ``rows_fn(cands, evaluated, first_job)`` receives one chunk's :func:`evaluate_candidates`
    answer and the index of its first job (among the distinct jobs).

    Returns:
        The request's distinct jobs and the answer columns of each (its entries ordered by job).

    Raises:
        InputError: for bad rows (:func:`~mlflow_roofline.serve.validate.validate_sizes`)
            or a ``max_devices`` no candidate fits.
    """
    jobs = distinct_jobs(validate_sizes(frame))
    own, _ = law_for_search(frame, law)  # a pooled law: the named hardware's (its strategies, speedups)
    hardware = None if own is law else str(frame[HARDWARE_COLUMN].iloc[0])
    if hardware is None:
        check_one_hardware(law, jobs.sizes[PRECISION])
    cands = candidates(own, max_devices)

    def chunk_rows(chunk: dict[str, np.ndarray], first_job: int) -> Columns:
        evaluated = evaluate_candidates(
            law,
            chunk,
            cands,
            lambda js: jobs.input_rows(js + first_job),
            hardware,
            lambda js: jobs.first_input_row(js + first_job),
        )
        return rows_fn(cands, evaluated, first_job)

    return jobs, by_chunks(jobs.sizes, len(cands), chunk_rows)


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
    jobs, answer = search(
        law, frame, max_devices, lambda cands, evaluated, _: _recommend_rows(cands, evaluated, objective, carbon)
    )
    return add_emissions(pd.DataFrame(jobs.per_row(answer)), carbon)


def _recommend_rows(cands: Candidates, evaluated: Evaluated, objective: str, carbon: CarbonSettings | None) -> Columns:
    """Each job's choice for ``objective`` and its energy- and time-optimal ones (one entry per job)."""
    grid = {key: evaluated.dense(key, fill=1.0) for key in (M_ENERGY_J, M_TIME_S)}  # invalid pairs: masked below
    scores = objective_scores(grid, carbon)

    def best(score: np.ndarray) -> np.ndarray:
        return np.argmin(np.where(evaluated.valid, score, np.inf), axis=1)

    jobs = np.arange(evaluated.valid.shape[0])
    pick, pick_e, pick_t = best(scores[objective]), best(scores["energy"]), best(scores["time"])
    result: Columns = {
        "strategy": cands.strategy[pick],
        "num_devices": cands.num_devices[pick].astype(np.int64),
    }
    result.update({k: evaluated.pick(k, jobs, pick) for k in PREDICT_OUTPUT_COLUMNS})
    result["objective"] = np.full(len(jobs), objective, dtype=object)
    result["candidates"] = evaluated.valid.sum(axis=1).astype(np.int64)
    for prefix, choice in (("energy_optimal", pick_e), ("time_optimal", pick_t)):
        result[f"{prefix}_strategy"] = cands.strategy[choice]
        result[f"{prefix}_num_devices"] = cands.num_devices[choice].astype(np.int64)
        for what in CHOICE_COLUMNS:
            result[f"{prefix}_{what}"] = evaluated.pick(what, jobs, choice)
    return result


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
    jobs, answer = search(law, frame, max_devices, _frontier_rows)
    if jobs.inverse is not None:  # a job asked by several rows: its frontier under each of them
        rows, take = jobs.per_row_long(answer, answer["row"])
        answer = {key: values[take] for key, values in answer.items()}
        answer["row"] = rows.astype(np.int64)
    return add_emissions(pd.DataFrame(answer), carbon, interval=False)


def _frontier_rows(cands: Candidates, evaluated: Evaluated, first_job: int) -> Columns:
    """Each job's frontier points, by job then time; ``row`` holds the job (among the distinct jobs)."""
    order, on_front = frontier(evaluated.dense(M_ENERGY_J), evaluated.dense(M_TIME_S), evaluated.valid)
    jobs, position = np.nonzero(on_front)  # row-major: by job, then by time
    choice = order[jobs, position]
    result: Columns = {
        "row": (jobs + first_job).astype(np.int64),
        "strategy": cands.strategy[choice],
        "num_devices": cands.num_devices[choice].astype(np.int64),
    }
    result.update({k: evaluated.pick(k, jobs, choice) for k in PARETO_OUTPUT_COLUMNS[3:]})
    return result
