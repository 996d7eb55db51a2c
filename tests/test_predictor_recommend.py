"""recommend_frame: the best valid (strategy, N) per row, checked against a brute-force grid."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from law_factory import SEARCH_JOBS, make_law, query, valid_grid
from mlflow.exceptions import MlflowException

from mlflow_roofline.law.speedup import AMDAHL, SpeedupLaw
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.serve.recommend import RECOMMEND_OUTPUT_COLUMNS, recommend_frame


@pytest.fixture(scope="module")
def law():
    return make_law()


JOBS = SEARCH_JOBS


@pytest.mark.parametrize("objective", ["energy", "time", "edp"])
@pytest.mark.parametrize("max_devices", [1, 4, 8])
def test_recommendation_is_the_optimum_of_the_valid_grid(law, objective: str, max_devices: int) -> None:
    out = recommend_frame(law, pd.DataFrame(JOBS), max_devices=max_devices, objective=objective)
    assert list(out.columns) == list(RECOMMEND_OUTPUT_COLUMNS)
    for i, job in enumerate(JOBS):
        grid = valid_grid(law, job, max_devices)
        score = {"energy": grid.energy_j, "time": grid.time_s, "edp": grid.energy_j * grid.time_s}[objective]
        best = grid.loc[score.idxmin()]
        got = out.loc[i]
        assert got["candidates"] == len(grid)
        assert (got["strategy"], got["num_devices"]) == (best["strategy"], best["num_devices"])
        for column in ("energy_j", "energy_j_lower", "energy_j_upper", "time_s", "speedup", "eta", "extrapolated"):
            assert got[column] == pytest.approx(best[column], rel=1e-12), column
        assert got["energy_optimal_energy_j"] == pytest.approx(grid.energy_j.min(), rel=1e-12)
        assert got["time_optimal_time_s"] == pytest.approx(grid.time_s.min(), rel=1e-12)
        assert got["objective"] == objective
        assert got["num_devices"] <= max_devices


def test_rows_strategy_devices_and_speedup_are_ignored(law) -> None:
    plain = recommend_frame(law, pd.DataFrame([query()]))
    noisy = recommend_frame(law, pd.DataFrame([query(strategy="tp", num_devices=3, speedup=7.0)]))
    pd.testing.assert_frame_equal(plain, noisy)
    bare = pd.DataFrame([query()]).drop(columns=["strategy", "num_devices"])
    pd.testing.assert_frame_equal(plain, recommend_frame(law, bare))


def test_energy_optimal_and_time_optimal_side_by_side(law) -> None:
    out = recommend_frame(law, pd.DataFrame([query()]), max_devices=8, objective="edp").iloc[0]
    assert out["energy_optimal_energy_j"] <= out["energy_j"] <= out["time_optimal_energy_j"]
    assert out["time_optimal_time_s"] <= out["time_s"] <= out["energy_optimal_time_s"]
    # With alpha_eta < 0 and sublinear speedups, the fastest choice is not the greenest.
    assert (out["energy_optimal_strategy"], out["energy_optimal_num_devices"]) != (
        out["time_optimal_strategy"],
        out["time_optimal_num_devices"],
    )


def test_large_batches_are_chunked_consistently(law, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow_roofline.serve.candidates as predictor

    frame = pd.DataFrame(JOBS * 7)
    whole = recommend_frame(law, frame, objective="edp")
    monkeypatch.setattr(predictor, "_RECOMMEND_CHUNK", 40)  # a few rows per chunk
    pd.testing.assert_frame_equal(whole, recommend_frame(law, frame, objective="edp"))


def test_bad_rows_and_params(law) -> None:
    with pytest.raises(MlflowException, match=r"^hidden_size \(row 1\): must be divisible by num_heads"):
        recommend_frame(law, pd.DataFrame([query(), query(hidden_size=100)]))
    with pytest.raises(MlflowException, match=r"^objective: must be one of energy, time, edp, got 'cost'"):
        recommend_frame(law, pd.DataFrame([query()]), objective="cost")
    for max_devices in (0, 5000, 2.5, "8"):
        with pytest.raises(MlflowException, match=r"^max_devices: must be"):
            recommend_frame(law, pd.DataFrame([query()]), max_devices=max_devices)
    no_single = make_law(n_workloads=12, strategies=("single", "tp"))
    no_single = type(no_single)(**{**no_single.__dict__, "speedup_laws": {"tp": no_single.speedup_laws["tp"]}})
    with pytest.raises(MlflowException, match=r"^max_devices: no strategy the law knows \(tp\) runs on 1 device"):
        recommend_frame(no_single, pd.DataFrame([query()]), max_devices=1)
    with pytest.raises(MlflowException, match=r"^max_devices \(row 0\): no valid configuration of tp"):
        recommend_frame(no_single, pd.DataFrame([query(num_heads=1, hidden_size=512, ffn_size=2047)]), max_devices=8)
    assert np.isfinite(recommend_frame(no_single, pd.DataFrame([query()]), max_devices=2)["energy_j"]).all()


def test_a_speedup_law_without_positive_speedup_is_refused_naming_the_field(law) -> None:
    """Predict names num_devices and the row; recommend names max_devices and says to ask for fewer."""
    # 1 / (0.1 + 0.9/N - 0.1 (N - 1)): positive up to 3 devices, negative from 4 on.
    falling = SpeedupLaw("ddp", AMDAHL, {"p": 0.9, "c": -0.1})
    broken = dataclasses.replace(law, speedup_laws={**law.speedup_laws, "ddp": falling})
    jobs = pd.DataFrame([query(strategy="ddp", num_devices=2), query(strategy="ddp", num_devices=8)])
    with pytest.raises(MlflowException, match=r"^num_devices \(row 1\): the fitted ddp speedup law gives no positive"):
        predict_frame(broken, jobs)
    with pytest.raises(MlflowException, match=r"^max_devices: the fitted ddp speedup law .* devices; ask for fewer$"):
        recommend_frame(broken, jobs, max_devices=8)
    assert len(recommend_frame(broken, jobs, max_devices=3)) == 2
