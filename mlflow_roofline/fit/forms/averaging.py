"""The forms averaged: what a fit registers when the 1-SE rule's pick, averaged with one or two other sane
forms, predicts held-out runs better than the pick alone.

The forms part beyond the measured sizes (a power law and a roofline-shaped law bend differently), and
there the choice decides the answer; where one form's misses and another's lean different ways, their
mean is closer than either. :func:`rank_combinations` scores the pick of the 1-SE rule
(:func:`fit.forms.selection.choose_form`) alone and with every one or two other sane forms, from the
members' held-out predictions alone (no refit): the mean in logs of their grouped-CV predictions and of
their predictions of the size-extrapolation check's bigger models, scored as
:func:`fit.forms.selection.score` scores a form (the worse of the two MAPEs). The fit registers the best
(:func:`fit.forms.energy_laws.fit_energy_laws`): the pick alone, or the mean as one more form,
:data:`AVERAGED`, built by :func:`average_forms` with its own grouped CV (the members' held-out
predictions of each fold, averaged) and its own extrapolation score (the members' predictions of the
bigger models, averaged): scored on the same held-out runs as its members, never on the runs it was
fitted on. Its law is :class:`~law.averaged.AveragedLaw`. Anchoring the mean on the 1-SE pick, not on
any combination, was chosen by the worst of six generators read on the next seed's runs
(``benchmarks/form_robustness.py``, docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.cv import CV_FOLDS, fold_mape, heldout_mape, workload_folds
from mlflow_roofline.fit.forms.extrapolation import Extrapolation
from mlflow_roofline.fit.forms.fitted_form import FittedForm, adjusted_r2
from mlflow_roofline.fit.forms.selection import extrapolation_decides
from mlflow_roofline.law.averaged import AveragedLaw

AVERAGED = "averaged"
"""The averaged form's name (the ``form`` tag and param of a fit that registers it)."""
MAX_MEMBERS = 3
"""The most forms one average is made of (count): the 1-SE rule's pick and up to two others (with ten forms,
46 combinations are scored)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class AveragedForm(FittedForm):
    """The mean in logs of ``members`` (:class:`fit.forms.fitted_form.FittedForm`).

    Attributes:
        law: the members' laws, averaged.
        members: the averaged forms, each as fitted and scored.
        actual: measured log E of each run (log joules).
    """

    law: AveragedLaw
    members: tuple[FittedForm, ...]
    actual: np.ndarray

    @property
    def made_of(self) -> list[str]:
        return [member.name for member in self.members]

    @property
    def n_params(self) -> int:
        """Every member's coefficients (count): the least simple of the forms."""
        return sum(member.n_params for member in self.members)

    @property
    def fitted_log(self) -> np.ndarray:
        return np.mean([member.fitted_log for member in self.members], axis=0)

    @property
    def rmse_log(self) -> float:
        return float(np.sqrt(np.mean((self.actual - self.fitted_log) ** 2)))

    @property
    def adj_r2(self) -> float:
        """Adjusted on the residual degrees of freedom of the law (runs minus the largest member's coefficients)."""
        return adjusted_r2(self.actual, self.fitted_log, self.law.df_resid)

    def coefficient_table(self) -> pd.DataFrame:
        """Every member's coefficient table, one after the other (``form``: this form, ``member``: the member's)."""
        tables = [member.coefficient_table().assign(form=self.name, member=member.name) for member in self.members]
        return pd.concat(tables, ignore_index=True)

    def summary_text(self) -> str:
        head = f"{self.formula}\nruns {len(self.actual)}, rmse_log {self.rmse_log:.4f}, adj_R2 {self.adj_r2:.4f}"
        return "\n\n".join([head, *(f"== {m.name}\n{m.summary_text()}" for m in self.members)])

    def cv_heldout(self, data: pd.DataFrame, folds: list[np.ndarray]) -> np.ndarray:
        """The members' held-out predictions of each fold, averaged in logs (a member not yet scored on these
        folds is refitted on them)."""
        held_out = [m.cv_log_e if m.cv_log_e is not None else m.cv_heldout(data, folds) for m in self.members]
        return np.mean(np.asarray(held_out, dtype=float), axis=0)

    def heldout_log_e(self, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
        """The members' predictions of the ``held_out`` rows, each refitted on the others, averaged in logs."""
        return np.mean([member.heldout_log_e(data, held_out) for member in self.members], axis=0)

    def describe(self) -> str:
        """Each member's description, as the mean of their logs (the geometric mean of their joules)."""
        parts = "<br>".join(f"{member.name}: {member.describe()}" for member in self.members)
        return f"geometric mean of {len(self.members)} laws:<br>{parts}"


def averaged_law(names: Sequence[str], members: Sequence[FittedForm], actual: np.ndarray) -> AveragedLaw:
    """The mean in logs of ``members`` (fitted forms named ``names``) as a law, its residual variance that of the
    averaged in-sample predictions against ``actual`` log E (log J) on runs minus the largest member's coefficients."""
    fitted = np.mean([member.fitted_log for member in members], axis=0)
    df_resid = float(max(len(actual) - max(member.n_params for member in members), 1))
    return AveragedLaw(
        formula=f"mean of log E over {', '.join(names)}",
        terms=[],
        coef=[],
        cov=[],
        resid_var=float(np.sum((actual - fitted) ** 2)) / df_resid,
        df_resid=df_resid,
        members=tuple(member.law for member in members),
    )


def bigger_models_mape(
    names: Sequence[str], check: Extrapolation, actual: np.ndarray, groups: np.ndarray
) -> tuple[np.ndarray, tuple[float, float]]:
    """The mean in logs of ``names``' predictions of the size-extrapolation ``check``'s bigger models (log J), and
    its MAPE (%) with the standard error across their workloads, against ``actual`` log E of every run (``groups``:
    each run's workload)."""
    predicted = np.mean([check.predicted[name] for name in names], axis=0)
    return predicted, heldout_mape(actual[check.held_out], predicted, groups[check.held_out])


def rank_combinations(
    names: Sequence[str],
    forms: Mapping[str, FittedForm],
    data: pd.DataFrame,
    seed: int,
    check: Extrapolation | None,
    anchor: str,
) -> list[tuple[float, tuple[str, ...]]]:
    """(score, members) of ``anchor`` alone and with every one or two others of ``names``, best first: the worse
    of the grouped-CV MAPE (%) of the mean of the members' held-out log predictions (the folds of
    :meth:`~fit.forms.fitted_form.FittedForm.with_cv` at ``seed``) and, where the size-extrapolation ``check``
    ran, the MAPE of the mean of their predictions of its bigger models. Forms not scored by CV are left out
    (``anchor`` too: then nothing is ranked); a combination without a finite score is not ranked; ties keep
    the order of ``names`` (fewer members first)."""
    cv_log_e = {name: forms[name].cv_log_e for name in (anchor, *names)}
    held = {name: predicted for name, predicted in cv_log_e.items() if predicted is not None}
    if anchor not in held:
        return []
    others = [name for name in names if name in held and name != anchor]
    actual = data["log_E"].to_numpy(dtype=float)
    groups = data["workload_hash"].to_numpy()
    folds = workload_folds(groups, CV_FOLDS, seed)
    ranked: list[tuple[float, tuple[str, ...]]] = []
    for size in range(MAX_MEMBERS):
        for partners in itertools.combinations(others, size):
            members = (anchor, *partners)
            value = fold_mape(actual, np.mean([held[m] for m in members], axis=0), folds)[0]
            if check is not None:
                extrap = bigger_models_mape(members, check, actual, groups)[1][0]
                value = extrap if extrapolation_decides(value, extrap) else value
            if np.isfinite(value):
                ranked.append((float(value), members))
    return sorted(ranked, key=lambda item: item[0])


def average_forms(
    names: Sequence[str], forms: Mapping[str, FittedForm], data: pd.DataFrame, seed: int, check: Extrapolation | None
) -> tuple[AveragedForm, Extrapolation | None]:
    """The :data:`AVERAGED` form of ``forms[names]`` fitted on ``data``, scored by grouped CV and, where the
    size-extrapolation ``check`` ran, on its bigger models (the members' predictions averaged); the check with
    the averaged predictions added."""
    members = tuple(forms[name] for name in names)
    actual = data["log_E"].to_numpy(dtype=float)
    law = averaged_law(names, members, actual)
    form = AveragedForm(name=AVERAGED, formula=law.formula, law=law, members=members, actual=actual)
    form = form.with_cv(data, seed)
    if check is None:
        return form, None
    predicted, (mape, se) = bigger_models_mape(names, check, actual, data["workload_hash"].to_numpy())
    scored = dataclasses.replace(form, extrap_mape=mape, extrap_se=se)
    return scored, dataclasses.replace(check, predicted={**check.predicted, AVERAGED: predicted})
