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
    M_ADJ_R2,
    M_ADJ_R2_BASELINE,
    M_ADJ_R2_FORM_PREFIX,
    M_ALPHA_C,
    M_ALPHA_ETA,
    M_ALPHA_M,
    M_CORR_LOG_C_LOG_M,
    M_CV_MAPE,
    M_CV_MAPE_FORM_PREFIX,
    M_CV_MAPE_SE_FORM_PREFIX,
    M_E0_J,
    M_EPS_COMP,
    M_EPS_MEM,
    M_EXTRAP_HELD_OUT,
    M_EXTRAP_MAPE,
    M_EXTRAP_MAPE_FORM_PREFIX,
    M_EXTRAP_MAPE_SE_FORM_PREFIX,
    M_EXTRAP_SIZE_BOUND,
    M_LOG_KAPPA,
    M_N_ETA_FROM_LAW,
    M_N_ETA_MEASURED,
    M_N_RUNS,
    M_N_RUNS_DROPPED,
    M_N_WORKLOADS,
    M_PSI_PREFIX,
    M_REPEAT_SPREAD,
    M_REPEATED_CONFIGS,
    M_RMSE_LOG,
    M_RMSE_LOG_BASELINE,
    M_RMSE_LOG_FORM_PREFIX,
    M_RMSE_REDUCTION,
    M_ROOFLINE_MAPE,
    M_TIME_ADJ_R2,
    M_TIME_BETA_C,
    M_TIME_BETA_M,
    M_TIME_CV_MAPE,
    M_TIME_LOG_TAU,
    M_TIME_PER_WORK,
    form_metric,
    speedup_metric,
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
        M_ADJ_R2: paper.adj_r2,
        M_ADJ_R2_BASELINE: base.adj_r2,
        M_RMSE_LOG: paper.rmse_log,
        M_RMSE_LOG_BASELINE: base.rmse_log,
        M_RMSE_REDUCTION: 100.0 * (1.0 - paper.rmse_log / base.rmse_log) if base.rmse_log > 0 else float("nan"),
        M_ALPHA_C: paper.law.coefficient("log_C"),
        M_ALPHA_M: paper.law.coefficient("log_M"),
        M_ALPHA_ETA: paper.law.coefficient("log_eta") if "log_eta" in paper.law.terms else float("nan"),
        M_LOG_KAPPA: paper.law.coefficient("Intercept"),
        M_CV_MAPE: fit.energy.forms[fit.energy.chosen].cv_mape,
        **{form_metric(M_PSI_PREFIX, strategy): value for strategy, value in fit.psi.items()},
    }


def _run_metrics(fit: HardwareFit) -> dict[str, float]:
    """Counts of the runs used and dropped for this hardware, and their collinearity."""
    return {
        M_N_RUNS: float(len(fit.frame)),
        M_N_RUNS_DROPPED: float(sum(fit.dropped.values())),  # after the pull, for this hardware
        M_N_ETA_FROM_LAW: float((fit.frame["eta_source"] == ETA_LAW).sum()),
        M_N_ETA_MEASURED: float((fit.frame["eta_source"] == ETA_MEASURED).sum()),
        M_N_WORKLOADS: float(fit.frame["workload_hash"].nunique()),
        M_CORR_LOG_C_LOG_M: collinearity(fit.data),
        M_REPEATED_CONFIGS: float(fit.noise.n_configs),
        **({M_REPEAT_SPREAD: fit.noise.median_rel_std_pct} if fit.noise.n_configs else {}),
    }


def _roofline_and_time_metrics(fit: HardwareFit) -> dict[str, float]:
    """The additive roofline's costs and the time law's exponents."""
    roofline, time = fit.energy.roofline, fit.energy.time
    return {
        M_EPS_COMP: roofline.eps_comp,
        M_EPS_MEM: roofline.eps_mem,
        M_E0_J: roofline.e0,
        M_ROOFLINE_MAPE: roofline.mape,
        M_TIME_BETA_C: time.law.coefficient("log_C"),
        M_TIME_BETA_M: time.law.coefficient("log_M"),
        M_TIME_LOG_TAU: time.law.coefficient("Intercept"),
        M_TIME_ADJ_R2: time.adj_r2,
        M_TIME_PER_WORK: float(time.name == TIME_PER_WORK),
        M_TIME_CV_MAPE: time.cv_mape,
    }


def _per_form_metrics(fit: HardwareFit) -> dict[str, float]:
    """Held-out and in-sample errors of every evaluated form."""
    out: dict[str, float] = {}
    for name, form in fit.energy.forms.items():
        out[form_metric(M_CV_MAPE_FORM_PREFIX, name)] = form.cv_mape
        out[form_metric(M_CV_MAPE_SE_FORM_PREFIX, name)] = form.cv_se
        out[form_metric(M_ADJ_R2_FORM_PREFIX, name)] = form.adj_r2
        out[form_metric(M_RMSE_LOG_FORM_PREFIX, name)] = form.rmse_log
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
        out[form_metric(M_EXTRAP_MAPE_FORM_PREFIX, name)] = form.extrap_mape
        out[form_metric(M_EXTRAP_MAPE_SE_FORM_PREFIX, name)] = form.extrap_se
    return out


def _speedup_metrics(fit: HardwareFit) -> dict[str, float]:
    """Each strategy's speedup-law parameters, rmse and number of points."""
    out: dict[str, float] = {}
    for strategy, speedup in fit.speedup.items():
        for key, value in speedup.law.params.items():
            out[speedup_metric(strategy, key)] = value
        if strategy != "single":
            out[speedup_metric(strategy, "rmse")] = speedup.law.rmse
            out[speedup_metric(strategy, "n_points")] = float(speedup.law.n_points)
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
