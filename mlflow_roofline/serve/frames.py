"""Reading columns out of, and building, the served model's pandas frames cheaply.

A one-row request spends most of the model's own time in pandas bookkeeping, not in the
law: ``frame[name]`` builds a Series per column, and ``pd.DataFrame(dict)`` sanitises every
column and builds the column index anew. These helpers take pandas' internal shortcuts
(``DataFrame._get_column_array``, ``DataFrame._from_arrays`` with an index built once)
where this pandas has them, and the public API otherwise; both give the same arrays and
the same frame. The served model pins the pandas it was logged with.

Columns are found by name through :func:`column_positions`, never through the frame's column
index: a request's frame arrives with a new index, and its first lookup builds pandas' hash
engine (about 20 us for a request's nine columns on the dev VM).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd
from pandas.api.extensions import ExtensionArray, ExtensionDtype

ArrayLike: TypeAlias = np.ndarray | ExtensionArray
"""A column as pandas holds it."""

_last_positions: tuple[pd.Index, dict[Hashable, int] | None] | None = None
"""The last column index asked about and its positions (a request asks several times about one frame)."""


def column_positions(frame: pd.DataFrame) -> dict[Hashable, int] | None:
    """Each column's position by name, from the list of names; None when a name repeats."""
    global _last_positions
    columns = frame.columns
    last = _last_positions
    if last is not None and last[0] is columns:  # an index is immutable: the same object, the same names
        return last[1]
    names = columns.tolist()
    by_name: dict[Hashable, int] = {name: i for i, name in enumerate(names)}
    positions = by_name if len(by_name) == len(names) else None
    _last_positions = (columns, positions)
    return positions


def has_column(frame: pd.DataFrame, name: str) -> bool:
    """``name in frame.columns``, without building the index's hash engine."""
    positions = column_positions(frame)
    return name in frame.columns if positions is None else name in positions


def column_arrays(
    frame: pd.DataFrame, names: tuple[str, ...], fast: bool = True, dtype: npt.DTypeLike | None = None
) -> dict[str, np.ndarray]:
    """``frame[name].to_numpy(dtype)`` of each of ``names``, without building a Series for each.

    The public path (``fast=False``, another pandas, or column names that are not unique)
    calls ``frame[name].to_numpy(dtype)`` itself. A missing name raises ``KeyError`` on both.
    """
    get = getattr(frame, "_get_column_array", None) if fast else None
    positions = column_positions(frame) if get is not None else None
    if get is None or positions is None:
        return {name: frame[name].to_numpy(dtype) for name in names}
    arrays = {}
    for name in names:
        values = get(positions[name])  # a numpy array, or a pandas extension array (text, nullable)
        if isinstance(values, np.ndarray):
            arrays[name] = values if dtype is None else np.asarray(values, dtype=dtype)
        else:
            arrays[name] = values.to_numpy(dtype)
    return arrays


def object_column(frame: pd.DataFrame, name: str, fast: bool = True) -> np.ndarray:
    """``frame[name].to_numpy(dtype=object)``: a column as an object array (text: the strings, NaN where missing)."""
    return column_arrays(frame, (name,), fast, object)[name]


def optional_object_column(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """:func:`object_column`, or None where the frame has no column ``name`` (an optional input)."""
    return object_column(frame, name) if has_column(frame, name) else None


@functools.lru_cache(maxsize=64)
def _column_index(names: tuple[str, ...]) -> pd.Index:
    return pd.Index(list(names))


def stored_column(frame: pd.DataFrame, position: int, fast: bool = True) -> ArrayLike:
    """The array pandas holds column ``position`` of ``frame`` in (numpy, or a pandas extension array for text
    and nullable columns), without building a Series where this pandas allows."""
    get = getattr(frame, "_get_column_array", None) if fast else None
    if get is not None:
        return get(position)
    column = frame.iloc[:, position]
    return column.array if isinstance(column.dtype, ExtensionDtype) else column.to_numpy()


def frame_of(columns: Mapping[str, ArrayLike], fast: bool = True, index: pd.Index | None = None) -> pd.DataFrame:
    """A frame of equally long 1-d ``columns`` (numpy or pandas extension arrays), in their order, on ``index``
    (default: 0, 1, ...); the column index is built once per names.

    The public path (``fast=False`` or another pandas) is ``pd.DataFrame(columns, index, copy=False)``.
    """
    build = getattr(pd.DataFrame, "_from_arrays", None) if fast else None
    if build is None or not columns:
        return pd.DataFrame(dict(columns), index=index, copy=False)
    arrays = list(columns.values())
    rows = pd.RangeIndex(len(arrays[0])) if index is None else index
    return build(arrays, columns=_column_index(tuple(columns)), index=rows, verify_integrity=False)
