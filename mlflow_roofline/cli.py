"""The ``mlflow-roofline`` command: a click group whose commands load on demand.

Each command lives in its own module under :mod:`mlflow_roofline.commands`; loading them
lazily keeps ``mlflow-roofline --help`` and the light commands (``fit``, ``predict``)
free of the torch import the training commands need.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys

import click

from mlflow_roofline.core.errors import RooflineError, capped
from mlflow_roofline.tracking.store_errors import quiet_store_logging, store_error_line

# name -> (module, attribute, one-line help shown by `mlflow-roofline --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "measure": ("mlflow_roofline.commands.measure", "measure_command", "Measure a command's energy as an MLflow run."),
    "train": ("mlflow_roofline.commands.train", "train_command", "Fine-tune one BERT configuration, measured."),
    "sweep": ("mlflow_roofline.commands.sweep", "sweep_command", "Run a spec's grid of train runs (resumable)."),
    "specs": ("mlflow_roofline.commands.sweep", "specs_command", "List the shipped sweep specs."),
    "import": (
        "mlflow_roofline.commands.import_",
        "import_command",
        "Import runs measured elsewhere (table, CodeCarbon).",
    ),
    "fit": ("mlflow_roofline.commands.fit", "fit_command", "Fit the energy laws and register the model."),
    "predict": ("mlflow_roofline.commands.predict", "predict_command", "Predict or recommend with a registered law."),
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr, _ = COMMANDS[cmd_name]
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The listing uses the static one-liners: no command module is imported for --help.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


MLFLOW_LEVEL_ENV = "MLFLOW_LOGGING_LEVEL"
MLFLOW_PROGRESS_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
"""MLflow's artifact progress bars (three lines for the one small file of a logged law model) are off unless
``--verbose`` or the user set this variable."""
QUIET_MLFLOW_LEVEL = "WARNING"
"""MLflow's own log level unless ``--verbose``: its INFO lines (a system-metrics monitor started and
stopped for every run) drown what the command says."""


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mlflow-roofline")
@click.option("--verbose", "-v", is_flag=True, help="Show MLflow's own INFO lines too.")
def cli(verbose: bool) -> None:
    """Measure, model and predict the energy of transformer fine-tuning with MLflow."""
    quiet_mlflow(verbose)


def quiet_mlflow(verbose: bool) -> None:
    """MLflow's logging at WARNING and its artifact progress bars off, for this process and the ones it starts,
    unless ``verbose`` or the user set ``MLFLOW_LOGGING_LEVEL`` or ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR``."""
    if verbose:
        os.environ[MLFLOW_LEVEL_ENV] = "INFO"
    else:
        os.environ.setdefault(MLFLOW_LEVEL_ENV, QUIET_MLFLOW_LEVEL)
        os.environ.setdefault(MLFLOW_PROGRESS_ENV, "false")
    logging.getLogger("mlflow").setLevel(os.environ[MLFLOW_LEVEL_ENV].upper())  # if MLflow is imported already


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the group, turning our own errors into one line, exit 2.

    A tracking store that cannot be used (read-only, locked past its wait, unreachable
    database) is one line naming the store, exit 2, whichever command met it. Running out
    of memory (a plan or an input too large for the machine) is one line, exit 1.
    """
    quiet_store_logging()
    try:
        _run(argv)
    except MemoryError:
        pass  # out of the handler first: its traceback holds what filled the memory
    else:
        return
    gc.collect()
    click.echo(f"Error: {_out_of_memory(argv)}", err=True)
    sys.exit(1)


def _run(argv: list[str] | None) -> None:
    """Run the group (see :func:`main`); a MemoryError is left to the caller."""
    try:
        # Without standalone mode click returns (not raises) the code of a ctx.exit(code).
        exit_code = cli.main(args=argv, prog_name="mlflow-roofline", standalone_mode=False)
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            sys.exit(exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except Exception as exc:
        line = store_error_line(exc, _tracking_uri())
        if line is None and not isinstance(exc, RooflineError):
            raise
        click.echo(f"Error: {capped(line or str(exc))}", err=True)  # a huge value given is not echoed whole
        sys.exit(2)


def _out_of_memory(argv: list[str] | None) -> str:
    """The line for a command that ran out of memory."""
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if a in COMMANDS), None)
    where = f"{command}: " if command else ""
    return (
        f"{where}out of memory: what was asked is too large for this machine's memory "
        "(a sweep's grid x repeats, a file to read); make it smaller"
    )


def _tracking_uri() -> str:
    """The tracking URI in use (MLflow's own resolution when MLflow is loaded)."""
    if "mlflow" in sys.modules:
        return sys.modules["mlflow"].get_tracking_uri()
    return os.environ.get("MLFLOW_TRACKING_URI", "(MLflow's default)")


if __name__ == "__main__":
    main()
