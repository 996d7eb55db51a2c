"""Carbon beyond the meter: the sourced embodied-carbon and water tables, the two formulas, a run's fields.

The formulas on numbers worked out by hand; the tables checked row by row (a source for every
figure, every GPU a name of the hardware table, no zero or negative figure); a missing figure
named, never a 0.
"""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np
import pytest

from mlflow_roofline.core.carbon import CarbonSettings, region_table, resolve_carbon
from mlflow_roofline.core.embodied_table import embodied_table, lookup_embodied, missing_embodied
from mlflow_roofline.core.footprint import device_hours, embodied_co2e_g, water_l
from mlflow_roofline.core.footprint_fields import footprint_fields
from mlflow_roofline.core.gpu_datasheets import shipped_specs
from mlflow_roofline.core.water_table import KIND_GRID, KIND_SITE, region_water, water_rows


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("mlflow_roofline").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return list(csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#")))


# --- the formulas, by hand ---------------------------------------------------------------------


def test_embodied_is_device_hours_times_the_per_hour_share() -> None:
    # 8 GPUs for one hour: 8 device-hours; 876.5 kg over 26,280 h is 33.3524 g per device-hour.
    assert device_hours(8, 3600.0) == 8.0
    assert embodied_co2e_g(8, 3600.0, 876.5, 26280.0) == pytest.approx(8 * 876_500 / 26_280, rel=1e-12)
    assert embodied_co2e_g(8, 3600.0, 876.5, 26280.0) == pytest.approx(266.8188736681887, rel=1e-12)
    # half the time or half the devices: half the share; a job of 90 s on one GPU of 1000 kg over 10,000 h
    assert embodied_co2e_g(1, 90.0, 1000.0, 10_000.0) == pytest.approx(0.025 * 100.0, rel=1e-12)


def test_water_takes_site_wue_on_it_energy_and_grid_water_on_facility_energy() -> None:
    # 2 kWh measured, PUE 1.2: site 0.15 L/kWh x 2 kWh = 0.3 L; grid 1.93 L/kWh x 2.4 kWh = 4.632 L
    assert water_l(2.0, 1.2, 0.15, 1.93) == pytest.approx(0.3 + 4.632, rel=1e-12)
    assert water_l(2.0, 1.0, 0.15, 1.93) == pytest.approx(2.0 * 2.08, rel=1e-12)


def test_the_formulas_take_arrays() -> None:
    grams = embodied_co2e_g(np.array([1.0, 2.0]), np.array([3600.0, 1800.0]), 1.0, 1.0)
    np.testing.assert_allclose(grams, [1000.0, 1000.0])
    np.testing.assert_allclose(water_l(np.array([1.0, 3.0]), 1.0, 0.5, 1.5), [2.0, 6.0])


# --- the tables --------------------------------------------------------------------------------


def test_every_embodied_row_names_a_gpu_of_the_hardware_table_and_its_sources() -> None:
    names = {spec.name for spec in shipped_specs()}
    rows = _rows("embodied.csv")
    assert rows, "the embodied table is empty"
    for row in rows:
        assert row["name"] in names, f"{row['name']!r} is not a name of data/hardware.csv"
        assert row["source"].strip() and row["life_source"].strip(), row["name"]
        assert float(row["gpu_kg_co2e"]) > 0 and float(row["life_hours"]) > 0, row["name"]
        if row["server_share_kg_co2e"].strip():
            assert float(row["server_share_kg_co2e"]) > 0 and row["server_source"].strip(), row["name"]
    assert len(embodied_table()) == len(rows)


def test_every_water_row_has_a_source_and_a_positive_figure() -> None:
    rows = _rows("water.csv")
    countries = {figure.region for figure in region_table().values() if figure.region == figure.grid}
    assert {row["kind"] for row in rows} == {KIND_SITE, KIND_GRID}
    for row in rows:
        assert row["source"].strip(), row["key"]
        assert 0 < float(row["l_per_kwh"]) < 100, row["key"]
        if row["kind"] == KIND_GRID:
            assert row["key"] in countries, f"{row['key']!r} is not a country of carbon_intensity.csv"
    assert len(water_rows()) == len(rows)


def test_a_measured_name_joins_through_the_hardware_table() -> None:
    h100 = lookup_embodied("NVIDIA H100 80GB HBM3")  # what NVML reports for an H100 SXM
    assert h100 is not None and h100.name == "H100 SXM"
    assert h100.manufacturing_kg_co2e == pytest.approx(164 + 712.5)
    assert h100.g_per_device_hour == pytest.approx(876_500 / 26_280)
    assert h100.describe() == "table:H100 SXM (GPU 164 + server share 712.5 kg CO2e over 26280 h)"
    a100 = lookup_embodied("NVIDIA A100-SXM4-80GB")
    assert a100 is not None and a100.name == "A100 SXM4 80GB"


@pytest.mark.parametrize("hardware", ["NVIDIA H200", "GeForce RTX 2080 Ti", "cpu:AMD EPYC 7763", "Synthetic GPU"])
def test_a_gpu_without_a_figure_has_none_and_is_named(hardware: str) -> None:
    assert lookup_embodied(hardware) is None
    assert repr(hardware) in missing_embodied(hardware) and "H100 SXM" in missing_embodied(hardware)


def test_a_cloud_region_takes_its_providers_wue_and_its_countrys_grid() -> None:
    frankfurt = region_water("eu-central-1")
    assert frankfurt.missing() is None and frankfurt.provider == "aws" and frankfurt.grid == "DE"
    assert frankfurt.site is not None and frankfurt.site.l_per_kwh == 0.15
    assert frankfurt.grid_row is not None and frankfurt.grid_row.l_per_kwh == 1.93
    assert frankfurt.describe() == "table:eu-central-1 (site aws 0.15 L/kWh 2024; grid DE 1.93 L/kWh)"
    assert region_water("eastus").site is not None


@pytest.mark.parametrize(
    ("region", "says"),
    [
        ("europe-west4", "no site WUE for region 'europe-west4' (provider 'gcp')"),  # Google publishes no WUE
        ("DE", "no site WUE for region 'DE' (a country code"),
        ("us-central1", "no site WUE for region 'us-central1' (provider 'gcp')"),
        ("af-south-1", "no grid water intensity for 'ZA'"),  # an AWS region whose country has no grid row
    ],
)
def test_a_region_without_a_figure_names_it(region: str, says: str) -> None:
    missing = region_water(region).missing()
    assert missing is not None and says in missing


# --- a run's fields ----------------------------------------------------------------------------


def test_a_runs_fields_on_a_gpu_and_region_of_the_tables() -> None:
    carbon = resolve_carbon(region="us-east-1", pue="1.1", env={})
    metrics, tags = footprint_fields("NVIDIA H100 80GB HBM3", 4, 1800.0, 7.2e6, carbon)
    assert metrics["embodied_co2e_g"] == pytest.approx(4 * 0.5 * 876_500 / 26_280, rel=1e-12)
    assert metrics["water_l"] == pytest.approx(2.0 * (0.15 + 1.1 * 3.14), rel=1e-12)
    assert tags == {
        "roofline.embodied_source": "table:H100 SXM (GPU 164 + server share 712.5 kg CO2e over 26280 h)",
        "roofline.water_source": "table:us-east-1 (site aws 0.15 L/kWh 2024; grid US 3.14 L/kWh)",
    }


@pytest.mark.parametrize(
    ("hardware", "energy_j", "carbon", "embodied_says", "water_says"),
    [
        ("NVIDIA T4", 1e6, CarbonSettings(300.0, "option"), "'NVIDIA T4'", "no region given"),
        (None, 1e6, resolve_carbon(region="DE", env={}), "hardware unknown", "no site WUE"),
        ("cpu:Intel Xeon", None, resolve_carbon(region="eastus", env={}), "'cpu:Intel Xeon'", "no measured energy"),
    ],
)
def test_a_missing_figure_logs_no_metric_and_a_tag_naming_it(
    hardware: str | None, energy_j: float | None, carbon: CarbonSettings, embodied_says: str, water_says: str
) -> None:
    metrics, tags = footprint_fields(hardware, 2, 60.0, energy_j, carbon)
    assert metrics == {}
    assert embodied_says in tags["roofline.embodied_unknown"] and water_says in tags["roofline.water_unknown"]
