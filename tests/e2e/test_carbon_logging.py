"""Runs log energy_kwh, co2e_g and cost with the carbon tags: track_energy, measure, train and sweep."""

from __future__ import annotations

import sys
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from support.cli_in_process import run_cli

import mlflow_roofline
from mlflow_roofline.core.carbon import J_PER_KWH, CarbonSettings, lookup_region
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import (
    M_CO2E_G,
    M_COST,
    M_ENERGY_CPU_J,
    M_ENERGY_J,
    M_ENERGY_KWH,
    M_ENERGY_NODE_J,
    M_POWER_W,
    M_WARMUP_ENERGY_J,
    POWER_PLOT_ARTIFACT,
    TAG_CARBON_INTENSITY,
    TAG_CARBON_SOURCE,
    TAG_CARBON_UNKNOWN,
    TAG_ENERGY_NODE_ERROR,
    TAG_ERROR,
    TAG_PRICE_PER_KWH,
    TAG_PUE,
)
from mlflow_roofline.sweep.child_run import train_command
from mlflow_roofline.sweep.plan import expand
from mlflow_roofline.sweep.spec import parse_spec

SHAPE = {
    "num_layers": 1,
    "hidden_size": 16,
    "num_heads": 2,
    "ffn_size": 32,
    "seq_len": 8,
    "batch_size": 4,
}
CARBON_ENV = (
    "ROOFLINE_CARBON_INTENSITY",
    "ROOFLINE_REGION",
    "ROOFLINE_PUE",
    "ROOFLINE_PRICE_PER_KWH",
)


@pytest.fixture(autouse=True)
def no_carbon_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CARBON_ENV:
        monkeypatch.delenv(name, raising=False)


def _busy(seconds: float) -> None:
    import time

    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _check_emissions(metrics: dict[str, float], intensity: float, pue: float, price: float | None) -> None:
    kwh = metrics[M_ENERGY_J] / J_PER_KWH
    assert metrics[M_ENERGY_KWH] == pytest.approx(kwh, rel=1e-9)
    assert metrics[M_CO2E_G] == pytest.approx(kwh * pue * intensity, rel=1e-9)
    if price is None:
        assert M_COST not in metrics
    else:
        assert metrics[M_COST] == pytest.approx(kwh * pue * price, rel=1e-9)


def test_track_energy_logs_emissions_with_their_source(tracking_uri: str) -> None:
    settings = CarbonSettings(intensity_g_per_kwh=250.0, source="option", pue=1.3, price_per_kwh=0.2)
    with mlflow_roofline.track_energy("estimate", device="cpu", carbon=settings) as window:
        _busy(0.2)
    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    assert window.measurement.energy_j == pytest.approx(run.data.metrics[M_ENERGY_J])
    _check_emissions(run.data.metrics, 250.0, 1.3, 0.2)
    tags = run.data.tags
    assert (tags[TAG_CARBON_INTENSITY], tags[TAG_CARBON_SOURCE], tags[TAG_PUE]) == (
        "250",
        "option",
        "1.3",
    )
    assert tags[TAG_PRICE_PER_KWH] == "0.2"
    assert TAG_CARBON_UNKNOWN not in tags


def test_track_energy_without_a_figure_logs_kwh_and_says_emissions_are_unknown(
    tracking_uri: str,
) -> None:
    with mlflow_roofline.track_energy("estimate", device="cpu"):
        _busy(0.1)
    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    assert run.data.metrics[M_ENERGY_KWH] == pytest.approx(run.data.metrics[M_ENERGY_J] / J_PER_KWH)
    assert M_CO2E_G not in run.data.metrics and M_COST not in run.data.metrics
    assert "--carbon-intensity" in run.data.tags[TAG_CARBON_UNKNOWN]
    assert TAG_CARBON_SOURCE not in run.data.tags


