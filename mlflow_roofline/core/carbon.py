"""Emissions and cost of a measured energy: carbon intensity, PUE and price, and where they came from.

The carbon intensity (grams CO2-equivalent per kWh) comes from, in order: an explicit
option, the env var ``ROOFLINE_CARBON_INTENSITY``, or a region (option, else env
``ROOFLINE_REGION``) looked up in the table shipped as package data
(``mlflow_roofline/data/carbon_intensity.csv``: yearly country averages from Our World in
Data / Ember, whose header names the source, licence and year of every figure). With none
of them the intensity stays unknown: no default region is ever assumed. Only
``resolve_carbon_live`` (train, measure, ``track_energy``) may ask a live provider
(:mod:`mlflow_roofline.core.carbon_live`, ``ROOFLINE_CARBON_PROVIDER``) instead of the table;
everything else, the served model included, makes no network call.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import os
from collections.abc import Mapping
from importlib import resources
from typing import overload

import numpy as np

from mlflow_roofline.core import carbon_live
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import (
    M_CO2E_G,
    M_COST,
    M_ENERGY_KWH,
    TAG_CARBON_INTENSITY,
    TAG_CARBON_SOURCE,
    TAG_CARBON_UNKNOWN,
    TAG_PRICE_PER_KWH,
    TAG_PUE,
)

ENV_CARBON_INTENSITY = "ROOFLINE_CARBON_INTENSITY"
ENV_REGION = "ROOFLINE_REGION"
ENV_PUE = "ROOFLINE_PUE"
ENV_PRICE_PER_KWH = "ROOFLINE_PRICE_PER_KWH"

SOURCE_OPTION = "option"
SOURCE_ENV = "env"
SOURCE_TABLE_PREFIX = "table:"

J_PER_KWH = 3.6e6
"""Joules in one kilowatt-hour."""

TABLE_RESOURCE = "carbon_intensity.csv"


@dataclasses.dataclass(frozen=True)
class CarbonSettings:
    """How to turn joules into emissions and cost.

    Attributes:
        intensity_g_per_kwh: grid carbon intensity, grams CO2e per kWh; None when unknown.
        source: where the intensity came from: ``option``, ``env``, ``table:<region>``,
            ``electricitymaps:<zone>`` or ``watttime:<region>``; a table figure taken because
            the live provider failed says why (``table:DE (electricitymaps: HTTP 401)``).
            None when unknown.
        pue: power usage effectiveness of the facility (>= 1), multiplies the measured energy.
        price_per_kwh: price of one kWh drawn from the grid (any currency); None when unknown.
        live: ``(provider, zone)`` when the intensity came from a live provider, so that
            :func:`over_window` can average it over the run's window.
        note: why a live provider gave nothing, when the intensity stayed unknown.
        region: the region given (its spelling in the carbon-intensity table), whether or not its
            intensity was used: the water table's key (:mod:`~mlflow_roofline.core.water_table`).
    """

    intensity_g_per_kwh: float | None = None
    source: str | None = None
    pue: float = 1.0
    price_per_kwh: float | None = None
    live: tuple[str, str] | None = None
    note: str | None = None
    region: str | None = None

    @property
    def known(self) -> bool:
        """Whether the carbon intensity is known, so that ``co2e_g`` can be computed."""
        return self.intensity_g_per_kwh is not None


@dataclasses.dataclass(frozen=True)
class RegionFigure:
    """One row of the table: a region, the grid (country) it draws from and that grid's figure."""

    region: str
    grid: str
    g_co2e_per_kwh: float
    year: int
    name: str


