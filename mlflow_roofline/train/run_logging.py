"""The MLflow run of one train job: open or join it, log what is known, end it with a status.

Through :class:`~mlflow_roofline.tracking.client.TrackingClient` only (no fluent active
run): nothing process-wide is left behind, so train runs can follow each other in one
process, and joining the run ``MLFLOW_RUN_ID`` names (``mlflow run``, the sweep) does not
depend on a fluent experiment set earlier.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError, Interrupted, RooflineError
from mlflow_roofline.core.footprint_fields import footprint_fields
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    M_ENERGY_CPU_J,
    M_ENERGY_DRAM_J,
    M_ENERGY_J,
    M_ENERGY_METER_DISAGREEMENT,
    M_ENERGY_NODE_J,
    M_FINAL_LOSS,
    M_FLOPS_COUNTED,
    M_LOSS,
    M_POWER_W,
    M_SAMPLES_PER_S,
    M_STEP_TIME_S,
    M_TIME_S,
    M_WARMUP_ENERGY_J,
    MAX_TAG_CHARS,
    P_METER,
    POWER_PLOT_ARTIFACT,
    SOURCE_TRAIN,
    TAG_CONFIG_HASH,
    TAG_DEVICE,
    TAG_ENERGY_NODE_ERROR,
    TAG_ENERGY_SCOPE,
    TAG_ERROR,
    TAG_HARDWARE,
    TAG_METER_CHECK,
    TAG_RUN_TYPE,
    TAG_SOURCE,
    TAG_WARMUP_ENERGY_ERROR,
    TAG_WORKLOAD_HASH,
)
from mlflow_roofline.energy.base import Measurement
from mlflow_roofline.system.signals import deferring_stop_signals
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.client import MetricPoint, TrackingClient, now_ms
from mlflow_roofline.tracking.energy_logging import measurement_metrics, measurement_tags
from mlflow_roofline.tracking.experiments import experiment_id_for
from mlflow_roofline.tracking.notes import description_tags
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs
from mlflow_roofline.tracking.run_ending import end_run_surely
from mlflow_roofline.tracking.run_ownership import RUN_ID_ENV, check_joinable, same_param
from mlflow_roofline.tracking.store_errors import patiently
from mlflow_roofline.train.description import train_description
from mlflow_roofline.train.job_energy import JobExtras
from mlflow_roofline.train.job_io import JobResult

logger = logging.getLogger(__name__)

ERROR_ARTIFACT = "error.txt"
ERROR_TAIL_LINES = 25


@contextlib.contextmanager
def train_run(
    client: TrackingClient,
    experiment: str | None,
    run_name: str | None,
    params: Mapping[str, str] | None = None,
    watchdog: Watchdog | None = None,
) -> Iterator[str]:
    """Open (or join) the run; end it FINISHED, or FAILED / KILLED with the error recorded.

    The run is the one ``MLFLOW_RUN_ID`` names, else a new one in ``experiment`` (else
    MLflow's ``MLFLOW_EXPERIMENT_ID``/``_NAME``, else ``roofline-bert``). A named run is
    first checked against ``params`` (:func:`~mlflow_roofline.tracking.run_ownership.check_joinable`):
    one that may not be joined raises ``RunRefused`` and is left untouched. ``client`` is the
    command's one tracking client. ``watchdog``: the command's; its hook that ends the run KILLED
    is armed once the run is open and taken back only once the store holds the run ended, so a
    run whose ending interrupts cut short is still ended after this process is gone.
    """
    run_id = os.environ.get(RUN_ID_ENV)
    if run_id:
        check_joinable(client, run_id, "train", params)
        client.join_run(run_id, run_name)
    else:
        run_id = client.open_run(experiment_id_for(client, experiment), run_name)
    hook = orphan_hook_kwargs(run_id, client.tracking_uri) if watchdog is not None else {}
    if watchdog is not None:
        watchdog.arm(END_ORPHANED_RUN, **hook)

    def settled(ended: bool) -> None:
        if ended and watchdog is not None:
            watchdog.cancel(END_ORPHANED_RUN, **hook)

    try:
        yield run_id
    except (Interrupted, KeyboardInterrupt) as exc:
        with deferring_stop_signals():  # a second and a third Ctrl-C do not cut the ending short
            record_failure(client, run_id, f"interrupted ({exc or 'signal'})", "")
            # whoever stopped it may write the store too
            settled(patiently(lambda: end_run_surely(client, run_id, "KILLED")))
        raise
    except BaseException as exc:
        with deferring_stop_signals():
            detail = getattr(exc, "detail", "") if isinstance(exc, RooflineError) else traceback.format_exc()
            record_failure(client, run_id, str(exc) or type(exc).__name__, detail)
            settled(end_run_surely(client, run_id, "FAILED"))
        raise
    else:
        settled(end_run_surely(client, run_id, "FINISHED", redeliver=True))


def record_failure(client: TrackingClient, run_id: str, message: str, detail: str) -> None:
    """Tag ``roofline.error`` with the error's last lines; keep the whole text as ``error.txt``."""
    text = f"{detail.rstrip()}\n{message}".strip() if detail and message not in detail else (detail or message)
    tail = "\n".join(text.strip().splitlines()[-ERROR_TAIL_LINES:])[-MAX_TAG_CHARS:]
    try:
        client.set_tag(run_id, TAG_ERROR, tail)
        client.log_text(run_id, text + "\n", ERROR_ARTIFACT)
    except Exception as exc:  # the run must still be ended; the error itself is raised by the caller
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        logger.warning("could not record the error on run %s: %s", run_id, first_line)


def log_setup(
    client: TrackingClient,
    run_id: str,
    config: TrainConfig,
    meter: str,
    hardware: str,
    tags: Mapping[str, str] | None = None,
) -> None:
    """Params and tags: what is known before training (the proxies are logged after the measurement, by
    :func:`log_result`, so that the run's page lists energy and time first). ``tags``: more tags for the
    same store batch (the sweep's: which process measures the run).

    A param the run already holds (``mlflow run`` logs the entry point's parameters) is
    left as it is when it says the same (``"4.0"`` for 4); ``device=auto`` stays, the
    resolved device is the tag ``roofline.device``. A param that contradicts the
    configuration is an error: MLflow cannot change a logged param.

    Raises:
        ConfigError: a param of the run contradicts the configuration.
    """
    existing = client.get_run(run_id).data.params
    params = {}
    for name, value in {**config.to_params(), P_METER: meter}.items():
        if name not in existing:
            params[name] = value
        elif not same_param(name, existing[name], value):
            raise ConfigError(name, f"the run already has {name}={existing[name]!r}, which contradicts {value!r}")
    setup_tags = {**train_tags(config, hardware), TAG_DEVICE: config.device, TAG_SOURCE: SOURCE_TRAIN, **(tags or {})}
    client.log(run_id, params=params, tags=setup_tags)  # the proxies follow the measurement (log_result)


def train_tags(config: TrainConfig, hardware: str) -> dict[str, str]:
    """The tags that make a run a train run of ``config`` on ``hardware`` (run type, hashes)."""
    return {
        TAG_RUN_TYPE: "train",
        TAG_HARDWARE: hardware,
        TAG_CONFIG_HASH: config.config_hash(hardware),
        TAG_WORKLOAD_HASH: config.workload_hash(hardware),
    }


def log_result(
    client: TrackingClient, run_id: str, config: TrainConfig, result: JobResult, carbon: CarbonSettings | None = None
) -> None:
    """The measured metrics (docs/schema.md), energy and time first, per-rank figures, the proxies, the loss
    history, energy and carbon tags, and the run's description (one paragraph).

    ``energy_j`` and ``avg_power_w`` are logged only when every reading succeeded;
    otherwise ``roofline.energy_error`` says why (energy is never a stand-in zero). With
    ``carbon``, the run's ``roofline.hardware`` (tagged by :func:`log_setup`) and region also give
    ``embodied_co2e_g`` and ``water_l`` where their figures are known, else tags naming the
    missing figure (:mod:`~mlflow_roofline.core.footprint_fields`).
    """
    # The job's window as one measurement: energy_j, time_s, avg_power_w and the energy
    # tags are logged exactly as for any other measured window (measure, track_energy).
    window = Measurement(
        result.energy_j, {}, result.time_s, result.energy_source, result.energy_error, result.energy_warning
    )
    samples = config.batch_size * config.num_steps
    metrics: dict[str, float] = {
        **measurement_metrics(window, carbon),
        M_FLOPS_COUNTED: float(result.flops_per_step * config.num_steps),
        M_STEP_TIME_S: result.step_time_s,
        M_SAMPLES_PER_S: samples / result.time_s,
        M_FINAL_LOSS: result.losses[-1],
    }
    for rank in result.ranks:
        metrics[f"{M_TIME_S}_rank_{rank.rank}"] = rank.time_s
        if rank.read and rank.energy_j is not None:
            metrics[f"{M_ENERGY_J}_rank_{rank.rank}"] = rank.energy_j
    tags = {**measurement_tags(window, carbon=carbon), TAG_ENERGY_SCOPE: result.energy_scope}
    if carbon is not None:
        hardware = client.get_run(run_id).data.tags.get(TAG_HARDWARE)
        footprint = footprint_fields(hardware, config.num_devices, result.time_s, result.energy_j, carbon)
        metrics.update(footprint[0])
        tags.update(footprint[1])
    extra_metrics, extra_tags = extras_fields(result.extras)
    paragraph = train_description(config, result.energy_j, result.time_s, result.energy_source, result.energy_error)
    now = now_ms()
    # energy and time first: MLflow's run page lists a run's metrics in the order they were first logged
    first = {k: metrics[k] for k in (M_ENERGY_J, M_TIME_S) if k in metrics}
    ordered = {**first, **metrics, **extra_metrics, **proxy_metrics(config)}
    points = [MetricPoint(k, v, 0, now) for k, v in ordered.items()]
    points += [MetricPoint(M_LOSS, loss, step, now) for step, loss in enumerate(result.losses)]
    points += [MetricPoint(M_POWER_W, w, i, int(t * 1000)) for i, (t, w) in enumerate(result.extras.power_timeline)]
    # one store batch (more only past the store's 1000 entities): the metrics in that order, then the
    # histories, the tags and the run's description
    client.log_history(run_id, points, tags={**tags, **extra_tags, **description_tags(paragraph)})
    if result.extras.power_timeline:
        log_power_plot(client, run_id, result.extras, result.energy_source)


def extras_fields(extras: JobExtras) -> tuple[dict[str, float], dict[str, str]]:
    """The metrics and tags of the figures beside ``energy_j``: warm-up, node energy, cross-check."""
    values = {
        M_WARMUP_ENERGY_J: extras.warmup_energy_j,
        M_ENERGY_CPU_J: extras.energy_cpu_j,
        M_ENERGY_DRAM_J: extras.energy_dram_j,
        M_ENERGY_NODE_J: extras.energy_node_j,
        M_ENERGY_METER_DISAGREEMENT: extras.meter_disagreement,
    }
    notes = {
        TAG_WARMUP_ENERGY_ERROR: extras.warmup_error,
        TAG_ENERGY_NODE_ERROR: extras.node_error,
        TAG_METER_CHECK: extras.meter_check,
    }
    return (
        {k: float(v) for k, v in values.items() if v is not None},
        {k: v[:MAX_TAG_CHARS] for k, v in notes.items() if v},
    )


def log_power_plot(client: TrackingClient, run_id: str, extras: JobExtras, source: str) -> None:
    """Log the power timeline as the PNG artifact ``power_timeline.png`` (train window shaded)."""
    from mlflow_roofline.train.power_plot import save_power_plot  # imports matplotlib, heavy: only when plotting

    with tempfile.TemporaryDirectory(prefix="roofline-plot-") as tmp:
        path = save_power_plot(
            Path(tmp) / POWER_PLOT_ARTIFACT,
            extras.power_timeline,
            extras.window_start,
            extras.window_end,
            title=f"power ({source})",
        )
        client.log_artifact(run_id, str(path))
