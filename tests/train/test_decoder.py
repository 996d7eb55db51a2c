"""The decoder, LoRA and checkpointing against real models: parameter counts, counted FLOPs, a step.

The proxies beside the paper's (core/proxies.py) are checked against the built models'
own parameters and against ``torch.utils.flop_counter`` (train/flop_count.py, the count
a train run logs as ``flops_counted``). Tiny shapes (L=2, d=64, ff=4d, S=32): each model
builds and counts in well under a second.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_flops, proxy_flops_head, proxy_params_total, proxy_params_trainable
from mlflow_roofline.train.flop_count import count_step_flops
from mlflow_roofline.train.workload import Trainer, build_model, build_optimizer, config_batch

SHAPE = dict(num_layers=2, hidden_size=64, num_heads=4, ffn_size=256, seq_len=32, batch_size=4, num_steps=1)
DECODER = TrainConfig(**SHAPE, arch="decoder", vocab_size=1000)  # type: ignore[arg-type]
ENCODER = TrainConfig(**SHAPE, vocab_size=1000)  # type: ignore[arg-type]
HEAD_RATIO_TOLERANCE = 0.25
"""counted / (proxy_flops + proxy_flops_head) may vary this much (relative) from V = 1,000 to 20,000."""


def _params(model: torch.nn.Module, trainable: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable)


@pytest.mark.parametrize("arch", ["encoder", "decoder"])
@pytest.mark.parametrize("vocab_size", [1000, 5000])
def test_params_total_is_the_built_models_weight_count(arch: str, vocab_size: int) -> None:
    config = dataclasses.replace(DECODER, arch=arch, vocab_size=vocab_size)
    model = build_model(config)
    counted = _params(model)
    proxy = proxy_params_total(2, 64, 256, 32, arch, vocab_size)
    # biases, norms (and the encoder's pooler, 2 % at d = 64) are left out of the proxy
    assert proxy == pytest.approx(counted, rel=0.04)
    assert proxy < counted
    assert proxy_params_trainable(config) == proxy


@pytest.mark.parametrize("base", [DECODER, ENCODER], ids=["decoder", "encoder"])
def test_lora_trains_exactly_the_adapters_the_proxy_counts(base: TrainConfig) -> None:
    lora = dataclasses.replace(base, peft="lora", lora_rank=4)
    model = build_model(lora)
    assert _params(model, trainable=True) == proxy_params_trainable(lora)
    assert proxy_params_trainable(lora) < 0.2 * proxy_params_total(2, 64, 256, 32, base.arch, base.vocab_size)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert all("lora_" in n or "classifier" in n for n in names)
    assert sum("lora_A" in n for n in names) == 2 * (4 if base.arch == "decoder" else 6)  # every projection


def test_the_head_term_makes_the_proxy_track_counted_flops_across_vocabularies() -> None:
    ratios, paper_only = [], []
    for vocab_size in (1000, 20000):
        config = dataclasses.replace(DECODER, vocab_size=vocab_size)
        counted = count_step_flops(config)
        paper = proxy_flops(2, 64, 32, 4, 1)
        ratios.append(counted / (paper + proxy_flops_head(config)))
        paper_only.append(counted / paper)
    assert abs(ratios[1] / ratios[0] - 1) < HEAD_RATIO_TOLERANCE
    assert paper_only[1] / paper_only[0] > 3  # the paper's proxy alone is off by several times


def test_lora_saves_a_third_and_checkpointing_adds_a_forward() -> None:
    full = count_step_flops(DECODER)
    lora = count_step_flops(dataclasses.replace(DECODER, peft="lora", lora_rank=4))
    checkpointed = count_step_flops(dataclasses.replace(DECODER, grad_checkpointing=True))
    # frozen weights need no weight gradients: backward 1x instead of 2x forward on them
    assert 0.6 < lora / full < 0.75
    # one more forward pass of the layers (not of the head): at most 4/3 of a step
    assert 1.05 < checkpointed / full <= 4 / 3


def test_a_lora_step_with_checkpointing_moves_only_the_adapters() -> None:
    config = dataclasses.replace(DECODER, peft="lora", lora_rank=4, grad_checkpointing=True)
    model = build_model(config)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = Trainer(model, build_optimizer(model), "fp32", "cpu")
    input_ids, labels = config_batch(config, 0)
    assert torch.equal(input_ids, labels)  # next-token loss: the model shifts the labels
    loss = trainer.step(input_ids, labels)
    assert abs(float(loss) - torch.log(torch.tensor(1000.0)).item()) < 0.5  # a fresh model: about ln V
    trainer.step(*config_batch(config, 1))  # lora_B starts at zero: lora_A moves from the second step
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert moved == {n for n, p in model.named_parameters() if p.requires_grad}


def test_decoder_batches_are_seeded_arithmetic_runs() -> None:
    ids, _ = config_batch(DECODER, 3)
    again, _ = config_batch(DECODER, 3)
    assert torch.equal(ids, again) and not torch.equal(ids, config_batch(DECODER, 4)[0])
    assert int(ids.min()) >= 0 and int(ids.max()) < 1000
    steps = (ids[:, 1:] - ids[:, :-1]) % 1000
    assert torch.equal(steps, steps[:, :1].expand_as(steps))  # each sample: one stride throughout
