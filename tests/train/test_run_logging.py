"""The MLflow run of a train job: params MLflow already logged, a failed reading logged as a reason."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from mlflow_roofline.core.carbon import resolve_carbon
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.run_ownership import same_param as _same_param
from mlflow_roofline.train.job_io import JobResult, RankEnergy
from mlflow_roofline.train.run_logging import log_result, log_setup, train_run
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


def test_embodied_carbon_and_water_are_logged_beside_co2e_with_their_sources(tracking_uri: str) -> None:
    config = TrainConfig(1, 32, 2, 64, 8, 4, num_steps=2, strategy="ddp", num_devices=2)
    ranks = [RankEnergy(0, True, 2.0e5, 1800.0), RankEnergy(1, True, 1.6e5, 1790.0)]
    carbon = resolve_carbon(region="eu-central-1", pue=1.25, env={})
    client = TrackingClient()
    with train_run(client, "units", config.run_name) as run_id:
        log_setup(client, run_id, config, "nvml", "NVIDIA H100 80GB HBM3")
        log_result(client, run_id, config, _result(ranks), carbon)
    run = MlflowClient().get_run(run_id)
    metrics, tags = run.data.metrics, run.data.tags
    # 2 GPUs x 1800 s = 1 device-hour of an H100 SXM: (164 + 712.5) kg over 26,280 h
    assert metrics["embodied_co2e_g"] == pytest.approx((164 + 712.5) * 1000 / 26280, rel=1e-12)
    # 3.6e5 J = 0.1 kWh: AWS's 0.15 L/kWh on site, Germany's 1.93 L/kWh on 0.125 kWh drawn from the grid
    assert metrics["water_l"] == pytest.approx(0.1 * 0.15 + 0.1 * 1.25 * 1.93, rel=1e-12)
    assert "co2e_g" in metrics
    assert tags["roofline.embodied_source"] == "table:H100 SXM (GPU 164 + server share 712.5 kg CO2e over 26280 h)"
    assert tags["roofline.water_source"] == "table:eu-central-1 (site aws 0.15 L/kWh 2024; grid DE 1.93 L/kWh)"
    assert "roofline.embodied_unknown" not in tags and "roofline.water_unknown" not in tags


def test_a_gpu_or_region_without_a_figure_logs_a_tag_naming_it_not_a_zero(tracking_uri: str) -> None:
    config = TrainConfig(1, 32, 2, 64, 8, 4, num_steps=2)
    client = TrackingClient()
    with train_run(client, "units", config.run_name) as run_id:
        log_setup(client, run_id, config, "nvml", "NVIDIA GeForce RTX 2080 Ti")
        log_result(
            client, run_id, config, _result([RankEnergy(0, True, 1.0e5, 60.0)]), resolve_carbon(region="DE", env={})
        )
    run = MlflowClient().get_run(run_id)
    assert "embodied_co2e_g" not in run.data.metrics and "water_l" not in run.data.metrics
    assert "no manufacturing figure for 'NVIDIA GeForce RTX 2080 Ti'" in run.data.tags["roofline.embodied_unknown"]
    assert "no site WUE for region 'DE'" in run.data.tags["roofline.water_unknown"]
    assert "co2e_g" in run.data.metrics  # the grid's intensity is known: operational carbon as before


def test_the_watchdog_hook_is_taken_back_only_once_the_store_holds_the_run_ended(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ended: the hook is cancelled and the run stays FINISHED. Not ended (interrupts cut every attempt
    short, faked here by an ending that reports failure): the hook stays armed and the watchdog, left
    behind as the process's work is done, ends the run KILLED."""
    from support.sweeps import wait_until

    from mlflow_roofline.system.watchdog import Watchdog
    from mlflow_roofline.train import run_logging

    client = TrackingClient()
    with Watchdog() as watchdog, train_run(client, "units", "ended", watchdog=watchdog) as ended_id:
        assert watchdog.armed
    assert not watchdog.armed and MlflowClient().get_run(ended_id).info.status == "FINISHED"

    monkeypatch.setattr(run_logging, "end_run_surely", lambda *args, **kwargs: False)
    with Watchdog() as watchdog, train_run(client, "units", "cut-short", watchdog=watchdog) as cut_id:
        pass
    assert watchdog.armed
    wait_until(lambda: MlflowClient().get_run(cut_id).info.status == "KILLED", "the watchdog to end the run")
    assert MlflowClient().get_run(ended_id).info.status == "FINISHED"
