"""The served model's optional kind columns: what model a job trains and how.

The job table's kind columns (:mod:`mlflow_roofline.core.job_table`: ``precision``, ``arch``,
``vocab_size``, ``peft``, ``lora_rank``, ``grad_checkpointing``) may each be absent, or empty in
some rows; there the job is read with the table's defaults, those of every run logged before
the column existed (docs/schema.md): fp32 (which the law then replaces by the precision it was
fitted at, :mod:`serve.precision_routing`), an encoder with V = 30,522 (a decoder: 50,257),
every weight trained (rank 0; LoRA without a rank: 8), no checkpointing. A value of the wrong
type is refused naming the field; the levels and the rules between columns (a rank under LoRA
and none without it, a rank no wider than the model) are the rule table's
(:mod:`mlflow_roofline.core.rules`), checked with the job's other columns (:mod:`serve.validate`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core.config import FALSE_WORDS, TRUE_WORDS
from mlflow_roofline.core.job_table import JobColumn
from mlflow_roofline.law.log_features import KIND_COLUMNS as KIND_ENTRIES
from mlflow_roofline.law.log_features import kind_columns
from mlflow_roofline.serve.errors import invalid, show
from mlflow_roofline.serve.frames import optional_object_column

KIND_COLUMNS: tuple[str, ...] = tuple(entry.name for entry in KIND_ENTRIES)
"""The optional input columns of a job's kind, in the job table's order."""
TEXT_COLUMNS: tuple[str, ...] = tuple(entry.name for entry in KIND_ENTRIES if entry.type == "text")


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _text(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """A text column (None where absent): every value a string or missing (None, NaN)."""
    values = optional_object_column(frame, name)
    if values is None:
        return None
    bad = np.flatnonzero([not (isinstance(v, str) or _missing(v)) for v in values])
    if len(bad):
        raise invalid(name, f"must be text, got {show(values[bad[0]])}", bad)
    return values


def _with_default(values: np.ndarray | None, default: str) -> np.ndarray | None:
    """A text column with ``default`` (the paper's level) in its missing rows."""
    if values is None:
        return None
    return np.where([_missing(v) for v in values], default, values).astype(object)


def _integer(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """An integer column as float64, NaN where missing (None where absent); refuses what is not an integer."""
    values = optional_object_column(frame, name)
    if values is None:
        return None
    parsed = np.full(len(values), np.nan)
    for i, value in enumerate(values):
        if _missing(value):
            continue
        number = (
            float(value)
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
            else np.nan
        )
        if not (np.isfinite(number) and number == np.round(number) and abs(number) <= 2**53):
            raise invalid(name, f"must be an integer, got {show(value)}", np.array([i]))
        parsed[i] = number
    return parsed


def _flag(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """A flag column as bools (missing: false); a boolean, or a word true/false, yes/no, 1/0."""
    values = optional_object_column(frame, name)
    if values is None:
        return None
    flags = np.zeros(len(values), dtype=bool)
    for i, value in enumerate(values):
        if _missing(value):
            continue
        if isinstance(value, (bool, np.bool_)):
            flags[i] = bool(value)
            continue
        word = str(value).strip().lower() if isinstance(value, (str, int, np.integer)) else None
        if word in TRUE_WORDS:
            flags[i] = True
        elif word not in FALSE_WORDS:
            raise invalid(name, f"must be true or false, got {show(value)}", np.array([i]))
    return flags


def _column(frame: pd.DataFrame, entry: JobColumn) -> np.ndarray | None:
    """One kind column of the request parsed by its type (None where absent); text gets its default where missing."""
    if entry.type == "text":
        return _with_default(_text(frame, entry.name), str(entry.default))
    if entry.type == "bool":
        return _flag(frame, entry.name)
    return _integer(frame, entry.name)


def job_kind(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each kind column of the request, defaults filled in (see the module docstring).

    Returns the text columns (``precision``, ``arch``, ``peft``: object arrays), the integers
    (``vocab_size``, ``lora_rank``: float64, exact) and the flags (``grad_checkpointing``: bool),
    one entry per row.

    Raises:
        InputError: naming the field and row of a value of the wrong type.
    """
    return kind_columns(len(frame), {entry.name: _column(frame, entry) for entry in KIND_ENTRIES})
