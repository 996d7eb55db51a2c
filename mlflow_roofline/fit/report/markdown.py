"""The fit run's description: the Markdown the MLflow UI shows at the top of the run's page.

It writes the registered law as a formula with its fitted exponents and their 95 %
intervals, compares it with the baseline law and with the paper's figures, gives the
cross-validated (and, where logged, extrapolation) errors and says what each plot shows.
The full text report stays the artifact ``fit_report.txt``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scipy import stats

from mlflow_roofline.core.schema import (
    BASELINE_KINDS,
    BASELINE_MEASURED,
    BASELINE_PER_DEVICE,
    BASELINE_TIME_LAW,
    M_ADJ_R2,
    M_ADJ_R2_BASELINE,
    M_ALPHA_C,
    M_ALPHA_ETA,
    M_EXTRAP_MAPE,
    M_N_RUNS_BASELINE,
    M_N_WORKLOADS,
    M_RMSE_REDUCTION,
    M_ROOFLINE_MAPE,
    M_TIME_CV_MAPE,
)
from mlflow_roofline.fit.forms.cv import CV_FOLDS
from mlflow_roofline.fit.forms.describe import SYMBOLS, num, term_name
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.law.coefficients import LawCoefficients
from mlflow_roofline.tracking.notes import md_table

PAPER_FIGURES: dict[str, float] = {
    M_ADJ_R2: 0.853,
    M_ADJ_R2_BASELINE: 0.777,
    M_RMSE_REDUCTION: 19.0,
    M_ALPHA_C: 0.20,
    M_ALPHA_ETA: -1.06,
}
"""The paper's figures on 410 BERT configurations, 8x RTX 2080 Ti (rmse_reduction in %)."""
PAPER_SETUP = "410 BERT configurations, 8x RTX 2080 Ti"

PLOTS: dict[str, str] = {
    "plots/measured_vs_predicted.png": "measured against predicted energy per law (log-log; the diagonal is exact)",
    "plots/residuals.png": "log residuals against fitted log energy per law (a trend is structure the law misses)",
    "plots/speedup_vs_n.png": "measured speedup t1/tN against N per strategy, the fitted speedup law, ideal S = N",
    "plots/energy_vs_n.png": "energy per sample relative to one device against N, with what the law implies",
    "plots/extrapolation.png": "the larger models held out by the size-extrapolation check: measured against "
    "predicted from the smaller ones",
}
"""Every plot a fit run may log, with what it shows (the description names those logged)."""
TABLE_ARTIFACT = "measured_vs_predicted.json"


def fit_markdown(
    fit: HardwareFit, metrics: Mapping[str, float], n_found: int, plots: Sequence[str] = tuple(PLOTS)[:4]
) -> str:
    """The description of one hardware's fit run: what it does not trust first, then the law, the plots,
    the comparisons and errors; sized to fit MLflow's tag limit.

    Args:
        fit: the hardware's fits.
        metrics: the run's metrics (``fit.metrics()`` and any logged since, such as ``extrap_mape*``).
        n_found: finished train runs the fit pulled.
        plots: the plot artifacts logged (keys of :data:`PLOTS`).
    """
    made_of = fit.energy.registered_forms
    averaged = f" ({', '.join(f'`{name}`' for name in made_of)} averaged)" if made_of != [fit.energy.chosen] else ""
    parts = [
        f"## Energy law for `{fit.hardware}`",
        f"{len(fit.frame)} of {n_found} finished train runs ({fit.energy_source} energy), "
        f"{int(metrics.get(M_N_WORKLOADS, 0))} workloads. Registered form: **`{fit.energy.chosen}`**{averaged}.",
    ]
    if fit.distrust:
        parts.append("### Not to be trusted\n\n" + "\n".join(f"- {note}." for note in fit.distrust))
    parts += [
        *registered_law(fit),
        plot_list(plots),
        comparison(fit, metrics),
        cross_validation(fit, metrics),
    ]
    if fit.energy.notes:
        parts.append("### Notes\n\n" + "\n".join(f"- {note}" for note in fit.energy.notes))
    parts.append(baseline_sentence(metrics))
    return "\n\n".join(parts) + "\n"


def registered_law(fit: HardwareFit) -> list[str]:
    """The registered law written out with its coefficients; an average of forms that tie, each of its members."""
    members = [fit.energy.forms[name] for name in fit.energy.registered_forms]
    symbols = (
        "C: proxy FLOPs, M: memory traffic (elements), η<sub>h</sub> = S(N)/N: hardware efficiency, "
        "Ψ: strategy factor (`single` = 1); E in joules."
    )
    if len(members) == 1:
        (form,) = members
        return [f"**E = {form.describe()}**", f"{symbols} Statsmodels: `{form.formula}`", coefficient_table(form.law)]
    parts = [
        f"E is the geometric mean of the {len(members)} forms below (the mean of their log E): their errors on "
        f"held-out workloads are within one standard error of the best. {symbols}"
    ]
    for form in members:
        parts += [f"**E<sub>{form.name}</sub> = {form.describe()}**", coefficient_table(form.law)]
    return parts


def plot_list(plots: Sequence[str]) -> str:
    """The plots logged, each with what it shows, and the run's other files."""
    named = "\n".join(f"- `{path}`: {PLOTS.get(path, 'a diagnostic plot')}." for path in plots)
    return (
        f"### Plots (Artifacts tab)\n\n{named}\n- `{TABLE_ARTIFACT}`: every run's measured and predicted energy, "
        "by run name. Full text: `fit_report.txt`; coefficients: `coefficients.csv`; summaries: `summaries/`."
    )


