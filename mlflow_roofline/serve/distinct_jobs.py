"""The distinct jobs of a request: recommend and pareto mode evaluate each job once, however often it is asked.

A job is a row's sizes and kind (every column :func:`~mlflow_roofline.serve.validate.validate_sizes`
returns); two rows with the same job get the same candidates, the same answers and the same
frontier, so the search runs over the distinct jobs and its answer is spread back over the rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd


@dataclasses.dataclass(frozen=True)
class DistinctJobs:
    """The distinct jobs of a request's rows, in the order each first appears.

    Attributes:
        sizes: one entry per distinct job, column by column.
        inverse: each input row's distinct job; None where every row is a distinct job.
    """

    sizes: dict[str, np.ndarray]
    inverse: np.ndarray | None

    def input_rows(self, jobs: np.ndarray) -> np.ndarray:
        """The input rows (0-based, ascending) that ask one of ``jobs`` (distinct-job indices)."""
        if self.inverse is None:
            return np.sort(np.asarray(jobs, dtype=np.int64))
        return np.flatnonzero(np.isin(self.inverse, jobs))

    def first_input_row(self, jobs: np.ndarray) -> np.ndarray:
        """The first input row (0-based) asking each of ``jobs`` (distinct-job indices), one per entry."""
        jobs = np.asarray(jobs, dtype=np.int64)
        if self.inverse is None:
            return jobs
        return np.unique(self.inverse, return_index=True)[1][jobs]

    def per_row(self, columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``columns`` of one entry per distinct job as one entry per input row."""
        if self.inverse is None:
            return dict(columns)
        return {key: values[self.inverse] for key, values in columns.items()}

    def per_row_long(self, columns: Mapping[str, np.ndarray], job: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a long answer whose entries belong to distinct ``job`` (ascending), each input row's entries.

        Returns:
            The input row of each output entry and the index of the answer entry it repeats, input
            rows in order and each row's entries in the answer's order.
        """
        if self.inverse is None:
            return job, np.arange(len(job))
        n_jobs = len(next(iter(self.sizes.values())))
        counts = np.bincount(job, minlength=n_jobs)
        starts = np.cumsum(counts) - counts
        per_row = counts[self.inverse]
        first = np.cumsum(per_row) - per_row
        offset = np.arange(per_row.sum()) - np.repeat(first, per_row)
        return np.repeat(np.arange(len(self.inverse)), per_row), np.repeat(starts[self.inverse], per_row) + offset


def distinct_jobs(sizes: Mapping[str, np.ndarray]) -> DistinctJobs:
    """The distinct jobs of rows given column by column (each column factorised, the codes combined)."""
    n_rows = len(next(iter(sizes.values())))
    codes = np.zeros(n_rows, dtype=np.int64)
    for values in sizes.values():
        column, levels = pd.factorize(np.asarray(values), use_na_sentinel=False)
        codes, _ = pd.factorize(codes * len(levels) + column)
    first = np.unique(codes, return_index=True)[1]  # codes number jobs by first appearance
    if len(first) == n_rows:
        return DistinctJobs(sizes=dict(sizes), inverse=None)
    return DistinctJobs(sizes={key: np.asarray(values)[first] for key, values in sizes.items()}, inverse=codes)
