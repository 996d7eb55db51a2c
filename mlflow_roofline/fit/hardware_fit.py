"""One hardware's fit, without MLflow: fitting it (:func:`fit_hardware`), the result
(:class:`HardwareFit`), its metrics (:func:`fit_metrics`) and its text report (:func:`hardware_report`).

Fitting: ``estimate`` energy is never mixed with measured energy unless
``allow_estimate`` (where both exist the estimated runs are dropped, where only
estimates exist the fit stops and says to pass ``--allow-estimate``); measured speedup
and efficiency (:mod:`fit.runs.measured_speedup`) and speedup laws per strategy
(:mod:`fit.speedup_fit`). A parallel run's single-device baseline is the median single
run at the same global batch (``measured``), else at the same per-device batch
(``per_device``: weak scaling), else (``missing_baseline="law"``, the default) the
single-device time the hardware's time law predicts (``time_law``, its eta counted in
``n_eta_from_law``); so no run with a finite time and energy is dropped for want of a
baseline. ``missing_baseline="drop"`` drops the runs without a measured single run
instead. Where the time law cannot be fitted (too few single runs), eta comes from the
strategy's speedup law. Then the energy forms, the additive roofline and the time law
(:mod:`fit.forms.energy_laws`).

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
where the runs mix kinds (decoders, LoRA, checkpointing), ``cv_mape_paper_proxies`` and
``cv_mape_complete_proxies`` (%, the best form of each family) and ``paper_proxies_suffice``
(1 when the paper's proxies alone would have done as well, :mod:`fit.forms.proxy_comparison`);
``speedup_<strategy>_<param>``, ``_rmse``, ``_n_points``, ``_workload_aware`` (1 where the
``comm_time`` law was chosen); ``speedup_cv_mape_<strategy>_<law>`` and
``speedup_extrap_mape_<strategy>_<law>`` (%, speedup, every candidate law); run counts
``n_runs_dropped``, ``n_eta_measured``, ``n_eta_from_law``, ``n_workloads``;
``n_runs_baseline_measured``, ``n_runs_baseline_per_device``, ``n_runs_baseline_time_law``
(parallel runs by the kind of their single-device baseline);
``n_repeated_configs`` and ``repeat_spread_pct`` (median relative std of energy across
repeats of one configuration, %, the noise floor; only when some configuration repeats).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.invocation import option
from mlflow_roofline.core.schema import (
    BASELINE_KINDS,
    BASELINE_MEASURED,
    BASELINE_PER_DEVICE,
    BASELINE_TIME_LAW,
    M_ADJ_R2,
    M_ADJ_R2_BASELINE,
    M_ADJ_R2_FORM_PREFIX,
    M_ALPHA_C,
    M_ALPHA_ETA,
    M_ALPHA_M,
    M_CORR_LOG_C_LOG_M,
    M_CV_MAPE,
    M_CV_MAPE_COMPLETE_PROXIES,
    M_CV_MAPE_FORM_PREFIX,
    M_CV_MAPE_PAPER_PROXIES,
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
    M_N_RUNS_BASELINE,
    M_N_RUNS_DROPPED,
    M_N_WORKLOADS,
    M_PAPER_PROXIES_SUFFICE,
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
    MISSING_BASELINE_CHOICES,
    TAG_ENERGY_SOURCE,
    form_metric,
    speedup_metric,
    speedup_score_metric,
)
from mlflow_roofline.fit.forms.catalog import BASELINE, PAPER
from mlflow_roofline.fit.forms.diagnostics import collinearity, law_ranges
from mlflow_roofline.fit.forms.energy_laws import EnergyFits, fit_energy_laws
from mlflow_roofline.fit.forms.ols import FormFit
from mlflow_roofline.fit.forms.time_law import TIME_PER_WORK, fit_time_law
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.fit.runs.measured_speedup import (
    ETA_LAW,
    ETA_MEASURED,
    ETA_NONE,
    SingleTime,
    fill_from_laws,
    measure_speedup,
)
from mlflow_roofline.fit.runs.noise import RepeatSpread, repeat_spread
from mlflow_roofline.fit.runs.precisions import flops_scale, run_precisions
from mlflow_roofline.fit.runs.trust import repeat_note, sign_notes, superlinear_note
from mlflow_roofline.fit.speedup_fit import SpeedupFit, fit_speedup_laws, laws_of, n_only_laws_of
from mlflow_roofline.law.fitted import FittedLaw, precisions_of
from mlflow_roofline.law.log_features import FLOPS_SCALE

ESTIMATE = "estimate"


@dataclasses.dataclass(frozen=True)
class HardwareFit:
    """Everything fitted for one hardware.

    Attributes:
        hardware: the ``roofline.hardware`` value.
        energy_source: the energy sources of the runs used, ``+``-joined.
        frame: the runs used, with speedup, eta and eta_source.
        data: their law features (:func:`fit.runs.feature_frame.feature_frame`).
        speedup: fitted speedup law per strategy.
        energy: the energy forms, roofline decomposition and time law.
        law: the registered law (the chosen form).
        dropped: reason -> runs dropped for this hardware after the pull.
        run_id: the fit run ("" until logged: :func:`fit.fit_runs.log_and_register` returns a copy with it).
        model_version: the registered version (None without registration).
        aliases: aliases set on that version.
        noise: the repeat-to-repeat spread of energy (:mod:`fit.runs.noise`), the noise floor.
    """

    hardware: str
    energy_source: str
    frame: pd.DataFrame
    data: pd.DataFrame
    speedup: dict[str, SpeedupFit]
    energy: EnergyFits
    law: FittedLaw
    dropped: dict[str, int]
    run_id: str = ""
    model_version: str | None = None
    aliases: tuple[str, ...] = ()
    noise: RepeatSpread = dataclasses.field(default_factory=lambda: RepeatSpread(0, float("nan")))

    @property
    def psi(self) -> dict[str, float]:
        """Log strategy factors of the paper's law, by strategy (the reference level is 0)."""
        law = self.energy.forms[PAPER].law
        prefix = "strategy[T."
        return {t[len(prefix) : -1]: law.coefficient(t) for t in law.terms if t.startswith(prefix)}

    def metrics(self) -> dict[str, float]:
        """The fit run's metrics (:func:`fit_metrics`)."""
        return fit_metrics(self)

    def report(self) -> str:
        """Human-readable summary of this hardware's fit (:func:`hardware_report`)."""
        return hardware_report(self)

    @property
    def distrust(self) -> list[str]:
        """What this fit does not trust, one sentence each (:mod:`fit.runs.trust`)."""
        return distrust_notes(self)


