"""A new form family is one module plus one catalog line.

The family below (energy per token times an efficiency factor, fitted by least squares in logs)
lives in this test module: its law (a :class:`LawCoefficients` with a ``KIND``), its
:class:`FittedForm` and its fit function. One line adds it to the catalog; the fit then scores
it by grouped CV and the size-extrapolation check, the selection weighs it, the reports write it,
and its law goes through JSON to the served model and answers there.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.schema import LAW_INPUT_NAMES
from mlflow_roofline.fit.forms import catalog
from mlflow_roofline.fit.forms.cv import CV_FOLDS, refit_cv_mape, workload_folds
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.hardware_fit import fit_hardware, hardware_report
from mlflow_roofline.fit.report.markdown import fit_markdown
from mlflow_roofline.law.coefficients import LawCoefficients
from mlflow_roofline.law.fitted import FittedLaw, energy_law_from_dict
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs

PER_TOKEN = "per_token"


@dataclasses.dataclass(frozen=True)
class PerTokenLaw(LawCoefficients):
    """``log E = log e_t + log T + a * log eta``: joules per token (e_t) times the efficiency factor."""

    KIND: ClassVar[str] = "per_token_test"

    def mean_and_gradient(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        log_t, log_eta = (np.asarray(features[n], dtype=float) for n in ("log_T", "log_eta"))
        mean = self.coef[0] + log_t + self.coef[1] * log_eta
        return mean, np.column_stack([np.ones_like(log_t), log_eta])


@dataclasses.dataclass(kw_only=True, frozen=True)
class PerTokenFit(FittedForm):
    law: PerTokenLaw
    actual: np.ndarray
    log_t: np.ndarray
    log_eta: np.ndarray

    @property
    def n_params(self) -> int:
        return 2

    @property
    def fitted_log(self) -> np.ndarray:
        return np.asarray(self.law.mean({"log_T": self.log_t, "log_eta": self.log_eta}))

    @property
    def rmse_log(self) -> float:
        return float(np.sqrt(np.mean((self.actual - self.fitted_log) ** 2)))

    @property
    def adj_r2(self) -> float:
        resid, centred = self.actual - self.fitted_log, self.actual - self.actual.mean()
        return 1.0 - (resid @ resid / (len(resid) - 2)) / (centred @ centred / (len(resid) - 1))

    def coefficient_table(self) -> pd.DataFrame:
        se = np.sqrt(np.diag(np.asarray(self.law.cov)))
        return pd.DataFrame({"form": self.name, "term": self.law.terms, "estimate": self.law.coef, "std_error": se})

    def summary_text(self) -> str:
        return f"{self.formula}: {dict(zip(self.law.terms, self.law.coef))}"

    def cv_scores(self, data: pd.DataFrame, seed: int) -> tuple[float, float]:
        folds = workload_folds(data["workload_hash"].to_numpy(), CV_FOLDS, seed)
        return refit_cv_mape(lambda train, test: fit_per_token(train).law.mean(test), data, folds)

    def heldout_log_e(self, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
        return np.asarray(fit_per_token(data.loc[~held_out]).law.mean(data.loc[held_out]))

    def describe(self) -> str:
        return f"{self.law.coef[0]:.3g}·T · η<sup>{self.law.coef[1]:.3g}</sup>"


def fit_per_token(data: pd.DataFrame, name: str = PER_TOKEN) -> PerTokenFit:
    """Least squares of ``log E - log T`` on an intercept and ``log_eta``."""
    log_t, log_eta = data["log_T"].to_numpy(dtype=float), data["log_eta"].to_numpy(dtype=float)
    y = data["log_E"].to_numpy(dtype=float)
    x = np.column_stack([np.ones_like(log_t), log_eta])
    coef, *_ = np.linalg.lstsq(x, y - log_t, rcond=None)
    resid = y - log_t - x @ coef
    resid_var = float(resid @ resid / (len(y) - 2))
    cov = resid_var * np.linalg.pinv(x.T @ x)
    law = PerTokenLaw("E = e_t * T * eta^a", ["log_e_t", "alpha_eta"], list(coef), cov.tolist(), resid_var, len(y) - 2)
    return PerTokenFit(name=name, formula=law.formula, law=law, actual=y, log_t=log_t, log_eta=log_eta)


@pytest.fixture
def with_the_family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(catalog.ROOFLINE_FORMS, PER_TOKEN, fit_per_token)  # the one catalog line


@pytest.mark.usefixtures("with_the_family")
def test_a_new_family_is_fitted_scored_reported_and_served() -> None:
    fit = fit_hardware(generate_roofline_runs(16, seed=3), "Roofline GPU")
    form = fit.energy.forms[PER_TOKEN]
    assert np.isfinite(form.cv_mape) and np.isfinite(form.extrap_mape)  # grouped CV and bigger models
    assert PER_TOKEN in hardware_report(fit) and PER_TOKEN in fit_markdown(fit, fit.metrics(), len(fit.frame))

    law = dataclasses.replace(fit.law, energy_law=form.law, form=PER_TOKEN)  # as the fit would register it
    served = FittedLaw.from_json(law.to_json())
    assert isinstance(served.energy_law, PerTokenLaw)
    assert json.loads(law.to_json())["energy_law"]["kind"] == PerTokenLaw.KIND
    query = fit.frame.head(3)[list(LAW_INPUT_NAMES)].astype({"strategy": str})
    answer = predict_frame(served, query)
    assert np.all(np.isfinite(answer["energy_j"])) and (answer["energy_j_lower"] < answer["energy_j_upper"]).all()
    assert energy_law_from_dict(form.law.to_dict()) == form.law
