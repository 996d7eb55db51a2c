"""Option parsing shared by the commands."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click

from mlflow_roofline.core.carbon import resolve_carbon
from mlflow_roofline.core.errors import ConfigError

TRUE_WORDS = ("true", "1", "yes", "y", "on")
FALSE_WORDS = ("false", "0", "no", "n", "off")


def parse_bool(field: str, value: str | bool) -> bool:
    """``true``/``false`` (and yes/no, y/n, 1/0, on/off) as a bool.

    MLflow Projects pass every parameter as text, so boolean options arrive as words.

    Raises:
        ConfigError: any other word, naming ``field``.
    """
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ConfigError(field, f"must be true or false, got {value!r}")


CARBON_OPTION_NAMES: tuple[str, ...] = ("carbon_intensity", "region", "pue", "price_per_kwh")
"""The keyword names :func:`carbon_options` adds (those of :func:`~mlflow_roofline.core.carbon.resolve_carbon`)."""


def carbon_options(command: Callable[..., Any]) -> Callable[..., Any]:
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


def pop_carbon_options(options: dict[str, Any]) -> dict[str, Any]:
    """Remove the carbon options from a click command's keyword arguments; return those given.

    An empty value counts as not given (the MLproject passes ``--region ''`` for an unset param).
    """
    given = {name: options.pop(name, None) for name in CARBON_OPTION_NAMES}
    return {name: value for name, value in given.items() if value is not None and str(value).strip()}


def pop_carbon_params(options: dict[str, Any]) -> dict[str, float | str]:
    """Remove the carbon options from a command's keyword arguments; return the given ones as typed values.

    Each is checked as train, measure and sweep check it (:func:`~mlflow_roofline.core.carbon.resolve_carbon`,
    environment ignored): ``carbon_intensity`` (g CO2e/kWh) and ``price_per_kwh`` as finite numbers >= 0,
    ``pue`` >= 1, ``region`` in the shipped table. Numbers come back as floats, the region as text: the
    served model's request params.

    Raises:
        ConfigError: naming the first option out of its rule.
    """
    given = pop_carbon_options(options)
    resolve_carbon(**given, env={})
    return {name: str(value) if name == "region" else float(value) for name, value in given.items()}


class FiniteFloat(click.ParamType):
    """A click number type that refuses NaN and infinities (``float("nan")`` parses)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"must be a number, got {value!r}", param, ctx)
        if not math.isfinite(number):
            self.fail(f"must be a finite number, got {value!r}", param, ctx)
        return number


FINITE_FLOAT = FiniteFloat()
