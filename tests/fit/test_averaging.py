"""fit/forms/averaging.py: forms that tie within one SE are registered as their average, scored on held-out runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.fit.forms.averaging import AVERAGED
from mlflow_roofline.fit.forms.cv import CV_FOLDS, fold_mape, grouped_cv_mape, heldout_mape, workload_folds
from mlflow_roofline.fit.forms.energy_laws import EnergyFits, fit_energy_laws
from mlflow_roofline.fit.forms.selection import within_one_se
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.law.averaged import AveragedLaw
from mlflow_roofline.testing.synthetic import generate_synthetic_runs

SEED = 0  # fit_hardware's default seed: its CV folds


@pytest.fixture(scope="module")
def tied() -> tuple[EnergyFits, pd.DataFrame]:
    """A pure power law (25 workloads): the paper's forms predict held-out workloads equally well."""
    _, frame = generate_synthetic_runs(25, seed=11)
    fit = fit_hardware(frame.drop(columns=["speedup", "eta"]), "Synthetic GPU")
    return fit.energy, fit.data


def test_forms_within_one_se_are_registered_as_their_average(tied) -> None:
    fits, _ = tied
    single = {name: fit for name, fit in fits.forms.items() if name != AVERAGED}
    ties = within_one_se(single)
    assert len(ties) >= 2 and fits.chosen == AVERAGED and fits.registered_forms == ties
    law = fits.forms[AVERAGED].law
    assert isinstance(law, AveragedLaw) and list(law.members) == [single[name].law for name in ties]
    assert any("their average is registered" in note for note in fits.notes)


def test_the_average_is_scored_on_its_members_held_out_predictions(tied) -> None:
    fits, data = tied
    averaged = fits.forms[AVERAGED]
    members = [fits.forms[name] for name in fits.registered_forms]
    actual = data["log_E"].to_numpy(dtype=float)
    folds = workload_folds(data["workload_hash"].to_numpy(), CV_FOLDS, SEED)
    for member in members:  # each member's held-out predictions are its grouped CV (the formula's own path)
        assert member.cv_mape == pytest.approx(grouped_cv_mape(member.formula, data, seed=SEED)[0], rel=1e-9)
    held_out = np.mean([member.cv_log_e for member in members], axis=0)
    assert (averaged.cv_mape, averaged.cv_se) == pytest.approx(fold_mape(actual, held_out, folds), rel=1e-12)
    check = fits.extrapolation
    assert check is not None
    bigger = np.mean([check.predicted[name] for name in fits.registered_forms], axis=0)
    groups = data.loc[check.held_out, "workload_hash"].to_numpy()
    expected = heldout_mape(actual[check.held_out], bigger, groups)
    assert (averaged.extrap_mape, averaged.extrap_se) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(check.predicted[AVERAGED], bigger, rtol=1e-12)


def test_the_average_predicts_the_mean_of_its_members_logs(tied) -> None:
    fits, data = tied
    features = {c: data[c].to_numpy() for c in data.columns}
    members = [fits.forms[name] for name in fits.registered_forms]
    expected = np.mean([member.law.mean(features) for member in members], axis=0)
    np.testing.assert_allclose(fits.forms[AVERAGED].law.mean(features), expected, rtol=1e-12)
    np.testing.assert_allclose(fits.forms[AVERAGED].fitted_log, expected, rtol=1e-9)


def test_one_form_ahead_of_the_others_is_registered_alone() -> None:
    # energy that grows with N beyond eta: paper_log_n is ahead by more than one SE (tests/fit/test_energy_laws.py)
    from mlflow_roofline.fit.runs.measured_speedup import measure_speedup

    _, frame = generate_synthetic_runs(30, seed=3, device_counts=(2, 4, 8))
    frame = measure_speedup(frame.drop(columns=["speedup", "eta"]))
    frame["energy_j"] = frame["energy_j"] * frame["num_devices"] ** 0.5
    fits = fit_energy_laws(feature_frame(frame))
    assert within_one_se(fits.forms) == ["paper_log_n"] and fits.chosen == "paper_log_n"
    assert AVERAGED not in fits.forms and fits.registered_forms == ["paper_log_n"]


def test_the_coefficient_table_lists_each_member_under_the_average(tied) -> None:
    fits, _ = tied
    table = fits.forms[AVERAGED].coefficient_table()
    assert set(table["form"]) == {AVERAGED} and list(dict.fromkeys(table["member"])) == fits.registered_forms
    paper = table[table["member"] == "paper"].set_index("term")["estimate"]
    assert paper["log_C"] == fits.forms["paper"].law.coefficient("log_C")
