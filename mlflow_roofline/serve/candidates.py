"""Every (strategy, device count) a job could run with, evaluated for many jobs at once.

Recommend and pareto mode both ask the law about each row's job under every candidate
placement: ``single`` on one device, every other strategy the law knows on 2 to
``max_devices`` devices. A candidate is valid for a row when it satisfies the placement
rules of :data:`mlflow_roofline.core.rules.PLACEMENT_RULES` (tp splits heads and ffn,
ddp/fsdp split the batch). Rows are evaluated in chunks so that memory stays bounded
(:func:`search`, which both modes call).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.rules import PLACEMENT_RULES, satisfied
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.errors import invalid
from mlflow_roofline.serve.predict import check_finite, evaluate, law_speedup
from mlflow_roofline.serve.validate import validate_sizes

_RECOMMEND_CHUNK = 250_000
"""Rows x candidates evaluated at once by recommend and pareto mode (bounds memory)."""


@dataclasses.dataclass(frozen=True)
class Candidates:
    """The placements considered: ``strategy[j]`` on ``num_devices[j]`` devices with law speedup ``speedup[j]``."""

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
    return Candidates(strategy=strategy, num_devices=n, speedup=speedup)


def evaluate_candidates(
    law: FittedLaw, sizes: Mapping[str, np.ndarray], cands: Candidates, first_row: int
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each row's job under each candidate.

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
    out = evaluate(law, grid_sizes, strategy, n, np.tile(cands.speedup, n_rows))
    check_finite(out, np.repeat(np.arange(n_rows) + first_row, n_cand))
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
    cands = candidates(law, max_devices)

    def chunk_rows(chunk: dict[str, np.ndarray], first_row: int) -> pd.DataFrame:
        valid, grid = evaluate_candidates(law, chunk, cands, first_row)
        return rows_fn(cands, valid, grid, first_row)

    return by_chunks(sizes, len(cands), chunk_rows)
