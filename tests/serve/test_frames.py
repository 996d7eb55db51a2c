"""serve.frames: pandas' shortcuts give the same arrays and frames as the public API."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.serve.frames import (
    column_arrays,
    column_positions,
    frame_of,
    has_column,
    object_column,
    optional_object_column,
    stored_column,
)

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


def test_columns_are_found_by_name_in_the_frame_asked_about() -> None:
    first, second = request_frame(), request_frame()[["text", "ints"]]
    assert column_positions(first) == {name: first.columns.get_loc(name) for name in NAMES}
    assert column_positions(second) == {"text": 0, "ints": 1}  # not the last frame's positions
    assert list(column_arrays(second, ("ints",))["ints"]) == [12, 24, 6]
    assert has_column(first, "mixed") and not has_column(second, "mixed")
    assert optional_object_column(second, "mixed") is None
    renamed = first.rename(columns={"ints": "layers"})
    assert not has_column(renamed, "ints") and list(object_column(renamed, "layers")) == [12, 24, 6]
    with pytest.raises(KeyError):
        column_arrays(second, ("mixed",))
    with pytest.raises(KeyError):
        column_arrays(second, ("mixed",), fast=False)


def test_repeated_column_names_have_no_positions() -> None:
    frame = pd.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])
    assert column_positions(frame) is None
    assert has_column(frame, "a") and has_column(frame, "b") and not has_column(frame, "c")


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


def test_stored_columns_and_a_frame_of_them_on_the_inputs_index_match_the_public_path() -> None:
    frame = request_frame().set_axis(["a", "b", "c"])
    for fast in (True, False):
        columns = {name: stored_column(frame, i, fast=fast) for i, name in enumerate(NAMES)}
        assert isinstance(columns["ints"], np.ndarray) and columns["ints"].dtype == np.int64
        assert isinstance(columns["nullable"], pd.api.extensions.ExtensionArray)  # nullable kept, not floats
        rebuilt = frame_of(columns, fast=fast, index=frame.index)
        pd.testing.assert_frame_equal(rebuilt, frame, check_exact=True)
