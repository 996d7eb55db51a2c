"""The run ``mlflow run`` made for a project: reading how it was launched, and naming its run.

``mlflow run`` creates the project's run before the entry point's command starts, in the
experiment the user named, else in ``MLflow``'s default one, and names it at random
(``inquisitive-cat-873``). Two things MLflow allows a project to do about it:

- :func:`project_launch` reads this process's ``mlflow run`` command line with MLflow's own
  parser, for the default experiment provider (``mlflow_roofline.commands.project_experiment``)
  that puts the run where the entry point writes its runs when the user named no experiment;
- :func:`name_project_run` gives the run a name that says what it is (``sweep-smoke``,
  ``fit-roofline-bert``), unless the user named it (``mlflow run --run-name``).

Nothing here imports MLflow at module level: MLflow loads the provider while it is itself
being imported.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlflow_roofline.tracking.client import TrackingClient

_GENERATED_NAME = re.compile(r"^([a-z]+)-([a-z]+)-(\d+)$")


@dataclasses.dataclass(frozen=True)
class ProjectLaunch:
    """An ``mlflow run`` of a local project: its directory, entry point and ``-P`` parameters."""

    project_dir: Path
    entry_point: str
    params: Mapping[str, str]


def _is_mlflow_cli(program: str) -> bool:
    """Whether ``program`` (``sys.argv[0]``) is MLflow's console script or ``python -m mlflow``."""
    path = Path(program)
    return path.name == "mlflow" or (path.name == "__main__.py" and path.parent.name == "mlflow")


def project_launch(argv: Sequence[str]) -> ProjectLaunch | None:
    """This process's ``mlflow run URI ...`` of a local project directory, or None for any other process.

    Parsed by MLflow's own ``run`` command (without running it), so every option MLflow knows is
    read as MLflow reads it. None as well when the user named the experiment (``--experiment-name``,
    ``--experiment-id`` or ``MLFLOW_EXPERIMENT_NAME``/``_ID``): MLflow then puts the run there.
    """
    if len(argv) < 2 or argv[1] != "run" or not _is_mlflow_cli(argv[0]):
        return None
    from mlflow.cli import run as run_command  # the CLI that is running: imported already

    try:
        context = run_command.make_context("run", list(argv[2:]), resilient_parsing=True)
    except Exception:  # not a command line MLflow accepts: MLflow itself says why
        return None
    given = context.params
    if given.get("experiment_name") or given.get("experiment_id") or os.environ.get("MLFLOW_EXPERIMENT_ID"):
        return None
    directory = Path(str(given.get("uri") or ""))
    if not directory.is_dir():
        return None
    params = dict(item.split("=", 1) for item in given.get("param_list") or () if "=" in item)
    return ProjectLaunch(directory.resolve(), str(given.get("entry_point") or "main"), params)


def is_generated_name(name: str) -> bool:
    """Whether ``name`` is one MLflow made up for an unnamed run (``adjective-noun-NNN``)."""
    match = _GENERATED_NAME.match(name)
    if not match:
        return False
    from mlflow.utils import name_utils

    predicates = getattr(name_utils, "_GENERATOR_PREDICATES", None)
    nouns = getattr(name_utils, "_GENERATOR_NOUNS", None)
    if predicates is None or nouns is None:  # MLflow moved its word lists: the shape is enough
        return True
    return match.group(1) in predicates and match.group(2) in nouns


def name_project_run(client: TrackingClient, run_id: str, name: str) -> bool:
    """Name the run ``name`` unless the user named it; True when renamed."""
    current = client.get_run(run_id).info.run_name or ""
    if current and not is_generated_name(current):
        return False
    client.rename_run(run_id, name)
    return True
