"""``mlflow-roofline train``: one measured fine-tuning configuration (BERT or GPT-2), one MLflow run.

The job's options are the job table's columns (:mod:`mlflow_roofline.commands.job_options`), as
the MLproject ``train`` entry point passes them (numbers may arrive as ``"4.0"``), plus
``--meter``, ``--experiment``, ``--seed`` and the carbon options. See :mod:`mlflow_roofline.train.run`.
"""

from __future__ import annotations

import sys

import click

from mlflow_roofline.commands.job_options import pop_job, train_job_options
from mlflow_roofline.commands.options import carbon_options, pop_carbon_options
from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.energy.select import METER_NAMES
from mlflow_roofline.train.run import train


@click.command("train")
@train_job_options
@click.option("--meter", metavar="NAME", default="auto", show_default=True, help=f"One of {', '.join(METER_NAMES)}.")
@click.option(
    "--experiment",
    default=None,
    help="Experiment of a new run [default: roofline-bert]; ignored when MLFLOW_RUN_ID names a run to log into.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the weights and the batches.")
@click.option(
    "--system-metrics/--no-system-metrics",
    default=None,
    help="Log MLflow's system metrics (CPU, memory, GPU) for the run's System metrics tab "
    "[default: on, unless MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false].",
)
@carbon_options
def train_command(
    meter: str, experiment: str | None, seed: int, system_metrics: bool | None, **options: str | None
) -> None:
    """Fine-tune one configuration, measure its energy and time, log one MLflow run.

    Example: mlflow-roofline train --num-layers 2 --hidden-size 64 --num-heads 2
    --ffn-size 256 --seq-len 32 --batch-size 8 --strategy ddp --num-devices 2

    A GPT-2 with LoRA: add --arch decoder --vocab-size 1000 --peft lora --lora-rank 4.
    """
    carbon = pop_carbon_options(options)
    job = pop_job(options, request=False)
    try:
        run_id, result = train(
            job, meter=meter, experiment=experiment, seed=seed, carbon=carbon, system_metrics=system_metrics
        )
    except Interrupted as exc:  # SIGTERM/SIGINT: the run has ended KILLED, the job is stopped
        click.echo(f"Error: {exc.reason}; the run ended KILLED", err=True)
        sys.exit(128 + exc.signum)
    energy = "not measured" if result.energy_j is None else f"{result.energy_j:.3f} J ({result.energy_source})"
    click.echo(f"run {run_id}: {result.time_s:.3f} s, energy {energy}, final loss {result.losses[-1]:.4f}")
