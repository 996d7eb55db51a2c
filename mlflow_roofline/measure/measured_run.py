"""The MLflow run a measured command is logged into, through the TrackingClient.

Given ``MLFLOW_RUN_ID`` (``mlflow run`` hands over its fresh run), the command is measured
into that run if it is RUNNING and unmeasured; any other run is refused untouched
(:func:`~mlflow_roofline.tracking.run_ownership.check_joinable`). Otherwise a new run is
opened in ``--experiment``, else MLflow's (``MLFLOW_EXPERIMENT_NAME`` /
``MLFLOW_EXPERIMENT_ID``, else ``Default``).
"""

from __future__ import annotations

import os
import shlex

from mlflow_roofline.core.carbon import CarbonSettings, emissions
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import M_CO2E_G, MAX_TAG_CHARS, TAG_COMMAND, TAG_RUN_TYPE
from mlflow_roofline.energy.readings import Measurement
from mlflow_roofline.tracking.client import TrackingClient, TrackingError
from mlflow_roofline.tracking.experiments import experiment_id_for
from mlflow_roofline.tracking.run_ownership import RUN_ID_ENV, check_joinable

RUN_TYPE = "measure"


def open_measure_run(client: TrackingClient, command: list[str], experiment: str | None) -> str:
    """The run to log into: the one ``MLFLOW_RUN_ID`` names if it may be joined, else a new one.

    Raises:
        RunRefused: ``MLFLOW_RUN_ID`` names a run that does not exist, has ended or is not
            a fresh measure run (left untouched).
        RooflineError: the experiment cannot hold a new run.
    """
    tags = {TAG_RUN_TYPE: RUN_TYPE, TAG_COMMAND: shlex.join(command)[:MAX_TAG_CHARS]}
    run_id = os.environ.get(RUN_ID_ENV)
    if run_id:
        check_joinable(client, run_id, RUN_TYPE)
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
        return run_id
    try:
        # --experiment (created if missing), else MLflow's environment variables, else Default.
        experiment_id = experiment_id_for(client, experiment or None, default=None)
        return client.open_run(experiment_id, run_name=f"measure-{os.path.basename(command[0])}", tags=tags)
    except TrackingError as exc:
        where = experiment or "the default experiment"
        raise RooflineError(f"experiment: cannot start a run in {where}: {exc.message}") from exc


def summary(m: Measurement, carbon: CarbonSettings | None) -> str:
    """One line on a measurement: energy (and emissions when known, or why not when a provider was asked), source
    and time."""
    energy = "energy n/a" if m.energy_j is None else f"{m.energy_j:.4g} J"
    if m.energy_j is not None and carbon is not None and carbon.known:
        energy += f", {emissions(m.energy_j, carbon)[M_CO2E_G]:.4g} g CO2e"
    elif m.energy_j is not None and carbon is not None and carbon.note:
        energy += f", co2e unknown ({carbon.note})"
    return f"{energy} ({m.source}) in {m.time_s:.3f} s"
