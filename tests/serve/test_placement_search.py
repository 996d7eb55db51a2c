"""Recommend and pareto mode, each checked against a brute-force search of the valid grid.

recommend_frame: the best valid (strategy, N) per row; pareto_frame: each row's energy-time frontier.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from law_factory import SEARCH_JOBS, make_law, query, valid_grid
from mlflow.exceptions import MlflowException

from mlflow_roofline.law.speedup import AMDAHL, SpeedupLaw
from mlflow_roofline.serve.placement_search import (
    PARETO_OUTPUT_COLUMNS,
    RECOMMEND_OUTPUT_COLUMNS,
    frontier,
    pareto_frame,
    recommend_frame,
)
from mlflow_roofline.serve.predict import predict_frame


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


def _shifted(law, energy_by: float, time_by: float):
    """``law`` with every energy multiplied by e**energy_by and every time by e**time_by (intercepts moved)."""

    def shift(linear, by: float):
        coef = list(linear.coef)
        coef[linear.terms.index("Intercept")] += by
        return dataclasses.replace(linear, coef=coef)

    return dataclasses.replace(law, energy_law=shift(law.energy_law, energy_by), time_law=shift(law.time_law, time_by))


def test_edp_ranks_placements_whose_product_lies_past_float64(law) -> None:
    """Energies near 1e262 J and times near 1e85 s are finite, their products are not: ranked as products,
    every candidate tied at inf and the first one (ddp on 2 devices) was recommended for a batch of 9."""
    job = pd.DataFrame([SEARCH_JOBS[2]])  # batch 9: no ddp or fsdp on 2 devices
    vast = recommend_frame(_shifted(law, 600.0, 200.0), job, max_devices=8, objective="edp")
    plain = recommend_frame(law, job, max_devices=8, objective="edp")
    assert float(vast.loc[0, "energy_j"]) * float(vast.loc[0, "time_s"]) == np.inf  # Python floats: no warning
    assert (vast.loc[0, "strategy"], vast.loc[0, "num_devices"]) == (
        plain.loc[0, "strategy"],
        plain.loc[0, "num_devices"],
    )


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
    import mlflow_roofline.serve.placement_search as predictor

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


# -- pareto mode: each row's energy-time frontier ---------------------------------------
LAW = make_law()


def _brute_force_front(grid: pd.DataFrame) -> pd.DataFrame:
    """The points no other point matches-or-beats in both energy and time (beating in one), by time."""
    e, t = grid["energy_j"].to_numpy(), grid["time_s"].to_numpy()
    keep = [
        i
        for i in range(len(grid))
        if not any((e[j] <= e[i]) and (t[j] <= t[i]) and (e[j] < e[i] or t[j] < t[i]) for j in range(len(grid)))
    ]
    return grid.iloc[keep].sort_values(["time_s", "energy_j"]).reset_index(drop=True)


@pytest.mark.parametrize("max_devices", [1, 4, 8, 16])
def test_frontier_is_the_brute_force_frontier_of_the_valid_grid(max_devices: int) -> None:
    out = pareto_frame(LAW, pd.DataFrame(JOBS), max_devices=max_devices)
    assert list(out.columns) == list(PARETO_OUTPUT_COLUMNS)
    assert out["row"].is_monotonic_increasing and set(out["row"]) == set(range(len(JOBS)))
    for i, job in enumerate(JOBS):
        got = out[out["row"] == i].reset_index(drop=True)
        expected = _brute_force_front(valid_grid(LAW, job, max_devices))
        assert list(zip(got.strategy, got.num_devices)) == list(zip(expected.strategy, expected.num_devices))
        for column in ("energy_j", "energy_j_lower", "energy_j_upper", "time_s", "extrapolated"):
            np.testing.assert_allclose(got[column].astype(float), expected[column].astype(float), rtol=1e-12)
        # Along the frontier, each slower choice uses strictly less energy.
        assert (np.diff(got["time_s"]) > 0).all() and (np.diff(got["energy_j"]) < 0).all()


def test_frontier_ends_at_the_fastest_and_the_greenest_choice() -> None:
    out = pareto_frame(LAW, pd.DataFrame(JOBS))
    best = recommend_frame(LAW, pd.DataFrame(JOBS))
    for i in range(len(JOBS)):
        front = out[out["row"] == i]
        assert (front.iloc[0]["strategy"], front.iloc[0]["num_devices"]) == (
            best.loc[i, "time_optimal_strategy"],
            best.loc[i, "time_optimal_num_devices"],
        )
        assert (front.iloc[-1]["strategy"], front.iloc[-1]["num_devices"]) == (
            best.loc[i, "energy_optimal_strategy"],
            best.loc[i, "energy_optimal_num_devices"],
        )


def test_frontier_of_a_hand_made_grid_with_ties_and_invalid_choices() -> None:
    energy = np.array([[5.0, 3.0, 3.0, 4.0, 1.0, 9.0]])
    time_s = np.array([[1.0, 2.0, 3.0, 2.0, 9.0, 0.5]])
    valid = np.array([[True, True, True, True, True, False]])
    order, on_front = frontier(energy, time_s, valid)
    chosen = order[0][on_front[0]].tolist()
    # 5 (3 J, 3 s) is dominated by 1 (3 J, 2 s); 3 (4 J, 2 s) by 1 too; 5 (9 J, 0.5 s) is invalid.
    assert chosen == [0, 1, 4]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(JOBS), min_size=1, max_size=30), st.integers(10, 200))
def test_chunks_do_not_change_the_answer(jobs: list[dict], chunk: int) -> None:
    from mlflow_roofline.serve import placement_search as candidates

    frame = pd.DataFrame(jobs)
    whole = pareto_frame(LAW, frame)
    original = candidates._RECOMMEND_CHUNK
    candidates._RECOMMEND_CHUNK = chunk
    try:
        pd.testing.assert_frame_equal(whole, pareto_frame(LAW, frame))
    finally:
        candidates._RECOMMEND_CHUNK = original


def test_bad_rows_name_the_field_and_row() -> None:
    with pytest.raises(MlflowException, match=r"^hidden_size \(row 1\): must be divisible by num_heads"):
        pareto_frame(LAW, pd.DataFrame([query(), query(hidden_size=100)]))
    with pytest.raises(MlflowException, match=r"^max_devices: must be between 1 and 1024, got 0"):
        pareto_frame(LAW, pd.DataFrame([query()]), max_devices=0)
