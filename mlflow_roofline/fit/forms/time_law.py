"""The single-device time law ``log_t1 ~ log_C + log_M`` (seconds of the whole job).

Its per-work form (beta_c + beta_m = 1: twice the steps, twice the seconds) is fitted
beside it and kept when it predicts held-out workloads as well (the 1-SE rule of
:func:`fit.forms.selection.choose_form`).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.forms.catalog import PER_WORK_TERM
from mlflow_roofline.fit.forms.cv import CV_FOLDS, cv_mape, workload_folds
from mlflow_roofline.fit.forms.ols import FormFit, fit_ols
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
    return fits[choose_form(fits, default=TIME)]
