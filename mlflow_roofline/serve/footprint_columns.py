"""Embodied carbon and water columns of a prediction, beside ``co2e_g``.

Answered when the request asks about carbon (a carbon intensity or a region is known):

- ``embodied_co2e_g`` (grams CO2e): the job's device-hours (``num_devices x time_s / 3600``,
  the predicted time) times the per-hour share of its GPU's manufacturing emissions, for a row
  whose ``hardware`` (or the law's own hardware, for a law of one GPU) is in the embodied table
  (:mod:`~mlflow_roofline.core.embodied_table`); ``embodied_unknown`` names the missing figure
  of any other row (empty where known);
- with a region, ``water_l`` (litres): the predicted ``energy_kwh x (site WUE + pue x grid water
  intensity)`` (:mod:`~mlflow_roofline.core.water_table`); ``water_unknown`` names the missing
  figure when the region lacks one (empty where known).

A missing figure is never a stand-in 0, nor NaN (the scoring server's JSON must stay strict):
a figure column no row has is absent, and where only some rows have it, the others hold None
(JSON ``null``). Without a carbon question the answer is as before, joules only. Formulas:
:mod:`mlflow_roofline.core.footprint`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.core.embodied_table import lookup_embodied, missing_embodied
from mlflow_roofline.core.footprint import embodied_co2e_g, water_l
from mlflow_roofline.core.schema import M_EMBODIED_CO2E_G, M_ENERGY_KWH, M_TIME_S, M_WATER_L
from mlflow_roofline.core.water_table import region_water

EMBODIED_UNKNOWN_COLUMN = "embodied_unknown"
WATER_UNKNOWN_COLUMN = "water_unknown"
FOOTPRINT_COLUMNS: tuple[str, ...] = (M_EMBODIED_CO2E_G, EMBODIED_UNKNOWN_COLUMN, M_WATER_L, WATER_UNKNOWN_COLUMN)
TEXT_COLUMNS: tuple[str, ...] = (EMBODIED_UNKNOWN_COLUMN, WATER_UNKNOWN_COLUMN)


def asks_footprint(carbon: CarbonSettings | None) -> bool:
    """Whether a request asks about carbon: an intensity or a region is known (a price alone does not)."""
    return carbon is not None and (carbon.known or carbon.region is not None)


def with_gaps(name: str, values: np.ndarray) -> dict[str, np.ndarray]:
    """``{name: values}`` with NaN as None (an object column), or nothing when every value is NaN."""
    missing = np.isnan(values)
    if missing.all():
        return {}
    if not missing.any():
        return {name: values}
    gaps = values.astype(object)
    gaps[missing] = None
    return {name: gaps}


def embodied_columns(hardware: np.ndarray, num_devices: np.ndarray, time_s: np.ndarray) -> dict[str, np.ndarray]:
    """``embodied_co2e_g`` of each row's device-hours on its ``hardware`` (:func:`with_gaps`), and
    ``embodied_unknown``: the missing figure, or empty."""
    grams = np.full(len(hardware), np.nan)
    unknown = np.full(len(hardware), "", dtype=object)
    for name in dict.fromkeys(hardware):
        rows = np.flatnonzero(hardware == name)
        figure = lookup_embodied(str(name))
        if figure is None:
            unknown[rows] = missing_embodied(str(name))
            continue
        n, seconds = np.asarray(num_devices, dtype=float)[rows], np.asarray(time_s, dtype=float)[rows]
        grams[rows] = embodied_co2e_g(n, seconds, figure.manufacturing_kg_co2e, figure.life_hours)
    with np.errstate(invalid="ignore"):
        past = np.isinf(grams)
    unknown[past] = "embodied_co2e_g lies beyond float64's range (a time far outside the fitted ranges)"
    grams[past] = np.nan
    return {**with_gaps(M_EMBODIED_CO2E_G, grams), EMBODIED_UNKNOWN_COLUMN: unknown}


def water_columns(energy_kwh: np.ndarray, carbon: CarbonSettings, region: str) -> dict[str, np.ndarray]:
    """``water_l`` of each row's energy in ``region`` under ``carbon``'s PUE and ``water_unknown`` (empty);
    without a figure, ``water_unknown`` alone, naming the missing one."""
    water = region_water(region)
    missing = water.missing()
    if missing is not None or water.site is None or water.grid_row is None:
        return {WATER_UNKNOWN_COLUMN: np.full(len(energy_kwh), str(missing), dtype=object)}
    litres = water_l(np.asarray(energy_kwh, dtype=float), carbon.pue, water.site.l_per_kwh, water.grid_row.l_per_kwh)
    return {M_WATER_L: litres, WATER_UNKNOWN_COLUMN: np.full(len(energy_kwh), "", dtype=object)}


def footprint_columns(
    out: Mapping[str, np.ndarray], hardware: np.ndarray, num_devices: np.ndarray, carbon: CarbonSettings | None
) -> dict[str, np.ndarray]:
    """The footprint columns of predicted rows ``out`` (``time_s``, ``energy_kwh``) that ``carbon`` asks for.

    ``hardware`` names each row's GPU (a text array), ``num_devices`` its device count.
    """
    if carbon is None or not asks_footprint(carbon):
        return {}
    columns = embodied_columns(hardware, num_devices, out[M_TIME_S])
    if carbon.region is not None:
        columns.update(water_columns(out[M_ENERGY_KWH], carbon, carbon.region))
    return columns
