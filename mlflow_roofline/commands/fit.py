"""``mlflow-roofline fit``: fit the energy laws on finished train runs and register the model.

The MLproject ``fit`` entry point passes ``--experiment``, ``--model-name``, ``--alias``
and ``--allow-estimate true|false``; ``--allow-estimate`` also works as a bare flag.
"""

from __future__ import annotations

import click

from mlflow_roofline.commands.options import parse_bool
from mlflow_roofline.core.schema import (
    DEFAULT_ALIAS,
    DEFAULT_EXPERIMENT,
    DEFAULT_MODEL_NAME,
    FIT_ENERGY_METRICS,
    MISSING_BASELINE_CHOICES,
)


@click.command("fit")
@click.option(
    "--experiment",
    "experiments",
    multiple=True,
    default=(DEFAULT_EXPERIMENT,),
    show_default=True,
    help="Experiment whose train runs to fit (repeat it, or separate names by commas, for several).",
)
@click.option("--model-name", default=DEFAULT_MODEL_NAME, show_default=True, help="Registered model name.")
@click.option("--alias", default=DEFAULT_ALIAS, show_default=True, help="Alias set on the new model version.")
@click.option(
    "--allow-estimate",
    default="false",
    is_flag=False,
    flag_value="true",
    metavar="[true|false]",
    show_default=True,
    help="Fit on estimated energy (roofline.energy_source=estimate) too: true or false; bare flag = true.",
)
@click.option("--hardware", default=None, help="Fit only the runs of this roofline.hardware.")
@click.option(
    "--missing-baseline",
    type=click.Choice(MISSING_BASELINE_CHOICES),
    default="law",
    show_default=True,
    help=(
        "Parallel runs without a single-device run at the same global or per-device batch: "
        "single-device time from the hardware's time law (law), or drop them."
    ),
)
@click.option(
    "--energy",
    type=click.Choice(tuple(FIT_ENERGY_METRICS)),
    default="gpu",
    show_default=True,
    help="The energy the law learns: gpu = energy_j (the meter's devices), node = energy_node_j (plus CPU and DRAM).",
)
@click.option(
    "--if-drifted",
    is_flag=True,
    help=(
        "Fit only when the law registered as MODEL_NAME@ALIAS has drifted on the train runs measured since "
        "(the roofline model evaluator's verdict is refit), or when nothing is registered there yet."
    ),
)
@click.option("--register/--no-register", default=True, show_default=True, help="Register the model.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the cross-validation folds.")
@click.option(
    "--hardware-table",
    default=None,
    metavar="CSV",
    help="A hardware table extending the shipped one (default: the file in ROOFLINE_HARDWARE_TABLE).",
)
def fit_command(
    experiments: tuple[str, ...],
    model_name: str,
    alias: str,
    allow_estimate: str,
    hardware: str | None,
    missing_baseline: str,
    energy: str,
    if_drifted: bool,
    register: bool,
    seed: int,
    hardware_table: str | None,
) -> None:
    """Fit the efficiency-aware energy law (and its baseline) and register it as a pyfunc model."""
    # deferred: the fit stage pulls in pandas, scipy, statsmodels and matplotlib; `--help` should not
    from mlflow_roofline.fit.pipeline import run_fit

    names = [name.strip() for item in experiments for name in item.split(",") if name.strip()]
    client = None
    if if_drifted:
        from mlflow_roofline.fit.drift_check import check_drift
        from mlflow_roofline.tracking.client import TrackingClient

        client = TrackingClient()  # the command's one client: the drift check's, then the fit's
        check = check_drift(client, names, model_name, alias, hardware or None, FIT_ENERGY_METRICS[energy])
        click.echo(f"drift check: {check.reason}")
        if not check.refit:
            return
    run_fit(
        names,
        model_name=model_name,
        alias=alias,
        allow_estimate=parse_bool("allow_estimate", allow_estimate),
        hardware=hardware or None,
        missing_baseline=missing_baseline,
        energy=energy,
        register=register,
        seed=seed,
        echo=click.echo,
        hardware_table=hardware_table or None,
        client=client,
    )
