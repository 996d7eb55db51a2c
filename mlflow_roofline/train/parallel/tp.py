"""``tp``: tensor parallel (Megatron-style) with DTensor ``parallelize_module``.

In every layer (the projections of :mod:`mlflow_roofline.train.architecture`):

- attention: the projections into it column-wise, so each rank computes ``h / N`` heads
  (the encoder's ``query``, ``key``, ``value``; the decoder's fused ``c_attn``), the
  output projection row-wise (partial sums all-reduced);
- feed-forward: the first projection column-wise (``ff / N`` units per rank), the second
  row-wise.

The decoder's fused ``c_attn`` holds query, key and value one after the other; its rows
are first regrouped so that each rank's contiguous column shard holds its own heads'
query, key and value (a relabelling: the layer computes the same function). Under LoRA
the frozen projection (``base_layer``) is split as above, and its adapter along with it:
``lora_B`` column-wise after a column-split projection, ``lora_A`` row-wise before a
row-split one, the other adapter matrix (rank-sized) whole.

Embeddings, LayerNorms, pooler, classifier and the decoder's head stay whole on every
rank. Every rank processes the whole global batch; two all-reduces per layer in the
forward pass, two in the backward.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

from mlflow_roofline.train.adapters import ADAPTER, is_lora_layer
from mlflow_roofline.train.architecture import ARCHITECTURES, COLUMN, arch_of, layers_of
from mlflow_roofline.train.parallel import single
from mlflow_roofline.train.parallel.dist import DistEnv

rows = single.rows
"""Every rank processes the whole global batch (the work is split inside the layers)."""

STYLES: dict[str, type[ParallelStyle]] = {COLUMN: ColwiseParallel, "row": RowwiseParallel}

LAYER_PLAN: dict[str, type] = {name: STYLES[how] for name, how in ARCHITECTURES["encoder"].projections.items()}
"""Submodule of a ``BertLayer`` -> parallel style; the tests check these are the sharded ones."""

FUSED_QKV = "attn.c_attn"
"""The decoder's fused query-key-value projection (d -> 3d)."""


def wrap(model: nn.Module, env: DistEnv) -> nn.Module:
    """Shard the planned projections of each layer; split the heads across ranks."""
    mesh = env.mesh()
    arch = arch_of(model)
    parts = ARCHITECTURES[arch]
    for layer in layers_of(model):
        if arch == "decoder":
            _group_heads_by_rank(layer.get_submodule(FUSED_QKV), env.world_size)
        plan: dict[str, ParallelStyle] = {}
        for name, how in parts.projections.items():
            plan.update(_plan_projection(name, how, layer.get_submodule(name)))
        parallelize_module(layer, mesh, plan)
        attention: Any = layer.get_submodule(parts.attention)
        # The attention reshapes its projections into heads; each rank now holds h / N.
        if hasattr(attention, "num_attention_heads"):  # encoder
            attention.num_attention_heads //= env.world_size
            attention.all_head_size //= env.world_size
        else:  # decoder: c_attn's local output splits into q, k, v of d / N each
            attention.num_heads //= env.world_size
            attention.split_size //= env.world_size
    return model


def _plan_projection(name: str, how: str, module: nn.Module) -> dict[str, ParallelStyle]:
    """The styles of one projection, and of its LoRA adapter when it has one."""
    style = STYLES[how]
    if not is_lora_layer(module):
        return {name: style()}
    adapter = f"lora_B.{ADAPTER}" if how == COLUMN else f"lora_A.{ADAPTER}"
    return {f"{name}.base_layer": style(), f"{name}.{adapter}": style()}


@torch.no_grad()
def _group_heads_by_rank(projection: Any, world_size: int) -> None:
    """Reorder the fused ``[q; k; v]`` output rows as ``[q_0; k_0; v_0; q_1; ...]``, rank by rank.

    Applied to the projection's weight and bias, and to ``lora_B`` under LoRA (its output
    rows are the projection's).
    """
    targets = [projection.base_layer, projection.lora_B[ADAPTER]] if is_lora_layer(projection) else [projection]
    for linear in targets:
        params: list[torch.Tensor | None] = [linear.weight, linear.bias]
        for param in params:
            if param is None:
                continue
            out = param.shape[0]
            # [3, N, out/(3N), ...] -> [N, 3, out/(3N), ...]: each rank's q, k and v side by side
            grouped = param.reshape(3, world_size, out // (3 * world_size), *param.shape[1:]).transpose(0, 1)
            param.copy_(grouped.reshape(param.shape))
