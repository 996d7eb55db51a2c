"""What every law form shares: its stored coefficients and its prediction intervals in log units.

For a new point with gradient ``g`` of the mean with respect to the coefficients (the
design row of a linear law), the interval is ``mean -/+ t(df_resid) * sqrt(g' cov g +
resid_var)``: the uncertainty of the coefficients plus the scatter of one new run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
from scipy import stats

INTERVAL_LEVEL = 0.95

_Law = TypeVar("_Law", bound="LawCoefficients")


@functools.lru_cache(maxsize=256)
def t_quantile(probability: float, df: float) -> float:
    """Student t quantile, cached: a served law asks for the same one on every request."""
    return float(stats.t.ppf(probability, df))


def prediction_interval(
    mean: np.ndarray,
    grad: np.ndarray,
    cov: list[list[float]] | np.ndarray,
    resid_var: float,
    df_resid: float,
    level: float = INTERVAL_LEVEL,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``mean`` and its ``level`` prediction interval (log units), rows x coefficients ``grad``."""
    # g' cov g per row: one matrix product (g @ cov), then a row-wise dot.
    se = np.sqrt(((grad @ np.asarray(cov)) * grad).sum(axis=1) + resid_var)
    half = t_quantile(0.5 + level / 2.0, df_resid) * se
    return mean, mean - half, mean + half


@dataclasses.dataclass(frozen=True)
class LawCoefficients:
    """What every law form stores: its coefficients, their covariance and the residual scatter.

    Each form documents its coefficients' units. ``resid_var`` is in log units squared,
    ``df_resid`` (runs minus coefficients) sets the t quantile of the intervals.
    """

    formula: str
    terms: list[str]
    coef: list[float]
    cov: list[list[float]]
    resid_var: float
    df_resid: float

    def coefficient(self, term: str) -> float:
        """The coefficient of ``term``; 0.0 when the law has no such term."""
        return self.coef[self.terms.index(term)] if term in self.terms else 0.0

    @classmethod
    def from_dict(cls: type[_Law], data: Mapping[str, Any]) -> _Law:
        """The law from its JSON data (:meth:`to_dict` of the form), every field typed."""
        return cls(
            formula=str(data["formula"]),
            terms=[str(t) for t in data["terms"]],
            coef=[float(v) for v in data["coef"]],
            cov=[[float(v) for v in row] for row in data["cov"]],
            resid_var=float(data["resid_var"]),
            df_resid=float(data["df_resid"]),
        )
