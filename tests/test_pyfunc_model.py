"""The law as a logged and registered pyfunc model, loaded back through MLflow, and the predict CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from law_factory import make_law, query
from mlflow.exceptions import MlflowException

from mlflow_roofline.cli import main
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.pareto import pareto_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.serve.pyfunc_model import LAW_FILE, log_law_model
from mlflow_roofline.serve.recommend import recommend_frame

MODEL_NAME = "roofline-energy-test"


@pytest.fixture(scope="module")
def law() -> FittedLaw:
    return make_law()


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory, law: FittedLaw) -> Iterator[str]:
    """The law logged in a run, registered and aliased @champion; yields its models:/ URI.

    One SQLite store for the whole module (creating a store and logging a model take
    seconds); the tests only read from it.
    """
    root = tmp_path_factory.mktemp("pyfunc-store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    previous = mlflow.get_tracking_uri()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        mlflow.set_tracking_uri(uri)
        with mlflow.start_run():
            info = log_law_model(law)
        version = mlflow.register_model(info.model_uri, MODEL_NAME)
        mlflow.MlflowClient().set_registered_model_alias(MODEL_NAME, "champion", version.version)
        yield f"models:/{MODEL_NAME}@champion"
    mlflow.set_tracking_uri(previous)


def test_logged_model_holds_the_law_as_json_and_no_pickle(registered: str, law: FittedLaw) -> None:
    local = Path(mlflow.artifacts.download_artifacts(registered))
    files = {p.name for p in local.rglob("*") if p.is_file()}
    assert LAW_FILE in files
    assert not any(name.endswith((".pkl", ".pickle", ".cloudpickle")) for name in files), files
    stored = FittedLaw.from_json(next(local.rglob(LAW_FILE)).read_text())
    assert stored == FittedLaw.from_json(law.to_json())


def test_signature_params_and_input_example(registered: str, law: FittedLaw) -> None:
    model = mlflow.pyfunc.load_model(registered)
    meta = model.metadata
    params = {p.name: p.default for p in meta.get_params_schema().params}
    assert params == {
        "mode": "predict",
        "max_devices": 8,
        "objective": "energy",
        "carbon_intensity": None,
        "region": None,
        "pue": None,
        "price_per_kwh": None,
    }
    inputs = {c.name: c.required for c in meta.get_input_schema().inputs}
    assert inputs["num_layers"] and not inputs["speedup"] and not inputs["hardware"]
    assert set(inputs) == set(query()) | {"speedup", "hardware"}
    assert {"energy_j", "energy_j_lower", "energy_j_upper", "energy_kwh", "speedup", "eta", "extrapolated"} <= set(
        meta.get_output_schema().input_names()
    )
    assert meta.metadata["hardware"] == law.hardware
    example = meta.load_input_example(mlflow.artifacts.download_artifacts(registered))
    assert example.iloc[0]["num_layers"] == 12 and example.iloc[0]["strategy"] == "fsdp"
    assert len(model.predict(example)) == 1


def test_loaded_model_predicts_what_the_predictor_does(registered: str, law: FittedLaw) -> None:
    model = mlflow.pyfunc.load_model(registered)
    frame = pd.DataFrame([query(), query(strategy="tp", num_devices=4), query(strategy="single", num_devices=1)])
    pd.testing.assert_frame_equal(model.predict(frame), predict_frame(law, frame))
    params = {"mode": "recommend", "max_devices": 4, "objective": "edp"}
    pd.testing.assert_frame_equal(model.predict(frame, params=params), recommend_frame(law, frame, 4, "edp"))


@pytest.mark.parametrize(
    ("frame", "params", "field"),
    [
        (pd.DataFrame([query(strategy="zz")]), None, "strategy"),
        (pd.DataFrame([query(num_layers="twelve")]), None, "num_layers"),  # the signature's check
        (pd.DataFrame([query()]).drop(columns="batch_size"), None, "batch_size"),
        (pd.DataFrame([query()]).drop(columns="strategy"), None, "strategy"),
        (pd.DataFrame([query()]), {"mode": "guess"}, "mode"),
        (pd.DataFrame([query()]), {"mode": "recommend", "objective": "cost"}, "objective"),
        (pd.DataFrame([query()]), {"mode": "recommend", "max_devices": "many"}, "max_devices"),
    ],
)
def test_bad_input_through_mlflow_is_a_400_naming_the_field(registered: str, frame, params, field: str) -> None:
    model = mlflow.pyfunc.load_model(registered)
    with pytest.raises(MlflowException) as info:
        model.predict(frame, params=params)
    assert info.value.get_http_status_code() == 400
    assert field in info.value.message


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    base = [
        "predict",
        "--num-layers",
        "4",
        "--hidden-size",
        "512",
        "--num-heads",
        "8",
        "--ffn-size",
        "2048",
        "--seq-len",
        "128",
        "--batch-size",
        "16",
        "--num-steps",
        "20",
    ]
    code = 0
    try:
        main(base + list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_cli_table_and_json(registered: str, law: FittedLaw, capsys: pytest.CaptureFixture[str]) -> None:
    expected = predict_frame(law, pd.DataFrame([query()])).iloc[0]
    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--json")
    assert code == 0
    record = json.loads(out)
    assert record["energy_j"] == pytest.approx(expected["energy_j"], rel=1e-12)
    assert record["extrapolated"] is False

    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2")
    assert code == 0
    assert f"{expected['energy_j'] / 1e3:.3g} kJ" in out and "95% interval" in out and "fsdp x2" in out

    code, out, _ = _cli(capsys, "--model", registered, "--recommend", "--max-devices", "4", "--objective", "time")
    best = recommend_frame(law, pd.DataFrame([query()]), 4, "time").iloc[0]
    assert code == 0
    assert "best (time)" in out and "energy-optimal" in out and "time-optimal" in out
    best_line = next(line for line in out.splitlines() if line.startswith("best (time)"))
    assert best_line.split()[2:4] == [best["strategy"], str(best["num_devices"])]


def test_predict_cli_errors_are_one_line(registered: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "--model", registered, "--strategy", "tp", "--num-devices", "3")
    assert code == 2
    assert err.strip() == "Error: num_heads (row 0): must be divisible by num_devices under tp (8 % 3 != 0)"
    code, _, err = _cli(capsys, "--model", "models:/no-such-model@champion")
    assert code == 2
    assert err.startswith("Error: cannot load model models:/no-such-model@champion") and err.count("\n") == 1


def test_predict_cli_says_when_a_given_speedup_is_implausible(
    registered: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--speedup", "3.0")
    assert code == 0
    assert "implausible" in out and "exceeds the device count" in out
    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--speedup", "1.9")
    assert code == 0 and "implausible" not in out


def test_carbon_comes_from_the_environment_where_the_model_runs(
    registered: str, law: FittedLaw, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = mlflow.pyfunc.load_model(registered)
    frame = pd.DataFrame([query()])
    assert "co2e_g" not in model.predict(frame)
    monkeypatch.setenv("ROOFLINE_CARBON_INTENSITY", "250")
    monkeypatch.setenv("ROOFLINE_PUE", "1.5")
    out = model.predict(frame)
    assert out.loc[0, "co2e_g"] == pytest.approx(out.loc[0, "energy_j"] / 3.6e6 * 1.5 * 250, rel=1e-12)
    out = model.predict(frame, params={"carbon_intensity": 100.0})  # the request's figure beats the env's
    assert out.loc[0, "co2e_g"] == pytest.approx(out.loc[0, "energy_j"] / 3.6e6 * 1.5 * 100, rel=1e-12)


def test_predict_cli_carbon_cost_and_pareto(
    registered: str, law: FittedLaw, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys,
        "--model",
        registered,
        "--strategy",
        "fsdp",
        "--num-devices",
        "2",
        "--carbon-intensity",
        "400",
        "--price-per-kwh",
        "0.3",
        "--json",
    )
    assert code == 0
    record = json.loads(out)
    assert record["co2e_g"] == pytest.approx(record["energy_j"] / 3.6e6 * 400, rel=1e-12)
    assert record["cost"] == pytest.approx(record["energy_j"] / 3.6e6 * 0.3, rel=1e-12)

    code, out, _ = _cli(capsys, "--model", registered, "--region", "FR", "--strategy", "fsdp", "--num-devices", "2")
    assert code == 0 and "co2e" in out and "g CO2e" in out

    code, out, _ = _cli(capsys, "--model", registered, "--pareto", "--max-devices", "4", "--region", "FR", "--json")
    expected = pareto_frame(law, pd.DataFrame([query()]), 4)
    points = json.loads(out)
    assert code == 0
    assert [(p["strategy"], p["num_devices"]) for p in points] == list(zip(expected.strategy, expected.num_devices))

    code, out, _ = _cli(capsys, "--model", registered, "--pareto", "--max-devices", "4")
    assert code == 0 and f"{len(expected)} choices no other beats in both energy and time" in out

    code, _, err = _cli(capsys, "--model", registered, "--recommend", "--objective", "cost")
    assert code == 2 and err.startswith("Error: objective: must be one of energy, time, edp, got 'cost'")
    code, _, err = _cli(capsys, "--model", registered, "--region", "Atlantis")
    assert code == 2 and err.startswith("Error: region: 'Atlantis' is not in the carbon-intensity table")
    # The shared carbon options, checked as train/measure/sweep check them (before the model loads).
    code, _, err = _cli(capsys, "--model", "models:/absent@none", "--pue", "0.5")
    assert code == 2 and err.startswith("Error: pue: expected a finite number >= 1, got '0.5'")
    code, _, err = _cli(capsys, "--model", registered, "--region", "")  # the MLproject's unset param
    assert code == 0
    code, _, err = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--speedup", "nan")
    assert code == 2 and "Invalid value for '--speedup': must be a finite number, got 'nan'" in err
