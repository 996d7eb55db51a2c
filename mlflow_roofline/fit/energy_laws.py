"""Every law of one hardware's runs: the candidate energy forms, the additive roofline, the time law.

Forms are compared by grouped k-fold cross-validation, groups = workload hash (a
workload's runs are never split between train and test); ``cv_mape`` is the mean
absolute percentage error of exp(predicted log_E) against measured energy, in %. The
registered form is chosen by :func:`fit.selection.choose_form`; the paper's form is
always reported beside it.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.cv import grouped_cv_mape
from mlflow_roofline.fit.diagnostics import check_enough_runs, identification_notes
from mlflow_roofline.fit.forms import ETA_BY_STRATEGY, PAPER, candidate_forms, formula_of
from mlflow_roofline.fit.ols import FormFit, fit_ols
from mlflow_roofline.fit.roofline import AdditiveRoofline, fit_additive_roofline
from mlflow_roofline.fit.selection import choose_form
from mlflow_roofline.fit.time_law import fit_time_law


@dataclasses.dataclass
class EnergyFits:
    """Every law of one hardware's runs.

    Attributes:
        forms: each evaluated form by name (always ``baseline`` and ``paper``).
        chosen: the registered form (:func:`fit.selection.choose_form`).
        roofline: the additive decomposition.
        time: the single-device time law.
        notes: what was dropped or adapted, in words.
    """

    forms: dict[str, FormFit]
    chosen: str
    roofline: AdditiveRoofline
    time: FormFit
    notes: list[str]


def _fit_form(form: str, data: pd.DataFrame, seed: int, notes: list[str]) -> FormFit:
    """One OLS form with its grouped-CV error; what it dropped goes into ``notes``."""
    fit = fit_ols(form, formula_of(form, data), data)
    for term in ("log_C", "log_M"):
        if term in fit.dropped_terms:
            raise RooflineError(
                f"runs: {term} cannot be estimated (it does not vary independently across runs); "
                "sweep workloads that differ in hidden_size, seq_len and num_layers"
            )
    structural = form == ETA_BY_STRATEGY and all(t.endswith(":log_eta") for t in fit.dropped_terms)
    if fit.dropped_terms and not structural:
        notes.append(f"{form}: dropped {', '.join(fit.dropped_terms)} (constant or collinear in these runs)")
    if fit.result.cov_type != "HC3":
        notes.append(f"{form}: a run has leverage 1, so standard errors are {fit.result.cov_type}, not HC3")
    fit.cv_mape, fit.cv_se = grouped_cv_mape(fit.formula, data, seed=seed)
    return fit


def fit_energy_laws(data: pd.DataFrame, seed: int = 0) -> EnergyFits:
    """Fit every candidate form, the additive roofline and the time law on one hardware's runs.

    Raises:
        RooflineError: too few runs or workloads, or runs that cannot separate log_C and log_M.
    """
    check_enough_runs(data)
    notes: list[str] = []
    if data["strategy"].nunique() == 1:
        notes.append(f"only strategy {data['strategy'].iloc[0]!r} present: the strategy dummy is dropped")
    forms = {form: _fit_form(form, data, seed, notes) for form in candidate_forms(data)}
    notes += identification_notes(forms[PAPER], data)
    if "log_eta" in forms[PAPER].dropped_terms:
        notes.append("log_eta is 0 for every run (no parallel runs): alpha_eta cannot be estimated")
    return EnergyFits(
        forms=forms,
        chosen=choose_form(forms),
        roofline=fit_additive_roofline(data),
        time=fit_time_law(data, seed=seed),
        notes=notes,
    )
