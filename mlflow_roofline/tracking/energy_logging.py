"""Log energy measurements to MLflow (through the TrackingClient; :func:`track_energy` uses MLflow's
active run, as a user's ``with mlflow.start_run()`` block expects): :func:`track_energy` and :func:`log_measurement`.

>>> import mlflow, mlflow_roofline
>>> with mlflow.start_run():
...     with mlflow_roofline.track_energy() as w:
...         train()
...     w.measurement.energy_j

Metrics: ``energy_j`` (joules), ``time_s`` (seconds), ``avg_power_w`` (watts), and
``energy_kwh``, ``co2e_g`` (grams CO2e, when the carbon intensity is known) and ``cost``
(when a price is known); tags ``roofline.energy_source``, ``roofline.hardware``, the
carbon tags of :func:`~mlflow_roofline.core.carbon.carbon_tags` and, when there is one,
``roofline.energy_error`` / ``roofline.energy_warning``. A meter of shared GPUs adds
``energy_device_j`` (the whole GPUs; ``energy_j`` is then this job's share) and
``roofline.gpu_share``; a Grace Hopper module tags ``roofline.energy_scope=module``. The
carbon intensity may come from a live provider (``ROOFLINE_CARBON_PROVIDER``), averaged over
the window where the provider gives history. A failed reading logs no
``energy_j`` (never a zero) and says why in ``roofline.energy_error``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import mlflow

from mlflow_roofline.core.carbon import CarbonSettings, carbon_tags, emissions, over_window, resolve_carbon_live
from mlflow_roofline.core.schema import (
    M_AVG_POWER_W,
    M_ENERGY_DEVICE_J,
    M_ENERGY_J,
    M_TIME_S,
    MAX_TAG_CHARS,
    P_METER,
    SCOPE_MODULE,
    TAG_ENERGY_ERROR,
    TAG_ENERGY_SCOPE,
    TAG_ENERGY_SOURCE,
    TAG_ENERGY_WARNING,
    TAG_GPU_SHARE,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
)
from mlflow_roofline.energy.base import EnergyMeter, Measurement, Window
from mlflow_roofline.energy.estimate import resolve_watts_per_core
from mlflow_roofline.energy.select import MeterOptions, make_meter
from mlflow_roofline.tracking.api_options import check_options
from mlflow_roofline.tracking.client import RunStatus, TrackingClient
from mlflow_roofline.tracking.run_ending import end_run_surely, failure_outcome

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+
    from typing_extensions import Unpack

BLOCK = "the measured block"
"""What raised, in the reason of a run :func:`track_energy` opened and a block's exception ended."""


def measurement_metrics(measurement: Measurement, carbon: CarbonSettings | None = None) -> dict[str, float]:
    """The metrics of a measurement: ``time_s`` always, energy and power when measured.

    With ``carbon``, a measured energy also gives ``energy_kwh`` and, where known,
    ``co2e_g`` (grams) and ``cost`` (see :func:`~mlflow_roofline.core.carbon.emissions`).
    """
    metrics = {M_TIME_S: measurement.time_s}
    if measurement.energy_j is not None:
        metrics[M_ENERGY_J] = measurement.energy_j
        if measurement.energy_device_j is not None:
            metrics[M_ENERGY_DEVICE_J] = measurement.energy_device_j
        if measurement.avg_power_w is not None:
            metrics[M_AVG_POWER_W] = measurement.avg_power_w
        if carbon is not None:
            metrics.update(emissions(measurement.energy_j, carbon))
    return metrics


def measurement_tags(
    measurement: Measurement,
    hardware: str | None = None,
    carbon: CarbonSettings | None = None,
    scope: str | None = None,
) -> dict[str, str]:
    """The tags of a measurement: its source, the hardware (when given), the carbon tags, how a
    shared GPU was attributed, the meter's scope when it is a module, any error or warning."""
    tags = {TAG_ENERGY_SOURCE: measurement.source}
    if measurement.gpu_share is not None:
        tags[TAG_GPU_SHARE] = measurement.gpu_share[:MAX_TAG_CHARS]
    if scope == SCOPE_MODULE:
        tags[TAG_ENERGY_SCOPE] = scope
    if carbon is not None:
        tags.update(carbon_tags(carbon))
    if hardware is not None:
        tags[TAG_HARDWARE] = hardware
    if measurement.error:
        tags[TAG_ENERGY_ERROR] = measurement.error[:MAX_TAG_CHARS]
    if measurement.warning:
        tags[TAG_ENERGY_WARNING] = measurement.warning[:MAX_TAG_CHARS]
    return tags


