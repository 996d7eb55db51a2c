"""A train run's description: the placement first, what ran, what was measured and by which meter."""

from __future__ import annotations

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.train.description import train_description

CONFIG = {"num_layers": 2, "hidden_size": 64, "num_heads": 2, "ffn_size": 256, "seq_len": 32, "batch_size": 8}


def test_one_paragraph_with_the_placement_first_and_the_meter_named() -> None:
    config = TrainConfig.from_mapping({**CONFIG, "num_steps": 20, "strategy": "ddp", "num_devices": 2})
    text = train_description(config, 1234.0, 3.41, "estimate", None)
    assert text.startswith("**ddp x2**: a 2-layer BERT-style encoder (hidden 64, 2 heads, FFN 256)")
    assert "**1.23 kJ** in **3.41 s**" in text and "`estimate` meter" in text and "7.71 J per sample" in text
    assert "\n" not in text
    decoder = TrainConfig.from_mapping({**CONFIG, "arch": "decoder", "peft": "lora"})
    unread = train_description(decoder, None, 2.0, "nvml", "NVML: no reading")
    assert "GPT-2-style decoder" in unread and "LoRA" in unread and "energy not measured (NVML: no reading)" in unread
