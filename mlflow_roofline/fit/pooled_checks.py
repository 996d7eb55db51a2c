"""The checks a per-hardware form passes, run on the pooled forms: size extrapolation and sanity.

- Size extrapolation (:func:`fit.extrapolation.check_extrapolation`): every pooled form
  is refitted on the pooled runs with ``L*d^2`` at or below the 75th percentile and
  scored by ``extrap_mape`` (%) on the larger rest, so the pooled choice uses the same
  rule as the per-hardware one (the worse of CV and extrapolation error, 1-SE).
- Sanity (:func:`fit.sanity.sanity_problems`): each pooled form is evaluated on every
  hardware it pools, with that hardware's name and table covariates as inputs, its own
  speedup laws and its own fitted ranges (what serving a row of that hardware uses).
  Energy must be finite and positive, never decrease with size and double with the steps.

:func:`extrapolation_figure` draws the held-out larger models against what the
separate-slopes, the chosen and the covariate form predicted from the smaller ones
(``plots/pooled_extrapolation.png`` of the parent fit run).

A pooled form that breaks a sanity property is not registered; ``hardware_slopes``
(registering one law per hardware, each already sanity-checked by its own fit) stays
eligible, so the choice falls back to it when no pooled form is sane.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from mlflow_roofline.fit import plots
from mlflow_roofline.fit.extrapolation import Extrapolation, check_extrapolation
from mlflow_roofline.fit.hardware import HardwareFit
from mlflow_roofline.fit.sanity import sanity_problems

HARDWARE_COLUMN = "hardware"


@dataclasses.dataclass(frozen=True)
class OnHardware:
    """A pooled energy law seen as the law of one hardware: its name and covariates added to every input."""

    law: Any
    hardware: str
    covariates: Mapping[str, float]

    def mean(self, features: Mapping[str, Any]) -> np.ndarray:
        """Mean log E (log joules) of the rows of ``features`` on this hardware."""
        n = len(np.asarray(features["log_C"]))
        extra: dict[str, np.ndarray] = {HARDWARE_COLUMN: np.full(n, self.hardware, dtype=object)}
        extra.update({name: np.full(n, float(value)) for name, value in self.covariates.items()})
        return np.asarray(self.law.mean({**features, **extra}), dtype=float)


def pooled_sanity(
    forms: Mapping[str, Any], fits: Sequence[HardwareFit], covariates: Mapping[str, Mapping[str, float]]
) -> dict[str, list[str]]:
    """Form -> what it gets wrong on some hardware (``"<hardware>: <problem>"``); forms without problems absent."""
    insane: dict[str, list[str]] = {}
    for name, form in forms.items():
        problems: list[str] = []
        for fit in fits:
            on = OnHardware(form.law, fit.hardware, covariates.get(fit.hardware, {}))
            found = sanity_problems(on, fit.law.speedup_laws, fit.law.ranges)
            problems += [f"{fit.hardware}: {p}" for p in found]
        if problems:
            insane[name] = problems
    return insane


def pooled_extrapolation(forms: Mapping[str, Any], data: pd.DataFrame) -> tuple[Extrapolation | None, list[str]]:
    """Set ``extrap_mape`` and ``extrap_se`` (%) on every pooled form; the check and its notes.

    The pooled runs of every hardware are split on one ``L*d^2`` bound; a workload is
    its hash, which differs per hardware, so each hardware's runs of it are one group.
    """
    return check_extrapolation(forms, data)


def extrapolation_figure(
    forms: Mapping[str, Any], data: pd.DataFrame, check: Extrapolation, shown: Sequence[str]
) -> Figure:
    """Measured vs predicted energy (joules) of the held-out larger models, one panel per form in ``shown``."""
    predicted = {
        f"{name}: extrap_mape {forms[name].extrap_mape:.1f}%": check.predicted[name] for name in dict.fromkeys(shown)
    }
    return plots.measured_vs_predicted(data[check.held_out], predicted)
