"""The energy and time laws, fitted with the statsmodels formula API on logs.

Forms (responses ``log_E``: log joules; ``log_t1``: log seconds on one device):

- ``baseline``        ``log_E ~ log_C + log_M + strategy``
- ``paper``           ``log_E ~ log_C + log_M + log_eta + strategy`` (the efficiency-aware law)
- ``paper_log_n``     ``+ log_N``: a device-count cost beyond what eta explains
- ``eta_by_strategy`` ``+ strategy:log_eta``: an efficiency exponent per strategy
- ``paper_per_work``  the paper's form with alpha_c + alpha_m = 1, i.e. energy
  proportional to the work at a given per-step mix (twice the steps, twice the joules):
  ``I(log_E - log_M) ~ I(log_C - log_M) + log_eta + strategy``, stored as the
  equivalent law in log_C and log_M
- the additive roofline ``E = eps_comp*C + eps_mem*M + E0`` with non-negative
  coefficients (J/FLOP, J/element, J), fitted with ``scipy.optimize.nnls``
- the time law ``log_t1 ~ log_C + log_M`` on single-device runs, or its per-work
  form (beta_c + beta_m = 1) when that predicts held-out workloads as well (1-SE rule).

Every OLS fit reports HC3 robust standard errors (HC1 where a run has leverage 1 and
HC3 is undefined, with a note). ``strategy`` is a categorical with
``single`` as reference (so ``log_kappa`` is the single-device intercept and the dummies
read ``strategy[T.fsdp]``); with one strategy only, the dummy is dropped and the fit says
so. A design column that is constant zero or a linear combination of earlier ones (say
``log_eta`` when only single-device runs exist) is dropped with a note.

Forms are compared by grouped k-fold cross-validation, groups = workload hash (a
workload's runs are never split between train and test); ``cv_mape`` is the mean
absolute percentage error of exp(predicted log_E) against measured energy, in %. The
registered form is the simplest whose ``cv_mape`` is within one standard error (across
folds) of the best (:func:`choose_form`); the paper's form is always reported beside it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy.optimize import nnls
from statsmodels.tools.sm_exceptions import ValueWarning

from mlflow_roofline.core.config import INT_FIELDS
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.cv import cv_mape, workload_folds
from mlflow_roofline.law.fitted import LinearLaw, law_features
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S, present_strategies

BASELINE = "baseline"
PAPER = "paper"
PAPER_LOG_N = "paper_log_n"
ETA_BY_STRATEGY = "eta_by_strategy"
HARDWARE_SLOPES = "hardware_slopes"
PER_WORK = "paper_per_work"
PER_WORK_TERM = "I(log_C - log_M)"

FORM_TERMS: dict[str, str] = {
    BASELINE: "log_C + log_M",
    PAPER: "log_C + log_M + log_eta",
    PAPER_LOG_N: "log_C + log_M + log_eta + log_N",
    ETA_BY_STRATEGY: "log_C + log_M + log_eta",
    PER_WORK: f"{PER_WORK_TERM} + log_eta",
}
CV_FOLDS = 5  # grouped folds (fewer when there are fewer workloads)
WIDE_CI = 1.0  # an exponent with a wider 95 % CI is reported as not identified
FEW_WORKLOADS = 8
MIN_SINGLE_RUNS_TIME_LAW = 4


@dataclasses.dataclass
class FormFit:
    """One OLS law fitted on all runs, with its cross-validated error.

    Attributes:
        name: form name (``paper``, ``baseline``, ...).
        formula: the statsmodels formula.
        result: the statsmodels results (HC3 covariance).
        law: the same law as plain data.
        dropped_terms: design columns dropped as constant or collinear.
        cv_mape: grouped-CV mean absolute percentage error in energy (or time) space, %.
        cv_se: its standard error across folds, %.
    """

    name: str
    formula: str
    result: Any
    law: LinearLaw
    dropped_terms: list[str]
    cv_mape: float = float("nan")
    cv_se: float = float("nan")
    offset: np.ndarray | None = None

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


@dataclasses.dataclass(frozen=True)
class AdditiveRoofline:
    """E = eps_comp*C + eps_mem*M + E0 with non-negative coefficients.

    Attributes:
        eps_comp: joules per FLOP of the compute proxy.
        eps_mem: joules per element of the memory-traffic proxy.
        e0: fixed joules per job.
        mape: in-sample mean absolute percentage error, %.
        n_runs: runs it was fitted on.
        scope: which runs (``single`` device runs, or ``all``).
    """

    eps_comp: float
    eps_mem: float
    e0: float
    mape: float
    n_runs: int
    scope: str

    def predict(self, flops: np.ndarray, mem_traffic: np.ndarray) -> np.ndarray:
        """Energy in joules."""
        return self.eps_comp * np.asarray(flops) + self.eps_mem * np.asarray(mem_traffic) + self.e0


@dataclasses.dataclass
class EnergyFits:
    """Every law of one hardware's runs.

    Attributes:
        forms: each evaluated OLS form by name (always ``baseline`` and ``paper``).
        chosen: the registered form, by ``cv_mape`` (:func:`choose_form`).
        roofline: the additive decomposition.
        time: the single-device time law.
        notes: what was dropped or adapted, in words.
    """

    forms: dict[str, FormFit]
    chosen: str
    roofline: AdditiveRoofline
    time: FormFit
    notes: list[str]


def feature_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The law's features of each run (via :func:`law.law_features`) plus ``log_E``, ``log_t``.

    ``frame`` needs the train params, ``speedup``, ``energy_j``, ``time_s`` and
    ``workload_hash``. ``strategy`` becomes a categorical of the strategies present,
    ``single`` first.
    """
    feats = law_features(
        num_layers=frame["num_layers"].to_numpy(),
        hidden_size=frame["hidden_size"].to_numpy(),
        seq_len=frame["seq_len"].to_numpy(),
        batch_size=frame["batch_size"].to_numpy(),
        num_steps=frame["num_steps"].to_numpy(),
        num_devices=frame["num_devices"].to_numpy(),
        speedup=frame["speedup"].to_numpy(),
        strategy=frame["strategy"].to_numpy(),
    )
    out = pd.DataFrame({k: v for k, v in feats.items() if k != "strategy"}, index=frame.index)
    out["strategy"] = pd.Categorical(frame["strategy"], categories=present_strategies(frame["strategy"]))
    out["log_E"] = np.log(frame[M_ENERGY_J].to_numpy(dtype=float))
    out["log_t"] = np.log(frame[M_TIME_S].to_numpy(dtype=float))
    out["workload_hash"] = frame["workload_hash"].to_numpy()
    if "hardware" in frame:
        out["hardware"] = frame["hardware"].to_numpy()
    return out


