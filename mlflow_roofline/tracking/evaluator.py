"""The ``roofline`` MLflow model evaluator: score a registered law on newly measured runs.

>>> result = mlflow.models.evaluate(
...     "models:/roofline-energy@champion", runs, targets="energy_j",
...     model_type="regressor", evaluators=["roofline"],
... )
>>> result.metrics["drift_refit"]        # 1.0: the champion has drifted, refit it

``runs`` is a frame with the law's job columns (``num_layers`` .. ``num_devices``, as
``predict`` takes them) and the measured ``energy_j`` (joules). Installed as the entry
point ``roofline`` of MLflow's plugin group ``mlflow.model_evaluator`` (setup.cfg), so
MLflow finds it by name. The scores (:mod:`mlflow_roofline.core.drift`, percent) go to the
evaluation run as metrics, the verdict and its reason as tags, and a residual plot
(relative error against the measured energy, the interval's band) as an artifact.

``evaluator_config`` may set the thresholds: ``max_mape``, ``max_abs_bias``,
``min_coverage`` (percent, :class:`~mlflow_roofline.core.drift.DriftThresholds`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models.evaluation import EvaluationResult, ModelEvaluator
from mlflow.models.evaluation.artifacts import ImageEvaluationArtifact
from mlflow.tracking.artifact_utils import get_artifact_uri

from mlflow_roofline.core.drift import DriftScore, DriftThresholds, score_drift
from mlflow_roofline.core.errors import ConfigError, RooflineError, one_line
from mlflow_roofline.core.schema import (
    DRIFT_RESIDUALS_ARTIFACT,
    LAW_INPUT_NAMES,
    M_ENERGY_J,
    TAG_DRIFT_REASON,
    TAG_DRIFT_VERDICT,
)
from mlflow_roofline.tracking.client import TrackingClient

MODEL_TYPES = (None, "regressor")
"""The ``model_type`` values the evaluator answers (MLflow asks ``regressor`` for a target column)."""

THRESHOLD_KEYS = ("max_mape", "max_abs_bias", "min_coverage")

OUTPUT_NUMBERS = (M_ENERGY_J, "energy_j_lower", "energy_j_upper")
"""The law's output columns the scores read (joules)."""

EXPECTED_DATA = (
    f"expected one row per measured run: the law's job columns ({', '.join(LAW_INPUT_NAMES)}) "
    "and the measured energy in joules as the targets column"
)


