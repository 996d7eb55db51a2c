"""``mlflow-roofline measure [--experiment NAME] [--meter M] -- COMMAND [ARGS...]``.

Runs COMMAND as a child process with this terminal's stdin/stdout/stderr, measures its
energy and wall time with an energy meter (``estimate`` counts the child's process
tree CPU time, not this wrapper's) and logs one MLflow run: tag
``roofline.run_type=measure``, metrics ``energy_j``, ``time_s``, ``avg_power_w``, tags
``roofline.energy_source``, ``roofline.hardware``, ``roofline.command`` and
``roofline.exit_code``, and ``energy_kwh`` / ``co2e_g`` / ``cost`` with the carbon tags
(``--carbon-intensity``, ``--region``, ``--pue``, ``--price-per-kwh``).
Exits with the command's exit code (128+N when a signal N
killed it); a command that cannot start is refused before any run, with the shell's
codes: 127 when it (or the interpreter its ``#!`` line names) is not found, 126 when it
is not executable or a directory. The run ends FINISHED on exit code 0, KILLED on a
signal, FAILED otherwise. If this process is killed outright (SIGKILL), its watchdog
(:mod:`mlflow_roofline.system.watchdog`) stops the command's process tree and ends the
run KILLED within seconds.

Given ``MLFLOW_RUN_ID`` (``mlflow run`` hands over its fresh run), the command is
measured into that run if it is RUNNING and unmeasured; any other run is refused in one
line, exit 2, untouched.

``auto`` measures the node's NVIDIA GPUs where NVML works, else RAPL, else the
``estimate``. The tracking store is MLflow's own choice (``MLFLOW_TRACKING_URI``, else
``sqlite:///mlflow.db``); the experiment is ``--experiment``, else MLflow's
(``MLFLOW_EXPERIMENT_NAME`` / ``MLFLOW_EXPERIMENT_ID``, else ``Default``).
Bad input (unknown or unavailable meter, no command, a command not found) is reported
in one line before any run is created.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from typing import Any

import click

from mlflow_roofline.commands.options import carbon_options, pop_carbon_options
from mlflow_roofline.core.carbon import CarbonSettings, emissions, resolve_carbon
from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.schema import M_CO2E_G, MAX_TAG_CHARS, TAG_COMMAND, TAG_ERROR, TAG_EXIT_CODE, TAG_RUN_TYPE
from mlflow_roofline.energy import METER_NAMES, EnergyMeter, Measurement, make_meter
from mlflow_roofline.system.executables import NotRunnable, check_runnable, start_failure
from mlflow_roofline.system.signals import forwarding_signals
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs


@click.command(
    "measure",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--experiment", default=None, metavar="NAME", help="MLflow experiment (default: MLflow's own choice).")
@click.option(
    "--meter",
    default="auto",
    show_default=True,
    metavar="|".join(METER_NAMES),
    help="Energy meter; auto picks nvml, nvml_power, rapl, then estimate.",
)
@click.option(
    "--watts-per-core",
    default=None,
    metavar="WATTS",
    help="estimate meter: watts per busy core (default: $ROOFLINE_ESTIMATE_WATTS_PER_CORE, else 6 W).",
)
@carbon_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def measure_command(
    experiment: str | None, meter: str, watts_per_core: str | None, command: tuple[str, ...], **carbon: str | None
) -> None:
    """Run COMMAND, measure its energy and time, log them as an MLflow run."""
    if not command:
        raise ConfigError(
            "COMMAND", "give the command to measure after --, e.g. mlflow-roofline measure -- python train.py"
        )
    settings = resolve_carbon(**pop_carbon_options(carbon))
    energy_meter = make_meter(meter, device="auto", include_self=False, watts_per_core=watts_per_core)
    try:
        try:
            check_runnable(command[0])
        except NotRunnable as exc:  # the shell's exit code: 127 not found, 126 cannot run
            click.echo(f"Error: {exc}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(measure(list(command), energy_meter, experiment, settings))
    finally:
        energy_meter.close()


def measure(
    command: list[str], meter: EnergyMeter, experiment: str | None, carbon: CarbonSettings | None = None
) -> int:
    """Run ``command`` in an MLflow run measured by ``meter``; return the exit code for this process.

    ``carbon`` converts the energy to emissions and cost (None: from the ``ROOFLINE_*`` env vars).
    """
    # Started first, so that its own start-up is over before the measured window opens.
    with Watchdog() as watchdog:
        return _measure(command, meter, experiment, watchdog, carbon)


def _measure(
    command: list[str], meter: EnergyMeter, experiment: str | None, watchdog: Watchdog, carbon: CarbonSettings | None
) -> int:
    import mlflow
    from mlflow.entities import RunStatus

    from mlflow_roofline.tracking.energy import log_measurement

    client = mlflow.MlflowClient()
    run_id = _open_run(client, command, experiment)
    click.echo(f"mlflow-roofline measure: run {run_id}, energy meter {meter.selection}", err=True)
    status, code = RunStatus.FAILED, 1
    measurement: Measurement | None = None
    # If this process is killed outright, the watchdog stops the command and ends the run KILLED.
    watchdog.call(END_ORPHANED_RUN, **orphan_hook_kwargs(run_id))
    try:
        meter.begin()
        try:
            returncode = _run_forwarding_signals(command, watchdog)
        except OSError as exc:  # changed since it was checked (permissions, interpreter)
            failure = start_failure(command[0], exc)
            client.set_tag(run_id, TAG_ERROR, str(failure))
            click.echo(f"Error: {failure}", err=True)
            return failure.exit_code
        finally:
            measurement = meter.end()
        if returncode >= 0:
            code = returncode
            status = RunStatus.FINISHED if returncode == 0 else RunStatus.FAILED
        else:
            code = 128 - returncode
            status = RunStatus.KILLED
            client.set_tag(run_id, TAG_ERROR, f"killed by {signal.Signals(-returncode).name}")
        client.set_tag(run_id, TAG_EXIT_CODE, str(code))
        if measurement.error:
            click.echo(f"mlflow-roofline measure: energy not measured: {measurement.error}", err=True)
        click.echo(
            f"mlflow-roofline measure: run {run_id}: {_summary(measurement, carbon)}, exit code {code}", err=True
        )
        return code
    except KeyboardInterrupt:
        status, code = RunStatus.KILLED, 130
        return code
    finally:
        if measurement is not None:
            log_measurement(measurement, meter.hardware, run_id, carbon)
        client.set_terminated(run_id, RunStatus.to_string(status))


def _open_run(client: Any, command: list[str], experiment: str | None) -> str:
    """The run to log into: the one ``MLFLOW_RUN_ID`` names if it may be joined, else a new one.

    Raises:
        RunRefused: ``MLFLOW_RUN_ID`` names a run that does not exist, has ended or is not
            a fresh measure run (left untouched).
        RooflineError: the experiment cannot hold a new run.
    """
    import mlflow

    from mlflow_roofline.tracking.run_ownership import RUN_ID_ENV, check_joinable

    tags = {TAG_RUN_TYPE: "measure", TAG_COMMAND: shlex.join(command)[:MAX_TAG_CHARS]}
    run_id = os.environ.get(RUN_ID_ENV)
    if run_id:
        check_joinable(client, run_id, "measure")
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
        return run_id
    try:
        run = client.create_run(
            _experiment_id(client, experiment), run_name=f"measure-{os.path.basename(command[0])}", tags=tags
        )
    except mlflow.exceptions.MlflowException as exc:
        where = experiment or "the default experiment"
        raise RooflineError(f"experiment: cannot start a run in {where}: {exc.message}") from exc
    return run.info.run_id


def _summary(m: Measurement, carbon: CarbonSettings | None) -> str:
    energy = "energy n/a" if m.energy_j is None else f"{m.energy_j:.4g} J"
    if m.energy_j is not None and carbon is not None and carbon.known:
        energy += f", {emissions(m.energy_j, carbon)[M_CO2E_G]:.4g} g CO2e"
    return f"{energy} ({m.source}) in {m.time_s:.3f} s"


def _experiment_id(client: Any, name: str | None) -> str:
    """``--experiment`` (created if missing), else MLflow's environment variables, else Default."""
    from mlflow_roofline.tracking.client import TrackingClient
    from mlflow_roofline.tracking.experiments import experiment_id_for

    return experiment_id_for(TrackingClient(), name or None, default=None)


def _run_forwarding_signals(command: list[str], watchdog: Watchdog) -> int:
    """Run the command; pass SIGTERM/SIGHUP on to it; return its returncode (-N: signal N).

    SIGINT is ignored here while the child runs: a terminal's Ctrl-C reaches the child
    directly (same process group) and the wrapper waits for the child's own exit. The
    watchdog stops the command's process tree if this process dies first.
    """
    proc = subprocess.Popen(command)
    watchdog.stop_tree(proc.pid)
    with forwarding_signals(proc):
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # pragma: no cover - SIGINT is ignored while waiting
                continue
