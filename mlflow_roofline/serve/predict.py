"""Energy and time of each row's job from a :class:`FittedLaw`: pure numpy over whole columns.

Units: energies in joules (``energy_kwh`` in kilowatt-hours), times in seconds, speedup
and efficiency dimensionless. ``energy_j`` and ``time_s`` are the exponentials of the
laws' log-space means, i.e. median predictions; ``energy_j_lower``/``energy_j_upper`` are
the 95 % prediction interval of a single new run, transformed to joules. A law pooled
over several hardware predicts each row on the hardware its ``hardware`` column names
(:mod:`serve.hardware_routing`); ``extrapolated_hardware`` marks rows on a GPU no run measured,
whose speedup laws come from the measured hardware with the most runs and whose time from the roofline in
time pooled over the measured GPUs (``time_scaled_from`` ``pooled``; a law without it: the reference's time
scaled by the roofline, ``time_scaled_from`` naming it; empty on every other row). A measured GPU asked at a
precision of another peak than its runs' is timed the same way (a law without the pooled time law: its own
time scaled by the peaks, ``time_scaled_from`` its name).

A speedup above the device count (efficiency ``eta = S/N`` above 1) is physically
implausible beyond measurement noise: two time measurements with a few percent of
run-to-run scatter each. Rows whose eta exceeds ``1 + ETA_TOLERANCE`` (10 %) are
predicted as asked and flagged ``speedup_implausible``.

Every mode evaluates the law through :func:`evaluate_jobs`, once per (row, placement): predict
mode on the rows as asked, recommend and pareto mode on every candidate placement
(:mod:`serve.placement_search`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.carbon import J_PER_KWH, CarbonSettings
from mlflow_roofline.core.membership import is_in
from mlflow_roofline.core.schema import M_ENERGY_J, M_ENERGY_KWH, M_TIME_S
from mlflow_roofline.law.comm_time import ParallelJob
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.log_features import FLOPS_SCALE, kind_indicators, law_features
from mlflow_roofline.law.speedup import PER_DEVICE_BASELINE
from mlflow_roofline.serve.emissions import emission_columns
from mlflow_roofline.serve.energy_eta import LogEnergy, energy_clock_rows, energy_log_eta
from mlflow_roofline.serve.errors import invalid
from mlflow_roofline.serve.footprint_columns import footprint_columns
from mlflow_roofline.serve.frames import frame_of
from mlflow_roofline.serve.hardware_routing import (
    POOLED_TIME,
    covariates_at,
    pooled_energy,
    pooled_log_time,
    reference_hardware,
    resolve_hardware,
    unmeasured_speedup_laws,
    unmeasured_time_shift,
)
from mlflow_roofline.serve.job_kind import KIND_COLUMNS
from mlflow_roofline.serve.power_limit import board_power_w, power_limit_factor
from mlflow_roofline.serve.precision_routing import PRECISION, check_one_hardware, precision_groups
from mlflow_roofline.serve.validate import validate_jobs

ETA_TOLERANCE = 0.10
"""How far eta = S/N may exceed 1 before a speedup is flagged implausible (relative)."""

TimeShift = Callable[[Mapping[str, np.ndarray]], np.ndarray]
"""Per job of the sizes given, log of (single-device time on a GPU no run measured / on the measured one)."""
LogTime = Callable[[Mapping[str, np.ndarray]], np.ndarray]
"""Per job of the law features given, log seconds on one device: a time law's mean."""

PREDICT_OUTPUT_COLUMNS: tuple[str, ...] = (
    M_ENERGY_J,
    "energy_j_lower",
    "energy_j_upper",
    M_ENERGY_KWH,
    M_TIME_S,
    "speedup",
    "eta",
    "extrapolated",
    "speedup_implausible",
    "extrapolated_hardware",
    "time_scaled_from",
)


