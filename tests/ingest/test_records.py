"""A file's fields checked once, each row checked on its own: per-device batches, missing and unknown columns."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.ingest.records import (
    KNOWN_FIELDS,
    MAX_TEXT_CHARS,
    REQUIRED,
    Record,
    RowError,
    check_columns,
    check_row,
)
from mlflow_roofline.ingest.sources import RawRow


def fields(**changes: object) -> dict[str, object]:
    """A valid row's fields (a ddp run on 4 GPUs, global batch 32); ``changes`` replaces or drops (None) any."""
    base: dict[str, object] = dict(
        num_layers=12,
        hidden_size=768,
        num_heads=12,
        ffn_size=3072,
        seq_len=128,
        batch_size=32,
        num_steps=1000,
        strategy="ddp",
        num_devices=4,
        device="cuda",
        precision="fp16",
        energy_j=2.5e6,
        time_s=600.0,
        hardware="NVIDIA A100-SXM4-80GB",
        energy_source="nvml",
    )
    merged = {**base, **changes}
    return {k: v for k, v in merged.items() if v is not None}


@pytest.mark.parametrize(
    ("strategy", "devices", "per_device", "batch"),
    [("ddp", 4, 8, 32), ("fsdp", 2, 8, 16), ("single", 1, 8, 8), ("tp", 4, 8, 8)],
)
def test_per_device_batch_becomes_the_global_batch_by_strategy(
    strategy: str, devices: int, per_device: int, batch: int
) -> None:
    row = fields(batch_size=None, per_device_batch_size=str(per_device), strategy=strategy, num_devices=devices)
    record = check_row(RawRow("line 2", row))
    assert isinstance(record, Record)
    assert record.config.batch_size == batch and record.config.strategy == strategy


def test_per_device_and_global_batch_may_both_be_given_when_they_agree() -> None:
    record = check_row(RawRow("line 2", fields(per_device_batch_size=8)))
    assert isinstance(record, Record) and record.config.batch_size == 32
    plain = check_row(RawRow("line 3", fields()))
    assert isinstance(plain, Record) and record.row_hash("table") == plain.row_hash("table")  # the same run


def test_per_device_and_global_batch_that_disagree_are_refused_naming_both() -> None:
    error = check_row(RawRow("line 4", fields(per_device_batch_size=16)))
    assert isinstance(error, RowError) and error.field == "per_device_batch_size"
    assert "batch_size of 64" in error.rule and "batch_size 32" in error.rule
    assert str(error).startswith("line 4: per_device_batch_size: 16 per device under ddp on 4 devices")


@pytest.mark.parametrize("bad", ["eight", 0, -2, 1.5])
def test_a_bad_per_device_batch_is_refused_by_name(bad: object) -> None:
    error = check_row(RawRow("line 2", fields(batch_size=None, per_device_batch_size=bad)))
    assert isinstance(error, RowError) and error.field == "per_device_batch_size"


def test_a_row_without_either_batch_is_refused_as_missing_batch_size() -> None:
    error = check_row(RawRow("line 2", fields(batch_size=None)))
    assert isinstance(error, RowError) and error.field == "batch_size" and error.rule.startswith("is missing")


def test_unknown_fields_of_a_row_are_left_to_the_file_level_check() -> None:
    record = check_row(RawRow("line 2", fields(dataset="sst2", learning_rate="2e-5")))
    assert isinstance(record, Record)


def test_check_columns_lists_unknown_columns_once_and_refuses_them_under_strict() -> None:
    offered = {*fields(), "dataset", "comment"}
    assert check_columns(offered, "runs.csv") == ["comment", "dataset"]
    assert check_columns(set(fields()), "runs.csv") == []
    with pytest.raises(ConfigError, match=r"runs.csv has unknown columns comment, dataset \(--strict refuses them\)"):
        check_columns(offered, "runs.csv", strict=True)


def test_check_columns_names_every_missing_required_field_in_one_message() -> None:
    offered = set(fields(hardware=None, energy_source=None))
    with pytest.raises(ConfigError) as caught:
        check_columns(offered, "runs.csv", strict=True)
    assert caught.value.field == "file"
    assert "runs.csv has no column hardware, energy_source, required in every row" in str(caught.value)
    per_device = set(fields(batch_size=None)) | {"per_device_batch_size"}
    assert check_columns(per_device, "runs.csv") == []
    with pytest.raises(ConfigError, match=r"no column batch_size \(or per_device_batch_size\),"):
        check_columns(set(fields(batch_size=None)), "runs.csv")


def test_every_required_field_is_known() -> None:
    assert set(REQUIRED) <= KNOWN_FIELDS and "per_device_batch_size" in KNOWN_FIELDS


def test_integers_past_two_to_the_53_are_exact() -> None:
    big = 2**53 + 1
    record = check_row(RawRow("line 2", fields(num_steps=str(big), seq_len=f"{2**60 + 1}")))
    assert isinstance(record, Record)
    assert record.config.num_steps == big and record.config.seq_len == 2**60 + 1
    assert record.config.to_params()["num_steps"] == "9007199254740993"
    nearby = check_row(RawRow("line 3", fields(num_steps=str(big + 1))))
    assert isinstance(nearby, Record) and nearby.row_hash("table") != record.row_hash("table")


