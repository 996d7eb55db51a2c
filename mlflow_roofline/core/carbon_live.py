"""Live grid carbon intensity from Electricity Maps or WattTime, for the runs that opt in.

``ROOFLINE_CARBON_PROVIDER`` picks the provider: ``table`` (the default: the shipped yearly
table, no network call), ``electricitymaps`` or ``watttime``. Only the measuring paths
(train, measure, ``track_energy``) ask; the served model never does (it takes an intensity).

- **Electricity Maps v3**: ``GET {base}/v3/carbon-intensity/latest?zone=Z`` with the header
  ``auth-token: $ELECTRICITYMAPS_API_TOKEN``; the answer's ``carbonIntensity`` is g CO2e/kWh
  (life-cycle, consumption-based) for the hour ``datetime``. ``/v3/carbon-intensity/history?zone=Z``
  gives the last 24 hours, one point per hour, which :func:`window_intensity` averages over a
  run's window. Base URL: ``$ROOFLINE_ELECTRICITYMAPS_URL`` (tests, proxies), else the public API.
- **WattTime v3**: ``GET {base}/login`` with HTTP basic auth (``$WATTTIME_USERNAME`` /
  ``$WATTTIME_PASSWORD``) returns ``{"token": ...}``; ``GET {base}/v3/forecast?region=R&signal_type=co2_moer``
  with ``Authorization: Bearer <token>`` returns ``{"data": [{"point_time", "value"}], "meta": {"units":
  "lbs_co2_per_mwh"}}``: the marginal operating emissions rate, converted here to g/kWh
  (1 lb/MWh = 0.453592 g/kWh). The region (a balancing authority such as ``CAISO_NORTH``) is
  ``$ROOFLINE_WATTTIME_REGION``. A plan without ``co2_moer`` (HTTP 403) offers only
  ``/v3/signal-index``, a 0-100 percentile that is not an intensity: then the table is used and
  the tag says why. Base URL: ``$ROOFLINE_WATTTIME_URL``, else the public API.

Every call shares one deadline of :data:`DEADLINE_S` seconds; a failure raises
:class:`ProviderError` whose text (``electricitymaps: HTTP 401``) goes into the run's
``roofline.carbon_source`` tag beside the table's figure. Answers are cached per provider and
zone for :data:`CACHE_TTL_S` seconds in this process.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

ENV_PROVIDER = "ROOFLINE_CARBON_PROVIDER"
PROVIDER_TABLE = "table"
PROVIDER_ELECTRICITYMAPS = "electricitymaps"
PROVIDER_WATTTIME = "watttime"
PROVIDERS: tuple[str, ...] = (PROVIDER_TABLE, PROVIDER_ELECTRICITYMAPS, PROVIDER_WATTTIME)

ENV_EM_TOKEN = "ELECTRICITYMAPS_API_TOKEN"
ENV_EM_URL = "ROOFLINE_ELECTRICITYMAPS_URL"
EM_DEFAULT_URL = "https://api.electricitymap.org"
ENV_WT_USERNAME = "WATTTIME_USERNAME"
ENV_WT_PASSWORD = "WATTTIME_PASSWORD"
ENV_WT_URL = "ROOFLINE_WATTTIME_URL"
ENV_WT_REGION = "ROOFLINE_WATTTIME_REGION"
WT_DEFAULT_URL = "https://api.watttime.org"

DEADLINE_S = 4.0
"""Seconds all of one answer's requests may take together (the run falls back within 5 s)."""
CACHE_TTL_S = 300.0
"""Seconds an answer is reused for the same provider and zone."""
G_PER_KWH_PER_LB_PER_MWH = 0.45359237
"""One pound per MWh in grams per kWh (453.59237 g / 1000 kWh)."""
MAX_PLAUSIBLE_G_PER_KWH = 2000.0
"""An answer above this (g CO2e/kWh) is refused as a unit slip, as the table's bound is."""
HOUR_S = 3600.0


class ProviderError(Exception):
    """A provider gave no usable intensity; ``str()`` is the reason for the tag."""


@dataclasses.dataclass(frozen=True)
class LiveIntensity:
    """An intensity a provider gave: g CO2e/kWh, the tag value (``electricitymaps:DE``), when asked (Unix s)."""

    g_per_kwh: float
    source: str
    asked_at: float


