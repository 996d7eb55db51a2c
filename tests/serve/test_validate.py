"""Integer inputs are integers, values are reported as sent, and an implausible speedup is flagged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from law_factory import make_law, query
from mlflow.exceptions import MlflowException

from mlflow_roofline.serve.errors import invalid
from mlflow_roofline.serve.placement_search import recommend_frame
from mlflow_roofline.serve.predict import ETA_TOLERANCE, predict_frame
from mlflow_roofline.serve.pyfunc_model import model_signature

LIMIT = "2**53 = 9007199254740992"


@pytest.fixture(scope="module")
def law():
    return make_law()


def _column(values: list[object], dtype: object = None) -> pd.DataFrame:
    """Two rows of the default query whose ``num_steps`` column holds ``values``."""
    frame = pd.DataFrame([query(), query()])
    frame["num_steps"] = pd.Series(values, dtype=dtype)
    return frame


@pytest.mark.parametrize(
    ("values", "dtype", "message"),
    [
        ([20, 20.99], None, "num_steps (row 1): must be an integer, got 20.99"),
        ([2.5, 20], None, "num_steps (row 0): must be an integer, got 2.5"),
        ([True, False], None, "num_steps (row 0 and 1 more): must be a number, got True"),
        ([20, True], object, "num_steps (row 1): must be a number, got True"),
        ([20, 2**70 + 1], object, f"num_steps (row 1): must be at most {LIMIT}, got 1180591620717411303425"),
        ([20, 2**63 + 5], "uint64", f"num_steps (row 1): must be at most {LIMIT}, got 9223372036854775813"),
        ([20, -(2**64) - 1], object, "num_steps (row 1): must be a positive integer, got -18446744073709551617"),
        ([-3, 20], None, "num_steps (row 0): must be a positive integer, got -3"),
        # a value past 100 characters is quoted by its start and its length
        (
            [20, 10**400],
            object,
            "num_steps (row 1): must be a finite integer, got 1" + "0" * 99 + "... (401 characters)",
        ),
    ],
)
def test_integer_columns_refuse_what_is_not_an_integer_and_quote_it_as_sent(law, values, dtype, message) -> None:
    frame = _column(values, dtype)
    with pytest.raises(MlflowException) as info:
        predict_frame(law, frame)
    assert info.value.get_http_status_code() == 400
    assert info.value.message == message


def test_integral_floats_are_the_integers_they_hold(law) -> None:
    pd.testing.assert_frame_equal(predict_frame(law, _column([20.0, 20.0])), predict_frame(law, _column([20, 20])))


def test_speedup_above_the_device_count_is_flagged(law) -> None:
    rows = [query(speedup=s) for s in (1.8, 2.0 * (1 + ETA_TOLERANCE) * 0.99, 2.0 * (1 + ETA_TOLERANCE) * 1.01, 4.0)]
    out = predict_frame(law, pd.DataFrame(rows + [query()]))
    assert out["speedup_implausible"].tolist() == [False, False, True, True, False]
    np.testing.assert_allclose(out["eta"][:4], [0.9, 1.089, 1.111, 2.0])
    best = recommend_frame(law, pd.DataFrame([query()]), max_devices=8)
    assert not best["speedup_implausible"].any()  # the fitted laws stay below linear speedup


def test_a_wrapped_message_keeps_the_field_first() -> None:
    error = invalid("num_layers", "must be an integer, got 2.9", np.array([0]))
    error.message = f"Failed to predict data '{pd.DataFrame([query()])}'. \nError: {error.message}"
    assert error.message == "num_layers (row 0): must be an integer, got 2.9"
    error.message = "something else entirely"
    assert error.message == "something else entirely"


def test_signature_leaves_numbers_to_the_model() -> None:
    """MLflow casts a column to a declared long before the model sees it; the numbers are declared Any."""
    types = {c.name: repr(c.type) for c in model_signature().inputs.inputs}
    assert types["strategy"] == "string"
    assert types["arch"] == types["peft"] == "string"
    numbers = set(query()) - {"strategy"} | {"speedup", "vocab_size", "lora_rank", "grad_checkpointing"}
    assert {name for name, kind in types.items() if kind == "Any"} == numbers
