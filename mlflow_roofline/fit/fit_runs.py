"""The fit job's MLflow side: log the fit run(s) and register every model, or undo the registrations.

One hardware: one fit run. Several: a parent fit run with the pooled comparison and the
fleet model (:mod:`fit.fleet_fit`: each hardware's law, the pooled law and each hardware's
route), one nested fit run per hardware, then every model registered with its aliases (the
fleet model ``alias``, each hardware's own law ``alias-<hardware>``). Hardware names
that make one ``alias-<hardware>`` (``GPU A`` and ``GPU-A``) never share it: see
:func:`aliases_of`. What the job produced is a :class:`FitOutcome`.

Each fit run (``roofline.run_type=fit``) gets the metrics of :func:`fit.hardware_fit.fit_metrics`,
the params, the files, figures, table and description of :mod:`fit.report.run_page`, and
the chosen law as a pyfunc model; each parallel train run it used gets the tag
``roofline.baseline`` (how its single-device time was found). Runs are opened and ended through the
:class:`~mlflow_roofline.tracking.client.TrackingClient` with explicit run ids: FINISHED
when their block completes, FAILED when it raises. Registration is left to
:class:`~fit.registration.RegistryLedger`, once every fit run of the job is logged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from mlflow_roofline.core.schema import (
    BASELINE_KINDS,
    FIT_PARAM_FORM,
    FIT_PARAM_FORMULA,
    FIT_PARAM_HARDWARE,
    M_N_HARDWARE,
    M_N_HARDWARE_SKIPPED,
    M_N_RUNS,
    M_N_RUNS_DROPPED_PULL,
    M_N_RUNS_FOUND,
    TAG_BASELINE,
    TAG_ENERGY_SOURCE,
    TAG_FIT_RUN_ID,
    TAG_FLEET_UNMEASURED_REFUSAL,
    TAG_FORM,
    TAG_HARDWARE,
    TAG_LAUNCHER_RUN_ID,
    TAG_RUN_TYPE,
)
from mlflow_roofline.fit.fleet_fit import FleetFit
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.fit.pooled import PooledFit
from mlflow_roofline.fit.registration import Registration, RegistryLedger, hardware_slug
from mlflow_roofline.fit.report.run_page import figures_beside, log_run_page
from mlflow_roofline.fit.runs.run_data import BASELINE_TAG_COLUMN, RunData
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.fleet import FleetLaw
from mlflow_roofline.serve.pyfunc_model import log_law_model
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.project_run import name_project_run


@dataclasses.dataclass(frozen=True)
class RunStart:
    """Where the fit's (outer) run comes from: the ``mlflow run`` project run, or a new run."""

    experiment_id: str
    run_id: str | None = None
    """The project run to join (``MLFLOW_RUN_ID``); None opens a run named ``run_name``."""
    run_name: str = "fit"
    """``fit-<experiment>``; the project run is given it too, unless the user named it."""


@dataclasses.dataclass(frozen=True)
class FitOutcome:
    """The result of :func:`~mlflow_roofline.fit.pipeline.run_fit`: the pull and one fit per hardware.

    Built once fitted (no run ids), then once more by :func:`log_and_register` with the fit runs,
    the versions and the aliases; nothing changes it after that.
    """

    run_data: RunData
    fits: tuple[HardwareFit, ...]
    parent_run_id: str | None = None
    skipped: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Hardware that could not be fitted (only when there are several), with the reason."""
    timings_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds of each phase: ``pull``, ``fit`` (all laws and CV), ``log`` (run, artifacts, model, registry)."""
    pooled: PooledFit | None = None
    """The pooled forms over every hardware (two hardware or more)."""
    fleet: FleetFit | None = None
    """The fleet model registered as ``alias`` (two hardware or more)."""

    @property
    def run_ids(self) -> list[str]:
        """The fit runs this job started (the parent first)."""
        return [r for r in [self.parent_run_id, *(f.run_id for f in self.fits)] if r]

    @property
    def hardware_comparison(self) -> dict[str, float]:
        """Grouped-CV MAPE (%) of each pooled form over every hardware (empty for one hardware)."""
        return {name: form.cv_mape for name, form in self.pooled.forms.items()} if self.pooled else {}


