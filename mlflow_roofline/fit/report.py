"""The fit's text report of one hardware: runs, speedup laws, every form's errors, notes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlflow_roofline.core.schema import (
    M_ALPHA_C,
    M_ALPHA_ETA,
    M_ALPHA_M,
    M_LOG_KAPPA,
    M_N_ETA_FROM_LAW,
    M_N_WORKLOADS,
    M_RMSE_REDUCTION,
    M_TIME_BETA_C,
    M_TIME_BETA_M,
    M_TIME_CV_MAPE,
    M_TIME_LOG_TAU,
)

if TYPE_CHECKING:
    from mlflow_roofline.fit.hardware import HardwareFit


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
        "registered: the simplest form within one standard error of the best on the worse of "
        "cv_mape and extrap_mape, among forms that pass the sanity checks"
    )
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


def hardware_report(fit: HardwareFit) -> str:
    """Human-readable summary of one hardware's fit."""
    m = fit.metrics()
    lines = [
        (
            f"hardware: {fit.hardware} (energy: {fit.energy_source}), {len(fit.frame)} runs, "
            f"{int(m[M_N_WORKLOADS])} workloads, {int(m[M_N_ETA_FROM_LAW])} with eta from the speedup law"
        ),
    ]
    if fit.dropped:
        lines.append("dropped: " + ", ".join(f"{n} {r}" for r, n in fit.dropped.items()))
    lines.append("speedup laws:")
    lines += [f"  {speedup.describe()}" for s, speedup in fit.speedup.items() if s != "single"]
    lines += _form_lines(fit)
    lines.append(fit.noise.describe())
    lines += _law_lines(fit, m)
    lines += [f"note: {n}" for n in fit.energy.notes]
    return "\n".join(lines)
