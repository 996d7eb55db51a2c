"""Sweep specs: the shipped ones meet their promises; bad specs fail early, naming the key
(non-finite numbers, sizes past their bounds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.sweeps import BASE, TOP, spec_with

from mlflow_roofline.core.config import (
    INT64_MAX,
    TrainConfig,
)
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.sweep.plan import expand
from mlflow_roofline.sweep.spec import load_spec, parse_spec, shipped_specs


def test_shipped_specs_are_listed_and_load() -> None:
    assert {"smoke", "paper"} <= set(shipped_specs())
    for name in shipped_specs():
        assert load_spec(name).name == name


def test_smoke_spec_covers_all_strategies_depths_and_widths_on_cpu() -> None:
    spec = load_spec("smoke")
    assert spec.device == "cpu"
    plan = expand(spec, "cpu", None)
    assert len(plan.configs) >= 12
    assert {(c.strategy, c.num_devices) for c in plan.configs} >= {("single", 1), ("ddp", 2), ("fsdp", 2), ("tp", 2)}
    assert {c.num_devices for c in plan.configs if c.strategy == "ddp"} == {2, 3}  # the law sees N = 1, 2, 3
    assert len({c.num_layers for c in plan.configs}) >= 2
    assert len({c.hidden_size for c in plan.configs}) >= 2
    assert f"{len(plan.configs)} configurations, {len(plan.skipped)} grid point skipped" in spec.text
    # tiny: the whole sweep must stay in minutes on two CPU cores
    assert all(
        c.num_layers <= 2 and c.hidden_size <= 128 and c.seq_len <= 32 and c.batch_size <= 12 for c in plan.configs
    )


def test_decoder_smoke_spec_covers_the_vocabulary_lora_checkpointing_and_every_strategy() -> None:
    spec = load_spec("decoder-smoke")
    assert spec.device == "cpu" and spec.experiment != load_spec("smoke").experiment
    plan = expand(spec, "cpu", None)
    assert not plan.skipped
    assert {c.arch for c in plan.configs} == {"decoder"}
    assert {(c.strategy, c.num_devices) for c in plan.configs} == {("single", 1), ("ddp", 2), ("fsdp", 2), ("tp", 2)}
    assert {c.vocab_size for c in plan.configs} == {1000, 4000, 16000}
    assert {(c.peft, c.lora_rank) for c in plan.configs} == {("none", 0), ("lora", 4)}
    assert {c.grad_checkpointing for c in plan.configs} == {False, True}
    assert ("ddp", "lora") in {(c.strategy, c.peft) for c in plan.configs}
    assert f"{len(plan.configs)} configurations, none skipped" in spec.text
    assert all(c.num_layers <= 2 and c.hidden_size <= 64 and c.seq_len <= 32 for c in plan.configs)


def test_specs_without_the_kind_keys_keep_their_hash_and_plan_the_papers_workload() -> None:
    # the hashes the shipped specs had before the kind keys existed (smoke's since its ddp x3 grid)
    assert load_spec("smoke").spec_hash == "a96fccb7bfd679f5"
    assert load_spec("paper").spec_hash == "ff251aedd3bf645f"
    [config] = expand(parse_spec(spec_with()), "cpu", None).configs
    assert (config.arch, config.vocab_size, config.peft, config.lora_rank, config.grad_checkpointing) == (
        "encoder",
        30522,
        "none",
        0,
        False,
    )


@pytest.mark.parametrize(
    ("changes", "key", "fragment"),
    [
        ({"grid_arch": ["rnn"]}, "grid.arch[0]", "allowed: encoder, decoder"),
        ({"peft": "prefix"}, "peft", "allowed: none, lora"),
        ({"grid_grad_checkpointing": ["yes"]}, "grid.grad_checkpointing[0]", "true or false"),
        ({"grid_vocab_size": [0]}, "grid.vocab_size[0]", "positive integer"),
        ({"grid_lora_rank": [-1]}, "grid.lora_rank[0]", "non-negative"),
    ],
)
def test_bad_kind_keys_are_named(changes: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_spec(spec_with(**changes))
    assert caught.value.field == key
    assert fragment in str(caught.value)


def test_paper_spec_follows_the_papers_grid() -> None:
    spec = load_spec("paper")
    assert spec.device == "cuda"
    plan = expand(spec, "cuda", None)
    assert 200 <= len(plan.configs) <= 800
    assert {c.strategy for c in plan.configs} == {"single", "ddp", "fsdp", "tp"}
    assert {c.num_devices for c in plan.configs} == {1, 2, 4, 8}
    assert {c.precision for c in plan.configs} == {"fp16"}
    assert {c.batch_size for c in plan.configs} == {16, 32}
    family = [c for c in plan.configs if c.seq_len == 128 and c.ffn_size == 4 * c.hidden_size]
    # head size 64 everywhere but in the controlled heads sweep at (L=4, d=512)
    assert {c.hidden_size // c.num_heads for c in family if (c.num_layers, c.hidden_size) != (4, 512)} == {64}
    assert {c.hidden_size // c.num_heads for c in family if (c.num_layers, c.hidden_size) == (4, 512)} == {32, 64, 128}
    depth_512 = {c.num_layers for c in family if c.hidden_size == 512}
    assert {2, 24} <= depth_512
    width_l4 = {c.hidden_size for c in family if c.num_layers == 4}
    assert {128, 768} <= width_l4
    width_l16 = {c.hidden_size for c in family if c.num_layers == 16}
    assert {512, 1024} <= width_l16
    # the size stated in the spec's comment is the size of the plan
    assert f"{len(plan.configs)} configurations" in spec.text
    assert f"{len(plan.skipped)} grid points skipped" in spec.text


def test_scalars_top_level_defaults_and_alternatives() -> None:
    spec = parse_spec(
        {
            "device": "cpu",
            "seq_len": 16,
            "batch_size": [4, 8],
            "head_size": 16,
            "ffn_ratio": 2,
            "grid": [{"num_layers": 1, "hidden_size": [32, 64]}, {"num_layers": 2, "hidden_size": 32, "num_heads": 1}],
        }
    )
    first, second = spec.grids
    assert first["seq_len"] == (16,) and first["batch_size"] == (4, 8) and first["head_size"] == (16,)
    assert "num_heads" in second and "head_size" not in second  # the grid's own key wins
    assert first["strategy"] == ("single",) and first["num_steps"] == (20,)


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (spec_with(colour="red"), "colour", ["unknown key", "grid", "experiment"]),
        (spec_with(grid_foo=[1]), "grid.foo", ["unknown grid key", "num_layers"]),
        (spec_with(grid_device=["cpu"]), "grid.device", ["top level"]),
        (spec_with(grid_num_layers=["four"]), "grid.num_layers[0]", ["positive integer", "'four'"]),
        (spec_with(grid_num_layers=[True]), "grid.num_layers[0]", ["positive integer"]),
        (spec_with(grid_hidden_size=[0]), "grid.hidden_size[0]", ["positive integer"]),
        (spec_with(grid_warmup_steps=[-1]), "grid.warmup_steps[0]", ["non-negative"]),
        (spec_with(grid_num_layers=[]), "grid.num_layers", ["at least one value"]),
        (spec_with(grid_strategy=["single", "pipeline"]), "grid.strategy[1]", ["single, ddp, fsdp, tp"]),
        (spec_with(grid_precision=["fp4"]), "grid.precision[0]", ["fp32, tf32, bf16, fp16, fp8"]),
        (spec_with(grid_ffn_ratio=[4]), "grid.ffn_ratio", ["either ffn_size or ffn_ratio"]),
        (spec_with(grid_ffn_ratio=["x"]), "grid.ffn_ratio[0]", ["positive number"]),
        (spec_with(grid_strategy=["ddp"]), "grid.num_devices", [">= 2"]),
        (spec_with(device="tpu"), "device", ["auto, cuda, cpu"]),
        (spec_with(meter="wattmeter"), "meter", ["nvml", "rapl", "estimate"]),
        (spec_with(timeout_s=0), "timeout_s", ["positive number"]),
        (spec_with(repeats=0), "repeats", ["positive integer"]),
        (spec_with(repeats="2"), "repeats", ["positive integer"]),
        (spec_with(repeats=True), "repeats", ["positive integer"]),
        (spec_with(repeats=1.5), "repeats", ["positive integer"]),
        (spec_with(experiment=""), "experiment", ["non-empty"]),
        (spec_with(grid={}), "grid", ["empty"]),
        (spec_with(grid=[]), "grid", ["empty"]),
        (spec_with(grid=[{}]), "grid[0]", ["empty"]),
        (spec_with(grid="L=2"), "grid", ["mapping or a list of mappings"]),
        (spec_with(grid=[BASE, ["num_layers"]]), "grid[1]", ["mapping"]),
        ({"device": "cpu"}, "grid", ["required"]),
        (spec_with(grid={k: v for k, v in BASE.items() if k != "seq_len"}), "grid.seq_len", ["required"]),
        (spec_with(grid={k: v for k, v in BASE.items() if k != "num_heads"}), "grid.num_heads", ["head_size"]),
        (["num_layers"], "spec", ["mapping"]),
    ],
)
def test_bad_specs_name_the_key_and_what_is_allowed(data: object, field: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(data)
    assert info.value.field == field
    for word in words:
        assert word in str(info.value)


def test_unknown_spec_name_lists_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="shipped: .*paper.*smoke"):
        load_spec("no-such-spec")
    broken = tmp_path / "broken.yaml"
    broken.write_text("grid: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(str(broken))


def test_repeats_default_to_one_and_multiply_the_units_of_the_plan() -> None:
    once = parse_spec(spec_with())
    thrice = parse_spec(spec_with(repeats=3))
    assert once.repeats == 1 and thrice.repeats == 3
    assert once.spec_hash != thrice.spec_hash
    plan = expand(thrice, "cpu", "cpu:test")
    assert plan.repeats == 3
    assert plan.units == [(config, r) for config in plan.configs for r in range(3)]
    assert len(expand(once, "cpu", "cpu:test").units) == len(plan.configs)


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        (TOP + "timeout_s: .nan\ngrid: {num_layers: 1, hidden_size: 16}\n", "timeout_s"),
        (TOP + "timeout_s: .inf\ngrid: {num_layers: 1, hidden_size: 16}\n", "timeout_s"),
        (TOP.replace("ffn_size: 32", "ffn_ratio: .nan") + "grid: {num_layers: 1, hidden_size: 16}\n", "ffn_ratio"),
        (TOP.replace("ffn_size: 32", "ffn_ratio: -.inf") + "grid: {num_layers: 1, hidden_size: 16}\n", "ffn_ratio"),
        (TOP + "grid: {num_layers: 1, hidden_size: 16, num_steps: .inf}\n", "grid.num_steps"),
        (TOP + "grid: {num_layers: [1, .nan], hidden_size: 16}\n", "grid.num_layers[1]"),
        (TOP + f"grid: {{num_layers: 1, hidden_size: 16, num_steps: {INT64_MAX + 1}}}\n", "grid.num_steps"),
    ],
)
def test_non_finite_and_out_of_range_numbers_name_the_key(yaml_text: str, key: str) -> None:

    with pytest.raises(ConfigError) as info:
        parse_spec(yaml.safe_load(yaml_text))
    assert info.value.field == key


def test_num_steps_past_int64_is_refused_by_the_one_rule() -> None:
    config = TrainConfig(
        num_layers=1, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4, num_steps=INT64_MAX + 1
    )
    with pytest.raises(ConfigError, match="num_steps: must be at most 9223372036854775807"):
        config.validate()
    TrainConfig.from_mapping({**config.to_params(), "num_steps": str(INT64_MAX)}).validate()
