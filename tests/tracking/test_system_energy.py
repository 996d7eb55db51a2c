"""The meter's running energy as MLflow system metrics: names, interval, the real store, beside MLflow's own."""

from __future__ import annotations

import threading
import time

import mlflow
import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU
from mlflow import MlflowClient

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.energy import base as energy_base
from mlflow_roofline.energy import make_meter
from mlflow_roofline.energy.live import LiveEnergy
from mlflow_roofline.tracking import system_energy as system_energy_module
from mlflow_roofline.tracking.system_energy import SystemEnergy, energy_wh_metrics, system_energy
from mlflow_roofline.tracking.system_metrics_monitor import INTERVAL_ENV, sampling_interval_s

UUID = "GPU-00000000-0000-0000-0000-000000000001"
THREAD = "roofline-system-energy"


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    device = FakeGPU(UUID, power_w=300.0, counter_period_s=0.01)
    fake_pynvml.configure([device])
    yield device
    assert fake_pynvml.init_count() == 0, "a meter left NVML initialised"


def test_devices_map_to_mlflows_names_in_watt_hours() -> None:
    metrics = energy_wh_metrics({"cuda:0": 3600.0, "rocm:3": 7200.0})
    assert metrics == {"system/gpu_0_energy_wh": 1.0, "system/gpu_3_energy_wh": 2.0}
    rapl = {"package-0": 1800.0, "package-1": 1800.0, "package-0/dram": 360.0}
    assert energy_wh_metrics(rapl) == {"system/cpu_energy_wh": 1.0, "system/dram_energy_wh": 0.1}
    assert energy_wh_metrics({"cpu": 36.0}, node_id="node_1") == {"system/node_1/cpu_energy_wh": 0.01}


def test_the_interval_is_mlflows_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert sampling_interval_s() == 2.0
    monkeypatch.setenv(INTERVAL_ENV, "0.25")
    assert sampling_interval_s() == 0.25
    for bad in ("0", "-1", "fast", "inf"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        with pytest.raises(ConfigError, match=f"{INTERVAL_ENV}: must be a number of seconds > 0, got '{bad}'"):
            sampling_interval_s()


def wait_for_points(client: MlflowClient, run_id: str, key: str, count: int) -> None:
    """Until ``key`` has ``count`` points in the store (the sampling thread writes them)."""
    while len(client.get_metric_history(run_id, key)) < count:
        time.sleep(0.01)


def test_a_gpu_window_is_logged_from_the_meter_already_running(
    tracking_uri: str, gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One NVML read per reading: a reading whose clocks lie more than BRACKET_S apart (the thread
    # preempted, as on a loaded machine) is read again, which would break the count below.
    monkeypatch.setattr(energy_base, "BRACKET_TRIES", 1)
    client = MlflowClient()
    run_id = client.create_run(client.create_experiment("sys")).info.run_id
    meter = make_meter("nvml", device="cuda", nvml=fake_pynvml)
    live = LiveEnergy(meter, "train")
    live.begin()
    before = {t.name for t in threading.enumerate()}  # with the meter's own (its GPU-share sampler)
    reads_at_open = gpu.reads
    energy = SystemEnergy(run_id, live, interval_s=0.01)
    energy.start()
    wait_for_points(client, run_id, "system/gpu_0_energy_wh", 3)
    threads = {t.name for t in threading.enumerate()} - before
    measurement = live.end()
    energy.stop()
    meter.close()
    assert threads == {THREAD}  # one thread of ours, no second NVML poller: the meter's reads are all
    history = client.get_metric_history(run_id, "system/gpu_0_energy_wh")
    open_points = len(history) - 1  # the last one is the closed window's own figure: no read
    assert gpu.reads == reads_at_open + open_points + 1  # one read per point while open, one at the close
    values = [p.value for p in history]
    assert values == sorted(values) and [p.step for p in history] == list(range(len(history)))
    assert values[-1] == pytest.approx(measurement.per_device_j["cuda:0"] / 3600, rel=1e-12)
    assert client.get_run(run_id).data.tags["roofline.system_energy_source"] == "nvml"
    assert THREAD not in {t.name for t in threading.enumerate()}  # stopped with the window
    live.take()
    energy.stop()  # again: nothing more is logged
    assert len(client.get_metric_history(run_id, "system/gpu_0_energy_wh")) == len(history)


@pytest.mark.parametrize("mlflows_own", [True, False])
def test_beside_mlflows_own_system_metrics_or_without_them(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, mlflows_own: bool
) -> None:
    monkeypatch.setenv(INTERVAL_ENV, "0.05")
    meter = make_meter("estimate", device="cpu")
    client = MlflowClient()
    with mlflow.start_run(log_system_metrics=mlflows_own) as run:
        run_id = run.info.run_id
        if mlflows_own:
            wait_for_points(client, run_id, "system/cpu_utilization_percentage", 1)
        live = LiveEnergy(meter)
        live.begin()
        with system_energy(run_id, live) as energy:
            assert energy.interval_s == 0.05
            wait_for_points(client, run_id, "system/cpu_energy_wh", 2)
            measurement = live.end()
    meter.close()
    keys = {k for k in client.get_run(run_id).data.metrics if k.startswith("system/")}
    assert "system/cpu_energy_wh" in keys and ("system/cpu_utilization_percentage" in keys) == mlflows_own
    ours = client.get_metric_history(run_id, "system/cpu_energy_wh")
    if mlflows_own:  # MLflow's resume rule: our first step follows the run's last system/ step
        theirs = client.get_metric_history(run_id, "system/cpu_utilization_percentage")
        assert ours[0].step >= 1 and ours[0].step <= max(p.step for p in theirs) + 1
    else:
        assert ours[0].step == 0
    assert ours[-1].value == pytest.approx(measurement.per_device_j["cpu"] / 3600, rel=1e-12)


def test_a_new_run_starts_at_step_0_without_reading_the_run_back(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_read(client: object, run_id: str) -> int:
        raise AssertionError("the run was read back for its last system step")

    monkeypatch.setattr(system_energy_module, "next_system_step", no_read)
    meter = make_meter("estimate", device="cpu")
    client = MlflowClient()
    run_id = client.create_run(client.create_experiment("sys-new")).info.run_id
    live = LiveEnergy(meter)
    live.begin()
    with system_energy(run_id, live, new_run=True):
        live.end()
    meter.close()
    history = client.get_metric_history(run_id, "system/cpu_energy_wh")
    assert [p.step for p in history] == list(range(len(history))) and len(history) >= 1
