"""The energy and time laws on runs drawn from a known law (no MLflow here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.forms.additive import fit_additive_roofline
from mlflow_roofline.fit.forms.averaging import AVERAGED
from mlflow_roofline.fit.forms.catalog import (
    BASELINE,
    ETA_BY_STRATEGY,
    HARDWARE_SLOPES,
    PAPER,
    PAPER_LOG_N,
    PER_STEP,
    PER_WORK,
    PER_WORK_TERM,
    formula_of,
)
from mlflow_roofline.fit.forms.cv import cv_mape, workload_folds
from mlflow_roofline.fit.forms.diagnostics import compare_hardware_slopes
from mlflow_roofline.fit.forms.energy_laws import fit_energy_laws
from mlflow_roofline.fit.forms.ols import fit_ols
from mlflow_roofline.fit.forms.selection import choose_form
from mlflow_roofline.fit.forms.time_law import fit_time_law
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.fit.runs.measured_speedup import measure_speedup
from mlflow_roofline.testing.synthetic import GroundTruth, generate_synthetic_runs


def _data(n_workloads: int = 25, seed: int = 0, **kwargs) -> tuple[GroundTruth, pd.DataFrame]:
    truth, frame = generate_synthetic_runs(n_workloads, seed=seed, **kwargs)
    measured = measure_speedup(frame.drop(columns=["speedup", "eta"]))
    return truth, feature_frame(measured)


@pytest.mark.parametrize(
    "truth",
    [
        GroundTruth(),
        GroundTruth(
            log_kappa=-12.0,
            alpha_c=0.5,
            alpha_m=0.4,
            alpha_eta=-0.6,
            psi={"single": 0.0, "ddp": -0.1, "fsdp": 0.3, "tp": 0.0},
        ),
    ],
    ids=["default", "other-exponents"],
)
def test_paper_law_recovers_known_exponents(truth: GroundTruth) -> None:
    _, data = _data(seed=11, truth=truth)
    fits = fit_energy_laws(data)
    paper = fits.forms[PAPER].law
    # Tolerances (5 % energy noise, 25 workloads, ~170 runs; HC3 SEs ~0.01 for alpha_c and
    # alpha_m, ~0.03 for alpha_eta): +-0.05, +-0.05, +-0.15 and +-0.1 for the dummies.
    assert paper.coefficient("log_C") == pytest.approx(truth.alpha_c, abs=0.05)
    assert paper.coefficient("log_M") == pytest.approx(truth.alpha_m, abs=0.05)
    assert paper.coefficient("log_eta") == pytest.approx(truth.alpha_eta, abs=0.15)
    for strategy in ("ddp", "fsdp", "tp"):
        assert paper.coefficient(f"strategy[T.{strategy}]") == pytest.approx(truth.psi[strategy], abs=0.1)
    assert fits.forms[PAPER].adj_r2 > fits.forms[BASELINE].adj_r2
    assert fits.forms[PAPER].rmse_log < fits.forms[BASELINE].rmse_log
    assert fits.forms[PAPER].cv_mape < fits.forms[BASELINE].cv_mape
    # The 1-SE rule picks the simplest form the truth fits: the per-work form when
    # alpha_c + alpha_m = 1 (energy proportional to steps), else the paper's form; the registered law holds it.
    per_work = truth.alpha_c + truth.alpha_m == pytest.approx(1.0)
    simplest = PER_WORK if per_work else PAPER
    assert choose_form({name: fit for name, fit in fits.forms.items() if name != AVERAGED}) == simplest
    assert simplest in fits.registered_forms  # alone, or averaged with the forms that tie with it


def test_hc3_covariance_and_names_reach_the_linear_law() -> None:
    _, data = _data(seed=1)
    fit = fit_ols(PAPER, formula_of(PAPER, data), data)
    assert fit.result.cov_type == "HC3"
    assert fit.law.terms == list(fit.result.model.exog_names)
    assert "strategy[T.fsdp]" in fit.law.terms and "Intercept" in fit.law.terms
    np.testing.assert_allclose(np.asarray(fit.law.cov), np.asarray(fit.result.cov_params()))
    mean, lower, upper = fit.law.predict({c: data[c].to_numpy() for c in data.columns})
    np.testing.assert_allclose(mean, np.asarray(fit.result.fittedvalues), rtol=1e-10)
    assert np.all(lower < mean) and np.all(mean < upper)
    # 95 % prediction intervals cover roughly 95 % of the fitted runs.
    covered = np.mean((data["log_E"].to_numpy() >= lower) & (data["log_E"].to_numpy() <= upper))
    assert 0.9 <= covered <= 0.99


def test_a_richer_form_wins_when_the_truth_needs_it() -> None:
    """Energy that grows with log N beyond eta: paper_log_n must beat the paper's form."""
    _truth, frame = generate_synthetic_runs(30, seed=3, device_counts=(2, 4, 8))
    frame = measure_speedup(frame.drop(columns=["speedup", "eta"]))
    frame["energy_j"] = frame["energy_j"] * frame["num_devices"] ** 0.5
    fits = fit_energy_laws(feature_frame(frame))
    assert fits.chosen == PAPER_LOG_N
    assert fits.forms[PAPER_LOG_N].law.coefficient("log_N") == pytest.approx(0.5, abs=0.15)
    assert fits.forms[PAPER_LOG_N].cv_mape < fits.forms[PAPER].cv_mape


