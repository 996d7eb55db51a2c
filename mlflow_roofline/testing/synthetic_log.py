"""Log synthetic train runs to MLflow with the exact run schema of docs/schema.md.

:func:`log_runs` writes a frame of runs (the columns of
:func:`~mlflow_roofline.testing.synthetic.generate_synthetic_runs`) as one MLflow train
run per row: the 12 params, the proxy metrics, ``energy_j``, ``time_s``, ``step_time_s``,
``samples_per_s``, ``avg_power_w`` and the ``roofline.*`` tags. ``flops_counted`` is not
logged: nothing was counted.
"""

from __future__ import annotations

import time

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Metric, Param

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    KIND_PARAM_NAMES,
    M_AVG_POWER_W,
    M_ENERGY_J,
    M_SAMPLES_PER_S,
    M_STEP_TIME_S,
    M_TIME_S,
    PARAM_NAMES,
    TAG_CONFIG_HASH,
    TAG_ENERGY_SOURCE,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
    TAG_WORKLOAD_HASH,
)
from mlflow_roofline.testing.ground_truth import DEFAULT_HARDWARE


def log_runs(client: MlflowClient, experiment_id: str, frame: pd.DataFrame, *, status: str = "FINISHED") -> list[str]:
    """Log one MLflow train run per row of ``frame``.

    ``frame`` is as :func:`~mlflow_roofline.testing.synthetic.generate_synthetic_runs` makes it; the
    kind params (``arch``, ``vocab_size``, ...) are logged where it has them (a row without them is a
    run logged before they existed).

    Three store calls per run (create, log_batch, terminate). A NaN in ``energy_j`` is
    logged as a NaN metric; a missing column or ``None`` leaves the metric unlogged.

    Returns:
        the run ids, in row order.
    """
    metric_names = (M_ENERGY_J, M_TIME_S, M_STEP_TIME_S, M_SAMPLES_PER_S, M_AVG_POWER_W)  # proxies: below
    run_ids: list[str] = []
    now_ms = int(time.time() * 1000)
    names = (*PARAM_NAMES, *(k for k in KIND_PARAM_NAMES if k in frame))
    for i, row in enumerate(frame.to_dict("records")):
        config = TrainConfig.from_mapping({p: row[p] for p in names})
        metrics_values = {**proxy_metrics(config), **{k: row.get(k) for k in metric_names if k in row}}
        hardware = str(row.get("hardware", DEFAULT_HARDWARE))
        tags = {
            TAG_RUN_TYPE: "train",
            TAG_ENERGY_SOURCE: str(row.get("energy_source", "nvml")),
            TAG_HARDWARE: hardware,
            TAG_CONFIG_HASH: str(row.get("config_hash") or config.config_hash(hardware)),
            TAG_WORKLOAD_HASH: str(row.get("workload_hash") or config.workload_hash(hardware)),
        }
        run = client.create_run(experiment_id, start_time=now_ms + i, tags=tags, run_name=config.run_name)
        run_id = run.info.run_id
        client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now_ms + i, 0) for k, v in metrics_values.items() if _loggable(k, v)],
            params=[Param(p, str(row[p]) if p in PARAM_NAMES else config.to_params()[p]) for p in names],
            synchronous=True,
        )
        client.set_terminated(run_id, status=status, end_time=now_ms + i + 1)
        run_ids.append(run_id)
    return run_ids


def _loggable(name: str, value: object) -> bool:
    """Metrics with a value are logged; a NaN only for energy_j (a test of bad energy), never for others."""
    if value is None:
        return False
    return name == M_ENERGY_J or not pd.isna(value)
