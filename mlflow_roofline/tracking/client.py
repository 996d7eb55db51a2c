"""The one door to MLflow: a small typed client over one tracking store.

Every stage talks to MLflow through :class:`TrackingClient` (and the few helpers of this
package built on it); only the served model's pyfunc class imports MLflow besides. The
client speaks plain Python values: params and tags are ``str`` mappings, metrics are
``float`` mappings, statuses are :data:`RunStatus` strings. MLflow's own entities are
returned where a caller reads a stored run (:class:`Run`, :class:`Experiment`,
:class:`ModelVersion`); they are re-exported here so that type hints need no MLflow import.

Batches follow the store's limits (100 params, 100 tags and 1000 entities in all per ``log_batch``):
:meth:`TrackingClient.log` splits whatever it is given.
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import mlflow
from mlflow.entities import Experiment, Metric, Param, Run, RunTag, ViewType
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.tracking.context.registry import resolve_tags

from mlflow_roofline.core.schema import TAG_PARENT_RUN_ID
from mlflow_roofline.tracking.first_open import first_open

if TYPE_CHECKING:  # matplotlib is heavy and only needed by callers that log a figure
    import pandas as pd
    from matplotlib.figure import Figure
    from mlflow.pyfunc import PyFuncModel  # mlflow.pyfunc is heavy: imported when a model is loaded

__all__ = [
    "ACTIVE_ONLY",
    "ALL_RUNS",
    "DELETED_ONLY",
    "Experiment",
    "MetricPoint",
    "ModelVersion",
    "Run",
    "RunStatus",
    "TrackingClient",
    "TrackingError",
]

TrackingError = MlflowException
"""What the store raises (MLflow's ``MlflowException``): catch this, never MLflow's class by name."""

RunStatus = Literal["RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"]
"""A run's status, as MLflow spells it."""

ACTIVE_ONLY: int = ViewType.ACTIVE_ONLY
DELETED_ONLY: int = ViewType.DELETED_ONLY
ALL_RUNS: int = ViewType.ALL

PAGE_SIZE = 50_000
"""Runs per ``search_runs`` call: MLflow's ``SEARCH_MAX_RESULTS_THRESHOLD``, the largest page a store serves."""
ENTITIES_PER_BATCH = 1000
"""Metrics, params and tags together in one ``log_batch`` (a REST server refuses more; SQLite does not check)."""
PARAMS_PER_BATCH = 100
TAGS_PER_BATCH = 100


@dataclass(frozen=True)
class MetricPoint:
    """One point of a metric's history: ``value`` at ``step``, logged at ``timestamp_ms`` (ms since the epoch)."""

    key: str
    value: float
    step: int = 0
    timestamp_ms: int | None = None


def current_tracking_uri() -> str:
    """The tracking URI MLflow uses in this process now (no store is opened to say it)."""
    return str(mlflow.get_tracking_uri())


def now_ms() -> int:
    """Milliseconds since the epoch, MLflow's timestamp unit."""
    return int(time.time() * 1000)


class TrackingClient:
    """A typed client of one MLflow tracking store (``tracking_uri``, else MLflow's current one).

    Construction opens the store (MLflow keeps one per URI and process, so later clients of the same
    URI reuse it; a new database's tables are made by one process at a time, :mod:`.first_open`);
    every method is one or a few store calls.
    """

    def __init__(self, tracking_uri: str | None = None) -> None:
        self.tracking_uri: str = tracking_uri or mlflow.get_tracking_uri()
        with first_open(self.tracking_uri):  # a new database: one process at a time creates its tables
            self._client = MlflowClient(tracking_uri)

    # -- experiments -------------------------------------------------------------------
    def experiment_by_name(self, name: str) -> Experiment | None:
        """The experiment called ``name`` (active or deleted), or None."""
        return self._client.get_experiment_by_name(name)

    def experiment(self, experiment_id: str) -> Experiment:
        """The experiment with this id.

        Raises:
            TrackingError: no such experiment.
        """
        return self._client.get_experiment(experiment_id)

    def create_experiment(self, name: str, tags: Mapping[str, str] | None = None) -> str:
        """Create the experiment ``name``; returns its id (raises :data:`TrackingError` when it exists)."""
        return self._client.create_experiment(name, tags=dict(tags or {}))

    def delete_experiment(self, experiment_id: str) -> None:
        self._client.delete_experiment(experiment_id)

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        self._client.set_experiment_tag(experiment_id, key, value)

    # -- run lifecycle -----------------------------------------------------------------
    def open_run(
        self,
        experiment_id: str,
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
        context_tags: bool = False,
    ) -> str:
        """Create a RUNNING run in ``experiment_id``; returns its id.

        ``parent_run_id`` nests it (the tag ``mlflow.parentRunId``, as the fluent API sets it).
        ``context_tags`` adds what ``mlflow.start_run`` adds (``mlflow.user``, ``mlflow.source.*``,
        the git commit, installed run context providers) under the given tags.
        """
        all_tags = dict(tags or {})
        if context_tags:
            all_tags = resolve_tags(all_tags)
        if run_name:
            all_tags.setdefault("mlflow.runName", run_name)
        if parent_run_id:
            all_tags[TAG_PARENT_RUN_ID] = parent_run_id
        return str(self._client.create_run(experiment_id, run_name=run_name, tags=all_tags).info.run_id)

    def join_run(self, run_id: str, run_name: str | None = None) -> None:
        """Mark an existing run RUNNING again (a resumed or launcher-created run), renaming it if asked."""
        self._client.update_run(run_id, status="RUNNING", name=run_name)

    def rename_run(self, run_id: str, name: str) -> None:
        """Give the run the name the UI shows (``mlflow.runName``)."""
        self._client.update_run(run_id, name=name)

    def end_run(self, run_id: str, status: RunStatus = "FINISHED") -> None:
        """End the run with ``status`` and the current time."""
        self._client.set_terminated(run_id, status)

    def end_run_and_deactivate(self, run_id: str, status: RunStatus) -> None:
        """End the run with ``status``; if it is MLflow's active run in this process, it stops being
        active (so that MLflow's own exit does not end it again, FINISHED)."""
        active = mlflow.active_run()
        if active is not None and active.info.run_id == run_id:
            mlflow.end_run(status=status)
        else:
            self._client.set_terminated(run_id, status)

    def delete_run(self, run_id: str) -> None:
        self._client.delete_run(run_id)

    @contextlib.contextmanager
    def active(self, run_id: str) -> Iterator[str]:
        """Make ``run_id`` MLflow's active run for the block, for the APIs that log only to the active
        run (logging a model). The run stays RUNNING afterwards: ending it is its owner's call.
        """
        previous_uri = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(self.tracking_uri)
        mlflow.start_run(run_id=run_id, log_system_metrics=False)
        try:
            yield run_id
        finally:
            mlflow.end_run(status="RUNNING")
            mlflow.set_tracking_uri(previous_uri)

    # -- reading -----------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        """The stored run (params, metrics, tags, info).

        Raises:
            TrackingError: no such run.
        """
        return self._client.get_run(run_id)

    def iter_runs(
        self,
        experiment_ids: Sequence[str],
        filter_string: str = "",
        order_by: Sequence[str] | None = None,
        view: int = ACTIVE_ONLY,
        page_size: int = PAGE_SIZE,
    ) -> Iterator[Run]:
        """Every run of ``experiment_ids`` that matches ``filter_string`` (MLflow search syntax), page after page.

        Args:
            view: :data:`ACTIVE_ONLY`, :data:`DELETED_ONLY` or :data:`ALL_RUNS`.
            page_size: runs fetched per store call (1 .. :data:`PAGE_SIZE`).
        """
        token: str | None = None
        while True:
            page = self._client.search_runs(
                list(experiment_ids),
                filter_string=filter_string,
                run_view_type=view,
                max_results=page_size,
                order_by=list(order_by) if order_by else None,
                page_token=token,
            )
            yield from page
            token = page.token
            if not token:
                return

    def search_runs(
        self,
        experiment_ids: Sequence[str],
        filter_string: str = "",
        order_by: Sequence[str] | None = None,
        view: int = ACTIVE_ONLY,
    ) -> list[Run]:
        """Every run :meth:`iter_runs` yields, as a list."""
        return list(self.iter_runs(experiment_ids, filter_string, order_by, view))

    def metric_history(self, run_id: str, key: str) -> list[MetricPoint]:
        """Every logged point of metric ``key`` of the run, in the store's order."""
        return [
            MetricPoint(m.key, float(m.value), int(m.step), int(m.timestamp))
            for m in self._client.get_metric_history(run_id, key)
        ]

    def latest_metrics(self, run_id: str) -> list[MetricPoint]:
        """Each metric's latest point (its value at its largest step), as the run's data holds them."""
        data = self._client.get_run(run_id).data
        return [MetricPoint(m.key, float(m.value), int(m.step), int(m.timestamp)) for m in data._metric_objs]

    # -- writing -----------------------------------------------------------------------
    def log(
        self,
        run_id: str,
        params: Mapping[str, str] | None = None,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        step: int = 0,
        timestamp_ms: int | None = None,
        model_id: str | None = None,
    ) -> None:
        """Log params, metrics (all at ``step``; linked to the logged model ``model_id`` when given) and tags in
        as few batches as the store allows."""
        stamp = now_ms() if timestamp_ms is None else timestamp_ms
        self._log_batches(
            run_id,
            [Param(k, str(v)) for k, v in (params or {}).items()],
            [Metric(k, float(v), stamp, step, model_id=model_id) for k, v in (metrics or {}).items()],
            [RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )

    def log_history(
        self,
        run_id: str,
        points: Iterable[MetricPoint],
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> None:
        """Log metric points with their own steps and timestamps (a loss curve, a power timeline),
        ``tags`` and ``params``, in as few batches as the store allows (one for up to 1000 points,
        100 tags and 100 params)."""
        stamp = now_ms()
        metrics = [
            Metric(p.key, float(p.value), stamp if p.timestamp_ms is None else p.timestamp_ms, p.step) for p in points
        ]
        self._log_batches(
            run_id,
            [Param(k, str(v)) for k, v in (params or {}).items()],
            metrics,
            [RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )

    def _log_batches(self, run_id: str, params: list[Param], metrics: list[Metric], tags: list[RunTag]) -> None:
        """As many ``log_batch`` calls as the limits need: 100 params, 100 tags and 1000 entities in all per call."""
        while params or metrics or tags:
            batch_params, batch_tags = params[:PARAMS_PER_BATCH], tags[:TAGS_PER_BATCH]
            batch_metrics = metrics[: ENTITIES_PER_BATCH - len(batch_params) - len(batch_tags)]
            self._client.log_batch(run_id, metrics=batch_metrics, params=batch_params, tags=batch_tags)
            params, metrics, tags = params[len(batch_params) :], metrics[len(batch_metrics) :], tags[len(batch_tags) :]

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self._client.set_tag(run_id, key, value)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        """Store ``text`` as the artifact ``artifact_file`` (a path relative to the run's artifact root)."""
        self._client.log_text(run_id, text, artifact_file)

    def log_dict(self, run_id: str, value: dict[str, Any], artifact_file: str) -> None:
        """Store ``value`` as JSON (``.json``) or YAML (``.yaml``) in the artifact ``artifact_file``."""
        self._client.log_dict(run_id, value, artifact_file)

    def log_artifact(self, run_id: str, local_path: str, artifact_path: str | None = None) -> None:
        """Copy the file ``local_path`` into the run's artifacts (under ``artifact_path`` when given)."""
        self._client.log_artifact(run_id, local_path, artifact_path)

    def log_artifacts(self, run_id: str, local_dir: str, artifact_path: str | None = None) -> None:
        """Copy every file under ``local_dir`` into the run's artifacts."""
        self._client.log_artifacts(run_id, local_dir, artifact_path)

    def log_figure(self, run_id: str, figure: Figure, artifact_file: str) -> None:
        """Store a matplotlib figure as the image artifact ``artifact_file`` (``.png``)."""
        self._client.log_figure(run_id, figure, artifact_file)

    # -- model registry ----------------------------------------------------------------
    def registered_model_exists(self, name: str) -> bool:
        try:
            self._client.get_registered_model(name)
        except MlflowException:
            return False
        return True

    def create_registered_model(self, name: str) -> None:
        self._client.create_registered_model(name)

    def delete_registered_model(self, name: str) -> None:
        self._client.delete_registered_model(name)

    def describe_registered_model(self, name: str, description: str) -> None:
        """The registered model's description (the registry page shows it above the versions)."""
        self._client.update_registered_model(name, description=description)

    def register_model(self, model_uri: str, name: str, tags: Mapping[str, str] | None = None) -> str:
        """Register ``model_uri`` as a new version of ``name`` (creating the model if missing); returns the version.

        MLflow's own lines about it (``Registered model ... already exists``, ``Created version ...``)
        are not printed: the caller says what it registered.
        """
        with contextlib.redirect_stderr(io.StringIO()):
            version = mlflow.register_model(model_uri, name, tags=dict(tags or {}))
        return str(version.version)

    def describe_model_version(self, name: str, version: str, description: str) -> None:
        self._client.update_model_version(name, version, description=description)

    def delete_model_version(self, name: str, version: str) -> None:
        self._client.delete_model_version(name, version)

    def version_by_alias(self, name: str, alias: str) -> ModelVersion | None:
        """The version of model ``name`` that ``alias`` points at, or None (no model, no alias)."""
        try:
            return self._client.get_model_version_by_alias(name, alias)
        except MlflowException:
            return None

    def set_alias(self, name: str, alias: str, version: str) -> None:
        self._client.set_registered_model_alias(name, alias, version)

    def delete_alias(self, name: str, alias: str) -> None:
        self._client.delete_registered_model_alias(name, alias)

    # -- the user's active run and loading a model (the Trainer callback, the forecast) --
    def active_run_ids(self) -> list[str]:
        """The ids of MLflow's active runs in this thread, outermost first (a nested run last)."""
        stack = getattr(mlflow.tracking.fluent, "_active_run_stack", None)  # MLflow keeps no public view of it
        runs = stack.get() if stack is not None else None
        if runs is None:
            active = mlflow.active_run()
            return [] if active is None else [str(active.info.run_id)]
        return [str(run.info.run_id) for run in runs]

    def active_run_id(self) -> str | None:
        """The id of MLflow's active run in this process (one the user or ``MLflowCallback`` started), or None."""
        active = mlflow.active_run()
        return None if active is None else str(active.info.run_id)

    def load_model(self, model_uri: str) -> PyFuncModel:
        """Load the pyfunc model at ``model_uri`` (``models:/NAME@ALIAS``, ``runs:/...``) from this store.

        Raises:
            TrackingError: no such model, or the store cannot serve it.
        """
        import mlflow.pyfunc  # heavy: only callers that load a model pay for it

        previous_uri = mlflow.get_tracking_uri()
        if previous_uri == self.tracking_uri:  # the usual case: nothing process-wide to change
            return mlflow.pyfunc.load_model(model_uri)
        mlflow.set_tracking_uri(self.tracking_uri)
        try:
            return mlflow.pyfunc.load_model(model_uri)
        finally:
            mlflow.set_tracking_uri(previous_uri)

    def evaluate_model(
        self,
        run_id: str,
        model_uri: str,
        data: pd.DataFrame,
        targets: str,
        evaluator: str,
        config: Mapping[str, float] | None = None,
    ) -> dict[str, float]:
        """``mlflow.models.evaluate`` of ``model_uri`` on ``data`` by the installed evaluator ``evaluator``,
        logged into the run ``run_id`` (left RUNNING: ending it is its owner's call); returns the metrics.

        Raises:
            TrackingError: no such model or evaluator, or the evaluator refused the data.
        """
        import mlflow.models  # heavy: only the drift check pays for it

        with self.active(run_id), warnings.catch_warnings():
            # MLflow logs the frame as the run's dataset and hints that its integer columns cannot hold NaN:
            # the job columns are integers by rule, and the hint (with MLflow's file path) is no user's business.
            warnings.filterwarnings(
                "ignore", message="Hint: Inferred schema contains integer column", category=UserWarning
            )
            result = mlflow.models.evaluate(
                model_uri,
                data,
                targets=targets,
                model_type="regressor",
                evaluators=[evaluator],
                evaluator_config={evaluator: dict(config)} if config else None,
            )
        return {k: float(v) for k, v in result.metrics.items()}

    def log_dataset(
        self, run_id: str, table: pd.DataFrame, name: str, context: str, targets: str | None = None
    ) -> None:
        """Record ``table`` as a dataset input of the run (``mlflow.log_input``: the run's Datasets panel shows its
        name, digest, schema and row count; the rows themselves are not stored). ``context``: ``training``, ...;
        ``targets``: the column the run learned to predict."""
        from mlflow.data.pandas_dataset import from_pandas  # heavy: only the fit pays for it

        with warnings.catch_warnings():  # its hint about integer columns is for model signatures, not a record
            warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
            dataset = from_pandas(table, name=name, targets=targets)
        with self.active(run_id):
            mlflow.log_input(dataset, context=context)

    # -- tables (the fit's measured-vs-predicted table) --
    def log_table(self, run_id: str, table: pd.DataFrame, artifact_file: str) -> None:
        """Store ``table`` as the JSON table artifact ``artifact_file`` (``mlflow.log_table``'s format,
        which the MLflow UI's artifact view shows and filters)."""
        self._client.log_table(run_id, table, artifact_file)
