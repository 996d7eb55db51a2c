"""What every fitted energy-law form holds and does, OLS or roofline-shaped: the family protocol.

A form family (OLS in logs: :class:`fit.forms.ols.FormFit`; roofline-shaped by least squares:
:class:`fit.forms.nonlinear.RooflineFormFit`) is one subclass of :class:`FittedForm`. Every
caller (scoring, the size-extrapolation check, selection, the report) goes through the methods
below, never through the family's type: a new family is one module (a subclass and its fit
function) plus one line of the catalog.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol, TypeVar

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.cv import CV_FOLDS, fold_mape, workload_folds
from mlflow_roofline.law.coefficients import LawCoefficients

_Form = TypeVar("_Form", bound="FittedForm")


def adjusted_r2(actual: np.ndarray, fitted: np.ndarray, df_resid: float) -> float:
    """Adjusted R^2 (dimensionless) of ``fitted`` against ``actual`` log E, the residual variance on ``df_resid``
    degrees of freedom (at least 1); NaN where ``actual`` does not vary."""
    ssr = float(np.sum((actual - fitted) ** 2))
    sst = float(np.sum((actual - actual.mean()) ** 2))
    return 1.0 - (ssr / max(df_resid, 1.0)) / (sst / (len(actual) - 1)) if sst > 0 else float("nan")


class LogEnergyLaw(Protocol):
    """A fitted energy law as the checks use it: the mean log energy (log J) of rows of features."""

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray: ...


@dataclasses.dataclass(kw_only=True, frozen=True)
class FittedForm:
    """The fields :class:`fit.forms.ols.FormFit` and :class:`fit.forms.nonlinear.RooflineFormFit` share.

    Attributes:
        name: form name (``paper``, ``roofline_eff``, ...).
        formula: the statsmodels formula, or the roofline form written out.
        law: the fitted law as plain data (what the served model evaluates; each family its own type).
        dropped_terms: design columns dropped as constant or collinear.
        cv_mape: grouped-CV mean absolute percentage error in energy (or time) space, %
            (NaN until scored).
        cv_se: its standard error across folds, %.
        extrap_mape: size-extrapolation error, % (NaN when not checked).
        extrap_se: its standard error across held-out workloads, %.
        cv_log_e: each run's log E (log joules) predicted by the form refitted without the run's CV fold
            (None until scored by :meth:`with_cv`).
    """

    name: str
    formula: str
    law: LawCoefficients
    dropped_terms: list[str] = dataclasses.field(default_factory=list)
    cv_mape: float = float("nan")
    cv_se: float = float("nan")
    extrap_mape: float = float("nan")
    extrap_se: float = float("nan")
    cv_log_e: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def made_of(self) -> list[str]:
        """The forms whose laws make this form's law: itself (an average: its members)."""
        return [self.name]

    @property
    def n_params(self) -> int:
        """Coefficients estimated (the simplicity order of the 1-SE rule); each form says."""
        raise NotImplementedError

    @property
    def adj_r2(self) -> float:
        """Adjusted R^2 of log E in sample (dimensionless)."""
        raise NotImplementedError

    @property
    def rmse_log(self) -> float:
        """Root mean square in-sample residual of log E (log units)."""
        raise NotImplementedError

    @property
    def fitted_log(self) -> np.ndarray:
        """In-sample fitted log E of each run (log joules)."""
        raise NotImplementedError

    def coefficient_table(self) -> pd.DataFrame:
        """Each coefficient's estimate, standard error and 95 % interval (the fit's own covariance)."""
        raise NotImplementedError

    def summary_text(self) -> str:
        """The fit's text summary (a file of the fit run); each form says."""
        raise NotImplementedError

    def with_cv(self: _Form, data: pd.DataFrame, seed: int) -> _Form:
        """The form scored by grouped CV on ``data``'s workloads (:func:`fit.forms.cv.workload_folds`): ``cv_mape``
        and ``cv_se`` (%, NaN with fewer than two workloads) and ``cv_log_e`` (:meth:`cv_heldout`)."""
        folds = workload_folds(data["workload_hash"].to_numpy(), CV_FOLDS, seed)
        if len(folds) < 2:
            return dataclasses.replace(self, cv_mape=float("nan"), cv_se=float("nan"), cv_log_e=None)
        predicted = self.cv_heldout(data, folds)
        cv, se = fold_mape(data["log_E"].to_numpy(dtype=float), predicted, folds)
        return dataclasses.replace(self, cv_mape=cv, cv_se=se, cv_log_e=predicted)

    def cv_heldout(self, data: pd.DataFrame, folds: list[np.ndarray]) -> np.ndarray:
        """Each run's log E (log joules) by :meth:`heldout_log_e`: the form refitted without the run's fold."""
        predicted = np.empty(len(data))
        held_out = np.zeros(len(data), dtype=bool)
        for test in folds:
            held_out[:] = False
            held_out[test] = True
            predicted[test] = self.heldout_log_e(data, held_out)
        return predicted

    def cv_scores(self, data: pd.DataFrame, seed: int) -> tuple[float, float]:
        """Grouped-CV MAPE (%) of energy on held-out workloads and its standard error (%) (:meth:`with_cv`)."""
        scored = self.with_cv(data, seed)
        return scored.cv_mape, scored.cv_se

    def heldout_log_e(self, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
        """log E (log joules) of the ``held_out`` rows of ``data`` predicted by this form refitted on the others."""
        raise NotImplementedError

    def describe(self) -> str:
        """The fitted law as the report writes it (HTML: symbols, fitted exponents or coefficients)."""
        raise NotImplementedError
