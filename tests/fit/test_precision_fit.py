"""The fit takes each run's hardware covariates at the run's precision (fit/pooled.py, fit/runs/precisions.py).

A weak fleet (:mod:`mlflow_roofline.testing.weak_fleet`) whose A100 runs compute at fp32 (the table's
19.5 TFLOP/s, not its 312 fp16 tensor TFLOP/s) beside a T4 and a V100 at fp16: the pooled covariate
forms must see the A100's J/FLOP at fp32, and the laws must record what they were fitted at.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.fit.hardware_fit import HardwareFit, fit_hardware
from mlflow_roofline.fit.pooled import PooledFit, fit_pooled, pooled_law
from mlflow_roofline.fit.runs.precisions import drop_unsupported_precisions, run_precisions
from mlflow_roofline.fit.runs.run_data import RunData
from mlflow_roofline.law.fitted import FittedLaw, precisions_of
from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

GPUS = ("T4", "V100 SXM2", "A100 SXM4 80GB")
A100 = "A100 SXM4 80GB"
TABLE = load_hardware_table(env={})


def fits_of(frame: pd.DataFrame) -> list[HardwareFit]:
    fits = [fit_hardware(rows.copy(), str(hw)) for hw, rows in frame.groupby("hardware")]
    return sorted(fits, key=lambda f: -len(f.frame))


@pytest.fixture(scope="module")
def mixed() -> tuple[list[HardwareFit], PooledFit]:
    warnings.simplefilter("ignore")
    frame = generate_weak_fleet_runs(
        8, seed=0, gpus=GPUS, strategies=("single", "ddp"), device_counts=(2, 4), precisions={A100: "fp32"}
    )
    fits = fits_of(frame)
    return fits, fit_pooled(fits, TABLE, 0)


def test_the_generator_computes_at_the_tables_peak_of_the_precision_it_logs() -> None:
    kwargs = {"gpus": (A100,), "strategies": ("single",), "repeats": 1, "seed": 3}
    fp16 = generate_weak_fleet_runs(4, **kwargs)  # type: ignore[arg-type]
    fp32 = generate_weak_fleet_runs(4, precisions={A100: "fp32"}, **kwargs)  # type: ignore[arg-type]
    assert set(fp16["precision"]) == {"fp16"} and set(fp32["precision"]) == {"fp32"}
    assert (fp32["time_s"] > 3 * fp16["time_s"]).all()  # 16x less peak: compute-bound steps slow down


def test_every_pooled_run_has_its_gpus_covariates_at_its_own_precision(
    mixed: tuple[list[HardwareFit], PooledFit],
) -> None:
    fits, pooled = mixed
    assert pooled.data is not None
    for fit in fits:
        spec = TABLE.lookup(fit.hardware)
        assert spec is not None
        at = "fp32" if fit.hardware == A100 else "fp16"
        assert fit.law.precisions == [at]
        assert pooled.covariates[fit.hardware] == spec.covariates(at)
        rows = pooled.data[pooled.data["hardware"] == fit.hardware]
        assert np.allclose(rows["log_jpf"], math.log(spec.board_power_w / spec.peak_flops(at)), rtol=0, atol=1e-12)
    assert pooled_law(pooled, fits).precisions == ["fp16", "fp32"]  # two GPUs' runs at fp16, one's at fp32


def test_the_covariate_form_predicts_a_left_out_gpu_because_the_peaks_are_the_runs(
    mixed: tuple[list[HardwareFit], PooledFit],
) -> None:
    fits, pooled = mixed
    assert pooled.covariate_form and pooled.loho[pooled.covariate_form][0] < 15.0
    # the same runs with every peak at fp16 (what the fit did before precision entered it) miss by > 100 %
    as_fp16 = [f.frame.assign(precision="fp16") for f in fits]
    blind = fit_pooled([fit_hardware(frame.copy(), str(frame["hardware"].iloc[0])) for frame in as_fp16], TABLE, 0)
    assert min(mape for mape, _ in blind.loho.values()) > 100.0


def test_precisions_most_runs_first_ties_in_the_job_tables_order() -> None:
    assert precisions_of(["bf16", "fp32", "bf16"]) == ["bf16", "fp32"]
    assert precisions_of(["fp16", "fp32"]) == ["fp32", "fp16"]
    assert run_precisions(pd.DataFrame({"precision": ["bf16", None]})).tolist() == ["bf16", "fp32"]
    assert run_precisions(pd.DataFrame({"x": [1]})).tolist() == ["fp32"]


def test_a_law_json_keeps_its_precisions_and_an_old_one_has_none(mixed: tuple[list[HardwareFit], PooledFit]) -> None:
    fits, _ = mixed
    law = next(f.law for f in fits if f.hardware == A100)
    assert FittedLaw.from_json(law.to_json()).precisions == ["fp32"]
    old = law.to_data()
    del old["precisions"]
    assert FittedLaw.from_json(json.dumps(old)).precisions == []


def test_a_run_at_a_precision_its_gpu_has_no_peak_for_is_dropped_and_counted() -> None:
    frame = pd.DataFrame(
        {
            "hardware": ["Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB", "Some CPU"],
            "precision": ["fp16", "bf16", "bf16", "bf16"],
        }
    )
    data = drop_unsupported_precisions(RunData(frame=frame, n_found=5, dropped={"without metric time_s": 1}), TABLE)
    assert data.frame["precision"].tolist() == ["fp16", "bf16"] and data.frame["hardware"].iloc[1] == "Some CPU"
    reason = "with precision bf16 that V100 SXM2 has no peak for in the hardware table"
    assert data.dropped == {"without metric time_s": 1, reason: 2}
    assert f"2 {reason}" in data.summary()


def test_a_pooled_fit_given_such_a_run_refuses_it_by_name() -> None:
    warnings.simplefilter("ignore")
    frame = generate_weak_fleet_runs(4, seed=1, gpus=("T4", "V100 SXM2"), strategies=("single", "ddp"))
    fits = fits_of(frame.assign(precision=np.where(frame["hardware"] == "T4", "bf16", "fp16")))
    with pytest.raises(ConfigError) as refused:
        fit_pooled(fits, TABLE, 0)
    assert refused.value.field == "precision" and "T4 has no bf16 peak" in str(refused.value)
