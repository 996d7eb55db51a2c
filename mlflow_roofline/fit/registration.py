"""Log one hardware's fit into the active MLflow run and register its model.

The fit run (``roofline.run_type=fit``) gets the metrics of :mod:`fit.metrics`, the
params, the report as its note, the files of :mod:`fit.artifacts` and the chosen law
as a pyfunc model; that model is registered under ``model_name``, tagged with the fit
run and its ``cv_mape``, described, and given its aliases.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient

from mlflow_roofline.core.schema import (
    TAG_CV_MAPE,
    TAG_ENERGY_SOURCE,
    TAG_FIT_RUN_ID,
    TAG_FORM,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
)
from mlflow_roofline.fit.artifacts import write_artifacts
from mlflow_roofline.fit.hardware import HardwareFit
from mlflow_roofline.fit.run_data import RunData


def _log_run_contents(fit: HardwareFit, run_data: RunData, params: dict[str, str]) -> None:
    """Tags, params, metrics and files of the active fit run."""
    mlflow.set_tags(
        {
            TAG_RUN_TYPE: "fit",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
            "mlflow.note.content": "```\n" + run_data.summary() + "\n" + fit.report() + "\n```",
        }
    )
    mlflow.log_params({**params, "hardware": fit.hardware, "form": fit.energy.chosen,
                       "formula": fit.energy.forms[fit.energy.chosen].formula})
    mlflow.log_metrics(
        {**{k: float(v) for k, v in fit.metrics().items()},
         "n_runs_found": float(run_data.n_found), "n_runs_dropped_pull": float(sum(run_data.dropped.values()))}
    )
    with tempfile.TemporaryDirectory() as tmp:
        write_artifacts(fit, Path(tmp), run_data)
        mlflow.log_artifacts(tmp)


def register_law_model(fit: HardwareFit, model_uri: str, model_name: str, aliases: Sequence[str]) -> None:
    """Register ``model_uri`` under ``model_name`` with the fit's tags, a description and ``aliases``."""
    client = MlflowClient()
    version = mlflow.register_model(
        model_uri,
        model_name,
        tags={
            TAG_FIT_RUN_ID: fit.run_id,
            TAG_CV_MAPE: f"{fit.law.cv_mape:.4g}",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        },
    )
    fit.model_version = str(version.version)
    client.update_model_version(
        model_name,
        version.version,
        description=(
            f"Energy law '{fit.energy.chosen}' for {fit.hardware} ({fit.energy_source} energy), "
            f"{fit.law.n_runs} runs, grouped-CV MAPE {fit.law.cv_mape:.2f}%. Fit run {fit.run_id}."
        ),
    )
    for alias in aliases:
        client.set_registered_model_alias(model_name, alias, version.version)
    fit.aliases = list(aliases)


def log_fit_run(
    fit: HardwareFit,
    run_data: RunData,
    params: dict[str, str],
    model_name: str,
    aliases: Sequence[str],
    register: bool,
) -> Any:
    """Log metrics, params, tags, artifacts and the model into the active run; register it if asked."""
    from mlflow_roofline.serve.pyfunc_model import log_law_model

    run = mlflow.active_run()
    assert run is not None
    fit.run_id = run.info.run_id
    _log_run_contents(fit, run_data, params)
    info = log_law_model(fit.law, name="model")
    if register:
        register_law_model(fit, info.model_uri, model_name, aliases)
    return info
