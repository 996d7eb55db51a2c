"""What the pooled fit over several hardware produced: :class:`PooledFit`, its metrics and report.

The forms are fitted, scored and chosen by :func:`mlflow_roofline.fit.pooled.fit_pooled`
(see :mod:`fit.pooled` for what each form is); this module holds the result: every
evaluated form, the choice, the leave-one-hardware-out errors (MAPE %), the checks' notes,
and the metrics (``cv_mape_pooled_<form>``, ``loho_mape``, ...) the fit run logs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from mlflow_roofline.core.schema import (
    M_CV_MAPE_POOLED_PREFIX,
    M_CV_MAPE_SE_POOLED_PREFIX,
    M_EXTRAP_HELD_OUT,
    M_EXTRAP_MAPE,
    M_EXTRAP_MAPE_POOLED_PREFIX,
    M_EXTRAP_MAPE_SE_POOLED_PREFIX,
    M_EXTRAP_SIZE_BOUND,
    M_LOHO_MAPE,
    M_LOHO_MAPE_FORM_PREFIX,
    M_LOHO_MAPE_SE_FORM_PREFIX,
    M_POOLED_REGISTERED,
    M_POOLED_SANE_PREFIX,
    form_metric,
)
from mlflow_roofline.fit.extrapolation import Extrapolation
from mlflow_roofline.fit.forms import HARDWARE_SLOPES
from mlflow_roofline.fit.ols import FormFit
from mlflow_roofline.fit.pooled_checks import extrapolation_figure
from mlflow_roofline.law.fitted import FittedLaw

HARDWARE_OFFSET = "hardware_offset"
HARDWARE_COVARIATES = "hardware_covariates"
COVARIATE_FORMS: tuple[str, ...] = (HARDWARE_OFFSET, HARDWARE_COVARIATES)


@dataclasses.dataclass
class _Chosen:
    chosen: str


@dataclasses.dataclass
class PooledFit:
    """The pooled forms over several hardware (see :mod:`fit.pooled`).

    Attributes:
        forms: each evaluated pooled form by name.
        chosen: the form the 1-SE rule picks (``hardware_slopes``: keep one law per hardware).
        loho: leave-one-hardware-out (MAPE %, its standard error) of each covariate form.
        covariates: per hardware, its covariates (only hardware the table knows).
        missing: hardware the table does not know (then no covariate form is tried).
        law: the pooled law when a pooled form wins, else None.
        extrapolation: the size-extrapolation check over the pooled runs (None where it could not run).
        insane: forms that broke a sanity property on some hardware, with what they broke.
        notes: what the checks found, in words.
        data: the pooled runs' law features (:func:`pooled_data`).
        run_id, model_version, aliases: set when logged and registered.
    """

    forms: dict[str, FormFit]
    chosen: str
    loho: dict[str, tuple[float, float]]
    covariates: dict[str, dict[str, float]]
    missing: list[str]
    law: FittedLaw | None = None
    extrapolation: Extrapolation | None = None
    insane: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    data: pd.DataFrame | None = None
    run_id: str = ""
    model_version: str | None = None
    aliases: list[str] = dataclasses.field(default_factory=list)

    @property
    def hardware(self) -> str:
        return ", ".join(self.covariates) if self.law is None else self.law.hardware

    @property
    def energy_source(self) -> str:
        return self.law.energy_source if self.law is not None else ""

    @property
    def energy(self) -> _Chosen:
        """What registration reads the chosen form from (as from a per-hardware fit)."""
        return _Chosen(self.chosen)

    @property
    def covariate_form(self) -> str:
        """The sane covariate form with the smallest leave-one-hardware-out error ("" without one)."""
        scored = {n: v for n, v in self.loho.items() if np.isfinite(v[0]) and n not in self.insane}
        return min(scored, key=lambda n: scored[n][0]) if scored else ""

    def metrics(self) -> dict[str, float]:
        """Per form ``cv_mape_pooled_<form>``, ``extrap_mape_pooled_<form>`` and their ``_se_`` (%),
        ``pooled_sane_<form>`` (1 or 0); ``extrap_mape`` (the chosen form's), ``extrap_n_held_out``,
        ``extrap_size_bound`` (L*d^2), ``loho_mape`` and
        ``loho_mape_<form>`` (%), ``pooled_registered``."""
        out: dict[str, float] = {M_POOLED_REGISTERED: float(self.law is not None)}
        for name, form in self.forms.items():
            out[form_metric(M_CV_MAPE_POOLED_PREFIX, name)] = form.cv_mape
            out[form_metric(M_CV_MAPE_SE_POOLED_PREFIX, name)] = form.cv_se
            out[form_metric(M_POOLED_SANE_PREFIX, name)] = float(name not in self.insane)
            if self.extrapolation is not None:
                out[form_metric(M_EXTRAP_MAPE_POOLED_PREFIX, name)] = form.extrap_mape
                out[form_metric(M_EXTRAP_MAPE_SE_POOLED_PREFIX, name)] = form.extrap_se
        if self.extrapolation is not None:
            out[M_EXTRAP_MAPE] = self.forms[self.chosen].extrap_mape
            out[M_EXTRAP_HELD_OUT] = float(self.extrapolation.held_out.sum())
            out[M_EXTRAP_SIZE_BOUND] = self.extrapolation.threshold
        for name, (mape, se) in self.loho.items():
            out[form_metric(M_LOHO_MAPE_FORM_PREFIX, name)] = mape
            out[form_metric(M_LOHO_MAPE_SE_FORM_PREFIX, name)] = se
        if self.covariate_form:
            out[M_LOHO_MAPE] = self.loho[self.covariate_form][0]
        return out

    def extrapolation_figure(self) -> Figure | None:
        """The held-out larger models against the pooled forms' predictions (None without the check)."""
        if self.extrapolation is None or self.data is None:
            return None
        shown = [HARDWARE_SLOPES, self.chosen, *([self.covariate_form] if self.covariate_form else [])]
        return extrapolation_figure(self.forms, self.data, self.extrapolation, shown)

    def report(self) -> str:
        """The pooled comparison in words, one line per form, then the checks' notes."""
        check = self.extrapolation
        where = (
            f"; extrapolation: fitted on L*d^2 <= {check.threshold:.3g}, "
            f"{int(check.held_out.sum())} larger runs predicted"
            if check is not None
            else ""
        )
        lines = [
            f"pooled over {len(self.forms[HARDWARE_SLOPES].result.model.exog)} runs of "
            f"{len(self.covariates) + len(self.missing)} hardware (grouped CV by workload{where}):"
        ]
        for name, form in self.forms.items():
            extrap = f"  extrap_mape {form.extrap_mape:.3g}% (se {form.extrap_se:.2g})" if check is not None else ""
            loho = f"  loho_mape {self.loho[name][0]:.3g}%" if name in self.loho else ""
            mark = "  <- chosen" if name == self.chosen else ""
            lines.append(f"  {name:20s} cv_mape {form.cv_mape:.3g}% (se {form.cv_se:.2g}){extrap}{loho}{mark}")
        lines += [f"note: {note}" for note in self.notes]
        if self.missing:
            lines.append(
                f"no hardware covariates: the hardware table lacks {', '.join(self.missing)} "
                "(extend it with ROOFLINE_HARDWARE_TABLE)"
            )
        lines.append(
            "chosen: the simplest form within one standard error of the best on the worse of cv_mape and "
            "extrap_mape, among forms that pass the sanity checks on every hardware"
        )
        lines.append(
            "registered: the pooled law"
            if self.law is not None
            else "registered: one law per hardware (separate slopes fit best)"
        )
        return "\n".join(lines)
