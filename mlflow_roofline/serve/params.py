"""The served model's request params: their choices, defaults and validation.

``mode``, ``max_devices`` and ``objective`` choose what the model answers; the carbon
params (``carbon_intensity`` in g CO2e/kWh, ``region``, ``pue``, ``price_per_kwh``) are
resolved by :func:`mlflow_roofline.core.carbon.resolve_carbon` in its order: the request
param, then the ``ROOFLINE_*`` environment variable where the model is served, then the
region table. The ``carbon`` and ``cost`` objectives need their figure known.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import cast

import numpy as np

from mlflow_roofline.core.carbon import CarbonSettings, resolve_carbon
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import M_COST
from mlflow_roofline.serve.errors import invalid

MODES: tuple[str, ...] = ("predict", "recommend", "pareto")
OBJECTIVES: tuple[str, ...] = ("energy", "time", "edp", "carbon", M_COST)
CARBON_PARAMS: tuple[str, ...] = ("carbon_intensity", "region", "pue", "price_per_kwh")
DEFAULT_MODE = "predict"
DEFAULT_OBJECTIVE = "energy"
DEFAULT_MAX_DEVICES = 8
MAX_DEVICES_LIMIT = 1024

_NEEDS = {"carbon": "carbon_intensity or region", M_COST: "price_per_kwh"}


@dataclasses.dataclass(frozen=True)
class Request:
    """A request's params, validated: what to answer and how to turn joules into CO2e and cost."""

    mode: str = DEFAULT_MODE
    max_devices: int = DEFAULT_MAX_DEVICES
    objective: str = DEFAULT_OBJECTIVE
    carbon: CarbonSettings = dataclasses.field(default_factory=CarbonSettings)


def available_objectives(carbon: CarbonSettings) -> tuple[str, ...]:
    """The objectives a request can rank by: carbon with an intensity, cost with a price."""
    known = {"carbon": carbon.known, M_COST: carbon.price_per_kwh is not None}
    return tuple(o for o in OBJECTIVES if known.get(o, True))


def check_params(
    mode: object, max_devices: object, objective: object, carbon: CarbonSettings | None = None
) -> tuple[str, int, str]:
    """Validate the inference params; returns them typed.

    Raises:
        InputError: naming the param.
    """
    if mode not in MODES:
        raise invalid("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    allowed = available_objectives(carbon or CarbonSettings())
    if objective not in allowed:
        need = f" ({objective} needs {_NEEDS[objective]})" if objective in _NEEDS else ""
        raise invalid("objective", f"must be one of {', '.join(allowed)}, got {objective!r}{need}")
    if isinstance(max_devices, bool) or not isinstance(max_devices, (int, np.integer)):
        raise invalid("max_devices", f"must be an integer, got {max_devices!r}")
    if not 1 <= int(max_devices) <= MAX_DEVICES_LIMIT:
        raise invalid("max_devices", f"must be between 1 and {MAX_DEVICES_LIMIT}, got {max_devices}")
    return str(mode), int(max_devices), str(objective)


def carbon_settings(params: Mapping[str, object], env: Mapping[str, str] = os.environ) -> CarbonSettings:
    """The carbon params of a request resolved against ``env`` (None or absent: not given).

    The signature types them (double, or string for ``region``); :func:`resolve_carbon`
    refuses a value out of its rule whatever it is.
    """
    given = {name: cast("float | str | None", params.get(name)) for name in CARBON_PARAMS}
    region = cast("str | None", given.pop("region"))
    try:
        return resolve_carbon(**given, region=region, env=env)
    except ConfigError as exc:
        raise invalid(exc.field, exc.rule) from None


def read_request(params: Mapping[str, object] | None, env: Mapping[str, str] = os.environ) -> Request:
    """Every param of a request, validated (defaults where absent)."""
    params = params or {}
    carbon = carbon_settings(params, env)
    mode, max_devices, objective = check_params(
        params.get("mode", DEFAULT_MODE),
        params.get("max_devices", DEFAULT_MAX_DEVICES),
        params.get("objective", DEFAULT_OBJECTIVE),
        carbon,
    )
    return Request(mode=mode, max_devices=max_devices, objective=objective, carbon=carbon)
