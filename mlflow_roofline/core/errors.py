"""Error types shared across the package.

Every error a user can cause names the field at fault and what was expected, so that
the CLI can print it as one line and the served model can map it to HTTP 400.
"""

from __future__ import annotations


class RooflineError(Exception):
    """Base class of the errors this package raises on purpose."""


class ConfigError(RooflineError, ValueError):
    """A configuration field holds a value outside its rule.

    Attributes:
        field: the name of the offending field (a train param name where there is one).
        rule: what was expected, in words.
    """

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class LawFileError(RooflineError, ValueError):
    """A model's law JSON is from another schema version or is missing a field."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived while a job ran; what it interrupted has been ended as KILLED.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` swallows it.
    The message is the signal's name (``SIGTERM``).
    """
