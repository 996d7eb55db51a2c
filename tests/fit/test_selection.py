"""The 1-SE rule: the simplest form within one standard error of the best score, the score being the worse
of a form's CV and bigger-models errors."""

from __future__ import annotations

from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.selection import choose_form, within_one_se
from mlflow_roofline.law.linear import LinearLaw


def _form(
    name: str, params: int, cv: float, cv_se: float, extrap: float = float("nan"), extrap_se: float = 0.0
) -> FittedForm:
    """A form with these scores and ``params`` coefficients (the rule reads nothing else)."""

    class Form(FittedForm):
        n_params = params  # type: ignore[assignment] # a plain count where the families compute it

    law = LinearLaw("", [], [], [], 0.0, 1.0)
    return Form(name=name, formula="", law=law, cv_mape=cv, cv_se=cv_se, extrap_mape=extrap, extrap_se=extrap_se)


def test_the_simplest_form_within_one_standard_error_of_the_best_is_chosen() -> None:
    forms = {
        "paper": _form("paper", 4, cv=11.0, cv_se=1.0),
        "rich": _form("rich", 7, cv=10.0, cv_se=1.5),  # the best: 10 + 1.5 = 11.5 is the threshold
        "richer": _form("richer", 9, cv=10.5, cv_se=0.5),
        "far": _form("far", 2, cv=12.0, cv_se=0.1),
    }
    assert within_one_se(forms) == ["paper", "rich", "richer"]
    assert choose_form(forms) == "paper"


def test_a_form_that_misses_the_bigger_models_is_scored_by_that_miss() -> None:
    forms = {
        "paper": _form("paper", 4, cv=10.0, cv_se=0.5, extrap=20.0, extrap_se=1.0),
        "rich": _form("rich", 7, cv=11.0, cv_se=0.5, extrap=12.0, extrap_se=1.0),
    }
    assert within_one_se(forms) == ["rich"]
    assert choose_form(forms) == "rich"


def test_without_any_score_the_default_is_chosen() -> None:
    forms = {"paper": _form("paper", 4, cv=float("nan"), cv_se=float("nan"))}
    assert within_one_se(forms) == []
    assert choose_form(forms) == "paper"
    assert choose_form(forms, default="baseline") == "baseline"
