"""What the runs can and cannot tell: run counts, identification, collinearity, ranges.

- :func:`check_enough_runs` stops a fit that could not estimate or cross-validate the
  paper's law;
- :func:`identification_notes` says, in words, when an exponent is not pinned down;
- :func:`compare_hardware_slopes` tells whether per-hardware laws are needed;
- :func:`law_ranges` records the fitted region (a served query outside it is flagged).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core import job_table
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.forms.catalog import HARDWARE_INTERCEPTS, HARDWARE_SLOPES
from mlflow_roofline.fit.forms.cv import CV_FOLDS, cv_mape, workload_folds
from mlflow_roofline.fit.forms.ols import FormFit
from mlflow_roofline.law.log_features import KIND_FEATURES, kind_indicators

WIDE_CI = 1.0  # an exponent with a wider 95 % CI is reported as not identified
FEW_WORKLOADS = 8  # distinct workloads (count) below which the report warns of extrapolating folds


def check_enough_runs(data: pd.DataFrame) -> None:
    """Raise a one-line error unless the paper's law can be fitted and cross-validated."""
    n_strategy_terms = max(data["strategy"].nunique() - 1, 0)
    needed = 4 + n_strategy_terms + 2  # intercept, log_C, log_M, log_eta, dummies; df_resid >= 2
    if len(data) < needed:
        raise RooflineError(
            f"runs: the efficiency-aware law has {needed - 2} coefficients here and needs at least "
            f"{needed} usable train runs, found {len(data)}; run a larger sweep"
        )
    n_workloads = data["workload_hash"].nunique()
    if n_workloads < 3:
        raise RooflineError(
            f"runs: the law needs at least 3 distinct workloads (roofline.workload_hash) to separate "
            f"log_C from log_M and cross-validate, found {n_workloads}; sweep more model sizes"
        )


def identification_notes(paper: FormFit, data: pd.DataFrame) -> list[str]:
    """Warnings, in words, when the runs cannot pin the paper's exponents down.

    An exponent whose 95 % confidence interval is wider than :data:`WIDE_CI` is not
    identified by these runs; with fewer than :data:`FEW_WORKLOADS` workloads every
    held-out fold extrapolates from a handful of sizes.
    """
    notes: list[str] = []
    n_workloads = data["workload_hash"].nunique()
    if n_workloads < FEW_WORKLOADS:
        notes.append(
            f"only {n_workloads} workloads: the size exponents rest on {n_workloads} points and each CV fold "
            f"predicts an unseen size from {n_workloads - 1}; treat cv_mape and predictions off these sizes as rough"
        )
    ci = paper.result.conf_int(alpha=0.05)
    for term in ("log_C", "log_M", "log_eta"):
        if term in ci.index and ci.loc[term].iloc[1] - ci.loc[term].iloc[0] > WIDE_CI:
            lo, hi = ci.loc[term]
            advice = (
                "measure more device counts per strategy"
                if term == "log_eta"
                else f"|corr(log_C, log_M)| {collinearity(data):.3f}; "
                "sweep more hidden_size, seq_len and num_layers values"
            )
            notes.append(f"{term} exponent not identified by these runs (95% CI [{lo:.3g}, {hi:.3g}]); {advice}")
    return notes


def collinearity(data: pd.DataFrame) -> float:
    """|correlation| of log_C and log_M over the runs (1 = their exponents cannot be separated)."""
    c, m = data["log_C"].to_numpy(), data["log_M"].to_numpy()
    if np.std(c) == 0 or np.std(m) == 0:
        return 1.0
    return float(abs(np.corrcoef(c, m)[0, 1]))


def compare_hardware_slopes(data: pd.DataFrame, seed: int = 0) -> dict[str, float]:
    """Pooled over several hardware: grouped-CV MAPE of common vs hardware-specific slopes.

    Tells whether the per-hardware laws are needed: ``hardware_slopes`` lets log_C,
    log_M and log_eta have their own exponent (and intercept) on each hardware,
    ``hardware_intercepts`` only shifts the level. Returns cv MAPE (%) by form.
    """
    if data["hardware"].nunique() < 2:
        return {}
    strategy = " + strategy" if data["strategy"].nunique() > 1 else ""
    formulas = {
        HARDWARE_INTERCEPTS: f"log_E ~ log_C + log_M + log_eta + hardware{strategy}",
        HARDWARE_SLOPES: f"log_E ~ (log_C + log_M + log_eta) * hardware{strategy}",
    }
    folds = workload_folds(data["workload_hash"].to_numpy(), CV_FOLDS, seed)
    return {name: cv_mape(formula, data, folds)[0] for name, formula in formulas.items()}


def law_ranges(frame: pd.DataFrame, data: pd.DataFrame) -> dict[str, list[float]]:
    """[min, max] of every model input, of log_C, log_M and of eta over the fitted runs.

    The model's integer inputs are the job table's integer request columns (``vocab_size`` and
    ``lora_rank`` among them where the frame has them). Where ``data`` has the kind features, also
    of each kind indicator (:data:`~mlflow_roofline.law.log_features.KIND_INDICATORS`, 0/1: [0, 0]
    where no run was, say, a decoder), so that a query of a kind no run measured is flagged
    ``extrapolated``.
    """
    ranges: dict[str, list[float]] = {}
    for name in job_table.names(type="int", request=True):
        if name in frame:
            ranges[name] = [float(frame[name].min()), float(frame[name].max())]
    for name in ("log_C", "log_M"):
        ranges[name] = [float(data[name].min()), float(data[name].max())]
    ranges["eta"] = [float(np.exp(data["log_eta"].min())), float(np.exp(data["log_eta"].max()))]
    if all(name in data for name in KIND_FEATURES):
        for key, values in kind_indicators({name: data[name].to_numpy() for name in KIND_FEATURES}).items():
            ranges[key] = [float(values.min()), float(values.max())]
    return ranges
