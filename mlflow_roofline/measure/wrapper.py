"""``mlflow-roofline measure``: run a command, meter it, log one MLflow run; exit as it did.

Logged: tag ``roofline.run_type=measure``, metrics ``energy_j``, ``time_s``,
``avg_power_w``, tags ``roofline.energy_source``, ``roofline.hardware``,
``roofline.command`` and ``roofline.exit_code``, and ``energy_kwh`` / ``co2e_g`` /
``cost`` with the carbon tags, and ``embodied_co2e_g`` / ``water_l`` with their source
tags or the tags naming a missing figure (every metered device counted as held by the
command: :mod:`~mlflow_roofline.core.footprint_fields`); while the command runs, the
window's running energy as the system metrics ``system/..._energy_wh``
(:mod:`~mlflow_roofline.tracking.system_energy`). The wrapper exits with the
command's exit code (128+N when a signal N killed it); a command that cannot start is refused before any run, with
the shell's codes: 127 when it (or the interpreter its ``#!`` line names) is not found,
126 when it is not executable or a directory. The run ends FINISHED on exit code 0,
KILLED when the wrapper was interrupted (SIGTERM or SIGHUP, passed on to the command's
whole process tree, or Ctrl-C), FAILED otherwise: a command that crashed on a signal
(SIGSEGV, SIGABRT, the OOM killer's SIGKILL) is FAILED with the signal named in
``roofline.error``. The command's whole process tree is followed, daemons it detaches
included (:mod:`~mlflow_roofline.measure.command_process`); what still runs when it exits
is named in one line (or, after an interruption, stopped). If the wrapper is killed
outright (SIGKILL), its watchdog (:mod:`mlflow_roofline.system.watchdog`) stops the
command's process tree and ends the run KILLED within seconds.

``auto`` measures the node's NVIDIA GPUs where NVML works, else RAPL, else the
``estimate`` (the child's process-tree CPU time, not the wrapper's). Bad input (unknown
or unavailable meter, no command, a command not found) is reported in one line before
any run is created.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from mlflow_roofline.core.carbon import CarbonSettings, resolve_carbon_live
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.footprint_fields import footprint_fields
from mlflow_roofline.core.schema import TAG_ERROR, TAG_EXIT_CODE
from mlflow_roofline.energy.base import EnergyMeter
from mlflow_roofline.energy.live import LiveEnergy
from mlflow_roofline.energy.readings import Measurement
from mlflow_roofline.energy.select import make_meter
from mlflow_roofline.measure.command_process import CommandExit, CommandResult, command_exit, run_command
from mlflow_roofline.measure.measured_run import open_measure_run, summary
from mlflow_roofline.system.executables import NotRunnable, check_runnable, start_failure
from mlflow_roofline.system.process_tree import subreaping
from mlflow_roofline.system.signals import deferring_stop_signals
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.energy_logging import log_measurement
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs
from mlflow_roofline.tracking.run_ending import end_run_surely
from mlflow_roofline.tracking.system_energy import SystemEnergy

Echo = Callable[[str], None]
"""Where the wrapper's own lines go (stderr: the command owns stdout)."""


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def measure_command_line(
    command: list[str],
    meter: str = "auto",
    experiment: str | None = None,
    watts_per_core: str | None = None,
    carbon: Mapping[str, str] | None = None,
    echo: Echo = _to_stderr,
) -> int:
    """The whole ``mlflow-roofline measure``; returns the exit code for this process.

    Args:
        command: the command and its arguments.
        meter: an energy meter name (``auto`` picks the best one available).
        experiment: the experiment of a new run (None: MLflow's own choice).
        watts_per_core: the ``estimate`` meter's watts per busy core (None: env var, else 6 W).
        carbon: keyword arguments of :func:`~mlflow_roofline.core.carbon.resolve_carbon`.
        echo: where the wrapper's lines go.
    Raises:
        ConfigError: no command, or a bad carbon setting (before any run).
        MeterError: an unknown or unavailable meter (before any run).
    """
    if not command:
        raise ConfigError(
            "COMMAND", "give the command to measure after --, e.g. mlflow-roofline measure -- python train.py"
        )
    given = dict(carbon or {})
    settings = resolve_carbon_live(
        given.get("carbon_intensity"), given.get("region"), given.get("pue"), given.get("price_per_kwh")
    )
    energy_meter = make_meter(meter, device="auto", include_self=False, watts_per_core=watts_per_core)
    if hasattr(energy_meter, "rescan_s"):  # estimate: one window, so list the descendants at its end too,
        energy_meter.rescan_s = 0.0  # however short it was (a daemon adopted meanwhile is counted)
    try:
        try:
            check_runnable(command[0])
        except NotRunnable as exc:  # the shell's exit code: 127 not found, 126 cannot run
            echo(f"Error: {exc}")
            return exc.exit_code
        return measure(command, energy_meter, experiment, settings, echo)
    finally:
        energy_meter.close()


