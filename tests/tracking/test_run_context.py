"""The ``roofline`` run context provider: runs of a plain script carry the host's hardware when
``ROOFLINE_RUN_CONTEXT`` is true, and nothing of it otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlflow_roofline.core.carbon import lookup_region
from mlflow_roofline.core.host import nvidia_driver_present
from mlflow_roofline.energy.hardware_naming import hardware_name
from mlflow_roofline.tracking.run_context import RooflineRunContext, carbon_context_tags, host_tags

SCRIPT = """
import json, os, sys
import mlflow

tags = []
for flag in (None, "true"):
    if flag:
        os.environ["ROOFLINE_RUN_CONTEXT"] = flag
    with mlflow.start_run() as run:
        pass
    tags.append(mlflow.get_run(run.info.run_id).data.tags)
json.dump(tags, open(sys.argv[1], "w"))
"""


def test_a_plain_scripts_run_carries_the_hardware_only_when_asked(tracking_uri: str, tmp_path: Path) -> None:
    out = tmp_path / "tags.json"
    env = {k: v for k, v in os.environ.items() if k != "ROOFLINE_RUN_CONTEXT"} | {"ROOFLINE_REGION": "FR"}
    subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, check=True, timeout=120)
    plain, asked = json.loads(out.read_text())
    assert not any(k.startswith("roofline.") for k in plain)
    device = "cuda" if int(asked["roofline.device_count"]) > 0 else "cpu"
    assert asked["roofline.hardware"] == hardware_name(device)
    assert asked["roofline.region"] == "FR"
    assert float(asked["roofline.carbon_intensity_g_per_kwh"]) == pytest.approx(lookup_region("FR").g_co2e_per_kwh)
    assert asked["roofline.carbon_source"] == "table:FR"
    assert asked["mlflow.user"]  # MLflow's own context providers still ran


@pytest.mark.parametrize(("value", "on"), [("true", True), ("TRUE", True), ("1", True), ("false", False), ("", False)])
def test_only_a_true_value_turns_it_on(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv("ROOFLINE_RUN_CONTEXT", value)
    assert RooflineRunContext().in_context() is on


def test_this_hosts_tags_name_its_hardware_as_train_runs_do() -> None:
    tags = host_tags()
    if not nvidia_driver_present():
        assert tags == {"roofline.hardware": hardware_name("cpu"), "roofline.device_count": "0"}
    else:
        assert set(tags) >= {"roofline.hardware", "roofline.device_count", "roofline.driver_version"}


def test_carbon_tags_from_the_environment_and_none_from_a_bad_region() -> None:
    assert carbon_context_tags({"ROOFLINE_CARBON_INTENSITY": "250"}) == {
        "roofline.carbon_intensity_g_per_kwh": "250",
        "roofline.carbon_source": "env",
    }
    assert carbon_context_tags({}) == {}
    assert carbon_context_tags({"ROOFLINE_REGION": "atlantis"}) == {}  # a warning; the hardware tags stay


@pytest.mark.parametrize(
    ("name", "value"), [("ROOFLINE_PUE", "abc"), ("ROOFLINE_PUE", "0.5"), ("ROOFLINE_PRICE_PER_KWH", "-1")]
)
def test_a_bad_pue_or_price_keeps_the_region_and_intensity_tags_and_says_why(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, name: str, value: str
) -> None:
    """The run's tags carry neither the PUE nor the price: a bad one is a warning naming it, not lost tags."""
    import mlflow

    for key, setting in {"ROOFLINE_RUN_CONTEXT": "true", "ROOFLINE_REGION": "FR", name: value}.items():
        monkeypatch.setenv(key, setting)
    with caplog.at_level("WARNING", logger="mlflow_roofline.tracking.run_context"), mlflow.start_run() as run:
        pass
    tags = mlflow.get_run(run.info.run_id).data.tags
    assert tags["roofline.region"] == "FR" and tags["roofline.carbon_source"] == "table:FR"
    assert float(tags["roofline.carbon_intensity_g_per_kwh"]) == pytest.approx(lookup_region("FR").g_co2e_per_kwh)
    assert f"got '{value}' (from {name}); the run's tags do not carry it" in caplog.text


def test_a_bad_intensity_keeps_the_region_tag_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="mlflow_roofline.tracking.run_context"):
        tags = carbon_context_tags({"ROOFLINE_REGION": "FR", "ROOFLINE_CARBON_INTENSITY": "lots"})
    assert tags == {"roofline.region": "FR"}  # not the region's figure: the intensity given was refused
    assert (
        "carbon_intensity: expected a number >= 0, got 'lots' (from ROOFLINE_CARBON_INTENSITY); "
        "no roofline.carbon_intensity_g_per_kwh tag"
    ) in caplog.text
