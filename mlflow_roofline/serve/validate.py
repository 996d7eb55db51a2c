"""Validate the served model's input table, whole columns at a time.

Each column is parsed first (a number, integral where an integer is needed, exact in
float64), then the rows are checked against the rule table of
:mod:`mlflow_roofline.core.rules`, then against what the law knows. The first problem
raises :class:`~mlflow_roofline.serve.errors.InputError` naming the field, the first
offending row (0-based) and the value as it was sent.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from mlflow_roofline.core.membership import is_in
from mlflow_roofline.core.rules import (
    first_broken_rows,
    row_values,
    rules_over,
)
from mlflow_roofline.core.schema import LAW_INPUT_NAMES, SIZE_NAMES
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.errors import invalid, show
from mlflow_roofline.serve.frames import column_arrays, has_column, object_column
from mlflow_roofline.serve.job_kind import job_kind
from mlflow_roofline.serve.precision_routing import PRECISION, given_precision

SIZE_COLUMNS: tuple[str, ...] = SIZE_NAMES
"""Integer model inputs that describe the job (every one must be >= 1)."""

INPUT_COLUMNS: tuple[str, ...] = LAW_INPUT_NAMES
"""Required model inputs in predict mode (docs/schema.md); ``speedup`` is optional."""

SPEEDUP_COLUMN = "speedup"

MAX_EXACT_INT = 2**53
"""The largest integer a float64 holds exactly: integer inputs above it are refused."""


@dataclasses.dataclass(frozen=True)
class Jobs:
    """Validated predict-mode input: one entry per row.

    Attributes:
        sizes: the :data:`SIZE_COLUMNS` as float64 arrays (exact integers), and the job's kind
            (:func:`serve.job_kind.job_kind`: ``arch``, ``vocab_size``, ``peft``, ``lora_rank``,
            ``grad_checkpointing``, defaults filled in): every column of the job the law reads;
            ``precision`` as the request gave it, None where it did not (the law's own then:
            :mod:`serve.precision_routing`).
        strategy: strategy names (object array).
        num_devices: N as float64 (exact integers).
        speedup: a measured S(N) per row, NaN where the law's speedup is to be used.
    """

    sizes: dict[str, np.ndarray]
    strategy: np.ndarray
    num_devices: np.ndarray
    speedup: np.ndarray


def require(frame: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """The input is a table with ``columns`` and at least one row."""
    if not isinstance(frame, pd.DataFrame):
        raise invalid("model_input", f"must be a table (pandas DataFrame), got {type(frame).__name__}")
    for name in columns:
        if not has_column(frame, name):
            raise invalid(name, f"missing column; the model needs {', '.join(columns)}")
    if len(frame) == 0:
        raise invalid("model_input", "has no rows")


def _sent(frame: pd.DataFrame, name: str, row: int) -> str:
    """The value of ``name`` in ``row`` as the request sent it."""
    return show(frame[name].iloc[row])


def numeric_column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """The column as float64 (NaN where missing); raises if any value is not a number.

    Booleans are not numbers here (``true`` for a layer count is a mistake, not a 1).
    """
    column = frame[name]
    if pd.api.types.is_bool_dtype(column.dtype):
        raise invalid(name, f"must be a number, got {_sent(frame, name, 0)}", np.arange(len(column)))
    if pd.api.types.is_numeric_dtype(column.dtype) and column.dtype.kind != "c":
        return column.to_numpy(dtype=float, na_value=np.nan, copy=True)
    values = column.to_numpy(dtype=object)
    is_number = np.fromiter(
        (
            (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)))
            or v is None
            or v is pd.NA
            for v in values
        ),
        dtype=bool,
        count=len(values),
    )
    if not is_number.all():
        bad = np.flatnonzero(~is_number)
        raise invalid(name, f"must be a number, got {show(values[bad[0]])}", bad)
    return np.array([_as_float(v) for v in values], dtype=float)


def _as_float(value: object) -> float:
    """A number (or None/NA) as a float; Python ints beyond float range become +-inf."""
    if value is None or value is pd.NA:
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")  # type: ignore[operator]


def integer_column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """An integer column as float64 (exact up to 2**53); its sign is the rules' matter."""
    values = numeric_column(frame, name)
    checks = (
        (np.isnan(values), "is missing; expected a positive integer"),
        (~np.isfinite(values), "must be a finite integer"),
        (values != np.round(values), "must be an integer"),
        (values > MAX_EXACT_INT, f"must be at most 2**53 = {MAX_EXACT_INT}"),
        (values < -MAX_EXACT_INT, "must be a positive integer"),  # the rules would quote it inexactly
    )
    for bad, rule in checks:
        if bad.any():
            rows = np.flatnonzero(bad)
            raise invalid(name, f"{rule}, got {_sent(frame, name, int(rows[0]))}", rows)
    return values


