"""The law as a logged and registered pyfunc model, loaded back through MLflow."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from law_factory import make_law, query
from mlflow.exceptions import MlflowException
from mlflow.pyfunc.scoring_server import predictions_to_json
from support.registered_law import registered_law
from support.strict_json import EDGE_JOBS, MODES, MOST_CARBON, assert_finite, strict_loads

from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.job_kind import KIND_COLUMNS
from mlflow_roofline.serve.placement_search import recommend_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.serve.pyfunc_model import LAW_FILE


@pytest.fixture(scope="module")
def law() -> FittedLaw:
    return make_law()


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory, store_template: Path, law: FittedLaw) -> Iterator[str]:
    """The law logged, registered and aliased @champion in this module's own store; its models:/ URI."""
    yield from registered_law(tmp_path_factory, store_template, law)


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
    assert set(inputs) == set(query()) | {"speedup", "hardware"} | set(KIND_COLUMNS)
    assert not any(inputs[kind] for kind in KIND_COLUMNS)  # a request that omits them is the paper's BERT
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


def test_a_bad_hardware_table_stops_the_model_loading_not_each_request(
    registered: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "bad.csv"
    header = "name,pattern,fp16_tensor_flops,fp32_flops,mem_bandwidth_bytes_per_s,board_power_w,source"
    table.write_text(f"{header}\nMy GPU,My GPU,3.12e14,1.95e13,2.0e12,4.0e11,datasheet\n")  # 400 GW: kW typed as mW
    monkeypatch.setenv("ROOFLINE_HARDWARE_TABLE", str(table))
    with pytest.raises(Exception, match=r"board_power_w.*outside what a real device can have"):
        mlflow.pyfunc.load_model(registered)
    monkeypatch.delenv("ROOFLINE_HARDWARE_TABLE")
    assert len(mlflow.pyfunc.load_model(registered).predict(pd.DataFrame([query()]))) == 1


def test_a_failure_of_the_model_itself_is_one_line_without_a_stack_trace(law: FittedLaw, caplog) -> None:
    """An internal error (here a law whose time law is missing) reaches the client as one line
    naming the exception type, error code INTERNAL_ERROR, no traceback and no server path; the
    traceback goes to the server's log."""
    import dataclasses
    import re

    from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, ErrorCode

    from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel

    model = RooflineEnergyModel()
    model.law = dataclasses.replace(law, time_law=None)  # type: ignore[arg-type]
    with pytest.raises(MlflowException) as raised:
        model.predict(None, query())  # type: ignore[arg-type]
    error = raised.value
    assert error.error_code == ErrorCode.Name(INTERNAL_ERROR)
    assert re.fullmatch(
        r"the energy model failed on this request \(\w+Error\); the server log has the details", error.message
    )
    assert "stack_trace" not in error.serialize_as_json() and "/" not in error.message
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)


ACCEPTED = "the model's params are mode, max_devices, objective, carbon_intensity, region, pue, price_per_kwh"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mdoe": "recommend"}, f"mdoe: unknown request param; {ACCEPTED}"),
        ({"mode": "pareto", "regoin": "DE", "Pue": 1.2}, f"regoin, Pue: unknown request params; {ACCEPTED}"),
    ],
)
def test_an_unknown_param_is_refused_not_dropped(registered: str, params: dict, message: str) -> None:
    """MLflow drops a param the signature lacks with a warning; the model refuses it, naming it."""
    model = mlflow.pyfunc.load_model(registered)
    with pytest.raises(MlflowException) as info:
        model.predict(pd.DataFrame([query()]), params=params)
    assert info.value.get_http_status_code() == 400
    assert info.value.message == message


def test_the_params_mlflow_fills_in_are_not_unknown(registered: str, law: FittedLaw) -> None:
    model = mlflow.pyfunc.load_model(registered)
    frame = pd.DataFrame([query()])
    pd.testing.assert_frame_equal(model.predict(frame, params={}), predict_frame(law, frame))
    pd.testing.assert_frame_equal(
        model.predict(frame, params={"mode": "predict", "pue": None}), predict_frame(law, frame)
    )


def test_an_unknown_param_is_refused_when_the_model_is_called_directly(law: FittedLaw) -> None:
    from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel

    model = RooflineEnergyModel()
    model.law = law
    with pytest.raises(MlflowException, match=rf"^max_device: unknown request param; {ACCEPTED}$"):
        model.predict(None, pd.DataFrame([query()]), {"max_device": 4})  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("job", list(EDGE_JOBS))
def test_every_answer_is_finite_strict_json(registered: str, job: str, mode: str) -> None:
    """Each edge job in each mode: the scoring server's JSON of the answer parses strictly, every number finite;
    or a 400 (strict JSON too) naming the field. Only a predicted time past float64 is refused here."""
    model = mlflow.pyfunc.load_model(registered)
    params = {**MODES[mode], **MOST_CARBON, **({"max_devices": 1024} if mode != "predict" else {})}
    try:
        answer = model.predict(pd.DataFrame([EDGE_JOBS[job]]), params=params)
    except MlflowException as refused:
        assert (job, mode) == ("slow_speedup", "predict"), refused.message
        assert refused.get_http_status_code() == 400
        assert strict_loads(refused.serialize_as_json())["message"].startswith(
            "model_input (row 0): the predicted energy or time lies beyond"
        )
        return
    assert (job, mode) != ("slow_speedup", "predict")
    body = io.StringIO()
    predictions_to_json(answer, body)
    predictions = strict_loads(body.getvalue())["predictions"]
    assert predictions and all(p["energy_j"] > 0 and "co2e_g" in p and "cost" in p for p in predictions)
    assert_finite(predictions)