def log_measurement(
    measurement: Measurement,
    hardware: str,
    run_id: str | None = None,
    carbon: CarbonSettings | None = None,
    *,
    client: TrackingClient | None = None,
    scope: str | None = None,
) -> None:
    """Log a measurement's metrics and tags to ``run_id`` (default: MLflow's active run) in one batch.

    ``carbon`` converts the energy to emissions and cost; None resolves it from the
    ``ROOFLINE_*`` env vars (:func:`~mlflow_roofline.core.carbon.resolve_carbon_live`, a live
    provider included); a live intensity is averaged over the window where the provider
    gives history. ``client`` is the store to write to (default: MLflow's current one);
    ``scope`` the meter's (``module`` is tagged).
    """
    if run_id is None:
        run = mlflow.active_run()
        if run is None:
            raise RuntimeError("log_measurement: no active MLflow run and no run_id given")
        run_id = run.info.run_id
    carbon = resolve_carbon_live() if carbon is None else carbon
    carbon = over_window(carbon, measurement.started_at, measurement.time_s)
    (client or TrackingClient()).log(
        run_id,
        metrics=measurement_metrics(measurement, carbon),
        tags=measurement_tags(measurement, hardware, carbon, scope),
    )


def track_energy(
    meter: str | EnergyMeter = "auto",
    *,
    device: str = "auto",
    gpu_indices: list[int] | None = None,
    carbon: CarbonSettings | None = None,
    **options: Unpack[MeterOptions],
) -> contextlib.AbstractContextManager[Window]:
    """Measure the energy of a block and log it to the active MLflow run.

    Args:
        meter: a meter name (see :data:`~mlflow_roofline.energy.METER_NAMES`) or a
            meter you built (left open for reuse); a named one is closed afterwards.
        device: where the block's work runs (``auto``, ``cuda``, ``cpu``), for ``auto``.
        gpu_indices: CUDA ordinals to read with the NVML meters.
        carbon: how to convert the energy to ``co2e_g`` and ``cost``; None resolves it from
            the ``ROOFLINE_*`` env vars and a live provider (before the block runs, so a bad
            value fails early).
        options: passed to :func:`~mlflow_roofline.energy.make_meter`.
    Yields:
        a :class:`~mlflow_roofline.energy.Window` whose ``measurement`` is set after the block.

    Without an active run, one is started for the block (``roofline.run_type=measure``)
    and ended after it: FINISHED, or, with the reason in ``roofline.error``, KILLED after a
    Ctrl-C and FAILED after another exception of the block (a second Ctrl-C while the run
    ends does not leave it RUNNING). The measurement is
    logged even when the block raises. Raises MeterError before the block runs when
    the meter is unavailable here.

    Raises:
        ConfigTypeError: an unknown option or one of the wrong type, naming it (at the call).
        ConfigError: an option out of range or an unknown meter name, naming it and what it takes.
    """
    named = {} if isinstance(meter, EnergyMeter) else {P_METER: meter}
    given = {**named, "device": device, "gpu_indices": gpu_indices, "carbon": carbon, **options}
    check_options("track_energy", given)
    if isinstance(options.get("watts_per_core"), str):
        resolve_watts_per_core(options["watts_per_core"])  # a string is read as a number of watts
    return _tracked(meter, device, gpu_indices, carbon, options)


@contextlib.contextmanager
def _tracked(
    meter: str | EnergyMeter,
    device: str,
    gpu_indices: list[int] | None,
    carbon: CarbonSettings | None,
    options: MeterOptions,
) -> Iterator[Window]:
    """The block of :func:`track_energy`."""
    carbon = resolve_carbon_live() if carbon is None else carbon
    own_meter = isinstance(meter, str)
    built = make_meter(meter, device, gpu_indices, **options) if isinstance(meter, str) else meter
    own_run = mlflow.active_run() is None
    try:
        active = mlflow.active_run()
        run = mlflow.start_run(tags={TAG_RUN_TYPE: "measure"}) if active is None else active
        outcome: tuple[RunStatus, str | None] = ("FAILED", None)
        handle = Window()
        try:
            built.begin()
        except BaseException as exc:
            if own_run:
                end_run_surely(TrackingClient(), run.info.run_id, *failure_outcome(exc, "", "starting the meter"))
            raise
        try:
            yield handle
            outcome = ("FINISHED", None)
        except BaseException as exc:
            outcome = failure_outcome(exc, "", BLOCK)
            raise
        finally:
            handle.measurement = built.end()
            try:
                log_measurement(handle.measurement, built.hardware, run.info.run_id, carbon, scope=built.scope)
            finally:
                if own_run:
                    end_run_surely(TrackingClient(), run.info.run_id, *outcome, redeliver=outcome[0] == "FINISHED")
    finally:
        if own_meter:
            built.close()
