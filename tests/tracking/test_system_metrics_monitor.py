"""MLflow's system metrics on train runs: on by default, off on request, short runs still get a point;
the meter's running energy beside them either way."""

from __future__ import annotations

import threading
import time

import pytest
from mlflow import MlflowClient

from mlflow_roofline.cli import main
from mlflow_roofline.tracking.system_metrics_monitor import SystemMetrics, system_metrics, system_metrics_wanted

TINY = [
    "--num-layers",
    "1",
    "--hidden-size",
    "16",
    "--num-heads",
    "2",
    "--ffn-size",
    "32",
    "--seq-len",
    "8",
    "--batch-size",
    "4",
    "--num-steps",
    "2",
    "--warmup-steps",
    "1",
    "--meter",
    "estimate",
    "--device",
    "cpu",
]


def system_keys(client: MlflowClient, run_id: str) -> set[str]:
    return {k for k in client.get_run(run_id).data.metrics if k.startswith("system/")}


def test_the_option_wins_then_mlflows_switch_then_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", raising=False)
    assert system_metrics_wanted(None) is True
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
    assert system_metrics_wanted(None) is False and system_metrics_wanted(True) is True
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "true")
    assert system_metrics_wanted(None) is True and system_metrics_wanted(False) is False


def test_samples_are_logged_per_interval_and_a_short_block_still_gets_one(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment = client.create_experiment("sysm")
    long_run = client.create_run(experiment).info.run_id
    with system_metrics(long_run, sampling_interval_s=0.2) as monitor:
        assert monitor is not None and monitor.running
        time.sleep(1.5)
    history = client.get_metric_history(long_run, "system/cpu_utilization_percentage")
    assert len(history) >= 3 and [m.step for m in history] == list(range(len(history)))
    assert all(0.0 <= m.value <= 100.0 for m in history)

    short_run = client.create_run(experiment).info.run_id
    with system_metrics(short_run, sampling_interval_s=30.0):
        time.sleep(0.1)  # far shorter than one interval: MLflow's monitor alone would log nothing
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= system_keys(
        client, short_run
    )

    off_run = client.create_run(experiment).info.run_id
    with system_metrics(off_run, enabled=False) as monitor:
        assert monitor is None
    assert system_keys(client, off_run) == set()
    stopped = SystemMetrics(off_run)
    stopped.stop()  # never started: nothing to do
    assert not stopped.running


def test_a_second_block_goes_on_after_the_runs_samples_and_a_new_run_starts_at_0_without_reading_it(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = MlflowClient()
    experiment = client.create_experiment("sysm-steps")
    run = client.create_run(experiment).info.run_id
    for _ in range(2):
        with system_metrics(run, sampling_interval_s=30.0):
            time.sleep(0.05)
    assert [m.step for m in client.get_metric_history(run, "system/cpu_utilization_percentage")] == [0, 1]

    reads: list[str] = []  # the threads that read a run back (MLflow's sampling thread checks its status)
    get_run = MlflowClient.get_run
    monkeypatch.setattr(
        MlflowClient, "get_run", lambda self, rid: reads.append(threading.current_thread().name) or get_run(self, rid)
    )
    new = client.create_run(experiment).info.run_id
    with system_metrics(new, sampling_interval_s=30.0, new_run=True):
        time.sleep(0.05)
    assert threading.current_thread().name not in reads  # a sweep's configuration pays no read of its run to start
    monkeypatch.undo()
    assert [m.step for m in client.get_metric_history(new, "system/cpu_utilization_percentage")] == [0]


@pytest.mark.slow
def test_train_runs_log_system_metrics_unless_turned_off(tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    client = MlflowClient()
    main(["train", *TINY, "--experiment", "sysm"])
    main(["train", *TINY, "--experiment", "sysm", "--no-system-metrics"])
    experiment_id = client.get_experiment_by_name("sysm").experiment_id
    first, second = sorted(client.search_runs([experiment_id]), key=lambda r: r.info.start_time)
    assert first.info.status == second.info.status == "FINISHED"
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_percentage"} <= system_keys(
        client, first.info.run_id
    )
    assert system_keys(client, second.info.run_id) == {"system/cpu_energy_wh"}  # the meter's, not MLflow's
    for run in (first, second):
        assert_energy_history(client, run.info.run_id, run.data.metrics["energy_j"])


def assert_energy_history(client: MlflowClient, run_id: str, energy_j: float) -> None:
    """The meter's running energy of the train window: from its opening to its close, which is ``energy_j``.

    The last point is the window's own measurement (the rank's joules per device, summed here in
    watt-hours): equal to ``energy_j / 3600`` but for the order of a float sum, hence rel=1e-9.
    """
    history = client.get_metric_history(run_id, "system/cpu_energy_wh")
    values = [p.value for p in history]
    assert len(history) >= 2 and values == sorted(values)  # a point at the opening, one at the close
    assert sorted(p.step for p in history) == list(range(history[0].step, history[0].step + len(history)))
    assert values[-1] == pytest.approx(energy_j / 3600, rel=1e-9)
    assert client.get_run(run_id).data.tags["roofline.system_energy_source"] == "estimate"
