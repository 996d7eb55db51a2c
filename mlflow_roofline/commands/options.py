"""Option parsing shared by the commands."""

from __future__ import annotations

import math
from typing import Any

import click

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
