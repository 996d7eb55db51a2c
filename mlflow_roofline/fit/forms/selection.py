"""Which form to register: the 1-SE rule over the forms' held-out errors.

A form's score is its grouped-CV MAPE (:mod:`fit.forms.cv`), or, where the size-extrapolation
check ran (:mod:`fit.forms.extrapolation`), the worse of its CV MAPE and its extrapolation
MAPE, with the standard error of that worse one. The registered form is the simplest
whose score is within one standard error of the best score: richer forms win only when
they predict held-out workloads (and bigger models) measurably better, not when they
fit the noise of these folds. Simplicity = fewer coefficients, then the order forms
were evaluated in (baseline, paper, richer).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlflow_roofline.fit.forms.catalog import PAPER
from mlflow_roofline.fit.forms.fitted_form import FittedForm


def extrapolation_decides(cv: float, extrap: float) -> bool:
    """Whether the extrapolation MAPE (%) is a form's score: finite and worse than its CV MAPE (%), or CV unscored."""
    return bool(np.isfinite(extrap) and (not np.isfinite(cv) or extrap > cv))


def score(fit: FittedForm) -> tuple[float, float]:
    """(score, standard error) of a fit: the worse of CV and extrapolation MAPE (%) where both exist."""
    cv, cv_se = float(fit.cv_mape), float(fit.cv_se)
    extrap, extrap_se = float(fit.extrap_mape), float(fit.extrap_se)
    if extrapolation_decides(cv, extrap):
        return extrap, extrap_se
    return cv, cv_se


def within_one_se(forms: Mapping[str, FittedForm]) -> list[str]:
    """The forms whose score is within one standard error of the best score, in ``forms``' order (empty when
    no form has a score): the candidates of the 1-SE rule."""
    scores = {name: score(fit) for name, fit in forms.items()}
    scored = {name: s for name, s in scores.items() if np.isfinite(s[0])}
    if not scored:
        return []
    best = min(scored, key=lambda name: scored[name][0])
    best_score, best_se = scored[best]
    threshold = best_score + (best_se if np.isfinite(best_se) else 0.0)
    return [name for name, (value, _) in scored.items() if value <= threshold]


def choose_form(forms: Mapping[str, FittedForm], default: str = PAPER) -> str:
    """The simplest form whose score is within one standard error of the best (the 1-SE rule).

    ``forms`` maps a name to a scored fit (``cv_mape``, ``cv_se``, ``extrap_mape``, ``extrap_se``: NaN
    where not scored); ``default`` when no form has a score.
    """
    within = within_one_se(forms)
    if not within:
        return default
    order = list(forms)
    return min(within, key=lambda name: (forms[name].n_params, order.index(name)))
