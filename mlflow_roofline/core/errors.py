"""Error types shared across the package.

Every error a user can cause names the field at fault and what was expected, so that
the CLI can print it as one line and the served model can map it to HTTP 400.
"""

from __future__ import annotations

import signal

MAX_MESSAGE_CHARS = 1000
"""Longest error message sent back to a user or a client: past it, the echo of what they sent is cut."""


def capped(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` cut to ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... [{len(message) - limit} more characters not echoed]"


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` with its line breaks and runs of spaces made one space, then :func:`capped`."""
    return capped(" ".join(message.split()), limit)


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


class ConfigTypeError(ConfigError, TypeError):
    """A configuration field holds a value of the wrong type (or is no field at all): a
    :class:`ConfigError` that is also a ``TypeError``, as Python's own calls raise."""


class LawFileError(RooflineError, ValueError):
    """A model's law JSON is from another schema version or is missing a field."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived while a job or a sweep ran; what it interrupted is ended as KILLED.

    A ``BaseException``, like ``KeyboardInterrupt``: the signal can arrive inside library
    code that guards itself with ``except Exception`` (MLflow's system-metrics monitor logs
    "Failed to start monitoring system metrics" and goes on), and such a handler must not
    swallow the stop.

    Attributes:
        signum: the signal's number (``15``); a process stopped by it exits ``128 + signum``.
        signame: the signal's name (``SIGTERM``), which is also the exception's message.
    """

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        self.signame = signal.Signals(signum).name
        super().__init__(self.signame)

    @property
    def reason(self) -> str:
        """``interrupted by SIGTERM``: why the run was ended, as the tag ``roofline.error`` says it."""
        return f"interrupted by {self.signame}"
