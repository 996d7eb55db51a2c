"""One law for every hardware the runs hold: pooled forms, chosen as the per-hardware forms are.

With runs of two or more hardware, the fit pools them (each hardware's runs as its own
fit prepared them: speedup, eta, features) and compares, by grouped CV over workloads
with the 1-SE rule (:func:`fit.selection.choose_form`):

- ``hardware_slopes``     ``log_E ~ (log_C + log_M + log_eta) * hardware + strategy``: a
  separate paper law per hardware (what registering one law per hardware amounts to);
- ``hardware_intercepts`` ``log_E ~ log_C + log_M + log_eta + strategy + hardware``: one
  law, each hardware shifting its level;
- ``hardware_offset``     ``log_E - log_jpf ~ log_C + log_M + log_eta + strategy``: one law
  in which energy scales with the hardware's joules per FLOP at peak
  (``log_jpf = log(board_power_w / peak FLOP/s)``, from the hardware table), no free
  parameter per hardware;
- ``hardware_covariates`` (three hardware or more) ``+ log_ridge``, the log of the
  roofline ridge point ``peak FLOP/s / (bytes/s)``, so that a more memory-bound
  device may cost more per FLOP than its peak says.

The two covariate forms predict a GPU no run measured, given its table row; their
leave-one-hardware-out MAPE (every hardware held out in turn, fitted on the others) is
``loho_mape``. When a pooled form (not ``hardware_slopes``) wins, :attr:`PooledFit.law`
is the pooled :class:`~law.fitted.FittedLaw` the fit registers as the model.

Every pooled form also passes the checks of a per-hardware form (:mod:`fit.pooled_checks`):
the size-extrapolation check sets its ``extrap_mape``, and the choice is the same rule
(the worse of CV and extrapolation error, 1-SE) among the forms that pass the sanity
checks on every hardware (``hardware_slopes`` always eligible). The covariate form used
for GPUs no run measured is the sane one with the smallest leave-one-hardware-out error.

The result, :class:`PooledFit` with its metrics and report, is :mod:`fit.pooled_result`
(re-exported here with the form names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.core.gpu_datasheets import HardwareTable
from mlflow_roofline.core.schema import present_strategies
from mlflow_roofline.fit.cv import cv_mape, grouped_cv_mape
from mlflow_roofline.fit.forms import HARDWARE_INTERCEPTS, HARDWARE_SLOPES
from mlflow_roofline.fit.hardware import HardwareFit
from mlflow_roofline.fit.ols import FormFit, fit_ols
from mlflow_roofline.fit.pooled_checks import pooled_extrapolation, pooled_sanity
from mlflow_roofline.fit.pooled_result import COVARIATE_FORMS, HARDWARE_COVARIATES, HARDWARE_OFFSET, PooledFit
from mlflow_roofline.fit.selection import choose_form
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.linear import LinearLaw

__all__ = [
    "COVARIATE_FORMS",
    "HARDWARE_COVARIATES",
    "HARDWARE_INTERCEPTS",
    "HARDWARE_OFFSET",
    "HARDWARE_SLOPES",
    "PooledFit",
    "choose_pooled",
    "fit_pooled",
    "leave_one_hardware_out",
    "pooled_data",
    "pooled_law",
]

OFFSET = "log_jpf"


def pooled_data(fits: Sequence[HardwareFit], covariates: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Every hardware's law features in one frame, ``hardware`` a categorical (the first fit's is the reference)."""
    data = pd.concat([f.data.assign(hardware=f.hardware) for f in fits], ignore_index=True)
    data["strategy"] = pd.Categorical(data["strategy"].astype(str), categories=present_strategies(data["strategy"]))
    data["hardware"] = pd.Categorical(data["hardware"].astype(str), categories=[f.hardware for f in fits])
    if len(covariates) == len(fits):
        for name in ("log_jpf", "log_ridge"):
            data[name] = data["hardware"].astype(str).map({hw: c[name] for hw, c in covariates.items()}).astype(float)
    return data


def _formulas(data: pd.DataFrame, with_covariates: bool) -> dict[str, str]:
    strategy = " + strategy" if data["strategy"].nunique() > 1 else ""
    out = {
        HARDWARE_SLOPES: f"log_E ~ (log_C + log_M + log_eta) * hardware{strategy}",
        HARDWARE_INTERCEPTS: f"log_E ~ log_C + log_M + log_eta + hardware{strategy}",
    }
    if with_covariates:
        out[HARDWARE_OFFSET] = f"I(log_E - {OFFSET}) ~ log_C + log_M + log_eta{strategy}"
        if data["hardware"].nunique() >= 3:
            out[HARDWARE_COVARIATES] = f"I(log_E - {OFFSET}) ~ log_C + log_M + log_eta + log_ridge{strategy}"
    return out


