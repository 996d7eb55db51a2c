"""``single``: one process, one device, the model as it is."""

from __future__ import annotations

from torch import nn

from mlflow_roofline.train.parallel.dist import DistEnv


def wrap(model: nn.Module, env: DistEnv) -> nn.Module:
    """The model itself: nothing to spread."""
    return model


def rows(batch_size: int, env: DistEnv) -> slice:
    """The whole global batch."""
    return slice(0, batch_size)
