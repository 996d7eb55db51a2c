"""A measurement table as the fit's run frame (mlflow_roofline/testing/table_runs.py), its job kinds kept."""

from __future__ import annotations

import pandas as pd

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.testing.table_runs import runs_from_table

ROW = {
    "num_layers": 4,
    "hidden_size": 256,
    "num_heads": 4,
    "ffn_size": 1024,
    "seq_len": 128,
    "batch_size": 8,
    "num_steps": 100,
    "strategy": "single",
    "num_devices": 1,
    "device": "cuda",
    "precision": "bf16",
    "energy_j": 5000.0,
    "time_s": 30.0,
    "hardware": "A100 SXM4 80GB",
    "energy_source": "nvml",
}
DECODER = {"arch": "decoder", "vocab_size": 50257, "peft": "lora", "lora_rank": 8, "grad_checkpointing": "true"}


def test_the_kind_columns_a_table_gives_are_the_runs_params_and_hashes() -> None:
    frame = runs_from_table(pd.DataFrame([ROW, {**ROW, **DECODER}]))
    encoder, decoder = frame.iloc[0], frame.iloc[1]
    assert (encoder["arch"], encoder["peft"], str(encoder["vocab_size"])) == ("encoder", "none", "30522")
    assert (decoder["arch"], decoder["peft"], str(decoder["vocab_size"]), str(decoder["lora_rank"])) == (
        "decoder",
        "lora",
        "50257",
        "8",
    )
    assert str(decoder["grad_checkpointing"]).lower() == "true"
    sizes = {k: v for k, v in ROW.items() if k not in ("energy_j", "time_s", "hardware", "energy_source")}
    kinds = {"arch": "decoder", "vocab_size": 50257, "peft": "lora", "lora_rank": 8, "grad_checkpointing": True}
    as_imported = TrainConfig(**sizes, warmup_steps=0, **kinds)  # type: ignore[arg-type]
    assert decoder["config_hash"] == as_imported.config_hash(ROW["hardware"])
    assert encoder["config_hash"] == TrainConfig(**sizes, warmup_steps=0).config_hash(ROW["hardware"])
    assert decoder["workload_hash"] != encoder["workload_hash"]  # a decoder is not the encoder's workload


def test_a_table_without_kind_columns_is_the_papers_kind() -> None:
    frame = runs_from_table(pd.DataFrame([ROW]))
    assert frame.iloc[0]["arch"] == "encoder" and frame.iloc[0]["peft"] == "none"
