"""What a measured job logs at its start and its end, in the train run's schema.

Start: ``roofline.run_type=train``, ``roofline.source``, the resolved device, the meter
and the budget. End: the train params as measured (``num_steps`` = the steps the window
held), the proxies (:func:`~mlflow_roofline.core.proxies.proxy_metrics`), the train tags
with ``roofline.config_hash`` / ``workload_hash`` computed as for a train run
(:func:`~mlflow_roofline.train.tracked_run.train_tags`), the window's totals through
:func:`~mlflow_roofline.tracking.energy_logging.measurement_metrics` (as ``measure`` and
``track_energy`` log theirs), per-rank figures, and the power timeline artifact.
"""

from __future__ import annotations

import statistics
from typing import Any

from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    M_ENERGY_J,
    M_SAMPLES_PER_S,
    M_STEP_TIME_S,
    M_TIME_S,
    P_METER,
    TAG_CONFIG_WARNING,
    TAG_DEVICE,
    TAG_ENERGY_SCOPE,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
    TAG_SOURCE,
)
from mlflow_roofline.energy.base import EnergyMeter, Measurement
from mlflow_roofline.integrations.run_log import TIMELINE_ARTIFACT, timeline_csv
from mlflow_roofline.integrations.tracker_sync import budget_tag


def start_tags(tracker: Any, meter: EnergyMeter) -> dict[str, str]:
    """The tags known before training: what kind of run this is, where it runs, how it is measured."""
    tags = {
        TAG_RUN_TYPE: "train",
        TAG_SOURCE: tracker.source,
        TAG_HARDWARE: tracker.hardware,
        TAG_ENERGY_SCOPE: meter.scope,
        **budget_tag(tracker.options),
    }
    if tracker.facts.device:
        tags[TAG_DEVICE] = tracker.facts.device
    return tags


def log_summary(tracker: Any) -> None:
    """Log the run's params, proxies, totals, per-rank figures, tags and power timeline."""
    from mlflow_roofline.tracking.energy_logging import measurement_metrics, measurement_tags
    from mlflow_roofline.train.tracked_run import train_tags

    run, facts = tracker.run, tracker.facts
    steps = tracker.samples.steps if tracker.energy_error is None else sum(r[2] for r in tracker.timeline)
    if steps == 0:
        run.log(tracker.last_step, tags={TAG_CONFIG_WARNING: "no measured step: the job ended during warm-up"})
        return
    config, why = facts.config(steps, tracker.options.warmup_steps)
    params = {k: str(v) for k, v in facts.values(steps, tracker.options.warmup_steps).items()}
    run.log_params({**(config.to_params() if config else params), P_METER: tracker.options.meter})
    measurement = Measurement(
        tracker.total_energy_j if tracker.energy_error is None else None,
        {},
        tracker.total_time_s,
        tracker.window.meter.source,
        tracker.energy_error,
        tracker.energy_warning,
    )
    metrics = {**measurement_metrics(measurement), **_throughput(tracker, steps)}
    if tracker.last_sync_step == tracker.last_step:  # the history's last point already holds the totals
        metrics.pop(M_ENERGY_J, None)
        metrics.pop(M_TIME_S, None)
    tags = measurement_tags(measurement, tracker.hardware)
    if config is not None:
        metrics.update(proxy_metrics(config))
        tags.update(train_tags(config, tracker.hardware))
    else:
        tags[TAG_CONFIG_WARNING] = why
    for rank, seconds in tracker.rank_time.items():
        metrics[f"{M_TIME_S}_rank_{rank}"] = seconds
        if tracker.rank_energy.get(rank) is not None:
            metrics[f"{M_ENERGY_J}_rank_{rank}"] = tracker.rank_energy[rank]
    run.log(tracker.last_step, metrics, tags)
    run.log_text(timeline_csv(tracker.timeline), TIMELINE_ARTIFACT)


def _throughput(tracker: Any, steps: int) -> dict[str, float]:
    per_step = [seconds / n for _, seconds, n, _ in tracker.timeline if n > 0]
    metrics = {M_STEP_TIME_S: statistics.median(per_step)} if per_step else {}
    if tracker.facts.batch_size and tracker.total_time_s > 0:
        metrics[M_SAMPLES_PER_S] = tracker.facts.batch_size * steps / tracker.total_time_s
    return metrics
