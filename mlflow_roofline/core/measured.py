"""What the law needs of one measured run, whoever launched it.

The launcher's rules (:meth:`TrainConfig.validate`: heads divisible by the device count
under tp, batch divisible under ddp/fsdp, ...) say what *this project's* train job can
run. A measurement made by another implementation (a TP that splits only the MLP, uneven
heads, a Trainer job) is still a valid data point for the law when it satisfies the
law's own needs, checked here: positive integer sizes, a known strategy, at least one
device, ``single`` on exactly one device, and a finite, positive time (seconds) and
energy (joules) inside the physical bounds of :data:`core.bounds.PHYSICAL_BOUNDS`, the
same bounds the fit applies to the runs it reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mlflow_roofline.core.bounds import outside_bound
from mlflow_roofline.core.config import INT64_MAX
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S, SIZE_NAMES, STRATEGIES

SIZE_FIELDS: tuple[str, ...] = SIZE_NAMES
"""Integer fields the law's features are built from: each a positive integer."""


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
    for name in (M_TIME_S, M_ENERGY_J):
        problem = _measured_value(values.get(name))
        if problem:
            return name, problem
    broken = outside_bound(values[M_ENERGY_J], values[M_TIME_S], values["num_devices"])
    if broken is not None:
        bound, value = broken
        implied = "" if bound.quantity == bound.field else f" (the {bound.quantity} it implies)"
        return bound.field, f"must lie within {bound.interval}{implied}: {bound.why}; got {value:g} {bound.unit}"
    return None


def _positive_int(name: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT64_MAX:
        return f"must be a positive integer, got {value!r}"
    return None


def _measured_value(value: object) -> str | None:
    if value is None:
        return "is missing"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, got {value!r}"
    if not math.isfinite(value) or value <= 0:
        return f"must be finite and positive, got {value!r}"
    return None
