"""The MLflow run of a train job: params MLflow already logged, a failed reading logged as a reason."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.run_ownership import same_param as _same_param
from mlflow_roofline.train.job_io import JobResult, RankEnergy
from mlflow_roofline.train.run_logging import log_result, train_run
from mlflow_roofline.train.worker import _report


def _result(ranks: list[RankEnergy], scope: str = "process") -> JobResult:
    return _report(10, [0.7, 0.6], [0.1, 0.3, 0.2], ranks, "estimate", scope)


@pytest.mark.parametrize(
    ("name", "logged", "value", "same"),
    [
        ("num_layers", "4.0", "4", True),
        ("num_layers", "4", "4", True),
        ("num_layers", "5", "4", False),
        ("device", "auto", "cpu", True),
        ("device", "cuda", "cpu", False),
        ("strategy", "ddp", "fsdp", False),
        ("batch_size", "x", "4", False),
    ],
)
def test_params_mlflow_already_logged(name: str, logged: str, value: str, same: bool) -> None:
    assert _same_param(name, logged, value) is same


def test_a_failed_energy_reading_is_logged_as_a_reason_not_a_number(tracking_uri: str) -> None:
    config = TrainConfig(1, 32, 2, 64, 8, 4, num_steps=2, strategy="ddp", num_devices=2)
    ranks = [RankEnergy(0, True, 2.0, 1.0), RankEnergy(1, True, None, 1.1, error="nvml: read failed mid-window")]
    client = TrackingClient()
    with train_run(client, "units", config.run_name) as run_id:
        log_result(client, run_id, config, _result(ranks))
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "FINISHED"
    assert "energy_j" not in run.data.metrics and "avg_power_w" not in run.data.metrics
    assert run.data.metrics["energy_j_rank_0"] == 2.0 and "energy_j_rank_1" not in run.data.metrics
    assert run.data.tags["roofline.energy_error"] == "rank 1: nvml: read failed mid-window"
    assert run.data.metrics["time_s"] == 1.1 and run.data.metrics["samples_per_s"] == pytest.approx(8 / 1.1)
