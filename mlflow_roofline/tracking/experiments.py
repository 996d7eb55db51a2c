"""Finding or creating the MLflow experiment a command writes to, with errors that name it."""

from __future__ import annotations

from typing import Any

from mlflow.exceptions import MlflowException

from mlflow_roofline.core.errors import ConfigError


def find_experiment(client: Any, name: str) -> Any | None:
    """The active experiment called ``name``, or None when there is none.

    Raises:
        ConfigError: an empty name, or an experiment of that name that was deleted.
    """
    if not name.strip():
        raise ConfigError("experiment", "must be a non-empty name")
    found = client.get_experiment_by_name(name)
    if found is not None and found.lifecycle_stage != "active":
        raise ConfigError("experiment", f"{name!r} is deleted; restore it or choose another name")
    return found


def get_or_create_experiment(client: Any, name: str) -> str:
    """The id of the experiment called ``name``, created if missing (see :func:`find_experiment`)."""
    found = find_experiment(client, name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:  # created meanwhile by a concurrent run
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id
