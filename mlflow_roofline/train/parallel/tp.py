"""``tp``: tensor parallel (Megatron-style) with DTensor ``parallelize_module``.

In every encoder layer:

- attention: ``query``, ``key``, ``value`` column-wise (each rank computes ``h / N`` heads),
  ``attention.output.dense`` row-wise (partial sums all-reduced);
- feed-forward: ``intermediate.dense`` column-wise (``ff / N`` units per rank),
  ``output.dense`` row-wise.

Embeddings, LayerNorms, pooler and classifier stay whole on every rank. Every rank
processes the whole global batch; two all-reduces per layer in the forward pass, two
in the backward.
"""

from __future__ import annotations

import typing
from typing import Any

from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from mlflow_roofline.train.parallel import single
from mlflow_roofline.train.parallel.dist import DistEnv

rows = single.rows
"""Every rank processes the whole global batch (the work is split inside the layers)."""

LAYER_PLAN: dict[str, type] = {
    "attention.self.query": ColwiseParallel,
    "attention.self.key": ColwiseParallel,
    "attention.self.value": ColwiseParallel,
    "attention.output.dense": RowwiseParallel,
    "intermediate.dense": ColwiseParallel,
    "output.dense": RowwiseParallel,
}
"""Submodule of a ``BertLayer`` -> parallel style; the tests check these are the sharded ones."""


def wrap(model: nn.Module, env: DistEnv) -> nn.Module:
    """Shard the planned Linear layers of each encoder layer; split the heads across ranks."""
    mesh = env.mesh()
    for layer in typing.cast(nn.ModuleList, model.get_submodule("bert.encoder.layer")):
        parallelize_module(layer, mesh, {name: style() for name, style in LAYER_PLAN.items()})
        attention: Any = layer.get_submodule("attention.self")
        # The attention reshapes its projections into heads; each rank now holds h / N.
        attention.num_attention_heads //= env.world_size
        attention.all_head_size //= env.world_size
    return model
