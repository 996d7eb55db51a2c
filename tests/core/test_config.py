"""TrainConfig: every rule names its field; hashes are stable and key what they should."""

from __future__ import annotations

import dataclasses

import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError

BASE = TrainConfig(num_layers=2, hidden_size=64, num_heads=4, ffn_size=256, seq_len=32, batch_size=8)


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"hidden_size": 66}, "hidden_size", "divisible by num_heads"),
        ({"strategy": "tp", "num_devices": 3, "hidden_size": 60, "num_heads": 4}, "num_heads", "under tp"),
        ({"strategy": "tp", "num_devices": 2, "ffn_size": 255}, "ffn_size", "under tp"),
        ({"strategy": "ddp", "num_devices": 3}, "batch_size", "under ddp"),
        ({"strategy": "fsdp", "num_devices": 3}, "batch_size", "under fsdp"),
        ({"strategy": "single", "num_devices": 2}, "num_devices", "must be 1"),
        ({"strategy": "ddp", "num_devices": 1}, "num_devices", "at least 2"),
        ({"num_layers": 0}, "num_layers", "positive integer"),
        ({"seq_len": -4}, "seq_len", "positive integer"),
        ({"warmup_steps": -1}, "warmup_steps", "non-negative"),
        ({"strategy": "zero3"}, "strategy", "single, ddp, fsdp, tp"),
        ({"device": "tpu"}, "device", "cuda, cpu"),
        ({"precision": "fp8"}, "precision", "fp32, bf16, fp16"),
    ],
)
def test_each_rule_names_its_field(changes: dict, field: str, fragment: str) -> None:
    config = dataclasses.replace(BASE, **changes)
    with pytest.raises(ConfigError) as caught:
        config.validate()
    assert caught.value.field == field
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"strategy": "ddp", "num_devices": 2},
        {"strategy": "fsdp", "num_devices": 4},
        {"strategy": "tp", "num_devices": 4},
    ],
)
def test_valid_configs_pass(changes: dict) -> None:
    dataclasses.replace(BASE, **changes).validate()


def test_from_mapping_parses_mlflow_project_strings() -> None:
    config = TrainConfig.from_mapping(
        {
            "num_layers": "2.0",
            "hidden_size": "64",
            "num_heads": 4,
            "ffn_size": 256.0,
            "seq_len": "32",
            "batch_size": "8",
        }
    )
    assert config == BASE


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"num_layers": "two"}, "num_layers"),
        ({"num_layers": "2.5"}, "num_layers"),
        ({"num_layers": True}, "num_layers"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_from_mapping_errors_name_the_field(values: dict, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_mapping({**BASE.to_params(), **values})
    assert caught.value.field == field


def test_missing_required_field_is_named() -> None:
    params = BASE.to_params()
    del params["seq_len"]
    with pytest.raises(ConfigError, match="^seq_len: is required"):
        TrainConfig.from_mapping(params)


def test_hashes_key_what_they_should() -> None:
    ddp = dataclasses.replace(BASE, strategy="ddp", num_devices=2, num_steps=50, warmup_steps=1)
    assert BASE.config_hash("gpu-a") == TrainConfig.from_mapping(BASE.to_params()).config_hash("gpu-a")
    assert BASE.config_hash("gpu-a") != ddp.config_hash("gpu-a")
    assert BASE.config_hash("gpu-a") != BASE.config_hash("gpu-b")
    # Same workload whatever the strategy, device count and step counts: the baseline key.
    assert BASE.workload_hash("gpu-a") == ddp.workload_hash("gpu-a")
    assert BASE.workload_hash("gpu-a") != BASE.workload_hash("gpu-b")
    assert BASE.workload_hash("gpu-a") != dataclasses.replace(BASE, seq_len=64).workload_hash("gpu-a")


def test_run_name_and_per_device_batch() -> None:
    fsdp = TrainConfig(4, 256, 4, 1024, 128, 16, strategy="fsdp", num_devices=2)
    assert fsdp.run_name == "L4-d256-h4-ff1024-S128-B16-fsdp-x2"
    assert fsdp.per_device_batch_size == 8
    assert dataclasses.replace(fsdp, strategy="tp").per_device_batch_size == 16
