"""One law for every hardware the runs hold: pooled forms, chosen as the per-hardware forms are.

With runs of two or more hardware, the fit pools them (each hardware's runs as its own
fit prepared them: speedup, eta, features) and compares, by grouped CV over workloads
with the 1-SE rule (:func:`fit.forms.selection.choose_form`):

- ``hardware_slopes``     ``log_E ~ (log_C + log_M + log_eta) * hardware + strategy``: a
  separate paper law per hardware (what registering one law per hardware amounts to);
- ``hardware_intercepts`` ``log_E ~ log_C + log_M + log_eta + strategy + hardware``: one
  law, each hardware shifting its level;
- ``hardware_offset``     ``log_E - log_jpf ~ log_C + log_M + log_eta + strategy``: one law
  in which energy scales with the hardware's joules per FLOP at peak
  (``log_jpf = log(board_power_w / peak FLOP/s)``, from the hardware table at the run's
  ``precision``: an A100 run at fp32 has 16 times the J/FLOP of one at bf16), no free
  parameter per hardware;
- ``hardware_covariates`` (three hardware or more) ``+ log_ridge``, the log of the
  roofline ridge point ``peak FLOP/s / (bytes/s)``, so that a more memory-bound
  device may cost more per FLOP than its peak says.

- ``hardware_intercepts_per_step``, ``hardware_offset_per_step``, ``hardware_covariates_per_step``:
  the same forms for one optimizer step, times the steps (as the per-hardware ``paper_per_step``):
  ``I(log_E - log_steps) ~ I(log_C - log_steps) + I(log_M - log_steps) + log_eta + ...``, the
  offset forms on ``log_E_jpf = log_E - log_jpf``; twice the steps are twice the joules by
  construction, so they can pass the num_steps sanity check where the plain forms (whose size
  exponents also carry the steps) cannot.

- ``hardware_roofline`` and ``hardware_roofline_complete`` (the same in the complete proxies, with the
  kind factors where runs mix kinds): the additive roofline times each GPU's board power over its
  tensor and vector peaks and bandwidth (:mod:`fit.forms.hardware_roofline`), no exponent to guess where
  the sizes were not varied, so it passes the size and steps checks by construction; refitted on every
  CV fold and each left-out GPU.

Every run's covariates are its GPU's at the run's own precision (:func:`run_covariates`); the law keeps
each GPU's at the precision most of its runs have (:func:`hardware_covariates`), and the precisions of
its runs (:attr:`~law.fitted.FittedLaw.precisions`). The covariate forms (:data:`COVARIATE_FORMS`)
predict a GPU no run measured, given its table row, and a measured GPU at a precision whose peak
differs from its runs' (:mod:`serve.precision_routing`); their
leave-one-hardware-out MAPE (every hardware held out in turn, fitted on the others) is
``loho_mape``. When a pooled form (not ``hardware_slopes``) wins, :attr:`PooledFit.law`
is the pooled :class:`~law.fitted.FittedLaw` the fit registers as the model.

Every pooled form also passes the checks of a per-hardware form (below):
the size-extrapolation check sets its ``extrap_mape``, and the choice is the same rule
(the worse of CV and extrapolation error, 1-SE) among the forms that pass the sanity
checks on every hardware (``hardware_slopes`` always eligible). The covariate law used
for GPUs no run measured is the sane covariate form with the smallest leave-one-hardware-out
error, or the average of the sane ones within one standard error of it (:func:`pooled_law`).

The result is :class:`PooledFit`, with its metrics and report.

The checks a per-hardware form passes, run on the pooled forms:

- Size extrapolation (:func:`fit.forms.extrapolation.check_extrapolation`): every pooled form
  is refitted on the pooled runs with ``L*d^2`` at or below the 75th percentile and
  scored by ``extrap_mape`` (%) on the larger rest, so the pooled choice uses the same
  rule as the per-hardware one (the worse of CV and extrapolation error, 1-SE).
- Sanity (:func:`fit.forms.sanity.sanity_problems`): each pooled form is evaluated on every
  hardware it pools, with that hardware's name and table covariates as inputs, its own
  speedup laws and its own fitted ranges (what serving a row of that hardware uses).
  Energy must be finite and positive, never decrease with size and double with the steps.

:func:`extrapolation_figure` draws the held-out larger models against what the
separate-slopes, the chosen and the covariate form predicted from the smaller ones
(``plots/pooled_extrapolation.png`` of the parent fit run).

A pooled form that breaks a sanity property is not registered; ``hardware_slopes``
(registering one law per hardware, each already sanity-checked by its own fit) stays
eligible, so the choice falls back to it when no pooled form is sane.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from mlflow_roofline.core.gpu_datasheets import COVARIATE_NAMES, TABLE_PRECISION, HardwareTable
from mlflow_roofline.core.schema import (
    HARDWARE_COLUMN,
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
    M_TIME_LOHO_MAPE_PREFIX,
    form_metric,
    present_strategies,
    speedup_score_metric,
)
from mlflow_roofline.fit.forms.averaging import AVERAGED, averaged_law
from mlflow_roofline.fit.forms.catalog import HARDWARE_INTERCEPTS, HARDWARE_SLOPES
from mlflow_roofline.fit.forms.cv import cv_mape, grouped_cv_mape, refit_cv_mape
from mlflow_roofline.fit.forms.extrapolation import Extrapolation, check_extrapolation
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.hardware_roofline import (
    HARDWARE_ROOFLINE,
    HARDWARE_ROOFLINE_COMPLETE,
    fit_hardware_roofline,
    fit_hardware_roofline_complete,
)
from mlflow_roofline.fit.forms.nonlinear import RooflineFormFit
from mlflow_roofline.fit.forms.ols import FormFit, fit_ols
from mlflow_roofline.fit.forms.sanity import sanity_problems
from mlflow_roofline.fit.forms.selection import choose_form
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.fit.pooled_speedup import PooledSpeedup, fit_pooled_speedup
from mlflow_roofline.fit.pooled_time import POOLED, SCALED, PooledTime, fit_pooled_time
from mlflow_roofline.fit.report import plots
from mlflow_roofline.fit.runs.precisions import run_precisions
from mlflow_roofline.law.coefficients import LawCoefficients
from mlflow_roofline.law.fitted import FittedLaw, precisions_of
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.law.log_features import LOG_FLOPS_SCALE, SCALED_FLOPS_FEATURES

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


@dataclasses.dataclass(frozen=True)
class OnHardware:
    """A pooled energy law seen as the law of one hardware: its name and covariates added to every input."""

    law: LawCoefficients
    hardware: str
    covariates: Mapping[str, float]

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mean log E (log joules) of the rows of ``features`` on this hardware."""
        n = len(np.asarray(features["log_C"]))
        extra: dict[str, np.ndarray] = {HARDWARE_COLUMN: np.full(n, self.hardware, dtype=object)}
        extra.update({name: np.full(n, float(value)) for name, value in self.covariates.items()})
        return np.asarray(self.law.mean({**features, **extra}), dtype=float)


