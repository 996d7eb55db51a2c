"""The sweep command's options that choose where configurations run (``--executor`` and its settings)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from mlflow_roofline.core.schema import EXECUTORS, LAUNCHES

Command = TypeVar("Command", bound=Callable[..., object])

EXECUTOR_OPTION_NAMES: tuple[str, ...] = (
    "executor",
    "ray_address",
    "slurm_partition",
    "slurm_account",
    "slurm_time_min",
    "slurm_cluster",
    "slurm_folder",
    "workers_on_this_host",
)
"""The options :meth:`~mlflow_roofline.sweep.remote.executors.ExecutorSettings.from_options` reads."""


def executor_options(command: Command) -> Command:
    """Add ``--executor`` and the Ray and Slurm options to a click command."""
    options = [
        click.option(
            "--executor",
            type=click.Choice(EXECUTORS),
            default="local",
            show_default=True,
            help="Where configurations run: here one after another, on a Ray cluster, or as Slurm jobs.",
        ),
        click.option(
            "--launch",
            type=click.Choice(LAUNCHES),
            default="warm",
            show_default=True,
            help="local executor: fork each job's ranks from a server that imported torch once (warm), "
            "or run each configuration in an `mlflow-roofline train` process of its own (fresh).",
        ),
        click.option(
            "--ray-address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)."
        ),
        click.option("--slurm-partition", default=None, help="Slurm partition (default: the spec's slurm.partition)."),
        click.option("--slurm-account", default=None, help="Slurm account (default: the spec's slurm.account)."),
        click.option(
            "--slurm-time-min",
            type=click.IntRange(min=1),
            default=None,
            help="Slurm time limit per configuration, minutes (default: slurm.time_min, else 60).",
        ),
        click.option(
            "--slurm-cluster",
            type=click.Choice(["auto", "local"]),
            default="auto",
            show_default=True,
            help="auto: Slurm through submitit; local: submitit's local executor (jobs as local processes).",
        ),
        click.option(
            "--slurm-folder",
            default="roofline-slurm",
            show_default=True,
            help="Where submitit keeps job scripts and logs.",
        ),
        click.option(
            "--workers-on-this-host",
            is_flag=True,
            help="Allow a sqlite:/file: tracking store with ray/slurm (every worker runs on this host).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
