"""Which law answers each measured GPU of a fleet: its own, or the pooled law, by their bigger-model errors.

Each GPU's own fit ran the size-extrapolation check (:mod:`fit.forms.extrapolation`): its
chosen form refitted on its runs with ``L*d^2`` at or below the 75th percentile predicted the
larger rest, ``extrap_mape`` (%). The pooled form is scored on exactly those held-out runs:
refitted on every pooled run except them (the other GPUs' runs all kept, bigger models
included, as the served pooled law has them) and asked about them. The GPU is routed
``pooled`` only where that error is strictly smaller; without the check on a GPU (too few
workloads) or without a pooled form, it keeps its own law.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.cv import heldout_mape
from mlflow_roofline.fit.forms.extrapolation import heldout_prediction
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.law.fleet import OWN, POOLED, FleetRoute

NAN = float("nan")


def own_error(fit: HardwareFit) -> tuple[float, np.ndarray | None]:
    """The GPU's own law's ``extrap_mape`` (%) and the mask of its held-out runs over ``fit.data`` (None: unchecked)."""
    check = fit.energy.extrapolation
    if check is None:
        return NAN, None
    return float(fit.energy.forms[fit.energy.chosen].extrap_mape), np.asarray(check.held_out, dtype=bool)


def pooled_error(form: FittedForm, data: pd.DataFrame, held_out: np.ndarray) -> float:
    """MAPE (%) of energy of the ``held_out`` pooled runs from ``form`` refitted on all the others."""
    predicted = heldout_prediction(form, data, held_out)
    actual = data.loc[held_out, "log_E"].to_numpy(dtype=float)
    groups = data.loc[held_out, "workload_hash"].to_numpy()
    return heldout_mape(actual, predicted, groups)[0]


def route(own_mape: float, pooled_mape: float) -> str:
    """``pooled`` where the pooled law's error is finite and strictly below the own law's, else ``own``."""
    if np.isfinite(pooled_mape) and (not np.isfinite(own_mape) or pooled_mape < own_mape):
        return POOLED
    return OWN


def fleet_routes(
    fits: Sequence[HardwareFit], form: FittedForm | None, data: pd.DataFrame | None
) -> dict[str, FleetRoute]:
    """Each measured GPU's route and both errors (%), see the module docstring.

    ``data`` is the pooled runs (:func:`fit.pooled.pooled_data`: every fit's ``data`` in the
    order of ``fits``), ``form`` the pooled form that would answer a measured GPU (None: none sane).
    """
    routes: dict[str, FleetRoute] = {}
    start = 0
    for fit in fits:
        own_mape, held = own_error(fit)
        pooled_mape = NAN
        if held is not None and form is not None and data is not None and held.any():
            mask = np.zeros(len(data), dtype=bool)
            mask[start : start + len(fit.data)] = held
            pooled_mape = pooled_error(form, data, mask)
        routes[fit.hardware] = FleetRoute(route(own_mape, pooled_mape), own_mape, pooled_mape)
        start += len(fit.data)
    return routes
