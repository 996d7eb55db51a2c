"""Finding or creating the experiment a command writes to, against a real SQLite store."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.experiments import find_experiment, get_or_create_experiment


def test_get_or_create_then_refuse_deleted_and_empty(tracking_uri: str) -> None:
    client = TrackingClient(tracking_uri)
    assert find_experiment(client, "roofline-bert") is None
    created = get_or_create_experiment(client, "roofline-bert")
    assert get_or_create_experiment(client, "roofline-bert") == created
    assert find_experiment(client, "roofline-bert").experiment_id == created

    client.delete_experiment(created)
    with pytest.raises(
        ConfigError, match="^experiment: 'roofline-bert' is deleted; restore it or choose another name$"
    ):
        get_or_create_experiment(client, "roofline-bert")
    with pytest.raises(ConfigError, match="^experiment: must be a non-empty name$"):
        find_experiment(client, "  ")


def test_experiments_are_tagged_model_training_unless_of_another_kind(
    tracking_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = TrackingClient(tracking_uri)
    kind = "mlflow.experimentKind"
    created = get_or_create_experiment(client, "new-one")
    assert client.experiment(created).tags[kind] == "custom_model_development"

    untagged = client.create_experiment("made-by-hand")  # no kind yet: this package's runs make it model training
    assert get_or_create_experiment(client, "made-by-hand") == untagged
    assert client.experiment(untagged).tags[kind] == "custom_model_development"

    genai = client.create_experiment("chatbot", tags={kind: "genai_development"})
    with caplog.at_level("WARNING", logger="mlflow_roofline.tracking.experiments"):
        assert get_or_create_experiment(client, "chatbot") == genai
        assert get_or_create_experiment(client, "chatbot") == genai
    assert client.experiment(genai).tags[kind] == "genai_development"
    notes = [r.getMessage() for r in caplog.records if "chatbot" in r.getMessage()]
    assert len(notes) == 1 and "'genai_development'" in notes[0] and "left as it is" in notes[0]
