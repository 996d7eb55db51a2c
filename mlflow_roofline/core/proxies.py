"""Roofline proxies of a BERT configuration: the paper's closed forms, pure functions.

All quantities are per measured window unless the name says otherwise:

- ``proxy_params``        N = L (12 d^2 + 2 d ff)                      (parameters)
- ``proxy_flops_per_token`` C_tok = 12 L d^2 + 3 L S d                   (FLOPs / token)
- ``proxy_flops``          C = C_tok * B * S * steps                      (FLOPs)
- ``proxy_mem_traffic``    M = B * S * d * L * steps                      (activation elements)
- arithmetic intensity     C / M                                          (FLOPs per element)

The memory proxy counts elements; a byte figure (a GPU's bandwidth in bytes/s) is met
with :data:`MEM_BYTES_PER_ELEMENT` bytes per element (FP16/BF16 mixed precision).

These are the proxies the scaling law is written in; they are deliberately the paper's
forms, not exact operation counts (see :mod:`mlflow_roofline.train.flop_count` for those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    M_ARITHMETIC_INTENSITY,
    M_PROXY_FLOPS,
    M_PROXY_FLOPS_PER_TOKEN,
    M_PROXY_MEM_TRAFFIC,
    M_PROXY_PARAMS,
)

if TYPE_CHECKING:  # numpy only for type hints
    import numpy as np

MEM_BYTES_PER_ELEMENT = 2
"""Bytes per element of the memory-traffic proxy (FP16/BF16 activations)."""

VOCAB_SIZE = 30522
"""Token vocabulary of the encoder: the BERT-base WordPiece vocabulary size."""
MAX_POSITIONS = 512
"""Position embeddings of the encoder (BERT's 512), raised to seq_len when that is longer."""

#: One configuration (int or float) or a numpy array of them: the closed forms apply elementwise.
Size = TypeVar("Size", int, float, "np.ndarray")


def proxy_params(num_layers: int, hidden_size: int, ffn_size: int) -> int:
    """Parameter proxy N = L (12 d^2 + 2 d ff), in parameters."""
    return num_layers * (12 * hidden_size**2 + 2 * hidden_size * ffn_size)


def proxy_params_total(num_layers: Size, hidden_size: Size, ffn_size: Size, seq_len: Size) -> Size:
    """Every trainable weight of the encoder, embeddings included, in parameters.

    Each layer's attention projections (4 d^2) and feed-forward block (2 d ff), plus the token
    embeddings (:data:`VOCAB_SIZE` x d), the position embeddings (``max(seq_len, MAX_POSITIONS)``
    x d) and the token-type embeddings (2 x d): what data parallel moves every step (biases and
    norms are left out, under 1 %). BERT-base: about 109 million. The paper's
    :func:`proxy_params` (12 d^2 + 2 d ff per layer) stays the law's proxy; this is the count.
    """
    longer = seq_len > MAX_POSITIONS  # elementwise for arrays, a bool for one configuration
    positions = longer * seq_len + (1 - longer) * MAX_POSITIONS
    layers = num_layers * (4 * hidden_size**2 + 2 * hidden_size * ffn_size)
    return layers + (VOCAB_SIZE + positions + 2) * hidden_size


def proxy_flops_per_token(num_layers: Size, hidden_size: Size, seq_len: Size) -> Size:
    """Compute proxy per token C_tok = 12 L d^2 + 3 L S d, in FLOPs per token."""
    return 12 * num_layers * hidden_size**2 + 3 * num_layers * seq_len * hidden_size


def proxy_flops(num_layers: Size, hidden_size: Size, seq_len: Size, batch_size: Size, num_steps: Size) -> Size:
    """Compute proxy of the window C = C_tok * B * S * steps, in FLOPs."""
    tokens = batch_size * seq_len * num_steps
    return proxy_flops_per_token(num_layers, hidden_size, seq_len) * tokens


def proxy_mem_traffic(num_layers: Size, hidden_size: Size, seq_len: Size, batch_size: Size, num_steps: Size) -> Size:
    """Memory-traffic proxy of the window M = B S d L * steps, in activation elements."""
    return batch_size * seq_len * hidden_size * num_layers * num_steps


def arithmetic_intensity(num_layers: int, hidden_size: int, seq_len: int) -> float:
    """C / M = 12 d + 3 S, in FLOPs per element of memory traffic (independent of B and steps)."""
    flops = proxy_flops(num_layers, hidden_size, seq_len, 1, 1)
    return flops / proxy_mem_traffic(num_layers, hidden_size, seq_len, 1, 1)


def proxy_metrics(config: TrainConfig) -> dict[str, float]:
    """Every proxy of ``config`` under its schema metric name."""
    c = config
    return {
        M_PROXY_PARAMS: float(proxy_params(c.num_layers, c.hidden_size, c.ffn_size)),
        M_PROXY_FLOPS_PER_TOKEN: float(proxy_flops_per_token(c.num_layers, c.hidden_size, c.seq_len)),
        M_PROXY_FLOPS: float(proxy_flops(c.num_layers, c.hidden_size, c.seq_len, c.batch_size, c.num_steps)),
        M_PROXY_MEM_TRAFFIC: float(
            proxy_mem_traffic(c.num_layers, c.hidden_size, c.seq_len, c.batch_size, c.num_steps)
        ),
        M_ARITHMETIC_INTENSITY: arithmetic_intensity(c.num_layers, c.hidden_size, c.seq_len),
    }
