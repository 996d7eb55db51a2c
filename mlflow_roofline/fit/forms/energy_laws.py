"""Every law of one hardware's runs: the candidate energy forms, the additive roofline, the time law.

Forms are compared by grouped k-fold cross-validation, groups = workload hash (a
workload's runs are never split between train and test); ``cv_mape`` is the mean
absolute percentage error of exp(predicted log_E) against measured energy, in %. The
registered form is the 1-SE rule's pick (:func:`fit.forms.selection.choose_form`), or its mean with the
one or two other sane forms beside which it predicts held-out runs best, where that mean beats the pick
alone (:mod:`fit.forms.averaging`: the worse of grouped CV and the size-extrapolation check); the paper's
form is always reported beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pandas as pd

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.forms.additive import AdditiveRoofline, fit_additive_roofline
from mlflow_roofline.fit.forms.averaging import AVERAGED, average_forms, rank_combinations
from mlflow_roofline.fit.forms.catalog import (
    ETA_BY_STRATEGY,
    PAPER,
    ROOFLINE_FORMS,
    candidate_forms,
    formula_of,
    roofline_candidates,
)
from mlflow_roofline.fit.forms.diagnostics import check_enough_runs, identification_notes
from mlflow_roofline.fit.forms.extrapolation import Extrapolation, check_extrapolation
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.ols import FormFit, fit_ols
from mlflow_roofline.fit.forms.proxy_comparison import ProxyComparison, compare_proxies
from mlflow_roofline.fit.forms.sanity import sanity_problems
from mlflow_roofline.fit.forms.selection import choose_form
from mlflow_roofline.fit.forms.time_law import fit_time_law
from mlflow_roofline.law.speedup import SpeedupLaw


@dataclasses.dataclass(frozen=True)
class EnergyFits:
    """Every law of one hardware's runs.

    Attributes:
        forms: each evaluated form by name (always ``baseline`` and ``paper``).
        chosen: the registered form: one form, or :data:`fit.forms.averaging.AVERAGED` (:func:`_register_best`).
        roofline: the additive decomposition.
        time: the single-device time law.
        notes: what was dropped or adapted, in words.
        extrapolation: the size-extrapolation check (None where it could not run).
        insane: forms that broke a sanity property (:mod:`fit.forms.sanity`), with what they broke.
        proxies: the paper's proxies against the complete ones (:mod:`fit.forms.proxy_comparison`),
            None where the runs are all of the paper's kind (no complete-proxy form evaluated).
    """

    forms: dict[str, FittedForm]
    chosen: str
    roofline: AdditiveRoofline
    time: FormFit
    notes: list[str]
    extrapolation: Extrapolation | None = None
    insane: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    proxies: ProxyComparison | None = None

    @property
    def registered_forms(self) -> list[str]:
        """The forms the registered law is made of: the members of :data:`~fit.forms.averaging.AVERAGED`, else the
        chosen form alone."""
        return self.forms[self.chosen].made_of


def _fit_form(form: str, data: pd.DataFrame, seed: int, notes: list[str]) -> FormFit:
    """One OLS form with its grouped-CV error; what it dropped goes into ``notes``."""
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
    return fit.with_cv(data, seed)


def _fit_roofline_form(name: str, data: pd.DataFrame, seed: int) -> FittedForm:
    """A roofline-shaped form with its grouped-CV error (refitted on every fold)."""
    return ROOFLINE_FORMS[name](data).with_cv(data, seed)


def _choose(
    forms: Mapping[str, FittedForm],
    speedup_laws: Mapping[str, SpeedupLaw] | None,
    ranges: Mapping[str, Sequence[float]] | None,
    notes: list[str],
) -> tuple[str, dict[str, list[str]]]:
    """The registered form among those that pass the sanity checks (all of them when none does)."""
    insane: dict[str, list[str]] = {}
    if speedup_laws is not None and ranges is not None:
        insane = {n: p for n, f in forms.items() if (p := sanity_problems(f.law, speedup_laws, ranges))}
    sane = {n: f for n, f in forms.items() if n not in insane}
    for name, problems in insane.items():
        notes.append(f"{name} is not registered: {'; '.join(problems[:2])}")
    if not sane:
        notes.append("every form breaks a sanity property; the best is registered anyway: treat it with care")
    return choose_form(sane or forms), insane


def _register_best(
    forms: dict[str, FittedForm],
    chosen: str,
    insane: Mapping[str, list[str]],
    check: Extrapolation | None,
    data: pd.DataFrame,
    seed: int,
    sanity: tuple[Mapping[str, SpeedupLaw], Mapping[str, Sequence[float]]] | None,
    notes: list[str],
) -> tuple[str, Extrapolation | None]:
    """The registered form: the 1-SE rule's pick ``chosen`` alone, or :data:`AVERAGED` (added to ``forms``) of it and
    one or two other sane forms where that mean scores better and passes the sanity checks
    (:func:`fit.forms.averaging.rank_combinations`); ``chosen`` where it is not sane (no form is) or not scored."""
    sane = [name for name in forms if name not in insane]
    if chosen not in sane:
        return chosen, check
    for _, members in rank_combinations(sane, forms, data, seed, check, anchor=chosen):
        if len(members) == 1:
            return chosen, check
        averaged, check_with_average = average_forms(members, forms, data, seed, check)
        problems = sanity_problems(averaged.law, *sanity) if sanity is not None else []
        if problems:
            notes.append(f"{AVERAGED} of {', '.join(members)} is not registered: {'; '.join(problems[:2])}")
            continue
        forms[AVERAGED] = averaged
        notes.append(f"the mean of {', '.join(members)} predicts held-out runs better than {chosen} alone: registered")
        return AVERAGED, check_with_average
    return chosen, check


def fit_energy_laws(
    data: pd.DataFrame,
    seed: int = 0,
    *,
    speedup_laws: Mapping[str, SpeedupLaw] | None = None,
    ranges: Mapping[str, Sequence[float]] | None = None,
    time: FormFit | None = None,
) -> EnergyFits:
    """Fit every candidate form, the additive roofline and the time law on one hardware's runs.

    Forms are scored by grouped CV and the size-extrapolation check; given the speedup
    laws and the fitted ranges, forms that break a sanity property are not registered.
    ``time``: the time law already fitted on these runs' single runs (for the baselines),
    else it is fitted here.

    Raises:
        RooflineError: too few runs or workloads, or runs that cannot separate log_C and log_M.
    """
    check_enough_runs(data)
    notes: list[str] = []
    if data["strategy"].nunique() == 1:
        notes.append(f"only strategy {data['strategy'].iloc[0]!r} present: the strategy dummy is dropped")
    forms: dict[str, FittedForm] = {form: _fit_form(form, data, seed, notes) for form in candidate_forms(data)}
    notes += identification_notes(forms[PAPER], data)  # type: ignore[arg-type]
    if "log_eta" in forms[PAPER].dropped_terms:
        notes.append("log_eta is 0 for every run (no parallel runs): alpha_eta cannot be estimated")
    for name in roofline_candidates(data):
        forms[name] = _fit_roofline_form(name, data, seed)
    forms, extrapolation, extrap_notes = check_extrapolation(forms, data)
    notes += extrap_notes
    chosen, insane = _choose(forms, speedup_laws, ranges, notes)
    proxies = compare_proxies(forms)  # the single forms, before their average joins them
    sanity = (speedup_laws, ranges) if speedup_laws is not None and ranges is not None else None
    chosen, extrapolation = _register_best(forms, chosen, insane, extrapolation, data, seed, sanity, notes)
    return EnergyFits(
        forms=forms,
        chosen=chosen,
        roofline=fit_additive_roofline(data),
        time=time if time is not None else fit_time_law(data, seed=seed),
        notes=notes,
        extrapolation=extrapolation,
        insane=insane,
        proxies=proxies,
    )
