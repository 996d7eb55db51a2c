"""Ask a registered law model about one fine-tuning job, and say its answer as text.

What the ``predict`` command does once its options are parsed: build the one-row query
frame and the request params, load the pyfunc model (:func:`~mlflow_roofline.serve.pyfunc_model.load_law_model`),
ask it, and format the answer: a two-column table for predict mode, the three choices
side by side for recommend mode, the energy-time frontier for pareto mode, or the model's
output records as JSON. Energies print in J/kJ/MJ, times in s/min/h, emissions in
g/kg/t CO2e.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import (
    DEFAULT_ALIAS,
    DEFAULT_MODEL_NAME,
    HARDWARE_COLUMN,
    M_CO2E_G,
    M_COST,
    M_EMBODIED_CO2E_G,
    M_ENERGY_J,
    M_ENERGY_KWH,
    M_TIME_S,
    M_WATER_L,
    SIZE_NAMES,
)
from mlflow_roofline.serve.footprint_columns import EMBODIED_UNKNOWN_COLUMN, WATER_UNKNOWN_COLUMN
from mlflow_roofline.serve.params import DEFAULT_MAX_DEVICES, DEFAULT_OBJECTIVE
from mlflow_roofline.serve.pyfunc_model import load_law_model

DEFAULT_MODEL_URI = f"models:/{DEFAULT_MODEL_NAME}@{DEFAULT_ALIAS}"

Record = Mapping[str, Any]
"""One output row of the model as Python values: its columns mix text, integers, floats and flags."""


@dataclasses.dataclass(frozen=True)
class JobQuery:
    """One job and what to ask about it.

    Attributes:
        job: the job's sizes (:data:`~mlflow_roofline.core.schema.SIZE_NAMES`, integers) and the kind
            columns given (``arch``, ``precision``, ...: the job table's optional request columns).
        strategy, num_devices: the placement predict mode evaluates (ignored otherwise).
        speedup: a measured S(N) instead of the speedup law (predict mode), or None.
        recommend, pareto: ask for the best placement, or the energy-time frontier.
        max_devices, objective: the search's bound and what recommend mode minimises.
        carbon: the carbon request params given (``carbon_intensity``, ``region``, ``pue``,
            ``price_per_kwh``), already checked.
        hardware: the ``hardware`` input (the GPU the job runs on), in every mode; None to
            leave it out (a one-hardware law needs none, a pooled law over several needs it).
    """

    job: Mapping[str, int | str | bool]
    strategy: str = "single"
    num_devices: int = 1
    speedup: float | None = None
    recommend: bool = False
    pareto: bool = False
    max_devices: int = DEFAULT_MAX_DEVICES
    objective: str = DEFAULT_OBJECTIVE
    carbon: Mapping[str, float | str] = dataclasses.field(default_factory=dict)
    hardware: str | None = None

    @property
    def mode(self) -> str:
        """``predict``, ``recommend`` or ``pareto``; refuses what makes no sense together.

        Raises:
            RooflineError: both ``recommend`` and ``pareto``, or a speedup that is not finite.
        """
        if self.recommend and self.pareto:
            raise RooflineError("--recommend and --pareto: choose one")
        if self.speedup is not None and not math.isfinite(self.speedup):
            raise RooflineError(f"speedup: must be a positive finite number, got {self.speedup}")
        return "recommend" if self.recommend else "pareto" if self.pareto else "predict"

    def frame(self, mode: str) -> pd.DataFrame:
        """The one-row model input: the job, its hardware if named, and in predict mode its placement (and speedup)."""
        row: dict[str, object] = dict(self.job)
        if self.hardware is not None:
            row[HARDWARE_COLUMN] = self.hardware
        if mode == "predict":
            row.update(strategy=self.strategy, num_devices=self.num_devices)
            if self.speedup is not None:
                row["speedup"] = self.speedup
        return pd.DataFrame([row])

    def params(self, mode: str) -> dict[str, object]:
        """The request params: mode, search bound, objective and the carbon figures given."""
        params: dict[str, object] = {"mode": mode, "max_devices": self.max_devices, "objective": self.objective}
        params.update(self.carbon)
        return params


def ask_model(model_uri: str, query: JobQuery, as_json: bool = False) -> str:
    """The model's answer to ``query`` as the text the ``predict`` command prints.

    Raises:
        RooflineError: the query makes no sense, the model cannot be loaded, or it refused
            the query (its message names the field and the rule).
    """
    mode = query.mode
    model = load_law_model(model_uri)
    output = model.predict(query.frame(mode), query.params(mode))
    records = [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in record.items()} for record in output.to_dict("records")
    ]
    if as_json:
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]
        return json.dumps(clean if mode == "pareto" else clean[0])
    text = _answer_text(model_uri, model.metadata, mode, query, records)
    if mode == "predict" and query.job.get("arch", "encoder") != "encoder":
        plain = dataclasses.replace(query, job={k: v for k, v in query.job.items() if k in SIZE_NAMES})
        encoder = float(model.predict(plain.frame(mode), plain.params(mode))[M_ENERGY_J].iloc[0])
        text += "\n" + kind_line(str(query.job["arch"]), float(records[0][M_ENERGY_J]), encoder, model.metadata)
    return text


def kind_line(arch: str, energy_j: float, encoder_j: float, meta: Mapping[str, object]) -> str:
    """Why a job of another architecture gets the answer it gets, against the same sizes as an encoder."""
    form = meta.get("form", "?")
    if math.isclose(energy_j, encoder_j, rel_tol=1e-9):
        return (
            f"arch: the {arch}'s answer equals an encoder's of the same sizes: the registered form `{form}` has "
            "no term for the architecture (the vocabulary head, the optimizer's bytes); the fit run's description "
            "says whether the forms with those terms predicted the measured runs better"
        )
    return (
        f"arch: {energy_j / encoder_j:.3g}x the energy of an encoder of the same sizes: the registered form "
        f"`{form}` counts what differs between them (the vocabulary head, the optimizer's bytes, the kind)"
    )


def _answer_text(
    model_uri: str, meta: Mapping[str, object], mode: str, query: JobQuery, records: Sequence[Record]
) -> str:
    """The answer as tables, under a header naming the model and the job."""
    job = query.job
    shape = (
        f"L={job['num_layers']} d={job['hidden_size']} h={job['num_heads']} ff={job['ffn_size']} "
        f"S={job['seq_len']} B={job['batch_size']} steps={job['num_steps']}"
    )
    hardware = query.hardware if query.hardware is not None else meta.get("hardware", "?")
    source = f"hardware: {hardware}, energy: {meta.get('energy_source', '?')}"
    header = f"model   {model_uri}  ({source})\n"
    if mode == "predict":
        return header + f"job     {shape}, {query.strategy} x{query.num_devices}\n\n" + format_prediction(records[0])
    body = format_recommendation(records[0]) if mode == "recommend" else format_pareto(records)
    return header + f"job     {shape}, up to {query.max_devices} devices\n\n" + body


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


def format_prediction(record: Record) -> str:
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
        + ([("law", _law_line(str(record["law"])))] if record.get("law") else [])
        + _footprint_lines(record)
    )


def _law_line(law: str) -> str:
    """What answered a fleet model's row: the hardware's own law, or the pooled law."""
    return "the pooled law over the measured GPUs" if law == "pooled" else f"{law}'s own law"


def _footprint_lines(record: Record) -> list[tuple[str, str]]:
    """``embodied`` and ``water`` rows where the record has them: the figure, or which figure is missing."""
    lines = []
    for label, column, unknown, show in (
        ("embodied", M_EMBODIED_CO2E_G, EMBODIED_UNKNOWN_COLUMN, _grams),
        ("water", M_WATER_L, WATER_UNKNOWN_COLUMN, lambda litres: f"{litres:.3g} L"),
    ):
        value = record.get(column)
        if isinstance(value, (int, float)) and math.isfinite(value):
            lines.append((label, show(value)))
        elif record.get(unknown):
            lines.append((label, f"unknown: {record[unknown]}"))
    return lines


def _emission_lines(record: Record) -> list[tuple[str, str]]:
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


@dataclasses.dataclass
class _Choice:
    """One placement the recommendation names, under the labels of every choice it stands for."""

    labels: list[str]
    strategy: str
    num_devices: int
    joules: float
    lower: float
    upper: float
    seconds: float
    extrapolated: bool
    tied: list[str] = dataclasses.field(default_factory=list)
    shown_because: str = ""  # why this one of tied choices is shown

    @property
    def placement(self) -> str:
        return f"{self.strategy} x{self.num_devices}"

    def ties(self, other: _Choice) -> bool:
        """Each energy within the other's 95 % interval: the law cannot tell them apart."""
        return self.lower <= other.joules <= self.upper and other.lower <= self.joules <= other.upper


def _choices(record: Record) -> list[_Choice]:
    """The best, energy-optimal and time-optimal choices; one placement named twice, or two that tie, are one."""
    named = [(f"best ({record['objective']})", "")] + [
        (f"{p.replace('_', '-')}", f"{p}_") for p in ("energy_optimal", "time_optimal")
    ]
    merged: list[_Choice] = []
    for label, prefix in named:
        choice = _Choice(
            [label],
            str(record[f"{prefix}strategy"]),
            int(record[f"{prefix}num_devices"]),
            float(record[f"{prefix}{M_ENERGY_J}"]),
            float(record[f"{prefix}energy_j_lower"]),
            float(record[f"{prefix}energy_j_upper"]),
            float(record[f"{prefix}{M_TIME_S}"]),
            bool(record[f"{prefix}extrapolated"]),
        )
        same = next((m for m in merged if m.placement == choice.placement or m.ties(choice)), None)
        if same is None:
            merged.append(choice)
            continue
        same.labels.append(label)
        if same.placement != choice.placement:  # a tie: show the measured one, else the faster; name the other
            slower, faster = sorted((same, choice), key=lambda c: (c.extrapolated, c.seconds))[::-1]
            tied = sorted({slower.placement, *same.tied} - {faster.placement})
            for name in ("strategy", "num_devices", "joules", "lower", "upper", "seconds", "extrapolated"):
                setattr(same, name, getattr(faster, name))
            same.tied = tied
            same.shown_because = (
                "the faster" if faster.extrapolated == slower.extrapolated else "within the measured ranges"
            )
    return merged


def format_recommendation(record: Record) -> str:
    """A recommend-mode output record: the choices side by side, ties as one line, extrapolations marked."""
    choices = _choices(record)
    header = ("", "strategy", "devices", "energy", "95% interval", "time")
    cells = [header] + [
        (
            " = ".join(c.labels),
            c.strategy,
            str(c.num_devices) + (" *" if c.extrapolated else ""),
            _energy(c.joules),
            f"{_energy(c.lower)} .. {_energy(c.upper)}",
            _seconds(c.seconds),
        )
        for c in choices
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)
    notes = [f"{record['candidates']} valid configurations evaluated"]
    for c in choices:
        if c.tied:
            notes.append(
                f"tie: {', '.join(c.tied)} and {c.placement} use the same energy within each other's 95% interval "
                f"(the law cannot tell them apart); {c.placement} is shown ({c.shown_because})"
            )
    if any(c.extrapolated for c in choices):
        notes.append("* extrapolated: beyond the device counts or sizes the law was fitted on; measure it to trust it")
    by_label = {label: c for c in choices for label in c.labels}
    green, fast = by_label["energy-optimal"], by_label["time-optimal"]
    if green is not fast:
        notes.append(
            f"faster is not greener here: the fastest choice uses {fast.joules / green.joules:.2f}x the energy"
        )
    notes += [f"best: {name} {value}" for name, value in _emission_lines(record)]
    return table + "\n" + "\n".join(notes)


def format_pareto(records: Sequence[Record]) -> str:
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
