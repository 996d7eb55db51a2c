"""The guard's answer writer: the bytes MLflow's own ``predictions_to_json`` writes, for every answer the model gives;
its schema enforcement: the cells MLflow's own gives the model, and so the same answers and refusals.

MLflow's writer is the reference, called beside ours on the same frame: the golden grid's answers (every
mode, law kind and param set of tests/data/served_answers.json) and a table of the cells pandas and
the JSON encoders treat each their own way.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.models import utils as model_utils
from mlflow.pyfunc import scoring_server
from mlflow.types.schema import AnyType, Schema
from support.served_answers import GOLDEN, answer, asked

from mlflow_roofline.law.fleet import law_from_json
from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel, model_signature
from mlflow_roofline.serve.scoring_guard import columns_enforced, predictions_json, row_records

_GOLDEN = json.loads(GOLDEN.read_text())
MLFLOW_WRITER = scoring_server.predictions_to_json  # the guard installs itself only in a server process


def _written(writer: Any, predictions: Any, metadata: dict[str, Any] | None = None) -> str:
    out = io.StringIO()
    writer(predictions, out, metadata)
    return out.getvalue()


def _ours(predictions: Any, metadata: dict[str, Any] | None = None) -> str:
    out = io.StringIO()
    predictions_json(scoring_server, MLFLOW_WRITER, predictions, out, metadata)
    return out.getvalue()


def test_every_golden_answer_is_written_byte_for_byte_as_mlflow_writes_it() -> None:
    written = 0
    for case in _GOLDEN["cases"]:
        law_name, rows = _GOLDEN["queries"][case["queries"]]
        frame = answer(_GOLDEN["laws"][law_name], asked(rows, case["params"]), case["params"])
        assert _ours(frame) == _written(MLFLOW_WRITER, frame), case["params"]
        written += len(frame)
    assert written > 1000  # the grid's answers, every mode: not a handful of rows


def test_cells_pandas_and_the_encoders_treat_apart_are_written_as_mlflow_writes_them() -> None:
    frame = pd.DataFrame(
        {
            "energy_j": [1.5, float("nan"), float("inf"), -0.0],
            "count": np.array([1, 2, 3, 2**62], dtype=np.int64),
            "flag": [True, False, True, False],
            "text": ["a", None, "é ✓", ""],
            "arrow_text": pd.array(["x", None, "y", "z"], dtype="str"),  # pandas 3's text: arrow, NaN where missing
            "numpy_in_object": np.array([np.float64(0.1), np.int64(7), np.bool_(True), np.str_("s")], dtype=object),
            0: [0.1 + 0.2, 1e300, 5e-324, 123456789.123456789],  # a name that is no string: JSON writes "0"
        }
    )
    assert _ours(frame) == _written(MLFLOW_WRITER, frame)
    assert _ours(frame.iloc[:0]) == _written(MLFLOW_WRITER, frame.iloc[:0]) == '{"predictions": []}'
    assert _ours(frame, {"model": "m"}) == _written(MLFLOW_WRITER, frame, {"model": "m"})


def test_what_is_no_table_of_named_columns_is_left_to_mlflow() -> None:
    no_columns = pd.DataFrame(index=range(2))
    twice = pd.DataFrame([[1, 2]], columns=["a", "a"])
    assert row_records(no_columns) is None and row_records(twice) is None
    for predictions in (no_columns, twice, np.arange(3.0), [{"a": 1}]):
        assert _ours(predictions) == _written(MLFLOW_WRITER, predictions)
    with pytest.raises(MlflowException, match="predictions"):  # MLflow's own refusal, raised as MLflow raises it
        _ours(pd.DataFrame({"a": [1]}), {"predictions": 1})


SCHEMA = model_signature().inputs
assert SCHEMA is not None
MLFLOW_ENFORCE = model_utils._enforce_named_col_schema  # MLflow's own: the guard swaps it only in a server process
ODD_CELLS: list[dict[str, Any]] = [  # what a request can carry in the Any columns, as the server's JSON parser reads it
    {"num_layers": 2, "num_steps": 10.0, "speedup": None, "grad_checkpointing": True, "vocab_size": None},
    {"num_layers": "2", "num_steps": 2**70, "speedup": 1.7, "grad_checkpointing": "true", "vocab_size": 50257},
    {"num_layers": 2.5, "num_steps": -3, "speedup": float("nan"), "grad_checkpointing": 0, "vocab_size": 1.0},
    {"num_layers": None, "num_steps": True, "speedup": "fast", "grad_checkpointing": None, "vocab_size": "x"},
]


def _parsed(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` as the scoring server hands a ``dataframe_records`` body to the model."""
    return scoring_server.infer_and_parse_data({"dataframe_records": rows}, SCHEMA)


