"""What every law form shares: its stored coefficients and its prediction intervals in log units.

Each form (:class:`~mlflow_roofline.law.linear.LinearLaw`, the roofline forms of
:mod:`mlflow_roofline.law.roofline_efficiency`) says how it evaluates the mean of a row and
the gradient of that mean with respect to its coefficients; the interval is defined once,
here: ``mean -/+ t(df_resid) * sqrt(g' cov g + resid_var)`` for a new point with gradient
``g`` (the design row of a linear law), the uncertainty of the coefficients plus the
scatter of one new run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np
from scipy import stats

INTERVAL_LEVEL = 0.95

JsonObject = Mapping[str, Any]
"""A law as parsed from its JSON file: the one truly open type of the law (values of any JSON type)."""

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


LAW_FAMILIES: dict[str, type[LawCoefficients]] = {}
"""Every energy-law family by its ``KIND`` (filled by the families' own class definitions; ``""``: linear)."""


def law_from_dict(data: JsonObject) -> LawCoefficients:
    """The law of a law JSON, of the family its ``kind`` names (:data:`LAW_FAMILIES`); without a ``kind``,
    linear (laws written before the other families existed).

    Raises:
        ValueError: a ``kind`` no imported family declares.
    """
    kind = str(data.get("kind") or "")
    if kind not in LAW_FAMILIES:
        raise ValueError(f"law kind {kind!r} is not one of {sorted(k for k in LAW_FAMILIES if k)}")
    return LAW_FAMILIES[kind].from_dict(data)


@dataclasses.dataclass(frozen=True)
class LawCoefficients:
    """What every law form stores: its coefficients, their covariance and the residual scatter.

    Each form documents its coefficients' units. ``resid_var`` is in log units squared,
    ``df_resid`` (runs minus coefficients) sets the t quantile of the intervals. A form
    implements :meth:`mean_and_gradient` (and may override :meth:`mean` with a cheaper path).
    """

    formula: str
    terms: list[str]
    coef: list[float]
    cov: list[list[float]]
    resid_var: float
    df_resid: float

    KIND: ClassVar[str] = ""
    """The family's name in a law JSON (``kind``); empty for the linear laws, which write none."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A family that names its ``KIND`` registers itself in :data:`LAW_FAMILIES` when its module is imported."""
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("KIND")
        if kind:
            LAW_FAMILIES[str(kind)] = cls

    def coefficient(self, term: str) -> float:
        """The coefficient of ``term``; 0.0 when the law has no such term."""
        return self.coef[self.terms.index(term)] if term in self.terms else 0.0

    def mean_and_gradient(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The mean of each row (log units) and its gradient with respect to the coefficients (rows x terms)."""
        raise NotImplementedError

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mean (log units) for new observations, without an interval."""
        return self.mean_and_gradient(features)[0]

    def predict(
        self, features: Mapping[str, np.ndarray], level: float = INTERVAL_LEVEL
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean and ``level`` prediction interval (log units) for new observations.

        The interval is mean -/+ t(df_resid) * sqrt(g' cov g + resid_var): the uncertainty
        of the coefficients plus the scatter of a single new run.
        """
        mean, grad = self.mean_and_gradient(features)
        return prediction_interval(mean, grad, self.cov_array, self.resid_var, self.df_resid, level)

    @functools.cached_property
    def cov_array(self) -> np.ndarray:
        """``cov`` as a float array, built once per law (a served law uses it on every request)."""
        return np.asarray(self.cov, dtype=float)

    def to_dict(self) -> dict[str, object]:
        """The law as JSON-ready data, with its family's ``kind`` where it has one (:meth:`from_dict` reads it back)."""
        return {**({"kind": self.KIND} if self.KIND else {}), **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls: type[_Law], data: JsonObject) -> _Law:
        """The law from its JSON data (:meth:`to_dict` of the form), every field typed."""
        return cls(
            formula=str(data["formula"]),
            terms=[str(t) for t in data["terms"]],
            coef=[float(v) for v in data["coef"]],
            cov=[[float(v) for v in row] for row in data["cov"]],
            resid_var=float(data["resid_var"]),
            df_resid=float(data["df_resid"]),
        )
