"""``fsdp``: fully sharded data parallel with FSDP2 (``torch.distributed.fsdp.fully_shard``).

Every transformer layer is its own FSDP unit, and the root (embeddings, pooler,
classifier or the decoder's head) another: each rank keeps ``1/N`` of every parameter (a ``DTensor`` sharded on dim 0),
all-gathers a unit's weights just before it runs and reduce-scatters its gradients
(averaged) after. Each rank trains on ``batch_size / N`` rows, as under ``ddp``.
"""

from __future__ import annotations

from torch import nn
from torch.distributed.fsdp import fully_shard

from mlflow_roofline.train.architecture import layers_of
from mlflow_roofline.train.parallel import ddp
from mlflow_roofline.train.parallel.dist import DistEnv

rows = ddp.rows
"""Each rank trains on its ``batch_size / N`` rows of the global batch, as under ``ddp``."""


def wrap(model: nn.Module, env: DistEnv) -> nn.Module:
    """Shard each layer (``BertLayer``, ``GPT2Block``) and then the root over a 1-D mesh of all ranks."""
    mesh = env.mesh()
    for layer in layers_of(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model
