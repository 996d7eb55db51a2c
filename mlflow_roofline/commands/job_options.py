"""The job's click options, one per column of the job table (:mod:`mlflow_roofline.core.job_table`).

``train`` takes every column as text, as the MLproject passes it (numbers may arrive as
``"4.0"``; :meth:`~mlflow_roofline.core.config.TrainConfig.from_mapping` parses and checks
them). ``predict`` takes the request columns typed: the sizes required, the placement with
its defaults, the kind columns optional (left out of the request when not given, so the
served model applies its defaults).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import TypeVar

import click

from mlflow_roofline.core import job_table
from mlflow_roofline.core.job_table import JobColumn

Command = TypeVar("Command", bound=Callable[..., object])
OptionValue = TypeVar("OptionValue")
"""The value type of a command's job options (text for ``train``, typed for ``predict``)."""

_METAVARS: Mapping[str, str] = {"int": "INT", "text": "NAME", "bool": "BOOL"}


def _train_option(entry: JobColumn) -> Callable[[Command], Command]:
    """``entry`` as a text option of ``train``: its default as text, required sizes without one."""
    default = None if entry.default is None else str(entry.default).lower()
    help_text = entry.describe() + (" (required)" if entry.required else "")
    return click.option(
        entry.option, metavar=_METAVARS[entry.type], default=default, show_default=default is not None, help=help_text
    )


def _predict_option(entry: JobColumn) -> Callable[[Command], Command]:
    """``entry`` as a typed option of ``predict``: a size is required, a kind column optional."""
    kind: click.ParamType = click.Choice(entry.levels) if entry.levels else click.INT
    if entry.type == "bool":
        kind = click.BOOL
    help_text = entry.sentence
    if entry.group == "size":
        return click.option(entry.option, type=kind, required=True, help=help_text)
    if entry.group == "placement":
        return click.option(entry.option, type=kind, default=entry.default, show_default=True, help=help_text)
    if entry.default_by is not None:
        help_text += " " + entry.auto_text
        default = f"{job_table.AUTO}, by {entry.default_by[0]}"
    else:
        default = entry.served_default or str(entry.default).lower()
    return click.option(entry.option, type=kind, default=None, help=f"{help_text}  [default: {default}]")


def train_job_options(command: Command) -> Command:
    """Add one text option per job column to ``train`` (keyword arguments named as the columns)."""
    for entry in reversed(job_table.JOB_COLUMNS):
        command = _train_option(entry)(command)
    return command


def predict_job_options(command: Command) -> Command:
    """Add one typed option per request column of the job table to ``predict``."""
    for entry in reversed([c for c in job_table.JOB_COLUMNS if c.request]):
        command = _predict_option(entry)(command)
    return command


def pop_job(options: MutableMapping[str, OptionValue | None], *, request: bool) -> dict[str, OptionValue]:
    """Remove the job's columns from a command's keyword arguments; return those given (not None).

    ``request``: only the served model's columns (``predict``), else every column (``train``).
    """
    names = job_table.names(request=True) if request else tuple(c.name for c in job_table.JOB_COLUMNS)
    given = {name: options.pop(name, None) for name in names}
    return {name: value for name, value in given.items() if value is not None}
