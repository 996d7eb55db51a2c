"""The law's complete-proxy features against the proxies a train run logs (core/proxies on one config)."""

from __future__ import annotations

import numpy as np
import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import (
    MEM_BYTES_PER_ELEMENT,
    proxy_flops,
    proxy_flops_head,
    proxy_mem_traffic,
    proxy_opt_traffic,
)
from mlflow_roofline.law.log_features import FEW_ROWS, kind_columns, kind_indicators, law_features

CONFIGS = [
    TrainConfig(2, 64, 2, 256, 32, 8, 10, 2, "single", 1, "cpu", "fp32"),
    TrainConfig(2, 64, 2, 256, 32, 8, 10, 2, "fsdp", 2, "cpu", "fp32", arch="decoder", vocab_size=4000),
    TrainConfig(3, 96, 3, 384, 48, 8, 5, 2, "ddp", 2, "cpu", "fp32", arch="decoder", peft="lora", lora_rank=4),
    TrainConfig(2, 64, 2, 256, 32, 8, 10, 2, "fsdp", 4, "cpu", "fp32", peft="lora", grad_checkpointing=True),
]


def _column(name: str) -> np.ndarray:
    return np.array([getattr(c, name) for c in CONFIGS], dtype=object)


def test_complete_features_are_the_logged_proxies_row_by_row() -> None:
    sizes = ("num_layers", "hidden_size", "seq_len", "batch_size", "num_steps", "num_devices", "ffn_size")
    features = law_features(
        **{name: _column(name).astype(float) for name in sizes},
        speedup=_column("num_devices").astype(float),
        strategy=_column("strategy"),
        arch=_column("arch"),
        vocab_size=_column("vocab_size").astype(float),
        peft=_column("peft"),
        lora_rank=_column("lora_rank").astype(float),
        grad_checkpointing=_column("grad_checkpointing").astype(bool),
    )
    for i, c in enumerate(CONFIGS):
        args = (c.num_layers, c.hidden_size, c.seq_len, c.batch_size, c.num_steps)
        c_all = proxy_flops(*args) + proxy_flops_head(c)
        m_all = proxy_mem_traffic(*args) * MEM_BYTES_PER_ELEMENT + proxy_opt_traffic(c)
        assert np.exp(features["log_C_all"][i]) == pytest.approx(c_all, rel=1e-12)
        assert np.exp(features["log_M_all"][i]) == pytest.approx(m_all, rel=1e-12)
    assert list(features["arch"]) == ["encoder", "decoder", "decoder", "encoder"]
    assert list(features["grad_checkpointing"]) == ["false", "false", "false", "true"]
    assert list(kind_indicators(features)["peft_lora"]) == [0.0, 0.0, 1.0, 1.0]


def test_a_configuration_without_its_kind_is_the_paper_encoder() -> None:
    sizes = {k: np.array([2.0]) for k in ("num_layers", "seq_len", "batch_size", "num_steps", "num_devices")}
    plain = law_features(**sizes, hidden_size=np.array([64.0]), speedup=np.array([2.0]), strategy=np.array(["ddp"]))
    said = law_features(
        **sizes,
        hidden_size=np.array([64.0]),
        speedup=np.array([2.0]),
        strategy=np.array(["ddp"]),
        ffn_size=np.array([256.0]),
        arch=np.array(["encoder"], dtype=object),
        vocab_size=np.array([30522.0]),
        peft=np.array(["none"], dtype=object),
        lora_rank=np.array([0.0]),
        grad_checkpointing=np.array([False]),
    )
    for key in plain:
        assert list(plain[key]) == list(said[key]), key


def test_defaults_filled_row_by_row_for_few_rows_are_the_vectorised_ones() -> None:
    arch = np.array(["decoder", "encoder", "rnn", None, 3], dtype=object)  # unknown levels: the first level's
    peft = np.array(["lora", "none", "lora", "none", "lora"], dtype=object)
    missing = np.full(len(arch), np.nan)
    given = {"arch": arch, "peft": peft, "vocab_size": missing, "lora_rank": missing}
    few = kind_columns(len(arch), given)
    repeats = FEW_ROWS // len(arch) + 1  # enough rows for the vectorised path
    many = kind_columns(len(arch) * repeats, {name: np.tile(values, repeats) for name, values in given.items()})
    for name in ("vocab_size", "lora_rank"):
        np.testing.assert_array_equal(np.tile(few[name], repeats), many[name], err_msg=name)
    assert few["vocab_size"].tolist()[:2] == [50257.0, 30522.0]
