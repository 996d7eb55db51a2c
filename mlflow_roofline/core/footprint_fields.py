"""A measured run's ``embodied_co2e_g`` and ``water_l``, and the tags that say where they came from.

Beside ``co2e_g`` (operational), a run logs where known: ``embodied_co2e_g`` (grams CO2e, its
device-hours' share of the GPUs' manufacturing, :func:`~mlflow_roofline.core.footprint.embodied_co2e_g`)
with ``roofline.embodied_source``, and ``water_l`` (litres, :func:`~mlflow_roofline.core.footprint.water_l`)
with ``roofline.water_source``. A figure that is missing (hardware outside the embodied table, no
region, a region without a site WUE or grid figure, no measured energy) logs no metric and a tag
``roofline.embodied_unknown`` / ``roofline.water_unknown`` naming it: never a silent 0.
"""

from __future__ import annotations

from mlflow_roofline.core.carbon import ENV_REGION, J_PER_KWH, CarbonSettings
from mlflow_roofline.core.embodied_table import lookup_embodied, missing_embodied
from mlflow_roofline.core.footprint import embodied_co2e_g, water_l
from mlflow_roofline.core.schema import (
    M_EMBODIED_CO2E_G,
    M_WATER_L,
    MAX_TAG_CHARS,
    TAG_EMBODIED_SOURCE,
    TAG_EMBODIED_UNKNOWN,
    TAG_WATER_SOURCE,
    TAG_WATER_UNKNOWN,
)
from mlflow_roofline.core.water_table import region_water

NO_REGION_NOTE = f"no region given: give --region (an aws or azure region) or {ENV_REGION}; no water_l"
NO_ENERGY_NOTE = "no measured energy (see roofline.energy_error); no water_l"

Fields = tuple[dict[str, float], dict[str, str]]
"""Metrics and tags to log."""


def embodied_fields(hardware: str | None, num_devices: int, time_s: float) -> Fields:
    """``embodied_co2e_g`` and its source tag for ``num_devices`` of ``hardware`` held ``time_s`` seconds,
    or the tag naming the missing figure."""
    figure = None if hardware is None else lookup_embodied(hardware)
    if figure is None:
        note = missing_embodied(hardware) if hardware else "hardware unknown; no embodied_co2e_g"
        return {}, {TAG_EMBODIED_UNKNOWN: note[:MAX_TAG_CHARS]}
    grams = embodied_co2e_g(float(num_devices), time_s, figure.manufacturing_kg_co2e, figure.life_hours)
    return {M_EMBODIED_CO2E_G: float(grams)}, {TAG_EMBODIED_SOURCE: figure.describe()[:MAX_TAG_CHARS]}


def water_fields(energy_j: float | None, carbon: CarbonSettings) -> Fields:
    """``water_l`` and its source tag for ``energy_j`` joules in ``carbon``'s region (and PUE),
    or the tag naming the missing figure."""
    if carbon.region is None:
        return {}, {TAG_WATER_UNKNOWN: NO_REGION_NOTE}
    if energy_j is None:
        return {}, {TAG_WATER_UNKNOWN: NO_ENERGY_NOTE}
    water = region_water(carbon.region)
    missing = water.missing()
    if missing is not None or water.site is None or water.grid_row is None:
        return {}, {TAG_WATER_UNKNOWN: str(missing)[:MAX_TAG_CHARS]}
    litres = water_l(energy_j / J_PER_KWH, carbon.pue, water.site.l_per_kwh, water.grid_row.l_per_kwh)
    return {M_WATER_L: float(litres)}, {TAG_WATER_SOURCE: water.describe()[:MAX_TAG_CHARS]}


def footprint_fields(
    hardware: str | None, num_devices: int, time_s: float, energy_j: float | None, carbon: CarbonSettings
) -> Fields:
    """Both: the embodied carbon of the job's device-hours and the water of its measured energy."""
    embodied_metrics, embodied_tags = embodied_fields(hardware, num_devices, time_s)
    water_metrics, water_tags = water_fields(energy_j, carbon)
    return {**embodied_metrics, **water_metrics}, {**embodied_tags, **water_tags}
