"""What MLflow's scoring server answers for a roofline model: CSV read as JSON is, no stack trace, no flood,
the answer written by the C encoder.

``mlflow models serve`` (MLflow 3.17, ``mlflow/pyfunc/scoring_server/__init__.py``) answers on
its own before the model runs, and the model has no setting to change it:

- every ``text/csv`` body is a 400 carrying a ``stack_trace`` with the server's install paths:
  ``parse_csv_input`` asks the signature for a pandas type per column, and the model's
  ``Any`` columns (numbers checked as sent, :func:`~mlflow_roofline.serve.pyfunc_model.model_signature`)
  have none;
- a body it cannot parse (not JSON, a bad parquet file) is a 400 quoting the whole body, or
  carrying a ``stack_trace``;
- a request without ``Content-Type`` is a bare 500.

It also writes every answer through ``json.dump``, which runs the standard library's pure-Python
encoder (only a one-shot ``json.dumps`` takes the C one), after pandas' ``to_dict(orient="records")``
boxed each cell on its own: most of a large recommend or pareto request's time (docs/benchmarks.md,
``serve_latency.py``).

When the model is loaded by that server (the process MLflow started with
``__pyfunc_model_path__`` set), :func:`install` swaps three of the server module's functions,
which it looks up per request: ``parse_csv_input`` reads the CSV into the cells a
``dataframe_split`` JSON body of the same table would hold (so a CSV answers as that JSON
does), ``invocations`` drops the stack trace from every error, cuts an error message
to :data:`~mlflow_roofline.core.errors.MAX_MESSAGE_CHARS` and answers a missing content type with a
one-line 415, and ``predictions_to_json`` writes the bytes MLflow's own writes (:func:`predictions_json`),
from the answer's columns and by the C encoder. It also swaps MLflow's ``_enforce_named_col_schema``
(``mlflow.models.utils``, which the server's ``model.predict`` calls on every request) for
:func:`columns_enforced`: the untyped (``AnyType``) columns reach the model as the request gave them, without MLflow's
pass over each of their cells, which returns it unchanged.
"""

from __future__ import annotations

import csv
import functools
import importlib
import io
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Collection
from typing import Any, TextIO

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import BAD_REQUEST, INTERNAL_ERROR
from mlflow.types.schema import AnyType, Schema

from mlflow_roofline.core.errors import capped
from mlflow_roofline.serve.errors import MAX_SHOWN_CHARS
from mlflow_roofline.serve.frames import column_positions, frame_of, stored_column

SERVER_MODULE = "mlflow.pyfunc.scoring_server"
"""MLflow's scoring server, imported by the uvicorn app before it loads the model."""

SERVER_MARKER_ENV = "__pyfunc_model_path__"
"""Set by MLflow (``scoring_server.get_cmd``) for the server process it starts, and only for it."""

ENFORCE_MODULE, ENFORCE_FUNCTION = "mlflow.models.utils", "_enforce_named_col_schema"
"""Where MLflow enforces a named-column signature on the model's input (``PyFuncModel.predict``, every request)."""

CSV_HINT = "send a header row of column names, then one row per job (pandas' to_csv(index=False))"

_INTEGER = re.compile(r"[+-]?\d+")
_TRUE, _FALSE = ("true", "True", "TRUE"), ("false", "False", "FALSE")  # pandas' own spellings
_LOGGER = logging.getLogger(__name__)