class RooflineEvaluator(ModelEvaluator):
    """MLflow's ``ModelEvaluator`` for a served roofline law (MLflow builds it with no arguments)."""

    name = "roofline"

    @classmethod
    def can_evaluate(cls, *, model_type: str | None, evaluator_config: dict[str, Any], **kwargs: Any) -> bool:
        """True for a regressor (or no model type): the law predicts a number, energy_j."""
        return model_type in MODEL_TYPES

    def evaluate(
        self,
        *,
        model_type: str | None,
        dataset: Any,
        run_id: str,
        evaluator_config: dict[str, Any],
        model: Any = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Predict the runs with ``model``, score against the measured ``energy_j``, log it all to ``run_id``.

        Raises:
            MlflowException: one line, ``roofline evaluator: <field>: <rule>``: no model given, an
                unknown or non-numeric threshold, no rows, a measured energy that is not a number or
                no measurement (outside the physical bound), runs the model refuses, or a model whose
                output has no 95 % interval (not a roofline law).
        """
        if model is None:
            raise MlflowException("the roofline evaluator needs the law itself (a models:/ URI), not predictions")
        try:
            thresholds = drift_thresholds(evaluator_config)
            features = _features(dataset)
            measured = _measured(dataset)
            predicted = _predicted(model, features)
            energy, lower, upper = (_output_numbers(predicted, name) for name in OUTPUT_NUMBERS)
            score = score_drift(
                measured,
                energy,
                lower,
                upper,
                predicted["extrapolated"].to_numpy(dtype=bool),
                thresholds,
                num_devices=_devices(features),
                field=str(dataset.targets_name),
            )
        except RooflineError as error:
            raise MlflowException(f"roofline evaluator: {error}") from None
        client = TrackingClient()
        client.log(
            run_id, metrics=score.metrics(), tags={TAG_DRIFT_VERDICT: score.verdict, TAG_DRIFT_REASON: score.reason}
        )
        client.log_figure(run_id, residual_figure(measured, predicted, score), DRIFT_RESIDUALS_ARTIFACT)
        artifact = ImageEvaluationArtifact(uri=get_artifact_uri(run_id, DRIFT_RESIDUALS_ARTIFACT))
        return EvaluationResult(metrics=score.metrics(), artifacts={"drift_residuals": artifact}, run_id=run_id)


def drift_thresholds(config: dict[str, Any]) -> DriftThresholds:
    """The thresholds ``evaluator_config`` sets (percent numbers; the defaults for the rest).

    Raises:
        ConfigError: an unknown key, or a value that is not a percentage (a string, a boolean), by name.
    """
    unknown = sorted(set(config) - set(THRESHOLD_KEYS))
    if unknown:
        raise ConfigError("evaluator_config", f"unknown keys {unknown}; known: {THRESHOLD_KEYS}")
    return DriftThresholds(**config)


def _features(dataset: Any) -> pd.DataFrame:
    features = pd.DataFrame(dataset.features_data)
    if len(features) == 0:
        raise ConfigError("data", f"has no rows; {EXPECTED_DATA}")
    missing = [name for name in LAW_INPUT_NAMES if name not in features]
    if missing:
        raise ConfigError("data", f"lacks the columns {', '.join(missing)}; {EXPECTED_DATA}")
    return features


def _measured(dataset: Any) -> np.ndarray:
    """The targets column as joules: a number per row, named where one is not."""
    if not dataset.has_targets:
        raise ConfigError("targets", f"missing; {EXPECTED_DATA}")
    name = str(dataset.targets_name)
    labels = pd.Series(np.asarray(dataset.labels_data, dtype=object).ravel())
    numbers = pd.to_numeric(labels, errors="coerce")
    text = labels.map(lambda v: isinstance(v, (str, bytes, bool, np.bool_)))
    broken = np.flatnonzero(text.to_numpy() | (numbers.isna() & labels.notna()).to_numpy())
    if broken.size:
        row = int(broken[0])
        raise ConfigError(name, f"row {row}: must be a measured energy in joules, got {labels.iloc[row]!r}")
    return numbers.to_numpy(dtype=float)


def _predicted(model: Any, features: pd.DataFrame) -> pd.DataFrame:
    """The model's answer to the runs, which must carry the roofline law's energy and interval columns."""
    try:
        predicted = pd.DataFrame(model.predict(features))
    except MlflowException as exc:  # the law's own refusal leads with the field: num_steps (row 3): ...
        raise RooflineError(f"the model refused the runs: {one_line(exc.message)}") from None
    except Exception as exc:  # a pyfunc that is not a roofline law may fail in any way
        raise ConfigError("model", f"failed on the runs ({type(exc).__name__}: {one_line(str(exc))})") from None
    missing = [c for c in (*OUTPUT_NUMBERS, "extrapolated") if c not in predicted]
    if missing:
        raise ConfigError("model", f"its output lacks {missing}: it is not a roofline energy law")
    if len(predicted) != len(features):
        raise ConfigError(
            "model", f"answered {len(predicted)} rows for {len(features)} runs: not a roofline energy law"
        )
    return predicted


def _output_numbers(predicted: pd.DataFrame, name: str) -> np.ndarray:
    values = pd.to_numeric(predicted[name], errors="coerce").to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise ConfigError("model", f"its output {name} is not a finite number of joules on every row")
    return values


def _devices(features: pd.DataFrame) -> np.ndarray:
    """Each run's device count (1 where the frame gives none: the bound per device is then the job's)."""
    if "num_devices" not in features:
        return np.ones(len(features))
    return pd.to_numeric(features["num_devices"], errors="coerce").fillna(1.0).to_numpy(dtype=float)


def residual_figure(measured_j: np.ndarray, predicted: pd.DataFrame, score: DriftScore) -> Any:
    """Relative error of each prediction (percent) against the measured energy (joules, log axis),
    with the 95 % interval as a bar per run; the title gives the verdict."""
    from matplotlib.figure import Figure  # heavy; a Figure needs no pyplot backend

    figure = Figure(figsize=(7, 4))
    axes = figure.subplots()
    centre = 100 * (predicted[M_ENERGY_J].to_numpy() - measured_j) / measured_j
    low = 100 * (predicted["energy_j_lower"].to_numpy() - measured_j) / measured_j
    high = 100 * (predicted["energy_j_upper"].to_numpy() - measured_j) / measured_j
    axes.errorbar(measured_j, centre, yerr=[centre - low, high - centre], fmt="o", ms=3, alpha=0.6, lw=0.8)
    axes.axhline(0.0, color="black", lw=0.8)
    axes.set_xscale("log")
    axes.set_xlabel("measured energy (J)")
    axes.set_ylabel("predicted - measured (% of measured)")
    axes.set_title(
        f"{score.verdict}: MAPE {score.mape:.1f} %, bias {score.bias:+.1f} %, coverage {score.coverage:.0f} %"
    )
    figure.tight_layout()
    return figure
