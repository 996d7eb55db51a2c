"""``fsdp``: fully sharded data parallel with FSDP2 (``torch.distributed.fsdp.fully_shard``).

Every encoder layer is its own FSDP unit, and the root (embeddings, pooler, classifier)
another: each rank keeps ``1/N`` of every parameter (a ``DTensor`` sharded on dim 0),
all-gathers a unit's weights just before it runs and reduce-scatters its gradients
(averaged) after. Each rank trains on ``batch_size / N`` rows, as under ``ddp``.
"""

from __future__ import annotations

import typing

from torch import nn
from torch.distributed.fsdp import fully_shard

from mlflow_roofline.train.parallel import ddp
from mlflow_roofline.train.parallel.dist import DistEnv

rows = ddp.rows
"""Each rank trains on its ``batch_size / N`` rows of the global batch, as under ``ddp``."""


def wrap(model: nn.Module, env: DistEnv) -> nn.Module:
    """Shard each ``BertLayer`` and then the root over a 1-D mesh of all ranks."""
    mesh = env.mesh()
    for layer in typing.cast(nn.ModuleList, model.get_submodule("bert.encoder.layer")):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model
