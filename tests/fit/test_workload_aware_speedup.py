"""The workload-aware speedup law in a hardware fit and in the served model, on the weak-scaling fleet.

The fleet (:mod:`testing.weak_fleet`) is a machine model counted from the real shapes, not the
law's form: ddp and fsdp at a fixed per-device batch, communication growing with the
parameters (data parallel) and with the activations (tensor parallel).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mlflow_roofline.core.schema import LAW_INPUT_NAMES, M_CV_MAPE, M_EXTRAP_MAPE, speedup_score_metric
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.speedup import COMM_TIME, PER_DEVICE_BASELINE
from mlflow_roofline.serve.predict import evaluate_jobs, job_features, predict_frame
from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

GPU = "A100 SXM4 80GB"


@pytest.fixture(scope="module")
def runs():
    return generate_weak_fleet_runs(24, gpus=(GPU,), seed=3)


@pytest.fixture(scope="module")
def fits(runs):
    return {aware: fit_hardware(runs.copy(), GPU, workload_aware=aware) for aware in (False, True)}


def test_each_strategy_keeps_the_law_with_the_lower_cv_error_and_logs_both(fits) -> None:
    fit = fits[True]
    metrics = fit.metrics()
    for strategy in ("ddp", "fsdp", "tp"):
        speedup = fit.speedup[strategy]
        assert (
            set(speedup.cv_mape) == set(speedup.candidates)
            and COMM_TIME in speedup.cv_mape
            and len(speedup.cv_mape) == 2
        )
        best = min(speedup.cv_mape, key=speedup.cv_mape.__getitem__)
        assert speedup.law.form == best
        for form, mape in speedup.cv_mape.items():
            assert metrics[speedup_score_metric(M_CV_MAPE, strategy, form)] == pytest.approx(mape)
            assert np.isfinite(metrics[speedup_score_metric(M_EXTRAP_MAPE, strategy, form)])
    # On this fleet tensor parallel's efficiency depends on the width: the N-only law misses it.
    tp = fit.speedup["tp"]
    assert tp.law.form == COMM_TIME
    assert tp.cv_mape[COMM_TIME] < 0.5 * tp.cv_mape["saturating_exp"]
    assert metrics["speedup_tp_workload_aware"] == 1.0
    assert all(not s.law.workload_aware for s in fits[False].speedup.values())


def test_weak_scaling_laws_are_relative_to_the_per_device_batch(fits) -> None:
    for aware in (False, True):
        for strategy in ("ddp", "fsdp"):
            assert fits[aware].speedup[strategy].law.baseline == PER_DEVICE_BASELINE
        assert fits[aware].speedup["tp"].law.baseline != PER_DEVICE_BASELINE


def test_served_eta_and_time_of_bigger_models_follow_the_measurements(runs) -> None:
    """Fitted on the smaller 75 % of shapes, the served eta and time of the bigger ones (the
    law's own eta, no speedup given) are closer to the measured ones than the N-only law's."""
    size = runs["num_layers"] * runs["hidden_size"] ** 2
    small = size <= np.quantile(size, 0.75)
    bigger = runs[~small & (runs["strategy"] != "single")]
    errors = {}
    for aware in (False, True):
        law = fit_hardware(runs[small].copy(), GPU, workload_aware=aware).law
        served = predict_frame(law, bigger[list(LAW_INPUT_NAMES)].reset_index(drop=True))
        eta_error = np.abs(served["eta"].to_numpy() / bigger["eta"].to_numpy() - 1.0)
        time_error = np.abs(served["time_s"].to_numpy() / bigger["time_s"].to_numpy() - 1.0)
        errors[aware] = (float(np.mean(eta_error)), float(np.mean(time_error)))
        assert np.all(served["eta"] <= 1.0 + 1e-9)
    assert errors[True][0] < errors[False][0]
    assert errors[True][1] < errors[False][1]
    assert errors[True][0] < 0.10


@pytest.mark.parametrize("name", ["tp", "ddp"])  # ddp: a weak-scaling law, its single-device time at B/N
def test_the_energy_sees_the_served_eta_at_the_reference_job_and_a_steadier_one_away_from_it(fits, name) -> None:
    """The energy law's eta term is the comm-time law's on the energy law's clock (serve.energy_eta):
    the served eta at the law's reference job, and away from it the eta of a single-device time
    that grows with the energy law's work; the served eta column stays the time law's."""
    law = fits[True].law
    assert law.speedup_laws[name].workload_aware
    reference = law.speedup_laws[name].reference
    fields = ("num_layers", "hidden_size", "ffn_size", "seq_len", "batch_size")
    sizes = {key: np.array([reference[key], 4 * reference[key]]) for key in fields}
    sizes["ffn_size"] = 4 * sizes["hidden_size"]
    sizes["num_steps"] = np.array([100.0, 100.0])
    strategy, n = np.array([name, name], dtype=object), np.array([4.0, 4.0])
    out = evaluate_jobs(law, sizes, strategy, n, np.full(2, np.nan))
    features = job_features(sizes, strategy, n, out["speedup"])
    served_eta_energy = np.exp(law.energy_law.mean(features))
    assert out["energy_j"][0] == pytest.approx(served_eta_energy[0], rel=1e-9)
    assert out["energy_j"][1] != pytest.approx(served_eta_energy[1], rel=1e-6)  # the laws' clocks differ there
    assert out["eta"] == pytest.approx(out["speedup"] / n)


def test_the_law_json_round_trips_with_its_n_only_laws(fits) -> None:
    law = fits[True].law
    assert law.n_only_speedup_laws and all(not s.workload_aware for s in law.n_only_speedup_laws.values())
    again = FittedLaw.from_json(law.to_json())
    assert again.speedup_laws == law.speedup_laws
    assert again.n_only_speedup_laws == law.n_only_speedup_laws
    old = dataclasses.replace(law, n_only_speedup_laws={})
    assert FittedLaw.from_json(old.to_json()).n_only_speedup_laws == {}


def test_a_gpu_no_run_measured_gets_the_comm_law_pooled_over_interconnects_within_its_reach() -> None:
    """Fitted over three NVLink GPUs, the pooled comm-time law serves an unmeasured GPU whose
    interconnect lies within reach, scaled to it; a PCIe T4 far below gets the N-only law."""
    from mlflow_roofline.core.gpu_datasheets import load_hardware_table
    from mlflow_roofline.fit.pooled_speedup import fit_pooled_speedup
    from mlflow_roofline.serve.hardware_routing import unmeasured_speedup_laws

    table = load_hardware_table(env={})
    gpus = ("V100 SXM2", "A100 SXM4 80GB", "H100 SXM")
    runs = generate_weak_fleet_runs(12, gpus=gpus, strategies=("single", "tp"), device_counts=(2, 4), seed=5)
    fits = sorted((fit_hardware(r.copy(), str(hw)) for hw, r in runs.groupby("hardware")), key=lambda f: -len(f.frame))
    pooled = fit_pooled_speedup(fits, table)
    scores = pooled.loho["tp"]
    assert scores["comm_time"] < scores["n_only"]  # tp efficiency depends on the width: N alone misses it
    law = dataclasses.replace(fits[0].law, unmeasured_speedup_laws=pooled.laws)
    own = fits[0].law
    near = table.lookup("NVIDIA A100-SXM4-40GB")
    far = table.lookup("Tesla T4")
    assert near is not None and far is not None
    on_near = unmeasured_speedup_laws(law, own, near.covariates())["tp"]
    on_far = unmeasured_speedup_laws(law, own, far.covariates())["tp"]
    assert on_near.workload_aware and on_near.params["p"] == pooled.laws["tp"].params["p"]
    ratio = on_near.params["s_per_element"] / pooled.laws["tp"].params["s_per_element"]
    assert ratio == pytest.approx(pooled.laws["tp"].reference["link_bytes_per_s"] / 600e9)
    assert on_far == own.n_only_speedup_laws["tp"]
    assert FittedLaw.from_json(law.to_json()).unmeasured_speedup_laws == pooled.laws