def job_features(
    sizes: Mapping[str, np.ndarray], strategy: np.ndarray, n: np.ndarray, speedup: np.ndarray
) -> dict[str, np.ndarray]:
    """The law's features (proxy FLOPs, memory traffic, eta...) of each job: request columns to :func:`law_features`.

    Args:
        sizes: the jobs' integer columns (``num_layers``, ``hidden_size``, ``seq_len``,
            ``batch_size``, ``num_steps``...), one array each, and their kind where known
            (``arch``, ``vocab_size``, ``peft``, ``lora_rank``, ``grad_checkpointing``; the
            paper's encoder where absent), and ``flops_scale`` where the law scales the FLOPs to one
            precision's peak (:func:`with_flops_scale`).
        strategy: each job's parallel strategy.
        n: each job's device count.
        speedup: each job's speedup S(N) over one device.
    """
    return law_features(
        num_layers=sizes["num_layers"],
        hidden_size=sizes["hidden_size"],
        seq_len=sizes["seq_len"],
        batch_size=sizes["batch_size"],
        num_steps=sizes["num_steps"],
        num_devices=n,
        speedup=speedup,
        strategy=strategy,
        ffn_size=sizes.get("ffn_size"),
        flops_scale=sizes.get(FLOPS_SCALE),
        **{name: sizes[name] for name in KIND_COLUMNS if name in sizes},
    )


