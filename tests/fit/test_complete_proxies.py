"""Forms in the complete proxies: when they compete, their kind terms, and the comparison with the paper's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.fit.forms.catalog import (
    COMPLETE,
    COMPLETE_FORMS,
    COMPLETE_PER_STEP,
    COMPLETE_PROXY_FORMS,
    PAPER,
    candidate_forms,
    formula_of,
)
from mlflow_roofline.fit.forms.energy_laws import fit_energy_laws
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.proxy_comparison import compare_proxies
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.testing.mixed_arch import generate_mixed_arch_runs
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs


@pytest.fixture(scope="module")
def mixed() -> pd.DataFrame:
    return generate_mixed_arch_runs(16, seed=1)


def test_runs_of_the_paper_kind_alone_get_no_complete_form() -> None:
    data = feature_frame(generate_roofline_runs(6, seed=0))
    assert not set(candidate_forms(data)) & set(COMPLETE_FORMS)
    assert list(data["arch"].cat.categories) == ["encoder"]
    # log_C_all is log_C for an encoder: no head
    np.testing.assert_allclose(data["log_C_all"], data["log_C"])


def test_a_kind_is_a_term_only_where_both_of_its_levels_are_present(mixed: pd.DataFrame) -> None:
    data = feature_frame(mixed)
    assert candidate_forms(data)[-2:] == list(COMPLETE_FORMS)
    formula = formula_of(COMPLETE, data)
    assert formula.startswith("log_E ~ log_C_all + log_M_all + log_eta + strategy")
    assert all(f"+ {kind}" in formula for kind in ("arch", "peft", "grad_checkpointing"))
    assert list(data["arch"].cat.categories) == ["encoder", "decoder"]  # the paper's arch is the reference

    decoders = feature_frame(mixed[(mixed["arch"] == "decoder") & (mixed["peft"] == "none")])
    only = formula_of(COMPLETE_PER_STEP, decoders)
    assert "arch" not in only and "peft" not in only  # one level: never a constant column
    assert only.startswith("I(log_E - log_steps) ~ I(log_C_all - log_steps)")
    assert COMPLETE in candidate_forms(decoders)  # decoders alone are not the paper's kind


def test_on_mixed_runs_a_complete_form_wins_and_the_report_says_the_paper_proxies_fall_short(
    mixed: pd.DataFrame,
) -> None:
    fits = fit_energy_laws(feature_frame(mixed))
    # OLS forms or rooflines in the complete proxies, one of them or those that tie averaged
    assert set(fits.registered_forms) <= set(COMPLETE_PROXY_FORMS), fits.registered_forms
    assert all("arch[T.decoder]" in fits.forms[name].law.terms for name in fits.registered_forms)
    assert fits.proxies is not None and not fits.proxies.suffices
    assert fits.proxies.complete_cv_mape < 0.5 * fits.proxies.paper_cv_mape
    assert "complete proxies predict better" in fits.proxies.describe()


def _form(name: str, cv: float, se: float) -> FittedForm:
    law = LinearLaw("log_E ~ 1", ["Intercept"], [0.0], [[0.0]], 0.0, 1.0)  # not read by the comparison
    return dataclasses.replace(FittedForm(name=name, formula="", law=law), cv_mape=cv, cv_se=se)


def test_the_paper_proxies_suffice_within_one_standard_error() -> None:
    close = compare_proxies({PAPER: _form(PAPER, 10.5, 1.0), COMPLETE: _form(COMPLETE, 10.0, 1.0)})
    assert close is not None and close.suffices
    assert "alone would have done as well" in close.describe()
    far = compare_proxies({PAPER: _form(PAPER, 12.0, 1.0), COMPLETE: _form(COMPLETE, 10.0, 1.0)})
    assert far is not None and not far.suffices
    assert compare_proxies({PAPER: _form(PAPER, 12.0, 1.0)}) is None  # no complete form: nothing to say
