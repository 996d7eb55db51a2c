"""The ``fit`` job: pull train runs, fit every law per hardware, log a fit run, register the model.

Steps (one pass per ``roofline.hardware``):

1. :func:`fit.run_data.load_train_runs` pulls the FINISHED train runs (dropped runs are
   counted with their reasons);
2. :func:`fit.hardware.fit_hardware` fits speedup laws, efficiency, the energy forms,
   the additive roofline and the time law of each hardware (no MLflow);
3. :func:`fit.registration.log_fit_run` logs a fit run (``roofline.run_type=fit``) with
   the metrics of :mod:`fit.metrics`, summaries, the coefficient table, the law as JSON
   and the plots; the chosen form is logged as the pyfunc model, registered under
   ``model_name``, aliased and tagged with the fit run and its ``cv_mape``. The chosen
   form is the param ``form`` and the tag ``roofline.form``; the fit run also carries
   ``n_runs_found`` and ``n_runs_dropped_pull``.

With several hardware, each gets a nested fit run under one parent, which also fits the
pooled forms over all hardware (:mod:`fit.pooled`: hardware intercepts, hardware
covariates from the hardware table, separate slopes), checks them for size extrapolation
and sanity on every hardware (:mod:`fit.pooled_checks`), and logs their grouped-CV,
extrapolation and leave-one-hardware-out errors. When a pooled form wins, the pooled law is logged in the
parent and registered as the model with ``alias``; otherwise the hardware with the most
runs gets ``alias``. Every hardware gets ``alias-<hardware>``.
Inside ``mlflow run`` (``MLFLOW_RUN_ID`` set) the project's run is the fit run (or the parent).
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import mlflow
from mlflow import MlflowClient

from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.hardware_table import load_hardware_table
from mlflow_roofline.core.schema import (
    FIT_ENERGY_METRICS,
    M_N_HARDWARE,
    M_N_HARDWARE_SKIPPED,
    M_N_RUNS,
    TAG_FORM,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
)
from mlflow_roofline.fit.cv import CV_FOLDS
from mlflow_roofline.fit.failure import record_failure
from mlflow_roofline.fit.hardware import HardwareFit, fit_hardware
from mlflow_roofline.fit.pooled import PooledFit, fit_pooled
from mlflow_roofline.fit.registration import RegistryLedger, log_fit_run
from mlflow_roofline.fit.registry_names import check_alias, check_model_name
from mlflow_roofline.fit.run_data import RunData, load_train_runs


@dataclasses.dataclass
class FitOutcome:
    """The result of :func:`run_fit`: the pull and one fit per hardware."""

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


def _check_arguments(experiments: Sequence[str], model_name: str, alias: str, register: bool) -> None:
    """Refuse, with the field named, arguments the job cannot start with."""
    if not experiments:
        raise ConfigError("experiment", "at least one experiment name is needed")
    if register:
        check_model_name(model_name)
        check_alias(alias)


def _aliases_of(fits: Sequence[HardwareFit], alias: str, pooled_wins: bool = False) -> list[list[str]]:
    """The aliases of each fit's version: ``alias`` alone, or ``alias-<hardware>`` each and ``alias`` on the
    first (unless the pooled law wins: then ``alias`` is its own)."""
    if len(fits) == 1:
        return [[alias]]
    first = [] if pooled_wins else [alias]
    return [[f"{alias}-{_slug(fit.hardware)}"] + (first if i == 0 else []) for i, fit in enumerate(fits)]


def _fit_every_hardware(
    run_data: RunData, fit_args: dict[str, Any], echo: Callable[[str], Any]
) -> tuple[list[HardwareFit], dict[str, str]]:
    """One fit per hardware, most runs first; with several hardware a failing one is skipped with its reason."""
    if run_data.frame.empty:
        raise RooflineError(f"runs: no usable train runs: {run_data.summary()}; fix or rerun those runs")
    fits: list[HardwareFit] = []
    skipped: dict[str, str] = {}
    groups = list(run_data.frame.groupby("hardware", sort=True))
    for hw, rows in groups:
        try:
            fits.append(fit_hardware(rows.copy(), str(hw), **fit_args))
        except RooflineError as exc:
            if len(groups) == 1:
                raise
            skipped[str(hw)] = str(exc)
            echo(f"hardware {hw!r} skipped: {exc}")
    if not fits:
        raise RooflineError(
            "runs: no hardware could be fitted: " + "; ".join(f"{hw}: {why}" for hw, why in skipped.items())
        )
    fits.sort(key=lambda f: -len(f.frame))
    return fits, skipped


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
    for fit, info, aliases in zip(fits, infos, _aliases_of(fits, alias, pooled is not None)):
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


def _log_and_register(
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


def _echo_outcome(outcome: FitOutcome, model_name: str, echo: Callable[[str], Any]) -> None:
    for fit in outcome.fits:
        echo(fit.report())
        where = (
            f"registered {model_name} version {fit.model_version} as @{', @'.join(fit.aliases)}"
            if fit.model_version
            else "not registered"
        )
        echo(f"fit run {fit.run_id}: {where}")
    if outcome.pooled is not None:
        echo(outcome.pooled.report())
        pooled = outcome.pooled
        if pooled.model_version:
            echo(f"pooled law: registered {model_name} version {pooled.model_version} as @{', @'.join(pooled.aliases)}")


def run_fit(
    experiments: Sequence[str],
    *,
    model_name: str,
    alias: str,
    allow_estimate: bool = False,
    hardware: str | None = None,
    missing_baseline: str = "law",
    register: bool = True,
    seed: int = 0,
    echo: Callable[[str], Any] = print,
    energy: str = "gpu",
    hardware_table: str | None = None,
) -> FitOutcome:
    """Run the whole fit job (see the module docstring); returns what was fitted and logged.

    ``hardware_table``: a CSV extending the shipped hardware table (default: the file
    named by ``ROOFLINE_HARDWARE_TABLE``, if any).

    Raises:
        RooflineError: with one line saying what is wrong and what to do; a fit that
            fails after it started a run has that line as ``roofline.error`` on the run.
    """
    env_run = os.environ.get("MLFLOW_RUN_ID")
    outcome: FitOutcome | None = None
    try:
        _check_arguments(experiments, model_name, alias, register)
        clock = time.perf_counter()
        if energy not in FIT_ENERGY_METRICS:
            raise ConfigError("energy", f"must be one of {', '.join(FIT_ENERGY_METRICS)}, got {energy!r}")
        run_data = load_train_runs(MlflowClient(), experiments, hardware, FIT_ENERGY_METRICS[energy])
        timings = {"pull": time.perf_counter() - clock}
        echo(run_data.summary())
        clock = time.perf_counter()
        fit_args = {"allow_estimate": allow_estimate, "missing_baseline": missing_baseline, "seed": seed}
        fits, skipped = _fit_every_hardware(run_data, fit_args, echo)
        pooled = fit_pooled(fits, load_hardware_table(hardware_table), seed) if len(fits) >= 2 else None
        if register:
            for fit_aliases in _aliases_of(fits, alias, pooled is not None and pooled.law is not None):
                for name in fit_aliases:
                    check_alias(name)
        timings["fit"] = time.perf_counter() - clock
        clock = time.perf_counter()
        outcome = FitOutcome(run_data=run_data, fits=fits, timings_s=timings, skipped=skipped, pooled=pooled)
        params = _params(experiments, allow_estimate, missing_baseline, model_name, alias, register, seed, energy)
        start = {"run_id": env_run} if env_run else {"experiment_id": run_data.experiment_ids[0], "run_name": "fit"}
        _log_and_register(outcome, start, params, RegistryLedger(model_name) if register else None, alias)
        timings["log"] = time.perf_counter() - clock
    except Exception as exc:
        raise record_failure(
            exc, outcome.run_ids if outcome else [], env_run, outcome.rollback_problems if outcome else []
        ) from exc
    _echo_outcome(outcome, model_name, echo)
    return outcome


def _params(
    experiments: Sequence[str],
    allow_estimate: bool,
    missing_baseline: str,
    model_name: str,
    alias: str,
    register: bool,
    seed: int,
    energy: str,
) -> dict[str, str]:
    """The fit run's params."""
    return {
        "experiments": ",".join(experiments),
        "allow_estimate": str(bool(allow_estimate)).lower(),
        "missing_baseline": missing_baseline,
        "energy": energy,
        "model_name": model_name if register else "",
        "alias": alias if register else "",
        "cv_folds": str(CV_FOLDS),
        "seed": str(seed),
    }