def select_energy_sources(
    frame: pd.DataFrame, hardware: str, allow_estimate: bool
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Keep measured energy only, unless ``allow_estimate``; see the module docstring.

    Raises:
        RooflineError: every run of ``hardware`` is an estimate and ``allow_estimate`` is off.
    """
    is_estimate = frame["energy_source"] == ESTIMATE
    if allow_estimate or not is_estimate.any():
        return frame, {}
    if is_estimate.all():
        raise RooflineError(
            f"allow_estimate: all {len(frame)} runs on {hardware!r} carry estimated energy "
            f"({TAG_ENERGY_SOURCE}=estimate, not measured); pass {option('allow_estimate', 'true')} to fit on them"
        )
    return frame[~is_estimate], {
        f"with estimated energy (not mixed with measured; {option('allow_estimate', 'true')} mixes them)": int(
            is_estimate.sum()
        )
    }


def time_law_baseline(frame: pd.DataFrame, seed: int = 0) -> tuple[SingleTime, FormFit] | None:
    """The hardware's single-device time law fitted on ``frame``'s single runs, and its predictor
    of each run's single-device seconds; None where the runs cannot give one (too few single runs)."""
    singles = frame[frame["strategy"] == "single"].assign(speedup=1.0)
    try:
        time = fit_time_law(feature_frame(singles), seed=seed)
    except RooflineError:
        return None

    def single_time(rows: pd.DataFrame) -> np.ndarray:
        features = feature_frame(rows.assign(speedup=rows["num_devices"].astype(float)))
        return np.exp(time.law.mean({c: features[c].to_numpy() for c in ("log_C", "log_M")}))

    return single_time, time


def _speedup_and_eta(
    frame: pd.DataFrame,
    hardware: str,
    missing_baseline: str,
    dropped: dict[str, int],
    seed: int = 0,
    workload_aware: bool = True,
) -> tuple[pd.DataFrame, dict[str, SpeedupFit], FormFit | None]:
    """Measured speedup, the speedup laws, eta for every kept run (see the module docstring), and the
    time law where it was fitted for the baselines."""
    measured = measure_speedup(frame)
    time: FormFit | None = None
    if missing_baseline == "law" and (measured["eta_source"] == ETA_NONE).any():
        found = time_law_baseline(frame, seed)
        if found is not None:
            single_time, time = found
            measured = measure_speedup(frame, single_time)
    speedup = fit_speedup_laws(measured, workload_aware=workload_aware, seed=seed)
    if "single" not in speedup:
        raise RooflineError(
            f"runs: no single-device run (strategy single) on {hardware!r}: speedup, efficiency and the "
            "time law need them as baselines; add strategy single to the sweep"
        )
    used, n_no_base = fill_from_laws(measured, {} if missing_baseline == "drop" else laws_of(speedup))
    if n_no_base:
        dropped["without a single-device baseline" + (" or a speedup law" if missing_baseline == "law" else "")] = (
            n_no_base
        )
    return used, speedup, time


def fit_hardware(
    frame: pd.DataFrame,
    hardware: str,
    *,
    allow_estimate: bool = False,
    missing_baseline: str = "law",
    seed: int = 0,
    workload_aware: bool = True,
) -> HardwareFit:
    """Every fit of one hardware's runs (no MLflow logging).

    ``workload_aware=False`` leaves the ``comm_time`` speedup law out (N-only laws alone), to
    compare against it.
    """
    if missing_baseline not in MISSING_BASELINE_CHOICES:
        raise ConfigError(
            "missing_baseline", f"must be one of {', '.join(MISSING_BASELINE_CHOICES)}, got {missing_baseline!r}"
        )
    frame, dropped = select_energy_sources(frame, hardware, allow_estimate)
    precisions = run_precisions(frame)
    scale = flops_scale(hardware, precisions, load_hardware_table())
    if scale:
        frame = frame.assign(**{FLOPS_SCALE: [scale.get(p, 1.0) for p in precisions]})
    used, speedup, time = _speedup_and_eta(frame, hardware, missing_baseline, dropped, seed, workload_aware)
    data = feature_frame(used)
    ranges = law_ranges(used, data)
    energy = fit_energy_laws(data, seed=seed, speedup_laws=laws_of(speedup), ranges=ranges, time=time)
    sources = "+".join(sorted(used["energy_source"].unique()))
    law = FittedLaw(
        hardware=hardware,
        energy_source=sources,
        form=energy.chosen,
        energy_law=energy.forms[energy.chosen].law,
        time_law=energy.time.law,
        speedup_laws=laws_of(speedup),
        n_only_speedup_laws=n_only_laws_of(speedup),
        ranges=ranges,
        n_runs=len(used),
        cv_mape=energy.forms[energy.chosen].cv_mape,
        precisions=precisions_of(run_precisions(used)),
        flops_scale=scale,
    )
    return HardwareFit(hardware, sources, used, data, speedup, energy, law, dropped, noise=repeat_spread(used))


def baseline_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Parallel runs of ``frame`` by the kind of their single-device baseline (every kind, zeros included)."""
    kinds = frame["baseline"] if "baseline" in frame else pd.Series(dtype=object)
    return {kind: int((kinds == kind).sum()) for kind in BASELINE_KINDS}


# -- the fit run's metrics ------------------------------------------------------------


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
        **{M_N_RUNS_BASELINE[kind]: float(n) for kind, n in baseline_counts(fit.frame).items()},
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


def _proxy_metrics(fit: HardwareFit) -> dict[str, float]:
    """The paper's proxies against the complete ones, where the runs mix kinds (else nothing)."""
    comparison = fit.energy.proxies
    if comparison is None:
        return {}
    return {
        M_CV_MAPE_PAPER_PROXIES: comparison.paper_cv_mape,
        M_CV_MAPE_COMPLETE_PROXIES: comparison.complete_cv_mape,
        M_PAPER_PROXIES_SUFFICE: float(comparison.suffices),
    }


def _speedup_metrics(fit: HardwareFit) -> dict[str, float]:
    """Each strategy's speedup-law parameters, rmse, number of points, whether it is workload-aware,
    and every candidate law's CV and size-extrapolation MAPE of speedup."""
    out: dict[str, float] = {}
    for strategy, speedup in fit.speedup.items():
        for key, value in speedup.law.params.items():
            out[speedup_metric(strategy, key)] = value
        if strategy != "single":
            out[speedup_metric(strategy, "rmse")] = speedup.law.rmse
            out[speedup_metric(strategy, "n_points")] = float(speedup.law.n_points)
            out[speedup_metric(strategy, "workload_aware")] = float(speedup.law.workload_aware)
        for form, mape in speedup.cv_mape.items():
            out[speedup_score_metric(M_CV_MAPE, strategy, form)] = mape
        for form, mape in speedup.extrap_mape.items():
            out[speedup_score_metric(M_EXTRAP_MAPE, strategy, form)] = mape
    return out


def fit_metrics(fit: HardwareFit) -> dict[str, float]:
    """Every metric of one hardware's fit run (see the module docstring)."""
    return {
        **_run_metrics(fit),
        **_paper_metrics(fit),
        **_roofline_and_time_metrics(fit),
        **_per_form_metrics(fit),
        **_extrapolation_metrics(fit),
        **_proxy_metrics(fit),
        **_speedup_metrics(fit),
    }


# -- the text report ------------------------------------------------------------------


def _form_lines(fit: HardwareFit) -> list[str]:
    """One line per evaluated energy form, the registered one marked."""
    check = fit.energy.extrapolation
    lines = [
        "energy laws (grouped CV by workload"
        + (
            f"; extrapolation: fitted on L*d^2 <= {check.threshold:.3g}, {int(check.held_out.sum())} larger runs "
            "predicted"
            if check is not None
            else ""
        )
        + "):"
    ]
    for name, form in fit.energy.forms.items():
        mark = "  <- registered" if name == fit.energy.chosen else ""
        extrap = f"  extrap_mape {form.extrap_mape:.3g}% (se {form.extrap_se:.2g})" if check is not None else ""
        lines.append(
            f"  {name:16s} adj_R2 {form.adj_r2:.4f}  rmse_log {form.rmse_log:.4f}  "
            f"cv_mape {form.cv_mape:.3g}% (se {form.cv_se:.2g}){extrap}{mark}"
        )
    lines.append(
        "registered: among forms that pass the sanity checks, the simplest within one standard error of the best on "
        "the worse of cv_mape and extrap_mape, averaged in logs with the one or two others whose mean scores lower "
        "still (where one does and passes the checks)"
    )
    if fit.energy.proxies is not None:
        lines.append(fit.energy.proxies.describe())
    return lines


def _law_lines(fit: HardwareFit, m: dict[str, float]) -> list[str]:
    """The paper's law, the additive roofline and the time law, one line each."""
    change = "below" if m[M_RMSE_REDUCTION] >= 0 else "above"
    r = fit.energy.roofline
    return [
        (
            f"paper's law: alpha_c {m[M_ALPHA_C]:.3f}, alpha_m {m[M_ALPHA_M]:.3f}, alpha_eta {m[M_ALPHA_ETA]:.3f}, "
            f"log_kappa {m[M_LOG_KAPPA]:.3f}; log rmse {abs(m[M_RMSE_REDUCTION]):.1f}% {change} the baseline's"
        ),
        (
            f"additive roofline ({r.scope} runs): {r.eps_comp:.3e} J/FLOP, {r.eps_mem:.3e} J/element, "
            f"{r.e0:.3g} J fixed; mape {r.mape:.1f}%"
        ),
        (
            f"time law: log_t1 = {m[M_TIME_LOG_TAU]:.3f} + {m[M_TIME_BETA_C]:.3f} log_C + {m[M_TIME_BETA_M]:.3f} log_M "
            f"(cv_mape {m[M_TIME_CV_MAPE]:.3g}%)"
        ),
    ]


BASELINE_WORDS: dict[str, str] = {
    BASELINE_MEASURED: f"{BASELINE_MEASURED} (single runs at the same global batch)",
    BASELINE_PER_DEVICE: f"{BASELINE_PER_DEVICE} (single runs at the same per-device batch)",
    BASELINE_TIME_LAW: f"{BASELINE_TIME_LAW} (the single-device time law)",
}


def baseline_line(frame: pd.DataFrame) -> str:
    """One line: the parallel runs by the kind of their single-device baseline."""
    counts = baseline_counts(frame)
    parts = ", ".join(f"{n} {BASELINE_WORDS[kind]}" for kind, n in counts.items())
    return f"single-device baselines of parallel runs: {parts}"


def distrust_notes(fit: HardwareFit) -> list[str]:
    """Superlinear speedups, disagreeing repeats and exponents of the wrong sign (:mod:`fit.runs.trust`):
    the paper's form's and, where it differs, the registered form's energy exponents."""
    exponents = {}
    for name in dict.fromkeys([PAPER, fit.energy.chosen]):
        law = fit.energy.forms[name].law
        for term, symbol in (("log_C", "alpha_C"), ("log_M", "alpha_M")):
            if term in law.terms:
                exponents[f"{symbol} of `{name}`"] = law.coefficient(term)
    time_law = fit.energy.time.law
    betas = (time_law.coefficient("log_C"), time_law.coefficient("log_M"))
    found = [superlinear_note(fit.frame), repeat_note(fit.noise), *sign_notes(exponents, betas)]
    return [note for note in found if note]


def hardware_report(fit: HardwareFit) -> str:
    """Human-readable summary of one hardware's fit."""
    m = fit.metrics()
    lines = [
        (
            f"hardware: {fit.hardware} (energy: {fit.energy_source}), {len(fit.frame)} runs, "
            f"{int(m[M_N_WORKLOADS])} workloads, {int(m[M_N_ETA_FROM_LAW])} with eta from a law"
        ),
        baseline_line(fit.frame),
    ]
    if fit.dropped:
        lines.append("dropped: " + ", ".join(f"{n} {r}" for r, n in fit.dropped.items()))
    lines.append("speedup laws:")
    lines += [f"  {speedup.describe()}" for s, speedup in fit.speedup.items() if s != "single"]
    lines += _form_lines(fit)
    lines.append(fit.noise.describe())
    lines += _law_lines(fit, m)
    lines += [f"note: {n}" for n in fit.energy.notes]
    lines += [f"not trusted: {n}" for n in fit.distrust]
    return "\n".join(lines)
