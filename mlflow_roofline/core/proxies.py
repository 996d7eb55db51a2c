"""Roofline proxies of a configuration: the paper's closed forms and what they leave out, pure functions.

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
They are the same for every ``arch``, ``peft`` and ``grad_checkpointing``.

Beside them, what they leave out (logged as metrics of their own):

- ``proxy_flops_head``      d V * B * S * steps, the decoder's vocabulary head on the paper's
                            scale (FLOPs; 0 for the encoder's classification head), so that
                            ``proxy_flops + proxy_flops_head`` tracks counted FLOPs whatever V;
- ``proxy_params_total``    every weight, embeddings included (parameters);
- ``proxy_params_trainable``  those the optimizer updates: all of them, or under LoRA the
                            adapters, r (in + out) per adapted projection (parameters);
- ``proxy_opt_traffic``     optimizer bytes one device touches over the window: trainable
                            parameters x :data:`OPT_BYTES_PER_PARAM` x steps, divided by N
                            under fsdp, which shards them (bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    DEFAULT_VOCAB_SIZE,
    M_ARITHMETIC_INTENSITY,
    M_PROXY_FLOPS,
    M_PROXY_FLOPS_HEAD,
    M_PROXY_FLOPS_PER_TOKEN,
    M_PROXY_MEM_TRAFFIC,
    M_PROXY_OPT_TRAFFIC,
    M_PROXY_PARAMS,
    M_PROXY_PARAMS_TOTAL,
    M_PROXY_PARAMS_TRAINABLE,
)

if TYPE_CHECKING:  # numpy only for type hints
    import numpy as np

MEM_BYTES_PER_ELEMENT = 2
"""Bytes per element of the memory-traffic proxy (FP16/BF16 activations)."""

VOCAB_SIZE = DEFAULT_VOCAB_SIZE["encoder"]
"""Token vocabulary of the encoder by default: the BERT-base WordPiece vocabulary size."""
MAX_POSITIONS = 512
"""Position embeddings of the encoder (BERT's 512), raised to seq_len when that is longer."""
DECODER_MAX_POSITIONS = 1024
"""Position embeddings of the decoder (GPT-2's 1024), raised to seq_len when that is longer."""
NUM_LABELS = 2
"""Classes of the encoder's sequence-classification head (binary, like SST-2)."""
OPT_BYTES_PER_PARAM = 16
"""Bytes an AdamW step touches per trainable parameter: fp32 weight, gradient and two moments."""

#: One configuration (int or float) or a numpy array of them: the closed forms apply elementwise.
Size = TypeVar("Size", int, float, "np.ndarray")


def proxy_params(num_layers: int, hidden_size: int, ffn_size: int) -> int:
    """Parameter proxy N = L (12 d^2 + 2 d ff), in parameters."""
    return num_layers * (12 * hidden_size**2 + 2 * hidden_size * ffn_size)


def proxy_params_total(
    num_layers: Size,
    hidden_size: Size,
    ffn_size: Size,
    seq_len: Size,
    arch: str | np.ndarray = "encoder",
    vocab_size: Size | None = None,
) -> Size:
    """Every weight of the model, embeddings included, in parameters.

    Each layer's attention projections (4 d^2) and feed-forward block (2 d ff), plus the token
    embeddings (V x d) and the position embeddings (``max(seq_len, P)`` x d), where the encoder
    has P = :data:`MAX_POSITIONS` and 2 x d token-type embeddings more, the decoder
    P = :data:`DECODER_MAX_POSITIONS` and its head tied to the token embeddings (no weights of
    its own). Biases and norms are left out (under 1 % past toy sizes). V defaults to the
    arch's (:data:`~mlflow_roofline.core.schema.DEFAULT_VOCAB_SIZE`). BERT-base: about 109
    million; GPT-2 small: about 124 million. What data parallel moves every step under full
    fine-tuning. The paper's :func:`proxy_params` (12 d^2 + 2 d ff per layer) stays the law's
    proxy; this is the count. Elementwise: ``arch`` may be an array of names (then
    ``vocab_size`` must be given).
    """
    decoder = arch == "decoder"  # a bool, or a bool array for an array of names
    vocab = DEFAULT_VOCAB_SIZE[arch] if vocab_size is None else vocab_size  # type: ignore[index]
    cap = decoder * DECODER_MAX_POSITIONS + (1 - decoder) * MAX_POSITIONS
    longer = seq_len > cap  # elementwise for arrays, a bool for one configuration
    positions = longer * seq_len + (1 - longer) * cap
    token_types = (1 - decoder) * 2
    layers = num_layers * (4 * hidden_size**2 + 2 * hidden_size * ffn_size)
    return layers + (vocab + positions + token_types) * hidden_size


def lora_params_per_layer(hidden_size: Size, ffn_size: Size, lora_rank: Size, arch: str | np.ndarray) -> Size:
    """Parameters of one layer's LoRA adapters: r (in + out) summed over its adapted projections.

    The encoder's query, key, value and attention output (d -> d each) and its feed-forward
    pair (d -> ff, ff -> d): r (10 d + 2 ff). The decoder's fused query-key-value (d -> 3d),
    attention output (d -> d) and MLP pair: r (8 d + 2 ff). Elementwise in every argument.
    """
    decoder = arch == "decoder"
    attention = (1 - decoder) * 4 * 2 * hidden_size + decoder * ((hidden_size + 3 * hidden_size) + 2 * hidden_size)
    return lora_rank * (attention + 2 * (hidden_size + ffn_size))


def trainable_params(
    num_layers: Size,
    hidden_size: Size,
    ffn_size: Size,
    seq_len: Size,
    arch: str | np.ndarray,
    vocab_size: Size,
    peft: str | np.ndarray,
    lora_rank: Size,
) -> Size:
    """Parameters the optimizer updates, elementwise (arrays of configurations or one), in parameters.

    Full fine-tuning: :func:`proxy_params_total`. LoRA: the adapters
    (:func:`lora_params_per_layer` per layer), plus the encoder's classifier (d + 1 per
    label), trained from scratch beside them.
    """
    lora = peft == "lora"
    full = proxy_params_total(num_layers, hidden_size, ffn_size, seq_len, arch, vocab_size)
    adapters = num_layers * lora_params_per_layer(hidden_size, ffn_size, lora_rank, arch)
    head = (arch != "decoder") * NUM_LABELS * (hidden_size + 1)
    return lora * (adapters + head) + (1 - lora) * full


def proxy_params_trainable(config: TrainConfig) -> int:
    """Parameters the optimizer updates of one configuration (:func:`trainable_params`), in parameters."""
    c = config
    return int(
        trainable_params(c.num_layers, c.hidden_size, c.ffn_size, c.seq_len, c.arch, c.vocab_size, c.peft, c.lora_rank)
    )


def flops_head(hidden_size: Size, vocab_size: Size, tokens: Size, arch: str | np.ndarray) -> Size:
    """The vocabulary head on the paper's scale, elementwise: d V per token x tokens, in FLOPs (0 for the encoder).

    The paper's ``C_tok`` counts a forward multiply-add as one FLOP per weight (12 L d^2 for
    12 L d^2 weights); the head's V x d weights, met by every token of a causal LM, add d V.
    """
    return (arch == "decoder") * hidden_size * vocab_size * tokens


def proxy_flops_head(config: TrainConfig) -> int:
    """The vocabulary head of one configuration (:func:`flops_head`), in FLOPs (0 for the encoder)."""
    tokens = config.batch_size * config.seq_len * config.num_steps
    return int(flops_head(config.hidden_size, config.vocab_size, tokens, config.arch))


def opt_traffic(trainable: Size, num_steps: Size, num_devices: Size, strategy: str | np.ndarray) -> Size:
    """Optimizer bytes one device touches over the window, elementwise, in bytes (a float for arrays).

    ``trainable`` parameters x :data:`OPT_BYTES_PER_PARAM` x steps; fsdp shards the
    parameters and their optimizer state over the N devices (divided by N); a ddp replica
    updates all of them, and tensor parallel's per-device share is not modelled (1).
    """
    fsdp = strategy == "fsdp"
    shards = fsdp * num_devices + (1 - fsdp)
    return trainable * OPT_BYTES_PER_PARAM * num_steps / shards  # type: ignore[return-value]


def proxy_opt_traffic(config: TrainConfig) -> int:
    """Optimizer bytes one device touches over the window of one configuration (:func:`opt_traffic`), in bytes.

    Integer division by the shards, as logged since the proxy exists.
    """
    shards = config.num_devices if config.strategy == "fsdp" else 1
    return proxy_params_trainable(config) * OPT_BYTES_PER_PARAM * config.num_steps // shards


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
        M_PROXY_FLOPS_HEAD: float(proxy_flops_head(c)),
        M_PROXY_PARAMS_TOTAL: float(
            proxy_params_total(c.num_layers, c.hidden_size, c.ffn_size, c.seq_len, c.arch, c.vocab_size)
        ),
        M_PROXY_PARAMS_TRAINABLE: float(proxy_params_trainable(c)),
        M_PROXY_OPT_TRAFFIC: float(proxy_opt_traffic(c)),
    }
