"""The settings of a sweep spec (its top-level keys that are not grid values), checked.

``experiment``, ``device``, ``meter``, ``timeout_s`` (seconds per configuration),
``repeats``, ``description``, the ``slurm`` section and the carbon keys
(``carbon_intensity`` in g CO2e/kWh, ``region``, ``pue``, ``price_per_kwh``), passed to
every train run as its carbon options. Every error is a
:class:`~mlflow_roofline.core.errors.ConfigError` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlflow_roofline.core.carbon import resolve_carbon
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import DEFAULT_EXPERIMENT, DEVICE_CHOICES, P_METER
from mlflow_roofline.energy.select import METER_NAMES
from mlflow_roofline.sweep.spec_grid import choice, positive_number

CARBON_KEYS: tuple[str, ...] = ("carbon_intensity", "region", "pue", "price_per_kwh")
"""Top-level keys passed to every train run as its carbon options."""

SETTING_KEYS: tuple[str, ...] = (
    "experiment",
    "device",
    P_METER,
    "timeout_s",
    "description",
    "slurm",
    "repeats",
) + CARBON_KEYS
"""Top-level keys that are settings of the sweep, not grid values."""


def spec_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's settings (experiment, device, meter, timeout_s, description), checked in that order."""
    experiment = data.get("experiment", DEFAULT_EXPERIMENT)
    if not isinstance(experiment, str) or not experiment.strip():
        raise ConfigError("experiment", f"must be a non-empty experiment name, got {experiment!r}")
    device = choice("device", data.get("device", "auto"), DEVICE_CHOICES)
    meter = choice(P_METER, data.get(P_METER, "auto"), METER_NAMES)
    timeout_s = data.get("timeout_s")
    if timeout_s is not None and not positive_number(timeout_s):
        raise ConfigError("timeout_s", f"must be a finite positive number of seconds, got {timeout_s!r}")
    repeats = data.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError("repeats", f"must be a positive integer (measured runs per configuration), got {repeats!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError("description", f"must be text, got {type(description).__name__}")
    return {
        "experiment": experiment.strip(),
        "device": device,
        P_METER: meter,
        "timeout_s": float(timeout_s) if timeout_s is not None else None,
        "description": description,
        "slurm": _slurm(data.get("slurm")),
        "carbon": _carbon(data),
        "repeats": repeats,
    }


def _carbon(data: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's carbon keys that are set, checked (a bad value or unknown region names its key)."""
    carbon = {key: data[key] for key in CARBON_KEYS if data.get(key) is not None}
    resolve_carbon(**carbon, env={})
    return carbon


SLURM_KEYS: tuple[str, ...] = ("partition", "account", "time_min")


def _slurm(raw: Any) -> dict[str, Any]:
    """The ``slurm`` section: partition and account names, time_min a positive whole number of minutes."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("slurm", f"must be a mapping with keys {', '.join(SLURM_KEYS)}")
    for key, value in raw.items():
        if key not in SLURM_KEYS:
            raise ConfigError(f"slurm.{key}", f"unknown key; expected one of {', '.join(SLURM_KEYS)}")
        if key == "time_min":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError("slurm.time_min", f"must be a positive whole number of minutes, got {value!r}")
        elif not isinstance(value, str) or not value.strip():
            raise ConfigError(f"slurm.{key}", f"must be a non-empty name, got {value!r}")
    return dict(raw)
