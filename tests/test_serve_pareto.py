"""Pareto mode: each row's energy-time frontier, checked against a brute-force one over the valid grid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from law_factory import SEARCH_JOBS, make_law, query, valid_grid
from mlflow.exceptions import MlflowException

from mlflow_roofline.serve.pareto import PARETO_OUTPUT_COLUMNS, frontier, pareto_frame
from mlflow_roofline.serve.recommend import recommend_frame

LAW = make_law()

JOBS = SEARCH_JOBS


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
    from mlflow_roofline.serve import candidates

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