def with_flops_scale(law: FittedLaw, sizes: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """``sizes`` with each row's FLOPs scale at its ``precision`` where ``law`` has one
    (:attr:`~law.fitted.FittedLaw.flops_scale`: a GPU's law fitted across precisions of different peaks)."""
    scale = law.flops_scale_of(sizes[PRECISION]) if PRECISION in sizes else None
    return sizes if scale is None else {**sizes, FLOPS_SCALE: scale}


def law_speedup(
    law: FittedLaw,
    strategy: np.ndarray,
    n: np.ndarray,
    job: ParallelJob | None = None,
    field: str = "num_devices",
    advice: str = "",
) -> np.ndarray:
    """S(N) from each strategy's speedup law (one vectorised call per strategy).

    ``job`` gives each row's shape and single-device step time to a workload-aware law
    (``comm_time``); without it, such a law answers for its reference job.

    Raises:
        InputError: naming ``field`` (and, for ``num_devices``, the first row) where a law
            gives no positive finite speedup; ``advice`` ends the message.
    """
    speedup = law.speedup(strategy, n, job)
    bad = np.flatnonzero(~np.isfinite(speedup) | (speedup <= 0))
    if len(bad):
        i = bad[0]
        raise invalid(
            field,
            f"the fitted {strategy[i]} speedup law gives no positive speedup at {n[i]:.0f} devices{advice}",
            bad if field == "num_devices" else None,
        )
    return speedup


def single_device_log_time(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    features: Mapping[str, np.ndarray],
    log_time: LogTime | None = None,
) -> np.ndarray:
    """Log seconds one device takes for each job: the single-device time its speedup is relative to.

    ``law.time_law`` at the job's global batch (read from the jobs' ``features``: it reads the size features
    only, log_C and log_M, never eta), or ``log_time`` given the features of the same job on one device;
    for a strategy whose speedup law was fitted on per-device baselines (weak scaling,
    :attr:`SpeedupLaw.baseline`), N times the time law at the per-device batch B/N.
    """
    weak = [name for name, speedup_law in law.speedup_laws.items() if speedup_law.baseline == PER_DEVICE_BASELINE]
    per_device = is_in(strategy, weak)
    if log_time is None and not per_device.any():
        return law.time_law.mean(features)
    batch = np.asarray(sizes["batch_size"], dtype=float)
    shares = {**sizes, "batch_size": np.where(per_device, batch / n, batch)}
    if log_time is not None:  # its features are the one-device job's (device-steps, optimizer traffic at N = 1)
        one = np.ones(len(n))
        log_t1 = log_time(job_features(shares, np.full(len(n), "single", dtype=object), one, one))
    else:
        log_t1 = law.time_law.mean(job_features(shares, strategy, n, n))
    return log_t1 + np.where(per_device, np.log(n), 0.0)


def with_law_speedup(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    speedup: np.ndarray,
    log_t1: np.ndarray,
) -> np.ndarray:
    """``speedup`` (S(N) per job) with the law's speedup (:func:`law_speedup`) where it is NaN, a workload-aware law
    given each job's shape and its single-device step time ``exp(log_t1) / num_steps`` (seconds)."""
    use_law = np.isnan(speedup)
    if not use_law.any():
        return speedup
    out = speedup.copy()
    job = ParallelJob.of(sizes, np.exp(log_t1) / np.asarray(sizes["num_steps"], dtype=float))
    out[use_law] = law_speedup(law, strategy[use_law], n[use_law], job.take(use_law))
    return out


def _extrapolated(law: FittedLaw, known: Mapping[str, np.ndarray], n_rows: int) -> np.ndarray:
    """True where any input or feature lies outside the range the law was fitted on (all ranges at once)."""
    keys = [
        key
        for key in law.ranges
        if (values := known.get(key)) is not None and not (isinstance(values, np.ndarray) and values.dtype == object)
    ]
    if not keys:
        return np.zeros(n_rows, dtype=bool)
    values = np.stack([np.asarray(known[key], dtype=float) for key in keys])  # ranges x rows
    bounds = np.array([law.ranges[key] for key in keys], dtype=float)  # ranges x (lo, hi)
    tol = 1e-9 * np.maximum(1.0, np.abs(bounds).max(axis=1, keepdims=True))
    outside = (values < bounds[:, :1] - tol) | (values > bounds[:, 1:] + tol)
    return np.asarray(outside.any(axis=0))


def evaluate_jobs(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    speedup: np.ndarray,
    log_energy: LogEnergy | None = None,
    log_time_shift: TimeShift | None = None,
    hardware: str | None = None,
    log_time: LogTime | None = None,
) -> dict[str, np.ndarray]:
    """Energy (with interval), time, speedup, eta and the flags of each job: the one evaluation of the law.

    ``speedup`` is each job's S(N); NaN where none was measured, and the law's speedup
    (:func:`law_speedup`) is used there, a workload-aware law given each job's shape and its
    single-device step time from the time law; the energy law's eta term sees that law's eta on
    the energy law's own clock (:mod:`serve.energy_eta`). ``log_energy`` predicts the energy
    (default: ``law.energy_law``; a pooled law's rows pass the pooled one, see
    :func:`evaluate_pooled`). ``log_time_shift`` gives, for the sizes of jobs, the log of the
    ratio that moves the single-device time to a GPU no run measured
    (:func:`~serve.hardware_routing.unmeasured_time_shift`), before the speedup divides it. ``log_time``: the
    single-device time law whose seconds, over the speedup they give, are the time answered (a GPU no run
    measured: the pooled roofline in time, :func:`~serve.hardware_routing.pooled_log_time`), never shorter than
    the energy takes at the board power; the energy is found as without it. Where a job's
    energy and time put its average power per device above the board power of ``hardware`` (default:
    ``law.hardware``), both are moved onto it (:mod:`serve.power_limit`).
    """
    sizes = with_flops_scale(law, sizes)
    features = job_features(sizes, strategy, n, n)  # eta 1 until the speedup is known
    log_t1 = single_device_log_time(law, sizes, strategy, n, features)
    if log_time_shift is not None:
        log_t1 = log_t1 + log_time_shift(sizes)
    given, use_law = speedup, np.isnan(speedup)
    speedup = with_law_speedup(law, sizes, strategy, n, given, log_t1)
    features["log_eta"] = np.log(speedup / n)  # as law_features computes it
    energy_law = log_energy or law.energy_law.predict
    log_e, log_e_lo, log_e_hi = energy_law(
        _energy_features(law, sizes, strategy, n, use_law, features, energy_law, log_time_shift)
    )
    with np.errstate(over="ignore"):
        energy, lower, upper = np.exp(log_e), np.exp(log_e_lo), np.exp(log_e_hi)
        time_s = np.exp(log_t1) / speedup
    board_w = board_power_w(law.hardware if hardware is None else hardware, law.energy_source)
    if np.isfinite(board_w):
        factor = power_limit_factor(energy, time_s, n, board_w)
        energy, lower, upper, time_s = energy * factor, lower * factor, upper * factor, time_s / factor
    if log_time is not None:  # the time answered: another time law's, no shorter than the energy takes at board power
        log_t1 = single_device_log_time(law, sizes, strategy, n, features, log_time)
        speedup = with_law_speedup(law, sizes, strategy, n, given, log_t1)
        with np.errstate(over="ignore"):
            time_s = np.exp(log_t1) / speedup
        if np.isfinite(board_w):
            time_s = np.maximum(time_s, energy / (n * board_w))
    eta = speedup / n
    known = {**sizes, "num_devices": n, "speedup": speedup, "eta": eta, **features, **kind_indicators(features)}
    return {
        M_ENERGY_J: energy,
        "energy_j_lower": lower,
        "energy_j_upper": upper,
        M_ENERGY_KWH: energy / J_PER_KWH,
        M_TIME_S: time_s,
        "speedup": speedup,
        "eta": eta,
        "extrapolated": _extrapolated(law, known, len(n)),
        "speedup_implausible": eta > 1.0 + ETA_TOLERANCE,
        "extrapolated_hardware": np.zeros(len(n), dtype=bool),
        "time_scaled_from": np.full(len(n), "", dtype=object),
    }


def _energy_features(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    use_law: np.ndarray,
    features: dict[str, np.ndarray],
    log_energy: LogEnergy,
    log_time_shift: TimeShift | None,
) -> dict[str, np.ndarray]:
    """``features`` with the eta of the rows a workload-aware speedup law serves on the energy law's clock."""
    clock = energy_clock_rows(law, strategy, use_law)
    if not clock.any():
        return features
    part = {key: np.asarray(values)[clock] for key, values in sizes.items()}
    part_strategy, part_n = strategy[clock], n[clock]

    def part_features(part_sizes: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return job_features(part_sizes, part_strategy, part_n, part_n)

    def part_log_time(part_sizes: Mapping[str, np.ndarray]) -> np.ndarray:
        log_t1 = single_device_log_time(law, part_sizes, part_strategy, part_n, part_features(part_sizes))
        return log_t1 if log_time_shift is None else log_t1 + log_time_shift(part_sizes)

    log_eta = features["log_eta"].copy()
    log_eta[clock] = energy_log_eta(law, part, part_strategy, part_n, part_features, part_log_time, log_energy)
    return {**features, "log_eta": log_eta}


def check_finite(
    out: Mapping[str, np.ndarray],
    rows: np.ndarray | None = None,
    rows_of: Callable[[np.ndarray], np.ndarray] | None = None,
) -> None:
    """Refuse rows whose energy or time leaves float64's range (far outside the fitted ranges).

    An energy or time past about 1.8e308 is infinite, and an energy interval whose lower bound
    underflows to 0 J is no interval: neither has a JSON number, so the row is refused. The
    error names ``rows[i]`` for entry ``i`` of ``out`` (``i`` itself without ``rows``), mapped
    through ``rows_of`` where given (the search modes: a distinct job to the rows that ask it).
    """
    finite = np.isfinite(out["energy_j_upper"]) & (out["energy_j_lower"] > 0) & np.isfinite(out[M_TIME_S])
    if not finite.all():
        bad = np.flatnonzero(~finite)
        where = bad if rows is None else rows[bad]
        raise invalid(
            "model_input",
            "the predicted energy or time lies beyond float64's range: the configuration lies far "
            "outside the ranges the law was fitted on",
            where if rows_of is None else rows_of(where),
        )


def predict_frame(law: FittedLaw, frame: pd.DataFrame, carbon: CarbonSettings | None = None) -> pd.DataFrame:
    """Predict each row's energy, interval, time, speedup and efficiency.

    Args:
        law: the fitted law.
        frame: one row per job, with :data:`~mlflow_roofline.serve.validate.INPUT_COLUMNS`
            and optionally ``speedup`` (a measured S(N); NaN or absent means: use the
            strategy's speedup law).
        carbon: how to turn joules into CO2e and cost (None: joules only).

    Returns:
        A frame with :data:`PREDICT_OUTPUT_COLUMNS`, one row per input row, then the
        emission columns of :mod:`~mlflow_roofline.serve.emissions` that ``carbon`` allows,
        then the embodied-carbon and water columns of :mod:`~mlflow_roofline.serve.footprint_columns`.

    Raises:
        InputError: INVALID_PARAMETER_VALUE naming the field and row of bad input.
    """
    jobs = validate_jobs(frame, law)
    hardware, _ = resolve_hardware(frame, law)
    if hardware is None or not law.hardware_laws:
        check_one_hardware(law, jobs.sizes[PRECISION])
        out = evaluate_jobs(law, jobs.sizes, jobs.strategy, jobs.num_devices, jobs.speedup)
    else:
        out = evaluate_pooled(law, jobs.sizes, jobs.strategy, jobs.num_devices, jobs.speedup, hardware)
    check_finite(out)
    columns = {c: out[c] for c in PREDICT_OUTPUT_COLUMNS}
    columns.update(emission_columns(out, carbon))
    on = hardware if hardware is not None else np.full(len(jobs.num_devices), law.hardware, dtype=object)
    columns.update(footprint_columns(out, on, jobs.num_devices, carbon))
    return frame_of(columns)


def evaluate_pooled(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    speedup: np.ndarray,
    hardware: np.ndarray,
    rows_in_request: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Each hardware's rows: its own law for time and speedup, the pooled law for energy.

    The one evaluation of a pooled law's rows: predict mode on the rows as asked, recommend
    and pareto mode on every candidate placement, so one row gets one energy in every mode.
    Each hardware's rows are split by precision (``sizes["precision"]``, :mod:`serve.precision_routing`):
    a measured GPU at its runs' precision (or one of the same peak) as fitted, any other precision and a
    GPU no run measured through the covariate form at the table's peak of that precision. See
    :mod:`serve.hardware_routing`. ``rows_in_request``: each row's row in the request (for errors).

    Raises:
        InputError: naming ``precision`` for a precision the GPU's row has no peak for, or one off a
            measured GPU's runs where the law has no covariate form.
    """
    out: dict[str, np.ndarray] = {}
    given = sizes.get(PRECISION, np.full(len(hardware), None, dtype=object))
    request_rows = np.arange(len(hardware)) if rows_in_request is None else rows_in_request
    for name in dict.fromkeys(hardware):
        rows = np.flatnonzero(hardware == name)
        for group, precision in precision_groups(law, str(name), given[rows], request_rows[rows]):
            at = rows[group]
            part_sizes = {k: v[at] for k, v in sizes.items()}
            part = _evaluate_on(law, str(name), precision, part_sizes, strategy[at], n[at], speedup[at])
            for key, values in part.items():
                out.setdefault(key, np.empty(len(hardware), dtype=values.dtype))[at] = values
    return out


def _evaluate_on(
    law: FittedLaw,
    name: str,
    precision: str | None,
    sizes: Mapping[str, np.ndarray],
    strategy: np.ndarray,
    n: np.ndarray,
    speedup: np.ndarray,
) -> dict[str, np.ndarray]:
    """Rows all on hardware ``name`` of a pooled law, at ``precision`` (None: a measured GPU as fitted)."""
    measured = name in law.hardware_laws
    own = law.hardware_laws[name] if measured else law.hardware_laws[reference_hardware(law)]
    if precision is None:
        pooled = functools.partial(pooled_energy, law, hardware=name, covariates=law.covariates.get(name) or {})
        return evaluate_jobs(own, sizes, strategy, n, speedup, pooled, hardware=name)
    covariates = covariates_at(name, precision) or {}
    pooled = functools.partial(pooled_energy, law, hardware=name, covariates=covariates, covariate_form=True)
    own = dataclasses.replace(own, flops_scale={})  # its time at its reference precision, which the shift moves
    start = law.covariates.get(name, {}) if measured else None
    shift = functools.partial(unmeasured_time_shift, law, covariates, start=start)
    moved = own if measured else dataclasses.replace(own, speedup_laws=unmeasured_speedup_laws(law, own, covariates))
    # the time answered: the pooled roofline in time at this precision's peaks, for a measured GPU off its runs'
    # precision as for a GPU no run measured (its own law times the peaks' ratio missed by more: docs/benchmarks.md,
    # `fleet_loho.py --precisions`)
    timed_by_pool = law.unmeasured_time_law is not None
    log_time = functools.partial(pooled_log_time, law, covariates=covariates) if timed_by_pool else None
    part = evaluate_jobs(moved, sizes, strategy, n, speedup, pooled, shift, hardware=name, log_time=log_time)
    timed_from = POOLED_TIME if timed_by_pool else name if measured else reference_hardware(law)
    part["extrapolated_hardware"] = np.ones(len(n), dtype=bool)
    part["time_scaled_from"] = np.full(len(n), timed_from, dtype=object)
    return part
