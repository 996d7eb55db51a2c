"""The roofline-shaped forms in the complete proxies, with the kind dummies.

``roofline_complete``:
``E = (eps_c*C_all + eps_m*M_all + e0*T + e_step*N*steps + e_layer*N*L*steps + eps_w*C_all/w)
* eta^alpha_eta * exp(psi[strategy] + psi[kind])``
and ``roofline_complete_smooth``, its smooth roofline in time
(``((eps_c*C_all)^k + (eps_m*M_all)^k)^(1/k)`` in place of the first two costs), with ``C_all`` the
layers' and the vocabulary head's FLOPs, ``M_all`` the activation bytes plus the optimizer's
state traffic (bytes: LoRA's few trainable parameters move few), ``T`` tokens, a fixed cost per
device-step (the host's part of a step) and per device-layer-step (kernel launches), and the narrow
matrices' lost FLOP/s, FLOPs per unit of the width ``w`` a device multiplies
(:mod:`law.log_features`). On a GPU's runs at fp32 beside a tensor-core precision, ``eps_c*C_all`` is
two costs, ``eps_ct`` on the tensor FLOPs and ``eps_cv`` on the vector FP32 ones
(:func:`complete_cost_features`): the FP32 units' energy per FLOP is theirs, not the tensor cores'
times the ratio of the peaks. A cost the runs cannot tell from another is not estimated.
``psi[kind]`` is a log factor per kind level beyond the paper's (``arch[T.decoder]``, ``peft[T.lora]``,
``grad_checkpointing[T.true]``, the recompute), each only where both levels were measured, as the
complete OLS forms take them (:func:`fit.forms.nonlinear.measured_kinds`). Solver, starts, bounds and
covariance are those of :mod:`fit.forms.roofline_eff` and :mod:`fit.forms.roofline_smooth`; the laws are
:class:`~law.roofline_efficiency.CompleteRooflineLaw` and
:class:`~law.roofline_efficiency.SmoothCompleteRooflineLaw`. They are candidates only where the
runs are not all of the paper's kind (:func:`fit.forms.catalog.roofline_candidates`).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.nonlinear import RooflineFormFit, ScaledDesign, measured_kinds, scaled_design
from mlflow_roofline.fit.forms.roofline_eff import fit_additive_design
from mlflow_roofline.fit.forms.roofline_smooth import fit_smooth_design
from mlflow_roofline.law.roofline_efficiency import (
    COMPLETE_COST_FEATURES,
    TENSOR_TERM,
    VECTOR_PATH_TERM,
    CompleteRooflineLaw,
    SmoothCompleteRooflineLaw,
)

ROOFLINE_COMPLETE = "roofline_complete"
ROOFLINE_COMPLETE_SMOOTH = "roofline_complete_smooth"
_OVERHEADS = "e0*T + e_step*N*steps + e_layer*N*L*steps + eps_w*C_all/w"
FORMULA = f"E = (eps_c*C_all + eps_m*M_all + {_OVERHEADS}) * eta^alpha_eta * exp(psi[strategy] + psi[kind])"
SMOOTH_FORMULA = (
    f"E = (((eps_c*C_all)^k + (eps_m*M_all)^k)^(1/k) + {_OVERHEADS}) * eta^alpha_eta * exp(psi[strategy] + psi[kind])"
)


def complete_cost_features(data: pd.DataFrame) -> dict[str, str]:
    """The cost features to estimate on ``data``: the FLOPs of each datapath apart (``eps_ct``, ``eps_cv``)
    where runs of both are among them (fp32 beside a tensor-core precision on one GPU), all FLOPs at one
    energy per FLOP (``eps_c``) where not; the other costs as :data:`COMPLETE_COST_FEATURES` lists them
    (:func:`fit.forms.nonlinear.scaled_design` leaves out those the runs cannot tell apart)."""
    on_vector = np.isfinite(data["log_C_vector"].to_numpy(dtype=float))
    split = bool(on_vector.any() and not on_vector.all())
    left_out = ("eps_c",) if split else (TENSOR_TERM, VECTOR_PATH_TERM)
    return {term: feature for term, feature in COMPLETE_COST_FEATURES.items() if term not in left_out}


def complete_design(data: pd.DataFrame) -> ScaledDesign:
    """The scaled design in the complete proxies, with a dummy per kind measured at both levels."""
    return scaled_design(data, complete_cost_features(data), measured_kinds(data))


def fit_roofline_complete(data: pd.DataFrame, name: str = ROOFLINE_COMPLETE) -> RooflineFormFit:
    """Fit the additive roofline in the complete proxies on ``data`` (features of :func:`fit.runs.feature_frame`)."""
    refit = functools.partial(fit_roofline_complete, name=name)
    return fit_additive_design(complete_design(data), name, FORMULA, refit, CompleteRooflineLaw)


def fit_roofline_complete_smooth(data: pd.DataFrame, name: str = ROOFLINE_COMPLETE_SMOOTH) -> RooflineFormFit:
    """Fit the smooth roofline in time in the complete proxies on ``data``."""
    refit = functools.partial(fit_roofline_complete_smooth, name=name)
    return fit_smooth_design(complete_design(data), name, SMOOTH_FORMULA, refit, SmoothCompleteRooflineLaw)
