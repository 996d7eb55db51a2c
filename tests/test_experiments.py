"""Finding or creating the experiment a command writes to, against a real SQLite store."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.tracking.experiments import find_experiment, get_or_create_experiment


def test_get_or_create_then_refuse_deleted_and_empty(tracking_uri: str) -> None:
    client = MlflowClient(tracking_uri)
    assert find_experiment(client, "roofline-bert") is None
    created = get_or_create_experiment(client, "roofline-bert")
    assert get_or_create_experiment(client, "roofline-bert") == created
    assert find_experiment(client, "roofline-bert").experiment_id == created

    client.delete_experiment(created)
    with pytest.raises(ConfigError, match="^experiment: 'roofline-bert' is deleted; restore it or choose another name$"):
        get_or_create_experiment(client, "roofline-bert")
    with pytest.raises(ConfigError, match="^experiment: must be a non-empty name$"):
        find_experiment(client, "  ")
