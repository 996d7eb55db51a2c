"""``mlflow-roofline predict``: ask the registered law about one fine-tuning job.

Loads the pyfunc model (by default ``models:/roofline-energy@champion`` from the
tracking server in ``MLFLOW_TRACKING_URI``), predicts the job's energy (joules, with its
95 % prediction interval), time (seconds), speedup and efficiency, or with
``--recommend`` the best strategy and device count, or with ``--pareto`` every
non-dominated (strategy, device count), and prints a table (``--json``: the model's
output records). ``--carbon-intensity``/``--region``, ``--pue`` and ``--price-per-kwh``
(the options train, measure and sweep take, checked the same way) add emissions (g CO2e)
and cost; they are the served model's request params.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import click
import pandas as pd

from mlflow_roofline.commands.options import FINITE_FLOAT, carbon_options, pop_carbon_params
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import (
    DEFAULT_ALIAS,
    DEFAULT_MODEL_NAME,
    M_CO2E_G,
    M_COST,
    M_ENERGY_J,
    M_ENERGY_KWH,
    M_TIME_S,
    SIZE_NAMES,
    STRATEGIES,
)
from mlflow_roofline.serve.params import DEFAULT_MAX_DEVICES, DEFAULT_OBJECTIVE, OBJECTIVES

DEFAULT_MODEL_URI = f"models:/{DEFAULT_MODEL_NAME}@{DEFAULT_ALIAS}"
JOB_OPTIONS: tuple[str, ...] = SIZE_NAMES


def _energy(joules: float) -> str:
    """Joules with a unit that keeps the number readable."""
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(joules) >= scale:
            return f"{joules / scale:.3g} {unit}"
    return f"{joules:.3g} J"


def _seconds(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def format_prediction(record: dict[str, Any]) -> str:
    """A predict-mode output record as a two-column table."""
    return _table(
        [
            ("energy", f"{_energy(record[M_ENERGY_J])}  ({record[M_ENERGY_KWH]:.4g} kWh)"),
            (
                "95% interval",
                f"{_energy(record['energy_j_lower'])} .. {_energy(record['energy_j_upper'])}",
            ),
            ("time", _seconds(record[M_TIME_S])),
            ("speedup", f"{record['speedup']:.3g}x  (efficiency eta = {record['eta']:.3g})"),
            ("extrapolated", "yes: outside the fitted ranges" if record["extrapolated"] else "no"),
        ]
        + (
            [("implausible", "yes: the speedup exceeds the device count beyond measurement noise")]
            if record.get("speedup_implausible")
            else []
        )
        + _emission_lines(record)
    )


def _emission_lines(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``co2e`` (with interval) and ``cost`` rows where the record has them."""
    lines = []
    if M_CO2E_G in record:
        lines.append(
            (
                "co2e",
                f"{_grams(record[M_CO2E_G])}  (95%: {_grams(record['co2e_g_lower'])} .. "
                f"{_grams(record['co2e_g_upper'])})",
            )
        )
    if M_COST in record:
        lines.append((M_COST, f"{record[M_COST]:.3g} (currency of --price-per-kwh)"))
    return lines


def _grams(grams: float) -> str:
    """Grams CO2e with a unit that keeps the number readable."""
    for unit, scale in (("t", 1e6), ("kg", 1e3)):
        if abs(grams) >= scale:
            return f"{grams / scale:.3g} {unit} CO2e"
    return f"{grams:.3g} g CO2e"


def format_recommendation(record: dict[str, Any]) -> str:
    """A recommend-mode output record as a table of the three choices side by side."""
    header = ("", "strategy", "devices", "energy", "time")
    lines = [
        (
            f"best ({record['objective']})",
            record["strategy"],
            record["num_devices"],
            record[M_ENERGY_J],
            record[M_TIME_S],
        ),
        (
            "energy-optimal",
            record["energy_optimal_strategy"],
            record["energy_optimal_num_devices"],
            record["energy_optimal_energy_j"],
            record["energy_optimal_time_s"],
        ),
        (
            "time-optimal",
            record["time_optimal_strategy"],
            record["time_optimal_num_devices"],
            record["time_optimal_energy_j"],
            record["time_optimal_time_s"],
        ),
    ]
    cells = [header] + [(name, s, str(n), _energy(e), _seconds(t)) for name, s, n, e, t in lines]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)
    notes = [
        f"{record['candidates']} valid configurations evaluated; "
        f"best: 95% interval {_energy(record['energy_j_lower'])} .. {_energy(record['energy_j_upper'])}"
        + (", extrapolated" if record["extrapolated"] else "")
    ]
    e_opt, t_opt = record["energy_optimal_energy_j"], record["time_optimal_energy_j"]
    if (record["energy_optimal_strategy"], record["energy_optimal_num_devices"]) != (
        record["time_optimal_strategy"],
        record["time_optimal_num_devices"],
    ):
        notes.append(f"faster is not greener here: the fastest choice uses {t_opt / e_opt:.2f}x the energy")
    notes += [f"best: {name} {value}" for name, value in _emission_lines(record)]
    return table + "\n" + "\n".join(notes)


