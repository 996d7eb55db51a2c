"""Has a registered law drifted? Its predicted energy scored against newly measured runs.

A law fitted on last quarter's runs can stop describing this quarter's: a new driver, a new
cluster, a new kernel library. :func:`score_drift` compares the law's predictions with the
energy the new runs measured and gives a verdict: ``refit`` when the error, the bias or the
share of measurements outside the 95 % interval crosses a threshold, else ``ok``. The
``roofline`` model evaluator logs the scores; ``fit --if-drifted`` refits only on ``refit``.

Units: energies in joules; every score in percent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import (
    M_DRIFT_BIAS,
    M_DRIFT_COVERAGE,
    M_DRIFT_EXTRAPOLATED,
    M_DRIFT_MAPE,
    M_DRIFT_MEDIAN_APE,
    M_DRIFT_N_ROWS,
    M_DRIFT_REFIT,
    M_ENERGY_J,
)

VERDICT_OK = "ok"
VERDICT_REFIT = "refit"


@dataclasses.dataclass(frozen=True)
class DriftThresholds:
    """Where a score says ``refit`` (all in percent).

    Attributes:
        max_mape: mean absolute percentage error above which the law is off.
        max_abs_bias: |median signed error| above which the law is off in one direction.
        min_coverage: share of measurements inside the 95 % interval below which the
            interval no longer holds (95 expected; 80 leaves room for a small sample).
    """

    max_mape: float = 15.0
    max_abs_bias: float = 10.0
    min_coverage: float = 80.0

    def __post_init__(self) -> None:
        for name in ("max_mape", "max_abs_bias", "min_coverage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100:
                raise ConfigError(name, f"must be a percentage in (0, 100], got {value!r}")


@dataclasses.dataclass(frozen=True)
class DriftScore:
    """The scores of a law on ``n_rows`` measured runs (percent) and the verdict with its reason."""

    n_rows: int
    mape: float
    median_ape: float
    bias: float
    coverage: float
    extrapolated_share: float
    verdict: str
    reason: str

    def metrics(self) -> dict[str, float]:
        """The scores under their logged names (core/schema.py)."""
        return {
            M_DRIFT_N_ROWS: float(self.n_rows),
            M_DRIFT_MAPE: self.mape,
            M_DRIFT_MEDIAN_APE: self.median_ape,
            M_DRIFT_BIAS: self.bias,
            M_DRIFT_COVERAGE: self.coverage,
            M_DRIFT_EXTRAPOLATED: self.extrapolated_share,
            M_DRIFT_REFIT: 1.0 if self.verdict == VERDICT_REFIT else 0.0,
        }


def score_drift(
    measured_j: Sequence[float] | np.ndarray,
    predicted_j: Sequence[float] | np.ndarray,
    lower_j: Sequence[float] | np.ndarray,
    upper_j: Sequence[float] | np.ndarray,
    extrapolated: Sequence[bool] | np.ndarray,
    thresholds: DriftThresholds | None = None,
) -> DriftScore:
    """Score predictions (joules, with their 95 % interval) against measured energies (joules).

    Raises:
        ConfigError: ``energy_j`` for no rows, rows of different lengths, or a measured
            energy that is not a positive finite number.
    """
    limits = thresholds or DriftThresholds()
    measured = np.asarray(measured_j, dtype=float)
    predicted, lower, upper = (np.asarray(a, dtype=float) for a in (predicted_j, lower_j, upper_j))
    outside = np.asarray(extrapolated, dtype=bool)
    if measured.size == 0:
        raise ConfigError(M_ENERGY_J, "no measured runs to score the law on")
    if not (measured.shape == predicted.shape == lower.shape == upper.shape == outside.shape):
        raise ConfigError(M_ENERGY_J, "the measured energies and the predictions have different lengths")
    if not np.all(np.isfinite(measured) & (measured > 0)):
        raise ConfigError(M_ENERGY_J, "every measured energy must be a positive number of joules")
    relative = (predicted - measured) / measured
    score = {
        "mape": 100 * float(np.mean(np.abs(relative))),
        "median_ape": 100 * float(np.median(np.abs(relative))),
        "bias": 100 * float(np.median(relative)),
        "coverage": 100 * float(np.mean((lower <= measured) & (measured <= upper))),
        "extrapolated_share": 100 * float(np.mean(outside)),
    }
    crossed = [
        f"{label} {score[key]:.1f} % {sign} {limit:g} %"
        for key, label, sign, limit, over in (
            ("mape", "MAPE", ">", limits.max_mape, score["mape"] > limits.max_mape),
            ("bias", "bias", "beyond ±", limits.max_abs_bias, abs(score["bias"]) > limits.max_abs_bias),
            ("coverage", "95 % interval coverage", "<", limits.min_coverage, score["coverage"] < limits.min_coverage),
        )
        if over
    ]
    verdict = VERDICT_REFIT if crossed else VERDICT_OK
    reason = "; ".join(crossed) if crossed else f"within the thresholds on {measured.size} runs"
    return DriftScore(n_rows=int(measured.size), verdict=verdict, reason=reason, **score)
