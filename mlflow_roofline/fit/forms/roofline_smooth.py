"""The smooth roofline in time, fitted with ``scipy.optimize.least_squares`` on log residuals.

``log E = log(((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e_0*T) + alpha_eta*log_eta + psi[strategy]``
(see :mod:`law.roofline_efficiency`), with ``eps_c, eps_m, e_0 >= 0`` and the sharpness
``1 <= k <=`` :data:`K_MAX` as bounds of the solver (``k`` itself is the solver's
variable: bounds keep it stable, and ``k = 1``, the additive roofline, stays reachable,
which a reparametrisation such as ``k = 1 + exp(u)`` would not). Scaling, the
multi-start solve and the Jacobian covariance are those of :mod:`fit.forms.nonlinear`: the
starts are the additive form's cost mixes (:func:`fit.forms.roofline_eff.additive_starts`), each at a
soft (``k`` = 1.5) and a sharp (``k`` = 8) maximum. The variant in the complete proxies
(:mod:`fit.forms.roofline_complete`) has more costs: the compute costs (per datapath) are summed
into the k-norm's first argument, the memory cost is its second, the others are added after it.
``k`` is scale-free: scaling both terms by the median energy leaves it unchanged.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.nonlinear import (
    CostModel,
    RooflineFormFit,
    ScaledDesign,
    fit_log_least_squares,
    physical_covariance,
    scaled_design,
)
from mlflow_roofline.fit.forms.roofline_eff import additive_starts
from mlflow_roofline.law.roofline_efficiency import COMPUTE_TERMS, MEMORY_TERM, SHARPNESS, SmoothRooflineLaw, smooth_max

ROOFLINE_SMOOTH = "roofline_smooth"
FORMULA = "E = (((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e0*T) * eta^alpha_eta * exp(psi[strategy])"
K_MAX = 64.0
"""Largest sharpness fitted: at k = 64 two equal terms sum to 1.011 times either (a hard max, in effect)."""
K_STARTS = (1.5, 8.0)


def smooth_cost(cost_terms: Sequence[str]) -> CostModel:
    """The smooth-max cost of these cost terms in scaled units and its gradient with respect to (each cost
    coefficient, k): the k-norm of the compute costs' sum (:data:`law.roofline_efficiency.COMPUTE_TERMS`) and the
    memory cost (``eps_m``), plus the others (tokens; device- and layer-steps, the width term) as they are."""
    compute = np.array([t in COMPUTE_TERMS for t in cost_terms])
    memory = np.array([t == MEMORY_TERM for t in cost_terms])
    rest = ~(compute | memory)

    def cost(theta: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        coef, k = theta[:-1], float(theta[-1])
        s, ds_da, ds_db, ds_dk = smooth_max(costs[:, compute] @ coef[compute], costs[:, memory] @ coef[memory], k)
        grad = np.where(compute, ds_da[:, None], np.where(memory, ds_db[:, None], 1.0)) * costs
        return s + costs[:, rest] @ coef[rest], np.column_stack([grad, ds_dk])

    return cost


def fit_smooth_design(
    design: ScaledDesign,
    name: str,
    formula: str,
    refit: Callable[[pd.DataFrame], RooflineFormFit],
    law_type: type[SmoothRooflineLaw] = SmoothRooflineLaw,
) -> RooflineFormFit:
    """Fit the smooth roofline cost (times the extra factors of ``design``) and return it as a ``law_type``;
    ``refit`` fits the same form on other runs (CV folds, the extrapolation check)."""
    cost_terms = design.cost_terms
    n_cost = len(cost_terms)
    bounds = ([0.0] * n_cost + [1.0], [np.inf] * n_cost + [K_MAX])
    starts = tuple((*mix, k) for mix, k in itertools.product(additive_starts(n_cost), K_STARTS))
    theta, jac, resid = fit_log_least_squares(design, smooth_cost(cost_terms), starts, bounds)
    to_physical = np.r_[design.e_scale / design.cost_scales, 1.0, np.ones(len(design.extra_terms))]
    coef, cov, resid_var, df_resid = physical_covariance(theta, jac, resid, to_physical)
    terms = [*cost_terms, SHARPNESS, *design.extra_terms]
    law = law_type(formula, terms, [float(v) for v in coef], cov.tolist(), resid_var, df_resid)
    return RooflineFormFit(name=name, formula=formula, law=law, fitted=design.y + resid, actual=design.y, refit=refit)


def fit_roofline_smooth(data: pd.DataFrame, name: str = ROOFLINE_SMOOTH) -> RooflineFormFit:
    """Fit the smooth roofline in time on ``data`` (features of :func:`fit.runs.feature_frame.feature_frame`)."""
    return fit_smooth_design(scaled_design(data), name, FORMULA, functools.partial(fit_roofline_smooth, name=name))
