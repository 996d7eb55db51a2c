"""The paper's closed forms and the proxies beside them, pinned on hand-computed values."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import (
    OPT_BYTES_PER_PARAM,
    arithmetic_intensity,
    proxy_flops,
    proxy_flops_head,
    proxy_flops_per_token,
    proxy_mem_traffic,
    proxy_metrics,
    proxy_opt_traffic,
    proxy_params,
    proxy_params_total,
    proxy_params_trainable,
)
from mlflow_roofline.core.schema import (
    M_PROXY_FLOPS,
    M_PROXY_FLOPS_HEAD,
    M_PROXY_FLOPS_PER_TOKEN,
    M_PROXY_MEM_TRAFFIC,
    M_PROXY_PARAMS,
)


def test_bert_base_closed_forms_by_hand() -> None:
    # BERT-base: L=12, d=768, ff=3072, S=128.
    # N = 12 * (12 * 768^2 + 2 * 768 * 3072) = 12 * (7_077_888 + 4_718_592) = 141_557_760
    assert proxy_params(12, 768, 3072) == 141_557_760
    # C_tok = 12*12*768^2 + 3*12*128*768 = 84_934_656 + 3_538_944 = 88_473_600
    assert proxy_flops_per_token(12, 768, 128) == 88_473_600
    # C = C_tok * B * S * steps with B=32, steps=10: 88_473_600 * 32 * 128 * 10
    assert proxy_flops(12, 768, 128, 32, 10) == 88_473_600 * 40_960
    # M = B * S * d * L * steps = 32 * 128 * 768 * 12 * 10 = 377_487_360
    assert proxy_mem_traffic(12, 768, 128, 32, 10) == 377_487_360
    # C / M = 12 d + 3 S = 9216 + 384
    assert arithmetic_intensity(12, 768, 128) == pytest.approx(9600.0)


def test_small_config_by_hand() -> None:
    # L=2, d=64, ff=256, S=32, B=4, steps=3
    assert proxy_params(2, 64, 256) == 2 * (12 * 4096 + 2 * 64 * 256)  # 163_840
    assert proxy_params(2, 64, 256) == 163_840
    assert proxy_flops_per_token(2, 64, 32) == 12 * 2 * 4096 + 3 * 2 * 32 * 64  # 110_592
    assert proxy_flops(2, 64, 32, 4, 3) == 110_592 * 4 * 32 * 3
    assert proxy_mem_traffic(2, 64, 32, 4, 3) == 4 * 32 * 64 * 2 * 3 == 49_152


def test_proxy_metrics_use_schema_names_and_whole_window() -> None:
    config = TrainConfig(
        num_layers=4, hidden_size=256, num_heads=4, ffn_size=1024, seq_len=128, batch_size=16, num_steps=5
    )
    metrics = proxy_metrics(config)
    assert metrics["proxy_params"] == 4 * (12 * 256**2 + 2 * 256 * 1024)
    assert metrics["proxy_flops_per_token"] == 12 * 4 * 256**2 + 3 * 4 * 128 * 256
    assert metrics["proxy_flops"] == metrics["proxy_flops_per_token"] * 16 * 128 * 5
    assert metrics["proxy_mem_traffic"] == 16 * 128 * 256 * 4 * 5
    assert metrics["proxy_arithmetic_intensity"] == pytest.approx(12 * 256 + 3 * 128)


def test_params_total_keeps_the_encoder_count_the_comm_time_law_uses() -> None:
    # BERT-base: 12 * (4 * 768^2 + 2 * 768 * 3072) + (30522 + 512 + 2) * 768 = 84_934_656 + 23_835_648
    assert proxy_params_total(12, 768, 3072, 128) == 108_770_304
    assert proxy_params_total(12, 768, 3072, 128, "encoder", 30522) == 108_770_304
    # longer sequences grow the position table, elementwise on arrays as the law calls it
    widths = np.array([128, 768])
    np.testing.assert_array_equal(
        proxy_params_total(2, widths, 4 * widths, 600),
        [proxy_params_total(2, int(d), 4 * int(d), 600) for d in widths],
    )


def test_decoder_closed_forms_by_hand() -> None:
    # GPT-2 small: L=12, d=768, ff=3072, V=50257, 1024 positions, head tied to the token table.
    assert proxy_params_total(12, 768, 3072, 1024, "decoder") == 84_934_656 + (50_257 + 1024) * 768
    gpt2 = TrainConfig(12, 768, 12, 3072, 1024, 8, num_steps=10, arch="decoder")
    # head: d V per token times B S steps
    assert proxy_flops_head(gpt2) == 768 * 50_257 * 8 * 1024 * 10
    # about a third of the forward work per token at GPT-2 size (the motivation)
    per_token = proxy_flops_per_token(12, 768, 1024)
    assert 0.2 < 768 * 50_257 / (per_token + 768 * 50_257) < 0.4
    assert proxy_flops_head(TrainConfig(12, 768, 12, 3072, 1024, 8)) == 0  # the encoder's classification head


def test_trainable_params_and_optimizer_traffic_by_hand() -> None:
    full = TrainConfig(2, 64, 4, 256, 32, 8, num_steps=5, arch="decoder", vocab_size=1000)
    assert proxy_params_trainable(full) == proxy_params_total(2, 64, 256, 32, "decoder", 1000) == 227_840
    lora = dataclasses.replace(full, peft="lora", lora_rank=4)
    assert proxy_params_trainable(lora) == 2 * 4 * (8 * 64 + 2 * 256)  # 8_192
    encoder_lora = TrainConfig(2, 64, 4, 256, 32, 8, peft="lora", lora_rank=4)
    assert proxy_params_trainable(encoder_lora) == 2 * 4 * (10 * 64 + 2 * 256) + 2 * 65  # + the classifier
    assert proxy_opt_traffic(full) == 227_840 * OPT_BYTES_PER_PARAM * 5
    assert proxy_opt_traffic(dataclasses.replace(full, strategy="ddp", num_devices=2)) == proxy_opt_traffic(full)
    assert proxy_opt_traffic(dataclasses.replace(full, strategy="fsdp", num_devices=2)) == proxy_opt_traffic(full) // 2
    assert proxy_opt_traffic(lora) == 8_192 * OPT_BYTES_PER_PARAM * 5


def test_the_papers_proxies_do_not_depend_on_the_kind_params() -> None:
    paper = TrainConfig(2, 64, 4, 256, 32, 8)
    other = dataclasses.replace(
        paper, arch="decoder", vocab_size=1000, peft="lora", lora_rank=4, grad_checkpointing=True
    )
    for name in (M_PROXY_PARAMS, M_PROXY_FLOPS_PER_TOKEN, M_PROXY_FLOPS, M_PROXY_MEM_TRAFFIC):
        assert proxy_metrics(other)[name] == proxy_metrics(paper)[name]
    assert proxy_metrics(paper)[M_PROXY_FLOPS_HEAD] == 0.0
    assert proxy_metrics(other)[M_PROXY_FLOPS_HEAD] == 64 * 1000 * 8 * 32 * 20