def formula_of(form: str, data: pd.DataFrame, response: str = "log_E") -> str:
    """The statsmodels formula of ``form`` on ``data`` (no strategy dummy with one strategy)."""
    rhs = FORM_TERMS[form]
    if data["strategy"].nunique() > 1:
        rhs += " + strategy"
        if form == ETA_BY_STRATEGY:
            rhs += " + strategy:log_eta"
    lhs = f"I({response} - log_M)" if form == PER_WORK else response
    return f"{lhs} ~ {rhs}"


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
    """Fit ``formula`` by OLS with HC3 covariance, dropping degenerate design columns."""
    model = smf.ols(formula, data, missing="raise")
    names = list(model.exog_names)
    keep = _independent_columns(np.asarray(model.exog, dtype=float), names)
    dropped = [n for n in names if n not in keep]
    if dropped:
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
    if PER_WORK_TERM in terms:
        terms, coef, cov = _expand_per_work(terms, coef, cov)
        offset = data["log_M"].to_numpy(dtype=float)
    law = LinearLaw(
        formula=formula,
        terms=terms,
        coef=[float(v) for v in coef],
        cov=cov.tolist(),
        resid_var=float(result.scale),
        df_resid=float(result.df_resid),
    )
    return FormFit(name=name, formula=formula, result=result, law=law, dropped_terms=dropped, offset=offset)