def test_track_energy_takes_the_env(tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_REGION", "eu-west-3")
    with mlflow_roofline.track_energy("estimate", device="cpu"):
        _busy(0.1)
    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    assert run.data.tags[TAG_CARBON_SOURCE] == "table:eu-west-3"
    _check_emissions(run.data.metrics, lookup_region("FR").g_co2e_per_kwh, 1.0, None)


def test_track_energy_bad_env_fails_before_the_block(tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_PUE", "0.7")
    ran = []
    with (
        pytest.raises(ConfigError, match="pue"),
        mlflow_roofline.track_energy("estimate", device="cpu"),
    ):
        ran.append(True)
    assert not ran


@pytest.mark.slow
def test_measure_with_region_pue_and_price(tracking_uri: str) -> None:
    code = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    args = [
        "--region",
        "DE",
        "--pue",
        "1.2",
        "--price-per-kwh",
        "0.3",
        "--meter",
        "estimate",
    ]
    proc = run_cli("measure", *args, "--", sys.executable, "-c", code)  # the command is a real child
    assert proc.returncode == 0, proc.stderr
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert run.data.tags[TAG_CARBON_SOURCE] == "table:DE"
    _check_emissions(run.data.metrics, lookup_region("DE").g_co2e_per_kwh, 1.2, 0.3)
    assert "g CO2e" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--pue", "0.5"], "pue"),
        (["--region", "atlantis"], "region"),
        (["--carbon-intensity", "x"], "carbon_intensity"),
    ],
)
def test_measure_bad_carbon_option_exits_2_before_any_run(tracking_uri: str, args: list[str], field: str) -> None:
    proc = run_cli("measure", *args, "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"Error: {field}:") and len(proc.stderr.strip().splitlines()) == 1
    assert mlflow.search_runs(search_all_experiments=True, output_format="list") == []


@pytest.mark.slow
def test_train_run_logs_emissions_warmup_energy_and_power_timeline(tracking_uri: str, tmp_path: Path) -> None:
    from mlflow_roofline.train.run import train

    # Long enough for a few 0.1 s timeline samples even on an idle machine.
    options = {**SHAPE, "num_steps": 80, "warmup_steps": 2, "device": "cpu"}
    carbon = {"region": "us-east-1", "pue": "1.1", "price_per_kwh": "0.15"}
    run_id, _ = train(options, meter="estimate", experiment="carbon-train", carbon=carbon)
    client = MlflowClient()
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags[TAG_CARBON_SOURCE] == "table:us-east-1"
    _check_emissions(run.data.metrics, lookup_region("US").g_co2e_per_kwh, 1.1, 0.15)
    # The warm-up is its own window; the estimate meter cannot see the node's CPU and DRAM, and says so.
    assert run.data.metrics[M_WARMUP_ENERGY_J] > 0
    assert "not measured" in run.data.tags[TAG_ENERGY_NODE_ERROR]
    assert M_ENERGY_NODE_J not in run.data.metrics and M_ENERGY_CPU_J not in run.data.metrics
    history = client.get_metric_history(run_id, M_POWER_W)
    assert 2 <= len(history) <= 1000
    assert [m.step for m in history] == list(range(len(history)))
    assert [m.timestamp for m in history] == sorted(m.timestamp for m in history)
    assert all(m.value >= 0 for m in history)
    png = Path(client.download_artifacts(run_id, POWER_PLOT_ARTIFACT, str(tmp_path)))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_bad_carbon_ends_the_run_failed_before_training(
    tracking_uri: str,
) -> None:
    from mlflow_roofline.train.run import train

    options = {**SHAPE, "num_steps": 2, "warmup_steps": 1, "device": "cpu"}
    with pytest.raises(ConfigError) as info:
        train(
            options,
            meter="estimate",
            experiment="carbon-bad",
            carbon={"carbon_intensity": "-3"},
        )
    assert info.value.field == "carbon_intensity"
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert run.info.status == "FAILED"
    assert "carbon_intensity" in run.data.tags[TAG_ERROR]


def test_spec_carbon_keys_become_train_options() -> None:
    grid = dict(SHAPE)  # a one-point grid: the tiny shape of the training tests above
    spec = parse_spec({"grid": grid, "region": "europe-west4", "pue": 1.2})
    assert spec.carbon_args == ["--region", "europe-west4", "--pue", "1.2"]
    (config,) = expand(spec, "cpu", None).configs
    command = train_command(config, "estimate", spec.carbon_args)
    assert command[-4:] == ["--region", "europe-west4", "--pue", "1.2"]
    for key, value in (("region", "nowhere-9"), ("pue", 0.2), ("carbon_intensity", -1)):
        with pytest.raises(ConfigError) as info:
            parse_spec({"grid": grid, key: value})
        assert info.value.field == key


@pytest.mark.slow
def test_sweep_passes_carbon_options_to_every_child(tracking_uri: str, tmp_path: Path) -> None:
    spec = tmp_path / "carbon.yaml"
    spec.write_text(
        "experiment: carbon-sweep\ndevice: cpu\nmeter: estimate\nnum_steps: 2\nwarmup_steps: 1\n"
        "num_heads: 2\nffn_ratio: 2\nseq_len: 8\nbatch_size: 4\nregion: SE\n"
        "grid: {num_layers: 1, hidden_size: [16, 32]}\n"
    )
    proc = run_cli("sweep", str(spec), "--no-progress", "--pue", "1.5")  # the children and the store are checked
    assert proc.returncode == 0, proc.stdout + proc.stderr
    client = MlflowClient()
    exp = client.get_experiment_by_name("carbon-sweep")
    children = client.search_runs([exp.experiment_id], filter_string="tags.`roofline.run_type` = 'train'")
    assert len(children) == 2
    for run in children:
        assert run.data.tags[TAG_CARBON_SOURCE] == "table:SE"
        _check_emissions(run.data.metrics, lookup_region("SE").g_co2e_per_kwh, 1.5, None)


@pytest.mark.slow
def test_sweep_bad_carbon_option_exits_2_before_any_run(tracking_uri: str, tmp_path: Path) -> None:
    proc = run_cli("sweep", "smoke", "--region", "atlantis")
    assert proc.returncode == 2 and proc.stderr.startswith("Error: region:")
    assert mlflow.search_runs(search_all_experiments=True, output_format="list") == []


def test_empty_carbon_options_count_as_not_given() -> None:
    from mlflow_roofline.commands.options import pop_carbon_options

    options = {"region": "", "pue": "1.2", "carbon_intensity": None, "price_per_kwh": "  ", "num_layers": "2"}
    assert pop_carbon_options(options) == {"pue": "1.2"}
    assert options == {"num_layers": "2"}


@pytest.mark.slow
def test_measure_logs_water_in_a_region_of_the_table_and_names_the_missing_embodied_figure(tracking_uri: str) -> None:
    code = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    args = ["--region", "us-east-1", "--pue", "1.2", "--meter", "estimate"]
    proc = run_cli("measure", *args, "--", sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    metrics, tags = run.data.metrics, run.data.tags
    kwh = metrics[M_ENERGY_J] / J_PER_KWH
    assert metrics["water_l"] == pytest.approx(kwh * (0.15 + 1.2 * 3.14), rel=1e-9)  # AWS site WUE, US grid
    assert tags["roofline.water_source"] == "table:us-east-1 (site aws 0.15 L/kWh 2024; grid US 3.14 L/kWh)"
    assert "embodied_co2e_g" not in metrics  # a CPU has no manufacturing figure in the table
    assert "no manufacturing figure for 'cpu:" in tags["roofline.embodied_unknown"]
