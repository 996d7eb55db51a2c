"""The served model's request params: their choices, defaults and validation.

``mode``, ``max_devices`` and ``objective`` choose what the model answers; the carbon
params (``carbon_intensity`` in g CO2e/kWh, ``region``, ``pue``, ``price_per_kwh``) are
resolved by :func:`mlflow_roofline.core.carbon.resolve_carbon` in its order: the request
param, then the ``ROOFLINE_*`` environment variable where the model is served, then the
region table. The ``carbon`` and ``cost`` objectives need their figure known.

A param the model does not have is refused (:func:`refuse_unknown`), naming it and the
params there are: a misspelt ``mdoe`` must not silently answer in predict mode. MLflow
itself drops such a param with a warning before the model is called; the pyfunc model
reads what the caller sent (:func:`mlflow_roofline.serve.pyfunc_model.sent_params`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping
from typing import Any, cast

import numpy as np

from mlflow_roofline.core.carbon import CarbonSettings, resolve_carbon
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import M_COST
from mlflow_roofline.serve.errors import invalid

MODES: tuple[str, ...] = ("predict", "recommend", "pareto")
OBJECTIVES: tuple[str, ...] = ("energy", "time", "edp", "carbon", M_COST)
CARBON_PARAMS: tuple[str, ...] = ("carbon_intensity", "region", "pue", "price_per_kwh")
PARAM_NAMES: tuple[str, ...] = ("mode", "max_devices", "objective", *CARBON_PARAMS)
"""Every request param the model has, in the signature's order."""
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


def refuse_unknown(sent: Mapping[Any, object], accepted: Collection[str] = PARAM_NAMES) -> None:
    """Refuse the params in ``sent`` that are not among ``accepted`` (the model's params).

    Raises:
        InputError: leading with the unknown names, then the params the model has.
    """
    unknown = [str(name) for name in sent if str(name) not in accepted]
    if not unknown:
        return
    ordered = [name for name in PARAM_NAMES if name in accepted] + sorted(set(accepted) - set(PARAM_NAMES))
    has = f"the model's params are {', '.join(ordered)}" if ordered else "the model has no params"
    plural = "s" if len(unknown) > 1 else ""
    raise invalid(", ".join(unknown), f"unknown request param{plural}; {has}")


def read_request(params: Mapping[str, object] | None, env: Mapping[str, str] = os.environ) -> Request:
    """Every param of a request, validated (defaults where absent).

    Raises:
        InputError: naming an unknown or invalid param.
    """
    params = params or {}
    refuse_unknown(params)
    carbon = carbon_settings(params, env)
    mode, max_devices, objective = check_params(
        params.get("mode", DEFAULT_MODE),
        params.get("max_devices", DEFAULT_MAX_DEVICES),
        params.get("objective", DEFAULT_OBJECTIVE),
        carbon,
    )
    return Request(mode=mode, max_devices=max_devices, objective=objective, carbon=carbon)
