"""serve.frames: pandas' shortcuts give the same arrays and frames as the public API."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.serve.frames import column_arrays, frame_of, object_column

NAMES = ("ints", "floats", "text", "nullable", "mixed")


def request_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ints": [12, 24, 6],
            "floats": [1.5, np.nan, 3.0],
            "text": ["ddp", None, "tp"],
            "nullable": pd.array([1, None, 3], dtype="Int64"),
            "mixed": [1, "two", 3.0],
        }
    )


def test_column_arrays_match_the_public_path() -> None:
    frame = request_frame()
    fast, public = column_arrays(frame, NAMES), column_arrays(frame, NAMES, fast=False)
    assert list(fast) == list(NAMES)
    for name in NAMES:
        assert fast[name].dtype == public[name].dtype
        assert [repr(v) for v in fast[name]] == [repr(v) for v in public[name]]  # NaN where NaN
    assert fast["ints"].dtype == np.int64 and fast["nullable"].dtype == np.float64  # as frame[name].to_numpy()


def test_object_column_matches_the_public_path() -> None:
    frame = request_frame()
    for name in NAMES:
        fast, public = object_column(frame, name), object_column(frame, name, fast=False)
        assert fast.dtype == object and public.dtype == object
        assert [repr(v) for v in fast] == [repr(v) for v in public]
    assert list(object_column(frame, "text"))[::2] == ["ddp", "tp"]
    assert [repr(v) for v in object_column(frame, "nullable")] == [repr(v) for v in frame["nullable"].to_numpy(object)]


def test_duplicate_column_names_take_the_public_path() -> None:
    frame = pd.DataFrame([[1, 2]], columns=["a", "a"])
    assert column_arrays(frame, ("a",))["a"].shape == (1, 2)  # what frame["a"] gives: both columns


@pytest.mark.parametrize("rows", [1, 1000])
def test_frame_of_matches_the_public_path(rows: int) -> None:
    columns = {
        "energy_j": np.linspace(1.0, 2.0, rows),
        "eta": np.full(rows, 0.5),
        "extrapolated": np.arange(rows) % 2 == 0,
    }
    fast, public = frame_of(columns), frame_of(columns, fast=False)
    pd.testing.assert_frame_equal(fast, public)
    assert list(fast.columns) == list(columns) and fast["extrapolated"].dtype == bool
    assert fast.to_dict(orient="records") == public.to_dict(orient="records")


def test_frame_of_nothing_is_an_empty_frame() -> None:
    assert frame_of({}).empty
