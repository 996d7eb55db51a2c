"""The decoder workload: a GPT-2 causal LM from a config (random weights) on learnable token runs.

- the model: ``GPT2LMHeadModel`` from ``GPT2Config`` (no hub download), dropout off, its
  ``Conv1D`` projections replaced by the equivalent ``nn.Linear`` (same function, weight
  transposed) so that tensor parallel and LoRA treat them as the encoder's Linear layers;
  the head is tied to the token embeddings (GPT-2's own choice);
- the data: each sample is an arithmetic run of token ids modulo V, ``start + t * stride``,
  with ``start`` and ``stride`` drawn from ``(seed, step)`` alone (so every rank can make the
  same global batch); the next token follows from the two before it, so the next-token
  loss (``labels = input_ids``, shifted inside the model) can actually fall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import DECODER_MAX_POSITIONS

if TYPE_CHECKING:
    # imported lazily at run time: transformers is slow to load
    from transformers import GPT2Config, GPT2LMHeadModel

MAX_STRIDE = 7
"""Largest step between consecutive tokens of a sample (strides are 1 .. MAX_STRIDE)."""


def gpt2_config(config: TrainConfig) -> GPT2Config:
    """The ``GPT2Config`` of a train configuration: L, d, h, ff and V as given, dropout off."""
    from transformers import GPT2Config  # transformers is slow to load: only when a model is built

    last_token = config.vocab_size - 1  # GPT-2's <|endoftext|> is its last id
    return GPT2Config(  # type: ignore[call-arg]
        vocab_size=config.vocab_size,
        n_positions=max(DECODER_MAX_POSITIONS, config.seq_len),
        n_embd=config.hidden_size,
        n_layer=config.num_layers,
        n_head=config.num_heads,
        n_inner=config.ffn_size,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        use_cache=False,
        bos_token_id=last_token,
        eos_token_id=last_token,
        attn_implementation="sdpa",
    )


def build_decoder(config: TrainConfig) -> GPT2LMHeadModel:
    """A freshly initialised GPT-2 (on the current default device), its projections as ``nn.Linear``."""
    from transformers import GPT2LMHeadModel  # transformers is slow to load: only when a model is built

    model = GPT2LMHeadModel(gpt2_config(config))
    linearize(model)
    return model


def linearize(model: nn.Module) -> None:
    """Replace every ``Conv1D`` of ``model`` by the ``nn.Linear`` computing the same function, in place.

    GPT-2's ``Conv1D(nf, nx)`` holds its weight as ``[in, out]`` and computes ``x @ W + b``;
    ``nn.Linear`` holds ``[out, in]``: the weight is transposed, the bias kept.
    """
    from transformers.pytorch_utils import Conv1D  # transformers is slow to load: only when a model is built

    for name, module in list(model.named_modules()):
        if not isinstance(module, Conv1D):
            continue
        parent_name, _, child = name.rpartition(".")
        weight = module.weight
        linear = nn.Linear(weight.shape[0], weight.shape[1], device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(weight.t())
            linear.bias.copy_(module.bias)
        setattr(model.get_submodule(parent_name), child, linear)


def decoder_batch(step: int, batch_size: int, seq_len: int, vocab_size: int, seed: int) -> torch.Tensor:
    """The token ids ``[B, S]`` of optimizer step ``step``: arithmetic runs modulo ``vocab_size``.

    Generated on the CPU from ``(seed, step)`` only, so every rank gets the same batch.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    start = torch.randint(0, vocab_size, (batch_size, 1), generator=generator)
    stride = torch.randint(1, MAX_STRIDE + 1, (batch_size, 1), generator=generator)
    return (start + stride * torch.arange(seq_len)) % vocab_size
