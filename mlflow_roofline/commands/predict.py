"""``mlflow-roofline predict``: ask the registered law about one fine-tuning job.

Loads the pyfunc model (by default ``models:/roofline-energy@champion`` from the
tracking server in ``MLFLOW_TRACKING_URI``), predicts the job's energy (joules, with its
95 % prediction interval), time (seconds), speedup and efficiency, or with
``--recommend`` the best strategy and device count, or with ``--pareto`` every
non-dominated (strategy, device count), for the job the job table's options describe (a decoder,
LoRA, checkpointing or a precision with ``--arch``, ``--vocab-size``, ``--peft``, ``--lora-rank``,
``--grad-checkpointing``, ``--precision``; left out, the model's defaults), on the hardware
``--hardware`` names (required by a
law pooled over several hardware, such as the ``@champion`` of a multi-GPU fit), and prints a
table (``--json``: the model's output records). ``--carbon-intensity``/``--region``, ``--pue`` and ``--price-per-kwh``
(the options train, measure and sweep take, checked the same way) add emissions (g CO2e)
and cost; they are the served model's request params. ``--carbon-now`` asks the live provider
(``ROOFLINE_CARBON_PROVIDER``) once, here, and passes its intensity on: the served model itself
never calls a provider, so its answers stay offline and repeatable. The work is
:func:`mlflow_roofline.serve.ask_model.ask_model`'s.
"""

from __future__ import annotations

import click

from mlflow_roofline.commands.job_options import pop_job, predict_job_options
from mlflow_roofline.commands.options import FINITE_FLOAT, carbon_options, pop_carbon_params
from mlflow_roofline.core.carbon import resolve_carbon_live
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.serve.ask_model import DEFAULT_MODEL_URI, JobQuery, ask_model
from mlflow_roofline.serve.params import DEFAULT_MAX_DEVICES, DEFAULT_OBJECTIVE, OBJECTIVES


@click.command("predict")
@click.option("--model", "model_uri", default=DEFAULT_MODEL_URI, show_default=True, help="MLflow model URI.")
@predict_job_options
@click.option(
    "--hardware",
    default=None,
    help="The GPU the job runs on (the model's `hardware` input): required by a law pooled over several "
    "hardware, e.g. its @champion; a GPU of the hardware table no run measured is predicted from its datasheet.",
)
@click.option("--speedup", type=FINITE_FLOAT, default=None, help="Measured S(N) instead of the speedup law.")
@click.option("--recommend", is_flag=True, help="Ignore --strategy/--num-devices; recommend them.")
@click.option("--pareto", is_flag=True, help="Ignore --strategy/--num-devices; list the energy-time frontier.")
@click.option(
    "--max-devices", type=int, default=DEFAULT_MAX_DEVICES, show_default=True, help="With --recommend/--pareto."
)
@click.option(
    "--objective", type=click.Choice(OBJECTIVES), default=DEFAULT_OBJECTIVE, show_default=True, help="With --recommend."
)
@carbon_options
@click.option(
    "--carbon-now",
    is_flag=True,
    help="Ask the live provider ($ROOFLINE_CARBON_PROVIDER: electricitymaps, watttime) for the grid's intensity "
    "now, once, and predict with it (falls back to the table for --region, saying why).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the model's output records as JSON.")
def predict_command(
    model_uri: str,
    hardware: str | None,
    speedup: float | None,
    recommend: bool,
    pareto: bool,
    max_devices: int,
    objective: str,
    carbon_intensity: str | None,
    region: str | None,
    pue: str | None,
    price_per_kwh: str | None,
    carbon_now: bool,
    as_json: bool,
    **options: int | str | bool | None,
) -> None:
    """Predict a fine-tuning job's energy and time, or recommend its strategy and device count."""
    if carbon_now:
        if carbon_intensity is not None:
            raise ConfigError("carbon_now", "give either --carbon-now or --carbon-intensity, not both")
        live = resolve_carbon_live(region=region)
        if live.intensity_g_per_kwh is not None:
            carbon_intensity = f"{live.intensity_g_per_kwh:g}"
            click.echo(f"carbon intensity now: {carbon_intensity} g CO2e/kWh ({live.source})", err=True)
        else:
            click.echo(f"carbon intensity now: unknown ({live.note or 'give --region'})", err=True)
    carbon = pop_carbon_params(
        {"carbon_intensity": carbon_intensity, "region": region, "pue": pue, "price_per_kwh": price_per_kwh}
    )
    job: dict[str, int | str | bool] = pop_job(options, request=True)
    strategy, num_devices = str(job.pop("strategy")), int(job.pop("num_devices"))
    query = JobQuery(
        job=job,
        strategy=strategy,
        num_devices=num_devices,
        speedup=speedup,
        recommend=recommend,
        pareto=pareto,
        max_devices=max_devices,
        objective=objective,
        carbon=carbon,
        hardware=hardware,
    )
    click.echo(ask_model(model_uri, query, as_json))
