"""``mlflow-roofline predict``: ask the registered law about one fine-tuning job.

Loads the pyfunc model (by default ``models:/roofline-energy@champion`` from the
tracking server in ``MLFLOW_TRACKING_URI``), predicts the job's energy (joules, with its
95 % prediction interval), time (seconds), speedup and efficiency, or with
``--recommend`` the best strategy and device count, and prints a table (``--json``:
the model's output records).
"""

from __future__ import annotations

import json
import math
from typing import Any

import click
import pandas as pd

from mlflow_roofline.commands.options import FINITE_FLOAT
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.serve.predictor import DEFAULT_MAX_DEVICES, DEFAULT_OBJECTIVE, OBJECTIVES
from mlflow_roofline.core.schema import DEFAULT_ALIAS, DEFAULT_MODEL_NAME, STRATEGIES

DEFAULT_MODEL_URI = f"models:/{DEFAULT_MODEL_NAME}@{DEFAULT_ALIAS}"


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
            ("energy", f"{_energy(record['energy_j'])}  ({record['energy_kwh']:.4g} kWh)"),
            (
                "95% interval",
                f"{_energy(record['energy_j_lower'])} .. {_energy(record['energy_j_upper'])}",
            ),
            ("time", _seconds(record["time_s"])),
            ("speedup", f"{record['speedup']:.3g}x  (efficiency eta = {record['eta']:.3g})"),
            ("extrapolated", "yes: outside the fitted ranges" if record["extrapolated"] else "no"),
        ]
    )


def format_recommendation(record: dict[str, Any]) -> str:
    """A recommend-mode output record as a table of the three choices side by side."""
    header = ("", "strategy", "devices", "energy", "time")
    lines = [
        (f"best ({record['objective']})", record["strategy"], record["num_devices"], record["energy_j"], record["time_s"]),
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
    return table + "\n" + "\n".join(notes)


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
@click.option("--max-devices", type=int, default=DEFAULT_MAX_DEVICES, show_default=True, help="With --recommend.")
@click.option("--objective", type=click.Choice(OBJECTIVES), default=DEFAULT_OBJECTIVE, show_default=True, help="With --recommend.")
@click.option("--json", "as_json", is_flag=True, help="Print the model's output records as JSON.")
def predict_command(
    model_uri: str,
    num_layers: int,
    hidden_size: int,
    num_heads: int,
    ffn_size: int,
    seq_len: int,
    batch_size: int,
    num_steps: int,
    strategy: str,
    num_devices: int,
    speedup: float | None,
    recommend: bool,
    max_devices: int,
    objective: str,
    as_json: bool,
) -> None:
    """Predict a fine-tuning job's energy and time, or recommend its strategy and device count."""
    from mlflow.exceptions import MlflowException

    row: dict[str, Any] = dict(
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        ffn_size=ffn_size,
        seq_len=seq_len,
        batch_size=batch_size,
        num_steps=num_steps,
    )
    if not recommend:
        row.update(strategy=strategy, num_devices=num_devices)
        if speedup is not None:
            row["speedup"] = speedup
    params = {"mode": "recommend" if recommend else "predict", "max_devices": max_devices, "objective": objective}
    model = _load(model_uri)
    try:
        output = model.predict(pd.DataFrame([row]), params=params)
    except MlflowException as exc:
        raise RooflineError(exc.message) from exc
    record = {k: (v.item() if hasattr(v, "item") else v) for k, v in output.iloc[0].to_dict().items()}
    if as_json:
        click.echo(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}))
        return
    meta = model.metadata.metadata or {}
    job = (
        f"L={num_layers} d={hidden_size} h={num_heads} ff={ffn_size} S={seq_len} "
        f"B={batch_size} steps={num_steps}"
    )
    click.echo(f"model   {model_uri}  (hardware: {meta.get('hardware', '?')}, energy: {meta.get('energy_source', '?')})")
    if recommend:
        click.echo(f"job     {job}, up to {max_devices} devices\n")
        click.echo(format_recommendation(record))
    else:
        click.echo(f"job     {job}, {strategy} x{num_devices}\n")
        click.echo(format_prediction(record))
