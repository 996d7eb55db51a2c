"""The parallel strategies: how a model is spread over the processes of a job.

One module per strategy, each with the same two functions:

- ``wrap(model, env) -> nn.Module``: the model as this process runs it;
- ``rows(batch_size, env) -> slice``: the rows of each global batch this process trains on.

:func:`strategy` looks a module up by its schema name (``single``, ``ddp``, ``fsdp``, ``tp``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import STRATEGIES


def strategy(name: str) -> ModuleType:
    """The module implementing strategy ``name``.

    Raises:
        ConfigError: ``name`` is not one of :data:`mlflow_roofline.core.schema.STRATEGIES`.
    """
    if name not in STRATEGIES:
        raise ConfigError("strategy", f"must be one of {', '.join(STRATEGIES)}, got {name!r}")
    return importlib.import_module(f"mlflow_roofline.train.parallel.{name}")