class FitLoggingFailed(Exception):
    """Logging or registering a fit failed: the cause, the fit runs it had opened, and what could not be undone."""

    def __init__(self, cause: Exception, run_ids: Sequence[str], rollback_problems: Sequence[str]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.run_ids = tuple(run_ids)
        self.rollback_problems = tuple(rollback_problems)


_Fit = TypeVar("_Fit", HardwareFit, FleetFit)


def _registered(fit: _Fit, registration: Registration) -> _Fit:
    """``fit`` with the version and aliases its model was registered with."""
    return dataclasses.replace(fit, model_version=registration.model_version, aliases=registration.aliases)


@contextlib.contextmanager
def _fit_run(
    client: TrackingClient,
    start: RunStart | None = None,
    *,
    experiment_id: str = "",
    run_name: str | None = None,
    parent_run_id: str | None = None,
    opened: list[str],
) -> Iterator[str]:
    """Open (or join, for ``start.run_id``) a run for the block; end it FINISHED, or FAILED if the block raises.

    The run id is appended to ``opened`` (the job's journal of runs, for :func:`fit.failure.record_failure`).
    """
    if start is not None and start.run_id:
        run_id = _join_project_run(client, start)
    elif start is not None:
        run_id = client.open_run(start.experiment_id, run_name=start.run_name, context_tags=True)
    else:
        run_id = client.open_run(experiment_id, run_name=run_name, parent_run_id=parent_run_id, context_tags=True)
    opened.append(run_id)
    try:
        yield run_id
    except BaseException:
        client.end_run(run_id, "FAILED")
        raise
    client.end_run(run_id, "FINISHED")


def _join_project_run(client: TrackingClient, start: RunStart) -> str:
    """The ``mlflow run`` project run named ``start.run_name``: the fit run when it is in the experiment of the
    train runs, else it is linked to a new fit run there (the fit lands beside the runs it learned from)."""
    assert start.run_id is not None
    name_project_run(client, start.run_id, start.run_name)
    if client.get_run(start.run_id).info.experiment_id == start.experiment_id:
        client.join_run(start.run_id)
        return start.run_id
    run_id = client.open_run(
        start.experiment_id, run_name=start.run_name, tags={TAG_LAUNCHER_RUN_ID: start.run_id}, context_tags=True
    )
    client.set_tag(start.run_id, TAG_FIT_RUN_ID, run_id)
    return run_id


def _log_model(client: TrackingClient, run_id: str, law: FittedLaw | FleetLaw) -> tuple[str, str]:
    """Log ``law`` as the run's pyfunc model (MLflow logs models only into the active run); its model URI and
    MLflow's id of the logged model.

    Log it before the run's metrics, which then carry the id (:func:`_metrics_after_model`): MLflow links a
    run's metrics to a model logged after them by reading every metric's history back from the store, one
    query per metric (0.85 s a model on a three-GPU fit's parent run).
    """
    with client.active(run_id):
        info = log_law_model(law, name="model")
    return str(info.model_uri), str(info.model_id)


@contextlib.contextmanager
def _metrics_after_model(
    client: TrackingClient, run_id: str, metrics: Mapping[str, float]
) -> Iterator[Callable[[str], None]]:
    """Log ``metrics`` into ``run_id`` once the logging inside is done; yields ``model_logged(model_id)``, to call
    when the run's model is logged (see :func:`_log_model`).

    The metrics are linked to that model, or logged unlinked where the run has none. On an error inside they
    are logged unlinked too (the failed run still shows what the fit found) and the error is raised.
    """
    model_ids: list[str] = []
    try:
        yield model_ids.append
    except Exception:
        with contextlib.suppress(Exception):  # a store that is down too: the first error is the reason
            client.log(run_id, metrics=metrics)
        raise
    client.log(run_id, metrics=metrics, model_id=model_ids[-1] if model_ids else None)


def log_fit_run(client: TrackingClient, fit: HardwareFit, run_data: RunData, params: dict[str, str]) -> str:
    """Log tags, params, metrics, the run page and the model of one hardware's fit into its run; the model URI.

    Registration is left to :class:`RegistryLedger`, once every fit run of the job is logged.
    """
    run_id = fit.run_id
    client.log(
        run_id,
        tags={
            TAG_RUN_TYPE: "fit",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        },
        params={
            **params,
            FIT_PARAM_HARDWARE: fit.hardware,
            FIT_PARAM_FORM: fit.energy.chosen,
            FIT_PARAM_FORMULA: fit.energy.forms[fit.energy.chosen].formula,
        },
    )
    metrics = {
        **{k: float(v) for k, v in fit.metrics().items()},
        M_N_RUNS_FOUND: float(run_data.n_found),
        M_N_RUNS_DROPPED_PULL: float(sum(run_data.dropped.values())),
    }
    with _metrics_after_model(client, run_id, metrics) as model_logged, figures_beside(client, run_id, fit):
        log_run_page(client, run_id, fit, run_data, metrics)  # files, measured-vs-predicted, the description
        tag_baselines(client, fit)
        model_uri, model_id = _log_model(client, run_id, fit.law)  # the plots are drawn beside all three
        model_logged(model_id)
    return model_uri


def tag_baselines(client: TrackingClient, fit: HardwareFit) -> int:
    """Tag each parallel train run the fit used with the kind of its single-device baseline
    (``roofline.baseline``: ``measured``, ``per_device`` or ``time_law``); how many runs carry it.

    A run whose tag was pulled with that kind already (:data:`~fit.runs.run_data.BASELINE_TAG_COLUMN`:
    a refit of the same runs) is not written again: one store write per run was most of a refit's
    logging at 10,000 runs.
    """
    if "run_id" not in fit.frame or "baseline" not in fit.frame:
        return 0
    pulled = fit.frame[BASELINE_TAG_COLUMN] if BASELINE_TAG_COLUMN in fit.frame else [""] * len(fit.frame)
    tagged = 0
    for run_id, kind, before in zip(fit.frame["run_id"], fit.frame["baseline"], pulled):
        if run_id and kind in BASELINE_KINDS:
            if kind != before:
                client.set_tag(str(run_id), TAG_BASELINE, str(kind))
            tagged += 1
    return tagged


_slug = hardware_slug


def hardware_alias(alias: str, hardware: str) -> str:
    """``alias-<slug of hardware>``: the alias one hardware's law is first given (``champion-gpu-a``)."""
    return f"{alias}-{_slug(hardware)}"


def distinct_hardware_alias(alias: str, hardware: str) -> str:
    """``alias-<slug>-<first 8 hex of the name's sha256>``: a hardware's alias when its plain one is another's."""
    return f"{hardware_alias(alias, hardware)}-{hashlib.sha256(hardware.encode()).hexdigest()[:8]}"


def aliases_of(
    fits: Sequence[HardwareFit],
    alias: str,
    fleet_model: bool = False,
    owners: Mapping[str, str | None] | None = None,
) -> list[list[str]]:
    """The aliases of each fit's version: ``alias`` alone, or ``alias-<hardware>`` each and ``alias`` on the
    first (unless a fleet model is registered: then ``alias`` is its own).

    Hardware names are data: two may make one slug (``GPU A``, ``GPU-A``, or two long names
    alike in their first 60 characters). A plain ``alias-<slug>`` goes to the hardware that
    owns it already (``owners``: alias -> the hardware of the version it points at in the
    registry, None when it points nowhere), else to the first hardware of this fit that makes
    it; any other hardware gets :func:`distinct_hardware_alias`. No law ever takes the alias
    of another hardware's law.
    """
    if len(fits) == 1:
        return [[alias]]
    owners = owners or {}
    first = [] if fleet_model else [alias]
    given: set[str] = set()
    result = []
    for i, fit in enumerate(fits):
        plain = hardware_alias(alias, fit.hardware)
        owner = owners.get(plain)
        if plain not in given and owner in (None, fit.hardware):
            name = plain
        else:
            name = distinct_hardware_alias(alias, fit.hardware)
        given.add(name)
        result.append([name] + (first if i == 0 else []))
    return result


def hardware_aliases(fits: Sequence[HardwareFit], alias: str) -> list[str]:
    """The plain per-hardware aliases a fit of several hardware may set (those whose owner to look up)."""
    return [hardware_alias(alias, fit.hardware) for fit in fits] if len(fits) > 1 else []


def _register_all(
    ledger: RegistryLedger | None,
    fits: Sequence[HardwareFit],
    model_uris: Sequence[str],
    alias: str,
    fleet: tuple[FleetFit, str] | None = None,
) -> tuple[tuple[HardwareFit, ...], FleetFit | None]:
    """Register every fit's model with its aliases, and the fleet model's with ``alias``; the fits as registered
    (as given without a ledger)."""
    fleet_fit = None if fleet is None else fleet[0]
    if ledger is None:
        return tuple(fits), fleet_fit
    if fleet is not None:
        fleet_fit = _registered(fleet[0], ledger.register(fleet[0], fleet[1], [alias]))
    owners = ledger.alias_owners(hardware_aliases(fits, alias))
    registered = tuple(
        _registered(fit, ledger.register(fit, model_uri, aliases))
        for fit, model_uri, aliases in zip(fits, model_uris, aliases_of(fits, alias, fleet is not None, owners))
    )
    return registered, fleet_fit


def _log_pooled(client: TrackingClient, parent_id: str, pooled: PooledFit) -> None:
    """The pooled comparison's report and figure in the parent run."""
    client.log_text(parent_id, pooled.report() + "\n", "pooled_report.txt")
    figure = pooled.extrapolation_figure()
    if figure is not None:
        client.log_figure(parent_id, figure, "plots/pooled_extrapolation.png")


def _log_fleet(client: TrackingClient, parent_id: str, fleet: FleetFit) -> tuple[FleetFit, str, str]:
    """The fleet model in the parent run: its tags, report and JSON, and the model; the fleet fit with its run,
    its model URI and MLflow's id of the logged model (the parent's metrics are logged after it)."""
    refusal = {TAG_FLEET_UNMEASURED_REFUSAL: fleet.law.unmeasured_refusal} if fleet.law.unmeasured_refusal else {}
    client.log(parent_id, tags={TAG_FORM: fleet.energy.chosen, **refusal})
    client.log_text(parent_id, fleet.report() + "\n", "fleet_report.txt")
    client.log_text(parent_id, fleet.law.to_json(), "fitted_law.json")
    model_uri, model_id = _log_model(client, parent_id, fleet.law)
    return dataclasses.replace(fleet, run_id=parent_id), model_uri, model_id


def _parent_metrics(outcome: FitOutcome) -> dict[str, float]:
    """The parent fit run's metrics: runs and hardware counted, the pooled comparison's and the fleet's routes."""
    fits, pooled, fleet = outcome.fits, outcome.pooled, outcome.fleet
    return {
        M_N_RUNS: float(sum(len(f.frame) for f in fits)),
        M_N_HARDWARE: float(len(fits)),
        M_N_HARDWARE_SKIPPED: float(len(outcome.skipped)),
        **(pooled.metrics() if pooled else {}),
        **(fleet.metrics() if fleet else {}),
    }


def _log_parent(client: TrackingClient, parent_id: str, outcome: FitOutcome, params: dict[str, str]) -> None:
    """The parent fit run's tags and params, the skipped hardware and the pooled comparison."""
    fits, pooled = outcome.fits, outcome.pooled
    client.log(parent_id, tags={TAG_RUN_TYPE: "fit", TAG_HARDWARE: ",".join(f.hardware for f in fits)}, params=params)
    if outcome.skipped:
        client.log_dict(parent_id, dict(outcome.skipped), "skipped_hardware.json")
    if pooled is not None:
        _log_pooled(client, parent_id, pooled)


@dataclasses.dataclass(frozen=True)
class _Logging:
    """What every step of logging a fit reads: the client, the outer run, the params, the ledger (None: no
    registration), the alias, and the journal of runs opened (appended to as runs open)."""

    client: TrackingClient
    start: RunStart
    params: dict[str, str]
    ledger: RegistryLedger | None
    alias: str
    opened: list[str]


def _log_parent_and_children(job: _Logging, outcome: FitOutcome) -> FitOutcome:
    """Several hardware: a parent fit run with the pooled comparison, one nested fit run each, then registration."""
    client = job.client
    logged: list[HardwareFit] = []
    model_uris = []
    with _fit_run(client, job.start, opened=job.opened) as parent_id:
        fleet_model: tuple[FleetFit, str] | None = None
        with _metrics_after_model(client, parent_id, _parent_metrics(outcome)) as model_logged:
            _log_parent(client, parent_id, outcome, job.params)
            if outcome.fleet is not None:
                logged_fleet, model_uri, model_id = _log_fleet(client, parent_id, outcome.fleet)
                fleet_model = (logged_fleet, model_uri)
                model_logged(model_id)
        experiment_id = client.get_run(parent_id).info.experiment_id
        for fit in outcome.fits:
            run_name = f"fit-{_slug(fit.hardware)}"
            with _fit_run(
                client, experiment_id=experiment_id, run_name=run_name, parent_run_id=parent_id, opened=job.opened
            ) as run_id:
                logged.append(dataclasses.replace(fit, run_id=run_id))
                model_uris.append(log_fit_run(client, logged[-1], outcome.run_data, job.params))
        fits, fleet = _register_all(job.ledger, logged, model_uris, job.alias, fleet_model)
    return dataclasses.replace(outcome, fits=fits, fleet=fleet, parent_run_id=parent_id)


def _log_single(job: _Logging, outcome: FitOutcome) -> FitOutcome:
    """One hardware: one fit run, then its registration inside it."""
    with _fit_run(job.client, job.start, opened=job.opened) as run_id:
        fit = dataclasses.replace(outcome.fits[0], run_id=run_id)
        model_uris = [log_fit_run(job.client, fit, outcome.run_data, job.params)]
        fits, _ = _register_all(job.ledger, [fit], model_uris, job.alias)
    return dataclasses.replace(outcome, fits=fits)


def log_and_register(
    client: TrackingClient,
    outcome: FitOutcome,
    start: RunStart,
    params: dict[str, str],
    ledger: RegistryLedger | None,
    alias: str,
) -> FitOutcome:
    """Log the fit run(s), then register every model inside the outer run; the outcome with its runs and versions.

    Raises:
        FitLoggingFailed: logging or registering failed; every registration is undone first (what could not
            be, in words, is on the error), and the runs opened so far are named on it.
    """
    job = _Logging(client, start, params, ledger, alias, opened=[])
    try:
        if len(outcome.fits) == 1 and not outcome.skipped:
            return _log_single(job, outcome)
        return _log_parent_and_children(job, outcome)
    except Exception as exc:
        problems = ledger.rollback() if ledger is not None else []
        raise FitLoggingFailed(exc, job.opened, problems) from exc