_cache: dict[tuple[str, str], LiveIntensity] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget every cached answer (tests; a long-lived process that wants a fresh one)."""
    with _cache_lock:
        _cache.clear()


def provider_name(env: Mapping[str, str] = os.environ) -> str:
    """``$ROOFLINE_CARBON_PROVIDER`` lower-cased (``table`` when unset or blank); ValueError when unknown."""
    name = (env.get(ENV_PROVIDER) or "").strip().lower() or PROVIDER_TABLE
    if name not in PROVIDERS:
        raise ValueError(f"expected one of {', '.join(PROVIDERS)}, got {name!r}")
    return name


def provider_zone(provider: str, region: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """The zone to ask ``provider`` about: Electricity Maps takes the table region's grid (``DE``),
    WattTime ``$ROOFLINE_WATTTIME_REGION``; None when there is none."""
    if provider == PROVIDER_WATTTIME:
        return (env.get(ENV_WT_REGION) or "").strip() or None
    return region


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, provider: str) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise ProviderError(f"{provider}: no answer within {DEADLINE_S:g} s")
        return remaining


def _get_json(provider: str, url: str, headers: Mapping[str, str], deadline: _Deadline) -> Any:
    request = urllib.request.Request(url, headers=dict(headers, Accept="application/json"))
    try:
        with urllib.request.urlopen(request, timeout=deadline.left(provider)) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise ProviderError(f"{provider}: HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise ProviderError(f"{provider}: no answer within {DEADLINE_S:g} s") from None
        raise ProviderError(f"{provider}: unreachable ({reason})") from None
    except TimeoutError:
        raise ProviderError(f"{provider}: no answer within {DEADLINE_S:g} s") from None
    except OSError as exc:
        raise ProviderError(f"{provider}: unreachable ({exc})") from None
    try:
        return json.loads(body)
    except ValueError:
        raise ProviderError(f"{provider}: the answer is not JSON") from None


def _plausible(provider: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProviderError(f"{provider}: no intensity in the answer (got {value!r})")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= MAX_PLAUSIBLE_G_PER_KWH:
        raise ProviderError(f"{provider}: implausible intensity {number:g} g/kWh")
    return number


def _unix(iso: object) -> float | None:
    """Unix seconds of an ISO 8601 time (``2024-05-01T10:00:00.000Z``), None when unreadable."""
    if not isinstance(iso, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()


# -- Electricity Maps -------------------------------------------------------------------------
def _em_request(path: str, zone: str, env: Mapping[str, str], deadline: _Deadline) -> Any:
    token = (env.get(ENV_EM_TOKEN) or "").strip()
    if not token:
        raise ProviderError(f"{PROVIDER_ELECTRICITYMAPS}: {ENV_EM_TOKEN} is not set")
    base = (env.get(ENV_EM_URL) or EM_DEFAULT_URL).rstrip("/")
    url = f"{base}{path}?{urllib.parse.urlencode({'zone': zone})}"
    return _get_json(PROVIDER_ELECTRICITYMAPS, url, {"auth-token": token}, deadline)


def _electricitymaps_latest(zone: str, env: Mapping[str, str], deadline: _Deadline) -> float:
    answer = _em_request("/v3/carbon-intensity/latest", zone, env, deadline)
    if not isinstance(answer, dict):
        raise ProviderError(f"{PROVIDER_ELECTRICITYMAPS}: unexpected answer")
    return _plausible(PROVIDER_ELECTRICITYMAPS, answer.get("carbonIntensity"))


def _electricitymaps_history(zone: str, env: Mapping[str, str], deadline: _Deadline) -> list[tuple[float, float]]:
    answer = _em_request("/v3/carbon-intensity/history", zone, env, deadline)
    points = answer.get("history") if isinstance(answer, dict) else None
    if not isinstance(points, list):
        raise ProviderError(f"{PROVIDER_ELECTRICITYMAPS}: unexpected history answer")
    out = []
    for point in points:
        if not isinstance(point, dict) or point.get("carbonIntensity") is None:
            continue  # an hour without data
        start = _unix(point.get("datetime"))
        if start is not None:
            out.append((start, _plausible(PROVIDER_ELECTRICITYMAPS, point["carbonIntensity"])))
    return out


# -- WattTime ---------------------------------------------------------------------------------
def _watttime_latest(region: str, env: Mapping[str, str], deadline: _Deadline) -> float:
    user, password = env.get(ENV_WT_USERNAME) or "", env.get(ENV_WT_PASSWORD) or ""
    if not user or not password:
        raise ProviderError(f"{PROVIDER_WATTTIME}: {ENV_WT_USERNAME} and {ENV_WT_PASSWORD} are not both set")
    base = (env.get(ENV_WT_URL) or WT_DEFAULT_URL).rstrip("/")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    login = _get_json(PROVIDER_WATTTIME, f"{base}/login", {"Authorization": f"Basic {basic}"}, deadline)
    token = login.get("token") if isinstance(login, dict) else None
    if not isinstance(token, str) or not token:
        raise ProviderError(f"{PROVIDER_WATTTIME}: the login answer has no token")
    query = urllib.parse.urlencode({"region": region, "signal_type": "co2_moer", "horizon_hours": 0})
    answer = _get_json(PROVIDER_WATTTIME, f"{base}/v3/forecast?{query}", {"Authorization": f"Bearer {token}"}, deadline)
    data = answer.get("data") if isinstance(answer, dict) else None
    meta = answer.get("meta", {}) if isinstance(answer, dict) else {}
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise ProviderError(f"{PROVIDER_WATTTIME}: no forecast point for {region}")
    units = meta.get("units") if isinstance(meta, dict) else None
    if units != "lbs_co2_per_mwh":
        raise ProviderError(f"{PROVIDER_WATTTIME}: unexpected units {units!r} (expected lbs_co2_per_mwh)")
    value = data[0].get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProviderError(f"{PROVIDER_WATTTIME}: no value in the forecast point")
    return _plausible(PROVIDER_WATTTIME, float(value) * G_PER_KWH_PER_LB_PER_MWH)


# -- the two questions ------------------------------------------------------------------------
def live_intensity(provider: str, zone: str, env: Mapping[str, str] = os.environ) -> LiveIntensity:
    """The provider's intensity for ``zone`` now (cached for :data:`CACHE_TTL_S` s).

    Raises:
        ProviderError: unreachable, refusing, slow past :data:`DEADLINE_S` or a bad answer;
            its text is the reason (``electricitymaps: HTTP 401``).
    """
    key = (provider, zone)
    now = time.time()
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and now - hit.asked_at < CACHE_TTL_S:
        return hit
    deadline = _Deadline(DEADLINE_S)
    if provider == PROVIDER_ELECTRICITYMAPS:
        value = _electricitymaps_latest(zone, env, deadline)
    elif provider == PROVIDER_WATTTIME:
        value = _watttime_latest(zone, env, deadline)
    else:
        raise ProviderError(f"{provider}: not a live provider")
    answer = LiveIntensity(value, f"{provider}:{zone}", now)
    with _cache_lock:
        _cache[key] = answer
    return answer


def hourly_mean(points: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """The time-weighted mean of hourly ``(hour start, g/kWh)`` points over ``[start, end]`` (Unix s).

    Each point covers the hour from its time; None when no point covers any of the window.
    A window shorter than a second is widened to one second.
    """
    end = max(end, start + 1.0)
    weighted = covered = 0.0
    for hour, value in points:
        overlap = min(end, hour + HOUR_S) - max(start, hour)
        if overlap > 0:
            weighted += overlap * value
            covered += overlap
    return weighted / covered if covered > 0 else None


def window_intensity(
    provider: str, zone: str, start: float, end: float, env: Mapping[str, str] = os.environ
) -> float | None:
    """The provider's mean intensity over ``[start, end]`` (Unix s) where it gives history, else None.

    Electricity Maps gives the last 24 hours by the hour; WattTime's history is for paying plans
    only and is not asked. Any failure gives None (the run keeps the figure it started with).
    """
    if provider != PROVIDER_ELECTRICITYMAPS:
        return None
    try:
        points = _electricitymaps_history(zone, env, _Deadline(DEADLINE_S))
    except ProviderError:
        return None
    return hourly_mean(points, start, end)
