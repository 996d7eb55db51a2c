"""The roofline x efficiency form, fitted with ``scipy.optimize.least_squares`` on log residuals.

``log E = log(eps_c*C + eps_m*M + e_0*T) + alpha_eta*log_eta + psi[strategy]`` with
``eps_c, eps_m, e_0 >= 0`` (bounds of the solver; see :mod:`law.roofline_efficiency`). Scaling,
the multi-start solve and the Jacobian covariance are those of :mod:`fit.forms.nonlinear`;
the starts are balanced, compute-, memory- and token-dominated. Cross-validation folds
and the extrapolation check refit the form from these same starts (no information from
the held-out runs enters a start).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.nonlinear import (
    START_ROWS,
    RooflineFormFit,
    ScaledDesign,
    fit_log_least_squares,
    physical_covariance,
    scaled_design,
)
from mlflow_roofline.law.roofline_efficiency import RooflineLaw

__all__ = [
    "FORMULA",
    "ROOFLINE_EFF",
    "STARTS",
    "START_ROWS",
    "RooflineFormFit",
    "additive_starts",
    "fit_additive_design",
    "fit_roofline_eff",
]

ROOFLINE_EFF = "roofline_eff"
FORMULA = "E = (eps_c*C + eps_m*M + e0*T) * eta^alpha_eta * exp(psi[strategy])"


def additive_starts(n_cost: int) -> tuple[tuple[float, ...], ...]:
    """Starts of ``n_cost`` cost shares: balanced, then each term dominant (0.9, the rest sharing 0.1)."""
    rest = 0.1 / (n_cost - 1)
    dominant = tuple(tuple(0.9 if i == j else rest for i in range(n_cost)) for j in range(n_cost))
    return ((1 / n_cost,) * n_cost, *dominant)


STARTS = additive_starts(3)
"""The three-term starts: balanced, compute-, memory- and token-dominated."""


def _additive_cost(theta: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cost terms' sum (``eps_c*C + eps_m*M + e0*T``), scaled units, and its gradient (the scaled costs)."""
    return costs @ theta, costs


def fit_additive_design(
    design: ScaledDesign,
    name: str,
    formula: str,
    refit: Callable[[pd.DataFrame], RooflineFormFit],
    law_type: type[RooflineLaw] = RooflineLaw,
) -> RooflineFormFit:
    """Fit the additive roofline cost (times the extra factors of ``design``) and return it as a ``law_type``;
    ``refit`` fits the same form on other runs (CV folds, the extrapolation check)."""
    cost_terms = design.cost_terms
    n_cost = len(cost_terms)
    starts = additive_starts(n_cost)
    theta, jac, resid = fit_log_least_squares(design, _additive_cost, starts, ([0.0] * n_cost, [np.inf] * n_cost))
    to_physical = np.r_[design.e_scale / design.cost_scales, np.ones(len(design.extra_terms))]
    coef, cov, resid_var, df_resid = physical_covariance(theta, jac, resid, to_physical)
    terms = [*cost_terms, *design.extra_terms]
    law = law_type(formula, terms, [float(v) for v in coef], cov.tolist(), resid_var, df_resid)
    return RooflineFormFit(name=name, formula=formula, law=law, fitted=design.y + resid, actual=design.y, refit=refit)


def fit_roofline_eff(data: pd.DataFrame, name: str = ROOFLINE_EFF) -> RooflineFormFit:
    """Fit the roofline x efficiency law on ``data`` (features of :func:`fit.runs.feature_frame.feature_frame`)."""
    return fit_additive_design(scaled_design(data), name, FORMULA, functools.partial(fit_roofline_eff, name=name))
