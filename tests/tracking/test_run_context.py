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
