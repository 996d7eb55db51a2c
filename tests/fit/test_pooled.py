"""One law for several hardware: pooled forms on the roofline generator's fleet, and how they serve.

The fleet (:mod:`mlflow_roofline.testing.hardware_fleet`) has three simulated GPUs whose
energy per job is ordered Sim Fast < Sim Base < Sim Small; their hardware-table rows are
written to a user table, as a user would add a GPU the shipped table lacks.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from mlflow.pyfunc.scoring_server import predictions_to_json
from support.strict_json import EDGE_JOBS, MODES, MOST_CARBON, assert_finite, strict_loads

from mlflow_roofline.core.carbon import resolve_carbon
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.fit.forms.averaging import AVERAGED
from mlflow_roofline.fit.forms.extrapolation import EXTRAP_QUANTILE
from mlflow_roofline.fit.forms.hardware_roofline import HARDWARE_ROOFLINE, HARDWARE_ROOFLINE_COMPLETE
from mlflow_roofline.fit.forms.selection import score
from mlflow_roofline.fit.hardware_fit import HardwareFit, fit_hardware
from mlflow_roofline.fit.pooled import (
    COVARIATE_FORMS,
    HARDWARE_COVARIATES,
    HARDWARE_SLOPES,
    PooledFit,
    choose_pooled,
    fit_pooled,
    pooled_data,
    pooled_law,
    pooled_sanity,
)
from mlflow_roofline.law.averaged import AveragedLaw
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.serve.errors import InputError
from mlflow_roofline.serve.placement_search import pareto_frame, recommend_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.hardware_fleet import FLEET, fleet_table_env, load_fleet_table, write_fleet_table
from mlflow_roofline.testing.roofline_generator import RooflineHardware, generate_roofline_runs

HELD_OUT_MAPE = 20.0
"""Stated bound (%) on the energy error of a GPU no run measured, fitted on the two others (measured ~10 %)."""

LOHO_MAPE = 10.0
"""Stated bound (%) on the leave-one-hardware-out error of the covariate form over the three (measured ~6 %)."""

JOBS = pd.DataFrame(
    [
        dict(
            num_layers=layers,
            hidden_size=d,
            num_heads=d // 64,
            ffn_size=4 * d,
            seq_len=seq,
            batch_size=batch,
            num_steps=1000,
            strategy="single",
            num_devices=1,
        )
        for layers, d, seq, batch in [
            (2, 256, 128, 16),
            (6, 512, 128, 32),
            (12, 768, 256, 32),
            (4, 1024, 512, 8),
            (24, 1024, 128, 16),
        ]
    ]
)


def fleet_fits(fleet: tuple[RooflineHardware, ...], seed: int = 0) -> list[HardwareFit]:
    warnings.simplefilter("ignore")
    frame = generate_roofline_runs(20, hardware=fleet, seed=seed)
    fits = [fit_hardware(rows.copy(), str(hw)) for hw, rows in frame.groupby("hardware")]
    return sorted(fits, key=lambda f: -len(f.frame))


def true_energy(hw: RooflineHardware, jobs: pd.DataFrame) -> np.ndarray:
    """The generator's noise-free energy (joules) of single-device jobs."""
    args = [jobs[c].to_numpy(dtype=float) for c in ("num_layers", "hidden_size", "seq_len", "batch_size")]
    weights = 12.0 * args[0] * args[1] ** 2
    seconds, watts = hw.step(proxy_flops(*args, 1), proxy_mem_traffic(*args, 1), weights, "single", 1)
    return seconds * watts * jobs["num_steps"].to_numpy(dtype=float)


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fleet_table(tmp_path_factory.mktemp("table") / "fleet.csv")


@pytest.fixture(scope="module")
def fits() -> list[HardwareFit]:
    return fleet_fits(FLEET)


@pytest.fixture(scope="module")
def pooled(fits: list[HardwareFit], table_path: Path) -> PooledFit:
    return fit_pooled(fits, load_fleet_table(table_path))


def true_seconds(hw: RooflineHardware, jobs: pd.DataFrame) -> np.ndarray:
    """The generator's noise-free time (seconds) of single-device jobs."""
    args = [jobs[c].to_numpy(dtype=float) for c in ("num_layers", "hidden_size", "seq_len", "batch_size")]
    weights = 12.0 * args[0] * args[1] ** 2
    seconds, _ = hw.step(proxy_flops(*args, 1), proxy_mem_traffic(*args, 1), weights, "single", 1)
    return seconds * jobs["num_steps"].to_numpy(dtype=float)