def measure(
    command: list[str],
    meter: EnergyMeter,
    experiment: str | None,
    carbon: CarbonSettings | None = None,
    echo: Echo = _to_stderr,
) -> int:
    """Run ``command`` in an MLflow run measured by ``meter``; return the exit code for this process.

    ``carbon`` converts the energy to emissions and cost (None: from the ``ROOFLINE_*`` env vars).
    """
    # The watchdog is started first, so that its own start-up is over before the measured window
    # opens. This process adopts the command's orphans until its energy is read (a daemon orphaned
    # late still counts) and stops adopting afterwards: a caller that runs measure in-process (a
    # test runner) must not go on adopting processes it never reaps.
    with Watchdog() as watchdog, subreaping():
        return _measure(command, meter, experiment, watchdog, carbon, echo)


def tree_lines(result: CommandResult, source: str) -> list[str]:
    """What the wrapper says about the command's process tree: what it could not follow or left running."""
    lines = []
    if not result.followed and source == "estimate":
        lines.append(
            "processes the command detached (double fork, setsid) cannot be followed on this system: "
            "their CPU time is not counted"
        )
    if result.left_running:
        pids = ", ".join(str(pid) for pid in result.left_running[:10])
        more = "" if len(result.left_running) <= 10 else f" and {len(result.left_running) - 10} more"
        lines.append(
            f"{len(result.left_running)} process(es) the command started still run after it exited "
            f"(pid {pids}{more}): counted up to its exit, left running"
        )
    if result.stopped:
        lines.append(f"stopped {result.stopped} process(es) the command had left running")
    return lines


def _measure(
    command: list[str],
    meter: EnergyMeter,
    experiment: str | None,
    watchdog: Watchdog,
    carbon: CarbonSettings | None,
    echo: Echo,
) -> int:
    client = TrackingClient()
    run_id = open_measure_run(client, command, experiment)
    echo(f"mlflow-roofline measure: run {run_id}, energy meter {meter.selection}")
    outcome = CommandExit(1, "FAILED")
    measurement: Measurement | None = None
    # If this process is killed outright, or exits before the store holds the run ended (interrupts
    # cut every ending short), the watchdog stops the command and ends the run KILLED.
    hook = orphan_hook_kwargs(run_id)
    watchdog.arm(END_ORPHANED_RUN, **hook)
    live = LiveEnergy(meter)  # its running total: the run's system/..._energy_wh while the command runs
    system_energy = SystemEnergy(run_id, live, client)
    try:
        live.begin()
        system_energy.start()
        try:
            result = run_command(command, watchdog)
        except OSError as exc:  # changed since it was checked (permissions, interpreter)
            failure = start_failure(command[0], exc)
            client.set_tag(run_id, TAG_ERROR, str(failure))
            echo(f"Error: {failure}")
            return failure.exit_code
        finally:
            measurement = live.end()
            system_energy.stop()
        outcome = command_exit(result.returncode, result.interrupted_by)
        if outcome.error is not None:
            client.set_tag(run_id, TAG_ERROR, outcome.error)
        client.set_tag(run_id, TAG_EXIT_CODE, str(outcome.code))
        for line in tree_lines(result, meter.source):
            echo(f"mlflow-roofline measure: {line}")
        if measurement.error:
            echo(f"mlflow-roofline measure: energy not measured: {measurement.error}")
        echo(f"mlflow-roofline measure: run {run_id}: {summary(measurement, carbon)}, exit code {outcome.code}")
        return outcome.code
    except KeyboardInterrupt:
        outcome = CommandExit(130, "KILLED", "interrupted by SIGINT (Ctrl-C)")
        client.set_tag(run_id, TAG_ERROR, outcome.error or "")
        return outcome.code
    finally:
        with deferring_stop_signals():  # a second and a third Ctrl-C do not cut the logging and the end short
            if measurement is not None:
                log_measurement(measurement, meter.hardware, run_id, carbon, client=client, scope=meter.scope)
                if carbon is not None:
                    footprint = footprint_fields(
                        meter.hardware, len(meter.devices), measurement.time_s, measurement.energy_j, carbon
                    )
                    client.log(run_id, metrics=footprint[0], tags=footprint[1])
            if end_run_surely(client, run_id, outcome.status):
                watchdog.cancel(END_ORPHANED_RUN, **hook)