def test_eta_by_strategy_has_one_slope_per_parallel_strategy() -> None:
    _, data = _data(seed=2)
    fit = fit_ols(ETA_BY_STRATEGY, formula_of(ETA_BY_STRATEGY, data), data)
    interactions = [t for t in fit.law.terms if t.endswith(":log_eta")]
    assert len(interactions) == 2 and "log_eta" in fit.law.terms  # the third slope is log_eta itself
    assert fit.dropped_terms == ["strategy[T.tp]:log_eta"]


def test_one_strategy_formula_has_no_dummy() -> None:
    _, data = _data(seed=4, strategies=("single", "ddp"))
    frame = data[data["strategy"] == "ddp"].copy()
    frame["strategy"] = pd.Categorical(frame["strategy"].astype(str), categories=["ddp"])
    assert formula_of(PAPER, frame) == "log_E ~ log_C + log_M + log_eta"
    fit = fit_ols(PAPER, formula_of(PAPER, frame), frame)
    assert not any(t.startswith("strategy") for t in fit.law.terms)
    assert fit.law.coefficient("log_eta") == pytest.approx(-1.0, abs=0.3)


def test_only_single_runs_drop_log_eta_with_a_note() -> None:
    _, data = _data(seed=5, strategies=("single",), singles_per_workload=2)
    fits = fit_energy_laws(data)
    assert "log_eta" in fits.forms[PAPER].dropped_terms
    assert any("only strategy 'single'" in n for n in fits.notes)
    assert any("alpha_eta cannot be estimated" in n for n in fits.notes)


def test_too_few_runs_says_how_many_are_needed() -> None:
    _, data = _data(n_workloads=2, seed=6, strategies=("single", "ddp"), device_counts=(2,), singles_per_workload=1)
    with pytest.raises(RooflineError, match=r"needs at least 7 usable train runs, found 4"):
        fit_energy_laws(data)


def test_too_few_workloads_is_an_error() -> None:
    _, data = _data(n_workloads=2, seed=6)
    with pytest.raises(RooflineError, match="at least 3 distinct workloads"):
        fit_energy_laws(data)


def test_grouped_folds_never_split_a_workload() -> None:
    groups = np.repeat(np.arange(12), 5)
    folds = workload_folds(groups, k=5, seed=0)
    assert len(folds) == 5
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(groups)))
    seen = [set(groups[f]) for f in folds]
    for i in range(len(seen)):
        for j in range(i + 1, len(seen)):
            assert not seen[i] & seen[j]


def test_additive_roofline_recovers_known_costs() -> None:
    _, data = _data(seed=7)
    singles = data[data["strategy"] == "single"].copy()
    eps_comp, eps_mem, e0 = 2e-10, 3e-7, 50.0
    energy = eps_comp * np.exp(singles["log_C"]) + eps_mem * np.exp(singles["log_M"]) + e0
    singles["log_E"] = np.log(energy)
    fit = fit_additive_roofline(singles)
    assert fit.scope == "single"
    assert fit.eps_comp == pytest.approx(eps_comp, rel=0.02)
    assert fit.eps_mem == pytest.approx(eps_mem, rel=0.05)
    assert fit.e0 == pytest.approx(e0, rel=0.2)
    assert fit.mape < 0.5


