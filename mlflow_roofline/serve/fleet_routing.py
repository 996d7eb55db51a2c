"""Serving a fleet law (:class:`~law.fleet.FleetLaw`): each request row answered by the law its ``hardware`` routes to.

Every row names its GPU (``hardware``, required). The rows of one GPU are answered together,
in any mode (predict, recommend, pareto), by one :class:`~law.fitted.FittedLaw`:

- a measured GPU: its own law, or the pooled law where its route says the pooled law
  predicted its held-out bigger models better;
- a GPU of the hardware table (:mod:`core.gpu_datasheets`, extendable with
  ``ROOFLINE_HARDWARE_TABLE``) no run measured: the pooled law (its covariate form,
  ``extrapolated_hardware`` true), or refused with the reason where the fleet has none;
- any other name: refused by name, listing the measured GPUs and saying that the table's GPUs
  are answered too.

The answers are put back in the request's row order (pareto mode: ``row`` names the request's
row), with the column ``law``: the GPU's name where its own law answered, else ``pooled``.
A refusal inside one GPU's rows names the row of the whole request.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.schema import HARDWARE_COLUMN
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.fleet import FleetLaw
from mlflow_roofline.serve.errors import InputError, invalid, show

LAW_COLUMN = "law"
ROW_COLUMN = "row"

Answer = Callable[[FittedLaw, pd.DataFrame], pd.DataFrame]
"""One mode's answer of a law to a frame of rows (:func:`serve.predict.predict_frame` and the search modes)."""


def _hardware_column(frame: pd.DataFrame, fleet: FleetLaw) -> np.ndarray:
    """The validated ``hardware`` column: present, text in every row."""
    if HARDWARE_COLUMN not in frame.columns:
        raise invalid(
            HARDWARE_COLUMN,
            f"missing column; this model knows {len(fleet.known_hardware)} hardware, say which per row: "
            f"{', '.join(fleet.known_hardware)} (or a GPU of the hardware table)",
        )
    values = frame[HARDWARE_COLUMN].to_numpy(dtype=object)
    not_text = np.flatnonzero([not isinstance(v, str) for v in values])
    if len(not_text):
        raise invalid(HARDWARE_COLUMN, f"must be a hardware name, got {show(values[not_text[0]])}", not_text)
    return values


def law_of(fleet: FleetLaw, name: str, rows: np.ndarray) -> FittedLaw:
    """The law that answers the rows ``rows`` of GPU ``name``, see the module docstring.

    Raises:
        InputError: naming ``hardware`` and the first row, for a GPU the fleet does not answer.
    """
    if name in fleet.hardware_laws:
        return fleet.answering(name)
    in_table = load_hardware_table().lookup(name) is not None
    if in_table and fleet.pooled is not None and fleet.answers_unmeasured:
        return fleet.pooled
    if in_table:
        raise invalid(
            HARDWARE_COLUMN,
            f"{name!r} is a GPU of the hardware table no run measured, and this model cannot answer it: "
            f"{fleet.unmeasured_refusal}; it answers {', '.join(fleet.known_hardware)}",
            rows,
        )
    table = (
        "and every GPU of the hardware table (extend it with ROOFLINE_HARDWARE_TABLE)"
        if fleet.answers_unmeasured
        else f"(not the hardware table's others: {fleet.unmeasured_refusal})"
    )
    measured = ", ".join(fleet.known_hardware)
    raise invalid(HARDWARE_COLUMN, f"unknown hardware {name!r}; this model answers {measured} {table}", rows)


_ROW = re.compile(r"^(\w+) \(row (\d+)")


def _in_request_rows(exc: InputError, rows: np.ndarray) -> InputError:
    """``exc`` with its first row (0-based within one GPU's rows) as the row of the whole request."""
    match = _ROW.match(exc.message)
    if match is None:
        return exc
    start, end = match.span(2)
    message = exc.message[:start] + str(int(rows[int(match[2])])) + exc.message[end:]
    return InputError(message, error_code=exc.error_code)


def _answer_part(fleet: FleetLaw, frame: pd.DataFrame, name: str, rows: np.ndarray, answer: Answer) -> pd.DataFrame:
    """The rows ``rows`` (all on GPU ``name``) answered by their law, indexed by request row, labelled ``law``."""
    law = law_of(fleet, name, rows)
    try:
        part = answer(law, frame.iloc[rows].reset_index(drop=True))
    except InputError as exc:
        raise _in_request_rows(exc, rows) from None
    part[LAW_COLUMN] = fleet.label(name)
    if ROW_COLUMN in part.columns:  # pareto: several output rows per request row
        part[ROW_COLUMN] = rows[part[ROW_COLUMN].to_numpy(dtype=int)].astype(np.int64)
        return part
    part.index = rows
    return part


def fleet_frame(fleet: FleetLaw, frame: pd.DataFrame, answer: Answer) -> pd.DataFrame:
    """``answer`` of each row's law to the rows of ``frame``, in the request's order, with the column ``law``.

    Raises:
        InputError: a missing or non-text ``hardware``, a GPU the fleet does not answer, or
            what the answering law refuses (its row that of the request).
    """
    hardware = _hardware_column(frame, fleet)
    parts = [
        _answer_part(fleet, frame, str(name), np.flatnonzero(hardware == name), answer)
        for name in dict.fromkeys(hardware)
    ]
    if not parts:
        return answer(fleet.answering(fleet.known_hardware[0]), frame).assign(**{LAW_COLUMN: ""})
    out = pd.concat(parts) if len(parts) > 1 else parts[0]
    if ROW_COLUMN in out.columns:
        return out.sort_values(ROW_COLUMN, kind="stable").reset_index(drop=True)
    return out.sort_index().reset_index(drop=True)
