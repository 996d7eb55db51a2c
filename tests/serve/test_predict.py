"""predict_frame: the law's energy, interval, time and speedup per row, and its input errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from law_factory import fit_law, make_law, query
from mlflow.exceptions import MlflowException

from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.serve.predict import PREDICT_OUTPUT_COLUMNS, predict_frame


@pytest.fixture(scope="module")
def fitted():
    return fit_law()


@pytest.fixture(scope="module")
def law(fitted):
    return fitted[0]


def _statsmodels_features(rows: pd.DataFrame, speedup: np.ndarray) -> pd.DataFrame:
    """The law's features computed here from the proxies, independently of law_features."""
    c = [proxy_flops(r.num_layers, r.hidden_size, r.seq_len, r.batch_size, r.num_steps) for r in rows.itertuples()]
    m = [
        proxy_mem_traffic(r.num_layers, r.hidden_size, r.seq_len, r.batch_size, r.num_steps) for r in rows.itertuples()
    ]
    return pd.DataFrame(
        {
            "log_C": np.log(np.array(c, dtype=float)),
            "log_M": np.log(np.array(m, dtype=float)),
            "log_eta": np.log(speedup / rows["num_devices"].to_numpy()),
            "strategy": rows["strategy"].to_numpy(),
        }
    )


def test_energy_and_interval_are_statsmodels_prediction_in_joules(fitted) -> None:
    law, energy_result, time_result, truth = fitted
    rows = pd.DataFrame(
        [
            query(),
            query(strategy="tp", num_devices=4, num_layers=12, hidden_size=768, num_heads=12, ffn_size=3072),
            query(strategy="single", num_devices=1, seq_len=512, batch_size=8),
            query(strategy="ddp", num_devices=4, num_steps=1000),
        ]
    )
    out = predict_frame(law, rows)

    speedup = np.array([truth.speedup_laws[s](n) for s, n in zip(rows.strategy, rows.num_devices)], dtype=float)
    features = _statsmodels_features(rows, speedup)
    expected = energy_result.get_prediction(features).summary_frame(alpha=0.05)
    np.testing.assert_allclose(out["energy_j"], np.exp(expected["mean"]), rtol=1e-9)
    np.testing.assert_allclose(out["energy_j_lower"], np.exp(expected["obs_ci_lower"]), rtol=1e-9)
    np.testing.assert_allclose(out["energy_j_upper"], np.exp(expected["obs_ci_upper"]), rtol=1e-9)
    np.testing.assert_allclose(out["energy_kwh"], out["energy_j"] / 3.6e6, rtol=1e-12)
    np.testing.assert_allclose(out["speedup"], speedup, rtol=1e-12)
    np.testing.assert_allclose(out["eta"], speedup / rows["num_devices"], rtol=1e-12)
    t1 = np.exp(time_result.predict(features).to_numpy())
    np.testing.assert_allclose(out["time_s"], t1 / speedup, rtol=1e-9)
    assert list(out.columns) == list(PREDICT_OUTPUT_COLUMNS)
    assert out.loc[2, "speedup"] == 1.0 and out.loc[2, "eta"] == 1.0


def test_prediction_is_close_to_the_true_law(fitted) -> None:
    law, _, _, truth = fitted
    rows = pd.DataFrame([query(), query(strategy="single", num_devices=1)])
    out = predict_frame(law, rows)
    speedup = np.array([truth.speedup_laws[s](n) for s, n in zip(rows.strategy, rows.num_devices)], dtype=float)
    f = _statsmodels_features(rows, speedup)
    true_energy = truth.energy_j(f.log_C.to_numpy(), f.log_M.to_numpy(), f.log_eta.to_numpy(), list(f.strategy))
    np.testing.assert_allclose(out["energy_j"], true_energy, rtol=0.10)
    assert (out["energy_j_lower"] < true_energy).all() and (true_energy < out["energy_j_upper"]).all()


def test_measured_speedup_overrides_the_law_row_by_row(law) -> None:
    rows = pd.DataFrame(
        [query(speedup=1.9), query(speedup=np.nan), query(strategy="single", num_devices=1, speedup=1.0)]
    )
    out = predict_frame(law, rows)
    by_law = predict_frame(law, pd.DataFrame([query()]))
    assert out.loc[0, "speedup"] == pytest.approx(1.9)
    assert out.loc[0, "eta"] == pytest.approx(0.95)
    assert out.loc[1, "speedup"] == pytest.approx(by_law.loc[0, "speedup"])
    # A better measured speedup means higher efficiency: less energy (alpha_eta < 0), less time.
    assert out.loc[0, "energy_j"] < out.loc[1, "energy_j"]
    assert out.loc[0, "time_s"] < out.loc[1, "time_s"]


