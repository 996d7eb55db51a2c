"""FLOPs of a real training step, counted by torch's FlopCounterMode, against hand counts and the proxy."""

from __future__ import annotations

import dataclasses

import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_flops
from mlflow_roofline.train.flop_count import RATIO_BAND, analytic_step_flops, count_step_flops, flops_counted

# (L, d, h, S, B): paper-family shapes (ff = 4 d) from projection-bound to attention-bound.
SHAPES = [(1, 32, 2, 16, 2), (2, 64, 4, 32, 4), (2, 32, 2, 128, 2), (1, 128, 2, 8, 2)]


def _config(L: int, d: int, h: int, S: int, B: int, ff: int | None = None, steps: int = 1) -> TrainConfig:
    return TrainConfig(L, d, h, 4 * d if ff is None else ff, S, B, num_steps=steps, warmup_steps=0)


@pytest.mark.parametrize("shape", SHAPES[:2])
def test_meta_count_equals_a_real_cpu_step_and_the_hand_count(shape: tuple[int, ...]) -> None:
    config = _config(*shape)
    on_meta = count_step_flops(config)
    # A real step on CPU; eager attention, because CPU's fused SDPA kernel is not in the flop registry.
    on_cpu = count_step_flops(config, device="cpu", attn_implementation="eager")
    assert on_meta == on_cpu == analytic_step_flops(config)


def test_cpu_fused_attention_would_hide_the_attention_flops() -> None:
    # Why the count runs on meta: a real CPU step with SDPA counts only the projections.
    config = _config(2, 64, 4, 32, 4)
    L, d, S, B = 2, 64, 32, 4
    attention = 3 * B * S * L * 4 * S * d
    assert count_step_flops(config, device="cpu") == count_step_flops(config) - attention


@pytest.mark.parametrize("shape", SHAPES)
def test_counted_over_proxy_lies_in_the_documented_band(shape: tuple[int, ...]) -> None:
    L, d, _h, S, B = shape
    ratio = count_step_flops(_config(*shape)) / proxy_flops(L, d, S, B, 1)
    assert RATIO_BAND[0] <= ratio <= RATIO_BAND[1]


def test_band_limits_follow_the_sequence_length() -> None:
    # Projection-bound (S << d) approaches 6, attention-bound (S >> d) approaches 4.
    near_six = count_step_flops(_config(1, 256, 4, 8, 1)) / proxy_flops(1, 256, 8, 1, 1)
    near_four = count_step_flops(_config(1, 16, 1, 512, 1)) / proxy_flops(1, 16, 512, 1, 1)
    assert 5.7 < near_six <= RATIO_BAND[1]
    assert RATIO_BAND[0] <= near_four < 4.3


def test_ffn_width_and_steps_enter_the_count() -> None:
    narrow, wide = _config(1, 32, 2, 16, 2, ff=64), _config(1, 32, 2, 16, 2, ff=256)
    # 3 (backward included) * 4 d (ff_wide - ff_narrow) per token, over B S tokens.
    assert count_step_flops(wide) - count_step_flops(narrow) == 3 * 4 * 32 * (256 - 64) * 2 * 16
    assert flops_counted(_config(1, 32, 2, 16, 2, steps=7)) == 7 * count_step_flops(_config(1, 32, 2, 16, 2))


@pytest.mark.parametrize("kind", [{"peft": "lora", "lora_rank": 4}, {"grad_checkpointing": True}])
def test_the_encoders_meta_count_equals_a_real_cpu_step_with_adapters_or_checkpointing(kind: dict) -> None:
    # The encoder counts on plain meta tensors (only the decoder needs fake ones): still the real step's work.
    config = dataclasses.replace(_config(1, 32, 2, 16, 2), **kind)
    assert count_step_flops(config) == count_step_flops(config, device="cpu", attn_implementation="eager")
