"""An option named as the user types it: `-P name=value` under `mlflow run`, `--name value` elsewhere."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.invocation import ENV_INVOCATION, MLPROJECT, option


def test_an_option_is_spelt_the_way_the_process_was_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_INVOCATION, raising=False)
    assert option("allow_estimate", "true") == "--allow-estimate true"
    monkeypatch.setenv(ENV_INVOCATION, MLPROJECT)
    assert option("allow_estimate", "true") == "-P allow_estimate=true"