def test_a_pooled_form_wins_and_the_law_round_trips_through_json(pooled: PooledFit) -> None:
    assert pooled.chosen != HARDWARE_SLOPES and pooled.law is not None
    # the plain and per-step covariate forms and the datasheet roofline (its complete variant needs mixed kinds)
    assert set(pooled.loho) == set(COVARIATE_FORMS)
    assert pooled.metrics()["loho_mape"] == pooled.loho[pooled.covariate_form][0] < LOHO_MAPE
    law = FittedLaw.from_json(pooled.law.to_json())
    assert set(law.known_hardware) == {hw.name for hw in FLEET} and law.covariate_law is not None
    jobs = JOBS.assign(hardware="Sim Base")
    pd.testing.assert_frame_equal(predict_frame(law, jobs), predict_frame(pooled.law, jobs))
    assert "loho_mape" in pooled.report() and "<- chosen" in pooled.report()


def test_the_pooled_law_recovers_the_generators_hardware_ranking(pooled: PooledFit) -> None:
    assert pooled.law is not None
    predicted = {
        hw.name: predict_frame(pooled.law, JOBS.assign(hardware=hw.name))["energy_j"].to_numpy() for hw in FLEET
    }
    truth = {hw.name: true_energy(hw, JOBS) for hw in FLEET}
    for job in range(len(JOBS)):
        assert sorted(predicted, key=lambda h: predicted[h][job]) == sorted(truth, key=lambda h: truth[h][job])
    assert sorted(truth, key=lambda h: truth[h][0]) == ["Sim Fast", "Sim Base", "Sim Small"]


