"""The smooth roofline in time, fitted with ``scipy.optimize.least_squares`` on log residuals.

``log E = log(((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e_0*T) + alpha_eta*log_eta + psi[strategy]``
(see :mod:`law.roofline_efficiency`), with ``eps_c, eps_m, e_0 >= 0`` and the sharpness
``1 <= k <=`` :data:`K_MAX` as bounds of the solver (``k`` itself is the solver's
variable: bounds keep it stable, and ``k = 1``, the additive roofline, stays reachable,
which a reparametrisation such as ``k = 1 + exp(u)`` would not). Scaling, the
multi-start solve and the Jacobian covariance are those of :mod:`fit.forms.nonlinear`: the
starts are the roofline x efficiency form's cost mixes, each at a soft (``k`` = 1.5) and a
sharp (``k`` = 8) maximum. ``k`` is scale-free: scaling both terms by the median energy
leaves it unchanged.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.nonlinear import (
    RooflineFormFit,
    ScaledDesign,
    fit_log_least_squares,
    physical_covariance,
    scaled_design,
)
from mlflow_roofline.fit.forms.roofline_eff import STARTS as COST_STARTS
from mlflow_roofline.law.roofline_efficiency import SMOOTH_COST_TERMS, SmoothRooflineLaw, smooth_max

ROOFLINE_SMOOTH = "roofline_smooth"
FORMULA = "E = (((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e0*T) * eta^alpha_eta * exp(psi[strategy])"
K_MAX = 64.0
"""Largest sharpness fitted: at k = 64 two equal terms sum to 1.011 times either (a hard max, in effect)."""
K_STARTS = (1.5, 8.0)
STARTS = tuple((*mix, k) for mix, k in itertools.product(COST_STARTS, K_STARTS))


def _smooth_cost(theta: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smooth-max cost in scaled units and its gradient with respect to (eps_c, eps_m, e0, k)."""
    eps_c, eps_m, e0, k = theta
    s, ds_da, ds_db, ds_dk = smooth_max(eps_c * costs[:, 0], eps_m * costs[:, 1], float(k))
    grad = np.column_stack([ds_da * costs[:, 0], ds_db * costs[:, 1], costs[:, 2], ds_dk])
    return s + e0 * costs[:, 2], grad


def fit_smooth_design(
    design: ScaledDesign,
    name: str,
    formula: str,
    refit: Callable[[pd.DataFrame], RooflineFormFit],
    law_type: type[SmoothRooflineLaw] = SmoothRooflineLaw,
) -> RooflineFormFit:
    """Fit the smooth roofline cost (times the extra factors of ``design``) and return it as a ``law_type``;
    ``refit`` fits the same form on other runs (CV folds, the extrapolation check)."""
    bounds = ([0.0, 0.0, 0.0, 1.0], [np.inf, np.inf, np.inf, K_MAX])
    theta, jac, resid = fit_log_least_squares(design, _smooth_cost, STARTS, bounds)
    to_physical = np.r_[design.e_scale / design.cost_scales, 1.0, np.ones(len(design.extra_terms))]
    coef, cov, resid_var, df_resid = physical_covariance(theta, jac, resid, to_physical)
    terms = [*SMOOTH_COST_TERMS, *design.extra_terms]
    law = law_type(formula, terms, [float(v) for v in coef], cov.tolist(), resid_var, df_resid)
    return RooflineFormFit(name=name, formula=formula, law=law, fitted=design.y + resid, actual=design.y, refit=refit)


def fit_roofline_smooth(data: pd.DataFrame, name: str = ROOFLINE_SMOOTH) -> RooflineFormFit:
    """Fit the smooth roofline in time on ``data`` (features of :func:`fit.runs.feature_frame.feature_frame`)."""
    return fit_smooth_design(scaled_design(data), name, FORMULA, functools.partial(fit_roofline_smooth, name=name))
