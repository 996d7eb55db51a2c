"""May this process log into the run ``MLFLOW_RUN_ID`` names? Checked before anything is written.

``mlflow run`` and the sweep create a RUNNING run and hand its id to ``train`` (or
``measure``) through ``MLFLOW_RUN_ID``. Any other run is refused, and left exactly as it
was (no param, metric, tag, status or name written):

- a run that does not exist in the tracking store;
- a run that is not RUNNING (FINISHED, FAILED, KILLED, SCHEDULED): an ended run is
  never reopened, re-measured or renamed;
- a RUNNING run that already holds a measurement (``time_s``): someone measured into it;
- a run of another kind (``roofline.run_type`` says ``sweep`` or ``fit`` to a train);
- a run whose params contradict the configuration about to be measured (MLflow cannot
  change a logged param, and the run would describe another job).
"""

from __future__ import annotations

from collections.abc import Mapping

from mlflow_roofline.core import job_table
from mlflow_roofline.core.config import AUTO_WORDS, INT_FIELDS, KIND_INT_FIELDS, parse_bool
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import M_TIME_S, TAG_RUN_TYPE
from mlflow_roofline.tracking.client import Run, TrackingClient, TrackingError

RUN_ID_ENV = "MLFLOW_RUN_ID"


class RunRefused(ConfigError):
    """The run ``MLFLOW_RUN_ID`` names cannot be logged into; it was left untouched."""

    def __init__(self, run_id: str, rule: str) -> None:
        super().__init__(RUN_ID_ENV, f"run {run_id} {rule}; it was left unchanged")


def check_joinable(client: TrackingClient, run_id: str, run_type: str, params: Mapping[str, str] | None = None) -> None:
    """Refuse, before any write, a run this process must not log into (see the module doc).

    Args:
        client: the tracking store's client.
        run_id: the run ``MLFLOW_RUN_ID`` names.
        run_type: the ``roofline.run_type`` this process logs (``train``, ``measure``).
        params: the params it is about to log (``None``: not known, not compared).

    Raises:
        RunRefused: naming ``MLFLOW_RUN_ID``, the run and the reason.
    """
    run = _get_run(client, run_id)
    status = run.info.status
    if status != "RUNNING":
        raise RunRefused(run_id, f"is {status}, not RUNNING: a run that has ended is never reopened")
    logged_type = run.data.tags.get(TAG_RUN_TYPE)
    if logged_type is not None and logged_type != run_type:
        raise RunRefused(run_id, f"is a {logged_type} run ({TAG_RUN_TYPE}), not a {run_type} run")
    if M_TIME_S in run.data.metrics:
        raise RunRefused(run_id, f"already holds a measurement ({M_TIME_S}): it is not a fresh run")
    for name, value in (params or {}).items():
        logged = run.data.params.get(name)
        if logged is not None and not same_param(name, logged, value):
            raise RunRefused(run_id, f"has {name}={logged!r}, which contradicts {name}={value!r}")


def _get_run(client: TrackingClient, run_id: str) -> Run:
    try:
        return client.get_run(run_id)
    except TrackingError as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise RunRefused(run_id, "does not exist in the tracking store") from None
        raise


def same_param(name: str, logged: str, value: str) -> bool:
    """Whether a logged param says the same as ``value``.

    ``mlflow run`` logs entry-point parameters as typed: ``"4.0"`` for 4, ``device``
    may be ``auto`` (the resolved device is a tag), ``vocab_size`` and ``lora_rank`` may be
    ``auto`` (their defaults, the value logged beside it) and ``grad_checkpointing`` any
    word for true or false.
    """
    if logged == value:
        return True
    if name == "device":
        return logged == "auto"
    if name in KIND_INT_FIELDS and logged.strip().lower() in AUTO_WORDS:
        return True
    if name in job_table.names(type="bool"):
        try:
            return parse_bool(name, logged) == parse_bool(name, value)
        except ConfigError:
            return False
    if name in INT_FIELDS or name in KIND_INT_FIELDS:
        try:
            return float(logged) == float(value)
        except ValueError:
            return False
    return False
