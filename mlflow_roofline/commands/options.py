"""Click options shared by the commands (carbon options, a finite number type).

The rules behind them live in core: :func:`~mlflow_roofline.core.config.parse_bool`,
:func:`~mlflow_roofline.core.carbon.resolve_carbon` and
:func:`~mlflow_roofline.core.carbon.carbon_request_params`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping
from typing import TypeVar

import click

from mlflow_roofline.core.carbon import carbon_request_params
from mlflow_roofline.core.config import parse_bool

__all__ = [
    "CARBON_OPTION_NAMES",
    "FINITE_FLOAT",
    "FiniteFloat",
    "carbon_options",
    "parse_bool",
    "pop_carbon_options",
    "pop_carbon_params",
]

Command = TypeVar("Command", bound=Callable[..., object])
OptionValue = TypeVar("OptionValue")
"""The value type of a click command's keyword arguments (whatever its other options hold)."""

CARBON_OPTION_NAMES: tuple[str, ...] = ("carbon_intensity", "region", "pue", "price_per_kwh")
"""The keyword names :func:`carbon_options` adds (those of :func:`~mlflow_roofline.core.carbon.resolve_carbon`)."""


def carbon_options(command: Command) -> Command:
    """Add ``--carbon-intensity``, ``--region``, ``--pue`` and ``--price-per-kwh`` to a click command."""
    options = (
        click.option(
            "--carbon-intensity",
            metavar="G",
            default=None,
            help="Grid carbon intensity, g CO2e per kWh (default: $ROOFLINE_CARBON_INTENSITY, else --region).",
        ),
        click.option(
            "--region",
            metavar="CODE",
            default=None,
            help="ISO 3166 country code or cloud region (us-east-1, europe-west4, eastus) looked up in the "
            "shipped yearly-average table (default: $ROOFLINE_REGION). Without a figure there is no co2e_g.",
        ),
        click.option("--pue", metavar="X", default=None, help="Facility PUE >= 1 (default: $ROOFLINE_PUE, else 1.0)."),
        click.option(
            "--price-per-kwh",
            metavar="P",
            default=None,
            help="Price of a kWh, for `cost` (default: $ROOFLINE_PRICE_PER_KWH).",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def pop_carbon_options(options: MutableMapping[str, OptionValue]) -> dict[str, str]:
    """Remove the carbon options from a click command's keyword arguments; return those given.

    An empty value counts as not given (the MLproject passes ``--region ''`` for an unset param).
    """
    given = {name: options.pop(name, None) for name in CARBON_OPTION_NAMES}
    return {name: str(value) for name, value in given.items() if value is not None and str(value).strip()}


def pop_carbon_params(options: MutableMapping[str, str | None]) -> dict[str, float | str]:
    """Remove the carbon options from a command's keyword arguments; return the given ones as typed values
    (see :func:`~mlflow_roofline.core.carbon.carbon_request_params`).

    Raises:
        ConfigError: naming the first option out of its rule.
    """
    return carbon_request_params(pop_carbon_options(options))


class FiniteFloat(click.ParamType):
    """A click number type that refuses NaN and infinities (``float("nan")`` parses)."""

    name = "number"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)  # type: ignore[arg-type] # refused below when not a number
        except (TypeError, ValueError):
            self.fail(f"must be a number, got {value!r}", param, ctx)
        if not math.isfinite(number):
            self.fail(f"must be a finite number, got {value!r}", param, ctx)
        return number


FINITE_FLOAT = FiniteFloat()
