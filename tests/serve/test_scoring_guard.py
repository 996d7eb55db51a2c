"""The guard's answer writer: the bytes MLflow's own ``predictions_to_json`` writes, for every answer the model gives.

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
from mlflow.pyfunc import scoring_server
from support.served_answers import GOLDEN, answer, asked

from mlflow_roofline.serve.scoring_guard import predictions_json, row_records

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
