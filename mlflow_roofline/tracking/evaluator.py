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
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import (
    DRIFT_RESIDUALS_ARTIFACT,
    M_ENERGY_J,
    TAG_DRIFT_REASON,
    TAG_DRIFT_VERDICT,
)
from mlflow_roofline.tracking.client import TrackingClient

MODEL_TYPES = (None, "regressor")
"""The ``model_type`` values the evaluator answers (MLflow asks ``regressor`` for a target column)."""

THRESHOLD_KEYS = ("max_mape", "max_abs_bias", "min_coverage")


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
            MlflowException: no model given, thresholds out of range, no or bad measured energies,
                or a model whose output has no 95 % interval (not a roofline law).
        """
        if model is None:
            raise MlflowException("the roofline evaluator needs the law itself (a models:/ URI), not predictions")
        unknown = sorted(set(evaluator_config) - set(THRESHOLD_KEYS))
        if unknown:
            raise MlflowException(
                f"roofline evaluator: unknown evaluator_config keys {unknown}; known: {THRESHOLD_KEYS}"
            )
        try:
            thresholds = DriftThresholds(**{k: float(v) for k, v in evaluator_config.items()})
            predicted = pd.DataFrame(model.predict(dataset.features_data))
            missing = [
                c for c in (M_ENERGY_J, "energy_j_lower", "energy_j_upper", "extrapolated") if c not in predicted
            ]
            if missing:
                raise MlflowException(f"the model's output lacks {missing}: it is not a roofline energy law")
            score = score_drift(
                np.asarray(dataset.labels_data, dtype=float),
                predicted[M_ENERGY_J].to_numpy(),
                predicted["energy_j_lower"].to_numpy(),
                predicted["energy_j_upper"].to_numpy(),
                predicted["extrapolated"].to_numpy(dtype=bool),
                thresholds,
            )
        except RooflineError as error:
            raise MlflowException(f"roofline evaluator: {error}") from error
        client = TrackingClient()
        client.log(
            run_id, metrics=score.metrics(), tags={TAG_DRIFT_VERDICT: score.verdict, TAG_DRIFT_REASON: score.reason}
        )
        client.log_figure(
            run_id,
            residual_figure(np.asarray(dataset.labels_data, dtype=float), predicted, score),
            DRIFT_RESIDUALS_ARTIFACT,
        )
        artifact = ImageEvaluationArtifact(uri=get_artifact_uri(run_id, DRIFT_RESIDUALS_ARTIFACT))
        return EvaluationResult(metrics=score.metrics(), artifacts={"drift_residuals": artifact}, run_id=run_id)


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
