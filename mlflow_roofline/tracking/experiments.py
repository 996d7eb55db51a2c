"""Finding or creating the MLflow experiment a command writes to, with errors that name it.

Experiments this package creates, or first writes train runs into, are tagged as model
training (``mlflow.experimentKind``), so the MLflow UI opens them in its Model training
view (runs, metrics, charts) rather than the GenAI view (traces, sessions, judges).
"""

from __future__ import annotations

import logging
import os

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import DEFAULT_EXPERIMENT, EXPERIMENT_KIND_MODEL_TRAINING, TAG_EXPERIMENT_KIND
from mlflow_roofline.tracking.client import Experiment, TrackingClient, TrackingError

MLFLOW_DEFAULT_EXPERIMENT_ID = "0"
"""MLflow's own ``Default`` experiment, which every tracking store has."""

logger = logging.getLogger(__name__)

_told_other_kind: set[str] = set()  # experiment ids whose other kind was already reported


def find_experiment(client: TrackingClient, name: str) -> Experiment | None:
    """The active experiment called ``name``, or None when there is none.

    Raises:
        ConfigError: an empty name, or an experiment of that name that was deleted.
    """
    if not name.strip():
        raise ConfigError("experiment", "must be a non-empty name")
    found = client.experiment_by_name(name)
    if found is not None and found.lifecycle_stage != "active":
        raise ConfigError("experiment", f"{name!r} is deleted; restore it or choose another name")
    return found


def get_or_create_experiment(client: TrackingClient, name: str) -> str:
    """The id of the experiment called ``name``, created if missing (see :func:`find_experiment`).

    A new experiment is tagged as model training; an existing one gets the tag if it has
    no kind yet (see :func:`mark_model_training`).
    """
    found = find_experiment(client, name)
    if found is not None:
        mark_model_training(client, found)
        return str(found.experiment_id)
    try:
        return client.create_experiment(name, tags={TAG_EXPERIMENT_KIND: EXPERIMENT_KIND_MODEL_TRAINING})
    except TrackingError:  # created meanwhile by a concurrent run
        found = client.experiment_by_name(name)
        if found is None:
            raise
        mark_model_training(client, found)
        return str(found.experiment_id)


def mark_model_training(client: TrackingClient, experiment: Experiment) -> bool:
    """Tag ``experiment`` (an MLflow ``Experiment``) as model training unless it has a kind.

    An experiment of another kind (a GenAI one, say) is left as it is: its owner chose
    that view. That is reported once per experiment and process, as a warning.

    Returns:
        True when the experiment is (now) of the model-training kind.
    """
    kind = (experiment.tags or {}).get(TAG_EXPERIMENT_KIND)
    if kind == EXPERIMENT_KIND_MODEL_TRAINING:
        return True
    if not kind:
        client.set_experiment_tag(experiment.experiment_id, TAG_EXPERIMENT_KIND, EXPERIMENT_KIND_MODEL_TRAINING)
        return True
    if experiment.experiment_id not in _told_other_kind:
        _told_other_kind.add(experiment.experiment_id)
        logger.warning(
            "Note: experiment %r is of kind %r (%s); left as it is, so the MLflow UI shows it in that view "
            "rather than as model training",
            experiment.name,
            kind,
            TAG_EXPERIMENT_KIND,
        )
    return False


def experiment_id_for(client: TrackingClient, name: str | None, default: str | None = DEFAULT_EXPERIMENT) -> str:
    """The id of the experiment a run writes to: the one lookup every command uses.

    ``name`` when given, else ``MLFLOW_EXPERIMENT_ID``, else ``MLFLOW_EXPERIMENT_NAME``, else
    the experiment called ``default`` (``roofline-bert``); a name is created if missing.
    ``default=None`` means MLflow's own ``Default`` experiment (id ``0``), as
    ``mlflow.start_run`` does (``measure`` uses it).
    """
    if name is None:
        if os.environ.get("MLFLOW_EXPERIMENT_ID"):
            return os.environ["MLFLOW_EXPERIMENT_ID"]
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or default
    if name is None:
        return MLFLOW_DEFAULT_EXPERIMENT_ID
    return get_or_create_experiment(client, name)
