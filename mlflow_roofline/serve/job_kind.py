"""The served model's optional kind columns: what model a job trains and how.

``arch`` (``encoder`` or ``decoder``), ``vocab_size``, ``peft`` (``none`` or ``lora``),
``lora_rank`` and ``grad_checkpointing`` (true or false) may each be absent, or empty in
some rows; there the job is read with the defaults every run logged before these params
existed has (docs/schema.md): an encoder with V = 30,522 (a decoder: 50,257), every weight
trained (rank 0; LoRA without a rank: 8), no checkpointing. A value of the wrong kind is
refused naming the field; the rules between them (a rank under LoRA and none without it,
a rank no wider than the model) are the rule table's (:mod:`mlflow_roofline.core.rules`),
checked with the job's other columns (:mod:`serve.validate`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core.config import FALSE_WORDS, TRUE_WORDS
from mlflow_roofline.law.log_features import KIND_LEVELS, kind_columns
from mlflow_roofline.serve.errors import invalid, show

TEXT_COLUMNS: tuple[str, ...] = ("arch", "peft")
INTEGER_COLUMNS: tuple[str, ...] = ("vocab_size", "lora_rank")
FLAG_COLUMN = "grad_checkpointing"
KIND_COLUMNS: tuple[str, ...] = ("arch", "vocab_size", "peft", "lora_rank", FLAG_COLUMN)
"""The optional input columns of a job's kind, in docs/schema.md's order."""


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _text(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """A text column (None where absent): every value a string or missing (None, NaN)."""
    if name not in frame.columns:
        return None
    values = frame[name].to_numpy(dtype=object)
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
    if name not in frame.columns:
        return None
    values = frame[name].to_numpy(dtype=object)
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


def _flag(frame: pd.DataFrame) -> np.ndarray | None:
    """``grad_checkpointing`` as bools (missing: false); a boolean, or a word true/false, yes/no, 1/0."""
    if FLAG_COLUMN not in frame.columns:
        return None
    values = frame[FLAG_COLUMN].to_numpy(dtype=object)
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
            raise invalid(FLAG_COLUMN, f"must be true or false, got {show(value)}", np.array([i]))
    return flags


def job_kind(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each kind column of the request, defaults filled in (see the module docstring).

    Returns ``arch`` and ``peft`` (object arrays of text), ``vocab_size`` and ``lora_rank``
    (float64, exact integers) and ``grad_checkpointing`` (bool), one entry per row.

    Raises:
        InputError: naming the field and row of a value of the wrong kind.
    """
    arch, peft = (_with_default(_text(frame, name), KIND_LEVELS[name][0]) for name in TEXT_COLUMNS)
    vocab, rank = (_integer(frame, name) for name in INTEGER_COLUMNS)
    return kind_columns(len(frame), arch, vocab, peft, rank, _flag(frame))
