"""TrainConfig: every rule names its field; hashes are stable and key what they should."""

from __future__ import annotations

import dataclasses

import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import KIND_PARAM_NAMES

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
        ({"precision": "fp4"}, "precision", "fp32, tf32, bf16, fp16, fp8"),
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
    assert fsdp.run_name == "fsdp-x2-L4-d256-h4-ff1024-S128-B16"
    assert fsdp.per_device_batch_size == 8
    assert dataclasses.replace(fsdp, strategy="tp").per_device_batch_size == 16


# The params beyond the paper's: arch, vocab_size, peft, lora_rank, grad_checkpointing.

OLD_PARAMS = {
    "num_layers": "2",
    "hidden_size": "64",
    "num_heads": "4",
    "ffn_size": "256",
    "seq_len": "32",
    "batch_size": "8",
    "num_steps": "20",
    "warmup_steps": "3",
    "strategy": "single",
    "num_devices": "1",
    "device": "cpu",
    "precision": "fp32",
}
"""A train run's params as logged before the kind params existed."""
OLD_CONFIG_HASH = "17171bead5be1281"
OLD_WORKLOAD_HASH = "8afbe560f6c49d39"
"""Its hashes on hardware ``gpu-a``, as the code before the kind params computed them."""


def test_a_run_logged_before_the_kind_params_reads_back_as_the_paper_workload_with_its_hashes() -> None:
    config = TrainConfig.from_mapping(OLD_PARAMS)
    assert config == BASE
    assert (config.arch, config.vocab_size, config.peft, config.lora_rank, config.grad_checkpointing) == (
        "encoder",
        30522,
        "none",
        0,
        False,
    )
    assert config.config_hash("gpu-a") == OLD_CONFIG_HASH
    assert config.workload_hash("gpu-a") == OLD_WORKLOAD_HASH
    assert config.run_name == "single-x1-L2-d64-h4-ff256-S32-B8"
    # logged today, it says its defaults, and reads back the same
    params = config.to_params()
    assert {k: params[k] for k in KIND_PARAM_NAMES} == {
        "arch": "encoder",
        "vocab_size": "30522",
        "peft": "none",
        "lora_rank": "0",
        "grad_checkpointing": "false",
    }
    assert TrainConfig.from_mapping(params) == config
    assert TrainConfig.from_mapping(params).config_hash("gpu-a") == OLD_CONFIG_HASH


@pytest.mark.parametrize(
    "changes",
    [
        {"arch": "decoder"},
        {"vocab_size": 1000},
        {"peft": "lora", "lora_rank": 4},
        {"grad_checkpointing": True},
    ],
)
def test_each_kind_param_off_its_default_is_another_workload(changes: dict) -> None:
    other = dataclasses.replace(BASE, **changes)
    other.validate()
    assert other.workload_hash("gpu-a") != BASE.workload_hash("gpu-a")
    assert other.config_hash("gpu-a") != BASE.config_hash("gpu-a")
    assert TrainConfig.from_mapping(other.to_params()) == other
    assert other.run_name != BASE.run_name


def test_defaults_follow_arch_and_peft_and_auto_means_the_default() -> None:
    decoder = TrainConfig.from_mapping({**OLD_PARAMS, "arch": "decoder", "vocab_size": "auto"})
    assert decoder.vocab_size == 50257
    explicit = TrainConfig.from_mapping({**OLD_PARAMS, "arch": "decoder", "vocab_size": "50257.0"})
    assert explicit == decoder and explicit.config_hash("gpu-a") == decoder.config_hash("gpu-a")
    lora = TrainConfig.from_mapping({**OLD_PARAMS, "peft": "lora", "lora_rank": ""})
    assert lora.lora_rank == 8
    assert lora.run_name.endswith("-lora8")
    on = TrainConfig.from_mapping({**OLD_PARAMS, "grad_checkpointing": "yes"})
    assert on.grad_checkpointing is True and on.to_params()["grad_checkpointing"] == "true"


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"arch": "rnn"}, "arch", "encoder, decoder"),
        ({"peft": "prefix"}, "peft", "none, lora"),
        ({"vocab_size": 0}, "vocab_size", "positive integer"),
        ({"peft": "lora", "lora_rank": 0}, "lora_rank", "at least 1 under peft lora"),
        ({"peft": "none", "lora_rank": 4}, "lora_rank", "0 under peft none"),
        ({"peft": "lora", "lora_rank": 65}, "lora_rank", "at most hidden_size"),
        ({"lora_rank": -2}, "lora_rank", "non-negative"),
    ],
)
def test_each_kind_rule_names_its_field(changes: dict, field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        dataclasses.replace(BASE, **changes).validate()
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_an_unknown_arch_is_named_before_the_vocabulary_it_has_no_default_for() -> None:
    with pytest.raises(ConfigError, match="^arch: must be one of encoder, decoder"):
        TrainConfig.from_mapping({**OLD_PARAMS, "arch": "rnn"}).validate()


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"grad_checkpointing": "maybe"}, "grad_checkpointing"),
        ({"vocab_size": "big"}, "vocab_size"),
        ({"lora_rank": "2.5"}, "lora_rank"),
    ],
)
def test_kind_params_that_do_not_parse_are_named(values: dict, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_mapping({**OLD_PARAMS, **values})
    assert caught.value.field == field
