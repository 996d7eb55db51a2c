"""Check a file's fields once (:func:`check_columns`), then each raw row, turning it into a
record the fit can use or saying what is wrong (:func:`check_row`).

A record must hold every train param (``warmup_steps`` defaults to 0: a foreign tool's
warm-up is not known), ``energy_j`` (joules), ``time_s`` (seconds), ``hardware`` and
``energy_source``; it must satisfy what the law needs (:mod:`mlflow_roofline.core.measured`),
not this project's launcher rules, so that a tensor-parallel run with uneven heads
measured by another implementation is imported.

The params beyond the paper's (``arch``, ``vocab_size``, ``peft``, ``lora_rank``,
``grad_checkpointing``) are optional: a file or a cell without them (or ``auto`` for
``vocab_size`` and ``lora_rank``) gives their defaults, and a row of an old file hashes as
it did before they existed, so re-importing it adds nothing.

``per_device_batch_size`` (HF Trainer's ``per_device_train_batch_size``) may stand in for
``batch_size``: the global batch is it times ``num_devices`` under ddp/fsdp (each device
takes its share of the batch), it as is under single and tp. A row giving both that
disagree is refused naming both.

Values are what the file says, or refused: integers are parsed exactly, however large
(``"9007199254740993"`` is not rounded through a float; beyond int64 it is refused); a
text field (``strategy``, ``device``, ``precision``, ``hardware``, ``energy_source``)
holds text or a plain number, never a list, mapping, bytes or boolean (refused, not
stored as Python's repr), and at most :data:`MAX_TEXT_CHARS` characters (refused before
any hash is taken, so that no tag is cut short after it). A field with levels is read as the
level it names in any case or in another tool's spelling (``FP16``, ``bf16-mixed``, ``DDP``:
the job table's ``spellings``), and stored as that level.

File-level problems are one message for the whole file, not one per row: a required field
that no column, constant or per-row mapping entry gives (:class:`ConfigError`), and, under
``strict``, columns the schema does not know; without ``strict`` those are ignored and
listed once.
"""

from __future__ import annotations

import dataclasses
import decimal
import hashlib
import json
import math
from collections.abc import Collection
from typing import SupportsFloat, SupportsIndex

import numpy as np

from mlflow_roofline.core import job_table
from mlflow_roofline.core.config import AUTO_WORDS, INT64_MAX, INT_FIELDS, KIND_INT_FIELDS, TrainConfig, parse_bool
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.measured import measured_problem
from mlflow_roofline.core.rules import KIND_RULES, first_broken
from mlflow_roofline.core.schema import (
    DATA_PARALLEL_STRATEGIES,
    DEVICES,
    ENERGY_SOURCES,
    M_ENERGY_CPU_J,
    M_ENERGY_DRAM_J,
    M_ENERGY_J,
    M_ENERGY_NODE_J,
    M_TIME_S,
    PARAM_NAMES,
    PRECISIONS,
    TRAIN_PARAM_NAMES,
)
from mlflow_roofline.ingest.sources import RawRow

REQUIRED: tuple[str, ...] = (
    *[p for p in PARAM_NAMES if p != "warmup_steps"],
    M_ENERGY_J,
    M_TIME_S,
    "hardware",
    "energy_source",
)
NODE_METRICS: tuple[str, ...] = (M_ENERGY_CPU_J, M_ENERGY_DRAM_J, M_ENERGY_NODE_J)
PER_DEVICE_BATCH = "per_device_batch_size"
"""Samples each device takes per step: accepted in place of ``batch_size``, converted by strategy."""
KNOWN_FIELDS: frozenset[str] = frozenset((*TRAIN_PARAM_NAMES, *REQUIRED, *NODE_METRICS, PER_DEVICE_BATCH))
MAX_TEXT_CHARS = 250
"""Longest text field value (a hardware name, say) import accepts, in characters."""
TEXT_FIELDS: tuple[str, ...] = ("strategy", "device", "precision", "hardware", "energy_source")
STAND_INS: dict[str, str] = {"batch_size": PER_DEVICE_BATCH}
"""Required field -> the field that may give it instead."""


def _given(name: str, fields: Collection[str]) -> bool:
    """Whether ``fields`` give the required field ``name`` (itself or its stand-in)."""
    return name in fields or (name in STAND_INS and STAND_INS[name] in fields)


