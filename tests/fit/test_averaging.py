"""fit/forms/averaging.py: the 1-SE pick, averaged with the one or two sane forms that predict held-out runs best
beside it, is registered where that mean scores better than the pick alone; the mean is scored on held-out runs."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.fit.forms.averaging import AVERAGED, MAX_MEMBERS, average_forms, rank_combinations
from mlflow_roofline.fit.forms.cv import CV_FOLDS, fold_mape, grouped_cv_mape, heldout_mape, workload_folds
from mlflow_roofline.fit.forms.energy_laws import EnergyFits, fit_energy_laws
from mlflow_roofline.fit.forms.ols import FormFit
from mlflow_roofline.fit.forms.selection import choose_form, score, within_one_se
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.law.averaged import AveragedLaw
from mlflow_roofline.testing.synthetic import generate_synthetic_runs
from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

SEED = 0  # fit_hardware's default seed: its CV folds


@pytest.fixture(scope="module")
def tied() -> tuple[EnergyFits, pd.DataFrame]:
    """A pure power law (25 workloads): the paper's forms predict held-out workloads equally well."""
    _, frame = generate_synthetic_runs(25, seed=11)
    fit = fit_hardware(frame.drop(columns=["speedup", "eta"]), "Synthetic GPU")
    return fit.energy, fit.data


@pytest.fixture(scope="module")
def leaning() -> tuple[EnergyFits, pd.DataFrame]:
    """A T4 of the weak-scaling fleet (8 workloads, achieved FLOP/s growing with width): no form's shape is the
    machine's, and the forms miss held-out runs in different directions."""
    fit = fit_hardware(generate_weak_fleet_runs(8, gpus=("T4",), seed=0), "T4")
    return fit.energy, fit.data


def _sane(fits: EnergyFits) -> dict:
    return {name: form for name, form in fits.forms.items() if name != AVERAGED and name not in fits.insane}


def test_the_registered_mean_scores_best_among_the_1se_pick_and_up_to_two_partners(leaning) -> None:
    fits, data = leaning
    sane = _sane(fits)
    pick = choose_form(sane)
    assert fits.chosen == AVERAGED and fits.registered_forms[0] == pick
    scores = {}  # each candidate built as the fit builds it and scored by the selection rule's own score
    for size in range(MAX_MEMBERS):
        for partners in itertools.combinations([name for name in sane if name != pick], size):
            members = (pick, *partners)
            form = sane[pick] if not partners else average_forms(members, sane, data, SEED, fits.extrapolation)[0]
            scores[members] = score(form)[0]
    best = min(scores, key=lambda members: scores[members])
    assert tuple(fits.registered_forms) == best and scores[best] < score(sane[pick])[0]
    assert score(fits.forms[AVERAGED])[0] == pytest.approx(scores[best], rel=1e-12)
    law = fits.forms[AVERAGED].law
    assert isinstance(law, AveragedLaw) and list(law.members) == [sane[name].law for name in best]
    assert any(f"better than {pick} alone" in note for note in fits.notes)


def test_each_candidate_is_ranked_by_the_score_the_fit_gives_it(leaning) -> None:
    fits, data = leaning
    sane = _sane(fits)
    pick = choose_form(sane)
    ranked = {
        members: value for value, members in rank_combinations(list(sane), sane, data, SEED, fits.extrapolation, pick)
    }
    assert ranked[(pick,)] == pytest.approx(score(sane[pick])[0], rel=1e-12)
    assert all(members[0] == pick and len(members) <= MAX_MEMBERS for members in ranked)
    n_others = len([name for name in sane if name != pick and sane[name].cv_log_e is not None])
    assert len(ranked) == 1 + n_others + n_others * (n_others - 1) // 2


def test_forms_that_tie_with_no_better_mean_leave_the_pick_alone(tied) -> None:
    fits, data = tied
    single = {name: fit for name, fit in fits.forms.items() if name != AVERAGED}
    assert len(within_one_se(single)) >= 2
    assert AVERAGED not in fits.forms and fits.registered_forms == [choose_form(single)] == [fits.chosen]
    ranked = rank_combinations(list(single), single, data, SEED, fits.extrapolation, fits.chosen)
    assert ranked[0][1] == (fits.chosen,)


def test_the_average_is_scored_on_its_members_held_out_predictions(leaning) -> None:
    fits, data = leaning
    averaged = fits.forms[AVERAGED]
    members = [fits.forms[name] for name in fits.registered_forms]
    actual = data["log_E"].to_numpy(dtype=float)
    folds = workload_folds(data["workload_hash"].to_numpy(), CV_FOLDS, SEED)
    linear = [member for member in members if isinstance(member, FormFit)]  # baseline here; the others roofline-shaped
    assert linear
    for member in linear:  # an OLS member's held-out predictions are its grouped CV (the formula's own path)
        assert member.cv_mape == pytest.approx(grouped_cv_mape(member.formula, data, seed=SEED)[0], rel=1e-9)
    for member in members:
        assert (member.cv_mape, member.cv_se) == pytest.approx(fold_mape(actual, member.cv_log_e, folds), rel=1e-12)
    held_out = np.mean([member.cv_log_e for member in members], axis=0)
    assert (averaged.cv_mape, averaged.cv_se) == pytest.approx(fold_mape(actual, held_out, folds), rel=1e-12)
    check = fits.extrapolation
    assert check is not None
    bigger = np.mean([check.predicted[name] for name in fits.registered_forms], axis=0)
    groups = data.loc[check.held_out, "workload_hash"].to_numpy()
    expected = heldout_mape(actual[check.held_out], bigger, groups)
    assert (averaged.extrap_mape, averaged.extrap_se) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(check.predicted[AVERAGED], bigger, rtol=1e-12)


def test_the_average_predicts_the_mean_of_its_members_logs(leaning) -> None:
    fits, data = leaning
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


def test_the_coefficient_table_lists_each_member_under_the_average(leaning) -> None:
    fits, _ = leaning
    table = fits.forms[AVERAGED].coefficient_table()
    assert set(table["form"]) == {AVERAGED} and list(dict.fromkeys(table["member"])) == fits.registered_forms
    linear = next(name for name in fits.registered_forms if "log_C" in fits.forms[name].law.terms)  # baseline here
    estimates = table[table["member"] == linear].set_index("term")["estimate"]
    assert estimates["log_C"] == fits.forms[linear].law.coefficient("log_C")
