"""The metrics of a fit run, computed from one :class:`fit.hardware.HardwareFit`.

Metrics (the paper's form unless named otherwise): ``n_runs``; ``adj_r2`` and
``adj_r2_baseline``; ``rmse_log`` and ``rmse_log_baseline`` (in-sample, natural-log
units); ``rmse_reduction`` (% by which the paper's rmse_log is below the baseline's);
``alpha_c``, ``alpha_m``, ``alpha_eta``, ``log_kappa`` (log J) and ``psi_<strategy>``;
``cv_mape`` (%, the registered form's) and ``cv_mape_<form>``, ``cv_mape_se_<form>``,
``adj_r2_<form>``, ``rmse_log_<form>`` for every form; ``eps_comp_j_per_flop``,
``eps_mem_j_per_element``, ``e0_j``, ``roofline_mape`` (additive decomposition);
``time_log_tau``, ``time_beta_c``, ``time_beta_m``, ``time_adj_r2``, ``time_cv_mape``;
``extrap_mape`` (%, the registered form's error on the larger models held out by the
size-extrapolation check), ``extrap_mape_<form>``, ``extrap_mape_se_<form>``,
``extrap_n_held_out`` and ``extrap_size_bound`` (L*d^2 fitted up to);
``speedup_<strategy>_<param>``, ``_rmse``, ``_n_points``; run counts
``n_runs_dropped``, ``n_eta_measured``, ``n_eta_from_law``, ``n_workloads``;
``n_repeated_configs`` and ``repeat_spread_pct`` (median relative std of energy across
repeats of one configuration, %, the noise floor; only when some configuration repeats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlflow_roofline.core.schema import (
    M_EXTRAP_HELD_OUT,
    M_EXTRAP_MAPE,
    M_EXTRAP_MAPE_FORM_PREFIX,
    M_EXTRAP_MAPE_SE_FORM_PREFIX,
    M_EXTRAP_SIZE_BOUND,
    M_N_RUNS,
    M_REPEAT_SPREAD,
    M_REPEATED_CONFIGS,
)
from mlflow_roofline.fit.diagnostics import collinearity
from mlflow_roofline.fit.forms import BASELINE, PAPER
from mlflow_roofline.fit.measured_speedup import ETA_LAW, ETA_MEASURED
from mlflow_roofline.fit.time_law import TIME_PER_WORK

if TYPE_CHECKING:
    from mlflow_roofline.fit.hardware import HardwareFit


def _paper_metrics(fit: HardwareFit) -> dict[str, float]:
    """The paper's law against the baseline, and the registered form's cv_mape."""
    paper = fit.energy.forms[PAPER]
    base = fit.energy.forms[BASELINE]
    return {
        "adj_r2": paper.adj_r2,
        "adj_r2_baseline": base.adj_r2,
        "rmse_log": paper.rmse_log,
        "rmse_log_baseline": base.rmse_log,
        "rmse_reduction": 100.0 * (1.0 - paper.rmse_log / base.rmse_log) if base.rmse_log > 0 else float("nan"),
        "alpha_c": paper.law.coefficient("log_C"),
        "alpha_m": paper.law.coefficient("log_M"),
        "alpha_eta": paper.law.coefficient("log_eta") if "log_eta" in paper.law.terms else float("nan"),
        "log_kappa": paper.law.coefficient("Intercept"),
        "cv_mape": fit.energy.forms[fit.energy.chosen].cv_mape,
        **{f"psi_{strategy}": value for strategy, value in fit.psi.items()},
    }


def _run_metrics(fit: HardwareFit) -> dict[str, float]:
    """Counts of the runs used and dropped for this hardware, and their collinearity."""
    return {
        M_N_RUNS: float(len(fit.frame)),
        "n_runs_dropped": float(sum(fit.dropped.values())),  # after the pull, for this hardware
        "n_eta_from_law": float((fit.frame["eta_source"] == ETA_LAW).sum()),
        "n_eta_measured": float((fit.frame["eta_source"] == ETA_MEASURED).sum()),
        "n_workloads": float(fit.frame["workload_hash"].nunique()),
        "corr_log_c_log_m": collinearity(fit.data),
        M_REPEATED_CONFIGS: float(fit.noise.n_configs),
        **({M_REPEAT_SPREAD: fit.noise.median_rel_std_pct} if fit.noise.n_configs else {}),
    }


def _roofline_and_time_metrics(fit: HardwareFit) -> dict[str, float]:
    """The additive roofline's costs and the time law's exponents."""
    roofline, time = fit.energy.roofline, fit.energy.time
    return {
        "eps_comp_j_per_flop": roofline.eps_comp,
        "eps_mem_j_per_element": roofline.eps_mem,
        "e0_j": roofline.e0,
        "roofline_mape": roofline.mape,
        "time_beta_c": time.law.coefficient("log_C"),
        "time_beta_m": time.law.coefficient("log_M"),
        "time_log_tau": time.law.coefficient("Intercept"),
        "time_adj_r2": time.adj_r2,
        "time_per_work": float(time.name == TIME_PER_WORK),
        "time_cv_mape": time.cv_mape,
    }


def _per_form_metrics(fit: HardwareFit) -> dict[str, float]:
    """Held-out and in-sample errors of every evaluated form."""
    out: dict[str, float] = {}
    for name, form in fit.energy.forms.items():
        out[f"cv_mape_{name}"] = form.cv_mape
        out[f"cv_mape_se_{name}"] = form.cv_se
        out[f"adj_r2_{name}"] = form.adj_r2
        out[f"rmse_log_{name}"] = form.rmse_log
    return out


def _extrapolation_metrics(fit: HardwareFit) -> dict[str, float]:
    """The size-extrapolation check: the registered form's error and every form's, %."""
    check = fit.energy.extrapolation
    if check is None:
        return {}
    out = {
        M_EXTRAP_MAPE: fit.energy.forms[fit.energy.chosen].extrap_mape,
        M_EXTRAP_HELD_OUT: float(check.held_out.sum()),
        M_EXTRAP_SIZE_BOUND: check.threshold,
    }
    for name, form in fit.energy.forms.items():
        out[f"{M_EXTRAP_MAPE_FORM_PREFIX}{name}"] = form.extrap_mape
        out[f"{M_EXTRAP_MAPE_SE_FORM_PREFIX}{name}"] = form.extrap_se
    return out


def _speedup_metrics(fit: HardwareFit) -> dict[str, float]:
    """Each strategy's speedup-law parameters, rmse and number of points."""
    out: dict[str, float] = {}
    for strategy, speedup in fit.speedup.items():
        for key, value in speedup.law.params.items():
            out[f"speedup_{strategy}_{key}"] = value
        if strategy != "single":
            out[f"speedup_{strategy}_rmse"] = speedup.law.rmse
            out[f"speedup_{strategy}_n_points"] = float(speedup.law.n_points)
    return out


def fit_metrics(fit: HardwareFit) -> dict[str, float]:
    """Every metric of one hardware's fit run (see the module docstring)."""
    return {
        **_run_metrics(fit),
        **_paper_metrics(fit),
        **_roofline_and_time_metrics(fit),
        **_per_form_metrics(fit),
        **_extrapolation_metrics(fit),
        **_speedup_metrics(fit),
    }
