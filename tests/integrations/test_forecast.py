"""The forecast's arithmetic and coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlflow_roofline.integrations.forecast import Prior, StepSamples, forecast


def _samples(values: list[float]) -> StepSamples:
    samples = StepSamples()
    for v in values:
        samples.add(1, v, 0.5)
    return samples


def test_data_only_forecast_is_the_t_prediction_interval() -> None:
    values = [10.0, 12.0, 11.0, 9.0]
    fc = forecast(_samples(values), planned_steps=10)
    mean, sd = np.mean(values), np.std(values, ddof=1)
    remaining = 6
    half = 3.182446305284263 * math.sqrt(remaining * sd**2 + remaining**2 * sd**2 / 4)  # t(0.975, 3)
    assert fc.energy_j == pytest.approx(sum(values) + remaining * mean)
    assert fc.upper_j == pytest.approx(fc.energy_j + half)
    assert fc.lower_j == pytest.approx(max(fc.energy_j - half, sum(values)))
    assert fc.time_s == pytest.approx(5.0) and not fc.used_prior
    assert forecast(_samples([3.0]), planned_steps=10) is None  # one sample: no spread yet


def test_the_interval_covers_95_percent_of_uniform_jobs() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(400):
        steps = rng.normal(2.0, 0.3, size=60)
        fc = forecast(_samples(list(steps[:6])), planned_steps=60)
        covered += fc.lower_j <= steps.sum() <= fc.upper_j
    assert 0.92 <= covered / 400 <= 0.99


def test_the_law_prior_is_updated_by_the_measured_steps() -> None:
    measured = _samples([2.0, 2.2, 1.8, 2.1, 1.9])
    data_only = forecast(measured, planned_steps=100)
    sharp_truth = Prior(300.0, 297.0, 303.0)  # 3 J/step, a narrow interval: the law dominates early
    fc = forecast(measured, planned_steps=100, prior=sharp_truth)
    assert fc.used_prior and 2.0 < fc.per_step_j < 3.0 and fc.per_step_j > 2.8
    vague = forecast(measured, planned_steps=100, prior=Prior(300.0, 3.0, 30000.0))
    assert vague.per_step_j == pytest.approx(data_only.per_step_j, rel=0.01)
    many = _samples([2.0, 2.2, 1.8, 2.1, 1.9] * 200)  # 1000 steps: the measurements take over
    later = forecast(many, planned_steps=2000, prior=Prior(6000.0, 5000.0, 7200.0))
    assert later.per_step_j == pytest.approx(2.0, rel=0.02)
