"""``mlflow-roofline train``: one measured fine-tuning configuration (BERT or GPT-2), one MLflow run.

The options are those the MLproject ``train`` entry point passes (numbers may arrive as
``"4.0"``), plus ``--experiment`` and ``--seed``. See :mod:`mlflow_roofline.train.run`.
"""

from __future__ import annotations

import sys

import click

from mlflow_roofline.commands.options import carbon_options, pop_carbon_options
from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import (
    ARCHS,
    DEFAULT_LORA_RANK,
    DEFAULT_VOCAB_SIZE,
    DEVICE_CHOICES,
    PEFTS,
    PRECISIONS,
    STRATEGIES,
)
from mlflow_roofline.energy.select import METER_NAMES
from mlflow_roofline.train.run import train

_NUMBER_HELP = "an integer (MLflow may pass it as 4.0)"


@click.command("train")
@click.option("--num-layers", metavar="INT", help=f"L, encoder layers (required); {_NUMBER_HELP}.")
@click.option("--hidden-size", metavar="INT", help="d, model width (required).")
@click.option("--num-heads", metavar="INT", help="h, attention heads, dividing d (required).")
@click.option("--ffn-size", metavar="INT", help="ff, feed-forward width (required).")
@click.option("--seq-len", metavar="INT", help="S, tokens per sample (required).")
@click.option(
    "--batch-size", metavar="INT", help="Global batch: samples per optimizer step over all devices (required)."
)
@click.option("--num-steps", metavar="INT", default="20", show_default=True, help="Measured optimizer steps.")
@click.option("--warmup-steps", metavar="INT", default="3", show_default=True, help="Steps before the measured window.")
@click.option(
    "--strategy", metavar="NAME", default="single", show_default=True, help=f"One of {', '.join(STRATEGIES)}."
)
@click.option("--num-devices", metavar="INT", default="1", show_default=True, help="N, devices (processes).")
@click.option(
    "--device", metavar="NAME", default="auto", show_default=True, help=f"One of {', '.join(DEVICE_CHOICES)}."
)
@click.option("--precision", metavar="NAME", default="fp32", show_default=True, help=f"One of {', '.join(PRECISIONS)}.")
@click.option("--arch", metavar="NAME", default="encoder", show_default=True, help=f"One of {', '.join(ARCHS)}.")
@click.option(
    "--vocab-size",
    metavar="INT",
    default="auto",
    show_default=True,
    help="V, vocabulary size; auto: "
    + ", ".join(f"{v} for the {arch}" for arch, v in DEFAULT_VOCAB_SIZE.items())
    + ".",
)
@click.option("--peft", metavar="NAME", default="none", show_default=True, help=f"One of {', '.join(PEFTS)}.")
@click.option(
    "--lora-rank",
    metavar="INT",
    default="auto",
    show_default=True,
    help="Rank of the LoRA adapters; auto: " + ", ".join(f"{v} under {p}" for p, v in DEFAULT_LORA_RANK.items()) + ".",
)
@click.option(
    "--grad-checkpointing",
    metavar="BOOL",
    default="false",
    show_default=True,
    help="Recompute activations in the backward pass (true or false).",
)
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
    try:
        run_id, result = train(
            options, meter=meter, experiment=experiment, seed=seed, carbon=carbon, system_metrics=system_metrics
        )
    except Interrupted as exc:  # SIGTERM/SIGINT: the run has ended KILLED, the job is stopped
        click.echo(f"Error: {exc.reason}; the run ended KILLED", err=True)
        sys.exit(128 + exc.signum)
    energy = "not measured" if result.energy_j is None else f"{result.energy_j:.3f} J ({result.energy_source})"
    click.echo(f"run {run_id}: {result.time_s:.3f} s, energy {energy}, final loss {result.losses[-1]:.4f}")
