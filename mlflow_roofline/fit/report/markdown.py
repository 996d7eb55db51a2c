"""The fit run's description: the Markdown the MLflow UI shows at the top of the run's page.

It writes the registered law as a formula with its fitted exponents and their 95 %
intervals, compares it with the baseline law and with the paper's figures, gives the
cross-validated (and, where logged, extrapolation) errors and says what each plot shows.
The full text report stays the artifact ``fit_report.txt``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

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
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.law.log_features import KIND_FEATURES
from mlflow_roofline.law.roofline_efficiency import ALPHA_ETA, SHARPNESS, RooflineLaw, SmoothRooflineLaw
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
    "plots/measured_vs_predicted.png": "measured against predicted energy, one panel per law (log-log); points on "
    "the diagonal are exact, a panel that fans out misses a factor",
    "plots/residuals.png": "log residuals against fitted log energy per law; a trend or a strategy off zero is "
    "structure the law misses",
    "plots/speedup_vs_n.png": "measured speedup S = t1/tN against N per strategy, with the fitted speedup law "
    "and ideal scaling S = N",
    "plots/energy_vs_n.png": "energy per sample relative to the same workload on one device, against N, with "
    "what the law implies (eta^alpha_eta times the strategy factor); above 1 costs energy",
}
TABLE_ARTIFACT = "measured_vs_predicted.json"

_SYMBOLS = {
    "log_C": "C",
    "log_M": "M",
    "log_C_all": "(C + C<sub>head</sub>)",
    "log_M_all": "(M + M<sub>opt</sub>)",
    "log_eta": "η<sub>h</sub>",
    "log_N": "N",
}
_NAMES = {
    "Intercept": "log κ",
    "log_C": "α<sub>C</sub>",
    "log_M": "α<sub>M</sub>",
    "log_C_all": "α<sub>C</sub> (C + C<sub>head</sub>)",
    "log_M_all": "α<sub>M</sub> (M + M<sub>opt</sub>)",
    "log_eta": "α<sub>η</sub>",
    "log_N": "α<sub>N</sub>",
    SHARPNESS: "k (sharpness of the compute/memory maximum)",
}
_STRATEGY = re.compile(r"^strategy\[T\.(?P<level>[^\]]+)\](?::(?P<slope>\w+))?$")
_KIND = re.compile(rf"^(?P<kind>{'|'.join(KIND_FEATURES)})\[T\.(?P<level>[^\]]+)\]$")


def fit_markdown(fit: HardwareFit, metrics: Mapping[str, float], n_found: int) -> str:
    """The description of one hardware's fit run.

    Args:
        fit: the hardware's fits.
        metrics: the run's metrics (``fit.metrics()`` and any logged since, such as ``extrap_mape*``).
        n_found: finished train runs the fit pulled.
    """
    chosen = fit.energy.forms[fit.energy.chosen]
    parts = [
        f"## Energy law for `{fit.hardware}`",
        f"{len(fit.frame)} of {n_found} finished train runs ({fit.energy_source} energy), "
        f"{int(metrics.get(M_N_WORKLOADS, 0))} workloads. Registered form: **`{fit.energy.chosen}`**.",
        baseline_sentence(metrics),
        "**E = " + formula(chosen.law) + "**",
        "C: proxy FLOPs, M: memory traffic (elements), η<sub>h</sub> = S(N)/N: hardware efficiency, "
        "Ψ: strategy factor (`single` = 1); E in joules. Statsmodels: `" + chosen.formula + "`",
        coefficient_table(chosen.law),
        comparison(metrics),
        cross_validation(fit, metrics),
    ]
    if fit.energy.notes:
        parts.append("### Notes\n\n" + "\n".join(f"- {note}" for note in fit.energy.notes))
    plots = "\n".join(f"- `{name}`: {what}." for name, what in PLOTS.items())
    parts.append(
        f"### Plots (Artifacts tab)\n\n{plots}\n- `{TABLE_ARTIFACT}`: every run's measured and predicted "
        "energy, as a table the artifact view can filter.\n\nFull text: `fit_report.txt`; "
        "coefficients with HC3 errors: `coefficients.csv`; statsmodels summaries: `summaries/`."
    )
    return "\n\n".join(parts) + "\n"


def baseline_sentence(metrics: Mapping[str, float]) -> str:
    """How each parallel run's single-device time was found (tag `roofline.baseline`), by kind."""
    counts = {kind: int(metrics.get(M_N_RUNS_BASELINE[kind], 0)) for kind in BASELINE_KINDS}
    return (
        "Single-device baselines of the parallel runs (tag `roofline.baseline`): "
        f"{counts[BASELINE_MEASURED]} `{BASELINE_MEASURED}` (single runs at the same global batch), "
        f"{counts[BASELINE_PER_DEVICE]} `{BASELINE_PER_DEVICE}` (at the same per-device batch: weak scaling), "
        f"{counts[BASELINE_TIME_LAW]} `{BASELINE_TIME_LAW}` (the single-device time law's prediction)."
    )


