"""Shared GPUs, MIG and Grace Hopper against the fake NVML: energy_j is the job's share, each path tagged."""

from __future__ import annotations

import os
import time

import mlflow
import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU

import mlflow_roofline
from mlflow_roofline.core.schema import M_ENERGY_DEVICE_J, M_ENERGY_J, TAG_ENERGY_SCOPE, TAG_GPU_SHARE
from mlflow_roofline.energy import make_meter
from mlflow_roofline.energy.gpu_share import POLL_S

UUID = "GPU-5f3c2a10-aaaa-bbbb-cccc-000000000001"
MIG_UUID = "MIG-0c5e0f6d-1111-2222-3333-444444444444"
OTHER_PID = 999_999_9  # another user's job on the same GPU
WINDOW_S = 3 * POLL_S


@pytest.fixture(autouse=True)
def _visible(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield
    assert fake_pynvml.init_count() == 0, "a meter left NVML initialised"


def _window(name: str, gpu: FakeGPU):
    fake_pynvml.configure([gpu])
    meter = make_meter(name, device="cuda", nvml=fake_pynvml)
    with meter, meter.window() as w:
        time.sleep(WINDOW_S)
    assert w.measurement.ok, w.measurement.error
    return w.measurement


@pytest.mark.parametrize("name", ["nvml", "nvml_power"])
def test_a_gpu_to_itself_is_exclusive(name: str) -> None:
    m = _window(name, FakeGPU(UUID, power_w=200.0, processes={os.getpid(): 80}))
    assert m.gpu_share == "exclusive"
    assert m.energy_j == m.energy_device_j == pytest.approx(200.0 * m.time_s, rel=0.1)


def test_a_shared_gpu_is_split_by_sm_utilization() -> None:
    m = _window("nvml", FakeGPU(UUID, power_w=200.0, processes={os.getpid(): 60, OTHER_PID: 20}))
    assert m.gpu_share == "process_utilization"
    assert m.energy_device_j == pytest.approx(200.0 * m.time_s, rel=0.1)
    assert m.energy_j == pytest.approx(0.75 * m.energy_device_j)


def test_without_per_process_samples_the_device_figure_stays_and_the_tag_says_why() -> None:
    gpu = FakeGPU(UUID, power_w=200.0, processes={os.getpid(): 60, OTHER_PID: 20}, process_samples=False)
    m = _window("nvml", gpu)
    assert m.gpu_share == "device (per-process samples unavailable: NVMLError_NotSupported)"
    assert m.energy_j == m.energy_device_j


def test_a_job_nvml_cannot_see_is_not_given_an_invented_share() -> None:
    m = _window("nvml", FakeGPU(UUID, power_w=200.0, processes={OTHER_PID: 20, OTHER_PID + 1: 30}))
    assert m.gpu_share.startswith("device (this job's processes are not among NVML's")
    assert m.energy_j == m.energy_device_j


def test_a_mig_slice_gets_its_fraction_of_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG_UUID)
    m = _window("nvml", FakeGPU(UUID, name="NVIDIA H100 80GB HBM3", power_w=350.0, mig={MIG_UUID: 3}))
    assert m.gpu_share == "mig"
    assert m.energy_device_j == pytest.approx(350.0 * m.time_s, rel=0.1)
    assert m.energy_j == pytest.approx(m.energy_device_j * 3 / 7)


def test_track_energy_logs_the_share_the_device_and_a_grace_hopper_module_scope(tracking_uri: str) -> None:
    gpu = FakeGPU(UUID, name="NVIDIA GH200 480GB", power_w=400.0, processes={os.getpid(): 50, OTHER_PID: 50})
    fake_pynvml.configure([gpu])
    with mlflow.start_run() as run:
        with mlflow_roofline.track_energy("nvml", device="cuda", nvml=fake_pynvml) as w:
            time.sleep(WINDOW_S)
    logged = mlflow.get_run(run.info.run_id).data
    assert logged.tags[TAG_GPU_SHARE] == "process_utilization"
    assert logged.tags[TAG_ENERGY_SCOPE] == "module"
    assert logged.metrics[M_ENERGY_J] == pytest.approx(w.measurement.energy_j)
    assert logged.metrics[M_ENERGY_DEVICE_J] == pytest.approx(2 * logged.metrics[M_ENERGY_J])