def _requests() -> list[tuple[str, pd.DataFrame, dict[str, Any]]]:
    """The golden grid's requests (every mode, law kind and param set), then the odd cells row by row."""
    out = []
    for case in _GOLDEN["cases"]:
        law_name, rows = _GOLDEN["queries"][case["queries"]]
        out.append((law_name, _parsed(asked(rows, case["params"])), case["params"]))
    law_name, rows = _GOLDEN["queries"][_GOLDEN["cases"][0]["queries"]]
    for i, odd in enumerate(ODD_CELLS):
        out.append((law_name, _parsed([{**rows[0], **odd}, *rows[1:3]]), {"mode": "predict"}))
        out.append(
            (
                law_name,
                _parsed([{**row, **{k: v for k, v in odd.items() if k != "num_layers"}} for row in rows]),
                {"mode": ("predict", "recommend", "pareto")[i % 3]},
            )
        )
    return out


def _answer_or_refusal(law_json: str, frame: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame | str:
    model = RooflineEnergyModel()
    model.law = law_from_json(law_json)
    try:
        return model.predict(None, frame, params)  # type: ignore[arg-type]
    except MlflowException as exc:
        return exc.message


def test_the_model_gets_the_frame_mlflows_enforcement_gives_it_and_so_the_same_answers() -> None:
    compared = 0
    for law_name, frame, params in _requests():
        ours, theirs = columns_enforced(MLFLOW_ENFORCE, frame, SCHEMA), MLFLOW_ENFORCE(frame, SCHEMA)
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)  # columns, order, dtypes, index and cells
        answered = [_answer_or_refusal(_GOLDEN["laws"][law_name], f, params) for f in (ours, theirs)]
        if isinstance(answered[1], str):
            assert answered[0] == answered[1]  # the same refusal, naming the same field and row
        else:
            pd.testing.assert_frame_equal(answered[0], answered[1], check_exact=True)
        compared += len(frame)
    assert compared > 500


def test_other_orders_and_indexes_are_kept_and_what_it_cannot_take_goes_to_mlflow() -> None:
    text_only = Schema([spec for spec in SCHEMA.inputs if not isinstance(spec.type, AnyType)])
    frame = _parsed(_GOLDEN["queries"][_GOLDEN["cases"][0]["queries"]][1])
    pd.testing.assert_frame_equal(columns_enforced(MLFLOW_ENFORCE, frame, text_only), MLFLOW_ENFORCE(frame, text_only))
    shuffled = frame.iloc[::-1, ::-1].set_axis([f"r{i}" for i in range(len(frame))])  # columns and index of its own
    pd.testing.assert_frame_equal(columns_enforced(MLFLOW_ENFORCE, shuffled, SCHEMA), MLFLOW_ENFORCE(shuffled, SCHEMA))
    twice = pd.concat([frame, frame[["num_layers"]]], axis=1)
    assert columns_enforced(lambda *_: "mlflow's", twice, SCHEMA) == "mlflow's"
    with pytest.raises(MlflowException, match="num_layers.*required") as ours:
        columns_enforced(MLFLOW_ENFORCE, frame.drop(columns="num_layers"), SCHEMA)
    with pytest.raises(MlflowException) as theirs:
        MLFLOW_ENFORCE(frame.drop(columns="num_layers"), SCHEMA)
    assert ours.value.message == theirs.value.message
