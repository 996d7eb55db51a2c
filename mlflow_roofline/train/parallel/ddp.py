"""``ddp``: data parallel, a full replica per process, gradients all-reduced (averaged).

Each rank trains on its ``batch_size / N`` rows of the global batch; the averaged
gradient equals the gradient of the whole batch's mean loss, so the run follows the
single-device trajectory.
"""

from __future__ import annotations

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mlflow_roofline.train.parallel.dist import DistEnv


def wrap(model: nn.Module, env: DistEnv) -> nn.Module:
    """``DistributedDataParallel`` around the model (weights broadcast from rank 0)."""
    device_ids = [env.device.index] if env.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def rows(batch_size: int, env: DistEnv) -> slice:
    """This rank's contiguous share of the global batch."""
    per_rank = batch_size // env.world_size
    return slice(env.rank * per_rank, (env.rank + 1) * per_rank)
