"""The paper's closed forms, pinned on hand-computed values."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import (
    arithmetic_intensity,
    proxy_flops,
    proxy_flops_per_token,
    proxy_mem_traffic,
    proxy_metrics,
    proxy_params,
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