def pooled_sanity(
    forms: Mapping[str, FittedForm], fits: Sequence[HardwareFit], covariates: Mapping[str, Mapping[str, float]]
) -> dict[str, list[str]]:
    """Form -> what it gets wrong on some hardware (``"<hardware>: <problem>"``); forms without problems absent."""
    insane: dict[str, list[str]] = {}
    for name, form in forms.items():
        problems: list[str] = []
        for fit in fits:
            on = OnHardware(form.law, fit.hardware, covariates.get(fit.hardware, {}))
            found = sanity_problems(on, fit.law.speedup_laws, fit.law.ranges)
            problems += [f"{fit.hardware}: {p}" for p in found]
        if problems:
            insane[name] = problems
    return insane


def pooled_extrapolation(
    forms: Mapping[str, FittedForm], data: pd.DataFrame
) -> tuple[dict[str, FittedForm], Extrapolation | None, list[str]]:
    """Every pooled form with its ``extrap_mape`` and ``extrap_se`` (%, new values); the check and its notes.

    The pooled runs of every hardware are split on one ``L*d^2`` bound; a workload is
    its hash, which differs per hardware, so each hardware's runs of it are one group.
    """
    return check_extrapolation(forms, data)


def extrapolation_figure(
    forms: Mapping[str, FittedForm], data: pd.DataFrame, check: Extrapolation, shown: Sequence[str]
) -> Figure:
    """Measured vs predicted energy (joules) of the held-out larger models, one panel per form in ``shown``."""
    predicted = {
        f"{name}: extrap_mape {forms[name].extrap_mape:.1f}%": check.predicted[name] for name in dict.fromkeys(shown)
    }
    return plots.measured_vs_predicted(data[check.held_out], predicted)


