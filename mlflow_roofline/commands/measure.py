"""``mlflow-roofline measure [--experiment NAME] [--meter M] -- COMMAND [ARGS...]``.

Runs COMMAND as a child process with this terminal's stdin/stdout/stderr, measures its
energy and wall time with an energy meter (``estimate`` counts the child's process
tree CPU time, not this wrapper's) and logs one MLflow run: tag
``roofline.run_type=measure``, metrics ``energy_j``, ``time_s``, ``avg_power_w``, tags
``roofline.energy_source``, ``roofline.hardware``, ``roofline.command`` and
``roofline.exit_code``, and ``energy_kwh`` / ``co2e_g`` / ``cost`` with the carbon tags
(``--carbon-intensity``, ``--region``, ``--pue``, ``--price-per-kwh``). Exits with the command's exit code (128+N when a signal N
killed it, 127 when it is not found, 126 when it cannot be started); the run ends FINISHED on exit code 0,
KILLED on a signal, FAILED otherwise.

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
import shutil
import signal
import subprocess
import sys
from typing import Any

import click

from mlflow_roofline.commands.options import carbon_options, pop_carbon_options
from mlflow_roofline.core.carbon import CarbonSettings, emissions, resolve_carbon
from mlflow_roofline.energy import METER_NAMES, EnergyMeter, Measurement, make_meter
from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_COMMAND, TAG_ERROR, TAG_EXIT_CODE, TAG_RUN_TYPE
from mlflow_roofline.system.signals import forwarding_signals

EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126


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
        raise ConfigError("COMMAND", "give the command to measure after --, e.g. mlflow-roofline measure -- python train.py")
    settings = resolve_carbon(**pop_carbon_options(carbon))
    energy_meter = make_meter(meter, device="auto", include_self=False, watts_per_core=watts_per_core)
    try:
        if shutil.which(command[0]) is None:
            click.echo(f"Error: COMMAND: {command[0]!r} is not an executable on PATH", err=True)
            sys.exit(EXIT_NOT_FOUND)
        sys.exit(measure(list(command), energy_meter, experiment, settings))
    finally:
        energy_meter.close()


def measure(
    command: list[str], meter: EnergyMeter, experiment: str | None, carbon: CarbonSettings | None = None
) -> int:
    """Run ``command`` in an MLflow run measured by ``meter``; return the exit code for this process.

    ``carbon`` converts the energy to emissions and cost (None: from the ``ROOFLINE_*`` env vars).
    """
    import mlflow
    from mlflow.entities import RunStatus

    from mlflow_roofline.tracking.energy import log_measurement

    client = mlflow.MlflowClient()
    try:
        run = client.create_run(
            _experiment_id(client, experiment),
            run_name=f"measure-{os.path.basename(command[0])}",
            tags={TAG_RUN_TYPE: "measure", TAG_COMMAND: shlex.join(command)[:MAX_TAG_CHARS]},
        )
    except mlflow.exceptions.MlflowException as exc:
        raise RooflineError(f"experiment: cannot start a run in {experiment or 'the default experiment'}: {exc.message}") from exc
    run_id = run.info.run_id
    click.echo(f"mlflow-roofline measure: run {run_id}, energy meter {meter.selection}", err=True)
    status, code = RunStatus.FAILED, 1
    measurement: Measurement | None = None
    try:
        meter.begin()
        try:
            returncode = _run_forwarding_signals(command)
        except OSError as exc:  # found on PATH but not startable (permissions, bad interpreter)
            client.set_tag(run_id, TAG_ERROR, f"cannot start {command[0]}: {exc}")
            click.echo(f"Error: COMMAND: cannot start {command[0]!r}: {exc}", err=True)
            return EXIT_CANNOT_RUN
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


def _summary(m: Measurement, carbon: CarbonSettings | None) -> str:
    energy = "energy n/a" if m.energy_j is None else f"{m.energy_j:.4g} J"
    if m.energy_j is not None and carbon is not None and carbon.known:
        energy += f", {emissions(m.energy_j, carbon)['co2e_g']:.4g} g CO2e"
    return f"{energy} ({m.source}) in {m.time_s:.3f} s"


def _experiment_id(client: Any, name: str | None) -> str:
    """``--experiment`` (created if missing), else MLflow's environment variables, else Default."""
    name = name or os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if name:
        from mlflow_roofline.tracking.experiments import get_or_create_experiment

        return get_or_create_experiment(client, name)
    return os.environ.get("MLFLOW_EXPERIMENT_ID") or "0"


def _run_forwarding_signals(command: list[str]) -> int:
    """Run the command; pass SIGTERM/SIGHUP on to it; return its returncode (-N: signal N).

    SIGINT is ignored here while the child runs: a terminal's Ctrl-C reaches the child
    directly (same process group) and the wrapper waits for the child's own exit.
    """
    proc = subprocess.Popen(command)
    with forwarding_signals(proc):
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # pragma: no cover - SIGINT is ignored while waiting
                continue
