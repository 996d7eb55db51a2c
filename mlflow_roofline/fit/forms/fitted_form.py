"""What every fitted energy-law form holds, OLS or roofline-shaped: its name and formula,
the design terms it dropped, and its held-out errors (filled in once it is scored)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

import numpy as np


class LogEnergyLaw(Protocol):
    """A fitted energy law as the checks use it: the mean log energy (log J) of rows of features."""

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray: ...


@dataclasses.dataclass(kw_only=True)
class FittedForm:
    """The fields :class:`fit.forms.ols.FormFit` and :class:`fit.forms.nonlinear.RooflineFormFit` share.

    Attributes:
        name: form name (``paper``, ``roofline_eff``, ...).
        formula: the statsmodels formula, or the roofline form written out.
        dropped_terms: design columns dropped as constant or collinear.
        cv_mape: grouped-CV mean absolute percentage error in energy (or time) space, %
            (NaN until scored).
        cv_se: its standard error across folds, %.
        extrap_mape: size-extrapolation error, % (NaN when not checked).
        extrap_se: its standard error across held-out workloads, %.
    """

    name: str
    formula: str
    dropped_terms: list[str] = dataclasses.field(default_factory=list)
    cv_mape: float = float("nan")
    cv_se: float = float("nan")
    extrap_mape: float = float("nan")
    extrap_se: float = float("nan")

    @property
    def n_params(self) -> int:
        """Coefficients estimated (the simplicity order of the 1-SE rule); each form says."""
        raise NotImplementedError

    def summary_text(self) -> str:
        """The fit's text summary (a file of the fit run); each form says."""
        raise NotImplementedError