def format_pareto(records: list[dict[str, Any]]) -> str:
    """A pareto answer (one job's frontier, fastest first) as a table."""
    header = ["strategy", "devices", "energy", "95% interval", "time"] + (["co2e"] if M_CO2E_G in records[0] else [])
    cells = [header]
    for r in records:
        row = [
            str(r["strategy"]),
            str(r["num_devices"]),
            _energy(r[M_ENERGY_J]),
            f"{_energy(r['energy_j_lower'])} .. {_energy(r['energy_j_upper'])}",
            _seconds(r[M_TIME_S]) + (" *" if r["extrapolated"] else ""),
        ]
        cells.append(row + ([_grams(r[M_CO2E_G])] if M_CO2E_G in r else []))
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)
    note = f"{len(records)} choices no other beats in both energy and time, fastest first"
    if any(r["extrapolated"] for r in records):
        note += "; * outside the fitted ranges"
    return table + "\n" + note


def _load(model_uri: str) -> Any:
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        return mlflow.pyfunc.load_model(model_uri)
    except MlflowException as exc:
        raise RooflineError(f"cannot load model {model_uri}: {exc.message}") from exc


@click.command("predict")
@click.option("--model", "model_uri", default=DEFAULT_MODEL_URI, show_default=True, help="MLflow model URI.")
@click.option("--num-layers", type=int, required=True, help="L, encoder layers.")
@click.option("--hidden-size", type=int, required=True, help="d, model width.")
@click.option("--num-heads", type=int, required=True, help="h, attention heads.")
@click.option("--ffn-size", type=int, required=True, help="ff, feed-forward width.")
@click.option("--seq-len", type=int, required=True, help="S, tokens per sample.")
@click.option("--batch-size", type=int, required=True, help="Global batch (samples per step).")
@click.option("--num-steps", type=int, required=True, help="Optimizer steps of the job.")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="single", show_default=True)
@click.option("--num-devices", type=int, default=1, show_default=True, help="N, devices.")
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
@click.option("--json", "as_json", is_flag=True, help="Print the model's output records as JSON.")
def predict_command(model_uri: str, as_json: bool, **options: Any) -> None:
    """Predict a fine-tuning job's energy and time, or recommend its strategy and device count."""
    from mlflow.exceptions import MlflowException

    carbon = pop_carbon_params(options)
    mode = _mode(options)
    job = {k: options[k] for k in JOB_OPTIONS}
    row: dict[str, Any] = dict(job)
    if mode == "predict":
        row.update(strategy=options["strategy"], num_devices=options["num_devices"])
        if options["speedup"] is not None:
            row["speedup"] = options["speedup"]
    params = {"mode": mode, "max_devices": options["max_devices"], "objective": options["objective"]}
    params.update(carbon)
    model = _load(model_uri)
    try:
        output = model.predict(pd.DataFrame([row]), params=params)
    except MlflowException as exc:
        raise RooflineError(exc.message) from exc
    records = [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in record.items()} for record in output.to_dict("records")
    ]
    if as_json:
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]
        click.echo(json.dumps(clean if mode == "pareto" else clean[0]))
        return
    _echo(model, model_uri, mode, job, options, records)


def _mode(options: Mapping[str, Any]) -> str:
    """``predict``, ``recommend`` or ``pareto``; refuses what makes no sense together."""
    if options["recommend"] and options["pareto"]:
        raise RooflineError("--recommend and --pareto: choose one")
    speedup = options["speedup"]
    if speedup is not None and not math.isfinite(speedup):
        raise RooflineError(f"speedup: must be a positive finite number, got {speedup}")
    return "recommend" if options["recommend"] else "pareto" if options["pareto"] else "predict"


def _echo(
    model: Any,
    model_uri: str,
    mode: str,
    job: Mapping[str, int],
    options: Mapping[str, Any],
    records: list[dict[str, Any]],
) -> None:
    """The answer as tables, under a header naming the model and the job."""
    meta = model.metadata.metadata or {}
    shape = (
        f"L={job['num_layers']} d={job['hidden_size']} h={job['num_heads']} ff={job['ffn_size']} "
        f"S={job['seq_len']} B={job['batch_size']} steps={job['num_steps']}"
    )
    source = f"hardware: {meta.get('hardware', '?')}, energy: {meta.get('energy_source', '?')}"
    click.echo(f"model   {model_uri}  ({source})")
    if mode == "predict":
        click.echo(f"job     {shape}, {options['strategy']} x{options['num_devices']}\n")
        click.echo(format_prediction(records[0]))
        return
    click.echo(f"job     {shape}, up to {options['max_devices']} devices\n")
    click.echo(format_recommendation(records[0]) if mode == "recommend" else format_pareto(records))
