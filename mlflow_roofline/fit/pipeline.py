"""The ``fit`` job: pull train runs, fit every law per hardware, log a fit run, register the model.

Steps (one pass per ``roofline.hardware``):

1. :func:`fit.runs.run_data.load_train_runs` pulls the FINISHED train runs (dropped runs are
   counted with their reasons);
2. :func:`fit.hardware_fit.fit_hardware` fits speedup laws, efficiency, the energy forms,
   the additive roofline and the time law of each hardware (no MLflow);
3. :func:`fit.fit_runs.log_fit_run` logs a fit run (``roofline.run_type=fit``) with
   the metrics of :mod:`fit.hardware_fit`, summaries, the coefficient table, the law as JSON
   and the plots; the chosen form is logged as the pyfunc model, registered under
   ``model_name``, aliased and tagged with the fit run and its ``cv_mape``. The chosen
   form is the param ``form`` and the tag ``roofline.form``; the fit run also carries
   ``n_runs_found`` and ``n_runs_dropped_pull``.

With several hardware, each gets a nested fit run under one parent, which also fits the
pooled forms over all hardware (:mod:`fit.pooled`: hardware intercepts, hardware
covariates from the hardware table, separate slopes), checks them for size extrapolation
and sanity on every hardware, and logs their grouped-CV,
extrapolation and leave-one-hardware-out errors. The parent logs the fleet model
(:mod:`fit.fleet_fit`: each hardware's law and the pooled law, each measured hardware routed to
the one that predicted its bigger models better, a GPU of the hardware table no run measured
to the pooled law), registered with ``alias``. Every hardware's own law gets ``alias-<hardware>``.
Inside ``mlflow run`` (``MLFLOW_RUN_ID`` set) the project's run is the fit run (or the parent).

The fit runs are logged and the models registered by :mod:`fit.fit_runs`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.schema import FIT_ENERGY_METRICS
from mlflow_roofline.fit.failure import record_failure
from mlflow_roofline.fit.fit_runs import (
    FitLoggingFailed,
    FitOutcome,
    RunStart,
    aliases_of,
    hardware_aliases,
    log_and_register,
)
from mlflow_roofline.fit.fleet_fit import fit_fleet
from mlflow_roofline.fit.forms.cv import CV_FOLDS
from mlflow_roofline.fit.hardware_fit import HardwareFit, fit_hardware
from mlflow_roofline.fit.pooled import fit_pooled
from mlflow_roofline.fit.registration import RegistryLedger, check_alias, check_model_name
from mlflow_roofline.fit.runs.precisions import drop_unsupported_precisions
from mlflow_roofline.fit.runs.run_data import RunData, load_train_runs
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.ui_links import experiment_line

__all__ = ["FitOutcome", "run_fit"]


def _check_arguments(experiments: Sequence[str], model_name: str, alias: str, register: bool) -> None:
    """Refuse, with the field named, arguments the job cannot start with."""
    if not experiments:
        raise ConfigError("experiment", "at least one experiment name is needed")
    if register:
        check_model_name(model_name)
        check_alias(alias)


def _fit_every_hardware(
    run_data: RunData, allow_estimate: bool, missing_baseline: str, seed: int, echo: Callable[[str], object]
) -> tuple[list[HardwareFit], dict[str, str]]:
    """One fit per hardware, most runs first; with several hardware a failing one is skipped with its reason."""
    if run_data.frame.empty:
        raise RooflineError(f"runs: no usable train runs: {run_data.summary()}; fix or rerun those runs")
    fits: list[HardwareFit] = []
    skipped: dict[str, str] = {}
    groups = list(run_data.frame.groupby("hardware", sort=True))
    for hw, rows in groups:
        try:
            fits.append(
                fit_hardware(
                    rows.copy(), str(hw), allow_estimate=allow_estimate, missing_baseline=missing_baseline, seed=seed
                )
            )
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


def _echo_outcome(outcome: FitOutcome, model_name: str, echo: Callable[[str], object]) -> None:
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
    fleet = outcome.fleet
    if fleet is not None:
        echo(fleet.report())
        if fleet.model_version:
            echo(f"fleet model: registered {model_name} version {fleet.model_version} as @{', @'.join(fleet.aliases)}")


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
    echo: Callable[[str], object] = print,
    energy: str = "gpu",
    hardware_table: str | None = None,
    client: TrackingClient | None = None,
) -> FitOutcome:
    """Run the whole fit job (see the module docstring); returns what was fitted and logged.

    ``hardware_table``: a CSV extending the shipped hardware table (default: the file
    named by ``ROOFLINE_HARDWARE_TABLE``, if any). ``client``: the command's tracking client, if it
    has one (else the fit opens the store once its arguments hold, and uses that one client).

    Raises:
        RooflineError: with one line saying what is wrong and what to do; a fit that
            fails after it started a run has that line as ``roofline.error`` on the run.
    """
    env_run = os.environ.get("MLFLOW_RUN_ID")
    try:
        _check_arguments(experiments, model_name, alias, register)
        clock = time.perf_counter()
        if energy not in FIT_ENERGY_METRICS:
            raise ConfigError("energy", f"must be one of {', '.join(FIT_ENERGY_METRICS)}, got {energy!r}")
        client = client or TrackingClient()
        table = load_hardware_table(hardware_table)
        run_data = load_train_runs(client, experiments, hardware, FIT_ENERGY_METRICS[energy])
        run_data = drop_unsupported_precisions(run_data, table)
        timings = {"pull": time.perf_counter() - clock}
        echo(run_data.summary())
        clock = time.perf_counter()
        fits, skipped = _fit_every_hardware(run_data, allow_estimate, missing_baseline, seed, echo)
        pooled = fit_pooled(fits, table, seed) if len(fits) >= 2 else None
        fleet = fit_fleet(fits, pooled) if pooled is not None else None
        ledger = RegistryLedger(client, model_name) if register else None
        if ledger is not None:
            owners = ledger.alias_owners(hardware_aliases(fits, alias))
            for fit_aliases in aliases_of(fits, alias, fleet is not None, owners):
                for name in fit_aliases:
                    check_alias(name)
        timings["fit"] = time.perf_counter() - clock
        clock = time.perf_counter()
        fitted = FitOutcome(run_data=run_data, fits=tuple(fits), skipped=skipped, pooled=pooled, fleet=fleet)
        params = _params(experiments, allow_estimate, missing_baseline, model_name, alias, register, seed, energy)
        start = RunStart(experiment_id=run_data.experiment_ids[0], run_id=env_run, run_name=f"fit-{experiments[0]}")
        logged = log_and_register(client, fitted, start, params, ledger, alias)
        outcome = dataclasses.replace(logged, timings_s={**timings, "log": time.perf_counter() - clock})
    except FitLoggingFailed as exc:
        raise record_failure(client, exc.cause, exc.run_ids, env_run, exc.rollback_problems) from exc.cause
    except Exception as exc:
        raise record_failure(client, exc, [], env_run) from exc
    _echo_outcome(outcome, model_name, echo)
    echo(experiment_line(client.tracking_uri, run_data.experiment_ids[0]))
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