def test_a_held_out_gpu_is_predicted_from_the_table_within_the_stated_error(
    table_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = next(hw for hw in FLEET if hw.name == "Sim Small")
    others = tuple(hw for hw in FLEET if hw is not small)
    pooled = fit_pooled(fleet_fits(others), load_fleet_table(table_path))
    assert pooled.law is not None and pooled.law.covariate_law is not None
    for name, value in fleet_table_env(str(table_path)).items():  # the served model reads the user's table
        monkeypatch.setenv(name, value)
    out = predict_frame(pooled.law, JOBS.assign(hardware="Sim Small"))
    assert out["extrapolated_hardware"].all()
    error = 100.0 * np.abs(out["energy_j"].to_numpy() / true_energy(small, JOBS) - 1.0)
    assert error.mean() < HELD_OUT_MAPE
    measured = predict_frame(pooled.law, JOBS.assign(hardware="Sim Base"))
    assert not measured["extrapolated_hardware"].any()
    # the interval of an unmeasured GPU is widened by the leave-one-hardware-out error
    width = np.log(out["energy_j_upper"] / out["energy_j_lower"])
    law_width = np.log(measured["energy_j_upper"] / measured["energy_j_lower"])
    assert (width > law_width).all()


def test_the_hardware_column_is_required_and_unknown_names_list_the_known(pooled: PooledFit) -> None:
    assert pooled.law is not None
    with pytest.raises(InputError, match="missing column; this model knows 3 hardware") as info:
        predict_frame(pooled.law, JOBS)
    assert all(hw.name in str(info.value) for hw in FLEET)
    with pytest.raises(InputError, match="unknown hardware 'Quantum GPU'; this model knows"):
        predict_frame(pooled.law, JOBS.assign(hardware="Quantum GPU"))
    with pytest.raises(InputError, match="must be a hardware name"):
        predict_frame(pooled.law, JOBS.assign(hardware=3))
    # a GPU of the shipped table is predicted through the covariates
    out = predict_frame(pooled.law, JOBS.assign(hardware="NVIDIA H100 80GB HBM3"))
    assert out["extrapolated_hardware"].all() and np.isfinite(out["energy_j"]).all()


def test_a_one_hardware_law_takes_its_own_name_or_none() -> None:
    law = fleet_fits(FLEET[:1])[0].law
    assert not predict_frame(law, JOBS)["extrapolated_hardware"].any()
    assert len(predict_frame(law, JOBS.assign(hardware="Sim Base"))) == len(JOBS)
    with pytest.raises(InputError, match="unknown hardware 'NVIDIA A10'; this model knows Sim Base$"):
        predict_frame(law, JOBS.assign(hardware="NVIDIA A10"))


def test_every_pooled_form_is_checked_for_size_extrapolation_as_a_hardware_form_is(
    pooled: PooledFit, fits: list[HardwareFit]
) -> None:
    check = pooled.extrapolation
    assert check is not None and check.held_out.sum() >= 3 * 10
    metrics = pooled.metrics()
    for name, form in pooled.forms.items():
        assert 0 < form.extrap_mape < 20 and np.isfinite(form.extrap_se)
        assert metrics[f"extrap_mape_pooled_{name}"] == form.extrap_mape
        assert metrics[f"pooled_sane_{name}"] == 1.0
    assert metrics["extrap_mape"] == pooled.forms[pooled.chosen].extrap_mape
    assert metrics["extrap_n_held_out"] == check.held_out.sum()
    # recomputed by hand: the covariate form refitted with statsmodels on the smaller models only
    data = pooled_data(fits, pooled.covariates)
    bound = np.quantile(data["log_Ld2"], EXTRAP_QUANTILE)
    small, large = data[data["log_Ld2"] <= bound + 1e-12], data[data["log_Ld2"] > bound + 1e-12]
    fitted = smf.ols("I(log_E - log_jpf) ~ log_C + log_M + log_eta + log_ridge + strategy", small).fit()
    predicted = np.exp(fitted.predict(large) + large["log_jpf"])
    mape = float(np.mean(100 * np.abs(predicted / np.exp(large["log_E"]) - 1)))
    assert pooled.forms[HARDWARE_COVARIATES].extrap_mape == pytest.approx(mape, rel=1e-6)
    report = pooled.report()
    assert "extrap_mape" in report and "larger runs predicted" in report and "sanity checks" in report


def test_the_pooled_choice_uses_the_worse_of_cv_and_extrapolation_error(pooled: PooledFit) -> None:
    assert pooled.chosen == choose_pooled(pooled.forms, {})
    best = min(score(f)[0] for f in pooled.forms.values())
    assert score(pooled.forms[pooled.chosen])[0] <= best + score(pooled.forms[pooled.chosen])[1] + 1e-9
    # the same form, unchanged in CV, missing the larger models by 50 % is no longer chosen
    forms = dict(pooled.forms)
    forms[pooled.chosen] = dataclasses.replace(forms[pooled.chosen], extrap_mape=50.0, extrap_se=1.0)
    assert forms[pooled.chosen].cv_mape == pooled.forms[pooled.chosen].cv_mape
    assert choose_pooled(forms, {}) != pooled.chosen


def _falling_with_size(law: LinearLaw) -> LinearLaw:
    """``law`` with the sign of its log_C and log_M slopes flipped: energy falls as the model grows."""
    coef = [-c if t in ("log_C", "log_M") else c for t, c in zip(law.terms, law.coef)]
    return LinearLaw(law.formula, list(law.terms), coef, law.cov, law.resid_var, law.df_resid)


def test_a_pooled_form_that_breaks_a_sanity_property_is_not_chosen(pooled: PooledFit, fits: list[HardwareFit]) -> None:
    assert pooled.insane == {} and pooled_sanity(pooled.forms, fits, pooled.covariates) == {}
    # the power-law forms alone (the datasheet roofline, sane by construction, is tested in test_hardware_roofline)
    power_laws = {n: f for n, f in pooled.forms.items() if n not in (HARDWARE_ROOFLINE, HARDWARE_ROOFLINE_COMPLETE)}
    pooled = dataclasses.replace(
        pooled, forms=power_laws, loho={n: v for n, v in pooled.loho.items() if n in power_laws}
    )
    broken = dict(pooled.forms)
    broken[HARDWARE_COVARIATES] = dataclasses.replace(
        broken[HARDWARE_COVARIATES], law=_falling_with_size(broken[HARDWARE_COVARIATES].law)
    )
    insane = pooled_sanity(broken, fits, pooled.covariates)
    assert set(insane) == {HARDWARE_COVARIATES}
    assert {p.split(":")[0] for p in insane[HARDWARE_COVARIATES]} == {f.hardware for f in fits}
    assert any("decreases as hidden_size grows" in p for p in insane[HARDWARE_COVARIATES])
    # with its errors unchanged it would win; broken, it is passed over, also for unmeasured GPUs
    assert choose_pooled(pooled.forms, {}) == HARDWARE_COVARIATES
    assert choose_pooled(broken, insane) != HARDWARE_COVARIATES
    rechecked = dataclasses.replace(pooled, forms=broken, insane=insane)
    sane = {n: v for n, v in pooled.loho.items() if n != HARDWARE_COVARIATES}
    assert rechecked.covariate_form == min(sane, key=lambda n: sane[n][0]) != HARDWARE_COVARIATES
    # hardware_slopes (one sanity-checked law per hardware) stays the fallback when nothing pooled is sane
    assert choose_pooled(pooled.forms, {n: ["x"] for n in pooled.forms}) == HARDWARE_SLOPES


def test_an_unmeasured_gpu_s_time_follows_the_roofline_not_the_peak_flops(
    pooled: PooledFit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference's time scaled by the roofline: how a law without a pooled time law (one written before it, or
    fitted where it could not be) times a GPU no run measured (the pooled one: tests/fit/test_pooled_time.py)."""
    assert pooled.law is not None
    law = dataclasses.replace(pooled.law, unmeasured_time_law=None)
    reference = next(hw for hw in FLEET if hw.name == law.known_hardware[0])
    compute = dataclasses.replace(reference, name="Sim Compute", peak_flops=4 * reference.peak_flops)
    for name, value in fleet_table_env(str(write_fleet_table(tmp_path / "t.csv", (*FLEET, compute)))).items():
        monkeypatch.setenv(name, value)
    on_reference = predict_frame(law, JOBS.assign(hardware=reference.name))
    on_compute = predict_frame(law, JOBS.assign(hardware=compute.name))
    assert on_compute["time_scaled_from"].tolist() == [reference.name] * len(JOBS)
    assert on_reference["time_scaled_from"].tolist() == [""] * len(JOBS)
    predicted = (on_compute["time_s"] / on_reference["time_s"]).to_numpy()
    truth = true_seconds(compute, JOBS) / true_seconds(reference, JOBS)
    np.testing.assert_allclose(predicted, truth, rtol=0.05)
    args = [JOBS[c].to_numpy(dtype=float) for c in ("num_layers", "hidden_size", "seq_len", "batch_size")]
    memory_bound = proxy_flops(*args, 1) / proxy_mem_traffic(*args, 1) < reference.peak_flops / reference.mem_rate
    assert memory_bound.sum() >= 2 and (~memory_bound).sum() >= 1
    # four times the FLOP/s, the same bandwidth: a memory-bound job is not predicted faster
    assert np.all(predicted[memory_bound] >= 1.0 - 1e-12)
    # a compute-bound one is, though by less than 4x once it meets the new GPU's memory roof
    assert np.all((predicted[~memory_bound] < 0.95) & (predicted[~memory_bound] >= 0.25 - 1e-12))


def test_the_registered_pooled_law_carries_the_loho_mape_of_the_form_it_registers(pooled: PooledFit) -> None:
    law = pooled.law
    assert law is not None and law.covariate_law is not None
    metrics = pooled.metrics()
    # the form registered for GPUs no run measured, and its leave-one-hardware-out error, logged and stored
    assert law.covariate_form == pooled.covariate_form in COVARIATE_FORMS
    assert (
        law.loho_mape
        == metrics["loho_mape"]
        == metrics[f"loho_mape_{law.covariate_form}"]
        == pooled.loho[law.covariate_form][0]
    )
    assert law.covariate_law.coef == pooled.forms[law.covariate_form].law.coef
    if pooled.chosen in COVARIATE_FORMS:  # the chosen form's own LOHO error is logged beside it
        assert f"loho_mape_{pooled.chosen}" in metrics
    assert FittedLaw.from_json(law.to_json()).loho_mape == law.loho_mape


# the fleet's three simulated GPUs, named as NVML names three real GPUs of the shipped table
REAL_NAMES = ("Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3")


def test_runs_of_gpus_the_shipped_table_knows_get_their_covariates_t4_included(fits: list[HardwareFit]) -> None:
    renamed = [dataclasses.replace(fit, hardware=name) for fit, name in zip(fits, REAL_NAMES, strict=True)]
    pooled = fit_pooled(renamed, load_hardware_table(env={}))
    assert pooled.missing == [] and list(pooled.covariates) == list(REAL_NAMES)
    t4 = load_hardware_table(env={}).lookup("Tesla T4")
    assert t4 is not None and pooled.covariates["Tesla T4"] == t4.covariates()
    assert set(pooled.loho) == set(COVARIATE_FORMS) and "loho_mape" in pooled.metrics()
    assert "no hardware covariates" not in pooled.report()
    # a name no table knows is still named, with the way to add it
    unknown = [dataclasses.replace(renamed[0], hardware="Lab GPU 9"), *renamed[1:]]
    report = fit_pooled(unknown, load_hardware_table(env={})).report()
    assert "no hardware covariates: the hardware table lacks Lab GPU 9" in report
    assert "ROOFLINE_HARDWARE_TABLE" in report


def test_one_row_gets_one_energy_in_predict_recommend_and_pareto_mode(pooled: PooledFit) -> None:
    assert pooled.law is not None
    law = FittedLaw.from_json(pooled.law.to_json())
    for hw in FLEET:
        jobs = JOBS.assign(hardware=hw.name)
        chosen = recommend_frame(law, jobs, max_devices=4)
        front = pareto_frame(law, jobs, max_devices=4)
        assert len(front) >= len(jobs)
        asked = pd.concat(
            [
                jobs.assign(strategy=chosen["strategy"], num_devices=chosen["num_devices"]),
                jobs.iloc[front["row"]].assign(
                    strategy=front["strategy"].to_numpy(), num_devices=front["num_devices"].to_numpy()
                ),
            ],
            ignore_index=True,
        )
        predicted = predict_frame(law, asked)
        answered = pd.concat([chosen, front], ignore_index=True)
        for column in ("energy_j", "energy_j_lower", "energy_j_upper", "time_s"):
            np.testing.assert_allclose(predicted[column], answered[column], rtol=1e-12, err_msg=f"{hw.name} {column}")


NAMES_AS_DATA = ("cpu:Intel Xeon [8 cores], v1.2", 'gpu]:[T.x "q" \\ y', "cpu: AMD. EPYC, 2:3")
"""Hardware names holding everything a term parser could misread: ``:`` ``[`` ``]`` ``.`` ``,`` spaces, quotes."""


def test_hardware_names_are_data_whatever_characters_they_hold(fits: list[HardwareFit]) -> None:
    table = load_hardware_table(None, env={})  # neither naming is in the table: the same forms are tried
    plain = fit_pooled(fits, table)
    renamed = dict(zip((fit.hardware for fit in fits), NAMES_AS_DATA))  # the same runs, other names
    odd = fit_pooled([dataclasses.replace(fit, hardware=renamed[fit.hardware]) for fit in fits], table)
    assert odd.chosen == plain.chosen and set(odd.forms) == set(plain.forms)
    for name, form in odd.forms.items():
        np.testing.assert_allclose(form.law.coef, plain.forms[name].law.coef, rtol=1e-9)
    assert odd.law is not None and plain.law is not None
    law = FittedLaw.from_json(odd.law.to_json())
    assert set(law.known_hardware) == set(NAMES_AS_DATA)
    for old, new in renamed.items():
        expected = predict_frame(plain.law, JOBS.assign(hardware=old))
        got = predict_frame(law, JOBS.assign(hardware=new))
        pd.testing.assert_frame_equal(got.drop(columns="time_scaled_from"), expected.drop(columns="time_scaled_from"))


def test_an_unmeasured_gpu_gets_the_reference_s_n_only_speedup_law(
    pooled: PooledFit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comm-time constants of one GPU do not carry over to another (fit/speedup_fit): a GPU no
    run measured is served with the N-only law fitted beside the reference's workload-aware one."""
    assert pooled.law is not None
    own = pooled.law.hardware_laws[pooled.law.known_hardware[0]]
    aware = [s for s, law in own.speedup_laws.items() if law.workload_aware]
    assert aware, "the roofline fleet's comm term grows with the weights: some strategy is workload-aware"
    reference = next(hw for hw in FLEET if hw.name == pooled.law.known_hardware[0])
    other = dataclasses.replace(reference, name="Sim Other", peak_flops=2 * reference.peak_flops)
    for name, value in fleet_table_env(str(write_fleet_table(tmp_path / "t.csv", (*FLEET, other)))).items():
        monkeypatch.setenv(name, value)
    jobs = JOBS.assign(strategy=aware[0], num_devices=2, hardware=other.name)
    served = predict_frame(pooled.law, jobs)
    assert served["extrapolated_hardware"].all()
    expected = own.n_only_speedup_laws[aware[0]](np.full(len(jobs), 2.0))
    np.testing.assert_allclose(served["speedup"].to_numpy(), expected)
    on_reference = predict_frame(pooled.law, jobs.assign(hardware=reference.name))
    assert not np.allclose(on_reference["speedup"].to_numpy(), on_reference["speedup"].to_numpy()[0])


def test_every_pooled_answer_is_finite_strict_json(pooled: PooledFit) -> None:
    """The edge jobs on a measured GPU in every mode, and on a GPU only the table knows in predict mode:
    the scoring server's JSON of each answer parses strictly and every number is finite, or the row is a 400."""
    assert pooled.law is not None
    law = FittedLaw.from_json(pooled.law.to_json())
    carbon = resolve_carbon(**MOST_CARBON, region=None, env={})
    refused = []
    for job, row in EDGE_JOBS.items():
        for mode, params in [*MODES.items(), ("predict-L4", {})]:
            frame = pd.DataFrame([{**row, "hardware": "NVIDIA L4" if mode.endswith("L4") else "Sim Base"}])
            try:
                if params.get("mode") == "recommend":
                    answer = recommend_frame(law, frame, 1024, params["objective"], carbon)
                elif params.get("mode") == "pareto":
                    answer = pareto_frame(law, frame, 1024, carbon)
                else:
                    answer = predict_frame(law, frame, carbon)
            except InputError as error:
                refused.append((job, mode))
                assert strict_loads(error.serialize_as_json())["message"].startswith("model_input (row 0)")
                continue
            body = io.StringIO()
            predictions_to_json(answer, body)
            assert_finite(strict_loads(body.getvalue()))
    assert set(refused) <= {("fast_speedup", m) for m in ("predict", "predict-L4")} | {
        ("slow_speedup", m) for m in ("predict", "predict-L4")
    }, refused


def test_covariate_forms_that_tie_answer_a_gpu_no_run_measured_by_their_average(
    pooled: PooledFit, fits: list[HardwareFit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one standard error of the smallest leave-one-GPU-out error, picking one covariate form picks among
    the left-out GPUs' noise: the law averages their log energies (issue 35: on the fleet benchmarks the
    average's error on a GPU left out was at or below the one picked on all but the one-model-size table).
    The laws' own answers are compared: the board-power limit (serve/power_limit.py) is switched off."""
    monkeypatch.setattr("mlflow_roofline.serve.predict.board_power_w", lambda *_: float("nan"))
    sane = [name for name in COVARIATE_FORMS if name in pooled.loho and name not in pooled.insane]
    assert len(sane) >= 2, pooled.loho
    first, second = sane[:2]
    tied = dataclasses.replace(pooled, loho={first: (10.0, 2.0), second: (11.0, 2.0)})
    assert tied.covariate_form == first and tied.covariate_members == [first, second]
    law = pooled_law(tied, fits)
    assert law.covariate_form == AVERAGED and isinstance(law.covariate_law, AveragedLaw)
    assert law.loho_mape == 11.0  # the interval is widened by the larger member's error
    rows = JOBS.assign(hardware="NVIDIA H100 80GB HBM3")  # in the shipped table, measured by no run here
    answers = {
        name: predict_frame(pooled_law(dataclasses.replace(pooled, loho={name: (10.0, 2.0)}), fits), rows)
        for name in (first, second)
    }
    averaged = predict_frame(FittedLaw.from_json(law.to_json()), rows)
    assert averaged["extrapolated_hardware"].all()
    expected = np.sqrt(answers[first]["energy_j"].to_numpy() * answers[second]["energy_j"].to_numpy())
    np.testing.assert_allclose(averaged["energy_j"].to_numpy(), expected, rtol=1e-9)
    leads = dataclasses.replace(pooled, loho={first: (10.0, 0.5), second: (11.0, 0.5)})
    assert leads.covariate_members == [first]
    assert pooled_law(leads, fits).covariate_form == first
