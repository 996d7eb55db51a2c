"""Embodied carbon and water in the served answers: through the pyfunc model, the predictor and ``predict``.

A law fitted on an H100 answers ``embodied_co2e_g`` (its device-hours' share of the GPU's and
server's manufacturing) and, with an AWS or Azure region, ``water_l``; a GPU or a region outside the
tables gets no figure (absent, or None beside rows that have one: the JSON stays strict) and a
column naming the missing figure, never a 0.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from law_factory import make_law, query
from mlflow.pyfunc.scoring_server import predictions_to_json
from mlflow.types import DataType
from support.registered_law import registered_law
from support.strict_json import assert_finite, strict_loads

from mlflow_roofline.cli import main
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.footprint_columns import embodied_columns
from mlflow_roofline.serve.params import carbon_settings
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel, model_signature

H100 = "NVIDIA H100 80GB HBM3"  # NVML's name of an H100 SXM: row "H100 SXM" of both tables
H100_G_PER_DEVICE_HOUR = (164 + 712.5) * 1000 / 26280  # data/embodied.csv
FRANKFURT_L_PER_KWH = (0.15, 1.93)  # eu-central-1: AWS site WUE, Germany's grid (data/water.csv)
FRAME = pd.DataFrame([query(), query(strategy="single", num_devices=1)])


@pytest.fixture(scope="module")
def h100_law() -> FittedLaw:
    return dataclasses.replace(make_law(), hardware=H100)


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory, store_template: Path, h100_law: FittedLaw) -> Iterator[str]:
    yield from registered_law(tmp_path_factory, store_template, h100_law)


def _expected_embodied(out: pd.DataFrame) -> np.ndarray:
    return out["num_devices"].to_numpy() * out["time_s"].to_numpy() / 3600 * H100_G_PER_DEVICE_HOUR


def test_the_loaded_model_answers_embodied_and_water_for_a_gpu_and_region_of_the_tables(registered: str) -> None:
    model = mlflow.pyfunc.load_model(registered)
    out = model.predict(FRAME, params={"region": "eu-central-1", "pue": 1.2})
    site, grid = FRANKFURT_L_PER_KWH
    np.testing.assert_allclose(
        out["embodied_co2e_g"], FRAME["num_devices"] * out["time_s"] / 3600 * H100_G_PER_DEVICE_HOUR, rtol=1e-12
    )
    np.testing.assert_allclose(out["water_l"], out["energy_kwh"] * (site + 1.2 * grid), rtol=1e-12)
    assert list(out["embodied_unknown"]) == ["", ""] and list(out["water_unknown"]) == ["", ""]
    assert (out["embodied_co2e_g"] > 0).all() and (out["water_l"] > 0).all()


def test_the_signature_declares_the_columns() -> None:
    outputs = {spec.name: spec.type for spec in model_signature().outputs.inputs}
    assert {"embodied_co2e_g", "embodied_unknown", "water_l", "water_unknown"} <= set(outputs)
    assert outputs["embodied_unknown"] == DataType.string and outputs["water_l"] == DataType.double


def test_a_gpu_outside_the_table_gets_nan_and_the_missing_figure_named() -> None:
    model = RooflineEnergyModel()
    model.law = make_law()  # its hardware, "Synthetic GPU", has no manufacturing figure
    out = model.predict(None, FRAME, params={"carbon_intensity": 300.0, "region": "europe-west4"})  # type: ignore[arg-type]
    assert not {"embodied_co2e_g", "water_l"} & set(out.columns)  # absent, never NaN: answers are strict JSON
    assert all("no manufacturing figure for 'Synthetic GPU'" in text for text in out["embodied_unknown"])
    assert all("no site WUE for region 'europe-west4' (provider 'gcp')" in text for text in out["water_unknown"])
    assert out["co2e_g"].notna().all()  # the operational figure is answered as before


def test_a_strict_json_answer_names_the_missing_figure(registered: str) -> None:
    model = mlflow.pyfunc.load_model(registered)
    body = io.StringIO()
    predictions_to_json(model.predict(FRAME, params={"carbon_intensity": 2000.0, "region": "DE"}), body)
    predictions = strict_loads(body.getvalue())["predictions"]
    assert_finite(predictions)
    assert all(p["embodied_co2e_g"] > 0 and p["embodied_unknown"] == "" for p in predictions)
    assert all("water_l" not in p and "no site WUE for region 'DE'" in p["water_unknown"] for p in predictions)


def test_rows_on_several_gpus_each_get_their_own_figure_or_reason() -> None:
    hardware = np.array([H100, "GeForce RTX 2080 Ti", "NVIDIA A100-SXM4-80GB"], dtype=object)
    columns = embodied_columns(hardware, np.array([2, 2, 1]), np.array([3600.0, 3600.0, 7200.0]))
    assert columns["embodied_co2e_g"][0] == pytest.approx(2 * H100_G_PER_DEVICE_HOUR)
    assert columns["embodied_co2e_g"][1] is None and "'GeForce RTX 2080 Ti'" in columns["embodied_unknown"][1]
    assert columns["embodied_co2e_g"][2] == pytest.approx(2 * (150 + 312.5) * 1000 / 52560)
    assert list(columns["embodied_unknown"][[0, 2]]) == ["", ""]


def test_without_a_carbon_question_the_answer_is_joules_only(h100_law: FittedLaw) -> None:
    plain = predict_frame(h100_law, FRAME, carbon_settings({}, env={}))
    priced = predict_frame(h100_law, FRAME, carbon_settings({"price_per_kwh": 0.3}, env={}))
    for out in (plain, priced):
        assert not {"embodied_co2e_g", "embodied_unknown", "water_l", "water_unknown"} & set(out.columns)
    no_region = predict_frame(h100_law, FRAME, carbon_settings({"carbon_intensity": 100.0}, env={}))
    assert "embodied_co2e_g" in no_region and "water_l" not in no_region


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    job = dict(num_layers=4, hidden_size=512, num_heads=8, ffn_size=2048, seq_len=128, batch_size=16, num_steps=20)
    options = [item for name, value in job.items() for item in (f"--{name.replace('_', '-')}", str(value))]
    code = 0
    try:
        main(["predict", *options, *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().out


def test_the_predict_command_answers_and_names_the_missing_figure(
    registered: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--model", registered, "--hardware", H100, "--strategy", "fsdp", "--num-devices", "2"]
    code, out = _cli(capsys, *where, "--region", "eu-central-1", "--json")
    assert code == 0, out
    answer = json.loads(out)
    assert answer["embodied_co2e_g"] == pytest.approx(2 * answer["time_s"] / 3600 * H100_G_PER_DEVICE_HOUR)
    assert answer["water_l"] == pytest.approx(answer["energy_kwh"] * sum(FRANKFURT_L_PER_KWH))
    code, out = _cli(capsys, *where, "--region", "us-central1")
    assert code == 0, out
    lines = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines() if line.strip()}
    assert lines["embodied"].endswith("g CO2e") and not lines["embodied"].startswith("unknown")
    assert lines["water"].startswith("unknown: no site WUE for region 'us-central1' (provider 'gcp')")
