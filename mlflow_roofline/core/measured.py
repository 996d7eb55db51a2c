"""What the law needs of one measured run, whoever launched it.

The launcher's rules (:meth:`TrainConfig.validate`: heads divisible by the device count
under tp, batch divisible under ddp/fsdp, ...) say what *this project's* train job can
run. A measurement made by another implementation (a TP that splits only the MLP, uneven
heads, a Trainer job) is still a valid data point for the law when it satisfies the
law's own needs, checked here: positive integer sizes, a known strategy, at least one
device, ``single`` on exactly one device, and a finite, positive energy (joules) and
time (seconds) below :data:`MAX_PLAUSIBLE_J` / :data:`MAX_PLAUSIBLE_S`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mlflow_roofline.core.config import INT64_MAX
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S, STRATEGIES

SIZE_FIELDS: tuple[str, ...] = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "ffn_size",
    "seq_len",
    "batch_size",
    "num_steps",
)
"""Integer fields the law's features are built from: each a positive integer."""

MAX_PLAUSIBLE_J = 1e15
"""Largest energy taken as a measurement: about 280 GWh, beyond any fine-tuning job."""

MAX_PLAUSIBLE_S = 3.2e8
"""Largest duration taken as a measurement: about ten years, in seconds."""


def measured_problem(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first (field, rule) the law cannot accept in ``values``, or None.

    ``values`` holds the train params (integers already parsed where they are integers)
    and the metrics ``energy_j`` (joules) and ``time_s`` (seconds).
    """
    for name in SIZE_FIELDS:
        problem = _positive_int(name, values.get(name))
        if problem:
            return name, problem
    warmup = values.get("warmup_steps", 0)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup <= INT64_MAX:
        return "warmup_steps", f"must be a non-negative integer, got {warmup!r}"
    strategy = values.get("strategy")
    if strategy not in STRATEGIES:
        return "strategy", f"must be one of {', '.join(STRATEGIES)}, got {strategy!r}"
    devices = values.get("num_devices")
    problem = _positive_int("num_devices", devices)
    if problem:
        return "num_devices", problem
    if strategy == "single" and devices != 1:
        return "num_devices", f"must be 1 under strategy single, got {devices}"
    for name, bound, unit in ((M_ENERGY_J, MAX_PLAUSIBLE_J, "J"), (M_TIME_S, MAX_PLAUSIBLE_S, "s")):
        problem = _measured_value(values.get(name), bound, unit)
        if problem:
            return name, problem
    return None


def _positive_int(name: str, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT64_MAX:
        return f"must be a positive integer, got {value!r}"
    return None


def _measured_value(value: Any, bound: float, unit: str) -> str | None:
    if value is None:
        return "is missing"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, got {value!r}"
    if not math.isfinite(value) or value <= 0:
        return f"must be finite and positive, got {value!r}"
    if value >= bound:
        return f"must be below {bound:g} {unit} (no fine-tuning job measures that much), got {value!r}"
    return None
