"""``mlflow-roofline sweep SPEC`` and ``mlflow-roofline specs``.

``sweep`` parses its options and calls :func:`mlflow_roofline.sweep.entry.run_from_cli`,
which loads the spec, plans it, and either prints the plan (``--dry-run``) or runs it. The
MLproject entry point ``sweep`` calls it as ``sweep {spec} --retry-failed {retry_failed}``.
"""

from __future__ import annotations

import sys

import click

from mlflow_roofline.commands.executor_options import EXECUTOR_OPTION_NAMES, executor_options
from mlflow_roofline.commands.options import carbon_options, parse_bool, pop_carbon_options
from mlflow_roofline.sweep.plan import MAX_GRID_POINTS


@click.command("sweep")
@click.argument("spec")
@click.option("--dry-run", is_flag=True, help="Print the plan and its counts; run nothing.")
@click.option(
    "--retry-failed",
    default="false",
    is_flag=False,
    flag_value="true",
    metavar="[true|false]",
    help="Rerun configurations whose earlier run FAILED (alone: true).",
)
@click.option("--experiment", default=None, help="Experiment for the runs (default: the spec's `experiment`).")
@click.option("--no-progress", is_flag=True, help="No progress bar (log lines only).")
@click.option(
    "--max-configs",
    type=click.IntRange(min=1),
    default=MAX_GRID_POINTS,
    show_default=True,
    help="Most runs a spec may ask for (grid points x repeats); a larger sweep is refused before it is expanded.",
)
@executor_options
@carbon_options
def sweep_command(
    spec: str,
    dry_run: bool,
    retry_failed: str,
    experiment: str | None,
    no_progress: bool,
    max_configs: int,
    **options: str | int | bool | None,
) -> None:
    """Run the grid of train runs in SPEC (a shipped name, see `specs`, or a YAML path).

    Resumable: configurations that already have a FINISHED run with the same
    roofline.config_hash in the experiment are skipped. Exits 1 if a configuration
    failed, 128+signal when interrupted. The carbon options (over the spec's keys of the
    same names) are passed to every train run.
    """
    from mlflow_roofline.sweep.entry import run_from_cli  # the stage loads MLflow: not at CLI start

    retry = parse_bool("retry_failed", retry_failed)
    carbon = pop_carbon_options(options)
    code = run_from_cli(
        spec,
        dry_run=dry_run,
        retry_failed=retry,
        experiment=experiment,
        progress=not no_progress,
        max_configs=max_configs,
        carbon=carbon,
        executor_options={name: options[name] for name in EXECUTOR_OPTION_NAMES},
        launch=str(options["launch"]),
        echo=click.echo,
        warn=lambda line: click.echo(line, err=True),
    )
    if code is not None:
        sys.exit(code)  # SystemExit: click's non-standalone main drops ctx.exit codes


@click.command("specs")
def specs_command() -> None:
    """List the shipped sweep specs with their size (configurations, skipped grid points)."""
    from mlflow_roofline.sweep.entry import list_specs  # the stage loads MLflow: not at CLI start

    list_specs(click.echo)
