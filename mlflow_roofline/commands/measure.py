"""``mlflow-roofline measure [--experiment NAME] [--meter M] -- COMMAND [ARGS...]``.

Runs COMMAND as a child process, measures its energy and wall time and logs one MLflow
run; exits with the command's exit code. The stage is :mod:`mlflow_roofline.measure`
(:func:`~mlflow_roofline.measure.wrapper.measure_command_line`).
"""

from __future__ import annotations

import sys

import click

from mlflow_roofline.commands.options import carbon_options, pop_carbon_options
from mlflow_roofline.energy.select import METER_NAMES
from mlflow_roofline.measure.wrapper import measure_command_line


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
    code = measure_command_line(
        list(command),
        meter,
        experiment,
        watts_per_core,
        pop_carbon_options(carbon),
        echo=lambda line: click.echo(line, err=True),
    )
    sys.exit(code)
