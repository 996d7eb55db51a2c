"""``mlflow-roofline import``: measurements from another tool as train runs the fit uses.

Exit status: 0 when every row was imported or already present, 1 when some rows were
refused, or held by another import's RUNNING run past the wait (the others are imported
all the same), 2 when the file or mapping cannot be used
(a required column missing from the file, unknown columns under ``--strict``), 128 + the
signal's number when SIGTERM or SIGINT stopped it (between rows: the row in flight is
stored first, or ended KILLED by a second signal; running the import again stores the
rest, once each).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import DEFAULT_EXPERIMENT


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--experiment", default=DEFAULT_EXPERIMENT, show_default=True, help="Experiment the runs go into.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "codecarbon"]),
    default="table",
    show_default=True,
    help="table: CSV/Parquet in the run schema's names; codecarbon: CodeCarbon's emissions.csv.",
)
@click.option(
    "--mapping",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="YAML: column renames, energy/time units, constants, per-row fields (see docs/import.md).",
)
@click.option("--dry-run", is_flag=True, help="Check every row and print the summary; log nothing.")
@click.option(
    "--strict", is_flag=True, help="Refuse the file when it has columns the run schema does not know (default: ignore)."
)
def import_command(file: Path, experiment: str, fmt: str, mapping: Path | None, dry_run: bool, strict: bool) -> None:
    """Import measured runs from FILE into EXPERIMENT as FINISHED train runs."""
    from mlflow_roofline.ingest.writer import import_file  # imports MLflow, heavy: only when the command runs

    try:
        counts = import_file(file, experiment, fmt, mapping, dry_run, strict)
    except Interrupted as exc:
        click.echo(
            f"Error: {exc.reason}; the import stopped between rows, nothing is left RUNNING: "
            "run it again to store the rest",
            err=True,
        )
        sys.exit(128 + exc.signum)
    warning = counts.warning()
    if warning:
        click.echo(warning, err=True)
    for error in counts.refused:
        click.echo(f"refused {error}", err=True)
    for line in counts.held_lines():
        click.echo(line, err=True)
    click.echo(counts.summary(dry_run))
    if counts.refused or counts.held:
        raise click.exceptions.Exit(1)
