"""``mlflow-roofline measure`` with a live carbon provider: a loopback Electricity Maps stub, then none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
from fakes.carbon_stub import running_stub, stub_env

from mlflow_roofline.core import carbon_live
from mlflow_roofline.core.carbon import resolve_carbon
from mlflow_roofline.measure.wrapper import measure_command_line

CLI = str(Path(sys.executable).parent / "mlflow-roofline")


def _only_run():
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    return run


@pytest.mark.slow
def test_measure_logs_the_stubs_intensity_then_falls_back_when_it_is_gone(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_stub() as stub:
        stub.latest = 234.0
        env = stub_env(stub)
        proc = subprocess.run(
            [CLI, "measure", "--region", "DE", "--meter", "estimate", "--", "true"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **env},
        )
    assert proc.returncode == 0, proc.stderr
    tags = _only_run().data.tags
    assert tags["roofline.carbon_source"] == "electricitymaps:DE"
    assert tags["roofline.carbon_intensity_g_per_kwh"] == "234"
    mlflow.delete_experiment(_only_run().info.experiment_id)

    # The stub is stopped: the same command falls back to the table quickly (in-process: no second CLI start).
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    carbon_live.clear_cache()
    started = time.monotonic()
    assert measure_command_line(["true"], "estimate", "after", carbon={"region": "DE"}, echo=lambda _: None) == 0
    assert time.monotonic() - started < 5.0
    tags = mlflow.search_runs(experiment_names=["after"], output_format="list")[0].data.tags
    assert tags["roofline.carbon_source"].startswith("table:DE (electricitymaps: unreachable")
    assert float(tags["roofline.carbon_intensity_g_per_kwh"]) == resolve_carbon(region="DE").intensity_g_per_kwh


@pytest.mark.parametrize(
    ("provider", "extra", "reason"),
    [
        ("electricitymaps", {}, "electricitymaps: no zone to ask about; give a region (--region)"),
        ("watttime", {"ROOFLINE_WATTTIME_REGION": "CAISO_NORTH"}, "watttime: unreachable"),
    ],
)
def test_measure_says_why_there_is_no_co2e_when_the_provider_gave_none_and_no_region_was_given(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, provider: str, extra: dict[str, str], reason: str
) -> None:
    with running_stub() as stub:
        env = stub_env(stub, provider, **extra)
    for key, value in env.items():  # the stub is gone: the provider is unreachable
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("ROOFLINE_REGION", raising=False)
    monkeypatch.delenv("ROOFLINE_CARBON_INTENSITY", raising=False)
    carbon_live.clear_cache()
    lines: list[str] = []
    assert measure_command_line(["true"], "estimate", "no-region", carbon={}, echo=lines.append) == 0
    assert ", co2e unknown (" + reason in lines[-1], lines
    tags = mlflow.search_runs(experiment_names=["no-region"], output_format="list")[0].data.tags
    assert reason in tags["roofline.carbon_unknown"]