def baseline_sentence(metrics: Mapping[str, float]) -> str:
    """How each parallel run's single-device time was found (tag `roofline.baseline`), by kind."""
    counts = {kind: int(metrics.get(M_N_RUNS_BASELINE[kind], 0)) for kind in BASELINE_KINDS}
    return (
        "Single-device baselines of the parallel runs (tag `roofline.baseline`): "
        f"{counts[BASELINE_MEASURED]} `{BASELINE_MEASURED}` (single runs at the same global batch), "
        f"{counts[BASELINE_PER_DEVICE]} `{BASELINE_PER_DEVICE}` (at the same per-device batch: weak scaling), "
        f"{counts[BASELINE_TIME_LAW]} `{BASELINE_TIME_LAW}` (the single-device time law's prediction)."
    )


def coefficient_table(law: LawCoefficients, level: float = 0.95) -> str:
    """Each coefficient of ``law`` with its ``level`` interval (from the law's covariance, HC3 where fitted so)."""
    t = float(stats.t.ppf(0.5 + level / 2, law.df_resid)) if law.df_resid > 0 else math.inf
    rows = []
    exponents_first = sorted(range(len(law.terms)), key=lambda i: (law.terms[i] not in SYMBOLS, i))
    for i in exponents_first:
        value, half = law.coef[i], t * math.sqrt(max(law.cov[i][i], 0.0))
        rows.append([term_name(law.terms[i]), num(value), f"[{num(value - half)}, {num(value + half)}]"])
    return md_table(["coefficient", "estimate", f"{level:.0%} interval"], rows, "lrr")


def comparison(fit: HardwareFit, metrics: Mapping[str, float]) -> str:
    """This fit against the baseline law (no efficiency term) and against the paper's figures.

    The exponents are the registered form's where it has the paper's term (one value per
    coefficient in the whole description), else the paper's form's, said so.
    """
    rows = [
        ["adjusted R², efficiency-aware law (paper's form)", _r2(metrics[M_ADJ_R2]), _r2(PAPER_FIGURES[M_ADJ_R2])],
        [
            "adjusted R², baseline law (no η term)",
            _r2(metrics[M_ADJ_R2_BASELINE]),
            _r2(PAPER_FIGURES[M_ADJ_R2_BASELINE]),
        ],
        [
            "log RMSE against the baseline's",
            _pct_change(metrics[M_RMSE_REDUCTION]),
            _pct_change(PAPER_FIGURES[M_RMSE_REDUCTION]),
        ],
    ]
    registered = fit.energy.forms[fit.energy.chosen].law
    for term, metric, symbol in (("log_C", M_ALPHA_C, "α<sub>C</sub>"), ("log_eta", M_ALPHA_ETA, "α<sub>η</sub>")):
        if term in registered.terms:
            rows.append([symbol, num(registered.coefficient(term)), f"≈ {PAPER_FIGURES[metric]:.2f}"])
        else:
            label = f"{symbol} (paper's form; not in the registered one)"
            rows.append([label, num(metrics[metric]), f"≈ {PAPER_FIGURES[metric]:.2f}"])
    return "### Against the baseline and the paper\n\n" + md_table(
        ["", "this fit", f"paper ({PAPER_SETUP})"], rows, "lrr"
    )


def cross_validation(fit: HardwareFit, metrics: Mapping[str, float]) -> str:
    """Grouped-CV error of every form (the registered one marked) and extrapolation errors if logged."""
    rows = []
    for name, form in fit.energy.forms.items():
        mark = " (registered)" if name == fit.energy.chosen else ""
        cv = f"{form.cv_mape:.3g} ± {form.cv_se:.2g}"
        rows.append([f"`{name}`{mark}", _r2(form.adj_r2), num(form.rmse_log), cv])
    text = (
        f"### Errors on unseen workloads\n\nGrouped {CV_FOLDS}-fold cross-validation (a workload's runs "
        "never split between training and test), mean absolute % error of the energy:\n\n"
        + md_table(["form", "adjusted R²", "log RMSE", "CV MAPE %"], rows, "lrrr")
        + f"\n\nTime law CV MAPE {metrics[M_TIME_CV_MAPE]:.3g} %; additive roofline "
        f"(E = ε<sub>comp</sub>·C + ε<sub>mem</sub>·M + E<sub>0</sub>) MAPE {metrics[M_ROOFLINE_MAPE]:.3g} %."
    )
    if fit.energy.proxies is not None:
        text += f"\n\nPaper's proxies against the complete ones: {fit.energy.proxies.describe()}."
    extrap = extrapolation_rows(metrics)
    if extrap:
        text += "\n\nExtrapolation (fitted on the smaller sizes, tested on larger ones):\n\n" + md_table(
            ["metric", "MAPE %"], extrap, "lr"
        )
    return text


def extrapolation_rows(metrics: Mapping[str, float]) -> list[list[str]]:
    """``extrap_mape*`` metrics as table rows, sorted by name."""
    return [[f"`{k}`", f"{v:.3g}"] for k, v in sorted(metrics.items()) if k.startswith(M_EXTRAP_MAPE)]


def _pct_change(reduction: float) -> str:
    return "n/a" if not math.isfinite(reduction) else f"{-reduction:+.0f} %"


def _r2(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3f}"
