"""Carbon intensity resolution, the shipped region table and the joules-to-emissions conversion."""

from __future__ import annotations

import csv
import math
from importlib import resources

import numpy as np
import pytest

from mlflow_roofline.core.carbon import (
    J_PER_KWH,
    CarbonSettings,
    carbon_tags,
    emissions,
    lookup_region,
    region_table,
    resolve_carbon,
)
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import (
    TAG_CARBON_INTENSITY,
    TAG_CARBON_SOURCE,
    TAG_CARBON_UNKNOWN,
    TAG_PRICE_PER_KWH,
    TAG_PUE,
)


def _raw_rows() -> list[dict[str, str]]:
    text = resources.files("mlflow_roofline").joinpath("data", "carbon_intensity.csv").read_text("utf-8")
    return list(csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#")))


def test_table_header_states_source_licence_and_year() -> None:
    text = resources.files("mlflow_roofline").joinpath("data", "carbon_intensity.csv").read_text("utf-8")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    for needle in ("Our World in Data", "Ember", "CC BY 4.0", "MIT", "year"):
        assert needle in header


def test_table_country_rows_are_complete_and_cloud_rows_point_at_a_country() -> None:
    rows = _raw_rows()
    countries = {r["region"]: r for r in rows if r["g_co2e_per_kwh"]}
    assert len(countries) >= 40
    for code, row in countries.items():
        assert len(code) == 2 and code.isupper() and row["grid"] == code
        assert 0 < float(row["g_co2e_per_kwh"]) < 1500
        assert 2000 <= int(row["year"]) <= 2030
    cloud = [r for r in rows if not r["g_co2e_per_kwh"]]
    assert {r["name"].split(":")[0] for r in cloud} == {"aws", "gcp", "azure"}
    for row in cloud:
        assert row["grid"] in countries, row
        assert not row["year"]
    assert len({r["region"].lower() for r in rows}) == len(rows)


@pytest.mark.parametrize("region", ["us-east-1", "europe-west4", "eastus", "eu-central-1", "EastUS"])
def test_cloud_region_takes_its_countrys_figure(region: str) -> None:
    figure = lookup_region(region)
    country = region_table()[figure.grid.lower()]
    assert figure.g_co2e_per_kwh == country.g_co2e_per_kwh
    assert figure.year == country.year


def test_resolution_order_option_then_env_then_region() -> None:
    env = {"ROOFLINE_CARBON_INTENSITY": "123", "ROOFLINE_REGION": "FR"}
    # The region is kept beside an intensity that wins over its figure: the water table is keyed by it.
    assert resolve_carbon(carbon_intensity=50, env=env) == CarbonSettings(50.0, "option", 1.0, None, region="FR")
    assert resolve_carbon(env=env) == CarbonSettings(123.0, "env", 1.0, None, region="FR")
    from_env_region = resolve_carbon(env={"ROOFLINE_REGION": "fr"})
    assert from_env_region.source == "table:FR" and from_env_region.region == "FR"
    assert from_env_region.intensity_g_per_kwh == lookup_region("FR").g_co2e_per_kwh
    assert resolve_carbon(region="de", env={"ROOFLINE_REGION": "FR"}).source == "table:DE"


def test_nothing_given_leaves_intensity_unknown() -> None:
    settings = resolve_carbon(env={})
    assert settings == CarbonSettings(None, None, 1.0, None)
    assert not settings.known
    assert set(emissions(1.0e6, settings)) == {"energy_kwh"}


def test_pue_and_price_from_options_and_env() -> None:
    env = {"ROOFLINE_PUE": "1.4", "ROOFLINE_PRICE_PER_KWH": "0.3"}
    assert resolve_carbon(env=env) == CarbonSettings(None, None, 1.4, 0.3)
    assert resolve_carbon(pue=1.1, price_per_kwh=0.2, env=env) == CarbonSettings(None, None, 1.1, 0.2)
    assert resolve_carbon(env={"ROOFLINE_PUE": "  "}).pue == 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"carbon_intensity": -1}, "carbon_intensity"),
        ({"carbon_intensity": float("nan")}, "carbon_intensity"),
        ({"carbon_intensity": "lots"}, "carbon_intensity"),
        ({"pue": 0.9}, "pue"),
        ({"pue": float("inf")}, "pue"),
        ({"price_per_kwh": -0.1}, "price_per_kwh"),
        ({"region": "atlantis"}, "region"),
        ({"pue": 3.01}, "pue"),  # past any data centre's
        ({"carbon_intensity": 2001}, "carbon_intensity"),  # past lignite's
        ({"carbon_intensity": 4.0e5}, "carbon_intensity"),  # kg written where g is meant... times 1000
        ({"price_per_kwh": 1e300}, "price_per_kwh"),
        ({"carbon_intensity": 100, "region": "atlantis"}, "region"),  # an unused region is still checked
    ],
)
def test_bad_values_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_carbon(env={}, **kwargs)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_bad_env_value_names_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_carbon(env={"ROOFLINE_PUE": "0.5"})
    assert info.value.field == "pue"


def test_unknown_region_says_how_to_give_the_figure() -> None:
    with pytest.raises(ConfigError, match="--carbon-intensity"):
        resolve_carbon(region="mars-north-1", env={})


def test_emissions_scalar_follow_the_definition() -> None:
    settings = CarbonSettings(intensity_g_per_kwh=400.0, source="option", pue=1.5, price_per_kwh=0.25)
    out = emissions(2 * J_PER_KWH, settings)
    assert out == {
        "energy_kwh": 2.0,
        "co2e_g": 2.0 * 1.5 * 400.0,
        "cost": 2.0 * 1.5 * 0.25,
    }
    assert all(isinstance(v, float) for v in out.values())


def test_emissions_vectorised_match_scalar() -> None:
    settings = resolve_carbon(region="DE", pue=1.2, price_per_kwh=0.4, env={})
    energies = np.array([0.0, 1.0e5, 3.6e6, 7.2e7])
    out = emissions(energies, settings)
    assert out["co2e_g"].shape == energies.shape
    for i, e in enumerate(energies):
        one = emissions(float(e), settings)
        for key in ("energy_kwh", "co2e_g", "cost"):
            assert math.isclose(out[key][i], one[key], rel_tol=1e-12)


def test_carbon_tags_known_and_unknown() -> None:
    known = carbon_tags(resolve_carbon(region="us-east-1", price_per_kwh=0.1, env={}))
    assert known[TAG_CARBON_SOURCE] == "table:us-east-1"
    assert float(known[TAG_CARBON_INTENSITY]) == pytest.approx(lookup_region("US").g_co2e_per_kwh)
    assert known[TAG_PUE] == "1" and known[TAG_PRICE_PER_KWH] == "0.1"
    assert TAG_CARBON_UNKNOWN not in known
    unknown = carbon_tags(resolve_carbon(env={}))
    assert "--region" in unknown[TAG_CARBON_UNKNOWN]
    assert TAG_CARBON_SOURCE not in unknown and TAG_CARBON_INTENSITY not in unknown


def test_the_upper_bounds_themselves_are_taken() -> None:
    settings = resolve_carbon(carbon_intensity=2000, pue=3, price_per_kwh=1e6, region="DE", env={})
    assert settings == CarbonSettings(2000.0, "option", 3.0, 1e6, region="DE")
    with pytest.raises(ConfigError, match="region"):
        resolve_carbon(carbon_intensity=100, env={"ROOFLINE_REGION": "atlantis"})