def check_columns(offered: Collection[str], file_name: str, strict: bool = False) -> list[str]:
    """The file's unknown columns (sorted), to be ignored; one :class:`ConfigError` for the whole file instead
    when a required field is missing from it, or when it has unknown columns under ``strict``.

    ``offered``: every field a row of the file can hold (:attr:`ingest.sources.RawTable.offered`).
    """
    missing = [name for name in REQUIRED if not _given(name, offered)]
    if missing:
        names = ", ".join(f"{n} (or {STAND_INS[n]})" if n in STAND_INS else n for n in missing)
        raise ConfigError(
            "file",
            f"{file_name} has no column {names}, required in every row: add a column, or a constant in the mapping",
        )
    unknown = sorted(name for name in offered if name not in KNOWN_FIELDS)
    if unknown and strict:
        raise ConfigError(
            "file",
            f"{file_name} has unknown columns {', '.join(unknown)} (--strict refuses them): "
            "rename them in the mapping's `columns`, or drop them",
        )
    return unknown


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured run ready to log.

    Attributes:
        where: the row's place in the file (``line N`` / ``row N``).
        config: the train params.
        hardware: the device name the run measured on.
        energy_source: the meter kind (one of the schema's energy sources).
        metrics: ``energy_j`` (joules), ``time_s`` (seconds) and any whole-node energies.
    """

    where: str
    config: TrainConfig
    hardware: str
    energy_source: str
    metrics: dict[str, float]

    def row_hash(self, fmt: str) -> str:
        """Hash of the row's content (params, hardware, source, metrics, format): same row, same hash.

        The params are those the config hash reads (a param beyond the paper's at its default is
        left out), so a row imported before those params existed keeps its hash.
        """
        payload = {
            **self.config.hashed_params(),
            "hardware": self.hardware,
            "energy_source": self.energy_source,
            "format": fmt,
            **{k: repr(float(v)) for k, v in sorted(self.metrics.items())},
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class RowError:
    """Why one row was refused: its place, the field and the rule."""

    where: str
    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: {self.rule}"


def check_row(row: RawRow) -> Record | RowError:
    """The row as a :class:`Record`, or the first :class:`RowError` it holds."""
    if row.problem is not None:
        return RowError(row.where, *row.problem)
    fields = {k: v for k, v in row.fields.items() if k in KNOWN_FIELDS}  # unknown columns: see check_columns
    for name in REQUIRED:
        if not _given(name, fields):
            return RowError(row.where, name, "is missing: add a column, or a constant in the mapping")
    values, problem = _parsed(fields)
    if problem is None:
        problem = _global_batch(values)
    if problem is None:
        problem = measured_problem(values)
    if problem is not None:
        return RowError(row.where, *problem)
    try:
        config = TrainConfig.from_mapping({p: values[p] for p in TRAIN_PARAM_NAMES if p in values})
    except ConfigError as exc:
        return RowError(row.where, exc.field, exc.rule)
    kind = config.values()
    broken = first_broken(kind, KIND_RULES)
    if broken is not None:
        return RowError(row.where, broken.field, broken.describe(kind))
    return Record(
        row.where,
        config,
        str(values["hardware"]),  # parsed as strings and the measurements as floats: no conversion here
        str(values["energy_source"]),
        {k: float(values[k]) for k in (M_ENERGY_J, M_TIME_S, *NODE_METRICS) if k in values},
    )


def _parsed(fields: dict[str, object]) -> tuple[dict[str, int | float | str], tuple[str, str] | None]:
    values: dict[str, int | float | str] = {"warmup_steps": 0}
    for name, raw in fields.items():
        if name in KIND_INT_FIELDS and str(raw).strip().lower() in AUTO_WORDS:
            continue  # the default of its arch / peft
        if name in job_table.names(type="bool"):
            try:
                values[name] = str(parse_bool(name, raw if isinstance(raw, bool) else str(raw)))
            except ConfigError as exc:
                return values, (name, exc.rule)
        elif name in INT_FIELDS or name in KIND_INT_FIELDS or name == PER_DEVICE_BATCH:
            number = _integer(raw)
            if number is None:
                return values, (name, f"must be an integer, got {_shown(raw)}")
            if abs(number) > INT64_MAX:
                return values, (name, f"must be at most {INT64_MAX} (the int64 range), got {_shown(raw)}")
            values[name] = number
        elif name in (M_ENERGY_J, M_TIME_S, *NODE_METRICS):
            measured = _float(raw)
            if measured is None:
                return values, (name, f"must be a number, got {_shown(raw)}")
            if name in NODE_METRICS and not (math.isfinite(measured) and measured >= 0):
                return values, (name, f"must be finite and non-negative, got {raw!r}")
            values[name] = measured
        else:
            text = _text(raw)
            if text is None:
                return values, (name, f"must be text, got {type(raw).__name__} {_shown(raw)}")
            if len(text) > MAX_TEXT_CHARS:
                return values, (name, f"must be at most {MAX_TEXT_CHARS} characters, got {len(text)}")
            values[name] = _level(name, text)
    for name, allowed in (("device", DEVICES), ("precision", PRECISIONS), ("energy_source", ENERGY_SOURCES)):
        if values[name] not in allowed:
            return values, (name, f"must be one of {', '.join(allowed)}, got {values[name]!r}")
    if not values["hardware"]:
        return values, ("hardware", "must name the device the run measured on")
    return values, None


_LEVEL_COLUMNS = {c.name: c for c in job_table.JOB_COLUMNS if c.levels}
"""The job table's text columns with levels (strategy, device, precision, arch, peft), by name."""


def _level(name: str, text: str) -> str:
    """A level column's cell as the level it names (``FP16``, ``bfloat16``, Lightning's ``bf16-mixed``: the job
    table's spellings, :meth:`~core.job_table.JobColumn.level_of`); any other cell as written, refused later by
    its field's check."""
    if name not in _LEVEL_COLUMNS:
        return text
    return _LEVEL_COLUMNS[name].level_of(text) or text


def _global_batch(values: dict[str, int | float | str]) -> tuple[str, str] | None:
    """Set ``batch_size`` from ``per_device_batch_size`` (by strategy); the problem when the row's both disagree."""
    per_device = values.pop(PER_DEVICE_BATCH, None)
    if per_device is None:
        return None
    if not isinstance(per_device, int) or per_device < 1:
        return PER_DEVICE_BATCH, f"must be a positive integer, got {per_device!r}"
    strategy, devices = values.get("strategy"), values.get("num_devices")
    split = strategy in DATA_PARALLEL_STRATEGIES and isinstance(devices, int) and devices >= 1
    batch = per_device * devices if split and isinstance(devices, int) else per_device
    given = values.get("batch_size")
    if given is not None and given != batch:
        how = f"under {strategy} on {devices} devices" if split else f"under {strategy}"
        return PER_DEVICE_BATCH, (
            f"{per_device} per device {how} is a batch_size of {batch}, but the row gives batch_size {given}: "
            "give one of per_device_batch_size and batch_size, or make them agree"
        )
    values["batch_size"] = batch
    return None


def _integer(raw: object) -> int | None:
    """``raw`` as an exact integer (``"12"``, ``12``, ``"12.0"``, ``"1e3"``), or None when it is not one.

    A value past int64 comes back as ``INT64_MAX + 1`` (its digits are never expanded).
    """
    if isinstance(raw, (bool, bytes, np.bool_)):
        return None
    if isinstance(raw, (int, np.integer)):
        number = int(raw)
    elif isinstance(raw, (float, np.floating)):
        if not math.isfinite(raw) or not float(raw).is_integer():
            return None
        number = int(raw)
    elif isinstance(raw, str):
        try:
            exact = decimal.Decimal(raw.strip())  # exact, however many digits: never through a float
        except decimal.InvalidOperation:
            return None
        if not exact.is_finite():
            return None
        if exact.adjusted() > 19:
            return INT64_MAX + 1
        if exact != exact.to_integral_value():
            return None
        number = int(exact)
    else:
        return None
    return number


def _float(raw: object) -> float | None:
    if isinstance(raw, (bool, bytes, np.bool_)) or not isinstance(raw, (str, SupportsFloat, SupportsIndex)):
        return None  # float() refuses any other type; bytes and booleans are not numbers
    try:
        return float(raw)
    except (TypeError, ValueError, OverflowError):
        return None


def _text(raw: object) -> str | None:
    """A text field's value stripped: a string, or a plain number written as text; None for anything else."""
    if isinstance(raw, str):
        return raw.strip()
    if isinstance(raw, (bool, np.bool_)):
        return None
    if isinstance(raw, (int, float, np.integer, np.floating)):
        return str(raw)
    return None


def _shown(raw: object) -> str:
    """``raw`` as a message shows it: its repr, at most 60 characters."""
    text = repr(raw)
    return text if len(text) <= 60 else f"{text[:57]}..."