HARDWARE_OFFSET = "hardware_offset"
HARDWARE_COVARIATES = "hardware_covariates"
PER_STEP_SUFFIX = "_per_step"
HARDWARE_INTERCEPTS_PER_STEP = HARDWARE_INTERCEPTS + PER_STEP_SUFFIX
HARDWARE_OFFSET_PER_STEP = HARDWARE_OFFSET + PER_STEP_SUFFIX
HARDWARE_COVARIATES_PER_STEP = HARDWARE_COVARIATES + PER_STEP_SUFFIX
COVARIATE_FORMS: tuple[str, ...] = (
    HARDWARE_OFFSET,
    HARDWARE_COVARIATES,
    HARDWARE_OFFSET_PER_STEP,
    HARDWARE_COVARIATES_PER_STEP,
    HARDWARE_ROOFLINE,
    HARDWARE_ROOFLINE_COMPLETE,
)
"""The pooled forms that predict a GPU no run measured from its hardware-table row."""


@dataclasses.dataclass(frozen=True)
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
        speedup: the comm-time speedup laws pooled over the GPUs for a GPU no run measured, and
            their leave-one-GPU-out scores (:mod:`fit.pooled_speedup`).
        time: the single-device time law pooled over the GPUs for a GPU no run measured, and its
            leave-one-GPU-out score against the reference's law scaled (:mod:`fit.pooled_time`).
    """

    forms: dict[str, FittedForm]
    chosen: str
    loho: dict[str, tuple[float, float]]
    covariates: dict[str, dict[str, float]]
    missing: list[str]
    law: FittedLaw | None = None
    extrapolation: Extrapolation | None = None
    insane: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    data: pd.DataFrame | None = None
    speedup: PooledSpeedup = dataclasses.field(default_factory=lambda: PooledSpeedup({}, {}))
    time: PooledTime = dataclasses.field(default_factory=lambda: PooledTime(None, {}, "not fitted"))

    @property
    def covariate_form(self) -> str:
        """The sane covariate form with the smallest leave-one-hardware-out error ("" without one)."""
        scored = self._sane_loho()
        return min(scored, key=lambda n: scored[n][0]) if scored else ""

    @property
    def covariate_members(self) -> list[str]:
        """The sane covariate forms whose leave-one-hardware-out error is within one standard error of the
        smallest, the best first: two or more are averaged for a GPU no run measured (:func:`pooled_law`)."""
        scored = self._sane_loho()
        best = self.covariate_form
        if not best:
            return []
        bound = scored[best][0] + (scored[best][1] if np.isfinite(scored[best][1]) else 0.0)
        return [best, *(name for name, (mape, _) in scored.items() if name != best and mape <= bound)]

    def _sane_loho(self) -> dict[str, tuple[float, float]]:
        return {n: v for n, v in self.loho.items() if np.isfinite(v[0]) and n not in self.insane}

    def metrics(self) -> dict[str, float]:
        """Per form ``cv_mape_pooled_<form>``, ``extrap_mape_pooled_<form>`` and their ``_se_`` (%),
        ``pooled_sane_<form>`` (1 or 0); ``extrap_mape`` (the chosen form's), ``extrap_n_held_out``,
        ``extrap_size_bound`` (L*d^2), ``loho_mape`` and
        ``loho_mape_<form>`` (%), ``pooled_registered``; per strategy the leave-one-GPU-out MAPE
        of speedup (%) of the pooled comm-time law and of the N-only law,
        ``speedup_loho_mape_<strategy>_comm_time`` and ``speedup_loho_mape_<strategy>_n_only``."""
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
        for strategy, scores in self.speedup.loho.items():
            for law, mape in scores.items():
                out[speedup_score_metric(M_LOHO_MAPE, strategy, law)] = mape
        for way, mape in self.time.loho.items():
            out[form_metric(M_TIME_LOHO_MAPE_PREFIX, way)] = mape
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
            f"pooled over {len(self.forms[HARDWARE_SLOPES].fitted_log)} runs of "
            f"{len(self.covariates) + len(self.missing)} hardware (grouped CV by workload{where}):"
        ]
        for name, form in self.forms.items():
            extrap = f"  extrap_mape {form.extrap_mape:.3g}% (se {form.extrap_se:.2g})" if check is not None else ""
            loho = f"  loho_mape {self.loho[name][0]:.3g}%" if name in self.loho else ""
            mark = "  <- chosen" if name == self.chosen else ""
            lines.append(f"  {name:20s} cv_mape {form.cv_mape:.3g}% (se {form.cv_se:.2g}){extrap}{loho}{mark}")
        lines += [
            f"speedup on a GPU no run measured, {strategy}: leave-one-GPU-out MAPE pooled comm_time "
            f"{scores['comm_time']:.3g}% vs N-only {scores['n_only']:.3g}%"
            + (" <- pooled comm_time serves it" if strategy in self.speedup.laws else "")
            for strategy, scores in self.speedup.loho.items()
        ]
        if self.time.loho:
            lines.append(
                f"single-device time on a GPU no run measured: leave-one-GPU-out MAPE pooled roofline in time "
                f"{self.time.loho[POOLED]:.3g}% vs the reference's time scaled by the roofline "
                f"{self.time.loho[SCALED]:.3g}%" + (" <- the pooled law serves it" if self.time.law is not None else "")
            )
        elif self.time.note:
            lines.append(
                "single-device time on a GPU no run measured: the reference's, scaled by the roofline "
                f"({self.time.note})"
            )
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
            "the pooled law: the chosen form"
            if self.law is not None
            else "the pooled law: separate slopes fit best (one law per hardware)"
        )
        return "\n".join(lines)


OFFSET = "log_jpf"
RESPONSE_PER_JPF = "log_E_jpf"
"""``log_E - log_jpf``: energy in units of the hardware's joules per peak FLOP (the per-step offset forms' response)."""
PER_STEP_TERMS = "I(log_C - log_steps) + I(log_M - log_steps) + log_eta"
"""The per-step forms' size terms: FLOPs and traffic per optimizer step (as ``paper_per_step``)."""


