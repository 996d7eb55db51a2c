"""An option of a Python entry point (``autolog``, the callbacks, ``track_energy``) and its check.

An :class:`Option` is one row of a table: the option's name, the Python types it takes, its
bounds or choices, whether ``None`` is allowed. :func:`check_call` checks every option one
call was given against the rows of its entry point, at the call: a wrong type or an unknown
name is a :class:`~mlflow_roofline.core.errors.ConfigTypeError`, a value out of its bounds a
:class:`~mlflow_roofline.core.errors.ConfigError`; both name the option and say what was expected.
The rows themselves: :mod:`mlflow_roofline.tracking.api_options`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from mlflow_roofline.core.errors import ConfigError, ConfigTypeError

__all__ = ["Option", "check_call"]

_WORDS: Mapping[type, str] = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


@dataclasses.dataclass(frozen=True)
class Option:
    """One option and what it takes.

    Attributes:
        name: the keyword a user writes.
        types: the Python types it takes (``bool`` is no ``int`` here unless listed).
        what: what it is, in words, for the message (default: from ``types``).
        low: the smallest value a number may take (inclusive).
        above: a bound a number must exceed (exclusive).
        high: the largest value a number may take (inclusive).
        choices: the strings it may take (empty: any non-empty string).
        optional: ``None`` is allowed (the default meaning).
        items: the rule of each item of a list or tuple (its ``what`` in the plural).
    """

    name: str
    types: tuple[type, ...]
    what: str = ""
    low: float | None = None
    above: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    items: Option | None = None

    def expected(self) -> str:
        """What the option takes, in words: ``an integer from 0 to 1000000000``, ``one of auto, cpu``."""
        text = f"one of {', '.join(self.choices)}" if self.choices else self.what or _WORDS.get(self.types[0], "")
        if self.above is not None:
            text += f" > {_number(self.above)}"
        if self.low is not None and self.high is not None:
            text += f" from {_number(self.low)} to {_number(self.high)}"
        elif self.low is not None:
            text += f" >= {_number(self.low)}"
        elif self.high is not None:
            text += f" <= {_number(self.high)}"
        if self.items is not None:
            text += f" of {self.items.what}"
        return text + (", or None" if self.optional else "")

    def check(self, value: object) -> None:
        """Raise when ``value`` is not what the option takes (naming it)."""
        if value is None and self.optional:
            return
        if not self._has_type(value):
            raise ConfigTypeError(self.name, f"must be {self.expected()}, got {_shown(value)}")
        if isinstance(value, str):
            if (self.choices and value not in self.choices) or not value.strip():
                raise ConfigError(self.name, f"must be {self.expected()}, got {value!r}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not self._in_bounds(value):
            raise ConfigError(self.name, f"must be {self.expected()}, got {value!r}")
        elif self.items is not None and isinstance(value, (list, tuple)):
            for item in value:
                if not (self.items._has_type(item) and self.items._in_bounds(item)):
                    raise ConfigError(self.name, f"must be {self.expected()}, got {value!r}")

    def _has_type(self, value: object) -> bool:
        if isinstance(value, bool) and bool not in self.types:
            return False
        return isinstance(value, self.types)

    def _in_bounds(self, value: Any) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return not (
            (self.low is not None and value < self.low)
            or (self.above is not None and value <= self.above)
            or (self.high is not None and value > self.high)
        )


def check_call(entry: str, rows: Sequence[Option], given: Mapping[str, object]) -> None:
    """Check the options ``given`` to ``entry`` (e.g. ``autolog``) against its ``rows``, at the call.

    Raises:
        ConfigTypeError: an option ``entry`` does not take, or a value of the wrong type.
        ConfigError: a value out of its bounds or choices.
    """
    by_name = {row.name: row for row in rows}
    for name, value in given.items():
        row = by_name.get(name)
        if row is None:
            raise ConfigTypeError(name, f"is not an option of {entry} (its options: {', '.join(by_name)})")
        row.check(value)


def _shown(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _number(bound: float) -> str:
    """A bound as a user writes it: ``1000000000``, ``0.5``."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"