def test_batch_equals_row_by_row(law) -> None:
    rows = [query(), query(strategy="tp", num_devices=2), query(strategy="single", num_devices=1, num_steps=7)]
    together = predict_frame(law, pd.DataFrame(rows))
    apart = pd.concat([predict_frame(law, pd.DataFrame([r])) for r in rows], ignore_index=True)
    pd.testing.assert_frame_equal(together, apart)


def test_extrapolated_outside_the_fitted_ranges(law) -> None:
    _lo, hi = law.ranges["num_layers"]
    rows = pd.DataFrame(
        [
            query(num_layers=int(hi)),
            query(num_layers=int(hi) + 1),
            query(strategy="ddp", num_devices=8),
            query(num_steps=10_000),
        ]
    )
    out = predict_frame(law, rows)
    assert out["extrapolated"].tolist() == [False, True, True, True]
    assert out["extrapolated"].dtype == bool


def test_float_columns_holding_integers_are_accepted(law) -> None:
    as_int = predict_frame(law, pd.DataFrame([query()]))
    as_float = predict_frame(law, pd.DataFrame([query()]).astype({"num_layers": float, "num_devices": float}))
    pd.testing.assert_frame_equal(as_int, as_float)


def _bad(**overrides):
    return pd.DataFrame([query(), query(**overrides)])


@pytest.mark.parametrize(
    ("frame", "field", "words"),
    [
        (pd.DataFrame([query()]).drop(columns="seq_len"), "seq_len", "missing column"),
        (pd.DataFrame([query()]).drop(columns="strategy"), "strategy", "missing column"),
        (_bad(num_layers=0), "num_layers (row 1)", "positive integer"),
        (_bad(batch_size=-8), "batch_size (row 1)", "positive integer"),
        (_bad(hidden_size=512.5), "hidden_size (row 1)", "must be an integer"),
        (_bad(seq_len="long"), "seq_len (row 1)", "must be a number, got 'long'"),
        (_bad(num_steps=None), "num_steps (row 1)", "missing"),
        (_bad(num_steps=float("inf")), "num_steps (row 1)", "must be a finite integer"),
        (_bad(num_heads=True), "num_heads (row 1)", "must be a number"),
        (_bad(strategy="pipeline"), "strategy (row 1)", "must be one of single, ddp, fsdp, tp, got 'pipeline'"),
        (_bad(strategy=None), "strategy (row 1)", "must be one of"),
        (_bad(num_devices=0), "num_devices (row 1)", "positive integer"),
        (_bad(hidden_size=500), "hidden_size (row 1)", "divisible by num_heads (500 % 8 != 0)"),
        (_bad(strategy="single", num_devices=2), "num_devices (row 1)", "must be 1 under strategy single"),
        (_bad(strategy="ddp", num_devices=1), "num_devices (row 1)", "at least 2 under strategy ddp"),
        (_bad(strategy="tp", num_devices=3), "num_heads (row 1)", "divisible by num_devices under tp"),
        (_bad(strategy="fsdp", num_devices=3), "batch_size (row 1)", "divisible by num_devices under fsdp"),
        (_bad(speedup=0.0), "speedup (row 1)", "positive finite"),
        (_bad(speedup="fast"), "speedup (row 1)", "must be a number"),
        (_bad(strategy="single", num_devices=1, speedup=1.5), "speedup (row 1)", "must be 1 under strategy single"),
        (pd.DataFrame([query(num_layers=0)] * 3), "num_layers (row 0 and 2 more)", "positive integer"),
        (pd.DataFrame(columns=list(query())), "model_input", "no rows"),
    ],
)
def test_bad_input_names_the_field_and_row(law, frame, field, words) -> None:
    with pytest.raises(MlflowException) as info:
        predict_frame(law, frame)
    assert info.value.error_code == "INVALID_PARAMETER_VALUE"
    assert info.value.get_http_status_code() == 400
    assert info.value.message.startswith(field), info.value.message
    assert words in info.value.message


def test_strategy_the_law_was_not_fitted_on() -> None:
    law = make_law(n_workloads=12, strategies=("single", "ddp"))
    with pytest.raises(MlflowException, match=r"strategy \(row 0\): the law was fitted on ddp, single only, got 'tp'"):
        predict_frame(law, pd.DataFrame([query(strategy="tp")]))
