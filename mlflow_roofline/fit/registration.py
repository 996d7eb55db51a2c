"""Log one hardware's fit into the active MLflow run and register its model.

The fit run (``roofline.run_type=fit``) gets the metrics of :mod:`fit.metrics`, the
params, the report as its note, the files of :mod:`fit.artifacts` and the chosen law
as a pyfunc model (:func:`log_fit_run`). Once every fit run of the job is logged, each
model is registered under ``model_name``, tagged with its fit run and ``cv_mape``,
described and given its aliases (:class:`RegistryLedger`), which can undo all of it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from mlflow_roofline.core.schema import (
    FIT_PARAM_FORM,
    FIT_PARAM_FORMULA,
    FIT_PARAM_HARDWARE,
    M_N_RUNS_DROPPED_PULL,
    M_N_RUNS_FOUND,
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
from mlflow_roofline.fit.run_page import log_run_page


def _log_run_contents(fit: HardwareFit, run_data: RunData, params: dict[str, str]) -> None:
    """Tags, params, metrics and files of the active fit run."""
    mlflow.set_tags(
        {
            TAG_RUN_TYPE: "fit",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        }
    )
    mlflow.log_params(
        {
            **params,
            FIT_PARAM_HARDWARE: fit.hardware,
            FIT_PARAM_FORM: fit.energy.chosen,
            FIT_PARAM_FORMULA: fit.energy.forms[fit.energy.chosen].formula,
        }
    )
    mlflow.log_metrics(
        {
            **{k: float(v) for k, v in fit.metrics().items()},
            M_N_RUNS_FOUND: float(run_data.n_found),
            M_N_RUNS_DROPPED_PULL: float(sum(run_data.dropped.values())),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        write_artifacts(fit, Path(tmp), run_data)
        mlflow.log_artifacts(tmp)
    log_run_page(fit, run_data.n_found)  # plots as figures, the measured-vs-predicted table, the description


class RegistryLedger:
    """Registers the fit's models and remembers what it changed, so that a failed fit leaves no trace.

    :meth:`rollback` deletes every version this fit registered, points each alias it
    moved back at its previous version (or removes it), and deletes the registered model
    when this fit created it.
    """

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.client = MlflowClient()
        self.created_model = False
        self.versions: list[str] = []
        self.previous_aliases: dict[str, str | None] = {}

    def _ensure_model(self) -> None:
        if self.created_model or self.versions:
            return
        try:
            self.client.get_registered_model(self.model_name)
        except MlflowException:
            self.client.create_registered_model(self.model_name)
            self.created_model = True

    def _previous_version(self, alias: str) -> str | None:
        try:
            return str(self.client.get_model_version_by_alias(self.model_name, alias).version)
        except MlflowException:
            return None

    def register(self, fit: HardwareFit, model_uri: str, aliases: Sequence[str]) -> None:
        """Register ``model_uri`` with the fit's tags, a description and ``aliases``."""
        self._ensure_model()
        tags = {
            TAG_FIT_RUN_ID: fit.run_id,
            TAG_CV_MAPE: f"{fit.law.cv_mape:.4g}",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        }
        version = mlflow.register_model(model_uri, self.model_name, tags=tags)
        self.versions.append(str(version.version))
        fit.model_version = str(version.version)
        self.client.update_model_version(
            self.model_name,
            version.version,
            description=(
                f"Energy law '{fit.energy.chosen}' for {fit.hardware} ({fit.energy_source} energy), "
                f"{fit.law.n_runs} runs, grouped-CV MAPE {fit.law.cv_mape:.2f}%. Fit run {fit.run_id}."
            ),
        )
        for alias in aliases:
            self.previous_aliases.setdefault(alias, self._previous_version(alias))
            self.client.set_registered_model_alias(self.model_name, alias, version.version)
        fit.aliases = list(aliases)

    def rollback(self) -> list[str]:
        """Undo every registration of this fit; returns what could not be undone, in words."""
        problems: list[str] = []
        steps: list[tuple[str, Callable[[str], None], str]] = [
            (f"alias {a}", self._restore_alias, a) for a in self.previous_aliases
        ]
        steps += [(f"version {v}", self._delete_version, v) for v in self.versions]
        for what, step, arg in steps:
            try:
                step(arg)
            except MlflowException as exc:
                problems.append(f"{self.model_name} {what}: {exc.message}")
        if self.created_model and not problems:
            try:
                self.client.delete_registered_model(self.model_name)
            except MlflowException as exc:
                problems.append(f"{self.model_name}: {exc.message}")
        return problems

    def _restore_alias(self, alias: str) -> None:
        previous = self.previous_aliases[alias]
        if previous is not None and previous not in self.versions:
            self.client.set_registered_model_alias(self.model_name, alias, previous)
        elif self._previous_version(alias) is not None:
            self.client.delete_registered_model_alias(self.model_name, alias)

    def _delete_version(self, version: str) -> None:
        self.client.delete_model_version(self.model_name, version)


def log_fit_run(
    fit: HardwareFit,
    run_data: RunData,
    params: dict[str, str],
) -> Any:
    """Log metrics, params, tags, artifacts and the model into the active run; returns the model's info.

    Registration is left to :class:`RegistryLedger`, once every fit run of the job is logged.
    """
    from mlflow_roofline.serve.pyfunc_model import log_law_model

    run = mlflow.active_run()
    assert run is not None
    fit.run_id = run.info.run_id
    _log_run_contents(fit, run_data, params)
    return log_law_model(fit.law, name="model")
