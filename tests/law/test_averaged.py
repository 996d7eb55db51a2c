"""law/averaged.py: the mean in logs of several laws, its interval, and its JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlflow_roofline.law.averaged import AveragedLaw
from mlflow_roofline.law.coefficients import law_from_dict, t_quantile
from mlflow_roofline.law.fitted import energy_law_from_dict
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.law.roofline_efficiency import RooflineLaw

FEATURES = {
    "log_C": np.log([1e12, 1e13, 1e15]),
    "log_M": np.log([1e9, 5e9, 1e11]),
    "log_T": np.log([1e5, 4e5, 2e6]),
    "log_eta": np.log([1.0, 0.8, 0.5]),
    "strategy": np.array(["single", "single", "ddp"], dtype=object),
}


def _power_law(alpha_c: float, resid_var: float = 0.01) -> LinearLaw:
    terms = ["Intercept", "log_C", "log_M", "log_eta"]
    cov = np.diag([0.04, 1e-4, 1e-4, 1e-3]).tolist()
    return LinearLaw("log_E ~ log_C + log_M + log_eta", terms, [-20.0, alpha_c, 0.2, -1.0], cov, resid_var, 40.0)


def _roofline() -> RooflineLaw:
    terms = ["eps_c", "eps_m", "e0", "alpha_eta"]
    return RooflineLaw(
        "roofline", terms, [2e-11, 1e-9, 1e-4, -1.0], np.diag([1e-24, 1e-20, 1e-10, 1e-3]).tolist(), 0.01, 40.0
    )


def _averaged(*members, resid_var: float = 0.01, df_resid: float = 40.0) -> AveragedLaw:
    return AveragedLaw("mean", [], [], [], resid_var, df_resid, members=tuple(members))


def test_the_mean_is_the_members_mean_log_energy() -> None:
    power, roofline = _power_law(0.8), _roofline()
    law = _averaged(power, roofline)
    expected = (power.mean(FEATURES) + roofline.mean(FEATURES)) / 2
    np.testing.assert_allclose(law.mean(FEATURES), expected, rtol=1e-12)
    np.testing.assert_allclose(law.predict(FEATURES)[0], expected, rtol=1e-12)


def test_members_that_agree_give_the_interval_of_one_of_them() -> None:
    power = _power_law(0.8)
    for got, expected in zip(_averaged(power, power).predict(FEATURES), power.predict(FEATURES)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_members_that_disagree_widen_the_interval_by_their_spread() -> None:
    low, high = _power_law(0.7), _power_law(0.9)
    law = _averaged(low, high)
    mean, lower, upper = law.predict(FEATURES)
    spread = np.abs(low.mean(FEATURES) - high.mean(FEATURES)) / 2  # each member's distance from the average
    own = np.sqrt(((low.design(FEATURES) @ low.cov_array) * low.design(FEATURES)).sum(axis=1))  # both: same cov
    expected_half = t_quantile(0.975, 40.0) * np.sqrt(own**2 + spread**2 + law.resid_var)
    np.testing.assert_allclose(upper - mean, expected_half, rtol=1e-12)
    np.testing.assert_allclose(mean - lower, expected_half, rtol=1e-12)
    _, one_lower, one_upper = low.predict(FEATURES)
    assert np.all(upper - lower > one_upper - one_lower)  # wider where they part (here: every row)


def test_the_law_round_trips_through_json_with_its_members_kinds() -> None:
    law = _averaged(_power_law(0.8), _roofline(), resid_var=0.02, df_resid=33.0)
    data = json.loads(json.dumps(law.to_dict()))
    assert data["kind"] == "averaged" and [m.get("kind") for m in data["members"]] == [None, "roofline_eff"]
    back = energy_law_from_dict(data)
    assert back == law and [type(m) for m in back.members] == [LinearLaw, RooflineLaw]
    for got, expected in zip(back.predict(FEATURES), law.predict(FEATURES)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_fewer_than_two_members_and_an_unknown_kind_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="two or more member laws, not 1"):
        _averaged(_power_law(0.8))
    with pytest.raises(ValueError, match=r"law kind 'bagged' is not one of \[.*'averaged'.*'roofline_eff'"):
        law_from_dict({**_power_law(0.8).to_dict(), "kind": "bagged"})


def test_linear_members_of_other_terms_beside_a_roofline_each_keep_their_own_answer() -> None:
    # the linear members are evaluated on one design of all their terms; each must still read only its own
    per_strategy = LinearLaw(
        "log_E ~ log_C + strategy",
        ["Intercept", "strategy[T.ddp]", "log_C"],
        [-18.0, 0.3, 0.75],
        [[0.02, 0.001, 0.0], [0.001, 0.01, 0.0], [0.0, 0.0, 2e-4]],
        0.02,
        30.0,
    )
    members = (_power_law(0.8), per_strategy, _roofline())
    law = _averaged(*members)
    means = np.array([m.mean(FEATURES) for m in members])
    variances = []
    for member in members:
        _, grad = member.mean_and_gradient(FEATURES)
        variances.append(((grad @ member.cov_array) * grad).sum(axis=1))
    se = np.mean(np.sqrt(np.array(variances) + (means - means.mean(axis=0)) ** 2), axis=0)
    half = t_quantile(0.975, 40.0) * np.sqrt(se**2 + law.resid_var)
    mean, lower, upper = law.predict(FEATURES)
    np.testing.assert_allclose(mean, means.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(upper - mean, half, rtol=1e-10)
    np.testing.assert_allclose(mean - lower, half, rtol=1e-10)