def install(text_columns: Collection[str]) -> bool:
    """Guard the scoring server this process runs; False (nothing done) anywhere else, or when done already.

    ``text_columns``: the model's inputs typed as text; a CSV cell of any other column is read as a number
    where it is one (as JSON would carry it), as a boolean where it is ``true``/``false``, else as text.
    """
    server: Any = sys.modules.get(SERVER_MODULE)
    if server is None or SERVER_MARKER_ENV not in os.environ or getattr(server.invocations, "guarded", False):
        return False
    server.parse_csv_input = functools.partial(parse_csv_input, server, frozenset(text_columns))
    server.predictions_to_json = functools.partial(predictions_json, server, server.predictions_to_json)
    server.invocations = guarded(server, server.invocations)
    enforcing = importlib.import_module(ENFORCE_MODULE)
    mlflow_enforce = getattr(enforcing, ENFORCE_FUNCTION, None)
    if callable(mlflow_enforce):  # another MLflow without it: its own enforcement stays
        setattr(enforcing, ENFORCE_FUNCTION, functools.partial(columns_enforced, mlflow_enforce))
    return True


def predictions_json(
    server: Any,
    mlflow_writer: Callable[..., Any],
    raw_predictions: Any,
    output: TextIO,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Write ``{"predictions": [one object per row], **metadata}`` to ``output``: the bytes of MLflow's
    ``predictions_to_json`` (its ``mlflow_writer``), for a table, from its columns and by the C encoder.

    Anything but a table with one name per column (an answer the model never gives), and metadata
    naming ``predictions`` (which MLflow refuses), goes to ``mlflow_writer`` as it is.
    """
    if isinstance(raw_predictions, pd.DataFrame) and not (metadata and "predictions" in metadata):
        records = row_records(raw_predictions)
        if records is not None:
            # one-shot dumps: the C encoder; MLflow's encoder class, for what it converts (numpy scalars in text)
            output.write(json.dumps({"predictions": records, **(metadata or {})}, cls=server.NumpyEncoder))
            return None
    return mlflow_writer(raw_predictions, output, metadata)


def row_records(frame: pd.DataFrame) -> list[dict[Any, Any]] | None:
    """``frame.to_dict(orient="records")`` as JSON writes it, from one ``tolist()`` per column.

    The cells are those pandas boxes, except that a numpy scalar stored in an object column stays one
    (the encoder writes it as the Python scalar). None for a table without columns or with a name twice,
    whose records pandas builds otherwise.
    """
    if frame.shape[1] == 0 or not frame.columns.is_unique:
        return None
    names = list(frame.columns)
    columns = [frame.iloc[:, i].tolist() for i in range(len(names))]
    return [dict(zip(names, row)) for row in zip(*columns)]


def columns_enforced(
    mlflow_enforce: Callable[[object, Schema], pd.DataFrame], pf_input: object, input_schema: Schema
) -> pd.DataFrame:
    """MLflow's ``_enforce_named_col_schema`` of ``pf_input``: the same frame, its untyped columns taken as they are.

    For an ``AnyType`` column MLflow's own pass returns every cell unchanged, one Python call per cell, then
    builds the column anew from that list, and builds the frame from a Series per column: for the model's
    eight untyped columns about 0.17 s of a 10,000-row request and 2 ms of a one-row one (dev VM), more than
    the model's own predict takes (0.024 s and 1.8 ms). Here MLflow enforces the typed columns (text) alone,
    and the frame is put together from the arrays pandas holds, in the schema's order, on the input's index.
    An input that is no table or names a column twice, a schema without untyped columns and a required column
    that is missing go to MLflow's code as they are (its own error).
    """
    specs = list(input_schema.inputs)
    positions = column_positions(pf_input) if isinstance(pf_input, pd.DataFrame) else None
    if (
        not isinstance(pf_input, pd.DataFrame)
        or positions is None
        or not any(isinstance(spec.type, AnyType) for spec in specs)
        or any(spec.required and spec.name not in positions for spec in specs)
    ):
        return mlflow_enforce(pf_input, input_schema)
    present = [spec for spec in specs if spec.name in positions]
    typed = [spec for spec in present if not isinstance(spec.type, AnyType)]
    enforced = (
        mlflow_enforce(pf_input.iloc[:, [positions[spec.name] for spec in typed]], Schema(typed)) if typed else None
    )
    typed_at = {spec.name: i for i, spec in enumerate(typed)}  # MLflow's frame: the typed columns in the schema's order
    columns = {
        str(spec.name): stored_column(pf_input, positions[spec.name])
        if enforced is None or spec.name not in typed_at
        else stored_column(enforced, typed_at[spec.name])
        for spec in present
    }
    return frame_of(columns, index=pf_input.index)


def guarded(server: Any, invocations: Callable[..., Any]) -> Callable[..., Any]:
    """``invocations(data, content_type, model, input_schema)`` whose errors are one bounded message."""

    def answer(data: bytes, content_type: str | None, model: Any, input_schema: Any) -> Any:
        if not content_type:
            return server.InvocationsResponse(
                response=f"Content-Type: missing; send one of {', '.join(server.CONTENT_TYPES)}",
                status=415,
                mimetype="text/plain",
            )
        try:
            return invocations(data, content_type, model, input_schema)
        except MlflowException as exc:
            exc.json_kwargs.pop("stack_trace", None)
            exc.message = capped(exc.message)
            raise
        except Exception as exc:  # a failure of the server's own code: one line here, the trace in the log
            _LOGGER.exception("the scoring server failed on a request")
            raise MlflowException(
                f"the server failed on this request ({type(exc).__name__}); the server log has the details",
                error_code=INTERNAL_ERROR,
            ) from None

    answer.guarded = True  # type: ignore[attr-defined]
    return answer


def parse_csv_input(server: Any, text_columns: frozenset[str], csv_input: Any, schema: Any = None) -> Any:
    """The frame a ``dataframe_split`` JSON body of the same table gives (MLflow's own JSON path).

    Raises:
        MlflowException: BAD_REQUEST (400), one line naming the CSV line at fault.
    """
    if hasattr(csv_input, "read"):
        text = csv_input.read()
    else:  # a file's path (``mlflow models predict``)
        with open(csv_input, encoding="utf-8") as handle:
            text = handle.read()
    columns, rows = csv_table(text)
    data = [[cell_value(cell, column in text_columns) for column, cell in zip(columns, row)] for row in rows]
    return server.dataframe_from_parsed_json({"columns": columns, "data": data}, "split", schema)


def csv_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a CSV body (blank lines skipped), every row as long as the header.

    Raises:
        MlflowException: BAD_REQUEST naming the line, for no header, no row, a row of another
            length or a malformed line.
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        lines = [(reader.line_num, row) for row in reader if row]
    except csv.Error as exc:
        raise _bad_csv(f"line {reader.line_num}: {exc}") from None
    if not lines:
        raise _bad_csv(f"the body is empty; {CSV_HINT}")
    # a column without a name (the index pandas' to_csv() writes first) is named as pandas.read_csv names it
    columns = [name.strip() or f"Unnamed: {i}" for i, name in enumerate(lines[0][1])]
    if len(lines) == 1:
        raise _bad_csv(f"no rows after the header; {CSV_HINT}")
    for number, row in lines[1:]:
        if len(row) != len(columns):
            raise _bad_csv(f"line {number}: {len(row)} fields, the header names {len(columns)}")
    return columns, [row for _, row in lines[1:]]


def cell_value(cell: str, text: bool) -> object:
    """One CSV cell as JSON would carry it: empty is null; outside ``text`` columns a number or a boolean."""
    if cell == "":
        return None
    if text:
        return cell
    if _INTEGER.fullmatch(cell.strip()):
        try:
            return int(cell)
        except ValueError:  # past Python's 4300 digits: the text, which the model refuses quoting its start
            return cell
    if cell in _TRUE or cell in _FALSE:
        return cell in _TRUE
    try:
        value = float(cell)
    except ValueError:
        return cell
    return None if math.isnan(value) else value


def _bad_csv(why: str) -> MlflowException:
    return MlflowException(
        f"body: not a CSV table the model can read: {capped(why, MAX_SHOWN_CHARS)}", error_code=BAD_REQUEST
    )
