"""Reading a model's shape from its config."""

from __future__ import annotations

from transformers import BertConfig, GPT2Config, LlamaConfig

from mlflow_roofline.integrations.job_facts import model_shape


class _Model:
    def __init__(self, config) -> None:
        self.config = config


def test_shapes_of_bert_gpt2_and_llama_configs() -> None:
    bert = BertConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=256)
    assert model_shape(_Model(bert)) == ({"num_layers": 3, "hidden_size": 64, "num_heads": 4, "ffn_size": 256}, [])
    gpt2 = GPT2Config(n_embd=48, n_layer=5, n_head=6)
    assert model_shape(_Model(gpt2))[0] == {"num_layers": 5, "hidden_size": 48, "num_heads": 6, "ffn_size": 192}
    gpt2_inner = GPT2Config(n_embd=48, n_layer=5, n_head=6, n_inner=100)
    assert model_shape(_Model(gpt2_inner))[0]["ffn_size"] == 100
    llama = LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, intermediate_size=344)
    assert model_shape(_Model(llama))[0] == {"num_layers": 2, "hidden_size": 128, "num_heads": 8, "ffn_size": 344}
    assert model_shape(_Model({"n_layer": 2}))[1] == ["hidden_size", "num_heads", "ffn_size"]
    assert model_shape(object())[1] == ["num_layers", "hidden_size", "num_heads", "ffn_size"]
