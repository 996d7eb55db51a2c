"""The precision each request row is answered at, and what a law does with it.

``precision`` enters a law through the hardware table's peak FLOP/s of the row's GPU at that
precision (:meth:`~core.gpu_datasheets.HardwareSpec.peak_flops`): the pooled covariate form's
``log_jpf`` (board watts per peak FLOP/s), its ``log_ridge`` and the roofline time scaling.

- A row without ``precision`` is answered at the precision its law was fitted at
  (:attr:`~law.fitted.FittedLaw.precisions`: the one most of its runs had; for a GPU no run
  measured, the first of the pooled law's that the GPU's row has a peak for, else
  :data:`~core.gpu_datasheets.TABLE_PRECISION`), so it gets the answer it got before
  ``precision`` entered the law.
- A precision the GPU's row gives no peak for (a V100 has no bf16) is refused, naming
  ``precision`` and the hardware.
- A row is *off* its law's precisions where the table's peak at its precision differs from the
  peak at every precision the law was fitted at (on a GPU the table does not know: where the
  precision is not one of them). A row at a fitted precision, or one of the same peak (fp16 and
  bf16 on an H100), is answered exactly as at the fitted one.
- An off row of a measured GPU goes to the pooled covariate form, with the GPU's covariates at
  its precision, flagged ``extrapolated_hardware`` and its time scaled by the roofline from the
  GPU's own (:func:`serve.predict.evaluate_pooled`, :mod:`serve.fleet_routing`). A law of one
  GPU has no hardware term at all (the paper's proxies and the roofline forms see only the job),
  so it refuses an off row (:func:`check_one_hardware`) rather than answer it as if the peak
  were the fitted one.
- A law written before ``precision`` entered it (no :attr:`~law.fitted.FittedLaw.precisions`)
  ignores the column, as it did: every GPU's covariates at ``fp16``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.core.gpu_datasheets import TABLE_PRECISION, HardwareSpec, load_hardware_table
from mlflow_roofline.core.schema import PRECISION, PRECISIONS
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.errors import invalid, show
from mlflow_roofline.serve.frames import optional_object_column
from mlflow_roofline.serve.hardware_routing import covariates_at


def given_precision(frame: pd.DataFrame) -> np.ndarray:
    """The request's ``precision`` per row (text), None where absent or missing.

    Raises:
        InputError: naming ``precision`` and the row of a value that is not one of its levels.
    """
    values = optional_object_column(frame, PRECISION)
    if values is None:
        return np.full(len(frame), None, dtype=object)
    missing = [v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) for v in values]
    given = np.array([None if gone else v for gone, v in zip(missing, values)], dtype=object)
    bad = np.flatnonzero([v is not None and v not in PRECISIONS for v in given])
    if len(bad):
        raise invalid(PRECISION, f"must be one of {', '.join(PRECISIONS)}, got {show(given[bad[0]])}", bad)
    return given


def _spec(hardware: str) -> HardwareSpec | None:
    return load_hardware_table().lookup(hardware)


def _rows(rows: np.ndarray | None, picked: np.ndarray) -> np.ndarray:
    """The request rows of ``picked`` (indices into the part), through ``rows`` where the part is a subset."""
    return picked if rows is None else rows[picked]


def answered_precision(
    fitted: Sequence[str], hardware: str, given: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """Each row's precision on ``hardware`` for a law fitted at ``fitted`` (see the module docstring).

    ``given`` is :func:`given_precision` of the rows, ``rows`` their rows in the request (for the error).

    Raises:
        InputError: naming ``precision`` and ``hardware`` where the table's row has no peak at the precision.
    """
    if not fitted:
        return np.full(len(given), TABLE_PRECISION, dtype=object)
    spec = _spec(hardware)
    default = next((p for p in fitted if spec is None or spec.supports(p)), TABLE_PRECISION)
    precision = np.array([default if v is None else str(v) for v in given], dtype=object)
    if spec is not None:
        bad = np.flatnonzero([not spec.supports(p) for p in precision])
        if len(bad):
            known = [p for p in PRECISIONS if spec.supports(p)]
            raise invalid(
                PRECISION,
                f"hardware {hardware!r} ({spec.name}) has no {precision[bad[0]]} peak in the hardware table; "
                f"it gives {', '.join(known)}",
                _rows(rows, bad),
            )
    return precision


def _off(fitted: Sequence[str], spec: HardwareSpec | None, precision: str) -> bool:
    if precision in fitted:
        return False
    return spec is None or not any(spec.same_peak(precision, p) for p in fitted)


def off_fitted(fitted: Sequence[str], hardware: str, precision: np.ndarray) -> np.ndarray:
    """True where a row's precision is off the law's (see the module docstring); never for a law without them."""
    if not fitted:
        return np.zeros(len(precision), dtype=bool)
    spec = _spec(hardware)
    off = {p: _off(fitted, spec, str(p)) for p in dict.fromkeys(precision)}
    return np.array([off[p] for p in precision], dtype=bool)


def why_off(fitted: Sequence[str], hardware: str, precision: str) -> str:
    """Why ``precision`` on ``hardware`` is not answered as the fitted precisions are, in words."""
    spec = _spec(hardware)
    if spec is None:
        return f"the hardware table does not know {hardware!r}, so its peak at {precision} cannot be compared"
    return (
        f"the hardware table's peak of {spec.name} at {precision} ({spec.peak_flops(precision):.4g} FLOP/s) "
        f"is not its peak at {fitted[0]} ({spec.peak_flops(fitted[0]):.4g} FLOP/s)"
    )


def check_one_hardware(law: FittedLaw, given: np.ndarray) -> None:
    """Refuse the rows of a one-GPU law at a precision off its fitted ones (it has no hardware term).

    Raises:
        InputError: naming ``precision`` (and the hardware) for an unsupported or off precision.
    """
    precision = answered_precision(law.precisions, law.hardware, given)
    off = np.flatnonzero(off_fitted(law.precisions, law.hardware, precision))
    if len(off):
        asked = str(precision[off[0]])
        raise invalid(
            PRECISION,
            f"{asked} on {law.hardware!r}: this law was fitted at {', '.join(law.precisions)} and has no hardware "
            f"term, and {why_off(law.precisions, law.hardware, asked)}; ask at {law.precisions[0]}, or fit runs "
            "of several GPUs (the fleet model answers another precision through the pooled covariate form)",
            off,
        )


def precision_groups(
    law: FittedLaw, name: str, given: np.ndarray, rows: np.ndarray
) -> list[tuple[np.ndarray, str | None]]:
    """The rows of one hardware (indices into ``given``) by the precision whose covariates answer them:
    None for a measured GPU's rows at its runs' precision, else the precision (:mod:`serve.precision_routing`).

    Raises:
        InputError: naming ``precision`` for a precision the GPU's row has no peak for, or one off a
            measured GPU's runs where the law has no covariate form.
    """
    measured = name in law.hardware_laws
    fitted = (law.hardware_laws[name] if measured else law).precisions
    precision = answered_precision(fitted, name, given, rows)
    off = off_fitted(fitted, name, precision) if measured else np.ones(len(precision), dtype=bool)
    groups: list[tuple[np.ndarray, str | None]] = [(np.flatnonzero(~off), None)] if (~off).any() else []
    for value in dict.fromkeys(precision[off]):
        group = np.flatnonzero(off & (precision == value))
        if law.covariate_law is None or covariates_at(name, str(value)) is None:
            raise invalid(
                PRECISION,
                f"{value} on {name!r}: its runs were at {', '.join(fitted)}, {why_off(fitted, name, str(value))}, "
                "and this model has no pooled covariate form to carry the peak",
                rows[group],
            )
        groups.append((group, str(value)))
    return groups