@functools.lru_cache(maxsize=1)
def region_table() -> dict[str, RegionFigure]:
    """The shipped table, keyed by lower-case region (country code or cloud region name).

    A cloud region's row names its country in ``grid`` and takes that country's figure.
    """
    text = resources.files("mlflow_roofline").joinpath("data").joinpath(TABLE_RESOURCE).read_text(encoding="utf-8")
    rows = list(csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#")))
    countries = {r["region"]: r for r in rows if r["g_co2e_per_kwh"]}
    table: dict[str, RegionFigure] = {}
    for row in rows:
        grid = countries[row["grid"]]
        table[row["region"].lower()] = RegionFigure(
            region=row["region"],
            grid=row["grid"],
            g_co2e_per_kwh=float(grid["g_co2e_per_kwh"]),
            year=int(grid["year"]),
            name=row["name"],
        )
    return table


def lookup_region(region: str) -> RegionFigure:
    """The table's figure for ``region`` (case-insensitive); ConfigError naming ``region`` if absent."""
    figure = region_table().get(region.strip().lower())
    if figure is None:
        raise ConfigError(
            "region",
            f"{region!r} is not in the carbon-intensity table (ISO 3166 country codes such as DE, US "
            "and AWS/GCP/Azure region names such as us-east-1, europe-west4, eastus); give the figure "
            f"instead with --carbon-intensity G (g CO2e/kWh) or {ENV_CARBON_INTENSITY}",
        )
    return figure


MAX_CARBON_INTENSITY = 2000.0
"""Largest grid carbon intensity taken, g CO2e/kWh: lignite, the dirtiest fuel, emits about 1,100-1,200."""

MAX_PUE = 3.0
"""Largest facility PUE taken: the worst data centres surveyed stay near 2.5 (the 2024 average is 1.56)."""

MAX_PRICE_PER_KWH = 1e6
"""Largest price of one kWh taken, in any currency: the weakest currencies price it in the thousands."""

_MAXIMA: dict[str, tuple[float, str]] = {
    "carbon_intensity": (MAX_CARBON_INTENSITY, "g CO2e/kWh; lignite emits about 1,100"),
    "pue": (MAX_PUE, "no data centre reaches it"),
    "price_per_kwh": (MAX_PRICE_PER_KWH, "per kWh in any currency"),
}
"""Per setting, its upper bound and why: a value past it is a unit slip (kg for g, cents for a currency)."""


_ENV_NAMES = {
    "carbon_intensity": ENV_CARBON_INTENSITY,
    "region": ENV_REGION,
    "pue": ENV_PUE,
    "price_per_kwh": ENV_PRICE_PER_KWH,
}
"""Each setting's environment variable."""


def _number(field: str, raw: float | str, minimum: float, source: str | None = SOURCE_OPTION) -> float:
    """``raw`` as a finite float in [``minimum``, the field's maximum]; ConfigError naming ``field`` otherwise
    (and its environment variable, when ``source`` is :data:`SOURCE_ENV`)."""
    maximum, why = _MAXIMA[field]
    where = f" (from {_ENV_NAMES[field]})" if source == SOURCE_ENV else ""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(field, f"expected a number >= {minimum:g}, got {raw!r}{where}") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(field, f"expected a finite number >= {minimum:g}, got {raw!r}{where}")
    if value > maximum:
        raise ConfigError(field, f"expected at most {maximum:g} ({why}; a unit slip?), got {raw!r}{where}")
    return value


def _region(raw: str | None, source: str | None) -> RegionFigure | None:
    """The table's figure for the region given, or None; ConfigError naming ``region`` (and its variable)."""
    if raw is None:
        return None
    try:
        return lookup_region(raw)
    except ConfigError as error:
        if source != SOURCE_ENV:
            raise
        raise ConfigError("region", f"{error.rule} (from {ENV_REGION})") from None


def _given(option: float | str | None, env: Mapping[str, str], name: str) -> tuple[float | str | None, str | None]:
    """The option if set, else the env var if set and not blank, with which of the two it was."""
    if option is not None:
        return option, SOURCE_OPTION
    raw = env.get(name)
    if raw is not None and raw.strip():
        return raw.strip(), SOURCE_ENV
    return None, None


def resolve_carbon(
    carbon_intensity: float | str | None = None,
    region: str | None = None,
    pue: float | str | None = None,
    price_per_kwh: float | str | None = None,
    env: Mapping[str, str] = os.environ,
) -> CarbonSettings:
    """Resolve the emission settings from options, then env vars, then the region table (no network call).

    A region given is looked up even when an intensity is given too (which then wins), so
    that a misspelt region is never silently ignored.

    Raises:
        ConfigError: naming ``carbon_intensity``, ``region``, ``pue`` or ``price_per_kwh``
            for a value that is not a finite number in range (PUE 1 to :data:`MAX_PUE`,
            intensity 0 to :data:`MAX_CARBON_INTENSITY` g/kWh, price 0 to
            :data:`MAX_PRICE_PER_KWH`) or a region absent from the table.
    """
    return _resolve(carbon_intensity, region, pue, price_per_kwh, env, live=False)


def resolve_carbon_live(
    carbon_intensity: float | str | None = None,
    region: str | None = None,
    pue: float | str | None = None,
    price_per_kwh: float | str | None = None,
    env: Mapping[str, str] = os.environ,
) -> CarbonSettings:
    """:func:`resolve_carbon`, but an intensity not given explicitly is asked of the live provider
    ``ROOFLINE_CARBON_PROVIDER`` names (see :func:`live_carbon`), if any: train, measure and
    ``track_energy`` call this; the served model never does.

    Raises:
        ConfigError: as :func:`resolve_carbon`, and ``carbon_provider`` for an unknown provider.
    """
    return _resolve(carbon_intensity, region, pue, price_per_kwh, env, live=True)


def _resolve(
    carbon_intensity: float | str | None,
    region: str | None,
    pue: float | str | None,
    price_per_kwh: float | str | None,
    env: Mapping[str, str],
    *,
    live: bool,
) -> CarbonSettings:
    raw, source = _given(carbon_intensity, env, ENV_CARBON_INTENSITY)
    intensity = None if raw is None else _number("carbon_intensity", raw, 0.0, source)
    where, where_source = _given(region, env, ENV_REGION)
    figure = _region(None if where is None else str(where), where_source)  # refused when unknown, even if unused
    provider = _provider(env) if live else carbon_live.PROVIDER_TABLE
    raw_pue, pue_source = _given(pue, env, ENV_PUE)
    raw_price, price_source = _given(price_per_kwh, env, ENV_PRICE_PER_KWH)
    settings = CarbonSettings(
        pue=1.0 if raw_pue is None else _number("pue", raw_pue, 1.0, pue_source),
        price_per_kwh=None if raw_price is None else _number("price_per_kwh", raw_price, 0.0, price_source),
        region=None if figure is None else figure.region,
    )
    if intensity is not None:
        return dataclasses.replace(settings, intensity_g_per_kwh=intensity, source=source)
    if provider != carbon_live.PROVIDER_TABLE:
        return live_carbon(settings, provider, figure, env)
    if figure is not None:
        return dataclasses.replace(
            settings, intensity_g_per_kwh=figure.g_co2e_per_kwh, source=SOURCE_TABLE_PREFIX + figure.region
        )
    return settings


def _provider(env: Mapping[str, str]) -> str:
    try:
        return carbon_live.provider_name(env)
    except ValueError as exc:
        raise ConfigError("carbon_provider", f"{carbon_live.ENV_PROVIDER}: {exc}") from None


def live_carbon(
    settings: CarbonSettings, provider: str, figure: RegionFigure | None, env: Mapping[str, str] = os.environ
) -> CarbonSettings:
    """``settings`` with the intensity ``provider`` gives now, else the table's figure and why.

    Electricity Maps is asked about the region's grid (``DE`` for ``eu-central-1``), WattTime
    about ``$ROOFLINE_WATTTIME_REGION``. Never raises (but KeyboardInterrupt): an unreachable,
    refusing, slow (past :data:`~mlflow_roofline.core.carbon_live.DEADLINE_S` s, wall clock) or
    oversized answer, a redirect to another host, or any other failure gives the
    table's figure with the reason in ``source`` (``table:DE (electricitymaps: HTTP 401)``),
    or an unknown intensity with the reason in ``note`` when no region was given.
    """
    zone = carbon_live.provider_zone(provider, None if figure is None else figure.grid, env)
    if zone is None:
        where = carbon_live.ENV_WT_REGION if provider == carbon_live.PROVIDER_WATTTIME else "a region (--region)"
        reason = f"{provider}: no zone to ask about; give {where}"
    else:
        try:
            answer = carbon_live.live_intensity(provider, zone, env)
        except carbon_live.ProviderError as exc:
            reason = str(exc)
        except Exception as exc:  # never raises: anything unforeseen falls back the same way
            reason = f"{provider}: the request failed ({type(exc).__name__})"
        else:
            return dataclasses.replace(
                settings, intensity_g_per_kwh=answer.g_per_kwh, source=answer.source, live=(provider, zone)
            )
    if figure is None:
        return dataclasses.replace(settings, note=reason)
    return dataclasses.replace(
        settings,
        intensity_g_per_kwh=figure.g_co2e_per_kwh,
        source=f"{SOURCE_TABLE_PREFIX}{figure.region} ({reason})",
    )


def over_window(settings: CarbonSettings, started_at: float | None, time_s: float) -> CarbonSettings:
    """``settings`` with a live intensity averaged over the run's window where the provider gives history.

    ``started_at`` is the window's start (Unix s), ``time_s`` its length (s). Otherwise (no
    live intensity, no history covering the window, any failure) ``settings`` as they are:
    the intensity at the run's start.
    """
    if settings.live is None or started_at is None:
        return settings
    provider, zone = settings.live
    mean = carbon_live.window_intensity(provider, zone, started_at, started_at + time_s)
    if mean is None:
        return settings
    return dataclasses.replace(settings, intensity_g_per_kwh=mean)


@overload
def emissions(energy_j: float, settings: CarbonSettings) -> dict[str, float]: ...
@overload
def emissions(energy_j: np.ndarray, settings: CarbonSettings) -> dict[str, np.ndarray]: ...
def emissions(energy_j: float | np.ndarray, settings: CarbonSettings) -> dict[str, float] | dict[str, np.ndarray]:
    """Energy in kWh, and emissions and cost where known, of ``energy_j`` joules.

    ``energy_j`` is a number or a numpy array (the result has the same shape).

    Returns:
        ``energy_kwh`` always (measured energy / 3.6e6, without PUE); ``co2e_g``
        (energy_kwh x PUE x intensity, grams CO2e) when the intensity is known; ``cost``
        (energy_kwh x PUE x price) when a price is known.
    """
    energy_kwh = np.asarray(energy_j, dtype=float) / J_PER_KWH
    scalar = np.ndim(energy_j) == 0
    out: dict[str, np.ndarray] = {M_ENERGY_KWH: energy_kwh}
    if settings.intensity_g_per_kwh is not None:
        out[M_CO2E_G] = energy_kwh * settings.pue * settings.intensity_g_per_kwh
    if settings.price_per_kwh is not None:
        out[M_COST] = energy_kwh * settings.pue * settings.price_per_kwh
    if scalar:
        return {k: float(v) for k, v in out.items()}
    return out


CARBON_UNKNOWN_NOTE = (
    f"carbon intensity unknown: give --carbon-intensity G (g CO2e/kWh), --region CODE, "
    f"{ENV_CARBON_INTENSITY} or {ENV_REGION}"
)


def carbon_tags(settings: CarbonSettings) -> dict[str, str]:
    """The run tags that say where ``co2e_g`` and ``cost`` came from, or that emissions are unknown."""
    tags = {TAG_PUE: f"{settings.pue:g}"}
    if settings.intensity_g_per_kwh is None:
        tags[TAG_CARBON_UNKNOWN] = CARBON_UNKNOWN_NOTE + (f" ({settings.note})" if settings.note else "")
    else:
        tags[TAG_CARBON_INTENSITY] = f"{settings.intensity_g_per_kwh:g}"
        tags[TAG_CARBON_SOURCE] = str(settings.source)
    if settings.price_per_kwh is not None:
        tags[TAG_PRICE_PER_KWH] = f"{settings.price_per_kwh:g}"
    return tags


def carbon_request_params(given: Mapping[str, str]) -> dict[str, float | str]:
    """The carbon options given (``carbon_intensity``, ``region``, ``pue``, ``price_per_kwh``) as typed values.

    Each is checked as train, measure and sweep check it (:func:`resolve_carbon`, environment
    ignored): ``carbon_intensity`` (g CO2e/kWh) and ``price_per_kwh`` as finite numbers >= 0,
    ``pue`` >= 1, ``region`` in the shipped table. Numbers come back as floats, the region as
    text: the served model's request params.

    Raises:
        ConfigError: naming the first option out of its rule.
    """
    resolve_carbon(**given, env={})
    return {name: str(value) if name == "region" else float(value) for name, value in given.items()}
