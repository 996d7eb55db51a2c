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
from typing import TypeVar

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.cv import heldout_mape
from mlflow_roofline.fit.forms.fitted_form import FittedForm

Form = TypeVar("Form", bound=FittedForm)
"""A form family's fitted form (the check returns the same family, scored)."""

EXTRAP_QUANTILE = 0.75
"""Quantile (fraction) of the runs' model size L*d^2 at or below which a run is in the training side."""
BAD_EXTRAP_MAPE = 20.0
"""Extrapolation MAPE (%) above which, for every form, the report says the larger models are missed."""
MIN_TRAIN_WORKLOADS = 3
"""Fewest distinct workloads (count) on the training side for the check to run."""


@dataclasses.dataclass(frozen=True)
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


def heldout_prediction(fit: FittedForm, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
    """Predicted log E of the held-out rows by ``fit``'s form refitted on the others (the family's own refit)."""
    return fit.heldout_log_e(data, held_out)


def check_extrapolation(
    forms: Mapping[str, Form], data: pd.DataFrame
) -> tuple[dict[str, Form], Extrapolation | None, list[str]]:
    """Every form with its ``extrap_mape`` and ``extrap_se`` (%, new values); the held-out predictions and notes."""
    split = held_out_mask(data)
    if split is None:
        return (
            dict(forms),
            None,
            [
                (
                    f"size extrapolation not checked: fewer than {MIN_TRAIN_WORKLOADS} workloads at or below "
                    f"the {EXTRAP_QUANTILE:.0%} quantile of L*d^2, or none above it"
                )
            ],
        )
    held_out, threshold = split
    actual = data.loc[held_out, "log_E"].to_numpy(dtype=float)
    groups = data.loc[held_out, "workload_hash"].to_numpy()
    predicted = {name: heldout_prediction(fit, data, held_out) for name, fit in forms.items()}
    scored: dict[str, Form] = {}
    for name, fit in forms.items():
        mape, se = heldout_mape(actual, predicted[name], groups)
        scored[name] = dataclasses.replace(fit, extrap_mape=mape, extrap_se=se)
    notes = []
    if all(fit.extrap_mape > BAD_EXTRAP_MAPE for fit in scored.values()):
        best = min(scored, key=lambda n: scored[n].extrap_mape)
        notes.append(
            f"every form extrapolates badly to larger models (L*d^2 > {threshold:.3g}): the best, {best}, "
            f"misses them by {scored[best].extrap_mape:.1f}% on average; do not trust predictions beyond "
            "the measured sizes, measure larger models"
        )
    return scored, Extrapolation(held_out, threshold, predicted), notes
