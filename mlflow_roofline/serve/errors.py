"""The served model's one error: HTTP 400, its message leading with the field and the rule."""

from __future__ import annotations

import numpy as np
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, ErrorCode

from mlflow_roofline.core.errors import capped


class InputError(MlflowException):
    """A request the model refuses: ``INVALID_PARAMETER_VALUE``, which the scoring server answers with 400.

    MLflow's scoring server rewrites the message of every MlflowException a model raises
    as ``Failed to predict data '<the whole input frame>'. Error: <message>``. An
    InputError keeps its own message when it is reassigned a text that only wraps it, so
    that the client reads the field and the rule first, not a dump of its request.
    """

    _message = ""

    @property
    def message(self) -> str:
        """``field (row i): rule``."""
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        value = str(value)
        if self._message and value != self._message and value.endswith(self._message):
            return  # a wrapper prepending context (the input frame): keep the field first
        self._message = value


def reworded(error: InputError, message: str) -> InputError:
    """``error`` with another message and the same code. MlflowException keeps its code as the enum's *name*
    and takes the enum's *number*: passing the name back silently made every such error a 500."""
    return InputError(message, error_code=ErrorCode.Value(error.error_code))


MAX_SHOWN_CHARS = 100
"""Longest quote of one value a message gives (a 10 MB string in a number's column is not sent back)."""


def invalid(field: str, rule: str, rows: np.ndarray | None = None) -> InputError:
    """The 400-mapped error naming ``field`` (and the first offending row, 0-based), at most
    :data:`MAX_MESSAGE_CHARS` long."""
    field = capped(field, MAX_SHOWN_CHARS)
    where = ""
    if rows is not None and len(rows):
        where = f" (row {int(rows[0])}" + (f" and {len(rows) - 1} more)" if len(rows) > 1 else ")")
    return InputError(capped(f"{field}{where}: {rule}"), error_code=INVALID_PARAMETER_VALUE)


def show(value: object) -> str:
    """A value as a user wrote it: 12 not 12.0, 'fsdp' quoted (nan for a missing number)."""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, (np.integer, np.bool_)):
        return str(value.item())
    text = repr(value)
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return f"{text[:MAX_SHOWN_CHARS]}... ({len(text)} characters)"
