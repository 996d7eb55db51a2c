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
import numbers
from collections.abc import Sequence

import numpy as np

from mlflow_roofline.core.bounds import ENERGY_BOUND
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
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) <= 100:
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
    num_devices: Sequence[float] | np.ndarray | None = None,
    field: str = M_ENERGY_J,
) -> DriftScore:
    """Score predictions (joules, with their 95 % interval) against measured energies (joules).

    ``num_devices`` (default 1 per row) bounds each measured energy per device by
    :data:`~mlflow_roofline.core.bounds.ENERGY_BOUND`; ``field`` is the measured column's name in messages.

    Raises:
        ConfigError: naming ``field`` for no rows, rows of different lengths, a measured energy
            that is not a positive finite number or lies outside the bound (with its row),
            or a prediction too far from it to score.
    """
    limits = thresholds or DriftThresholds()
    measured = np.asarray(measured_j, dtype=float)
    predicted, lower, upper = (np.asarray(a, dtype=float) for a in (predicted_j, lower_j, upper_j))
    outside = np.asarray(extrapolated, dtype=bool)
    if measured.size == 0:
        raise ConfigError(field, "no measured runs to score the law on")
    if not (measured.shape == predicted.shape == lower.shape == upper.shape == outside.shape):
        raise ConfigError(field, "the measured energies and the predictions have different lengths")
    _check_measured(measured, np.ones_like(measured) if num_devices is None else num_devices, field)
    with np.errstate(over="ignore", invalid="ignore"):
        relative = (predicted - measured) / measured
    if not np.all(np.isfinite(relative)):
        row = int(np.flatnonzero(~np.isfinite(relative))[0])
        raise ConfigError(
            field,
            f"row {row}: the law predicts {predicted[row]:g} J for {measured[row]:g} J measured: no error to score",
        )
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


def _check_measured(measured: np.ndarray, num_devices: Sequence[float] | np.ndarray, field: str) -> None:
    """Every measured energy (joules) a positive number inside :data:`ENERGY_BOUND` per device.

    Raises:
        ConfigError: naming ``field`` and the first row at fault.
    """
    if not np.all(np.isfinite(measured) & (measured > 0)):
        row = int(np.flatnonzero(~(np.isfinite(measured) & (measured > 0)))[0])
        raise ConfigError(
            field, f"every measured energy must be a positive number of joules (row {row}: {measured[row]!r})"
        )
    devices = np.maximum(np.asarray(num_devices, dtype=float), 1.0)
    per_device = measured / devices
    broken = np.flatnonzero(~((per_device >= ENERGY_BOUND.low) & (per_device <= ENERGY_BOUND.high)))
    if broken.size:
        row = int(broken[0])
        raise ConfigError(
            field,
            f"row {row}: {measured[row]:g} J on {devices[row]:g} device(s) is no measured energy: "
            f"the {ENERGY_BOUND.quantity} must lie in {ENERGY_BOUND.interval} ({ENERGY_BOUND.why})",
        )
