"""An energy law that is the mean, in logs, of several fitted laws: the fit's answer where a mean of forms
predicts held-out runs better than one form (:mod:`fit.forms.averaging`), and a pooled law's where covariate
forms tie.

Forms can part far from the measured sizes (a power law and a roofline-shaped law bend differently), and
where their misses lean different ways their mean is closer than either. :class:`AveragedLaw` (kind
``averaged``) predicts the mean of its members' log energies, the geometric mean of their joules, with
equal weights.

Its interval (log joules) follows Buckland, Burnham and Augustin (1997, "Model selection: an
integral part of inference"): the standard error of the averaged mean is the members' mean of
``sqrt(g' cov g + (mu_i - mu)^2)``, each member's own uncertainty of its mean widened by how far
it lies from the average (where the members disagree, the interval says so), plus the scatter of
one new run, ``resid_var``, the averaged law's own in-sample residual variance:
``mu -/+ t(df_resid) * sqrt(se^2 + resid_var)``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from mlflow_roofline.law import roofline_efficiency  # noqa: F401 # the member families register on import
from mlflow_roofline.law.coefficients import INTERVAL_LEVEL, JsonObject, LawCoefficients, law_from_dict, t_quantile
from mlflow_roofline.law.linear import LinearLaw


@dataclasses.dataclass(frozen=True)
class AveragedLaw(LawCoefficients):
    """The mean of ``members``' log energies, with the interval of the module's docstring.

    ``terms``, ``coef`` and ``cov`` are empty (the members hold the coefficients); ``resid_var``
    (log units squared) is the averaged law's in-sample residual variance on ``df_resid`` degrees of
    freedom (runs minus the largest member's coefficients: the t quantile of the interval).
    """

    members: tuple[LawCoefficients, ...] = ()

    KIND: ClassVar[str] = "averaged"

    def __post_init__(self) -> None:
        if len(self.members) < 2:
            raise ValueError(f"an averaged law needs two or more member laws, not {len(self.members)}")

    @functools.cached_property
    def _shared_design(self) -> tuple[LinearLaw, list[int], np.ndarray, np.ndarray] | None:
        """The linear members as one law: the design of all their terms (built once per request: most of a linear
        law's time on one), their coefficients as its columns (terms x members, 0 where a member lacks a term),
        their covariances padded to all the terms (members x terms x terms); and which members they are."""
        linear = [i for i, member in enumerate(self.members) if type(member) is LinearLaw]
        if len(linear) < 2:
            return None
        terms = list(dict.fromkeys(term for i in linear for term in self.members[i].terms))
        coef, cov = np.zeros((len(terms), len(linear))), np.zeros((len(linear), len(terms), len(terms)))
        for k, i in enumerate(linear):
            columns = [terms.index(term) for term in self.members[i].terms]
            coef[columns, k] = self.members[i].coef
            cov[k][np.ix_(columns, columns)] = self.members[i].cov_array
        return LinearLaw("", terms, [0.0] * len(terms), [], 0.0, 1.0), linear, coef, cov

    def _means_and_variances(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Each member's mean log energy (members x rows, log joules) and the variance of that mean, g' cov g."""
        n_rows = len(next(iter(features.values())))
        means, variances = np.empty((len(self.members), n_rows)), np.empty((len(self.members), n_rows))
        shared, done = self._shared_design, list[int]()
        if shared is not None:
            union, done, coef, cov = shared
            x = union.design(features)
            means[done] = (x @ coef).T
            variances[done] = ((x @ cov) * x).sum(axis=2)  # x_n' cov_k x_n by BLAS: einsum's loop is ~3x slower
        for i, member in enumerate(self.members):
            if i not in done:
                mean, grad = member.mean_and_gradient(features)
                means[i], variances[i] = mean, ((grad @ member.cov_array) * grad).sum(axis=1)
        return means, variances

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """The members' mean log energy (log joules) of each row."""
        return np.mean([member.mean(features) for member in self.members], axis=0)

    def predict(
        self, features: Mapping[str, np.ndarray], level: float = INTERVAL_LEVEL
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean and ``level`` prediction interval (log joules): the members' mean and Buckland's standard error."""
        means, variances = self._means_and_variances(features)
        averaged = means.mean(axis=0)
        se = np.mean(np.sqrt(variances + (means - averaged) ** 2), axis=0)
        half = t_quantile(0.5 + level / 2.0, self.df_resid) * np.sqrt(se**2 + self.resid_var)
        return averaged, averaged - half, averaged + half

    def to_dict(self) -> dict[str, object]:
        """The law as JSON-ready data: its members each with their own ``kind``."""
        return {
            "kind": self.KIND,
            "formula": self.formula,
            "terms": [],
            "coef": [],
            "cov": [],
            "resid_var": self.resid_var,
            "df_resid": self.df_resid,
            "members": [member.to_dict() for member in self.members],
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> AveragedLaw:
        """The law from :meth:`to_dict`'s data."""
        return cls(
            formula=str(data["formula"]),
            terms=[],
            coef=[],
            cov=[],
            resid_var=float(data["resid_var"]),
            df_resid=float(data["df_resid"]),
            members=tuple(law_from_dict(member) for member in data["members"]),
        )
