"""The fleet model of a fit over several GPUs (fit/fleet_fit.py, law/fleet.py, serve/fleet_routing.py), without MLflow.

Two fleets of :mod:`mlflow_roofline.testing.weak_fleet` (real GPUs of the hardware table, a physical
machine model): three GPUs as drawn, and two GPUs whose energy per FLOP falls with the model's
size (``energy ~ size^0.8`` at a fixed step count, as on the real tables where every plain
pooled form fails the num_steps check), the T4 left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.errors import LawFileError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.schema import M_ENERGY_J
from mlflow_roofline.fit.fleet_fit import FleetFit, fit_fleet, metric_slugs
from mlflow_roofline.fit.fleet_routes import own_error
from mlflow_roofline.fit.forms.cv import heldout_mape
from mlflow_roofline.fit.forms.nonlinear import RooflineFormFit
from mlflow_roofline.fit.forms.ols import fit_ols
from mlflow_roofline.fit.hardware_fit import HardwareFit, fit_hardware
from mlflow_roofline.fit.pooled import (
    COVARIATE_FORMS,
    HARDWARE_INTERCEPTS,
    HARDWARE_OFFSET,
    HARDWARE_OFFSET_PER_STEP,
    HARDWARE_SLOPES,
    PooledFit,
    fit_pooled,
)
from mlflow_roofline.law.fitted import HARDWARE_ORDER, FittedLaw
from mlflow_roofline.law.fleet import OWN, POOLED, FleetLaw, law_from_json
from mlflow_roofline.serve.errors import InputError
from mlflow_roofline.serve.fleet_routing import LAW_COLUMN, fleet_frame
from mlflow_roofline.serve.hardware_routing import reference_hardware
from mlflow_roofline.serve.placement_search import pareto_frame, recommend_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.weak_fleet import energy_falling_per_flop, generate_weak_fleet_runs

MEASURED = ("T4", "V100 SXM2", "A100 SXM4 80GB")
UNMEASURED = "H100 SXM"
JOB = {
    "num_layers": 6,
    "hidden_size": 512,
    "num_heads": 8,
    "ffn_size": 2048,
    "seq_len": 128,
    "batch_size": 16,
    "num_steps": 20,
    "strategy": "ddp",
    "num_devices": 2,
}


def fits_of(frame: pd.DataFrame) -> list[HardwareFit]:
    """One fit per GPU, most runs first (as the fit job orders them)."""
    fits = [fit_hardware(rows.copy(), str(hw)) for hw, rows in frame.groupby("hardware")]
    return sorted(fits, key=lambda f: -len(f.frame))


def sublinear_fleet(gpus: tuple[str, ...], seed: int = 0) -> pd.DataFrame:
    """Weak-fleet runs at one step count whose energy per FLOP falls with size (energy ~ FLOPs per step ^ 0.8)."""
    frame = generate_weak_fleet_runs(
        10, seed=seed, steps=(20,), gpus=gpus, strategies=("single", "ddp"), device_counts=(2, 4)
    )
    return energy_falling_per_flop(frame, 0.8)


@pytest.fixture(scope="module")
def fleet3() -> tuple[list[HardwareFit], PooledFit, FleetFit]:
    warnings.simplefilter("ignore")
    frame = generate_weak_fleet_runs(8, seed=0, gpus=MEASURED, strategies=("single", "ddp"), device_counts=(2, 4))
    fits = fits_of(frame)
    pooled = fit_pooled(fits, load_hardware_table(env={}), 0)
    return fits, pooled, fit_fleet(fits, pooled)


@pytest.fixture(scope="module")
def left_out() -> tuple[list[HardwareFit], PooledFit, FleetFit]:
    warnings.simplefilter("ignore")
    fits = fits_of(sublinear_fleet(("V100 SXM2", "A100 SXM4 80GB")))
    pooled = fit_pooled(fits, load_hardware_table(env={}), 0)
    return fits, pooled, fit_fleet(fits, pooled)


def rows_on(*names: str, **changes: object) -> pd.DataFrame:
    return pd.DataFrame([{**JOB, **changes, "hardware": name} for name in names])


def test_a_per_step_pooled_form_passes_the_checks_every_plain_form_fails_and_answers_the_left_out_gpu(
    left_out: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    _, pooled, fleet = left_out
    for name in (HARDWARE_SLOPES, HARDWARE_INTERCEPTS, HARDWARE_OFFSET):
        assert "doubling num_steps" in " ".join(pooled.insane[name]), pooled.insane
    assert HARDWARE_OFFSET_PER_STEP not in pooled.insane and pooled.covariate_form.endswith("_per_step")
    assert fleet.pooled_form.endswith("_per_step") and fleet.law.answers_unmeasured
    out = fleet_frame(fleet.law, rows_on("T4", "V100 SXM2"), lambda law, rows: predict_frame(law, rows))
    assert out[LAW_COLUMN].iloc[0] == POOLED and bool(out["extrapolated_hardware"].iloc[0])
    assert np.isfinite(out[M_ENERGY_J]).all() and (out[M_ENERGY_J] > 0).all()
    doubled = fleet_frame(fleet.law, rows_on("T4", num_steps=40), lambda law, rows: predict_frame(law, rows))
    assert doubled[M_ENERGY_J].iloc[0] == pytest.approx(2 * out[M_ENERGY_J].iloc[0], rel=1e-9)
    # timed by the roofline in time pooled over the two measured GPUs, which doubles with the steps too
    assert out["time_scaled_from"].iloc[0] == "pooled" and "its time by the roofline in time pooled" in fleet.report()
    assert doubled["time_s"].iloc[0] == pytest.approx(2 * out["time_s"].iloc[0], rel=1e-9)


def test_each_gpu_is_answered_by_the_law_that_predicted_its_bigger_models_better(
    fleet3: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    fits, _, fleet = fleet3
    assert list(fleet.law.routes) == [f.hardware for f in fits]
    for fit in fits:
        route = fleet.law.routes[fit.hardware]
        assert route.own_mape == own_error(fit)[0] and np.isfinite(route.pooled_mape)
        answered = route.pooled_mape if route.law == POOLED else route.own_mape
        assert answered == min(route.own_mape, route.pooled_mape) <= route.own_mape  # never worse than its alias
        own = fleet.law.hardware_laws[fit.hardware]
        assert fleet.law.answering(fit.hardware) is (own if route.law == OWN else fleet.law.pooled)


def test_the_pooled_error_is_the_pooled_form_refitted_without_that_gpus_bigger_models(
    fleet3: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    fits, pooled, fleet = fleet3
    assert pooled.data is not None
    start = 0
    for fit in fits:
        _, held = own_error(fit)
        assert held is not None
        mask = np.zeros(len(pooled.data), dtype=bool)
        mask[start : start + len(fit.data)] = held
        start += len(fit.data)
        form = pooled.forms[fleet.pooled_form]
        train, test = pooled.data[~mask].reset_index(drop=True), pooled.data[mask]
        features = {c: test[c].to_numpy() for c in test.columns}
        if isinstance(form, RooflineFormFit):  # a roofline form refits from its own starts
            predicted = form.refit(train).law.mean(features)
        else:
            refit = fit_ols(form.name, form.formula, train)
            shift = test["log_jpf"].to_numpy() if form.name in COVARIATE_FORMS else 0.0  # a response relative to it
            predicted = refit.law.mean(features) + shift
        expected = heldout_mape(test["log_E"].to_numpy(), predicted, test["workload_hash"].to_numpy())[0]
        assert fleet.law.routes[fit.hardware].pooled_mape == pytest.approx(expected, rel=1e-6)


def test_the_fleet_law_round_trips_through_json(fleet3: tuple[list[HardwareFit], PooledFit, FleetFit]) -> None:
    _, _, fleet = fleet3
    back = law_from_json(fleet.law.to_json())
    assert isinstance(back, FleetLaw) and back.routes == fleet.law.routes
    assert back.pooled is not None and list(back.pooled.hardware_laws) == fleet.law.known_hardware
    rows = rows_on(*fleet.law.known_hardware, UNMEASURED)

    def ask(law: FleetLaw) -> pd.DataFrame:
        return fleet_frame(law, rows, lambda one, part: predict_frame(one, part))

    pd.testing.assert_frame_equal(ask(back), ask(fleet.law))


def test_the_json_keeps_the_gpus_in_the_fits_order_so_an_unmeasured_gpu_is_timed_from_the_same_one(
    fleet3: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    """The law JSON is written with sorted keys; the fit's order (most runs first: the first GPU is the reference an
    unmeasured one takes its speedup from, and its time where the law has no pooled time law) must survive it, and a
    law written before the order was kept reads as it did."""
    _, _, fleet = fleet3
    order = sorted(fleet.law.known_hardware, reverse=True)  # not alphabetical, whatever the fit's order
    laws = {name: fleet.law.hardware_laws[name] for name in order}
    assert fleet.law.pooled is not None
    pooled = dataclasses.replace(fleet.law.pooled, hardware_laws=laws, unmeasured_time_law=None)
    law = dataclasses.replace(fleet.law, hardware_laws=laws, pooled=pooled)
    back = law_from_json(law.to_json())
    assert isinstance(back, FleetLaw) and back.known_hardware == order
    assert back.pooled is not None and reference_hardware(back.pooled) == order[0]
    answered = fleet_frame(back, rows_on(UNMEASURED), lambda one, part: predict_frame(one, part))
    assert answered["time_scaled_from"].tolist() == [order[0]]
    pooled_back = FittedLaw.from_json(law.pooled.to_json())
    assert list(pooled_back.hardware_laws) == order

    data = json.loads(law.to_json())
    del data[HARDWARE_ORDER]  # as written before the order was kept: read in the JSON's (sorted) order
    assert law_from_json(json.dumps(data)).known_hardware == sorted(order)
    data[HARDWARE_ORDER] = order[:1]
    with pytest.raises(LawFileError, match=HARDWARE_ORDER):
        law_from_json(json.dumps(data))


def test_every_mode_routes_each_row_and_keeps_the_request_order(
    fleet3: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    _, _, fleet = fleet3
    law = fleet.law
    names = [UNMEASURED, *law.known_hardware, law.known_hardware[0]]
    rows = rows_on(*names)
    out = fleet_frame(law, rows, lambda one, part: predict_frame(one, part))
    assert out[LAW_COLUMN].tolist() == [law.label(n) for n in names] and out[LAW_COLUMN].iloc[0] == POOLED
    assert out["extrapolated_hardware"].tolist() == [True] + [False] * (len(names) - 1)
    for i, name in enumerate(names):
        one = law.pooled if name == UNMEASURED else law.answering(name)
        assert one is not None
        alone = predict_frame(one, rows.iloc[[i]].reset_index(drop=True))
        assert out[M_ENERGY_J].iloc[i] == pytest.approx(alone[M_ENERGY_J].iloc[0], rel=1e-12)
    best = fleet_frame(law, rows, lambda one, part: recommend_frame(one, part, 4))
    assert len(best) == len(rows) and best[LAW_COLUMN].tolist() == out[LAW_COLUMN].tolist()
    front = fleet_frame(law, rows, lambda one, part: pareto_frame(one, part, 4))
    assert front["row"].is_monotonic_increasing and set(front["row"]) == set(range(len(rows)))
    assert (front.groupby("row")[LAW_COLUMN].first() == out[LAW_COLUMN]).all()


def test_an_unknown_gpu_is_refused_by_name_and_a_bad_row_named_in_the_request(
    fleet3: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    _, _, fleet = fleet3
    with pytest.raises(InputError) as refused:
        fleet_frame(fleet.law, rows_on("T4", "Abacus"), lambda one, part: predict_frame(one, part))
    message = refused.value.message
    assert message.startswith("hardware (row 1): unknown hardware 'Abacus'") and "hardware table" in message
    assert all(name in message for name in MEASURED)
    bad = pd.concat([rows_on("T4"), rows_on("V100 SXM2", num_layers=-1)], ignore_index=True)
    with pytest.raises(InputError, match=r"\(row 1\)"):
        fleet_frame(fleet.law, bad, lambda one, part: predict_frame(one, part))
    with pytest.raises(InputError, match="hardware: missing column"):
        fleet_frame(fleet.law, pd.DataFrame([JOB]), lambda one, part: predict_frame(one, part))


def test_without_a_sane_pooled_law_measured_gpus_keep_their_laws_and_a_table_gpu_is_refused_with_why(
    fleet3: tuple[list[HardwareFit], PooledFit, FleetFit],
) -> None:
    fits, pooled, _ = fleet3
    broken = {name: [f"{fits[0].hardware}: energy decreases as hidden_size grows (ddp)"] for name in pooled.forms}
    none_sane = dataclasses.replace(pooled, chosen=HARDWARE_SLOPES, insane=broken, law=None)
    fleet = fit_fleet(fits, none_sane)
    assert fleet.law.pooled is None and {r.law for r in fleet.law.routes.values()} == {OWN}
    assert "no pooled law passed the sanity checks" in fleet.law.unmeasured_refusal
    out = fleet_frame(fleet.law, rows_on(*MEASURED), lambda one, part: predict_frame(one, part))
    assert out[LAW_COLUMN].tolist() == list(MEASURED)
    with pytest.raises(InputError) as refused:
        fleet_frame(fleet.law, rows_on(UNMEASURED), lambda one, part: predict_frame(one, part))
    assert "energy decreases as hidden_size grows" in refused.value.message and "T4" in refused.value.message
    # each pooled form is named beside its problem, not the same unnamed problem once per form
    assert all(f"{name}: {fits[0].hardware}: energy decreases" in refused.value.message for name in pooled.forms)
    assert fleet.metrics()["fleet_answers_unmeasured"] == 0.0


def test_route_metrics_name_every_gpu_once() -> None:
    assert metric_slugs(["GPU A", "GPU-A", "T4"]) == {
        "GPU A": "gpu-a",
        "GPU-A": f"gpu-a-{hashlib.sha256(b'GPU-A').hexdigest()[:8]}",
        "T4": "t4",
    }
