"""The ``grid`` of a sweep spec: its keys, their defaults, and the check of every value.

A grid maps train fields to lists of values (their cartesian product); a spec holds one
grid or a list of them. ``ffn_ratio`` may stand for ``ffn_size`` and ``head_size`` for
``num_heads``; top-level grid keys apply to every grid that does not set them. Every error
is a :class:`~mlflow_roofline.core.errors.ConfigError` naming the key (``grid[1].strategy``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mlflow_roofline.core.config import int_field_problem
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import PRECISIONS, STRATEGIES

INT_GRID_KEYS: tuple[str, ...] = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "head_size",
    "ffn_size",
    "seq_len",
    "batch_size",
    "num_steps",
    "warmup_steps",
    "num_devices",
)
"""Grid keys whose values are integers (``warmup_steps`` may be 0, the others are positive)."""

GRID_KEYS: tuple[str, ...] = INT_GRID_KEYS + ("ffn_ratio", "strategy", "precision")
"""Every key a grid may hold (``device`` is one per sweep, so it is top-level only)."""

REQUIRED_GRID_KEYS: tuple[tuple[str, ...], ...] = (
    ("num_layers",),
    ("hidden_size",),
    ("num_heads", "head_size"),
    ("ffn_size", "ffn_ratio"),
    ("seq_len",),
    ("batch_size",),
)
"""Each grid must give one key of every group (directly or through the top level)."""

GRID_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "num_steps": (20,),
    "warmup_steps": (3,),
    "strategy": ("single",),
    "num_devices": (1,),
    "precision": ("fp32",),
}


def positive_number(value: Any) -> bool:
    """A real number (not a bool), finite and above zero."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def raw_grids(raw_grid: Any) -> tuple[list[str], list[Any]]:
    """The spec's ``grid``: one mapping or a non-empty list of them, with the label of each."""
    if raw_grid is None:
        raise ConfigError("grid", "is required: a mapping of train fields to value lists, or a list of them")
    if isinstance(raw_grid, Mapping):
        return ["grid"], [raw_grid]
    if not isinstance(raw_grid, list):
        raise ConfigError("grid", f"must be a mapping or a list of mappings, got {type(raw_grid).__name__}")
    if not raw_grid:
        raise ConfigError("grid", "is empty; give at least one mapping of train fields to values")
    return [f"grid[{i}]" for i in range(len(raw_grid))], list(raw_grid)


def check_grid(label: str, raw: Any, top: Mapping[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """One grid checked, with the top-level values it does not shadow and the defaults filled in."""
    if not isinstance(raw, Mapping):
        raise ConfigError(label, f"must be a mapping of train fields to value lists, got {type(raw).__name__}")
    if not raw:
        raise ConfigError(label, "is empty; give train fields and their values")
    for key in raw:
        if key not in GRID_KEYS:
            hint = " (device is set once, at the top level)" if key == "device" else ""
            raise ConfigError(f"{label}.{key}", f"unknown grid key{hint}; allowed: {', '.join(GRID_KEYS)}")
    own = {key: grid_values(f"{label}.{key}", value) for key, value in raw.items()}
    for group in (g for g in REQUIRED_GRID_KEYS if len(g) == 2):  # (num_heads, head_size), (ffn_size, ffn_ratio)
        if all(k in own for k in group):
            raise ConfigError(f"{label}.{group[1]}", f"give either {group[0]} or {group[1]}, not both")
        if all(k in top for k in group) and not any(k in own for k in group):
            raise ConfigError(group[1], f"give either {group[0]} or {group[1]} at the top level, not both")
    # A grid's own key wins over a top-level value of it or of its alternative.
    shadowed = {alt for group in REQUIRED_GRID_KEYS for k in group if k in own for alt in group if alt != k}
    grid = {**GRID_DEFAULTS, **{k: v for k, v in top.items() if k not in shadowed}, **own}
    for required in REQUIRED_GRID_KEYS:
        if not any(k in grid for k in required):
            alternative = f" (or {required[1]})" if len(required) > 1 else ""
            raise ConfigError(f"{label}.{required[0]}", f"is required{alternative}, in the grid or at the top level")
    strategies = grid["strategy"]
    multi = [s for s in strategies if s != "single"]
    if multi and not any(n >= 2 for n in grid["num_devices"]):
        raise ConfigError(
            f"{label}.num_devices",
            f"strategies {', '.join(multi)} need a value >= 2 (single always runs on 1 device)",
        )
    return grid


def grid_values(key: str, raw: Any) -> tuple[Any, ...]:
    """One grid entry as a tuple of checked values; a scalar counts as a one-element list."""
    field = key.rsplit(".", 1)[-1]
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise ConfigError(key, "must list at least one value")
    checked = tuple(_value(f"{key}[{i}]" if isinstance(raw, list) else key, field, v) for i, v in enumerate(items))
    return tuple(dict.fromkeys(checked))  # drop repeats, keep order


def _value(key: str, field: str, value: Any) -> Any:
    if field in INT_GRID_KEYS:
        problem = int_field_problem(field, value)  # head_size follows the rule of the other counts
        if problem is not None:
            raise ConfigError(key, problem)
        return value
    if field == "ffn_ratio":
        if not positive_number(value):
            raise ConfigError(
                key, f"must be a finite positive number (ffn_size = ffn_ratio * hidden_size), got {value!r}"
            )
        return value
    if field == "strategy":
        return choice(key, value, STRATEGIES, what="strategy")
    if field == "precision":
        return choice(key, value, PRECISIONS, what="precision")
    raise ConfigError(key, f"unknown grid key; allowed: {', '.join(GRID_KEYS)}")  # pragma: no cover


def choice(key: str, value: Any, allowed: tuple[str, ...], what: str = "value") -> str:
    """``value`` when it is one of ``allowed``; else a ConfigError naming ``key``."""
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(key, f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return value
