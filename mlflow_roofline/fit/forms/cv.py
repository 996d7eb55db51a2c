"""Grouped k-fold cross-validation of a log-linear law: folds by workload, error in energy space.

A workload's runs (same ``roofline.workload_hash``: same model, sequence length, batch
and hardware) always fall in one fold, so every score is a prediction for a workload
the fit has not seen. The score is the mean absolute percentage error of
``exp(predicted log response)`` against the measured response (joules or seconds).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

CV_FOLDS = 5  # grouped folds (fewer when there are fewer workloads)


def workload_folds(groups: np.ndarray, k: int = CV_FOLDS, seed: int = 0) -> list[np.ndarray]:
    """Test-row indices of each of min(k, groups) folds; a group's rows share one fold."""
    unique = np.unique(groups)
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(unique)
    n_folds = min(k, len(unique))
    fold_of_group = {g: i % n_folds for i, g in enumerate(shuffled)}
    fold = np.array([fold_of_group[g] for g in groups])
    return [np.flatnonzero(fold == i) for i in range(n_folds)]


def fold_mape(actual_log: np.ndarray, predicted_log: np.ndarray, folds: list[np.ndarray]) -> tuple[float, float]:
    """MAPE (%) of exp(predicted) against exp(actual) over every fold's held-out rows, and its standard
    error across the folds (%): each row predicted by the fit on the other folds."""
    errors = np.abs(np.exp(np.asarray(predicted_log) - np.asarray(actual_log)) - 1.0)
    fold_mapes = [100.0 * float(np.mean(errors[test])) for test in folds]
    se = float(np.std(fold_mapes, ddof=1) / np.sqrt(len(fold_mapes)))
    return float(100.0 * np.mean(errors)), se


def cv_mape(formula: str, data: pd.DataFrame, folds: list[np.ndarray]) -> tuple[float, float]:
    """MAPE (%) over all held-out rows and its standard error across the folds.

    The formula's left side is a log response, possibly shifted by a feature
    (``I(log_E - log_M)``); a shift cancels in the percentage error, which is always that
    of the response itself.

    The design matrix is built once (patsy, through the formula API) and each fold is a
    least-squares solve on its training rows (``numpy.linalg.lstsq``: minimum-norm, so a
    strategy absent from a training fold gets coefficient 0, i.e. the reference level).
    Standard errors are not needed for held-out predictions, so none are computed here.
    """
    model = smf.ols(formula, data, missing="raise")
    x = np.asarray(model.exog, dtype=float)
    y = np.asarray(model.endog, dtype=float)
    predicted = np.empty(len(data))
    in_test = np.zeros(len(data), dtype=bool)
    for test in folds:
        in_test[:] = False
        in_test[test] = True
        coef, *_ = np.linalg.lstsq(x[~in_test], y[~in_test], rcond=None)
        predicted[test] = x[test] @ coef
    return fold_mape(y, predicted, folds)


def grouped_cv_mape(formula: str, data: pd.DataFrame, k: int = CV_FOLDS, seed: int = 0) -> tuple[float, float]:
    """Grouped k-fold CV of ``formula``: MAPE (%) of exp(predicted response) on held-out workloads.

    Returns:
        the MAPE over all held-out runs and its standard error across folds (both %);
        NaN with fewer than two workloads.
    """
    folds = workload_folds(data["workload_hash"].to_numpy(), k, seed)
    if len(folds) < 2:
        return float("nan"), float("nan")
    return cv_mape(formula, data, folds)


def heldout_mape(actual_log: np.ndarray, predicted_log: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """MAPE (%) of exp(predicted) against exp(actual) over held-out runs, and its standard error.

    The standard error treats each held-out workload (``groups``) as one draw: the
    standard deviation of the per-workload mean errors over the square root of their
    number (NaN with one workload).
    """
    errors = np.abs(np.exp(predicted_log - actual_log) - 1.0)
    per_group = pd.Series(errors).groupby(np.asarray(groups)).mean().to_numpy()
    se = float(np.std(per_group, ddof=1) / np.sqrt(len(per_group))) if len(per_group) > 1 else float("nan")
    return float(100.0 * errors.mean()), 100.0 * se


def refit_cv_mape(
    fit_predict: Callable[[pd.DataFrame, pd.DataFrame], np.ndarray], data: pd.DataFrame, folds: list[np.ndarray]
) -> tuple[float, float]:
    """Grouped CV of a law that is refitted on each fold's training rows (a non-linear form).

    ``fit_predict(train, test)`` returns the predicted log response of ``test``'s rows.
    Returns the MAPE (%) over all held-out rows and its standard error across folds.
    """
    predicted = np.empty(len(data))
    for test in folds:
        train = np.setdiff1d(np.arange(len(data)), test)
        predicted[test] = fit_predict(data.iloc[train], data.iloc[test])
    return fold_mape(data["log_E"].to_numpy(dtype=float), predicted, folds)
