"""One name per GPU: the train/sweep path and the NVML meters name the hardware the same way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU

from mlflow_roofline.core.host import cpu_hardware_name, gpus_hardware_name
from mlflow_roofline.energy import nvml_devices
from mlflow_roofline.energy.hardware_naming import hardware_name
from mlflow_roofline.energy.nvml import NvmlMeter
from mlflow_roofline.train.device import hardware_name as train_hardware_name


@pytest.fixture
def two_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml_devices, "PYNVML", fake_pynvml)
    fake_pynvml.configure(
        [
            FakeGPU("GPU-11111111-0000-0000-0000-000000000000", name="NVIDIA H200"),
            FakeGPU("GPU-22222222-0000-0000-0000-000000000000", name="NVIDIA A100-SXM4-80GB"),
        ]
    )
    hardware_name.cache_clear()
    yield
    hardware_name.cache_clear()
    assert fake_pynvml.init_count() == 0, "naming left NVML initialised"


def test_cuda_is_named_as_the_nvml_meter_names_gpu_0(two_models: None) -> None:
    with NvmlMeter([0]) as meter:
        assert hardware_name("cuda") == meter.hardware == "NVIDIA H200"
    assert train_hardware_name is hardware_name  # train and sweep call the same function


def test_cuda_visible_devices_picks_gpu_0(two_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert hardware_name("cuda") == "NVIDIA A100-SXM4-80GB"


def test_several_models_and_cpu() -> None:
    assert gpus_hardware_name(["B", "A", "B"]) == "A+B"
    assert gpus_hardware_name(["A", "A"]) == "A"
    assert hardware_name("cpu") == cpu_hardware_name()
    assert cpu_hardware_name().startswith("cpu:")
