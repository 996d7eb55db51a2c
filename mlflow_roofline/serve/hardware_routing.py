"""Routing rows to hardware: the optional ``hardware`` input column names the GPU each row's job runs on.

A law of one hardware takes no ``hardware`` column, or one naming its own hardware. A
law pooled over several hardware (:attr:`~law.fitted.FittedLaw.hardware_laws`) needs
it: each row is predicted with the pooled energy law and its own hardware's time and
speedup laws. A hardware no run measured is predicted through the pooled covariate form
when the hardware table (:mod:`core.gpu_datasheets`, extendable with
``ROOFLINE_HARDWARE_TABLE``) knows it: ``extrapolated_hardware`` is then true, the
energy interval is widened by the leave-one-hardware-out error (``loho_mape``: the
bounds move out by a factor ``1 + loho_mape/100``), its speedup laws come from the reference
hardware (the measured hardware with the most runs) and its single-device time from the roofline in time
pooled over the measured GPUs (:func:`pooled_log_time`, the output column ``time_scaled_from`` then says
:data:`POOLED_TIME`). The energy is found with the reference's single-device time scaled by the roofline
(and so is the time of a law without a pooled time law, ``time_scaled_from`` naming the reference): a job of arithmetic
intensity ``I = C/M`` (FLOPs per element, ``MEM_BYTES_PER_ELEMENT`` bytes each) takes
``max(1/P, bytes_per_element/(I*B))`` seconds per FLOP on a GPU of peak ``P`` FLOP/s and
bandwidth ``B`` bytes/s, so the time is multiplied by the ratio of that figure on the
unmeasured GPU to the reference's. A compute-bound job (intensity above both ridge points
``P/B``) scales with peak FLOP/s, a memory-bound one with bandwidth: more FLOP/s at the
same bandwidth never makes a memory-bound job faster. The speedup there is, per strategy,
the comm-time law pooled over the measured GPUs (:attr:`~law.fitted.FittedLaw.unmeasured_speedup_laws`,
:mod:`fit.pooled_speedup`), its seconds per element moved scaled to the GPU's interconnect
(the table's ``interconnect_bytes_per_s``), where it beat the N-only law by leave one GPU out
and the table gives the GPU's interconnect within a factor ``LINK_REACH`` (2) of the
interconnects it was fitted on (a PCIe T4 is not predicted from NVLink GPUs); else the reference's N-only law
(:attr:`~law.fitted.FittedLaw.n_only_speedup_laws`), never the reference's own comm-time
constants, which do not carry over to another GPU (effective bandwidth and overlap trade off
where communication hides behind compute). A name neither the law nor the
table knows is refused with the list of the hardware the model knows. Recommend and pareto
mode (:func:`law_for_search`) search one hardware per request, a GPU of the table included.
The fleet model of a multi-GPU fit routes rows to such laws first (:mod:`serve.fleet_routing`).
Each row's covariates are its GPU's at the row's ``precision`` (:func:`covariates_at`); a measured
GPU asked at a precision whose peak differs from its runs' is answered like a GPU no run measured,
its time scaled by the roofline from its own (:mod:`serve.precision_routing`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.gpu_datasheets import COVARIATE_NAMES, TABLE_PRECISION, load_hardware_table
from mlflow_roofline.core.proxies import MEM_BYTES_PER_ELEMENT, proxy_flops, proxy_mem_traffic
from mlflow_roofline.core.schema import HARDWARE_COLUMN
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.log_features import LOG_FLOPS_SCALE, SCALED_FLOPS_FEATURES
from mlflow_roofline.law.speedup import SpeedupLaw, on_link, within_reach
from mlflow_roofline.serve.errors import invalid, show
from mlflow_roofline.serve.frames import optional_object_column


def covariates_at(name: str, precision: str = TABLE_PRECISION) -> dict[str, float] | None:
    """The covariates of a GPU the hardware table knows at ``precision`` (None when the table does not know it;
    the precision is one its row gives: :func:`serve.precision_routing.answered_precision`)."""
    spec = load_hardware_table().lookup(name)
    return spec.covariates(precision) if spec is not None else None


def resolve_hardware(frame: pd.DataFrame, law: FittedLaw) -> tuple[np.ndarray | None, dict[str, dict[str, float]]]:
    """The validated ``hardware`` column (None when the law needs none) and the covariates of unmeasured ones.

    Raises:
        InputError: the column is missing where the law knows several hardware, holds a
            non-text value, or names a hardware neither the law nor (for a pooled law with
            a covariate form) the hardware table knows.
    """
    known = law.known_hardware
    values = optional_object_column(frame, HARDWARE_COLUMN)
    if values is None:
        if len(known) > 1:
            raise invalid(
                HARDWARE_COLUMN,
                f"missing column; this model knows {len(known)} hardware, say which per row: {', '.join(known)}",
            )
        return None, {}
    not_text = np.flatnonzero([not isinstance(v, str) for v in values])
    if len(not_text):
        raise invalid(HARDWARE_COLUMN, f"must be a hardware name, got {show(values[not_text[0]])}", not_text)
    extra: dict[str, dict[str, float]] = {}
    for name in sorted(set(values) - set(known)):
        covariates = covariates_at(name) if law.covariate_law is not None else None
        if covariates is None:
            rows = np.flatnonzero(values == name)
            table = " (or a GPU of the hardware table)" if law.covariate_law is not None else ""
            raise invalid(
                HARDWARE_COLUMN, f"unknown hardware {name!r}; this model knows {', '.join(known)}{table}", rows
            )
        extra[name] = covariates
    return values, extra


def unscaled(job: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """``job``'s features with the FLOPs as counted, where a GPU's law scaled them to its reference precision's
    peak (:data:`law.log_features.LOG_FLOPS_SCALE`): the pooled forms see each row's peak through its covariates."""
    log_scale = job.get(LOG_FLOPS_SCALE)
    if log_scale is None or not np.any(log_scale):
        return job
    return {**job, **{name: job[name] - log_scale for name in SCALED_FLOPS_FEATURES}, LOG_FLOPS_SCALE: 0.0 * log_scale}


