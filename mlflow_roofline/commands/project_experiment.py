"""MLflow's default experiment for ``mlflow run`` of this project: the experiment the entry point writes to.

Installed as the entry point ``roofline`` of MLflow's plugin group
``mlflow.default_experiment_provider`` (setup.cfg). MLflow asks it only when nothing named an
experiment (no ``--experiment-name``/``--experiment-id``, no ``MLFLOW_EXPERIMENT_NAME``/``_ID``);
it answers only in a process running ``mlflow run`` of this project (the ``MLproject`` called
:data:`PROJECT_NAME`), so the project's run lands beside the runs it makes rather than in
``Default``:

- ``sweep``: the spec's ``experiment`` (``-P spec=...``, else the entry point's default spec);
- ``fit``: the first experiment it fits (``-P experiment=...``, else the entry point's default);
- ``train``: ``roofline-bert``, where train runs go by default.

The defaults are read from the ``MLproject`` file itself. A spec that cannot be read gets no
answer (the run lands in ``Default`` and the sweep says what is wrong with the spec). MLflow
loads this module while it is itself being imported: it imports nothing at module level.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

PROJECT_NAME = "mlflow-roofline"
"""The ``name`` of this project's ``MLproject`` file."""


class ProjectExperiment:
    """An MLflow default experiment provider (``in_context``, ``get_experiment_id``); see the module docstring."""

    def in_context(self) -> bool:
        """Whether this process runs an entry point of this project with no experiment named."""
        return _experiment_name(tuple(sys.argv)) is not None

    def get_experiment_id(self) -> str:
        """The id of the entry point's experiment, created (as model training) if missing."""
        from mlflow_roofline.tracking.client import TrackingClient
        from mlflow_roofline.tracking.experiments import get_or_create_experiment

        name = _experiment_name(tuple(sys.argv))
        if name is None:  # MLflow asks only after in_context() said yes
            raise RuntimeError("not an mlflow run of the mlflow-roofline project")
        return get_or_create_experiment(TrackingClient(), name)


@functools.cache
def _experiment_name(argv: tuple[str, ...]) -> str | None:
    """The experiment the launched entry point writes to, or None (another process, project or entry point)."""
    from mlflow_roofline.tracking.project_run import project_launch

    launch = project_launch(argv)
    if launch is None:
        return None
    entry_points = _entry_points(launch.project_dir)
    if entry_points is None or launch.entry_point not in entry_points:
        return None
    declared = entry_points[launch.entry_point].get("parameters") or {}

    def param(name: str) -> str:
        default = (declared.get(name) or {}).get("default", "")
        return str(launch.params.get(name, default))

    return experiment_of(launch.entry_point, param, launch.project_dir)


def experiment_of(entry_point: str, param: Callable[[str], str], project_dir: Path) -> str | None:
    """The experiment of ``entry_point`` given its parameters (``param(name)``: the value or the default)."""
    from mlflow_roofline.core.errors import ConfigError
    from mlflow_roofline.core.schema import DEFAULT_EXPERIMENT

    if entry_point == "train":
        return DEFAULT_EXPERIMENT
    if entry_point == "fit":
        first = next((n.strip() for n in param("experiment").split(",") if n.strip()), "")
        return first or DEFAULT_EXPERIMENT
    if entry_point == "sweep":
        from mlflow_roofline.sweep.spec import load_spec, shipped_specs

        spec = param("spec")
        local = project_dir / spec  # the entry point runs in the project's directory
        try:
            return load_spec(spec if spec in shipped_specs() or Path(spec).exists() else str(local)).experiment
        except ConfigError:
            return None
    return None


def _entry_points(project_dir: Path) -> dict[str, dict] | None:
    """The ``entry_points`` of the ``MLproject`` in ``project_dir`` when it is this project's, else None."""
    import yaml

    try:
        project = yaml.safe_load((project_dir / "MLproject").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(project, dict) or project.get("name") != PROJECT_NAME:
        return None
    entry_points = project.get("entry_points")
    return entry_points if isinstance(entry_points, dict) else None
