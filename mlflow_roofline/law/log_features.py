"""The law's features of arrays of configurations, all natural logs.

The paper's proxies:

- ``log_C``   log proxy_flops of the job (FLOPs)
- ``log_M``   log proxy_mem_traffic of the job (activation elements)
- ``log_T``   log tokens of the job (batch_size * seq_len * num_steps)
- ``log_steps`` log num_steps (optimizer steps)
- ``log_eta`` log hardware efficiency S(N)/N (dimensionless)
- ``log_N``   log num_devices
- ``strategy`` the strategy name (categorical)

The complete proxies (what the paper's leave out, :mod:`mlflow_roofline.core.proxies`), and
the job's kind:

- ``log_C_all`` log (proxy_flops + proxy_flops_head): the vocabulary head included (FLOPs)
- ``log_M_all`` log (proxy_mem_traffic x :data:`~mlflow_roofline.core.proxies.MEM_BYTES_PER_ELEMENT`
  + proxy_opt_traffic): activations and the optimizer's state (bytes)
- ``arch`` ``encoder`` or ``decoder``; ``peft`` ``none`` or ``lora``; ``grad_checkpointing``
  ``false`` or ``true`` (categoricals, as text)

A configuration that does not say its kind (every run and model logged before the kind params
existed) is the paper's: an encoder with V = 30,522, every weight trained, no checkpointing.

The fit and the served model both call :func:`law_features`, so a law sees the same
features at prediction time as at fit time.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlflow_roofline.core.proxies import (
    MEM_BYTES_PER_ELEMENT,
    flops_head,
    opt_traffic,
    proxy_flops,
    proxy_mem_traffic,
    trainable_params,
)
from mlflow_roofline.core.schema import DEFAULT_LORA_RANK, DEFAULT_VOCAB_SIZE

KIND_FEATURES: tuple[str, ...] = ("arch", "peft", "grad_checkpointing")
"""The categorical features of a job's kind, each with its default level first (:data:`KIND_LEVELS`)."""
KIND_LEVELS: dict[str, tuple[str, str]] = {
    "arch": ("encoder", "decoder"),
    "peft": ("none", "lora"),
    "grad_checkpointing": ("false", "true"),
}
"""Each kind feature's levels, the default (the paper's: reference level of the law's dummy) first."""
KIND_INDICATORS: dict[str, tuple[str, str]] = {
    f"{name}_{levels[1]}": (name, levels[1]) for name, levels in KIND_LEVELS.items()
}
"""``arch_decoder``, ``peft_lora``, ``grad_checkpointing_true``: 1.0 where a job is not the paper's kind,
by feature and level; their [min, max] over the fitted runs tell which kinds a law has seen."""


def kind_indicators(features: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Each of :data:`KIND_INDICATORS` as a 0/1 float array, from the kind features (text levels) of rows."""
    return {
        key: (np.asarray(features[name], dtype=object) == level).astype(float)
        for key, (name, level) in KIND_INDICATORS.items()
    }


def kind_columns(
    n_rows: int,
    arch: np.ndarray | None = None,
    vocab_size: np.ndarray | None = None,
    peft: np.ndarray | None = None,
    lora_rank: np.ndarray | None = None,
    grad_checkpointing: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Each kind param as an array of ``n_rows``, defaults where not given (None) or missing (NaN vocab/rank).

    ``vocab_size`` defaults by arch (:data:`~mlflow_roofline.core.schema.DEFAULT_VOCAB_SIZE`),
    ``lora_rank`` by peft; ``grad_checkpointing`` is a bool array. Values are taken as given
    (validation is the caller's: the run puller, the served model's input check).
    """
    archs = np.full(n_rows, KIND_LEVELS["arch"][0], dtype=object) if arch is None else np.asarray(arch, dtype=object)
    pefts = np.full(n_rows, KIND_LEVELS["peft"][0], dtype=object) if peft is None else np.asarray(peft, dtype=object)
    vocab = np.full(n_rows, np.nan) if vocab_size is None else np.asarray(vocab_size, dtype=float)
    vocab_default = np.where(
        archs == "decoder", float(DEFAULT_VOCAB_SIZE["decoder"]), float(DEFAULT_VOCAB_SIZE["encoder"])
    )
    vocab = np.where(np.isnan(vocab), vocab_default, vocab)
    rank = np.full(n_rows, np.nan) if lora_rank is None else np.asarray(lora_rank, dtype=float)
    rank = np.where(np.isnan(rank), np.where(pefts == "lora", float(DEFAULT_LORA_RANK["lora"]), 0.0), rank)
    ckpt = np.zeros(n_rows, dtype=bool) if grad_checkpointing is None else np.asarray(grad_checkpointing)
    if ckpt.dtype.kind in "OUS":  # words, as a table may hold them: only "true" is true
        ckpt = np.array([str(v).strip().lower() == "true" for v in ckpt], dtype=bool)
    ckpt = ckpt.astype(bool)
    return {"arch": archs, "vocab_size": vocab, "peft": pefts, "lora_rank": rank, "grad_checkpointing": ckpt}


def law_features(
    *,
    num_layers: np.ndarray,
    hidden_size: np.ndarray,
    seq_len: np.ndarray,
    batch_size: np.ndarray,
    num_steps: np.ndarray,
    num_devices: np.ndarray,
    speedup: np.ndarray,
    strategy: np.ndarray,
    ffn_size: np.ndarray | None = None,
    arch: np.ndarray | None = None,
    vocab_size: np.ndarray | None = None,
    peft: np.ndarray | None = None,
    lora_rank: np.ndarray | None = None,
    grad_checkpointing: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The law's features for arrays of configurations (one entry per row).

    ``ffn_size`` None: 4 x hidden_size (the paper's and BERT's ratio); the kind params None:
    their defaults (:func:`kind_columns`). The fit and the served model both call this, so
    a law sees the same features at prediction time as at fit time.
    """
    layers, hidden, seq, batch, steps = (
        np.asarray(v, dtype=float) for v in (num_layers, hidden_size, seq_len, batch_size, num_steps)
    )
    ffn = 4.0 * hidden if ffn_size is None else np.asarray(ffn_size, dtype=float)
    n = np.asarray(num_devices, dtype=float)
    strategies = np.asarray(strategy, dtype=object)
    kind = kind_columns(len(layers), arch, vocab_size, peft, lora_rank, grad_checkpointing)
    c = proxy_flops(layers, hidden, seq, batch, steps)
    m = proxy_mem_traffic(layers, hidden, seq, batch, steps)
    eta = np.asarray(speedup, dtype=float) / n
    tokens = batch * seq * steps
    head = flops_head(hidden, kind["vocab_size"], tokens, kind["arch"])
    trainable = trainable_params(
        layers, hidden, ffn, seq, kind["arch"], kind["vocab_size"], kind["peft"], kind["lora_rank"]
    )
    optimizer = opt_traffic(trainable, steps, n, strategies)
    return {
        "log_C": np.log(c),
        "log_M": np.log(m),
        "log_T": np.log(tokens),
        "log_steps": np.log(steps),
        "log_eta": np.log(eta),
        "log_N": np.log(n),
        "strategy": strategies,
        "log_C_all": np.log(c + head),
        "log_M_all": np.log(m * MEM_BYTES_PER_ELEMENT + optimizer),
        "arch": kind["arch"],
        "peft": kind["peft"],
        "grad_checkpointing": np.where(kind["grad_checkpointing"], "true", "false").astype(object),
    }