def hardware_covariates(fits: Sequence[HardwareFit], table: HardwareTable) -> dict[str, dict[str, float]]:
    """Per hardware the table knows, its covariates at the precision most of its runs have (its law's first)."""
    return {
        f.hardware: s.covariates(f.law.precisions[0] if f.law.precisions else TABLE_PRECISION)
        for f in fits
        if (s := table.lookup(f.hardware)) is not None
    }


def run_covariates(fits: Sequence[HardwareFit], table: HardwareTable) -> dict[tuple[str, str], dict[str, float]]:
    """Per (hardware, precision) the pooled runs hold, the table's covariates at that precision (known hardware).

    Raises:
        ConfigError: naming ``precision`` where a GPU's row has no peak at a run's precision (the fit job
            has left such runs out: :mod:`fit.runs.precisions`).
    """
    out: dict[tuple[str, str], dict[str, float]] = {}
    for fit in fits:
        spec = table.lookup(fit.hardware)
        if spec is not None:
            for precision in dict.fromkeys(run_precisions(fit.frame)):
                out[(fit.hardware, str(precision))] = spec.covariates(str(precision))
    return out


def unscaled_flops(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with the FLOPs features as counted: a GPU's law scales them to one precision's peak
    (:data:`law.log_features.LOG_FLOPS_SCALE`), a pooled form sees each run's peak through its covariates."""
    if LOG_FLOPS_SCALE not in data:
        return data
    log_scale = data[LOG_FLOPS_SCALE].fillna(0.0)  # NaN: the runs of a GPU whose law is unscaled
    return data.assign(**{name: data[name] - log_scale for name in SCALED_FLOPS_FEATURES}, **{LOG_FLOPS_SCALE: 0.0})


def pooled_data(
    fits: Sequence[HardwareFit],
    covariates: dict[str, dict[str, float]],
    by_precision: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Every hardware's law features in one frame, ``hardware`` a categorical (the first fit's is the reference),
    and where every hardware has covariates, each run's: at its own precision where ``by_precision`` gives
    them (:func:`run_covariates`), else its hardware's."""
    frames = [f.data.assign(hardware=f.hardware, precision=run_precisions(f.frame)) for f in fits]
    data = unscaled_flops(pd.concat(frames, ignore_index=True))
    data["strategy"] = pd.Categorical(data["strategy"].astype(str), categories=present_strategies(data["strategy"]))
    data[HARDWARE_COLUMN] = pd.Categorical(data[HARDWARE_COLUMN].astype(str), categories=[f.hardware for f in fits])
    if len(covariates) == len(fits):
        keys = list(zip(data[HARDWARE_COLUMN].astype(str), data["precision"].astype(str)))
        for name in COVARIATE_NAMES:
            data[name] = [
                float(by_precision[key][name]) if by_precision is not None else covariates[key[0]][name] for key in keys
            ]
        data[RESPONSE_PER_JPF] = data["log_E"] - data[OFFSET]
    return data


def _formulas(data: pd.DataFrame, with_covariates: bool) -> dict[str, str]:
    """Every pooled form's formula; the per-step variants (energy per step x steps) after the plain ones,
    so that a tie goes to the plain form (:func:`fit.forms.selection.choose_form`)."""
    strategy = " + strategy" if data["strategy"].nunique() > 1 else ""
    per_step = f"{PER_STEP_TERMS}{strategy}"
    out = {
        HARDWARE_SLOPES: f"log_E ~ (log_C + log_M + log_eta) * hardware{strategy}",
        HARDWARE_INTERCEPTS: f"log_E ~ log_C + log_M + log_eta + hardware{strategy}",
    }
    covariate_forms = {}
    if with_covariates:
        out[HARDWARE_OFFSET] = f"I(log_E - {OFFSET}) ~ log_C + log_M + log_eta{strategy}"
        covariate_forms[HARDWARE_OFFSET_PER_STEP] = f"I({RESPONSE_PER_JPF} - log_steps) ~ {per_step}"
        if data[HARDWARE_COLUMN].nunique() >= 3:
            out[HARDWARE_COVARIATES] = f"I(log_E - {OFFSET}) ~ log_C + log_M + log_eta + log_ridge{strategy}"
            covariate_forms[HARDWARE_COVARIATES_PER_STEP] = (
                f"I({RESPONSE_PER_JPF} - log_steps) ~ {per_step} + log_ridge"
            )
    out[HARDWARE_INTERCEPTS_PER_STEP] = f"I(log_E - log_steps) ~ {per_step} + hardware"
    return {**out, **covariate_forms}


def _with_offset(fit: FormFit, data: pd.DataFrame) -> FormFit:
    """A ``log_E - log_jpf`` fit as a law of ``log_E`` itself: the term ``log_jpf`` with coefficient 1, exactly.

    A per-step offset form's fit already holds ``log_steps`` as its offset; ``log_jpf`` adds to it.
    """
    law = fit.law
    k = len(law.terms)
    cov = np.zeros((k + 1, k + 1))
    cov[:k, :k] = np.asarray(law.cov)
    shift = data[OFFSET].to_numpy(dtype=float)
    return dataclasses.replace(
        fit,
        law=LinearLaw(law.formula, [*law.terms, OFFSET], [*law.coef, 1.0], cov.tolist(), law.resid_var, law.df_resid),
        offset=shift if fit.offset is None else np.asarray(fit.offset, dtype=float) + shift,
    )


def _hardware_folds(data: pd.DataFrame) -> list[np.ndarray]:
    """The pooled runs of each hardware (indices), one fold per hardware that has runs."""
    folds = [np.flatnonzero((data[HARDWARE_COLUMN] == hw).to_numpy()) for hw in data[HARDWARE_COLUMN].cat.categories]
    return [f for f in folds if len(f)]


def leave_one_hardware_out(formula: str, data: pd.DataFrame) -> tuple[float, float]:
    """MAPE (%) of energy on each hardware's runs from the law fitted on the other hardware, and its se."""
    return cv_mape(formula, data, _hardware_folds(data))


def refit_leave_one_hardware_out(form: RooflineFormFit, data: pd.DataFrame) -> tuple[float, float]:
    """:func:`leave_one_hardware_out` of a form refitted on the other hardware's runs (a roofline-shaped form)."""

    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
        return form.refit(train).law.mean({c: test[c].to_numpy() for c in test.columns})

    return refit_cv_mape(fit_predict, data, _hardware_folds(data))


def _roofline_forms(data: pd.DataFrame, seed: int) -> tuple[dict[str, FittedForm], dict[str, tuple[float, float]]]:
    """The datasheet-pooled roofline forms in the paper's and the complete proxies, each with its grouped-CV and
    leave-one-hardware-out errors. The complete one is fitted whatever the runs' kinds: its traffic carries the
    optimizer's bytes per step, a cost per step that a GPU's datasheet bandwidth prices where the paper's
    activations per token cannot (small batches cost more per token on every GPU)."""
    fits = [fit_hardware_roofline(data), fit_hardware_roofline_complete(data)]
    forms: dict[str, FittedForm] = {}
    loho: dict[str, tuple[float, float]] = {}
    for fit in fits:
        cv, se = fit.cv_scores(data, seed)
        forms[fit.name] = dataclasses.replace(fit, cv_mape=cv, cv_se=se)
        loho[fit.name] = refit_leave_one_hardware_out(fit, data)
    return forms, loho


def _scored_forms(
    data: pd.DataFrame, with_covariates: bool, seed: int
) -> tuple[dict[str, FittedForm], dict[str, tuple[float, float]]]:
    """Every pooled form fitted on all runs with its grouped-CV error; the covariate forms' LOHO errors."""
    forms: dict[str, FittedForm] = {}
    loho: dict[str, tuple[float, float]] = {}
    for name, formula in _formulas(data, with_covariates).items():
        cv, se = grouped_cv_mape(formula, data, seed=seed)
        fit = dataclasses.replace(fit_ols(name, formula, data), cv_mape=cv, cv_se=se)
        if name in COVARIATE_FORMS:
            fit = _with_offset(fit, data)
            loho[name] = leave_one_hardware_out(formula, data)
        forms[name] = fit
    if with_covariates:
        roofline, roofline_loho = _roofline_forms(data, seed)
        forms.update(roofline)
        loho.update(roofline_loho)
    return forms, loho


def choose_pooled(forms: Mapping[str, FittedForm], insane: Mapping[str, Sequence[str]]) -> str:
    """The 1-SE choice among the sane pooled forms and ``hardware_slopes`` (one law per hardware, always eligible)."""
    eligible = {n: f for n, f in forms.items() if n not in insane or n == HARDWARE_SLOPES}
    return choose_form(eligible, default=HARDWARE_SLOPES)


def fit_pooled(
    fits: Sequence[HardwareFit], table: HardwareTable, seed: int = 0, workload_aware: bool = True
) -> PooledFit:
    """The pooled forms over ``fits`` (two hardware or more, most runs first), checked, scored and chosen;
    ``workload_aware=False`` leaves the pooled comm-time speedup laws out (N-only laws alone)."""
    covariates = hardware_covariates(fits, table)
    missing = [f.hardware for f in fits if f.hardware not in covariates]
    data = pooled_data(fits, covariates, run_covariates(fits, table))
    forms, loho = _scored_forms(data, not missing, seed)
    forms, extrapolation, notes = pooled_extrapolation(forms, data)
    insane = pooled_sanity(forms, fits, covariates)
    notes += [f"{name} is not registered: {'; '.join(problems[:2])}" for name, problems in insane.items()]
    chosen = choose_pooled(forms, insane)
    pooled = PooledFit(
        forms,
        chosen,
        loho,
        covariates,
        missing,
        extrapolation=extrapolation,
        insane=insane,
        notes=notes,
        data=data,
        speedup=fit_pooled_speedup(fits, table, workload_aware),
        time=fit_pooled_time(data, fits, covariates) if not missing else PooledTime(None, {}, "no hardware covariates"),
    )
    return pooled if chosen == HARDWARE_SLOPES else dataclasses.replace(pooled, law=pooled_law(pooled, fits))


def pooled_law(pooled: PooledFit, fits: Sequence[HardwareFit], form: str = "") -> FittedLaw:
    """The pooled law: ``form``'s energy law (default: the chosen form's), each hardware's own law,
    the covariate form."""
    reference = fits[0].law
    ranges: dict[str, list[float]] = {}
    for fit in fits:
        for key, (lo, hi) in fit.law.ranges.items():
            old = ranges.get(key, [lo, hi])
            ranges[key] = [min(old[0], lo), max(old[1], hi)]
    form = form or pooled.chosen
    chosen = pooled.forms[form]
    covariate_form, covariate_law, loho_mape = _covariate_law(pooled)
    return FittedLaw(
        hardware=", ".join(f.hardware for f in fits),
        energy_source="+".join(sorted({s for f in fits for s in f.energy_source.split("+")})),
        form=form,
        energy_law=chosen.law,
        time_law=reference.time_law,
        speedup_laws=reference.speedup_laws,
        n_only_speedup_laws=reference.n_only_speedup_laws,
        unmeasured_speedup_laws=pooled.speedup.laws,
        unmeasured_time_law=pooled.time.law,
        ranges=ranges,
        n_runs=sum(f.law.n_runs for f in fits),
        cv_mape=chosen.cv_mape,
        hardware_laws={f.hardware: f.law for f in fits},
        covariates=pooled.covariates,
        covariate_form=covariate_form,
        covariate_law=covariate_law,
        loho_mape=loho_mape,
        precisions=precisions_of(p for f in fits for p in run_precisions(f.frame)),
    )


def _covariate_law(pooled: PooledFit) -> tuple[str, LawCoefficients | None, float | None]:
    """What a pooled law answers a GPU no run measured with: ``covariate_form``, ``covariate_law`` and
    ``loho_mape`` (the error its interval is widened by). One covariate form, or where two or more tie within
    one standard error of the smallest leave-one-hardware-out error, their average in logs (``averaged``, as
    one GPU's forms that tie: :mod:`law.averaged`); its ``loho_mape`` is the largest of its members' (the
    average's own was not scored: the interval errs wide)."""
    members = pooled.covariate_members
    if not members:
        return "", None, None
    if len(members) == 1 or pooled.data is None:
        return members[0], pooled.forms[members[0]].law, pooled.loho[members[0]][0]
    law = averaged_law(members, [pooled.forms[name] for name in members], pooled.data["log_E"].to_numpy(dtype=float))
    return AVERAGED, law, max(pooled.loho[n][0] for n in members)
