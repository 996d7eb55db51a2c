"""The roofline x efficiency energy law as plain data, evaluated with numpy.

``E = (eps_c*C + eps_m*M + e_0*T) * eta^alpha_eta * exp(psi[strategy])`` (joules), with
``C`` the job's FLOP proxy, ``M`` its memory-traffic proxy (elements), ``T`` its tokens
and ``eps_c >= 0`` (J/FLOP), ``eps_m >= 0`` (J/element), ``e_0 >= 0`` (J/token: the
fixed cost per token of a device that is busy but not saturated). ``psi`` is 0 for the
reference strategy (the first one the fit saw, ``single`` where present).

Prediction intervals (log joules) come from the delta method: with ``g`` the gradient
of log E with respect to the coefficients at the new point and ``cov`` the coefficients'
covariance from the fit's Jacobian (``resid_var * (J'J)^-1``), the interval is
``mean -/+ t(df_resid) * sqrt(g' cov g + resid_var)``: the uncertainty of the law plus
the scatter of one new run, as for the linear laws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from mlflow_roofline.law.interval import INTERVAL_LEVEL, LawCoefficients, prediction_interval

COST_TERMS: tuple[str, ...] = ("eps_c", "eps_m", "e0")
COST_FEATURES: dict[str, str] = {"eps_c": "log_C", "eps_m": "log_M", "e0": "log_T"}
ALPHA_ETA = "alpha_eta"
STRATEGY_PREFIX = "strategy[T."


class RooflineLaw(LawCoefficients):
    """The roofline x efficiency law (see the module docstring).

    Attributes:
        formula: the law in words (for people; not parsed).
        terms: coefficient names: ``eps_c``, ``eps_m``, ``e0``, then ``alpha_eta`` and
            ``strategy[T.<name>]`` where the fit estimated them.
        coef: the coefficients (J/FLOP, J/element, J/token, dimensionless, log factors).
        cov: their covariance (from the Jacobian at the optimum).
        resid_var: residual variance of log E (log units squared).
        df_resid: residual degrees of freedom (runs minus coefficients).
    """

    KIND: ClassVar[str] = "roofline_eff"

    def _cost(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The cost part (joules before the eta and strategy factors) and its gradient per cost coefficient."""
        costs = {t: np.exp(np.asarray(features[COST_FEATURES[t]], dtype=float)) for t in COST_TERMS}
        total = sum(self.coefficient(t) * costs[t] for t in COST_TERMS)
        return np.asarray(total, dtype=float), costs

    def _parts(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """log E of each row and the gradient of log E with respect to the coefficients (rows x terms)."""
        total, grads = self._cost(features)
        log_eta = np.asarray(features["log_eta"], dtype=float)
        strategy = np.asarray(features["strategy"], dtype=object)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.log(total) + self.coefficient(ALPHA_ETA) * log_eta
            columns = []
            for term in self.terms:
                if term in grads:
                    columns.append(grads[term] / total)
                elif term == ALPHA_ETA:
                    columns.append(log_eta)
                else:
                    is_level = (strategy == term[len(STRATEGY_PREFIX) : -1]).astype(float)
                    mean = mean + self.coefficient(term) * is_level
                    columns.append(is_level)
        return mean, np.column_stack(columns)

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mean log E (log joules) for new observations, without an interval."""
        return self._parts(features)[0]

    def predict(
        self, features: Mapping[str, np.ndarray], level: float = INTERVAL_LEVEL
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean and prediction interval of log E (log joules) for new observations."""
        mean, grad = self._parts(features)
        return prediction_interval(mean, grad, self.cov, self.resid_var, self.df_resid, level)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, **dataclasses.asdict(self)}