def _with_offset(fit: FormFit, data: pd.DataFrame) -> FormFit:
    """A ``log_E - log_jpf`` fit as a law of ``log_E`` itself: the term ``log_jpf`` with coefficient 1, exactly."""
    law = fit.law
    k = len(law.terms)
    cov = np.zeros((k + 1, k + 1))
    cov[:k, :k] = np.asarray(law.cov)
    fit.law = LinearLaw(law.formula, [*law.terms, OFFSET], [*law.coef, 1.0], cov.tolist(), law.resid_var, law.df_resid)
    fit.offset = data[OFFSET].to_numpy(dtype=float)
    return fit


def leave_one_hardware_out(formula: str, data: pd.DataFrame) -> tuple[float, float]:
    """MAPE (%) of energy on each hardware's runs from the law fitted on the other hardware, and its se."""
    folds = [np.flatnonzero((data["hardware"] == hw).to_numpy()) for hw in data["hardware"].cat.categories]
    return cv_mape(formula, data, [f for f in folds if len(f)])


def _scored_forms(
    data: pd.DataFrame, with_covariates: bool, seed: int
) -> tuple[dict[str, FormFit], dict[str, tuple[float, float]]]:
    """Every pooled form fitted on all runs with its grouped-CV error; the covariate forms' LOHO errors."""
    forms: dict[str, FormFit] = {}
    loho: dict[str, tuple[float, float]] = {}
    for name, formula in _formulas(data, with_covariates).items():
        fit = fit_ols(name, formula, data)
        fit.cv_mape, fit.cv_se = grouped_cv_mape(formula, data, seed=seed)
        if name in COVARIATE_FORMS:
            fit = _with_offset(fit, data)
            loho[name] = leave_one_hardware_out(formula, data)
        forms[name] = fit
    return forms, loho


def choose_pooled(forms: Mapping[str, FormFit], insane: Mapping[str, Sequence[str]]) -> str:
    """The 1-SE choice among the sane pooled forms and ``hardware_slopes`` (one law per hardware, always eligible)."""
    eligible = {n: f for n, f in forms.items() if n not in insane or n == HARDWARE_SLOPES}
    return choose_form(eligible, default=HARDWARE_SLOPES)


def fit_pooled(fits: Sequence[HardwareFit], table: HardwareTable, seed: int = 0) -> PooledFit:
    """The pooled forms over ``fits`` (two hardware or more, most runs first), checked, scored and chosen."""
    covariates = {f.hardware: s.covariates() for f in fits if (s := table.lookup(f.hardware)) is not None}
    missing = [f.hardware for f in fits if f.hardware not in covariates]
    data = pooled_data(fits, covariates)
    forms, loho = _scored_forms(data, not missing, seed)
    extrapolation, notes = pooled_extrapolation(forms, data)
    insane = pooled_sanity(forms, fits, covariates)
    notes += [f"{name} is not registered: {'; '.join(problems[:2])}" for name, problems in insane.items()]
    chosen = choose_pooled(forms, insane)
    pooled = PooledFit(forms, chosen, loho, covariates, missing, extrapolation=extrapolation, insane=insane)
    pooled.notes, pooled.data = notes, data
    if pooled.chosen != HARDWARE_SLOPES:
        pooled.law = pooled_law(pooled, fits)
    return pooled


def pooled_law(pooled: PooledFit, fits: Sequence[HardwareFit]) -> FittedLaw:
    """The pooled law: the chosen form's energy law, each hardware's own law, the covariate form."""
    reference = fits[0].law
    ranges: dict[str, list[float]] = {}
    for fit in fits:
        for key, (lo, hi) in fit.law.ranges.items():
            old = ranges.get(key, [lo, hi])
            ranges[key] = [min(old[0], lo), max(old[1], hi)]
    chosen = pooled.forms[pooled.chosen]
    covariate_form = pooled.covariate_form
    return FittedLaw(
        hardware=", ".join(f.hardware for f in fits),
        energy_source="+".join(sorted({s for f in fits for s in f.energy_source.split("+")})),
        form=pooled.chosen,
        energy_law=chosen.law,
        time_law=reference.time_law,
        speedup_laws=reference.speedup_laws,
        ranges=ranges,
        n_runs=sum(f.law.n_runs for f in fits),
        cv_mape=chosen.cv_mape,
        hardware_laws={f.hardware: f.law for f in fits},
        covariates=pooled.covariates,
        covariate_form=covariate_form,
        covariate_law=pooled.forms[covariate_form].law if covariate_form else None,
        loho_mape=pooled.loho[covariate_form][0] if covariate_form else None,
    )
