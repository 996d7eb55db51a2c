"""``precision`` in the served law (serve/precision_routing.py, serve/predict.py, serve/fleet_routing.py).

The fleet of tests/support/precision_grid.py: a T4, a V100 and an A100 fitted on fp16 runs, the
H100 of the hardware table unmeasured. A request without ``precision`` must answer exactly as before
``precision`` entered the law (tests/data/precision_default.json, computed then); with it, the answer
moves where the table's peak at that precision differs from the fitted one's and only there.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from support.precision_grid import EXPECTED, JOBS, answers, fleet_fit, grid

from mlflow_roofline.fit.fleet_fit import FleetFit
from mlflow_roofline.law.fleet import OWN, law_from_json
from mlflow_roofline.serve.errors import InputError
from mlflow_roofline.serve.fleet_routing import LAW_COLUMN, fleet_frame
from mlflow_roofline.serve.placement_search import pareto_frame, recommend_frame
from mlflow_roofline.serve.predict import predict_frame

A100, T4, H100 = "A100 SXM4 80GB", "T4", "H100 SXM"
JOB = {**JOBS[0], "num_steps": 20, "strategy": "ddp", "num_devices": 4}


@pytest.fixture(scope="module")
def fleet() -> FleetFit:
    return fleet_fit()


def ask(fleet: FleetFit, *rows: dict[str, object], mode: Callable[..., pd.DataFrame] = predict_frame) -> pd.DataFrame:
    return fleet_frame(fleet.law, pd.DataFrame([{**JOB, **row} for row in rows]), lambda law, part: mode(law, part))


# The fixture refits the fleet: the pooled law comes from least_squares, which stops at a relative
# tolerance of 1e-8, so its coefficients agree across CPUs only to about that (BLAS takes other kernels
# on AVX2 than on AVX-512). Measured: 4.1e-9 between an AMD EPYC (AVX2) and the machine that wrote the
# file. 1e-7 holds that and still fails on any real change (a precision moves answers by whole factors).
FIT_RTOL = 1e-7


def _close(got: dict[str, list[float]], expected: dict[str, list[float]]) -> None:
    assert got.keys() == expected.keys()
    for key, values in expected.items():
        np.testing.assert_allclose(got[key], values, rtol=FIT_RTOL, atol=0, err_msg=key)


def test_a_request_without_precision_answers_as_before_precision_entered_the_law(fleet: FleetFit) -> None:
    _close(answers(fleet), json.loads(EXPECTED.read_text()))


def test_a_law_logged_without_precisions_keeps_its_answers_and_ignores_the_column(fleet: FleetFit) -> None:
    data = json.loads(fleet.law.to_json())
    for law in [*data["hardware_laws"].values(), data["pooled"]]:
        del law["precisions"]
    old = dataclasses.replace(fleet, law=law_from_json(json.dumps(data)))
    assert all(not law.precisions for law in old.law.hardware_laws.values())
    _close(answers(old), json.loads(EXPECTED.read_text()))
    queries = grid().assign(precision="fp32")  # as before: validated, then ignored
    out = fleet_frame(old.law, queries, lambda law, rows: predict_frame(law, rows))
    np.testing.assert_allclose(out["energy_j"], json.loads(EXPECTED.read_text())["fleet_energy_j"], rtol=FIT_RTOL)


def test_precision_moves_an_unmeasured_gpu_where_the_tables_peak_differs_only(fleet: FleetFit) -> None:
    out = ask(fleet, *({"hardware": H100, "precision": p} for p in ("fp16", "bf16", "fp32", "tf32", "fp8")))
    none = ask(fleet, {"hardware": H100})
    energy = out["energy_j"].to_numpy()
    assert energy[0] == pytest.approx(none["energy_j"].iloc[0], rel=1e-12)  # fitted at fp16
    assert energy[1] == pytest.approx(energy[0], rel=1e-12)  # bf16: the H100's peak equals fp16's
    assert energy[2] > 2 * energy[0]  # fp32: 67 TFLOP/s instead of 989 (the compute part of the cost, 14.8x)
    # tf32 (half the fp16 peak) and fp8 (twice) move too; which way depends on the job's compute share against
    # its efficiency at that peak (a faster GPU waits longer on the others), not on the peak alone
    assert energy[3] != pytest.approx(energy[0], rel=1e-6) and energy[4] != pytest.approx(energy[0], rel=1e-6)
    assert out["extrapolated_hardware"].all() and set(out[LAW_COLUMN]) == {"pooled"}


def test_a_measured_gpu_off_its_runs_precision_is_answered_by_the_pooled_covariate_form(fleet: FleetFit) -> None:
    out = ask(
        fleet, {"hardware": A100}, {"hardware": A100, "precision": "bf16"}, {"hardware": A100, "precision": "fp32"}
    )
    routed = A100 if fleet.law.routes[A100].law == OWN else "pooled"  # what answers the A100 at its runs' peak
    assert out[LAW_COLUMN].tolist() == [routed, routed, "pooled"]
    assert out["extrapolated_hardware"].tolist() == [False, False, True]
    assert out["time_scaled_from"].tolist() == ["", "", "pooled"]  # the roofline in time pooled over the GPUs, at fp32
    assert out["energy_j"].iloc[1] == pytest.approx(out["energy_j"].iloc[0], rel=1e-12)
    assert out["energy_j"].iloc[2] > 2 * out["energy_j"].iloc[0] and out["time_s"].iloc[2] > 5 * out["time_s"].iloc[0]
    pooled = fleet.law.pooled
    assert pooled is not None and pooled.unmeasured_time_law is not None
    untimed = dataclasses.replace(
        fleet, law=dataclasses.replace(fleet.law, pooled=dataclasses.replace(pooled, unmeasured_time_law=None))
    )
    scaled = ask(untimed, {"hardware": A100, "precision": "fp32"})  # a law logged before the pooled time law
    assert scaled["time_scaled_from"].tolist() == [A100]  # its own time, scaled by the peaks
    assert scaled["time_s"].iloc[0] != pytest.approx(out["time_s"].iloc[2], rel=1e-3)
    assert scaled["energy_j"].iloc[0] == pytest.approx(out["energy_j"].iloc[2], rel=1e-12)  # the energy either way
    rows = ask(fleet, {"hardware": A100, "precision": "fp32"}, {"hardware": T4}, {"hardware": A100})
    t4 = T4 if fleet.law.routes[T4].law == OWN else "pooled"
    assert rows[LAW_COLUMN].tolist() == ["pooled", t4, routed]  # one request, rows kept in order
    assert rows["energy_j"].iloc[0] == pytest.approx(out["energy_j"].iloc[2], rel=1e-12)


def test_recommend_and_pareto_take_the_rows_precision(fleet: FleetFit) -> None:
    for mode in (recommend_frame, pareto_frame):
        bf16 = ask(fleet, {"hardware": H100, "precision": "bf16"}, mode=mode)
        fp32 = ask(fleet, {"hardware": H100, "precision": "fp32"}, mode=mode)
        assert fp32["energy_j"].min() > 2 * bf16["energy_j"].min()
    best = ask(fleet, {"hardware": A100, "precision": "fp32"}, mode=recommend_frame)
    assert best[LAW_COLUMN].iloc[0] == "pooled" and bool(best["extrapolated_hardware"].iloc[0])


def test_a_precision_the_gpus_row_has_no_peak_for_is_refused_naming_both(fleet: FleetFit) -> None:
    with pytest.raises(InputError) as refused:
        ask(fleet, {"hardware": A100}, {"hardware": T4, "precision": "bf16"})
    message = refused.value.message
    assert message.startswith("precision (row 1): hardware 'T4' (T4) has no bf16 peak in the hardware table")
    assert refused.value.get_http_status_code() == 400  # renumbered to the request's row, still the client's error
    assert "it gives fp32, fp16" in message
    with pytest.raises(InputError, match=r"^precision \(row 0\): must be one of fp32, tf32, bf16, fp16, fp8"):
        ask(fleet, {"hardware": A100, "precision": "int4"})


def test_a_one_gpu_law_has_no_hardware_term_and_refuses_another_peak(fleet: FleetFit) -> None:
    law = fleet.law.hardware_laws[A100]
    frame = pd.DataFrame([{**JOB}, {**JOB, "precision": "bf16"}])
    out = predict_frame(law, frame)
    assert out["energy_j"].iloc[1] == pytest.approx(out["energy_j"].iloc[0], rel=1e-12)
    for mode in (predict_frame, recommend_frame):
        with pytest.raises(InputError) as refused:
            mode(law, frame.assign(precision=["bf16", "fp32"]))
        message = refused.value.message
        assert message.startswith("precision (row 1): fp32 on 'A100 SXM4 80GB': this law was fitted at fp16")
        assert "has no hardware term" in message and "1.95e+13 FLOP/s" in message


def test_a_fleet_without_a_covariate_form_refuses_a_measured_gpu_off_its_precision(fleet: FleetFit) -> None:
    bare = dataclasses.replace(fleet.law, pooled=None, unmeasured_refusal="no pooled law passed the sanity checks")
    answer = fleet_frame(bare, pd.DataFrame([{**JOB, "hardware": A100, "precision": "bf16"}]), predict_frame)
    assert answer[LAW_COLUMN].iloc[0] == A100
    with pytest.raises(InputError) as refused:
        fleet_frame(bare, pd.DataFrame([{**JOB, "hardware": A100, "precision": "fp32"}]), predict_frame)
    message = refused.value.message
    assert message.startswith("precision (row 0): fp32 on 'A100 SXM4 80GB': its runs were at fp16")
    assert "no pooled covariate form" in message and "no pooled law passed" in message