@pytest.mark.parametrize("value", ["9223372036854775808", "1e400", 2**64])
def test_integers_past_int64_are_refused_by_name(value: object) -> None:
    error = check_row(RawRow("line 2", fields(num_steps=value)))
    assert isinstance(error, RowError) and error.field == "num_steps" and "int64" in error.rule


@pytest.mark.parametrize("value", [["A100"], {"name": "A100"}, b"A100", True])
def test_a_list_dict_bytes_or_boolean_in_a_text_field_is_refused(value: object) -> None:
    error = check_row(RawRow("line 2", fields(hardware=value)))
    assert isinstance(error, RowError) and error.field == "hardware" and error.rule.startswith("must be text, got")


def test_bytes_are_not_a_number() -> None:
    error = check_row(RawRow("line 2", fields(num_layers=b"12")))
    assert isinstance(error, RowError) and error.field == "num_layers"


def test_an_over_long_name_is_refused_before_hashing() -> None:
    error = check_row(RawRow("line 2", fields(hardware="G" * (MAX_TEXT_CHARS + 1))))
    assert isinstance(error, RowError) and error.field == "hardware"
    assert error.rule == f"must be at most {MAX_TEXT_CHARS} characters, got {MAX_TEXT_CHARS + 1}"
    assert isinstance(check_row(RawRow("line 3", fields(hardware="G" * MAX_TEXT_CHARS))), Record)


def test_a_row_problem_from_the_source_refuses_the_row() -> None:
    error = check_row(RawRow("line 2", fields(), ("gpu_energy", "must be finite")))
    assert error == RowError("line 2", "gpu_energy", "must be finite")


def test_a_row_without_the_kind_params_is_the_papers_workload_with_its_old_hash() -> None:
    record = check_row(RawRow("line 2", fields()))
    assert isinstance(record, Record)
    assert (record.config.arch, record.config.vocab_size, record.config.peft) == ("encoder", 30522, "none")
    assert record.row_hash("table") == "2e6798c3bb7cd177"  # as before the kind params existed: re-import adds nothing
    defaults = check_row(RawRow("line 3", fields(arch="encoder", vocab_size="auto", grad_checkpointing="false")))
    assert isinstance(defaults, Record) and defaults.row_hash("table") == record.row_hash("table")


def test_a_lora_decoder_row_is_imported_with_its_kind_params() -> None:
    row = fields(arch="decoder", vocab_size="50257.0", peft="lora", lora_rank="16", grad_checkpointing="yes")
    record = check_row(RawRow("line 2", row))
    assert isinstance(record, Record)
    config = record.config
    assert (config.arch, config.vocab_size, config.peft, config.lora_rank, config.grad_checkpointing) == (
        "decoder",
        50257,
        "lora",
        16,
        True,
    )
    assert record.row_hash("table") != check_row(RawRow("line 3", fields())).row_hash("table")  # type: ignore[union-attr]
    assert {"arch", "vocab_size", "peft", "lora_rank", "grad_checkpointing"} <= KNOWN_FIELDS


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"arch": "rnn"}, "arch"),
        ({"peft": "lora", "lora_rank": "0"}, "lora_rank"),
        ({"vocab_size": "many"}, "vocab_size"),
        ({"grad_checkpointing": "sometimes"}, "grad_checkpointing"),
    ],
)
def test_bad_kind_params_are_refused_naming_the_field(changes: dict, field: str) -> None:
    error = check_row(RawRow("line 5", fields(**changes)))
    assert isinstance(error, RowError) and error.field == field


@pytest.mark.parametrize(
    ("changes", "read_as"),
    [
        ({"precision": "FP16"}, {"precision": "fp16"}),
        ({"precision": " bfloat16 "}, {"precision": "bf16"}),
        ({"precision": "bf16-mixed"}, {"precision": "bf16"}),  # Lightning's flag
        ({"precision": 32}, {"precision": "fp32"}),  # Lightning's precision=32, a number in the cell
        ({"precision": "float16"}, {"precision": "fp16"}),  # torch's dtype name
        ({"strategy": "DDP", "device": "GPU"}, {"strategy": "ddp", "device": "cuda"}),
        ({"strategy": "fully_sharded_data_parallel"}, {"strategy": "fsdp"}),
        ({"arch": "decoder-only", "peft": "LoRA"}, {"arch": "decoder", "peft": "lora"}),
    ],
)
def test_other_tools_spellings_of_a_level_are_read_as_the_level(changes: dict, read_as: dict) -> None:
    record = check_row(RawRow("line 2", fields(**changes)))
    assert isinstance(record, Record)
    assert {name: getattr(record.config, name) for name in read_as} == read_as
    as_written = check_row(RawRow("line 3", fields(**read_as)))
    assert isinstance(as_written, Record) and record.row_hash("table") == as_written.row_hash("table")  # one run


@pytest.mark.parametrize(("field", "value"), [("precision", "mixed"), ("strategy", "deepspeed"), ("arch", "rnn")])
def test_a_word_that_names_no_level_is_refused_as_before(field: str, value: str) -> None:
    error = check_row(RawRow("line 4", fields(**{field: value})))
    assert isinstance(error, RowError) and error.field == field and repr(value) in error.rule
