"""A GPU's runs at precisions of different peaks make one law that sees the precision (fit/runs/precisions.py).

An A100 measured at fp16 (312 TFLOP/s tensor) and at fp32 (19.5 TFLOP/s) by the weak-fleet machine model
(:mod:`mlflow_roofline.testing.weak_fleet`, same workloads at both): its law counts the FLOPs in time at its
reference precision's peak (``FittedLaw.flops_scale``), so each precision is answered at its own cost,
while the pooled forms keep seeing the FLOPs as counted (they read each run's peak from its covariates).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.schema import LAW_INPUT_NAMES
from mlflow_roofline.fit.hardware_fit import HardwareFit, fit_hardware
from mlflow_roofline.fit.pooled import pooled_data
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.fit.runs.precisions import flops_scale
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

A100 = "A100 SXM4 80GB"
TABLE = load_hardware_table(env={})
PEAK = {p: TABLE.lookup(A100).peak_flops(p) for p in ("fp32", "tf32", "fp16", "bf16")}  # type: ignore[union-attr]


def a100_runs(precision: str, seed: int = 0) -> pd.DataFrame:
    kwargs = {"gpus": (A100,), "strategies": ("single", "ddp"), "device_counts": (2, 4), "seed": seed}
    return generate_weak_fleet_runs(8, precisions={A100: precision}, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def mixed() -> tuple[pd.DataFrame, HardwareFit]:
    warnings.simplefilter("ignore")
    frame = pd.concat([a100_runs("fp16"), a100_runs("fp32").iloc[: len(a100_runs("fp16")) - 10]], ignore_index=True)
    return frame, fit_hardware(frame.copy(), A100)


def served_error_by_precision(law: FittedLaw, frame: pd.DataFrame) -> dict[str, float]:
    served = predict_frame(law, frame[[*LAW_INPUT_NAMES, "precision"]].reset_index(drop=True))
    errors = 100.0 * np.abs(served["energy_j"].to_numpy() / frame["energy_j"].to_numpy() - 1.0)
    return {str(p): float(errors[(frame["precision"] == p).to_numpy()].mean()) for p in frame["precision"].unique()}


def test_the_scale_is_the_reference_peak_over_each_answered_precisions_peak() -> None:
    fp16_most = np.array(["fp16", "fp16", "fp32"], dtype=object)
    assert flops_scale(A100, fp16_most, TABLE) == {
        "fp32": PEAK["fp16"] / PEAK["fp32"],  # 16: an fp32 FLOP takes the time of 16 at fp16
        "bf16": 1.0,  # the same peak as the reference: answered as it
        "fp16": 1.0,
    }
    assert "tf32" not in flops_scale(A100, fp16_most, TABLE)  # no run at its peak: routed as before
    assert flops_scale(A100, np.array(["fp16", "bf16"], dtype=object), TABLE) == {}  # one peak: nothing to scale
    assert flops_scale("NVIDIA Nonesuch", fp16_most, TABLE) == {}  # the table cannot say


def test_a_gpu_fitted_at_two_precisions_answers_each_at_its_own_cost(mixed: tuple[pd.DataFrame, HardwareFit]) -> None:
    frame, fit = mixed
    assert fit.law.precisions == ["fp16", "fp32"]
    assert fit.law.flops_scale["fp32"] == pytest.approx(PEAK["fp16"] / PEAK["fp32"])
    by_precision = served_error_by_precision(fit.law, frame)
    assert max(by_precision.values()) < 15.0, by_precision  # one law for both precisions, each near its noise
    big = frame[frame["strategy"] == "single"].sort_values("hidden_size").iloc[[-1]]
    asked = pd.concat([big.assign(precision="fp16"), big.assign(precision="fp32")])[[*LAW_INPUT_NAMES, "precision"]]
    fp16, fp32 = predict_frame(fit.law, asked.reset_index(drop=True))["energy_j"]
    assert fp32 > 2.0 * fp16  # compute-bound at 1/16 of the peak: far dearer, not the same answer


def test_a_request_without_precision_is_answered_at_the_reference_one(mixed: tuple[pd.DataFrame, HardwareFit]) -> None:
    frame, fit = mixed
    rows = frame.iloc[:5][list(LAW_INPUT_NAMES)].reset_index(drop=True)
    plain = predict_frame(fit.law, rows)
    at_reference = predict_frame(fit.law, rows.assign(precision=fit.law.precisions[0]))
    pd.testing.assert_frame_equal(plain, at_reference)


def test_the_scale_survives_the_law_json(mixed: tuple[pd.DataFrame, HardwareFit]) -> None:
    frame, fit = mixed
    again = FittedLaw.from_json(fit.law.to_json())
    assert again.flops_scale == fit.law.flops_scale
    rows = frame.iloc[::7][[*LAW_INPUT_NAMES, "precision"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(predict_frame(again, rows), predict_frame(fit.law, rows))


def test_the_pooled_forms_see_the_flops_as_counted(mixed: tuple[pd.DataFrame, HardwareFit]) -> None:
    _, fit = mixed
    t4_runs = generate_weak_fleet_runs(6, gpus=("T4",), strategies=("single",), seed=1)
    t4 = fit_hardware(t4_runs, "T4")  # one precision: its law is unscaled, its features have no scale
    assert not t4.law.flops_scale and "log_flops_scale" not in t4.data
    counted = pd.concat([feature_frame(fit.frame.drop(columns="flops_scale")), t4.data], ignore_index=True)
    assert np.ptp(fit.data["log_C"].to_numpy() - counted["log_C"].to_numpy()[: len(fit.data)]) > 2.0  # scaled
    pooled = pooled_data([fit, t4], {})
    for name in ("log_C", "log_C_all"):
        np.testing.assert_allclose(pooled[name].to_numpy(), counted[name].to_numpy(), rtol=1e-12)