def test_additive_roofline_coefficients_are_never_negative() -> None:
    _, data = _data(seed=8)
    data = data.copy()
    data["log_E"] = 5.0 - 0.2 * data["log_M"]  # energy falling with traffic: no non-negative fit is exact
    fit = fit_additive_roofline(data)
    assert min(fit.eps_comp, fit.eps_mem, fit.e0) >= 0.0


def test_time_law_recovers_the_single_device_exponents() -> None:
    truth, data = _data(seed=9)
    fit = fit_time_law(data)
    # 2 % time noise: exponents within +-0.03.
    assert fit.law.coefficient("log_C") == pytest.approx(truth.beta_c, abs=0.03)
    assert fit.law.coefficient("log_M") == pytest.approx(truth.beta_m, abs=0.03)
    assert fit.cv_mape < 5.0


def test_time_law_needs_single_runs() -> None:
    _, data = _data(seed=10)
    with pytest.raises(RooflineError, match="at least 4 single-device runs"):
        fit_time_law(data[data["strategy"] != "single"])


def test_hardware_specific_slopes_win_when_hardware_differ() -> None:
    _, a = _data(seed=12, hardware="gpu-a")
    _, b = _data(seed=13, hardware="gpu-b", truth=GroundTruth(log_kappa=-10.0, alpha_c=0.4, alpha_m=0.45))
    pooled = pd.concat([a, b], ignore_index=True)
    pooled["strategy"] = pd.Categorical(pooled["strategy"].astype(str), categories=["single", "ddp", "fsdp", "tp"])
    scores = compare_hardware_slopes(pooled)
    assert scores[HARDWARE_SLOPES] < scores["hardware_intercepts"]


def test_a_run_with_leverage_one_falls_back_to_finite_hc1() -> None:
    """A strategy with a single run is fitted exactly by its dummy: HC3 is 0/0 there."""
    _, data = _data(seed=14)
    tp_rows = data.index[data["strategy"] == "tp"]
    data = data.drop(tp_rows[1:])
    fit = fit_ols(PAPER, formula_of(PAPER, data), data)
    assert fit.result.cov_type == "HC1"
    assert np.all(np.isfinite(np.asarray(fit.law.cov)))
    fits = fit_energy_laws(data)
    assert any("leverage 1" in note for note in fits.notes)


def test_per_work_form_is_the_constrained_paper_law_in_log_c_and_log_m() -> None:
    _, data = _data(seed=15)
    fit = fit_ols(PER_WORK, formula_of(PER_WORK, data), data)
    law = fit.law
    assert law.coefficient("log_C") + law.coefficient("log_M") == pytest.approx(1.0, abs=1e-12)
    mean, _, _ = law.predict({c: data[c].to_numpy() for c in data.columns})
    np.testing.assert_allclose(mean, fit.fitted_log, rtol=1e-10)
    b = fit.result.params[PER_WORK_TERM]
    var_b = fit.result.cov_params().loc[PER_WORK_TERM, PER_WORK_TERM]
    cov = np.asarray(law.cov)
    i_c, i_m = law.terms.index("log_C"), law.terms.index("log_M")
    assert law.coefficient("log_C") == pytest.approx(b)
    assert cov[i_c, i_c] == pytest.approx(var_b) and cov[i_m, i_m] == pytest.approx(var_b)
    assert cov[i_c, i_m] == pytest.approx(-var_b)
    # Same residuals as the unconstrained law would have if the truth sums to 1: adj R^2 on log_E.
    paper = fit_ols(PAPER, formula_of(PAPER, data), data)
    assert fit.adj_r2 == pytest.approx(paper.adj_r2, abs=1e-3)


