"""The fit job's MLflow side: log the fit run(s) and register every model, or undo the registrations.

One hardware: one fit run. Several: a parent fit run with the pooled comparison (and the
pooled law as the model when it wins), one nested fit run per hardware, then every
model registered with its aliases (``alias``, ``alias-<hardware>``). What the job
produced is a :class:`FitOutcome`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import mlflow

from mlflow_roofline.core.schema import (
    M_N_HARDWARE,
    M_N_HARDWARE_SKIPPED,
    M_N_RUNS,
    TAG_FORM,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
)
from mlflow_roofline.fit.hardware import HardwareFit
from mlflow_roofline.fit.pooled import PooledFit
from mlflow_roofline.fit.registration import RegistryLedger, log_fit_run
from mlflow_roofline.fit.run_data import RunData


@dataclasses.dataclass
class FitOutcome:
    """The result of :func:`~mlflow_roofline.fit.job.run_fit`: the pull and one fit per hardware."""

    run_data: RunData
    fits: list[HardwareFit]
    parent_run_id: str | None = None
    hardware_comparison: dict[str, float] = dataclasses.field(default_factory=dict)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    """Hardware that could not be fitted (only when there are several), with the reason."""
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds of each phase: ``pull``, ``fit`` (all laws and CV), ``log`` (run, artifacts, model, registry)."""
    rollback_problems: list[str] = dataclasses.field(default_factory=list)
    """Registrations a failed fit could not undo, in words (empty when all were undone)."""
    pooled: PooledFit | None = None
    """The pooled forms over every hardware (two hardware or more)."""

    @property
    def run_ids(self) -> list[str]:
        """The fit runs this job started (the parent first)."""
        return [r for r in [self.parent_run_id, *(f.run_id for f in self.fits)] if r]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "hardware"


def aliases_of(fits: Sequence[HardwareFit], alias: str, pooled_wins: bool = False) -> list[list[str]]:
    """The aliases of each fit's version: ``alias`` alone, or ``alias-<hardware>`` each and ``alias`` on the
    first (unless the pooled law wins: then ``alias`` is its own)."""
    if len(fits) == 1:
        return [[alias]]
    first = [] if pooled_wins else [alias]
    return [[f"{alias}-{_slug(fit.hardware)}"] + (first if i == 0 else []) for i, fit in enumerate(fits)]


def _register_all(
    ledger: RegistryLedger | None,
    fits: Sequence[HardwareFit],
    infos: Sequence[Any],
    alias: str,
    pooled: tuple[PooledFit, Any] | None = None,
) -> None:
    """Register every fit's model with its aliases, and the pooled law's with ``alias`` (nothing without a ledger)."""
    if ledger is None:
        return
    if pooled is not None:
        ledger.register(pooled[0], pooled[1].model_uri, [alias])  # type: ignore[arg-type]
    for fit, info, aliases in zip(fits, infos, aliases_of(fits, alias, pooled is not None)):
        ledger.register(fit, info.model_uri, aliases)


def _log_parent_and_children(
    outcome: FitOutcome, start: dict[str, Any], params: dict[str, str], ledger: RegistryLedger | None, alias: str
) -> None:
    """Several hardware: a parent fit run with the pooled comparison, one nested fit run each, then registration."""
    fits = outcome.fits
    infos = []
    with mlflow.start_run(**start) as parent:
        outcome.parent_run_id = parent.info.run_id
        mlflow.set_tags({TAG_RUN_TYPE: "fit", TAG_HARDWARE: ",".join(f.hardware for f in fits)})
        mlflow.log_params(params)
        if outcome.skipped:
            mlflow.log_dict(outcome.skipped, "skipped_hardware.json")
        pooled = outcome.pooled
        mlflow.log_metrics(
            {
                M_N_RUNS: float(sum(len(f.frame) for f in fits)),
                M_N_HARDWARE: float(len(fits)),
                M_N_HARDWARE_SKIPPED: float(len(outcome.skipped)),
                **(pooled.metrics() if pooled else {}),
            }
        )
        pooled_info = None
        if pooled is not None:
            mlflow.log_text(pooled.report() + "\n", "pooled_report.txt")
            figure = pooled.extrapolation_figure()
            if figure is not None:
                mlflow.log_figure(figure, "plots/pooled_extrapolation.png")
            if pooled.law is not None:
                from mlflow_roofline.serve.pyfunc_model import log_law_model

                pooled.run_id = parent.info.run_id
                mlflow.set_tag(TAG_FORM, pooled.chosen)
                mlflow.log_text(pooled.law.to_json(), "fitted_law.json")
                pooled_info = (pooled, log_law_model(pooled.law, name="model"))
        for fit in fits:
            run_name = f"fit-{_slug(fit.hardware)}"
            with mlflow.start_run(experiment_id=parent.info.experiment_id, run_name=run_name, nested=True):
                infos.append(log_fit_run(fit, outcome.run_data, params))
        _register_all(ledger, fits, infos, alias, pooled_info)


def log_and_register(
    outcome: FitOutcome, start: dict[str, Any], params: dict[str, str], ledger: RegistryLedger | None, alias: str
) -> None:
    """Log the fit run(s), then register every model inside the outer run.

    A failure undoes the registrations (problems kept in ``outcome.rollback_problems``) and is re-raised.
    """
    fits = outcome.fits
    try:
        if len(fits) == 1 and not outcome.skipped:
            with mlflow.start_run(**start):
                infos = [log_fit_run(fits[0], outcome.run_data, params)]
                _register_all(ledger, fits, infos, alias)
        else:
            if outcome.pooled is not None:
                outcome.hardware_comparison = {name: form.cv_mape for name, form in outcome.pooled.forms.items()}
            _log_parent_and_children(outcome, start, params, ledger, alias)
    except Exception:
        if ledger is not None:
            outcome.rollback_problems = ledger.rollback()
        raise