def formula(law: LinearLaw | RooflineLaw) -> str:
    """``κ · C^a · M^b · η^c · Ψ(strategy)`` with the fitted exponents as superscripts.

    The roofline form reads ``(ε_c·C + ε_m·M + e_0·T) · η^a · Ψ(strategy)`` (T: tokens), the
    smooth roofline ``(((ε_c·C)^k + (ε_m·M)^k)^(1/k) + e_0·T) · η^a · Ψ(strategy)``.
    """
    if isinstance(law, RooflineLaw):
        symbols = (("eps_c", _SYMBOLS[law.cost_features["eps_c"]]), ("eps_m", _SYMBOLS[law.cost_features["eps_m"]]))
        flops, traffic, tokens = (f"{_num(law.coefficient(n))}·{sym}" for n, sym in (*symbols, ("e0", "T")))
        cost = f"{flops} + {traffic} + {tokens}"
        if isinstance(law, SmoothRooflineLaw):
            k = _num(law.coefficient(SHARPNESS))
            cost = f"(({flops})<sup>{k}</sup> + ({traffic})<sup>{k}</sup>)<sup>1/{k}</sup> + {tokens}"
        eta = f" · η<sub>h</sub><sup>{_num(law.coefficient(ALPHA_ETA))}</sup>" if ALPHA_ETA in law.terms else ""
        psi = " · Ψ(strategy)" if any(t.startswith("strategy[") for t in law.terms) else ""
        psi += " · Ψ(kind)" if any(_KIND.match(t) for t in law.terms) else ""
        return f"({cost}){eta}{psi}"
    factors = ["κ"]
    for term, value in zip(law.terms, law.coef):
        if term in _SYMBOLS:
            factors.append(f"{_SYMBOLS[term]}<sup>{_num(value)}</sup>")
    slopes = sorted({m["slope"] for t in law.terms if (m := _STRATEGY.match(t)) and m["slope"]})
    factors += [f"{_SYMBOLS.get(s, s)}<sup>δ<sub>strategy</sub></sup>" for s in slopes]
    if any((m := _STRATEGY.match(t)) and not m["slope"] for t in law.terms):
        factors.append("Ψ(strategy)")
    if any(_KIND.match(t) for t in law.terms):
        factors.append("Ψ(kind)")
    return " · ".join(factors)


def coefficient_table(law: LinearLaw | RooflineLaw, level: float = 0.95) -> str:
    """Each coefficient of ``law`` with its ``level`` interval (from the law's covariance, HC3 where fitted so)."""
    t = float(stats.t.ppf(0.5 + level / 2, law.df_resid)) if law.df_resid > 0 else math.inf
    rows = []
    exponents_first = sorted(range(len(law.terms)), key=lambda i: (law.terms[i] not in _SYMBOLS, i))
    for i in exponents_first:
        value, half = law.coef[i], t * math.sqrt(max(law.cov[i][i], 0.0))
        rows.append([_term_name(law.terms[i]), _num(value), f"[{_num(value - half)}, {_num(value + half)}]"])
    return md_table(["coefficient", "estimate", f"{level:.0%} interval"], rows, "lrr")


def comparison(metrics: Mapping[str, float]) -> str:
    """This fit against the baseline law (no efficiency term) and against the paper's figures."""
    rows = [
        ["adjusted R², efficiency-aware law", _r2(metrics[M_ADJ_R2]), _r2(PAPER_FIGURES[M_ADJ_R2])],
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
        ["α<sub>C</sub>", _num(metrics[M_ALPHA_C]), f"≈ {PAPER_FIGURES[M_ALPHA_C]:.2f}"],
        ["α<sub>η</sub>", _num(metrics[M_ALPHA_ETA]), f"≈ {PAPER_FIGURES[M_ALPHA_ETA]:.2f}"],
    ]
    return "### Against the baseline and the paper\n\n" + md_table(
        ["", "this fit (paper's form)", f"paper ({PAPER_SETUP})"], rows, "lrr"
    )


def cross_validation(fit: HardwareFit, metrics: Mapping[str, float]) -> str:
    """Grouped-CV error of every form (the registered one marked) and extrapolation errors if logged."""
    rows = []
    for name, form in fit.energy.forms.items():
        mark = " (registered)" if name == fit.energy.chosen else ""
        cv = f"{form.cv_mape:.3g} ± {form.cv_se:.2g}"
        rows.append([f"`{name}`{mark}", _r2(form.adj_r2), _num(form.rmse_log), cv])
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


def _term_name(term: str) -> str:
    kind = _KIND.match(term)
    if kind:
        return f"log Ψ<sub>{kind['kind']}={kind['level']}</sub>"
    match = _STRATEGY.match(term)
    if match and match["slope"]:
        return f"δ<sub>{match['level']}</sub> (extra {_SYMBOLS.get(match['slope'], match['slope'])} exponent)"
    if match:
        return f"log Ψ<sub>{match['level']}</sub>"
    return _NAMES.get(term, f"`{term}`")


def _pct_change(reduction: float) -> str:
    return "n/a" if not math.isfinite(reduction) else f"{-reduction:+.0f} %"


def _r2(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3f}"


def _num(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3g}"
