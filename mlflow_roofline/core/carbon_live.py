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

Every call has one wall-clock deadline of :data:`DEADLINE_S` seconds that covers all its
requests whole (name lookup, connect, headers, and the body however slowly it drips): the
requests run in a helper thread and the caller stops waiting at the deadline. A body longer
than :data:`MAX_BODY_BYTES` is refused unread. A redirect is followed (at most
:data:`MAX_REDIRECTS`) only to the same scheme, host and port, with the credential; one to
another host or scheme is refused, so a credential never leaves the host it is meant for.
Any failure (HTTP error, timeout, a body cut short or too long, bad JSON, a refused redirect)
raises :class:`ProviderError` whose text (``electricitymaps: HTTP 401``) goes into the run's
``roofline.carbon_source`` tag beside the table's figure. Answers are cached per provider and
zone for :data:`CACHE_TTL_S` seconds in this process. The ``http_proxy`` / ``https_proxy`` /
``no_proxy`` variables are honoured as urllib honours them.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import http.client
import json
import math
import os
import socket
import threading
import time
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
"""Seconds all of one answer's requests may take together, wall clock (the run falls back within 5 s)."""
MAX_BODY_BYTES = 256 * 1024
"""Bytes an answer's body may hold (a day of Electricity Maps history is ~10 kB); a longer one is refused."""
MAX_REDIRECTS = 3
"""Redirects followed per request, each to the same scheme, host and port only."""
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_CHUNK_BYTES = 64 * 1024
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
    """One wall-clock deadline (monotonic clock) for all the requests of one answer."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, provider: str) -> float:
        """Seconds left; ProviderError once none are."""
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise ProviderError(self.missed(provider))
        return remaining

    def missed(self, provider: str) -> str:
        return f"{provider}: no answer within {self.seconds:g} s"


@dataclasses.dataclass(frozen=True)
class _Target:
    """Where one request goes: scheme, host, port and the path with its query."""

    scheme: str
    host: str
    port: int
    path: str

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


def _target(provider: str, url: str) -> _Target:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    if scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise ProviderError(f"{provider}: not an http(s) URL: {url[:200]!r}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80), path)


def _proxy(target: _Target) -> tuple[str, int] | None:
    """The proxy ``http_proxy`` / ``https_proxy`` name for ``target`` (none where ``no_proxy`` says so)."""
    proxy = urllib.request.getproxies().get(target.scheme)
    if not proxy or urllib.request.proxy_bypass(target.host):
        return None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    try:
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, port or 80) if parts.hostname else None


class _Exchange:
    """The requests of one answer, run in a helper thread; the caller aborts them at the deadline."""

    def __init__(self, provider: str, deadline: _Deadline) -> None:
        self.provider = provider
        self.deadline = deadline
        self._lock = threading.Lock()
        self._aborted = False
        self._connection: http.client.HTTPConnection | None = None

    def abort(self) -> None:
        """Stop the request in flight: a blocked read returns at once."""
        with self._lock:
            self._aborted = True
            sock = None if self._connection is None else self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _open(self, target: _Target) -> tuple[http.client.HTTPConnection, str]:
        timeout = self.deadline.left(self.provider)
        proxy = _proxy(target)
        connection: http.client.HTTPConnection
        if target.scheme == "https":
            connection = http.client.HTTPSConnection(*(proxy or (target.host, target.port)), timeout=timeout)
            if proxy is not None:
                connection.set_tunnel(target.host, target.port)
            path = target.path
        else:
            connection = http.client.HTTPConnection(*(proxy or (target.host, target.port)), timeout=timeout)
            path = target.url if proxy is not None else target.path
        with self._lock:
            if self._aborted:
                raise ProviderError(self.deadline.missed(self.provider))
            self._connection = connection
        return connection, path

    def _pace(self, connection: http.client.HTTPConnection) -> None:
        """Bound the next socket operation by the time left (the caller's wait bounds the whole)."""
        left = self.deadline.left(self.provider)
        if self._aborted:
            raise ProviderError(self.deadline.missed(self.provider))
        if connection.sock is not None:
            connection.sock.settimeout(left)

    def get(self, url: str, headers: Mapping[str, str]) -> bytes:
        """The body of a 2xx answer to ``GET url``, following same-origin redirects only."""
        target = _target(self.provider, url)
        origin = target.origin
        for _ in range(MAX_REDIRECTS + 1):
            connection, path = self._open(target)
            try:
                connection.request("GET", path, headers=dict(headers))
                self._pace(connection)
                response = connection.getresponse()
                if response.status in REDIRECT_CODES and response.getheader("Location"):
                    after = _target(self.provider, urllib.parse.urljoin(target.url, response.getheader("Location", "")))
                    if after.origin != origin:
                        raise ProviderError(
                            f"{self.provider}: refused a redirect from {origin} to {after.origin[:120]} "
                            "(the credential is sent to its own host only)"
                        )
                    target = after
                    continue
                if not 200 <= response.status < 300:
                    raise ProviderError(f"{self.provider}: HTTP {response.status}")
                return self._body(connection, response)
            finally:
                connection.close()
        raise ProviderError(f"{self.provider}: more than {MAX_REDIRECTS} redirects")

    def _body(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> bytes:
        cap = f"the {MAX_BODY_BYTES // 1024} KiB cap (MAX_BODY_BYTES)"
        expected = response.length
        if expected is not None and expected > MAX_BODY_BYTES:
            raise ProviderError(f"{self.provider}: refused an answer of {expected} bytes, over {cap}")
        chunks: list[bytes] = []
        size = 0
        while True:
            self._pace(connection)
            chunk = response.read1(_CHUNK_BYTES)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ProviderError(f"{self.provider}: refused an answer over {cap}")
            chunks.append(chunk)
        if expected is not None and size < expected:
            raise ProviderError(f"{self.provider}: the answer was cut short ({size} of {expected} bytes)")
        return b"".join(chunks)


def _reason(provider: str, exc: BaseException, deadline: _Deadline) -> str:
    """The tag's reason for a request that failed with ``exc`` (never a header value: no credential)."""
    if isinstance(exc, ProviderError):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return deadline.missed(provider)
    if isinstance(exc, http.client.IncompleteRead):
        return f"{provider}: the answer was cut short ({len(exc.partial)} bytes read)"
    if isinstance(exc, http.client.HTTPException):
        return f"{provider}: not a valid HTTP answer ({type(exc).__name__})"
    if isinstance(exc, OSError):
        return f"{provider}: unreachable ({exc.strerror or exc})"
    return f"{provider}: the request failed ({type(exc).__name__})"


def _fetch(provider: str, url: str, headers: Mapping[str, str], deadline: _Deadline) -> bytes:
    """The body of ``GET url`` within ``deadline``, whole; ProviderError for any failure."""
    wait_s = deadline.left(provider)
    exchange = _Exchange(provider, deadline)
    outcome: list[bytes | BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append(exchange.get(url, headers))
        except BaseException as exc:  # handed to the caller's thread, never printed by this one
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name=f"roofline-{provider}", daemon=True).start()
    try:
        finished = done.wait(wait_s)
    finally:
        if not done.is_set():
            exchange.abort()  # the thread ends at its next socket operation
    if not finished:
        raise ProviderError(deadline.missed(provider))
    result = outcome[0]
    if isinstance(result, BaseException):
        raise ProviderError(_reason(provider, result, deadline)) from None
    return result


def _get_json(provider: str, url: str, headers: Mapping[str, str], deadline: _Deadline) -> Any:
    body = _fetch(provider, url, dict(headers, Accept="application/json"), deadline)
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise ProviderError(f"{provider}: the answer is not JSON") from None


def _plausible(provider: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProviderError(f"{provider}: no intensity in the answer (got {value!r:.80})")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        number = math.inf
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
    try:
        return parsed.timestamp()
    except (OverflowError, ValueError):
        return None


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
        raise ProviderError(f"{PROVIDER_WATTTIME}: unexpected units {units!r:.40} (expected lbs_co2_per_mwh)")
    value = data[0].get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProviderError(f"{PROVIDER_WATTTIME}: no value in the forecast point")
    try:
        grams = float(value) * G_PER_KWH_PER_LB_PER_MWH
    except OverflowError:  # an integer past a float's range
        grams = math.inf
    return _plausible(PROVIDER_WATTTIME, grams)


# -- the two questions ------------------------------------------------------------------------
def live_intensity(
    provider: str, zone: str, env: Mapping[str, str] = os.environ, *, deadline_s: float | None = None
) -> LiveIntensity:
    """The provider's intensity for ``zone`` now (cached for :data:`CACHE_TTL_S` s).

    ``deadline_s`` bounds the whole question, wall clock (default :data:`DEADLINE_S`).

    Raises:
        ProviderError: unreachable, refusing, slow past the deadline, a refused redirect or a
            bad answer; its text is the reason (``electricitymaps: HTTP 401``).
    """
    key = (provider, zone)
    now = time.time()
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and now - hit.asked_at < CACHE_TTL_S:
        return hit
    deadline = _Deadline(DEADLINE_S if deadline_s is None else deadline_s)
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
    provider: str,
    zone: str,
    start: float,
    end: float,
    env: Mapping[str, str] = os.environ,
    *,
    deadline_s: float | None = None,
) -> float | None:
    """The provider's mean intensity over ``[start, end]`` (Unix s) where it gives history, else None.

    Electricity Maps gives the last 24 hours by the hour; WattTime's history is for paying plans
    only and is not asked. Never raises: any failure, or no answer within ``deadline_s``
    (default :data:`DEADLINE_S`), gives None (the run keeps the figure it started with).
    """
    if provider != PROVIDER_ELECTRICITYMAPS:
        return None
    try:
        points = _electricitymaps_history(zone, env, _Deadline(DEADLINE_S if deadline_s is None else deadline_s))
        return hourly_mean(points, start, end)
    except Exception:  # ProviderError, or anything unforeseen: the run keeps its intensity
        return None
