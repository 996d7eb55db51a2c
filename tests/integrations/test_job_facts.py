"""Reading a model's shape from its config."""

from __future__ import annotations

import torch
from transformers import BertConfig, GPT2Config, LlamaConfig

from mlflow_roofline.integrations.job_facts import JobFacts, model_label, model_shape, precision_of
from mlflow_roofline.integrations.parallel_probe import ParallelRun


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


def test_precision_of_reads_every_level_of_the_job_table() -> None:
    """fp8 under mixed precision and tf32 for fp32 weights with TF32 matmuls are the job's precision too."""
    fp32 = torch.nn.Linear(4, 4)
    assert precision_of(fp32, None) == "fp32"
    assert precision_of(fp32, "no", tf32=True) == "tf32"
    assert precision_of(fp32.to(torch.bfloat16), None, tf32=True) == "bf16"  # tf32 is a mode of fp32 matmuls
    assert precision_of(fp32, "fp8") == "fp8"
    assert precision_of(fp32, "bf16", tf32=True) == "bf16"
    assert precision_of(fp32, "int4") is None  # no level of the schema: left unread, said in the run
    assert precision_of(None, None) is None


def test_a_jobs_run_is_named_from_the_model_and_the_job() -> None:
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification(
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    )
    assert model_label(model) == "BertForSequenceClassification"  # built from a config: no name_or_path
    model.config.name_or_path = "google-bert/bert-base-uncased/"
    assert model_label(model) == "bert-base-uncased"
    facts = JobFacts({}, None, None, None, None, ParallelRun("ddp", 2, 0, 0), model="bert-base-uncased")
    assert facts.run_name("trainer") == "bert-base-uncased-trainer-ddp-x2"
    unknown = JobFacts({}, None, None, None, None, ParallelRun(None, 1, 0, 0))
    assert unknown.run_name("accelerate") == "model-accelerate"
