"""Strict JSON for the served model's answers: edge requests, and a parser that takes no NaN or Infinity.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity`` for non-finite floats (the
scoring server's encoder does too) and reads them back; no other JSON parser has to.
:func:`strict_loads` refuses them, and :func:`assert_finite` checks every number of a parsed
body. :data:`EDGE_JOBS` are requests at the ends of what the model accepts.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_EXACT = 2**53
"""The largest integer the model accepts (exact in float64)."""

EDGE_JOBS: dict[str, dict[str, Any]] = {
    "smallest": dict(
        num_layers=1, hidden_size=1, num_heads=1, ffn_size=1, seq_len=1, batch_size=1, num_steps=1,
        strategy="single", num_devices=1,
    ),
    "largest": dict(
        num_layers=MAX_EXACT, hidden_size=MAX_EXACT, num_heads=1, ffn_size=MAX_EXACT, seq_len=MAX_EXACT,
        batch_size=MAX_EXACT, num_steps=MAX_EXACT, strategy="single", num_devices=1,
    ),
    "huge": dict(
        num_layers=10**6, hidden_size=2**20, num_heads=2**10, ffn_size=2**22, seq_len=10**6, batch_size=2**20,
        num_steps=10**9, strategy="ddp", num_devices=1024,
    ),
    "extrapolated": dict(
        num_layers=200, hidden_size=8192, num_heads=64, ffn_size=32768, seq_len=4096, batch_size=512,
        num_steps=10**6, strategy="tp", num_devices=8,
    ),
    "fast_speedup": dict(
        num_layers=4, hidden_size=512, num_heads=8, ffn_size=2048, seq_len=128, batch_size=16, num_steps=20,
        strategy="ddp", num_devices=2, speedup=1e300,
    ),
    "slow_speedup": dict(
        num_layers=4, hidden_size=512, num_heads=8, ffn_size=2048, seq_len=128, batch_size=16, num_steps=20,
        strategy="ddp", num_devices=2, speedup=1e-300,
    ),
}  # fmt: skip
"""Jobs at the edges: every size 1, every size 2**53, a 10**6-layer model on 1024 devices, far outside a
small fit, and measured speedups that make the energy or the time underflow or overflow."""

MOST_CARBON = {"carbon_intensity": 2000.0, "pue": 3.0, "price_per_kwh": 1e6}
"""The largest carbon intensity, PUE and price the model accepts: the biggest factors on the energy."""

MODES: dict[str, dict[str, Any]] = {
    "predict": {},
    **{f"recommend-{o}": {"mode": "recommend", "objective": o} for o in ("energy", "time", "edp", "carbon", "cost")},
    "pareto": {"mode": "pareto"},
}
"""The request params of every mode (recommend: every objective), each with :data:`MOST_CARBON`."""


def _refuse(constant: str) -> float:
    raise ValueError(f"not strict JSON: {constant}")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"a number past float64: {literal}")
    return value


def strict_loads(text: str | bytes) -> Any:
    """``json.loads`` raising ValueError on ``NaN``, ``Infinity``, ``-Infinity`` and a number past float64."""
    return json.loads(text, parse_constant=_refuse, parse_float=_finite_float)


def numbers(value: Any) -> list[float]:
    """Every number (not bool) anywhere in a parsed JSON value."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    items = value.values() if isinstance(value, dict) else value
    return [n for item in items for n in numbers(item)]


def assert_finite(body: Any) -> None:
    """Every number in ``body`` is finite (a parsed strict-JSON body has none that is not, as a float)."""
    bad = [n for n in numbers(body) if not math.isfinite(n)]
    assert not bad, bad
