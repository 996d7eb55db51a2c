"""The meter registry: one list of meters, whose names are the schema's energy sources and ``auto``'s order."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.schema import DEVICES, ENERGY_SOURCES
from mlflow_roofline.energy.base import MeterError
from mlflow_roofline.energy.select import AUTO_ORDER, METER_KINDS, METER_NAMES, make_meter


def test_the_registry_names_are_the_energy_sources_and_auto() -> None:
    assert tuple(kind.name for kind in METER_KINDS) == ENERGY_SOURCES
    assert ("auto", *ENERGY_SOURCES) == METER_NAMES
    assert {kind.device_kind for kind in METER_KINDS} <= set(DEVICES)


def test_auto_tries_only_the_meters_of_the_job_device_kind() -> None:
    assert AUTO_ORDER["cpu"] == ("rapl", "estimate")
    assert AUTO_ORDER["cuda"] == ("nvml", "nvml_power", "rocm")
    assert AUTO_ORDER["auto"] == ENERGY_SOURCES


@pytest.mark.parametrize("name", ENERGY_SOURCES)
def test_every_registered_meter_is_built_or_refused_by_name(name: str, tmp_path) -> None:
    try:
        meter = make_meter(name, rapl_root=str(tmp_path))
    except MeterError as exc:  # no GPU or powercap here: refused, naming the meter
        assert f"meter {name} is not available here" in str(exc)
    else:
        assert meter.selection == f"{name}: asked for by name"
