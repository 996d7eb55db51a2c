"""Property tests of predict_frame over random valid and invalid frames (hypothesis).

Valid frames (any sizes the config rules accept, inside or far outside the fitted ranges,
with or without measured speedups) give finite positive energies with
lower <= energy <= upper. Invalid frames (one field broken in one row) raise the
400-mapped MlflowException naming that field, and never any other exception.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from law_factory import make_law
from mlflow.exceptions import MlflowException

from mlflow_roofline.core.schema import LAW_INPUT_NAMES
from mlflow_roofline.serve.placement_search import recommend_frame
from mlflow_roofline.serve.predict import predict_frame

LAW = make_law()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def valid_rows(draw) -> dict[str, object]:
    strategy = draw(st.sampled_from(LAW.strategies))
    n = 1 if strategy == "single" else draw(st.integers(2, 16))
    heads = draw(st.integers(1, 32))
    if strategy == "tp":
        heads = n * draw(st.integers(1, 8))
    row: dict[str, object] = {
        "num_layers": draw(st.integers(1, 96)),
        "hidden_size": heads * draw(st.integers(1, 256)),
        "num_heads": heads,
        "ffn_size": (n if strategy == "tp" else 1) * draw(st.integers(1, 20_000)),
        "seq_len": draw(st.integers(1, 8192)),
        "batch_size": (n if strategy in ("ddp", "fsdp") else 1) * draw(st.integers(1, 512)),
        "num_steps": draw(st.integers(1, 1_000_000)),
        "strategy": strategy,
        "num_devices": n,
    }
    if draw(st.booleans()):
        row["speedup"] = (
            1.0 if strategy == "single" else draw(st.one_of(st.just(float("nan")), st.floats(0.05, float(n) * 1.5)))
        )
    return row


def valid_frames() -> st.SearchStrategy[pd.DataFrame]:
    return st.lists(valid_rows(), min_size=1, max_size=12).map(pd.DataFrame)


@SETTINGS
@given(valid_frames())
def test_valid_frames_give_finite_ordered_energies(frame: pd.DataFrame) -> None:
    out = predict_frame(LAW, frame)
    assert len(out) == len(frame)
    energy, lower, upper = (out[c].to_numpy() for c in ("energy_j", "energy_j_lower", "energy_j_upper"))
    assert np.isfinite(energy).all() and (lower > 0).all() and np.isfinite(upper).all()
    assert (lower <= energy).all() and (energy <= upper).all()
    assert np.isfinite(out["time_s"]).all() and (out["time_s"] > 0).all()
    np.testing.assert_allclose(out["eta"], out["speedup"] / frame["num_devices"], rtol=1e-12)
    if "speedup" in frame:
        given_speedup = frame["speedup"].to_numpy(dtype=float)
        measured = ~np.isnan(given_speedup)
        np.testing.assert_allclose(out["speedup"].to_numpy()[measured], given_speedup[measured], rtol=1e-12)


@SETTINGS
@given(valid_frames(), st.sampled_from(["energy", "time", "edp"]), st.integers(1, 16))
def test_recommend_on_valid_frames_is_finite_and_optimal(frame: pd.DataFrame, objective: str, max_devices: int) -> None:
    out = recommend_frame(LAW, frame, max_devices=max_devices, objective=objective)
    assert len(out) == len(frame)
    assert (out["num_devices"] <= max_devices).all() and (out["candidates"] >= 1).all()
    assert (out["energy_optimal_energy_j"] <= out["energy_j"] * (1 + 1e-12)).all()
    assert (out["time_optimal_time_s"] <= out["time_s"] * (1 + 1e-12)).all()
    assert np.isfinite(out["energy_j"]).all()


# One corruption of one field, and the field the error must name.
CORRUPTIONS: list[tuple[str, str, object]] = [
    ("num_layers", "set", 0),
    ("num_layers", "set", -3),
    ("hidden_size", "set", 7.5),
    ("num_heads", "set", "eight"),
    ("ffn_size", "set", None),
    ("seq_len", "set", float("nan")),
    ("batch_size", "set", True),
    ("num_steps", "set", float("inf")),
    ("num_steps", "set", 2**60),
    ("num_layers", "set", 10**400),
    ("seq_len", "set", 3 + 0j),
    ("strategy", "set", "pipeline"),
    ("strategy", "set", 3),
    ("num_devices", "set", 0),
    ("num_devices", "set", 1.5),
    ("speedup", "set", -1.0),
    ("speedup", "set", 0.0),
    ("speedup", "set", "x"),
    ("speedup", "set", float("inf")),
    ("num_layers", "drop", None),
    ("seq_len", "drop", None),
    ("strategy", "drop", None),
    ("num_devices", "drop", None),
    ("hidden_size", "indivisible", None),
    ("num_devices", "mismatch", None),
]


@SETTINGS
@given(valid_frames(), st.data())
def test_invalid_frames_raise_only_the_400_error_naming_the_field(frame: pd.DataFrame, data) -> None:
    field, how, value = data.draw(st.sampled_from(CORRUPTIONS))
    row = data.draw(st.integers(0, len(frame) - 1))
    if how == "drop":
        frame = frame.drop(columns=field)
    elif how == "set":  # the broken column becomes an object column, as a JSON decoder would make it
        column = frame[field].astype(object) if field in frame else pd.Series(float("nan"), frame.index, dtype=object)
        column.iloc[row] = value
        frame[field] = column
    elif how == "indivisible":  # d = k*h + 1 with h >= 2
        h = max(2, int(frame["num_heads"].iloc[row]))
        frame.loc[frame.index[row], ["num_heads", "hidden_size"]] = [h, h * 3 + 1]
    elif how == "mismatch":  # single on several devices, or a parallel strategy on one
        single = frame["strategy"].iloc[row] == "single"
        frame.loc[frame.index[row], "num_devices"] = 2 if single else 1
        if "speedup" in frame:
            frame.loc[frame.index[row], "speedup"] = float("nan")
    with pytest.raises(MlflowException) as info:
        predict_frame(LAW, frame)
    assert info.value.get_http_status_code() == 400
    message = info.value.message
    assert message.split(" ", 1)[0].split(":", 1)[0] in _acceptable_fields(field, how), message


def _acceptable_fields(field: str, how: str) -> set[str]:
    if how == "mismatch":  # under tp/ddp/fsdp, N=1 also breaks nothing else; single N=2 names num_devices
        return {"num_devices"}
    if how == "indivisible":
        return {"hidden_size"}
    return {field}


def test_corruptions_cover_every_input() -> None:
    names = {field for field, _, _ in CORRUPTIONS}
    assert names == {*LAW_INPUT_NAMES, "speedup"}
