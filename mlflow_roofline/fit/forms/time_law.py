"""The single-device time law ``log_t1 ~ log_C + log_M`` (seconds of the whole job).

Its per-work form (beta_c + beta_m = 1: twice the steps, twice the seconds) is fitted
beside it and kept when it predicts held-out workloads as well (the 1-SE rule of
:func:`fit.forms.selection.choose_form`). The free form is a candidate only while it is
physical (:func:`time_law_problem`): twice the steps within :data:`~fit.forms.sanity.STEP_TOLERANCE`
of twice the seconds, and no size exponent below zero. Where ``log_C`` and ``log_M`` barely
move apart (every run one epoch of one model: C and M nearly fixed) OLS splits them into huge
opposite exponents (-46,349 and +38,931 on six of Zeus's P100 runs) that fit those runs and
overflow float64 for a job of 1000 steps; the per-work form has no such split to make.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.forms.catalog import PER_WORK_TERM
from mlflow_roofline.fit.forms.cv import CV_FOLDS, cv_mape, workload_folds
from mlflow_roofline.fit.forms.ols import FormFit, fit_ols
from mlflow_roofline.fit.forms.sanity import STEP_TOLERANCE
from mlflow_roofline.fit.forms.selection import choose_form

MIN_SINGLE_RUNS_TIME_LAW = 4
TIME = "time"
TIME_PER_WORK = "time_per_work"


def fit_time_law(data: pd.DataFrame, seed: int = 0) -> FormFit:
    """The time law on the single-device runs of ``data`` (features of :func:`fit.runs.feature_frame.feature_frame`).

    Raises:
        RooflineError: fewer than :data:`MIN_SINGLE_RUNS_TIME_LAW` single-device runs.
    """
    singles = data[data["strategy"] == "single"].copy()
    if len(singles) < MIN_SINGLE_RUNS_TIME_LAW:
        raise RooflineError(
            f"runs: the time law needs at least {MIN_SINGLE_RUNS_TIME_LAW} single-device runs "
            f"(strategy single), found {len(singles)}; add single runs to the sweep"
        )
    singles["log_t1"] = singles["log_t"]
    singles["strategy"] = pd.Categorical(singles["strategy"].astype(str), categories=["single"])
    folds = workload_folds(singles["workload_hash"].to_numpy(), CV_FOLDS, seed)
    fits: dict[str, FormFit] = {}
    for name, formula in ((TIME, "log_t1 ~ log_C + log_M"), (TIME_PER_WORK, f"I(log_t1 - log_M) ~ {PER_WORK_TERM}")):
        fit = fit_ols(name, formula, singles)
        if len(folds) >= 2:
            cv, se = cv_mape(formula, singles, folds)
            fit = dataclasses.replace(fit, cv_mape=cv, cv_se=se)
        fits[name] = fit
    eligible = {name: fit for name, fit in fits.items() if name != TIME or not time_law_problem(fit)}
    return eligible[choose_form(eligible, default=TIME_PER_WORK)]


def time_law_problem(fit: FormFit) -> str:
    """What makes the free time law unphysical ("" where nothing): its steps exponent (beta_c + beta_m,
    dimensionless) off 1 by more than the sanity tolerance, or a negative size exponent."""
    beta = {term: fit.law.coefficient(term) for term in ("log_C", "log_M")}
    steps = beta["log_C"] + beta["log_M"]
    if abs(2.0**steps / 2.0 - 1.0) > STEP_TOLERANCE:
        return f"twice the steps take {2.0**steps:.3g}x the seconds, not 2"
    negative = [f"{term} {value:.3g}" for term, value in beta.items() if value < 0.0]
    return f"time falls as the work grows ({', '.join(negative)})" if negative else ""
