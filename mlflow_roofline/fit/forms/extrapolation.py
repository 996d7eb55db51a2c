"""The size-extrapolation check: fit on the smaller models, predict the bigger ones.

Users ask the law about jobs bigger than any they measured. The check fits every form
on the runs whose model size ``L*d^2`` (num_layers x hidden_size^2, the weight count up
to a constant) is at or below the :data:`EXTRAP_QUANTILE` quantile of the runs (the
75th), predicts the runs above it, and scores each form by ``extrap_mape``: the mean
absolute percentage error of its predicted energy on those held-out larger models, in
%, with a standard error across held-out workloads. :mod:`fit.forms.selection` chooses the
registered form on the worse of its CV and extrapolation errors. When every form misses
the larger models by more than :data:`BAD_EXTRAP_MAPE` %, the report says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.catalog import ROOFLINE_FORMS
from mlflow_roofline.fit.forms.cv import heldout_mape
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.nonlinear import RooflineFormFit
from mlflow_roofline.fit.forms.ols import FormFit

EXTRAP_QUANTILE = 0.75
"""Quantile (fraction) of the runs' model size L*d^2 at or below which a run is in the training side."""
BAD_EXTRAP_MAPE = 20.0
"""Extrapolation MAPE (%) above which, for every form, the report says the larger models are missed."""
MIN_TRAIN_WORKLOADS = 3
"""Fewest distinct workloads (count) on the training side for the check to run."""


@dataclasses.dataclass
class Extrapolation:
    """What the check held out and predicted.

    Attributes:
        held_out: boolean mask over the runs: True for the larger models predicted.
        threshold: the ``L*d^2`` bound the fit was restricted to.
        predicted: predicted log E of the held-out runs, by form.
    """

    held_out: np.ndarray
    threshold: float
    predicted: dict[str, np.ndarray]


def held_out_mask(data: pd.DataFrame, quantile: float = EXTRAP_QUANTILE) -> tuple[np.ndarray, float] | None:
    """Runs above the ``quantile`` of ``L*d^2`` (and the bound), or None when the split cannot be checked."""
    size = data["log_Ld2"].to_numpy(dtype=float)
    threshold = float(np.quantile(size, quantile))
    held_out = size > threshold + 1e-12
    if not held_out.any() or data.loc[~held_out, "workload_hash"].nunique() < MIN_TRAIN_WORKLOADS:
        return None
    return held_out, float(np.exp(threshold))


def _ols_prediction(fit: FormFit, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
    """Predicted log E of the held-out rows by least squares on the others.

    Reuses the design matrix of the form's fit on all runs (its kept columns); a
    per-work response is shifted back by ``log_M`` (``fit.offset``).
    """
    x = np.asarray(fit.result.model.exog, dtype=float)
    y = np.asarray(fit.result.model.endog, dtype=float)
    coef, *_ = np.linalg.lstsq(x[~held_out], y[~held_out], rcond=None)
    shift = np.zeros(len(y)) if fit.offset is None else np.asarray(fit.offset, dtype=float)
    return (x[held_out] @ coef) + shift[held_out]


def heldout_prediction(fit: FittedForm, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
    """Predicted log E of the held-out rows by ``fit``'s form refitted on the others."""
    if isinstance(fit, RooflineFormFit):
        train, test = data.loc[~held_out], data.loc[held_out]
        law = ROOFLINE_FORMS[fit.name](train).law
        return law.mean({c: test[c].to_numpy() for c in test.columns})
    assert isinstance(fit, FormFit), f"form {fit.name!r} is neither OLS nor roofline-shaped"
    return _ols_prediction(fit, data, held_out)


def check_extrapolation(forms: Mapping[str, FittedForm], data: pd.DataFrame) -> tuple[Extrapolation | None, list[str]]:
    """Set ``extrap_mape`` and ``extrap_se`` (%) on every form; the held-out predictions and notes."""
    split = held_out_mask(data)
    if split is None:
        return None, [
            (
                f"size extrapolation not checked: fewer than {MIN_TRAIN_WORKLOADS} workloads at or below "
                f"the {EXTRAP_QUANTILE:.0%} quantile of L*d^2, or none above it"
            )
        ]
    held_out, threshold = split
    actual = data.loc[held_out, "log_E"].to_numpy(dtype=float)
    groups = data.loc[held_out, "workload_hash"].to_numpy()
    predicted: dict[str, np.ndarray] = {}
    for name, fit in forms.items():
        predicted[name] = heldout_prediction(fit, data, held_out)
        fit.extrap_mape, fit.extrap_se = heldout_mape(actual, predicted[name], groups)
    notes = []
    if all(fit.extrap_mape > BAD_EXTRAP_MAPE for fit in forms.values()):
        best = min(forms, key=lambda n: forms[n].extrap_mape)
        notes.append(
            f"every form extrapolates badly to larger models (L*d^2 > {threshold:.3g}): the best, {best}, "
            f"misses them by {forms[best].extrap_mape:.1f}% on average; do not trust predictions beyond "
            "the measured sizes, measure larger models"
        )
    return Extrapolation(held_out, threshold, predicted), notes
