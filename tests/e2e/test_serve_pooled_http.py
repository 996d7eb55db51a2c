"""End to end: runs of three simulated GPUs logged, fitted into one fleet model, served by `mlflow models serve`."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest
from support.module_store import module_store

from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.testing.hardware_fleet import FLEET, fleet_table_env, write_fleet_table
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs
from mlflow_roofline.testing.scoring_server import ScoringServer
from mlflow_roofline.testing.synthetic import log_runs

pytestmark = pytest.mark.slow

MODEL_URI = "models:/fleet-energy@champion"
JOB = {
    "num_layers": 6,
    "hidden_size": 512,
    "num_heads": 8,
    "ffn_size": 2048,
    "seq_len": 128,
    "batch_size": 32,
    "num_steps": 1000,
    "strategy": "single",
    "num_devices": 1,
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[tuple[ScoringServer, Any]]:
    """The fleet's runs (their GPUs in the user's hardware table) fitted into one pooled law and served."""
    warnings.simplefilter("ignore")
    root = tmp_path_factory.mktemp("pooled-store")
    table = write_fleet_table(root / "fleet.csv")
    with module_store(root, store_template) as (uri, patch):
        for name, value in fleet_table_env(table).items():
            patch.setenv(name, value)
        client = mlflow.MlflowClient()
        frame = generate_roofline_runs(10, hardware=FLEET, seed=0)  # the serving path; accuracy: fit/test_pooled
        log_runs(client, client.create_experiment("fleet"), frame)
        outcome = run_fit(["fleet"], model_name="fleet-energy", alias="champion", echo=lambda *_: None)
        assert outcome.pooled is not None and outcome.pooled.law is not None, outcome.pooled
        server = ScoringServer(MODEL_URI, env={"MLFLOW_TRACKING_URI": uri, **fleet_table_env(table)}).start()
        try:
            yield server, mlflow.pyfunc.load_model(MODEL_URI)
        finally:
            server.stop()


def test_measured_and_table_hardware_over_http(served) -> None:
    server, model = served
    rows = [{**JOB, "hardware": "Sim Base"}, {**JOB, "hardware": "Sim Fast"}, {**JOB, "hardware": "NVIDIA L4"}]
    response = server.invocations({"dataframe_records": rows})
    assert response.status_code == 200, response.text
    out = pd.DataFrame(response.json()["predictions"])
    pd.testing.assert_frame_equal(out, model.predict(pd.DataFrame(rows)), check_dtype=False, rtol=1e-12)
    assert out["extrapolated_hardware"].tolist() == [False, False, True] and out["law"].iloc[2] == "pooled"
    # the L4's single-device time from the roofline in time pooled over the measured GPUs (its speedup from the
    # reference, the most runs), as the fit logged it
    assert out["time_scaled_from"].tolist() == ["", "", "pooled"]
    assert out["energy_j"].iloc[1] < out["energy_j"].iloc[0]  # Sim Fast spends less than Sim Base, as generated
    # the shipped table's L4 is predicted through the covariates, its interval widened
    widths = out["energy_j_upper"] / out["energy_j_lower"]
    assert widths.iloc[2] > widths.iloc[:2].max()


def test_hardware_errors_are_400_with_the_known_hardware(served) -> None:
    server, _ = served
    missing = server.invocations({"dataframe_records": [JOB]})
    assert missing.status_code == 400
    assert "hardware: missing column; this model knows 3 hardware" in missing.json()["message"]
    unknown = server.invocations({"dataframe_records": [{**JOB, "hardware": "Abacus"}]})
    assert unknown.status_code == 400
    message = unknown.json()["message"]
    assert "unknown hardware 'Abacus'" in message and "Sim Base" in message and "Sim Fast" in message


def test_precision_moves_the_answer_over_http_where_the_tables_peak_differs(served) -> None:
    server, model = served
    asked = [("Sim Base", None), ("Sim Base", "fp16"), ("Sim Base", "fp32"), ("NVIDIA L4", None)]
    asked += [("NVIDIA L4", "bf16"), ("NVIDIA L4", "fp32")]
    rows = [{**JOB, "hardware": name, **({"precision": p} if p else {})} for name, p in asked]
    response = server.invocations({"dataframe_records": rows})
    assert response.status_code == 200, response.text
    out = pd.DataFrame(response.json()["predictions"])
    pd.testing.assert_frame_equal(out, model.predict(pd.DataFrame(rows)), check_dtype=False, rtol=1e-12)
    energy = out["energy_j"].to_numpy()
    assert energy[1] == pytest.approx(energy[0], rel=1e-12) and energy[4] == pytest.approx(energy[3], rel=1e-12)
    assert energy[2] > 2 * energy[0] and energy[5] > 1.5 * energy[4]  # fp32: an eighth / a quarter of the peak
    # at fp16, as fitted: the law its route names (its own, or the pooled one where that predicted its bigger
    # models better); fp32: the pooled covariate form, a peak no run of it had
    assert out["law"][0] == out["law"][1] in ("Sim Base", "pooled") and out["law"][2] == "pooled"
    assert out["extrapolated_hardware"].tolist()[:3] == [False, False, True]
    refused = server.invocations({"dataframe_records": [{**JOB, "hardware": "Sim Base", "precision": "bf16"}]})
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"].startswith("precision (row 0): hardware 'Sim Base' (Sim Base) has no bf16 peak")


def test_recommend_routes_each_row_to_its_gpus_law(served) -> None:
    server, model = served
    rows = [{**JOB, "hardware": "Sim Fast"}, {**JOB, "hardware": "Sim Base"}, {**JOB, "hardware": "NVIDIA L4"}]
    params = {"mode": "recommend", "max_devices": 4}
    response = server.invocations({"dataframe_records": rows, "params": params})
    assert response.status_code == 200, response.text
    out = pd.DataFrame(response.json()["predictions"])
    pd.testing.assert_frame_equal(out, model.predict(pd.DataFrame(rows), params=params), check_dtype=False, rtol=1e-12)
    assert (out["energy_j"] > 0).all() and out["law"].iloc[2] == "pooled"


def test_the_parent_run_logs_the_pooled_forms_checks_and_the_fleet_routes(served) -> None:
    client = mlflow.MlflowClient()
    parent = client.get_run(client.get_model_version_by_alias("fleet-energy", "champion").run_id)
    metrics = parent.data.metrics
    assert parent.data.tags["roofline.form"] == "fleet" and metrics["fleet_answers_unmeasured"] == 1.0
    for form in ("hardware_slopes", "hardware_intercepts", "hardware_offset", "hardware_covariates"):
        assert 0 < metrics[f"extrap_mape_pooled_{form}"] < 20 and metrics[f"pooled_sane_{form}"] == 1.0
    pooled = {k: v for k, v in metrics.items() if k.startswith("extrap_mape_pooled_")}
    assert metrics["extrap_mape"] in pooled.values() and metrics["extrap_n_held_out"] > 0
    for slug in ("sim-base", "sim-fast"):
        assert metrics[f"route_{slug}"] == float(
            metrics[f"route_own_mape_{slug}"] <= metrics[f"route_pooled_mape_{slug}"]
        )
    assert "plots/pooled_extrapolation.png" in {f.path for f in client.list_artifacts(parent.info.run_id, "plots")}
    report = mlflow.artifacts.load_text(f"runs:/{parent.info.run_id}/pooled_report.txt")
    assert "extrap_mape" in report and "sanity checks on every hardware" in report
