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

A measured GPU that its own law answers, asked at a precision whose peak in the hardware table
differs from its runs' (:mod:`serve.precision_routing`), is answered by the pooled law's covariate
form at that peak (``law`` ``pooled``, ``extrapolated_hardware`` true), or refused naming
``precision`` where the fleet has none: its own law has no hardware term.

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
from mlflow_roofline.law.fleet import POOLED, FleetLaw
from mlflow_roofline.serve.errors import InputError, invalid, reworded, show
from mlflow_roofline.serve.frames import optional_object_column
from mlflow_roofline.serve.precision_routing import PRECISION, answered_precision, given_precision, off_fitted, why_off

LAW_COLUMN = "law"
ROW_COLUMN = "row"

Answer = Callable[[FittedLaw, pd.DataFrame], pd.DataFrame]
"""One mode's answer of a law to a frame of rows (:func:`serve.predict.predict_frame` and the search modes)."""


def _hardware_column(frame: pd.DataFrame, fleet: FleetLaw) -> np.ndarray:
    """The validated ``hardware`` column: present, text in every row."""
    values = optional_object_column(frame, HARDWARE_COLUMN)
    if values is None:
        raise invalid(
            HARDWARE_COLUMN,
            f"missing column; this model knows {len(fleet.known_hardware)} hardware, say which per row: "
            f"{', '.join(fleet.known_hardware)} (or a GPU of the hardware table)",
        )
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
    return reworded(exc, message)


def precision_parts(
    fleet: FleetLaw, name: str, rows: np.ndarray, given: np.ndarray
) -> list[tuple[np.ndarray, FittedLaw, str]]:
    """The rows ``rows`` of GPU ``name`` (``given``: their requested precision) by the law that answers them,
    with the label of the column ``law``: a GPU its own law answers, at a precision off its runs'
    (:mod:`serve.precision_routing`), goes to the pooled law, whose covariate form takes the table's peak.

    Raises:
        InputError: naming ``precision`` for a precision the GPU's row has no peak for, or an off one
            where the fleet has no covariate form; naming ``hardware`` for a GPU it does not answer.
    """
    law = law_of(fleet, name, rows)
    if name not in fleet.hardware_laws or law is not fleet.hardware_laws[name]:
        return [(rows, law, fleet.label(name))]
    fitted = law.precisions
    off = off_fitted(fitted, name, answered_precision(fitted, name, given, rows))
    if not off.any():
        return [(rows, law, name)]
    if fleet.pooled is None or not fleet.answers_unmeasured:
        asked = str(answered_precision(fitted, name, given[off])[0])
        raise invalid(
            PRECISION,
            f"{asked} on {name!r}: its runs were at {', '.join(fitted)}, {why_off(fitted, name, asked)}, and "
            f"this model has no pooled covariate form to carry the peak ({fleet.unmeasured_refusal})",
            rows[off],
        )
    parts = [(rows[~off], law, name)] if (~off).any() else []
    return [*parts, (rows[off], fleet.pooled, POOLED)]


def _answer_part(frame: pd.DataFrame, rows: np.ndarray, law: FittedLaw, label: str, answer: Answer) -> pd.DataFrame:
    """The rows ``rows`` answered by ``law``, indexed by request row, labelled ``label`` in the column ``law``."""
    try:
        part = answer(law, frame.iloc[rows].reset_index(drop=True))
    except InputError as exc:
        raise _in_request_rows(exc, rows) from None
    part[LAW_COLUMN] = label
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
    given = given_precision(frame)
    parts = [
        _answer_part(frame, rows, law, label, answer)
        for name in dict.fromkeys(hardware)
        for rows, law, label in precision_parts(
            fleet, str(name), np.flatnonzero(hardware == name), given[hardware == name]
        )
    ]
    if not parts:
        return answer(fleet.answering(fleet.known_hardware[0]), frame).assign(**{LAW_COLUMN: ""})
    out = pd.concat(parts) if len(parts) > 1 else parts[0]
    if ROW_COLUMN in out.columns:
        return out.sort_values(ROW_COLUMN, kind="stable").reset_index(drop=True)
    return out.sort_index().reset_index(drop=True)
