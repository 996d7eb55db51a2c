"""End to end: fit a law on logged runs, serve it with `mlflow models serve`, query it over HTTP."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest
from law_factory import query, valid_configs
from support.module_store import module_store
from support.strict_json import EDGE_JOBS, MODES, MOST_CARBON, assert_finite, strict_loads

from mlflow_roofline.core.carbon import region_table
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.testing.scoring_server import ScoringServer
from mlflow_roofline.testing.synthetic import log_synthetic_runs

pytestmark = pytest.mark.slow

MODEL_URI = "models:/roofline-energy@champion"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[tuple[ScoringServer, Any]]:
    """Synthetic runs logged into a fresh store, fitted and registered by the real fit, then served."""
    with module_store(tmp_path_factory.mktemp("serve-store"), store_template) as (uri, _):
        client = mlflow.MlflowClient()
        log_synthetic_runs(client, client.create_experiment("roofline-bert"), 12, seed=1)
        run_fit(["roofline-bert"], model_name="roofline-energy", alias="champion", echo=lambda *_: None)
        model = mlflow.pyfunc.load_model(MODEL_URI)
        server = ScoringServer(MODEL_URI, env={"MLFLOW_TRACKING_URI": uri}).start()
        try:
            yield server, model
        finally:
            server.stop()


ROWS = [
    query(),
    query(strategy="tp", num_devices=2, num_layers=12, hidden_size=768, num_heads=12, ffn_size=3072),
    query(strategy="single", num_devices=1, seq_len=512, batch_size=8),
    query(strategy="ddp", num_devices=4, num_steps=5000, speedup=3.1),
]


def test_http_predictions_equal_in_process_ones(served) -> None:
    server, model = served
    frame = pd.DataFrame(ROWS)
    response = server.invocations({"dataframe_records": ROWS})  # rows without speedup: use the law
    assert response.status_code == 200, response.text
    over_http = pd.DataFrame(response.json()["predictions"])
    pd.testing.assert_frame_equal(over_http, model.predict(frame), check_dtype=False, rtol=1e-12)
    assert over_http["extrapolated"].tolist() == [False, False, False, True]

    split = frame.drop(columns="speedup").iloc[:3].to_dict(orient="split")
    response = server.invocations({"dataframe_split": split})
    assert response.status_code == 200, response.text
    pd.testing.assert_frame_equal(
        pd.DataFrame(response.json()["predictions"]), over_http.iloc[:3], check_dtype=False, rtol=1e-12
    )


@pytest.mark.parametrize("objective", ["energy", "edp"])
def test_recommend_mode_returns_the_grid_minimum(served, objective: str) -> None:
    server, model = served
    jobs = [query(), query(num_layers=12, hidden_size=768, num_heads=12, ffn_size=3072, batch_size=24)]
    payload = {"dataframe_records": jobs, "params": {"mode": "recommend", "max_devices": 8, "objective": objective}}
    response = server.invocations(payload)
    assert response.status_code == 200, response.text
    for job, best in zip(jobs, response.json()["predictions"]):
        TrainConfig(**{**job, "strategy": best["strategy"], "num_devices": best["num_devices"]}).validate()
        grid = _valid_grid(job)
        predicted = model.predict(pd.DataFrame(grid))
        score = predicted["energy_j"] * (predicted["time_s"] if objective == "edp" else 1.0)
        assert best["candidates"] == len(grid)
        assert best["energy_optimal_energy_j"] == pytest.approx(predicted["energy_j"].min(), rel=1e-12)
        assert best["energy_j"] * (best["time_s"] if objective == "edp" else 1.0) == pytest.approx(
            score.min(), rel=1e-12
        )


def _without(field: str) -> dict[str, Any]:
    row = query()
    del row[field]
    return row


BAD = [
    ({"dataframe_records": [_without("hidden_size")]}, "hidden_size"),
    ({"dataframe_records": [_without("strategy")]}, "strategy"),
    ({"dataframe_records": [query(num_layers="twelve")]}, "num_layers"),
    ({"dataframe_records": [query(seq_len=0)]}, "seq_len"),
    ({"dataframe_records": [query(batch_size=-16)]}, "batch_size"),
    ({"dataframe_records": [query(strategy="pipeline")]}, "strategy"),
    ({"dataframe_records": [query(num_devices=0)]}, "num_devices"),
    ({"dataframe_records": [query(hidden_size=500)]}, "hidden_size"),
    ({"dataframe_records": [query(strategy="single", num_devices=2)]}, "num_devices"),
    ({"dataframe_records": [query(speedup=-2.0)]}, "speedup"),
    ({"dataframe_records": [query()], "params": {"mode": "forecast"}}, "mode"),
    ({"dataframe_records": [query()], "params": {"mode": "recommend", "objective": "cost"}}, "objective"),
    ({"dataframe_records": [query()], "params": {"mode": "recommend", "max_devices": 0}}, "max_devices"),
]


@pytest.mark.parametrize(("payload", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_input_is_a_400_naming_the_field(served, payload: dict[str, Any], field: str) -> None:
    server, _ = served
    response = server.invocations(payload)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] in ("INVALID_PARAMETER_VALUE", "BAD_REQUEST")
    assert field in body["message"]
    assert "Traceback" not in response.text


# Sent as JSON; MLflow would cast a column declared long (2.9 -> 2, true -> 1), so these reach the model as sent.
NOT_INTEGERS = [
    ("num_layers", 2.9, "num_layers (row 0): must be an integer, got 2.9"),
    ("num_steps", 20.99, "num_steps (row 0): must be an integer, got 20.99"),
    ("num_devices", 2.5, "num_devices (row 0): must be an integer, got 2.5"),
    ("num_heads", True, "num_heads (row 0): must be a number, got True"),
    ("batch_size", 2**63, "batch_size (row 0): must be at most 2**53 = 9007199254740992, got 9223372036854775808"),
    ("num_steps", 2**70 + 1, "num_steps (row 0): must be at most 2**53 = 9007199254740992, got 1180591620717411303425"),
    ("seq_len", -(2**64) - 1, "seq_len (row 0): must be a positive integer, got -18446744073709551617"),
]


@pytest.mark.parametrize(("field", "value", "message"), NOT_INTEGERS, ids=[f"{f}={v}" for f, v, _ in NOT_INTEGERS])
def test_served_integers_are_integers(served, field: str, value: object, message: str) -> None:
    server, _ = served
    response = server.invocations({"dataframe_records": [query(**{field: value})]})
    assert response.status_code == 400, response.text
    assert response.json()["message"] == message


def test_integral_floats_are_accepted_over_http(served) -> None:
    server, _ = served
    as_floats = server.invocations({"dataframe_records": [query(num_layers=4.0, num_steps=20.0, num_devices=2.0)]})
    as_ints = server.invocations({"dataframe_records": [query()]})
    assert as_floats.status_code == 200, as_floats.text
    assert as_floats.json() == as_ints.json()


LEADS_WITH_FIELD = [
    ({"dataframe_records": [query(), query(hidden_size=500)]}, "hidden_size (row 1): must be divisible by num_heads"),
    ({"dataframe_records": [query(strategy="pipeline")]}, "strategy (row 0): must be one of single, ddp, fsdp, tp"),
    ({"dataframe_records": [query(num_layers="twelve")]}, "num_layers (row 0): must be a number, got 'twelve'"),
    ({"dataframe_records": [_without("strategy")]}, "strategy: missing column"),
    ({"dataframe_records": [query(speedup="fast")]}, "speedup (row 0): must be a number, got 'fast'"),
    ({"dataframe_records": [query()], "params": {"mode": "forecast"}}, "mode: must be one of"),
]


@pytest.mark.parametrize(("payload", "start"), LEADS_WITH_FIELD, ids=[s.split(":")[0] for _, s in LEADS_WITH_FIELD])
def test_a_400_leads_with_the_field_and_the_rule_not_the_input_frame(served, payload, start: str) -> None:
    server, _ = served
    response = server.invocations(payload)
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert message.startswith(start), message
    assert "Failed to predict data" not in message and "num_layers  hidden_size" not in message
    assert "\n" not in message


def test_speedup_above_the_device_count_is_flagged_over_http(served) -> None:
    server, _ = served
    rows = [query(speedup=1.9), query(speedup=3.0), query()]
    response = server.invocations({"dataframe_records": rows})
    assert response.status_code == 200, response.text
    assert [p["speedup_implausible"] for p in response.json()["predictions"]] == [False, True, False]


def _valid_grid(job: dict[str, Any], max_devices: int = 8) -> list[dict[str, Any]]:
    """Every (strategy, N <= max_devices) TrainConfig accepts for ``job``."""
    return valid_configs(job, ("single", "ddp", "fsdp", "tp"), max_devices)


def test_pareto_mode_over_http_is_the_frontier_of_the_valid_grid(served) -> None:
    server, model = served
    jobs = [query(), query(num_layers=12, hidden_size=768, num_heads=12, ffn_size=3072, batch_size=24)]
    params = {"mode": "pareto", "max_devices": 8, "carbon_intensity": 380.0}
    response = server.invocations({"dataframe_records": jobs, "params": params})
    assert response.status_code == 200, response.text
    points = pd.DataFrame(response.json()["predictions"])
    assert sorted(set(points["row"])) == [0, 1]
    for i, job in enumerate(jobs):
        grid = pd.DataFrame(_valid_grid(job))
        predicted = pd.concat([grid[["strategy", "num_devices"]], model.predict(grid)], axis=1)
        e, t = predicted["energy_j"].to_numpy(), predicted["time_s"].to_numpy()
        front = predicted[[not ((e <= e[k]) & (t <= t[k]) & ((e < e[k]) | (t < t[k]))).any() for k in range(len(e))]]
        front = front.sort_values("time_s")
        got = points[points["row"] == i]
        assert list(zip(got.strategy, got.num_devices)) == list(zip(front.strategy, front.num_devices))
        assert got["energy_j_upper"].to_numpy() == pytest.approx(front["energy_j_upper"].to_numpy(), rel=1e-12)
        assert got["co2e_g"].to_numpy() == pytest.approx(got["energy_j"].to_numpy() / 3.6e6 * 380.0, rel=1e-12)


def test_carbon_and_cost_params_over_http(served) -> None:
    server, _ = served
    params = {"region": "DE", "pue": 1.2, "price_per_kwh": 0.3}
    response = server.invocations({"dataframe_records": ROWS[:3], "params": params})
    assert response.status_code == 200, response.text
    germany = region_table()["de"].g_co2e_per_kwh
    for p in response.json()["predictions"]:
        kwh = p["energy_j"] / 3.6e6
        assert p["co2e_g"] == pytest.approx(kwh * 1.2 * germany, rel=1e-12)
        assert p["co2e_g_lower"] == pytest.approx(p["energy_j_lower"] / 3.6e6 * 1.2 * germany, rel=1e-12)
        assert p["cost"] == pytest.approx(kwh * 1.2 * 0.3, rel=1e-12)
    plain = server.invocations({"dataframe_records": ROWS[:3]}).json()["predictions"]
    assert not {"co2e_g", "cost"} & set(plain[0])

    recommend = {"mode": "recommend", "objective": "carbon", "region": "DE"}
    response = server.invocations({"dataframe_records": [query()], "params": recommend})
    assert response.status_code == 200, response.text
    best = response.json()["predictions"][0]
    assert best["objective"] == "carbon" and best["co2e_g"] == pytest.approx(best["energy_j"] / 3.6e6 * germany)


BAD_CARBON = [
    ({"region": "Atlantis"}, "region: 'Atlantis' is not in the carbon-intensity table"),
    ({"pue": 0.5}, "pue: expected a finite number >= 1, got 0.5"),
    ({"carbon_intensity": -1.0}, "carbon_intensity: expected a finite number >= 0"),
    ({"mode": "recommend", "objective": "cost"}, "objective: must be one of energy, time, edp, got 'cost'"),
]


@pytest.mark.parametrize(("params", "start"), BAD_CARBON, ids=[s.split(":")[0] for _, s in BAD_CARBON])
def test_bad_carbon_params_over_http(served, params: dict[str, Any], start: str) -> None:
    server, _ = served
    response = server.invocations({"dataframe_records": [query()], "params": params})
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith(start), response.text


def test_an_unknown_param_is_a_400_naming_it_over_http(served) -> None:
    server, _ = served
    response = server.invocations({"dataframe_records": [query()], "params": {"mode": "recommend", "objectve": "time"}})
    assert response.status_code == 400, response.text
    assert response.json()["message"] == (
        "objectve: unknown request param; the model's params are "
        "mode, max_devices, objective, carbon_intensity, region, pue, price_per_kwh"
    )


def test_every_answer_over_http_is_finite_strict_json(served) -> None:
    """Every edge job in every mode, one request each: a 200 whose body parses strictly with every number
    finite, or a 400 whose body does and whose message leads with the field (the law is run_fit's on
    synthetic runs, not the in-process tests' one)."""
    server, _ = served
    refused = []
    for job, row in EDGE_JOBS.items():
        for mode, params in MODES.items():
            params = {**params, **MOST_CARBON, **({"max_devices": 1024} if params else {})}
            response = server.invocations({"dataframe_records": [row], "params": params})
            assert response.status_code in (200, 400), response.text
            body = strict_loads(response.text)
            if response.status_code == 400:
                refused.append((job, mode))
                assert body["message"].startswith("model_input (row 0): the predicted energy or time lies beyond")
            else:
                assert_finite(body)
    # a measured speedup of 1e300 or 1e-300 can take this law's energy or time past float64 (predict mode only:
    # the searches use the law's speedups)
    assert set(refused) <= {("fast_speedup", "predict"), ("slow_speedup", "predict")}, refused


def test_a_malformed_json_body_is_a_400_without_a_stack_trace(served) -> None:
    """MLflow's JSON parse error carries no stack trace (its CSV and parquet parse errors do: README)."""
    server, _ = served
    response = server.session.post(
        f"{server.url}/invocations", data=b'{"dataframe_records": [', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    body = strict_loads(response.text)
    assert body["message"].startswith("Invalid input. Ensure that input is a valid JSON formatted string.")
    assert "stack_trace" not in body and "Traceback" not in response.text and ".py" not in response.text


def _post(server: ScoringServer, body: bytes | str, content_type: str | None) -> Any:
    headers = {} if content_type is None else {"Content-Type": content_type}
    return server.session.post(f"{server.url}/invocations", data=body, headers=headers, timeout=60)


def _assert_no_trace(response: Any) -> None:
    """No stack trace, no file of the server's and no install path in an answer."""
    install = str(Path(mlflow.__file__).resolve().parents[1])
    assert "stack_trace" not in response.text and "Traceback" not in response.text, response.text[:2000]
    assert ".py" not in response.text and install not in response.text, response.text[:2000]


def test_a_csv_body_answers_as_the_same_json_request(served) -> None:
    """MLflow documents text/csv as a pandas frame's to_csv(); the model's Any columns made every one a 400."""
    server, _ = served
    frame = pd.DataFrame(ROWS)  # speedup NaN where a row has none: an empty CSV cell, a JSON null
    split = frame.astype(object).where(frame.notna(), None).to_dict(orient="split")
    as_json = server.invocations({"dataframe_split": split})
    assert as_json.status_code == 200, as_json.text
    for csv in (frame.to_csv(index=False), frame.to_csv()):  # the index pandas writes first is an unknown column
        as_csv = _post(server, csv, "text/csv")
        assert as_csv.status_code == 200, as_csv.text
        assert as_csv.json() == as_json.json()
    utf8 = _post(server, frame.to_csv(index=False).encode(), "text/csv; charset=utf-8")
    assert utf8.status_code == 200 and utf8.json() == as_json.json()


CSV_REFUSED = [
    ({"num_layers": "twelve"}, "num_layers (row 0): must be a number, got 'twelve'"),
    ({"num_layers": 2.9}, "num_layers (row 0): must be an integer, got 2.9"),
    ({"num_heads": True}, "num_heads (row 0): must be a number, got True"),
    (
        {"num_steps": 2**70 + 1},
        "num_steps (row 0): must be at most 2**53 = 9007199254740992, got 1180591620717411303425",
    ),
    ({"strategy": "pipeline"}, "strategy (row 0): must be one of single, ddp, fsdp, tp"),
]


@pytest.mark.parametrize(("change", "start"), CSV_REFUSED, ids=[s.split(":")[0] for _, s in CSV_REFUSED])
def test_a_csv_body_is_refused_as_the_same_json_request(served, change: dict[str, Any], start: str) -> None:
    server, _ = served
    row = query(**change)
    as_json = server.invocations({"dataframe_records": [row]})
    as_csv = _post(server, pd.DataFrame([row]).to_csv(index=False), "text/csv")
    assert as_csv.status_code == as_json.status_code == 400, as_csv.text
    assert as_csv.json()["message"] == as_json.json()["message"] and as_csv.json()["message"].startswith(start)
    _assert_no_trace(as_csv)


BAD_BODIES = [
    ("text/csv", "", "body: not a CSV table the model can read: the body is empty"),
    ("text/csv", "num_layers,hidden_size\n", "body: not a CSV table the model can read: no rows after the header"),
    (
        "text/csv",
        "num_layers,hidden_size\n4,256\n4,256,9\n",
        "body: not a CSV table the model can read: line 3: 3 fields",
    ),
    ("text/csv", 'num_layers\n"4\n', "body: not a CSV table the model can read: line 2: "),
    ("application/vnd.apache.parquet", b"PAR1 not parquet", "Failed to parse input as a Pandas DataFrame"),
]


@pytest.mark.parametrize(("content_type", "body", "start"), BAD_BODIES, ids=[s[:40] for _, _, s in BAD_BODIES])
def test_a_body_the_server_cannot_read_is_one_line_without_a_stack_trace(
    served, content_type: str, body: str | bytes, start: str
) -> None:
    server, _ = served
    response = _post(server, body, content_type)
    assert response.status_code == 400, response.text
    message = strict_loads(response.text)["message"]
    assert message.startswith(start), message
    _assert_no_trace(response)


def test_a_request_without_a_content_type_is_a_415_in_one_line(served) -> None:
    server, _ = served
    response = _post(server, b'{"dataframe_records": []}', None)
    assert response.status_code == 415, response.text
    assert response.text.startswith("Content-Type: missing; send one of ") and "\n" not in response.text


def test_a_10_mb_body_is_not_echoed_back_whole(served) -> None:
    server, _ = served
    flood = "x" * 10_000_000
    malformed = _post(server, '{"dataframe_records": [' + flood, "application/json")
    in_a_field = server.invocations({"dataframe_records": [query(num_layers=flood)]})
    unknown_param = server.invocations({"dataframe_records": [query()], "params": {flood: 1}})
    csv_cell = _post(server, "num_layers\n" + flood + "\n", "text/csv")
    digits = pd.DataFrame([query(num_steps="1" + "0" * 5000)])  # past the 4300 digits Python turns into an int
    csv_digits = _post(server, digits.to_csv(index=False), "text/csv")
    for response in (malformed, in_a_field, unknown_param, csv_cell, csv_digits):
        assert response.status_code == 400, response.text[:2000]
        assert len(response.content) < 2000, response.text[:2000]
        _assert_no_trace(response)
    assert strict_loads(malformed.text)["message"].endswith("more characters not echoed]")
    assert strict_loads(in_a_field.text)["message"].startswith("num_layers (row 0): must be a number, got 'xxx")
    assert strict_loads(csv_cell.text)["message"].startswith("body: not a CSV table the model can read: line ")
    assert strict_loads(csv_digits.text)["message"].startswith("num_steps (row 0): must be a number, got '1000")


def test_server_stops_by_its_pid(served) -> None:
    server, _ = served
    pgid = server.pid
    assert pgid is not None
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
