"""``fit --if-drifted``: refit only when the registered champion has drifted.

A scheduled fit job asks first: has the law that ``models:/NAME@ALIAS`` serves drifted on
the train runs measured since that version was registered? It scores the champion on
those runs with the ``roofline`` model evaluator (``mlflow.models.evaluate``, logged as an
evaluation run ``drift-check`` in the first experiment, :mod:`mlflow_roofline.core.drift`
for the scores) and refits on ``refit``. It refits too when nothing is registered under
the alias yet; it does not when no usable run is newer than the version (nothing new to
judge by; it says how many runs it found, how many predate the version and why each newer one was
left out). The law is scored given the efficiency the runs measured, as the fit learns it:
a parallel run's speedup comes from a single-device run of the same workload among the new
runs where there is one, else from the law.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from mlflow_roofline.core.errors import RooflineError, one_line
from mlflow_roofline.core.schema import (
    M_DRIFT_BIAS,
    M_DRIFT_COVERAGE,
    M_DRIFT_MAPE,
    M_DRIFT_REFIT,
    M_ENERGY_J,
    TAG_DRIFT_REASON,
    TAG_DRIFT_VERDICT,
    TAG_ERROR,
    TAG_RUN_TYPE,
)
from mlflow_roofline.fit.runs.measured_speedup import measure_speedup
from mlflow_roofline.fit.runs.run_data import RunData, resolve_experiment_ids, runs_to_frame, search_train_runs
from mlflow_roofline.serve.validate import INPUT_COLUMNS, SPEEDUP_COLUMN
from mlflow_roofline.tracking.client import TrackingClient, TrackingError
from mlflow_roofline.tracking.store_errors import store_error_line

EVALUATOR = "roofline"
"""The model evaluator's entry-point name (setup.cfg, group ``mlflow.model_evaluator``)."""

RUN_TYPE_DRIFT_CHECK = "drift_check"


@dataclasses.dataclass(frozen=True)
class DriftCheck:
    """Whether to refit, in one line, and the evaluation run that decided it (None: no evaluation ran)."""

    refit: bool
    reason: str
    run_id: str | None = None


def check_drift(
    client: TrackingClient,
    experiments: Sequence[str],
    model_name: str,
    alias: str,
    hardware: str | None = None,
    energy_metric: str = M_ENERGY_J,
) -> DriftCheck:
    """Score ``models:/model_name@alias`` on the train runs of ``experiments`` newer than the version.

    ``energy_metric``: the metric read as each run's measured ``energy_j`` (joules), as the fit reads it.

    Raises:
        RooflineError: an unknown experiment, or a champion that cannot be scored (not a roofline law, a fleet
            law refusing the runs' GPUs, the evaluator not installed): one line, the drift-check run ended FAILED.
        TrackingError: the store refused.
    """
    uri = f"models:/{model_name}@{alias}"
    version = client.version_by_alias(model_name, alias)
    if version is None:
        return DriftCheck(True, f"nothing is registered as {uri}: fitting")
    experiment_ids = resolve_experiment_ids(client, experiments)
    since_ms = int(version.creation_timestamp)
    found = search_train_runs(client, experiment_ids, hardware)
    new_runs = [r for r in found if r.info.start_time > since_ms]
    run_data = runs_to_frame(new_runs, energy_metric)
    frame = run_data.frame
    where = f"version {version.version} of {uri}"
    if frame.empty:
        newer = f"{len(new_runs)} newer than it" + _dropped(run_data)
        older = f"{len(found) - len(new_runs)} older not judged"
        return DriftCheck(False, f"no usable train run since {where}: {newer} ({older}): not refitting")
    # The law's energy given the efficiency the runs measured (as the fit learnt it): the speedup
    # where a single-device baseline among the new runs gives it, else (NaN) the law's own.
    data = measure_speedup(frame)[[*INPUT_COLUMNS, SPEEDUP_COLUMN, "hardware", M_ENERGY_J]]
    run_id = client.open_run(experiment_ids[0], "drift-check", tags={TAG_RUN_TYPE: RUN_TYPE_DRIFT_CHECK})
    metrics = _evaluate(client, run_id, uri, data, where)
    tags = client.get_run(run_id).data.tags
    refit = metrics[M_DRIFT_REFIT] == 1.0
    summary = (
        f"{where} on {len(frame)} new runs{_dropped(run_data)}: MAPE {metrics[M_DRIFT_MAPE]:.1f} %, "
        f"bias {metrics[M_DRIFT_BIAS]:+.1f} %, 95 % coverage {metrics[M_DRIFT_COVERAGE]:.0f} %: "
        f"{tags[TAG_DRIFT_VERDICT]} ({tags[TAG_DRIFT_REASON]})"
    )
    return DriftCheck(refit, summary + ("" if refit else "; not refitting"), run_id)


def _dropped(run_data: RunData) -> str:
    """``, dropped 3: 2 without tag roofline.hardware, 1 ...`` (the runs left out, by reason), or nothing."""
    return f", {run_data.dropped_summary()}" if run_data.dropped else ""


def _evaluate(client: TrackingClient, run_id: str, uri: str, data: pd.DataFrame, where: str) -> dict[str, float]:
    """The evaluator's metrics, the run ``run_id`` ended FINISHED; else ended FAILED with why.

    Raises:
        RooflineError: the champion cannot be scored (not a roofline law, runs it refuses), one line.
        TrackingError: the store refused.
    """
    try:
        metrics = client.evaluate_model(run_id, uri, data, M_ENERGY_J, EVALUATOR)
    except Exception as exc:
        if store_error_line(exc, client.tracking_uri) is not None:
            client.end_run(run_id, "FAILED")
            raise
        why = one_line(exc.message if isinstance(exc, TrackingError) else f"{type(exc).__name__}: {exc}")
        client.set_tag(run_id, TAG_ERROR, why)
        client.end_run(run_id, "FAILED")
        raise RooflineError(f"drift check: {where} cannot be scored: {why}") from None
    except BaseException:
        client.end_run(run_id, "FAILED")
        raise
    client.end_run(run_id)
    return metrics