def _expand_per_work(
    terms: list[str], coef: np.ndarray, cov: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Rewrite ``y - log_M = b (log_C - log_M) + ...`` as ``y = b log_C + (1 - b) log_M + ...``.

    The law then predicts the response itself with the features every law uses; the
    covariance follows the linear map (Var of the log_M coefficient equals Var(b), their
    covariance is -Var(b)).
    """
    full: list[str] = []
    for term in terms:
        full += ["log_C", "log_M"] if term == PER_WORK_TERM else [term]
    transform = np.zeros((len(full), len(terms)))
    for j, term in enumerate(terms):
        if term == PER_WORK_TERM:
            transform[full.index("log_C"), j] = 1.0
            transform[full.index("log_M"), j] = -1.0
        else:
            transform[full.index(term), j] = 1.0
    shift = np.zeros(len(full))
    shift[full.index("log_M")] = 1.0
    return full, transform @ coef + shift, transform @ cov @ transform.T


def grouped_cv_mape(
    form: str, data: pd.DataFrame, response: str = "log_E", k: int = CV_FOLDS, seed: int = 0
) -> tuple[float, float]:
    """Grouped k-fold CV of ``form``: MAPE (%) of exp(predicted response) on held-out workloads.

    Returns:
        the MAPE over all held-out runs and its standard error across folds (both %);
        NaN with fewer than two workloads.
    """
    folds = workload_folds(data["workload_hash"].to_numpy(), k, seed)
    if len(folds) < 2:
        return float("nan"), float("nan")
    return cv_mape(formula_of(form, data, response), data, folds)


def fit_additive_roofline(frame: pd.DataFrame) -> AdditiveRoofline:
    """Non-negative E = eps_comp*C + eps_mem*M + E0 by relative least squares.

    Fitted on single-device runs when at least 3 exist (the device's own cost of a FLOP
    and of traffic), else on all runs. Each row is divided by its energy so that jobs of
    every size weigh alike.
    """
    singles = frame[frame["strategy"] == "single"]
    use, scope = (singles, "single") if len(singles) >= 3 else (frame, "all")
    c = np.exp(use["log_C"].to_numpy())
    m = np.exp(use["log_M"].to_numpy())
    e = np.exp(use["log_E"].to_numpy())
    scales = np.array([c.mean(), m.mean(), 1.0])
    design = np.column_stack([c, m, np.ones_like(c)]) / scales
    coef, _ = nnls(design / e[:, None], np.ones_like(e))
    coef = coef / scales
    roofline = AdditiveRoofline(float(coef[0]), float(coef[1]), float(coef[2]), float("nan"), int(len(use)), scope)
    mape = float(100.0 * np.mean(np.abs(roofline.predict(c, m) - e) / e))
    return dataclasses.replace(roofline, mape=mape)


def fit_time_law(data: pd.DataFrame, seed: int = 0) -> FormFit:
    """``log_t1 ~ log_C + log_M`` on the single-device runs (seconds of the whole job).

    Its per-work form (beta_c + beta_m = 1: twice the steps, twice the seconds) is fitted
    beside it and kept when it predicts held-out workloads as well (:func:`choose_form`).

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
    for name, formula in (("time", "log_t1 ~ log_C + log_M"), ("time_per_work", f"I(log_t1 - log_M) ~ {PER_WORK_TERM}")):
        fit = fit_ols(name, formula, singles)
        if len(folds) >= 2:
            fit.cv_mape, fit.cv_se = cv_mape(formula, singles, folds)
        fits[name] = fit
    return fits[choose_form(fits, default="time")]


def choose_form(forms: Mapping[str, FormFit], default: str = PAPER) -> str:
    """The simplest form whose cv_mape is within one standard error of the best (the 1-SE rule).

    Richer forms win only when they predict held-out workloads measurably better, not
    when they fit the noise of these folds. Simplicity = fewer coefficients, then the
    order forms were evaluated in (baseline, paper, richer).
    """
    scored = {name: fit for name, fit in forms.items() if np.isfinite(fit.cv_mape)}
    if not scored:
        return default
    best = min(scored.values(), key=lambda f: f.cv_mape)
    threshold = best.cv_mape + (best.cv_se if np.isfinite(best.cv_se) else 0.0)
    order = list(forms)
    within = [f for f in scored.values() if f.cv_mape <= threshold]
    return min(within, key=lambda f: (len(f.result.params), order.index(f.name))).name


def candidate_forms(data: pd.DataFrame) -> list[str]:
    """The forms worth evaluating on ``data``: baseline, paper and per-work always, richer ones when identifiable."""
    forms = [BASELINE, PAPER, PER_WORK]
    parallel = data[data["strategy"] != "single"]
    if parallel["log_N"].nunique() > 1:
        forms.append(PAPER_LOG_N)
    if parallel["strategy"].nunique() > 1:
        forms.append(ETA_BY_STRATEGY)
    return forms


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


def fit_energy_laws(data: pd.DataFrame, seed: int = 0) -> EnergyFits:
    """Fit every candidate form, the additive roofline and the time law on one hardware's runs.

    Raises:
        RooflineError: too few runs or workloads, or runs that cannot separate log_C and log_M.
    """
    check_enough_runs(data)
    notes: list[str] = []
    if data["strategy"].nunique() == 1:
        notes.append(f"only strategy {data['strategy'].iloc[0]!r} present: the strategy dummy is dropped")
    forms: dict[str, FormFit] = {}
    for form in candidate_forms(data):
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
        fit.cv_mape, fit.cv_se = grouped_cv_mape(form, data, seed=seed)
        forms[form] = fit
    notes += identification_notes(forms[PAPER], data)
    if "log_eta" in forms[PAPER].dropped_terms:
        notes.append("log_eta is 0 for every run (no parallel runs): alpha_eta cannot be estimated")
    chosen = choose_form(forms)
    return EnergyFits(
        forms=forms,
        chosen=chosen,
        roofline=fit_additive_roofline(data),
        time=fit_time_law(data, seed=seed),
        notes=notes,
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
                else f"|corr(log_C, log_M)| {collinearity(data):.3f}; sweep more hidden_size, seq_len and num_layers values"
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
    pooled = data.copy()
    strategy = " + strategy" if pooled["strategy"].nunique() > 1 else ""
    formulas = {
        "hardware_intercepts": f"log_E ~ log_C + log_M + log_eta + hardware{strategy}",
        HARDWARE_SLOPES: f"log_E ~ (log_C + log_M + log_eta) * hardware{strategy}",
    }
    folds = workload_folds(pooled["workload_hash"].to_numpy(), CV_FOLDS, seed)
    return {name: cv_mape(formula, pooled, folds)[0] for name, formula in formulas.items()}


def law_ranges(frame: pd.DataFrame, data: pd.DataFrame) -> dict[str, list[float]]:
    """[min, max] of every model input, of log_C, log_M and of eta over the fitted runs."""
    ranges: dict[str, list[float]] = {}
    for name in (f for f in INT_FIELDS if f != "warmup_steps"):  # the model's integer inputs
        ranges[name] = [float(frame[name].min()), float(frame[name].max())]
    for name in ("log_C", "log_M"):
        ranges[name] = [float(data[name].min()), float(data[name].max())]
    ranges["eta"] = [float(np.exp(data["log_eta"].min())), float(np.exp(data["log_eta"].max()))]
    return ranges


def summaries(fits: Mapping[str, FormFit]) -> dict[str, str]:
    """The statsmodels text summary of each fit, by name.

    statsmodels warns that its normality tests need 8 runs; on smaller fits the
    summary still prints them (marked invalid by that warning), so the warning is muted.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ValueWarning)
        return {name: fit.result.summary().as_text() for name, fit in fits.items()}
