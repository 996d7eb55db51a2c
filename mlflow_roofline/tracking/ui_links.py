"""Links into the MLflow UI: an experiment's runs table and a run's page, in the Model training view.

The UI (MLflow 3) opens an experiment in its GenAI view (traces, sessions) unless told
otherwise: the query ``workflowType=machine_learning`` opens the Model training view (runs,
metrics, charts, models). A tracking server's URI is the UI's address; any other store
(an SQLite file, a directory) is shown by ``mlflow ui``, on :data:`LOCAL_UI` by default.
"""

from __future__ import annotations

MODEL_TRAINING = "workflowType=machine_learning"
"""URL query that opens an experiment in the UI's Model training view."""
LOCAL_UI = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves a local store by default."""


def experiment_url(base: str, experiment_id: str) -> str:
    """The runs table of an experiment, in the Model training view."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{MODEL_TRAINING}"


def run_url(base: str, experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    """A run's page (its Overview, or the artifact view of ``artifact``), in the Model training view."""
    tail = f"/artifacts/{artifact}" if artifact else ""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}{tail}?{MODEL_TRAINING}"


def ui_base(tracking_uri: str) -> tuple[str, str]:
    """The UI's address for ``tracking_uri``, and how to start it ("" when a server already serves it)."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/"), ""
    return LOCAL_UI, f"mlflow ui --backend-store-uri {tracking_uri}"


def experiment_line(tracking_uri: str, experiment_id: str) -> str:
    """One line for the console: where to see the experiment's runs in the UI."""
    base, start = ui_base(tracking_uri)
    line = f"MLflow UI (Model training view): {experiment_url(base, experiment_id)}"
    return line + (f"  (start it with: {start})" if start else "")
