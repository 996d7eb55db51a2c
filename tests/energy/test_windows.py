"""Window semantics shared by every meter, and track_energy logging to MLflow."""

from __future__ import annotations

import time

import mlflow
import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU

import mlflow_roofline
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.energy import Measurement, MeterError, make_meter
from mlflow_roofline.energy.estimate import EstimateMeter


def spin_cpu(cpu_seconds: float) -> None:
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def test_measurement_power_and_ok() -> None:
    assert Measurement(10.0, {"cpu": 10.0}, 2.0, "estimate").avg_power_w == 5.0
    failed = Measurement(None, {}, 2.0, "nvml", error="GPU is lost")
    assert not failed.ok and failed.avg_power_w is None


def test_one_window_at_a_time_and_misuse_is_an_error() -> None:
    meter = EstimateMeter()
    with pytest.raises(MeterError, match="end\\(\\) without begin\\(\\)"):
        meter.end()
    meter.begin()
    with pytest.raises(MeterError, match="already open"):
        meter.begin()
    meter.end()
    meter.close()
    with pytest.raises(MeterError, match="closed"):
        meter.begin()


def test_window_measures_even_when_the_block_raises() -> None:
    meter = EstimateMeter()
    with pytest.raises(ZeroDivisionError):
        with meter.window() as w:
            spin_cpu(0.05)
            1 / 0  # noqa: B018
    assert w.measurement is not None and w.measurement.energy_j > 0
    assert not meter.is_open


def test_track_energy_logs_to_the_active_run(tracking_uri: str) -> None:
    with mlflow.start_run() as run:
        with mlflow_roofline.track_energy(meter="estimate", watts_per_core=10) as w:
            spin_cpu(0.1)
    data = mlflow.get_run(run.info.run_id).data
    m = w.measurement
    assert data.metrics["energy_j"] == pytest.approx(m.energy_j) and m.energy_j == pytest.approx(1.0, rel=0.15)
    assert data.metrics["time_s"] == pytest.approx(m.time_s)
    assert data.metrics["avg_power_w"] == pytest.approx(m.energy_j / m.time_s)
    assert data.tags["roofline.energy_source"] == "estimate"
    assert data.tags["roofline.hardware"].startswith("cpu:")
    assert "roofline.energy_error" not in data.tags


def test_track_energy_without_run_starts_and_ends_one(tracking_uri: str) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with mlflow_roofline.track_energy():
            spin_cpu(0.05)
            raise RuntimeError("boom")
    assert mlflow.active_run() is None
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert run.info.status == "FAILED"
    assert run.data.tags["roofline.run_type"] == "measure"
    assert run.data.tags["roofline.energy_source"] == "estimate" and run.data.metrics["energy_j"] > 0


def test_track_energy_failed_read_logs_the_error_and_no_energy(tracking_uri: str, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_pynvml.configure([FakeGPU("GPU-0000aaaa", fail_after_reads=2)])
    with mlflow.start_run() as run:
        with mlflow_roofline.track_energy("nvml", device="cuda", nvml=fake_pynvml) as w:
            time.sleep(0.05)
    data = mlflow.get_run(run.info.run_id).data
    assert w.measurement.energy_j is None
    assert "energy_j" not in data.metrics and "avg_power_w" not in data.metrics
    assert "GPU is lost" in data.tags["roofline.energy_error"]
    assert data.tags["roofline.energy_source"] == "nvml"
    assert data.tags["roofline.hardware"] == "NVIDIA Fake G100"
    assert fake_pynvml.init_count() == 0  # a named meter is closed after the block


def test_track_energy_bad_meter_fails_before_any_run(tracking_uri: str) -> None:
    with pytest.raises(ConfigError, match="^meter: must be one of"):
        mlflow_roofline.track_energy("watts")  # at the call, before the block
    assert mlflow.active_run() is None
    assert mlflow.search_runs(search_all_experiments=True, output_format="list") == []


def test_track_energy_accepts_a_built_meter_and_leaves_it_open(tracking_uri: str) -> None:
    meter = make_meter("estimate")
    with mlflow.start_run():
        for _ in range(2):
            with mlflow_roofline.track_energy(meter) as w:
                spin_cpu(0.02)
            assert w.measurement.ok
    meter.begin()  # still usable
    meter.end()
    meter.close()