def on_covariates(job: Mapping[str, np.ndarray], covariates: Mapping[str, float]) -> dict[str, np.ndarray]:
    """``job``'s features (FLOPs as counted, :func:`unscaled`) with each row given the GPU's ``covariates``: what a
    law pooled over GPUs by their datasheets reads."""
    n_rows = len(job["strategy"])
    return {
        **unscaled(job),
        **{name: np.full(n_rows, covariates[name]) for name in COVARIATE_NAMES if name in covariates},
    }


def pooled_energy(
    law: FittedLaw,
    job: Mapping[str, np.ndarray],
    hardware: str,
    covariates: Mapping[str, float],
    covariate_form: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and interval of log E (log joules) of rows all on ``hardware``, from the pooled law.

    ``job`` is the rows' law features (:func:`~mlflow_roofline.serve.predict.job_features`).
    A measured hardware uses the chosen pooled form; an unmeasured one, or a measured one at a
    precision off its runs' (``covariate_form``, :mod:`serve.precision_routing`), the covariate
    form, its interval widened by ``log(1 + loho_mape/100)`` on each side.
    """
    features = {
        **on_covariates(job, covariates),
        HARDWARE_COLUMN: np.full(len(job["strategy"]), hardware, dtype=object),
    }
    if hardware in law.hardware_laws and not covariate_form:
        return law.energy_law.predict(features)
    assert law.covariate_law is not None
    mean, lower, upper = law.covariate_law.predict(features)
    loho = law.loho_mape
    widen = float(np.log1p(loho / 100.0)) if loho is not None and np.isfinite(loho) else 0.0
    return mean, lower - widen, upper + widen


POOLED_TIME = "pooled"
"""``time_scaled_from`` of a row timed by the pooled roofline in time (:func:`pooled_log_time`): a GPU no run measured,
or a measured one asked at a precision of another peak than its runs'."""


def pooled_log_time(law: FittedLaw, job: Mapping[str, np.ndarray], covariates: Mapping[str, float]) -> np.ndarray:
    """Log seconds one device takes for each job of ``job`` (law features) on the GPU of ``covariates``, from the
    pooled roofline in time (:attr:`~law.fitted.FittedLaw.unmeasured_time_law`)."""
    assert law.unmeasured_time_law is not None
    return law.unmeasured_time_law.mean(on_covariates(job, covariates))


def reference_hardware(law: FittedLaw) -> str:
    """The measured hardware whose speedup and time laws serve a GPU no run measured (the most runs)."""
    return law.known_hardware[0]


def unmeasured_speedup_laws(law: FittedLaw, own: FittedLaw, covariates: Mapping[str, float]) -> dict[str, SpeedupLaw]:
    """The speedup laws of a GPU no run measured (covariates ``covariates``): see the module docstring."""
    laws = {**own.speedup_laws, **own.n_only_speedup_laws}
    if "log_link" in covariates:
        link = math.exp(covariates["log_link"])
        laws.update(
            {
                strategy: on_link(pooled, link)
                for strategy, pooled in law.unmeasured_speedup_laws.items()
                if within_reach(pooled, link)
            }
        )
    return laws


def log_seconds_per_flop(covariates: Mapping[str, float], intensity: np.ndarray) -> np.ndarray:
    """log of the roofline's seconds per FLOP, ``max(1/P, bytes_per_element/(I*B))``, at ``intensity`` I.

    ``covariates`` gives ``log_peak`` (log FLOP/s) and ``log_ridge`` (log of P/B, FLOP/byte);
    ``intensity`` is in FLOPs per element of the memory proxy.
    """
    flop_per_byte = np.log(intensity) - np.log(MEM_BYTES_PER_ELEMENT)
    return -covariates["log_peak"] + np.maximum(0.0, covariates["log_ridge"] - flop_per_byte)


def unmeasured_time_shift(
    law: FittedLaw,
    covariates: Mapping[str, float],
    sizes: Mapping[str, np.ndarray],
    start: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Per row, log of (roofline time on this GPU / on the reference hardware), see the module docstring.

    ``start``: the covariates the time law's own runs had (default: the reference hardware's; a measured
    GPU asked at another precision: its own at its runs' precision). Zero where ``start`` lacks
    ``log_peak`` or ``log_ridge`` (a law without covariates).
    """
    reference = law.covariates.get(reference_hardware(law), {}) if start is None else start
    size = {k: np.asarray(sizes[k], dtype=float) for k in ("num_layers", "hidden_size", "seq_len", "batch_size")}
    steps = np.ones(len(size["num_layers"]))
    intensity = proxy_flops(**size, num_steps=steps) / proxy_mem_traffic(**size, num_steps=steps)
    if not all(k in reference and k in covariates for k in ("log_peak", "log_ridge")):
        return np.zeros(len(intensity))
    return log_seconds_per_flop(covariates, intensity) - log_seconds_per_flop(reference, intensity)


def law_for_search(frame: pd.DataFrame, law: FittedLaw) -> tuple[FittedLaw, dict[str, dict[str, float]]]:
    """The law recommend and pareto modes take their candidates from, and the covariates of an unmeasured GPU.

    A one-hardware law: itself. A pooled law: the own law of the one hardware named, or for a
    GPU of the hardware table no run measured, the reference hardware's law with that GPU's
    speedup laws (:func:`unmeasured_speedup_laws`) and the GPU's covariates (its energy is the
    pooled covariate form's, its time scaled by the roofline, as in predict mode).

    Raises:
        InputError: a pooled law without a ``hardware`` column, or with several hardware in one request.
    """
    if not law.hardware_laws:
        return law, {}
    values, unmeasured = resolve_hardware(frame, law)
    assert values is not None  # resolve_hardware requires the column of a pooled law
    names = list(dict.fromkeys(values))
    if len(names) > 1:
        raise invalid(
            HARDWARE_COLUMN,
            f"this mode searches one hardware per request; name one of {', '.join(law.known_hardware)} "
            "(or a GPU of the hardware table) in every row",
            np.flatnonzero(values != names[0]),
        )
    if names[0] in unmeasured:
        reference = law.hardware_laws[reference_hardware(law)]
        moved = dataclasses.replace(
            reference, speedup_laws=unmeasured_speedup_laws(law, reference, unmeasured[names[0]])
        )
        return moved, unmeasured
    return law.hardware_laws[names[0]], {}