def test_per_step_form_recovers_a_per_step_power_law_and_doubles_with_the_steps() -> None:
    """E = steps * kappa * (C/steps)^a * (M/steps)^b * eta^ae: size exponents free, steps linear."""
    _, data = _data(seed=15)
    a, b, ae, log_kappa = 0.45, 0.2, -0.5, -9.0
    per_step = log_kappa + a * (data["log_C"] - data["log_steps"]) + b * (data["log_M"] - data["log_steps"])
    noise = np.random.default_rng(3).normal(0.0, 0.03, len(data))
    data = data.assign(log_E=data["log_steps"] + per_step + ae * data["log_eta"] + noise)
    fit = fit_ols(PER_STEP, formula_of(PER_STEP, data), data)
    law = fit.law
    assert law.coefficient("log_C") == pytest.approx(a, abs=0.05)
    assert law.coefficient("log_M") == pytest.approx(b, abs=0.05)
    assert law.coefficient("log_steps") == pytest.approx(1.0 - law.coefficient("log_C") - law.coefficient("log_M"))
    features = {c: data[c].to_numpy() for c in data.columns}
    mean, _, _ = law.predict(features)
    np.testing.assert_allclose(mean, fit.fitted_log, rtol=1e-10)  # the stored law is the fitted one
    twice = {**features, **{c: features[c] + np.log(2.0) for c in ("log_C", "log_M", "log_steps", "log_T")}}
    np.testing.assert_allclose(law.predict(twice)[0] - mean, np.log(2.0), atol=1e-12)  # twice the steps, twice the J
    # the covariance follows the map: Var(log_steps coef) = Var(a) + Var(b) + 2 Cov(a, b)
    differences = ["I(log_C - log_steps)", "I(log_M - log_steps)"]
    raw = fit.result.cov_params().loc[differences, differences].to_numpy()
    i = law.terms.index("log_steps")
    assert np.asarray(law.cov)[i, i] == pytest.approx(raw.sum())
    # the paper's unconstrained law fits the same runs no better
    paper = fit_ols(PAPER, formula_of(PAPER, data), data)
    assert fit.adj_r2 >= paper.adj_r2 - 1e-3


def test_cv_mape_is_zero_for_an_exact_law_and_counts_held_out_error() -> None:
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 3, 60), "workload_hash": np.repeat(np.arange(12), 5)})
    data["log_E"] = 1.0 + 0.5 * data["x"]
    folds = workload_folds(data["workload_hash"].to_numpy(), k=4)
    mape, se = cv_mape("log_E ~ x", data, folds)
    assert mape == pytest.approx(0.0, abs=1e-9) and se == pytest.approx(0.0, abs=1e-9)
    # One workload 10 % off: only its held-out predictions miss, by 1/1.1 - 1 = 9.1 %, if the
    # other folds absorb its pull; the overall MAPE stays between 9.1/12 % and 10 %.
    data.loc[data["workload_hash"] == 3, "log_E"] += np.log(1.1)
    mape, _ = cv_mape("log_E ~ x", data, folds)
    assert 9.1 / 12 < mape < 10.0


def test_a_time_law_whose_proxies_barely_move_apart_is_the_per_work_one() -> None:
    """Six of Zeus's P100 epochs (benchmarks/data/public): one model, one epoch each, so C and M
    move together and the free OLS law splits them into exponents of about -46,000 and +39,000
    that fit these six and overflow float64 at 1000 steps. It is not physical (twice the steps
    would not take twice the seconds) and the per-work law is kept."""
    from pathlib import Path

    from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
    from mlflow_roofline.fit.forms.time_law import TIME_PER_WORK, time_law_problem

    table = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public" / "zeus_bert_base.csv"
    rows = pd.read_csv(table)
    rows = rows[rows["hardware"].str.startswith("P100")].head(7)
    shape = [rows[c].to_numpy(dtype=float) for c in ("num_layers", "hidden_size", "seq_len", "batch_size", "num_steps")]
    data = pd.DataFrame(
        {
            "strategy": "single",
            "log_C": np.log(proxy_flops(*shape)),
            "log_M": np.log(proxy_mem_traffic(*shape)),
            "log_t": np.log(rows["time_s"].to_numpy(dtype=float)),
            "workload_hash": (rows["seq_len"].astype(str) + "/" + rows["batch_size"].astype(str)).to_numpy(),
        }
    )
    free = fit_ols("time", "log_t ~ log_C + log_M", data)
    assert time_law_problem(free)  # the OLS split: not physical
    fit = fit_time_law(data)
    assert fit.name == TIME_PER_WORK
    thousand_steps = {"log_C": data["log_C"].to_numpy()[:1] - 2.5, "log_M": data["log_M"].to_numpy()[:1] - 2.5}
    twice = {name: values + np.log(2.0) for name, values in thousand_steps.items()}
    assert np.isfinite(np.exp(fit.law.mean(thousand_steps))).all()
    assert fit.law.mean(twice) - fit.law.mean(thousand_steps) == pytest.approx(np.log(2.0), abs=1e-9)
