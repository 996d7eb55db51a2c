"""Speedup-law fits: known laws are recovered, S(1) = 1, and one device count is handled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.fit.runs.measured_speedup import measure_speedup
from mlflow_roofline.fit.speedup_fit import BOUNDS, fit_speedup_law, fit_speedup_laws
from mlflow_roofline.law.speedup import AMDAHL, SATURATING_EXP, amdahl, saturating_exp
from mlflow_roofline.testing.synthetic import generate_synthetic_runs


def _noisy(values: np.ndarray, sd: float, seed: int) -> np.ndarray:
    return values * np.exp(np.random.default_rng(seed).normal(0.0, sd, size=len(values)))


def test_amdahl_recovered_from_noisy_points() -> None:
    n = np.repeat([2, 4, 8], 15).astype(float)
    s = _noisy(amdahl(n, 0.9, 0.01), 0.02, seed=1)
    fit = fit_speedup_law("ddp", n, s)
    assert fit.law.form == AMDAHL and not fit.underdetermined
    # Tolerance: 2 % noise on 45 points pins p to +-0.03 and c to +-0.01.
    assert fit.law.params["p"] == pytest.approx(0.9, abs=0.03)
    assert fit.law.params["c"] == pytest.approx(0.01, abs=0.01)
    assert fit.law.rmse < 0.1
    assert float(fit.law(1)) == pytest.approx(1.0)


def test_saturating_exp_recovered_from_noisy_points() -> None:
    n = np.repeat([2, 3, 4, 6, 8], 10).astype(float)
    s = _noisy(saturating_exp(n, 3.0, 0.4), 0.02, seed=2)
    fit = fit_speedup_law("tp", n, s)
    assert fit.law.form == SATURATING_EXP
    assert fit.law.params["s_max"] == pytest.approx(3.0, rel=0.05)
    assert fit.law.params["k"] == pytest.approx(0.4, rel=0.15)
    assert float(fit.law(1)) == pytest.approx(1.0)


def test_slowdown_is_fitted_within_bounds() -> None:
    """CPU gloo runs often slow down: S < 1 must fit with bounded, valid parameters."""
    n = np.array([2, 2, 4, 4], dtype=float)
    s = np.array([0.7, 0.72, 0.5, 0.52])
    for strategy in ("ddp", "tp"):
        fit = fit_speedup_law(strategy, n, s)
        for name, value in fit.law.params.items():
            lo, hi = BOUNDS[fit.law.form][name]
            assert lo <= value <= hi
        assert np.all(fit.law(np.array([2.0, 4.0])) < 1.0)
        assert fit.law.rmse < 0.05


@pytest.mark.parametrize("s2", [1.6, 0.8])
def test_single_device_count_fixes_one_parameter_and_reproduces_it(s2: float) -> None:
    n = np.array([2.0, 2.0, 2.0])
    s = np.array([s2 * 0.99, s2, s2 * 1.01])
    amdahl_fit = fit_speedup_law("fsdp", n, s)
    assert amdahl_fit.underdetermined and amdahl_fit.device_counts == (2,)
    assert amdahl_fit.fixed == ({"c": 0.0} if s2 >= 1 else {"p": 0.0})
    assert float(amdahl_fit.law(2)) == pytest.approx(s2, rel=0.01)
    assert "was fixed" in amdahl_fit.describe()
    tp_fit = fit_speedup_law("tp", n, s)
    assert tp_fit.fixed == {"k": 1.0}
    assert float(tp_fit.law(2)) == pytest.approx(s2, rel=0.01)


def test_no_parallel_point_is_an_error() -> None:
    with pytest.raises(ValueError, match="num_devices > 1"):
        fit_speedup_law("ddp", np.array([1.0]), np.array([1.0]))


def test_laws_fitted_from_measured_runs_match_the_truth() -> None:
    """End to end from run times: the per-strategy fits land near the true laws at N = 2 and 4."""
    truth, frame = generate_synthetic_runs(40, seed=5)
    measured = measure_speedup(frame.drop(columns=["speedup", "eta"]))
    fits = fit_speedup_laws(measured)
    assert set(fits) == {"single", "ddp", "fsdp", "tp"}
    for strategy in ("ddp", "fsdp", "tp"):
        true_s = truth.speedup_laws[strategy](np.array([2.0, 4.0]))
        # Per-workload jitter (sd 0.15 on log(S - 1)) and 2 % time noise: within 10 %.
        np.testing.assert_allclose(fits[strategy].law(np.array([2.0, 4.0])), true_s, rtol=0.10)


def test_runs_without_baseline_are_not_used_for_the_law() -> None:
    frame = pd.DataFrame(
        {
            "strategy": ["single", "ddp", "ddp"],
            "num_devices": [1, 2, 2],
            "speedup": [1.0, 1.8, np.nan],
            "eta_source": ["single", "measured", "none"],
        }
    )
    fits = fit_speedup_laws(frame)
    assert fits["ddp"].law.n_points == 1
