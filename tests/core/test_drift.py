"""Scoring a law's predictions against measured energies: the scores, the verdict and its reason."""

from __future__ import annotations

import pytest

from mlflow_roofline.core.drift import DriftThresholds, score_drift
from mlflow_roofline.core.errors import ConfigError


def test_scores_of_four_runs_by_hand() -> None:
    # predicted 10 % high, 10 % low, exact, 20 % low; the last misses its interval; one extrapolated.
    score = score_drift(
        measured_j=[100.0, 200.0, 50.0, 10.0],
        predicted_j=[110.0, 180.0, 50.0, 8.0],
        lower_j=[90.0, 150.0, 40.0, 8.5],
        upper_j=[130.0, 220.0, 60.0, 9.5],
        extrapolated=[False, False, True, False],
    )
    assert score.n_rows == 4
    assert score.mape == pytest.approx(10.0)  # (10 + 10 + 0 + 20) / 4
    assert score.median_ape == pytest.approx(10.0)
    assert score.bias == pytest.approx(-5.0)  # median of +10, -10, 0, -20
    assert score.coverage == pytest.approx(75.0) and score.extrapolated_share == pytest.approx(25.0)
    assert score.verdict == "refit" and score.reason == "95 % interval coverage 75.0 % < 80 %"
    assert score.metrics()["drift_refit"] == 1.0


def test_within_every_threshold_is_ok() -> None:
    score = score_drift([100.0, 100.0], [104.0, 97.0], [90.0, 90.0], [110.0, 110.0], [False, False])
    assert (score.verdict, score.reason) == ("ok", "within the thresholds on 2 runs")
    assert score.metrics()["drift_refit"] == 0.0


def test_each_threshold_alone_can_say_refit() -> None:
    args = ([100.0] * 3, [88.0] * 3, [80.0] * 3, [120.0] * 3, [False] * 3)  # 12 % low, inside the interval
    assert score_drift(*args).reason == "bias -12.0 % beyond ± 10 %"
    assert score_drift(*args, DriftThresholds(max_abs_bias=20, max_mape=11)).reason == "MAPE 12.0 % > 11 %"
    assert score_drift(*args, DriftThresholds(max_abs_bias=20)).verdict == "ok"


@pytest.mark.parametrize(
    ("measured", "match"),
    [([], "no measured runs"), ([100.0, 0.0], "positive number of joules"), ([100.0, 1.0, 2.0], "different lengths")],
)
def test_bad_measurements_are_refused(measured: list[float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        score_drift(
            measured,
            [1.0] * min(2, len(measured)),
            [1.0] * min(2, len(measured)),
            [1.0] * min(2, len(measured)),
            [False] * min(2, len(measured)),
        )


def test_thresholds_out_of_range_are_named() -> None:
    with pytest.raises(ConfigError, match="min_coverage: must be a percentage"):
        DriftThresholds(min_coverage=0)
    with pytest.raises(ConfigError, match="max_mape: must be a percentage"):
        DriftThresholds(max_mape=-1)
