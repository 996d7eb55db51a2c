"""is_in answers as numpy.isin does, row by row on few rows and through numpy on many."""

from __future__ import annotations

import numpy as np
import pytest

from mlflow_roofline.core.membership import FEW_ROWS, is_in

LEVELS = ("single", "ddp", "fsdp", "tp")
VALUES = ["ddp", "tp", "zero", None, float("nan"), 3, np.str_("fsdp"), "", "single "]


@pytest.mark.parametrize("repeat", [1, FEW_ROWS // len(VALUES) + 1])  # the row-by-row path, then numpy's
@pytest.mark.parametrize("levels", [LEVELS, list(LEVELS), frozenset(LEVELS), np.array(LEVELS, dtype=object)])
def test_is_in_agrees_with_numpy_isin(repeat: int, levels: object) -> None:
    values = np.array(VALUES * repeat, dtype=object)
    expected = np.isin(values, np.array(LEVELS, dtype=object))
    got = is_in(values, levels)  # type: ignore[arg-type]
    assert got.dtype == bool and got.shape == values.shape
    assert got.tolist() == expected.tolist()
    assert got[:3].tolist() == [True, True, False]


def test_a_text_array_and_a_list_are_taken_as_they_come() -> None:
    assert is_in(np.array(["ddp", "x"]), LEVELS).tolist() == [True, False]
    assert is_in(["tp"], LEVELS).tolist() == [True]
    assert is_in(np.array([], dtype=object), LEVELS).tolist() == []
    assert is_in("ddp", LEVELS).shape == () and bool(is_in("ddp", LEVELS))  # a scalar: numpy's answer, 0-d


def test_an_unhashable_value_is_compared_not_raised() -> None:
    values = np.empty(2, dtype=object)
    values[0], values[1] = ["ddp"], "ddp"
    assert is_in(values, LEVELS).tolist() == [False, True]
