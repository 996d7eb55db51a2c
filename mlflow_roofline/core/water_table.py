"""Water of electricity: the shipped table ``mlflow_roofline/data/water.csv``, and a region's figures.

Two kinds of row, litres per kWh, each with its source: ``site``, a cloud provider's water use
effectiveness (The Green Grid's WUE: site water per kWh of IT energy), one fleet-wide figure per
provider applied to each of its regions; ``grid``, the water the power plants of a country
consume per kWh generated. A region of the carbon-intensity table
(:func:`~mlflow_roofline.core.carbon.lookup_region`) takes its provider's site figure (the
provider is the prefix of the region's name there: ``aws: Europe (Frankfurt)``) and its
country's grid figure. A country code has no site figure (no average of a country's data
centres is published). A figure the table lacks is missing, never 0. No network call is made.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
from importlib import resources

from mlflow_roofline.core.carbon import lookup_region
from mlflow_roofline.core.errors import ConfigError

TABLE_RESOURCE = "water.csv"
KIND_SITE = "site"
KIND_GRID = "grid"
MAX_L_PER_KWH = 100.0
"""Largest figure taken, L/kWh: hydro-heavy grids reach the tens; more is a unit slip (m3, gallons)."""


@dataclasses.dataclass(frozen=True)
class WaterRow:
    """One row: a provider's site WUE or a country grid's water intensity, L/kWh."""

    kind: str
    key: str
    l_per_kwh: float
    year: str
    source: str
    note: str = ""


@dataclasses.dataclass(frozen=True)
class RegionWater:
    """The water figures of one region: site WUE and grid water intensity, L/kWh (None: missing)."""

    region: str
    provider: str | None
    grid: str
    site: WaterRow | None
    grid_row: WaterRow | None

    def missing(self) -> str | None:
        """Which figure is missing for ``water_l``, or None when both are known."""
        if self.site is None:
            whose = f"provider {self.provider!r}" if self.provider else "a country code (no provider)"
            return (
                f"no site WUE for region {self.region!r} ({whose}) in the water table (data/{TABLE_RESOURCE}: "
                f"{', '.join(sorted(site_rows()))} regions); no water_l"
            )
        if self.grid_row is None:
            where = f"(region {self.region!r}) in data/{TABLE_RESOURCE}"
            return f"no grid water intensity for {self.grid!r} {where}; no water_l"
        return None

    def describe(self) -> str:
        """``table:eu-central-1 (site aws 0.15 L/kWh 2024; grid DE 1.93 L/kWh)``: the run's source tag."""
        site = "" if self.site is None else f"site {self.site.key} {self.site.l_per_kwh:g} L/kWh {self.site.year}"
        grid = "" if self.grid_row is None else f"grid {self.grid} {self.grid_row.l_per_kwh:g} L/kWh"
        return f"table:{self.region} ({'; '.join(p for p in (site, grid) if p)})"


def _row(raw: dict[str, str | None], at: str) -> WaterRow:
    text = {c: (raw.get(c) or "").strip() for c in ("kind", "key", "l_per_kwh", "year", "source", "note")}
    if text["kind"] not in (KIND_SITE, KIND_GRID):
        raise ConfigError(f"{at}.kind", f"must be {KIND_SITE} or {KIND_GRID}, got {text['kind']!r}")
    if not text["key"] or not text["source"]:
        raise ConfigError(f"{at}.source", "key and source must not be empty: every figure names its source")
    try:
        value = float(text["l_per_kwh"])
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_L_PER_KWH):
        raise ConfigError(
            f"{at}.l_per_kwh", f"must be a number in (0, {MAX_L_PER_KWH:g}] L/kWh, got {text['l_per_kwh']!r}"
        )
    return WaterRow(text["kind"], text["key"], value, text["year"], text["source"], text["note"])


@functools.cache
def water_rows() -> tuple[WaterRow, ...]:
    """The shipped rows.

    Raises:
        ConfigError: naming ``package:data/water.csv:<line>.<column>`` for a bad kind, an empty
            source or a figure out of range.
    """
    where = f"package:data/{TABLE_RESOURCE}"
    text = resources.files("mlflow_roofline").joinpath(f"data/{TABLE_RESOURCE}").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return tuple(_row(raw, f"{where}:{i}") for i, raw in enumerate(csv.DictReader(lines), start=2))


def site_rows() -> dict[str, WaterRow]:
    """Site WUE rows keyed by provider (``aws``, ``azure``)."""
    return {row.key: row for row in water_rows() if row.kind == KIND_SITE}


def grid_rows() -> dict[str, WaterRow]:
    """Grid water-intensity rows keyed by ISO country code (``DE``)."""
    return {row.key: row for row in water_rows() if row.kind == KIND_GRID}


def region_water(region: str) -> RegionWater:
    """The site and grid figures of ``region`` (a region of the carbon-intensity table).

    Raises:
        ConfigError: naming ``region`` when the carbon-intensity table does not know it.
    """
    figure = lookup_region(region)
    provider = figure.name.split(":", 1)[0].strip() if ":" in figure.name else None
    site = None if provider is None else site_rows().get(provider)
    return RegionWater(figure.region, provider, figure.grid, site, grid_rows().get(figure.grid))
