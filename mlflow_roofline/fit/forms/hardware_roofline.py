"""The roofline pooled over GPUs by their datasheets: one law for a fleet, and for a GPU no run measured.

``hardware_roofline``: ``E = P * (eps_c*C/F + eps_v*C/F_v + eps_m*M/B + e0*T) * eta^alpha_eta * exp(psi[strategy])``
and ``hardware_roofline_complete``, the same in the complete proxies (``C_all``, ``M_all``: the optimizer's
bytes per step in the traffic) times ``exp(psi[kind])`` for each kind measured at both levels. ``P``, ``F``,
``F_v`` and ``B`` are each run's GPU's board power (W), peak FLOP/s at the run's precision, vector (non-tensor
FP32) FLOP/s and memory bandwidth (bytes/s) from the hardware table; the coefficients are shared by every
GPU (:class:`~law.roofline_efficiency.HardwareRooflineLaw`). ``eps_v`` is the share of the FLOPs that run off
the tensor cores (why it is there: :mod:`law.roofline_efficiency`).

Why it is in the pool: the pooled power laws (:mod:`fit.pooled`) split the energy between ``log_C`` and
``log_M`` by their slopes, which a table of one model size does not measure (the slopes along
``num_layers`` and ``hidden_size`` are then the solver's guess, and the sanity checks refuse them). This
form has no exponent: energy is additive in the costs with ``eps >= 0`` (the solver's bounds), so it
grows with every size and doubles with the steps by construction, and a GPU no run measured is its
datasheet row. Solver, starts and covariance are those of :mod:`fit.forms.roofline_eff`, on the costs
multiplied by the hardware factors (:data:`~law.roofline_efficiency.HARDWARE_COST_SCALES`).
"""

from __future__ import annotations

import functools

import pandas as pd

from mlflow_roofline.fit.forms.nonlinear import RooflineFormFit, measured_kinds, scaled_design
from mlflow_roofline.fit.forms.roofline_eff import fit_additive_design
from mlflow_roofline.law.roofline_efficiency import (
    HardwareCompleteRooflineLaw,
    HardwareRooflineLaw,
    HardwareRooflineTimeLaw,
)

__all__ = [
    "HARDWARE_ROOFLINE",
    "HARDWARE_ROOFLINE_COMPLETE",
    "HARDWARE_ROOFLINE_TIME",
    "fit_hardware_roofline",
    "fit_hardware_roofline_complete",
    "fit_hardware_roofline_time",
]

HARDWARE_ROOFLINE = "hardware_roofline"
HARDWARE_ROOFLINE_COMPLETE = "hardware_roofline_complete"
HARDWARE_ROOFLINE_TIME = HardwareRooflineTimeLaw.KIND
FORMULA = "E = P * (eps_c*C/F + eps_v*C/F_v + eps_m*M/B + e0*T) * eta^alpha_eta * exp(psi[strategy])"
COMPLETE_FORMULA = (
    "E = P * (eps_c*C_all/F + eps_v*C_all/F_v + eps_m*M_all/B + e0*T + e_step*N*steps + e_layer*N*L*steps"
    " + eps_w*C_all/(w*F)) * eta^alpha_eta * exp(psi[strategy] + psi[kind])"
)
TIME_FORMULA = (
    "t1 = (eps_c*C_all/F + eps_v*C_all/F_v + eps_m*M_all/B + e0*T + e_step*steps + e_layer*L*steps"
    " + eps_w*C_all/(w*F)) * exp(psi[kind])"
)
_COST_COLUMN = "_hardware_cost_{}"
"""The design's column of each cost (log J at a coefficient of 1), added to a copy of the runs."""


def _fit(
    data: pd.DataFrame, name: str, formula: str, law_type: type[HardwareRooflineLaw], response: str = "log_E"
) -> RooflineFormFit:
    """Fit ``law_type`` on ``data`` (pooled runs with the hardware covariates of
    :data:`~core.gpu_datasheets.COVARIATE_NAMES`) to ``response``; the complete laws take a dummy per kind
    measured at both levels of ``data`` (each CV fold its own)."""
    costs = data.assign(**{_COST_COLUMN.format(t): law_type.cost_log(data, t) for t in law_type.cost_features})
    kinds = measured_kinds(data) if issubclass(law_type, HardwareCompleteRooflineLaw) else []
    design = scaled_design(costs, {t: _COST_COLUMN.format(t) for t in law_type.cost_features}, kinds, response)
    refit = functools.partial(_fit, name=name, formula=formula, law_type=law_type, response=response)
    return fit_additive_design(design, name, formula, refit, law_type)


def fit_hardware_roofline(data: pd.DataFrame, name: str = HARDWARE_ROOFLINE) -> RooflineFormFit:
    """The datasheet-pooled additive roofline in the paper's proxies on the pooled runs ``data``."""
    return _fit(data, name, FORMULA, HardwareRooflineLaw)


def fit_hardware_roofline_complete(data: pd.DataFrame, name: str = HARDWARE_ROOFLINE_COMPLETE) -> RooflineFormFit:
    """The datasheet-pooled additive roofline in the complete proxies, with a dummy per kind measured at both levels."""
    return _fit(data, name, COMPLETE_FORMULA, HardwareCompleteRooflineLaw)


def fit_hardware_roofline_time(singles: pd.DataFrame) -> RooflineFormFit:
    """The datasheet-pooled roofline in time (log seconds, ``log_t``) on the single-device runs ``singles`` of
    several GPUs: :class:`~law.roofline_efficiency.HardwareRooflineTimeLaw` (:mod:`fit.pooled_time`)."""
    return _fit(singles, HARDWARE_ROOFLINE_TIME, TIME_FORMULA, HardwareRooflineTimeLaw, response="log_t")
