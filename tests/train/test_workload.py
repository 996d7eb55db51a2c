"""The workload: model built from BertConfig, seeded global batches, the optimizer step."""

from __future__ import annotations

import itertools

import pytest
import torch

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.train.parallel import strategy
from mlflow_roofline.train.parallel.dist import DistEnv
from mlflow_roofline.train.workload import (
    MAX_GRAD_NORM,
    NUM_LABELS,
    VOCAB_SIZE,
    Trainer,
    batches,
    build_model,
    build_optimizer,
    check_precision,
    clip_grad_norm,
    global_batch,
)

torch.set_num_threads(1)
CONFIG = TrainConfig(2, 32, 2, 64, 16, 8, num_steps=3, warmup_steps=0)


def test_model_has_the_configured_shape_no_dropout_and_seeded_weights() -> None:
    model = build_model(CONFIG)
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (2, 32, 2, 64)
    assert (cfg.vocab_size, cfg.num_labels) == (VOCAB_SIZE, NUM_LABELS)
    assert cfg.hidden_dropout_prob == cfg.attention_probs_dropout_prob == 0.0
    assert len(model.bert.encoder.layer) == 2 and model.training
    long = build_model(TrainConfig(1, 32, 2, 64, 600, 2))
    assert long.config.max_position_embeddings >= 600
    same = build_model(CONFIG)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), same.parameters()))
    other = build_model(CONFIG, seed=1)
    assert not torch.equal(model.classifier.weight, other.classifier.weight)


def test_global_batches_are_seeded_and_data_parallel_rows_tile_them() -> None:
    ids, labels = global_batch(5, 8, 16)
    again, _ = global_batch(5, 8, 16)
    other, _ = global_batch(6, 8, 16)
    assert ids.shape == (8, 16) and labels.shape == (8,)
    assert torch.equal(ids, again) and not torch.equal(ids, other)
    assert int(ids.min()) >= 0 and int(ids.max()) < VOCAB_SIZE and set(labels.tolist()) <= {0, 1}
    assert torch.equal(labels, (ids[:, 1] >= VOCAB_SIZE // 2).long())
    config = TrainConfig(2, 32, 2, 64, 16, 8, strategy="ddp", num_devices=2)
    parts = []
    for rank in range(2):
        env = DistEnv(rank=rank, world_size=2, local_rank=rank, device=torch.device("cpu"))
        rows = strategy("ddp").rows(8, env)
        parts.append(next(batches(config, rows, first_step=5))[0])
        assert strategy("tp").rows(8, env) == slice(0, 8)  # tensor parallel: the whole batch
    assert torch.equal(torch.cat(parts), ids)


def test_training_steps_lower_the_loss_on_a_repeated_batch() -> None:
    model = build_model(CONFIG)
    trainer = Trainer(model, build_optimizer(model), "fp32", "cpu")
    ids, labels = global_batch(0, 8, 16)
    losses = [float(trainer.step(ids, labels)) for _ in range(15)]
    assert all(b < a for a, b in itertools.pairwise(losses)) and losses[-1] < losses[0] - 0.01
    assert float(trainer.last_grad_norm) > 0


def test_clip_grad_norm_matches_torch_on_plain_tensors() -> None:
    torch.manual_seed(0)
    ours, theirs = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    theirs.load_state_dict(ours.state_dict())
    inputs = torch.randn(4, 8)
    for module in (ours, theirs):
        (module(inputs).pow(2).sum() * 100).backward()
    norm = clip_grad_norm(ours.parameters(), MAX_GRAD_NORM)
    expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), MAX_GRAD_NORM)
    assert float(norm) == pytest.approx(float(expected), rel=1e-6)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_steps_run_under_autocast(precision: str) -> None:
    model = build_model(CONFIG)
    trainer = Trainer(model, build_optimizer(model), precision, "cpu")
    before = model.classifier.weight.detach().clone()
    loss = trainer.step(*global_batch(0, 8, 16))
    assert torch.isfinite(loss) and model.classifier.weight.dtype == torch.float32
    assert not torch.equal(before, model.classifier.weight)  # the (scaled) update was applied
    assert trainer.scaler.is_enabled() == (precision == "fp16")


def test_unknown_precision_names_the_field() -> None:
    with pytest.raises(ConfigError, match="precision"):
        check_precision("fp8", "cpu")


@pytest.mark.parametrize(("layers", "hidden", "ffn", "seq"), [(2, 128, 512, 64), (4, 256, 1024, 600)])
def test_the_parameter_count_with_embeddings_matches_the_built_model(
    layers: int, hidden: int, ffn: int, seq: int
) -> None:
    """What data parallel moves per step (core.proxies.proxy_params_total) is the model's weight count
    within 1 % (biases and norms left out), position embeddings growing past 512 with seq_len."""
    from transformers import BertForSequenceClassification

    from mlflow_roofline.core.proxies import proxy_params_total
    from mlflow_roofline.train.workload import bert_config

    config = TrainConfig(
        num_layers=layers, hidden_size=hidden, num_heads=2, ffn_size=ffn, seq_len=seq, batch_size=2, num_steps=1
    )
    model = BertForSequenceClassification(bert_config(config))
    counted = sum(p.numel() for p in model.parameters())
    assert proxy_params_total(layers, hidden, ffn, seq) == pytest.approx(counted, rel=0.01)
