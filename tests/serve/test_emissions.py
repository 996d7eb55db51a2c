"""Carbon and cost in the served answers.

The emission columns, the request params and their resolution, the carbon and cost objectives.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from law_factory import make_law, query
from mlflow.exceptions import MlflowException

from mlflow_roofline.core.carbon import CarbonSettings, region_table
from mlflow_roofline.serve.emissions import add_emissions, emission_columns
from mlflow_roofline.serve.params import carbon_settings, read_request
from mlflow_roofline.serve.placement_search import RECOMMEND_OUTPUT_COLUMNS, pareto_frame, recommend_frame
from mlflow_roofline.serve.predict import predict_frame

LAW = make_law()
FRAME = pd.DataFrame([query(), query(strategy="tp", num_devices=4), query(strategy="single", num_devices=1)])


def test_predict_adds_co2e_with_its_interval_and_cost() -> None:
    carbon = carbon_settings({"carbon_intensity": 420.0, "pue": 1.25, "price_per_kwh": 0.31}, env={})
    out = predict_frame(LAW, FRAME, carbon)
    plain = predict_frame(LAW, FRAME)
    pd.testing.assert_frame_equal(out[list(plain.columns)], plain)
    emission = ["co2e_g", "co2e_g_lower", "co2e_g_upper", "cost"]
    # then why there is no embodied_co2e_g (tests/serve/test_footprint.py): "Synthetic GPU" has no figure
    assert list(out.columns[len(plain.columns) :]) == [*emission, "embodied_unknown"]
    kwh = plain[["energy_j", "energy_j_lower", "energy_j_upper"]].to_numpy() / 3.6e6
    co2e = out[["co2e_g", "co2e_g_lower", "co2e_g_upper"]].to_numpy()
    np.testing.assert_allclose(co2e, kwh * 1.25 * 420.0, rtol=1e-12)
    np.testing.assert_allclose(out["cost"], kwh[:, 0] * 1.25 * 0.31, rtol=1e-12)


def test_without_a_figure_there_are_no_emission_columns() -> None:
    out = predict_frame(LAW, FRAME, carbon_settings({}, env={}))
    assert not {"co2e_g", "cost"} & set(out.columns)
    price_only = predict_frame(LAW, FRAME, carbon_settings({"price_per_kwh": 0.2}, env={}))
    assert "cost" in price_only and "co2e_g" not in price_only


def test_region_figure_comes_from_the_shipped_table() -> None:
    carbon = carbon_settings({"region": "eu-central-1"}, env={})
    germany = region_table()["de"]
    assert carbon.intensity_g_per_kwh == germany.g_co2e_per_kwh and carbon.source == "table:eu-central-1"
    out = predict_frame(LAW, FRAME, carbon)
    np.testing.assert_allclose(out["co2e_g"], out["energy_j"] / 3.6e6 * germany.g_co2e_per_kwh, rtol=1e-12)


@pytest.mark.parametrize(
    ("params", "env", "intensity"),
    [
        ({"carbon_intensity": 50.0, "region": "PL"}, {"ROOFLINE_CARBON_INTENSITY": "100"}, 50.0),
        ({"region": "PL"}, {"ROOFLINE_CARBON_INTENSITY": "100"}, 100.0),
        ({"region": "FR"}, {"ROOFLINE_REGION": "PL"}, region_table()["fr"].g_co2e_per_kwh),
        ({}, {"ROOFLINE_REGION": "PL"}, region_table()["pl"].g_co2e_per_kwh),
        ({}, {}, None),
    ],
)
def test_resolution_order_param_then_env_then_region_table(params, env, intensity) -> None:
    assert carbon_settings(params, env=env).intensity_g_per_kwh == intensity


@pytest.mark.parametrize(
    ("params", "start"),
    [
        ({"region": "Atlantis"}, "region: 'Atlantis' is not in the carbon-intensity table"),
        ({"carbon_intensity": -3.0}, "carbon_intensity: expected a finite number >= 0"),
        ({"carbon_intensity": float("nan")}, "carbon_intensity: expected a finite number >= 0"),
        ({"pue": 0.8}, "pue: expected a finite number >= 1"),
        ({"price_per_kwh": float("inf")}, "price_per_kwh: expected a finite number >= 0"),
        (
            {"mode": "recommend", "objective": "carbon"},
            "objective: must be one of energy, time, edp, got 'carbon' (carbon needs carbon_intensity or region)",
        ),
        (
            {"mode": "recommend", "objective": "cost", "region": "DE"},
            "objective: must be one of energy, time, edp, carbon, got 'cost' (cost needs price_per_kwh)",
        ),
    ],
)
def test_bad_carbon_params_are_a_400_naming_the_param(params, start: str) -> None:
    with pytest.raises(MlflowException) as info:
        read_request(params, env={})
    assert info.value.get_http_status_code() == 400
    assert info.value.message.startswith(start), info.value.message


@pytest.mark.parametrize("objective", ["carbon", "cost"])
def test_carbon_and_cost_objectives_rank_as_energy_and_report_their_figure(objective: str) -> None:
    request = read_request(
        {"mode": "recommend", "objective": objective, "carbon_intensity": 300.0, "price_per_kwh": 0.25, "pue": 1.4},
        env={},
    )
    out = recommend_frame(LAW, FRAME, 8, request.objective, request.carbon)
    by_energy = recommend_frame(LAW, FRAME, 8, "energy")
    pd.testing.assert_frame_equal(
        out[[c for c in RECOMMEND_OUTPUT_COLUMNS if c != "objective"]],
        by_energy[[c for c in RECOMMEND_OUTPUT_COLUMNS if c != "objective"]],
    )
    assert (out["objective"] == objective).all()
    np.testing.assert_allclose(out["co2e_g"], out["energy_j"] / 3.6e6 * 1.4 * 300.0, rtol=1e-12)
    np.testing.assert_allclose(out["cost"], out["energy_j"] / 3.6e6 * 1.4 * 0.25, rtol=1e-12)


def test_pareto_points_carry_their_co2e() -> None:
    carbon = carbon_settings({"carbon_intensity": 200.0}, env={})
    out = pareto_frame(LAW, FRAME, 8, carbon)
    np.testing.assert_allclose(out["co2e_g"], out["energy_j"] / 3.6e6 * 200.0, rtol=1e-12)
    assert "co2e_g_upper" not in out
    for _, front in out.groupby("row"):
        assert (np.diff(front["co2e_g"]) < 0).all()  # slower along the frontier is greener


# -- emission_columns: the columns add_emissions appends, from arrays; nothing when no figure is known --
ENERGY = {
    "energy_j": np.array([3.6e6, 7.2e6]),
    "energy_j_lower": np.array([1.8e6, 3.6e6]),
    "energy_j_upper": np.array([7.2e6, 1.44e7]),
}


def test_nothing_known_gives_no_columns() -> None:
    assert emission_columns(ENERGY, None) == {}
    assert emission_columns(ENERGY, CarbonSettings()) == {}
    assert list(add_emissions(pd.DataFrame(ENERGY), CarbonSettings()).columns) == list(ENERGY)


def test_known_figures_give_the_same_columns_as_add_emissions() -> None:
    carbon = CarbonSettings(intensity_g_per_kwh=400.0, source="option", pue=1.5, price_per_kwh=0.2)
    columns = emission_columns(ENERGY, carbon)
    assert list(columns) == ["co2e_g", "co2e_g_lower", "co2e_g_upper", "cost"]
    np.testing.assert_allclose(columns["co2e_g"], [600.0, 1200.0])  # 1 and 2 kWh x 1.5 x 400 g
    np.testing.assert_allclose(columns["cost"], [0.3, 0.6])
    framed = add_emissions(pd.DataFrame(ENERGY), carbon)
    pd.testing.assert_frame_equal(framed, pd.concat([pd.DataFrame(ENERGY), pd.DataFrame(columns)], axis=1))
    price_only = emission_columns(ENERGY, CarbonSettings(price_per_kwh=0.1), interval=False)
    assert list(price_only) == ["cost"]
