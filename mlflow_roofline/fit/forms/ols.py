"""One log-linear law fitted by OLS (statsmodels formula API) with robust standard errors.

Every OLS fit reports HC3 robust standard errors (HC1 where a run has leverage 1 and
HC3 is undefined). A design column that is constant zero or a linear combination of
earlier ones (say ``log_eta`` when only single-device runs exist) is dropped and named
in :attr:`FormFit.dropped_terms`. A relative formula (per work: left side shifted by
``log_M``, term ``I(log_C - log_M)``; per step: shifted by ``log_steps``, terms
``I(log_C - log_steps)`` and ``I(log_M - log_steps)``) is stored as the equivalent law in
the plain features.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
from statsmodels.tools.sm_exceptions import ValueWarning

from mlflow_roofline.fit.forms.describe import power_law_formula
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.law.linear import LinearLaw, categorical_factor


@dataclasses.dataclass(kw_only=True, frozen=True)
class FormFit(FittedForm):
    """One OLS law fitted on all runs, with its held-out errors (:class:`fit.forms.fitted_form.FittedForm`).

    Attributes:
        result: the statsmodels results (HC3 covariance).
        law: the same law as plain data.
        offset: what a relative response was shifted by (``log_M`` per work, ``log_steps`` per step), else None.
    """

    result: Any  # statsmodels' results wrapper: statsmodels ships no types
    law: LinearLaw
    offset: np.ndarray | None = None

    @property
    def n_params(self) -> int:
        """Coefficients estimated (the simplicity order of the 1-SE rule)."""
        return len(self.result.params)

    @property
    def adj_r2(self) -> float:
        """Adjusted R^2 of the law's response (log_E or log_t1), also for per-work forms."""
        if self.offset is None:
            return float(self.result.rsquared_adj)
        y = np.asarray(self.result.model.endog) + self.offset
        n, df_resid = len(y), float(self.result.df_resid)
        ssr = float(np.sum(np.asarray(self.result.resid) ** 2))
        return 1.0 - (ssr / df_resid) / (float(np.sum((y - y.mean()) ** 2)) / (n - 1))

    @property
    def fitted_log(self) -> np.ndarray:
        """Fitted values of the law's response (log units)."""
        fitted = np.asarray(self.result.fittedvalues)
        return fitted if self.offset is None else fitted + self.offset

    @property
    def rmse_log(self) -> float:
        """Root mean square in-sample residual, log units."""
        return float(np.sqrt(np.mean(np.asarray(self.result.resid) ** 2)))

    def coefficient_table(self) -> pd.DataFrame:
        """Estimate, HC3 standard error, t, p and 95 % confidence interval of each term."""
        ci = self.result.conf_int(alpha=0.05)
        return pd.DataFrame(
            {
                "form": self.name,
                "term": list(self.result.params.index),
                "estimate": np.asarray(self.result.params),
                "std_error_hc3": np.asarray(self.result.bse),
                "t": np.asarray(self.result.tvalues),
                "p_value": np.asarray(self.result.pvalues),
                "ci95_lower": np.asarray(ci.iloc[:, 0]),
                "ci95_upper": np.asarray(ci.iloc[:, 1]),
            }
        )

    def summary_text(self) -> str:
        """The statsmodels text summary (its small-sample normality-test warning muted)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ValueWarning)
            return str(self.result.summary().as_text())

    def heldout_log_e(self, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
        """Least squares on the other rows of the design matrix of the fit on all runs (its kept columns); a
        per-work or per-step response is shifted back by its offset."""
        x = np.asarray(self.result.model.exog, dtype=float)
        y = np.asarray(self.result.model.endog, dtype=float)
        coef, *_ = np.linalg.lstsq(x[~held_out], y[~held_out], rcond=None)
        shift = np.zeros(len(y)) if self.offset is None else np.asarray(self.offset, dtype=float)
        return np.asarray((x[held_out] @ coef) + shift[held_out])

    def describe(self) -> str:
        """``κ · C^a · M^b · η^c · Ψ(strategy)`` with the fitted exponents."""
        return power_law_formula(self.law.terms, self.law.coef)


def _independent_columns(x: np.ndarray, names: Sequence[str]) -> list[str]:
    """Columns that add rank, in order (scaled so units do not matter)."""
    scale = np.sqrt(np.mean(x**2, axis=0))
    tol = 1e-8 * np.sqrt(len(x))
    if np.all(scale > 0) and np.linalg.matrix_rank(x / scale, tol=tol) == x.shape[1]:
        return list(names)
    kept: list[int] = []
    for j in range(x.shape[1]):
        if scale[j] == 0:
            continue
        trial = x[:, kept + [j]] / scale[kept + [j]]
        if np.linalg.matrix_rank(trial, tol=tol) == len(kept) + 1:
            kept.append(j)
    return [names[j] for j in kept]


def fit_ols(name: str, formula: str, data: pd.DataFrame) -> FormFit:
    """Fit ``formula`` by OLS with HC3 covariance, dropping degenerate design columns.

    Text levels reach patsy as codes (:func:`coded_levels`): a hardware name is data, and no
    character of it is read as formula or term syntax.
    """
    coded, levels = coded_levels(data)
    model = smf.ols(formula, coded, missing="raise")
    names = [named_term(t, levels) for t in model.exog_names]
    keep = _independent_columns(np.asarray(model.exog, dtype=float), names)
    dropped = [n for n in names if n not in keep]
    if dropped or levels:  # recoded levels: the model's columns take their names back
        exog = pd.DataFrame(model.exog, columns=names)[keep]
        model = sm.OLS(np.asarray(model.endog), exog)
    # A run with leverage 1 (alone in its cell, e.g. the only tp run) makes HC3 divide
    # 0 by 0; HC1 (White's, df-corrected) stays defined there.
    q, _ = np.linalg.qr(np.asarray(model.exog, dtype=float))
    leverage = np.sum(q**2, axis=1)
    cov_type = "HC3" if leverage.max() < 1.0 - 1e-6 else "HC1"
    result = model.fit(cov_type=cov_type, use_t=True)
    terms = list(result.model.exog_names)
    coef = np.asarray(result.params, dtype=float)
    cov = np.asarray(result.cov_params(), dtype=float)
    offset = None
    relative_to = _response_offset(formula)
    if relative_to is not None and any(_DIFFERENCE.match(t) for t in terms):  # per work, per step
        terms, coef, cov = _expand_differences(terms, coef, cov, relative_to)
        offset = data[relative_to].to_numpy(dtype=float)
    law = LinearLaw(
        formula=formula,
        terms=terms,
        coef=[float(v) for v in coef],
        cov=cov.tolist(),
        resid_var=float(result.scale),
        df_resid=float(result.df_resid),
    )
    return FormFit(name=name, formula=formula, result=result, law=law, dropped_terms=dropped, offset=offset)


_CODE = "lvl"
_CODED_FACTOR = re.compile(rf"(?P<feature>\w+)\[(?P<treatment>T\.)?{_CODE}(?P<index>\d+)\]")
_PLAIN_LEVEL = re.compile(r"^\w+$")


def coded_levels(data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """``data`` with every text column whose levels are not all plain words recoded ``lvl0, lvl1...``.

    Patsy writes a level into its column names as it is (``hardware[T.cpu:Xeon]:log_C``), so
    a level holding ``:`` or ``]`` would be read as syntax. The fit sees the codes, in the
    order patsy would give the levels (a categorical's own order, else sorted), so the
    reference level and every estimate are unchanged; :func:`named_term` puts the names back.

    Returns:
        the recoded frame and, per recoded column, its levels by code index.
    """
    levels: dict[str, list[str]] = {}
    coded = data
    for column in data.columns:
        values = data[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            order = [str(v) for v in values.cat.categories]
        elif values.dtype == object:
            order = sorted({str(v) for v in values})
        else:
            continue
        if all(_PLAIN_LEVEL.match(level) for level in order):
            continue
        if coded is data:
            coded = data.copy()
        codes = [f"{_CODE}{i}" for i in range(len(order))]
        coded[column] = pd.Categorical(values.astype(str).map(dict(zip(order, codes))), categories=codes)
        levels[str(column)] = order
    return coded, levels


def named_term(term: str, levels: Mapping[str, Sequence[str]]) -> str:
    """A term of the recoded fit with its levels' names back, each quoted when needed (:func:`categorical_factor`)."""

    def name(match: re.Match[str]) -> str:
        feature = match["feature"]
        if feature not in levels:
            return match[0]
        return categorical_factor(feature, levels[feature][int(match["index"])], treatment=bool(match["treatment"]))

    return _CODED_FACTOR.sub(name, term)


_DIFFERENCE = re.compile(r"^I\((\w+) - (\w+)\)$")


def _response_offset(formula: str) -> str | None:
    """``log_M`` of ``I(log_E - log_M) ~ ...``: the feature the response is relative to (None: plain response).

    Only a form whose regressors are differences too (per work, per step) is rewritten in
    plain features here; the pooled offset forms keep their offset (:mod:`fit.pooled`).
    """
    match = _DIFFERENCE.match(formula.split("~")[0].strip())
    return match.group(2) if match else None


def _expand_differences(
    terms: list[str], coef: np.ndarray, cov: np.ndarray, offset: str
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Rewrite ``y - o = b (x - z) + ...`` as ``y = b x - b z + o + ...`` in plain features.

    Per-work: ``y - log_M = b (log_C - log_M)`` becomes ``y = b log_C + (1 - b) log_M``;
    per-step: ``y - log_steps = b (log_C - log_steps) + c (log_M - log_steps)`` becomes
    ``y = b log_C + c log_M + (1 - b - c) log_steps``. The law then predicts the response
    itself from the features every law uses; the covariance follows the linear map.
    """
    full: list[str] = []
    for term in terms:
        match = _DIFFERENCE.match(term)
        for feature in match.groups() if match else (term,):
            if feature not in full:
                full.append(feature)
    if offset not in full:
        full.append(offset)
    transform = np.zeros((len(full), len(terms)))
    for j, term in enumerate(terms):
        match = _DIFFERENCE.match(term)
        if match:
            transform[full.index(match.group(1)), j] += 1.0
            transform[full.index(match.group(2)), j] -= 1.0
        else:
            transform[full.index(term), j] = 1.0
    shift = np.zeros(len(full))
    shift[full.index(offset)] = 1.0
    return full, transform @ coef + shift, transform @ cov @ transform.T


def summaries(fits: Mapping[str, FittedForm]) -> dict[str, str]:
    """The text summary of each fit, by name (each fit has ``summary_text()``)."""
    return {name: fit.summary_text() for name, fit in fits.items()}
