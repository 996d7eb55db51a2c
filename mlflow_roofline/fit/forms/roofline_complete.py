"""The roofline-shaped forms in the complete proxies, with the kind dummies.

``roofline_complete``:
``E = (eps_c*C_all + eps_m*M_all + e0*T) * eta^alpha_eta * exp(psi[strategy] + psi[kind])``
and ``roofline_complete_smooth``, its smooth roofline in time
(``((eps_c*C_all)^k + (eps_m*M_all)^k)^(1/k) + e0*T`` in place of the sum), with ``C_all`` the
layers' and the vocabulary head's FLOPs, ``M_all`` the activation bytes plus the optimizer's
state traffic (bytes: LoRA's few trainable parameters move few), ``T`` tokens
(:mod:`law.log_features`); ``psi[kind]`` a log factor per kind level beyond the paper's
(``arch[T.decoder]``, ``peft[T.lora]``, ``grad_checkpointing[T.true]``, the recompute), each
only where both levels were measured, as the complete OLS forms take them
(:func:`fit.forms.nonlinear.measured_kinds`). Solver, starts, bounds and covariance are those
of :mod:`fit.forms.roofline_eff` and :mod:`fit.forms.roofline_smooth`; the laws are
:class:`~law.roofline_efficiency.CompleteRooflineLaw` and
:class:`~law.roofline_efficiency.SmoothCompleteRooflineLaw`. They are candidates only where the
runs are not all of the paper's kind (:func:`fit.forms.catalog.roofline_candidates`).
"""

from __future__ import annotations

import functools

import pandas as pd

from mlflow_roofline.fit.forms.nonlinear import RooflineFormFit, ScaledDesign, measured_kinds, scaled_design
from mlflow_roofline.fit.forms.roofline_eff import fit_additive_design
from mlflow_roofline.fit.forms.roofline_smooth import fit_smooth_design
from mlflow_roofline.law.roofline_efficiency import (
    COMPLETE_COST_FEATURES,
    CompleteRooflineLaw,
    SmoothCompleteRooflineLaw,
)

ROOFLINE_COMPLETE = "roofline_complete"
ROOFLINE_COMPLETE_SMOOTH = "roofline_complete_smooth"
FORMULA = "E = (eps_c*C_all + eps_m*M_all + e0*T) * eta^alpha_eta * exp(psi[strategy] + psi[kind])"
SMOOTH_FORMULA = (
    "E = (((eps_c*C_all)^k + (eps_m*M_all)^k)^(1/k) + e0*T) * eta^alpha_eta * exp(psi[strategy] + psi[kind])"
)


def complete_design(data: pd.DataFrame) -> ScaledDesign:
    """The scaled design in the complete proxies, with a dummy per kind measured at both levels."""
    return scaled_design(data, COMPLETE_COST_FEATURES, measured_kinds(data))


def fit_roofline_complete(data: pd.DataFrame, name: str = ROOFLINE_COMPLETE) -> RooflineFormFit:
    """Fit the additive roofline in the complete proxies on ``data`` (features of :func:`fit.runs.feature_frame`)."""
    refit = functools.partial(fit_roofline_complete, name=name)
    return fit_additive_design(complete_design(data), name, FORMULA, refit, CompleteRooflineLaw)


def fit_roofline_complete_smooth(data: pd.DataFrame, name: str = ROOFLINE_COMPLETE_SMOOTH) -> RooflineFormFit:
    """Fit the smooth roofline in time in the complete proxies on ``data``."""
    refit = functools.partial(fit_roofline_complete_smooth, name=name)
    return fit_smooth_design(complete_design(data), name, SMOOTH_FORMULA, refit, SmoothCompleteRooflineLaw)