def integer_columns(frame: pd.DataFrame, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Several integer columns at once (one block conversion when all are plain integers)."""
    raw = column_arrays(frame, names)
    if all(isinstance(v, np.ndarray) and v.dtype.kind in "iu" for v in raw.values()):  # plain integers
        block = np.stack(list(raw.values())).astype(float)
        if np.abs(block).max() <= MAX_EXACT_INT:
            return dict(zip(names, block))
    return {name: integer_column(frame, name) for name in names}


def check_rules(columns: dict[str, np.ndarray]) -> None:
    """Every rule of the table that ``columns`` can be checked against, in the table's order."""
    broken = first_broken_rows(columns, rules_over(columns))
    if broken is not None:
        rule, rows = broken
        raise invalid(rule.field, rule.describe(row_values(columns, rule.fields, int(rows[0]))), rows)


def check_fitted_strategies(strategy: np.ndarray, law: FittedLaw) -> None:
    """Every row's strategy is one the law was fitted on."""
    unfitted = np.flatnonzero(~is_in(strategy, law.strategies))
    if len(unfitted):
        raise invalid(
            "strategy",
            f"the law was fitted on {', '.join(law.strategies)} only, got {show(strategy[unfitted[0]])}",
            unfitted,
        )


def measured_speedup(frame: pd.DataFrame, strategy: np.ndarray) -> np.ndarray:
    """The optional measured ``speedup`` column (NaN where absent: use the law)."""
    if not has_column(frame, SPEEDUP_COLUMN):
        return np.full(len(frame), np.nan)
    speedup = numeric_column(frame, SPEEDUP_COLUMN)
    given = ~np.isnan(speedup)
    bad = np.flatnonzero(given & (~np.isfinite(speedup) | (speedup <= 0)))
    if len(bad):
        sent = _sent(frame, SPEEDUP_COLUMN, bad[0])
        raise invalid(SPEEDUP_COLUMN, f"must be a positive finite number, got {sent}", bad)
    bad = np.flatnonzero(given & (strategy == "single") & (speedup != 1.0))
    if len(bad):
        sent = _sent(frame, SPEEDUP_COLUMN, bad[0])
        raise invalid(SPEEDUP_COLUMN, f"must be 1 under strategy single, got {sent}", bad)
    return speedup


def validate_sizes(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The job columns of a recommend-mode input, its kind included (strategy, devices and speedup ignored)."""
    require(frame, SIZE_COLUMNS)
    sizes = {**integer_columns(frame, SIZE_COLUMNS), **job_kind(frame)}
    check_rules(sizes)
    return {**sizes, PRECISION: given_precision(frame)}


def validate_jobs(frame: pd.DataFrame, law: FittedLaw) -> Jobs:
    """A predict-mode input, every column and rule checked; see :class:`Jobs`."""
    require(frame, INPUT_COLUMNS)
    columns: dict[str, np.ndarray] = {**integer_columns(frame, SIZE_COLUMNS + ("num_devices",)), **job_kind(frame)}
    strategy = object_column(frame, "strategy")
    check_rules({**columns, "strategy": strategy})
    check_fitted_strategies(strategy, law)
    columns[PRECISION] = given_precision(frame)
    n = columns.pop("num_devices")
    return Jobs(sizes=columns, strategy=strategy, num_devices=n, speedup=measured_speedup(frame, strategy))
