"""Read a foreign file into raw rows of schema fields, each with where it came from.

Two formats:

- ``table``: CSV or Parquet whose columns are the run schema's names, or renamed by the
  mapping; energy and time in the mapping's units; constants for what the file lacks.
- ``codecarbon``: CodeCarbon's ``emissions.csv``. Its ``duration`` (seconds) is
  ``time_s``. On a GPU job (``gpu_count`` > 0 and ``gpu_energy`` > 0) ``energy_j`` is
  ``gpu_energy`` (kWh, from NVML's energy counter: ``energy_source`` ``nvml``) and the
  whole-node figures ``energy_cpu_j``, ``energy_dram_j`` and ``energy_node_j`` come from
  ``cpu_energy``, ``ram_energy`` and ``energy_consumed``; on a CPU job ``energy_j`` is
  ``energy_consumed``, labelled ``estimate`` because the file does not say whether
  CodeCarbon read RAPL or estimated from the CPU's TDP (a mapping constant
  ``energy_source: rapl`` says otherwise). ``hardware`` is ``gpu_model`` (without its
  ``N x`` prefix) or ``cpu_model``; ``num_devices`` defaults to ``gpu_count``. The
  model's configuration comes from the mapping, per row (``rows``) or as constants.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import SupportsFloat, SupportsIndex

import pandas as pd

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import M_ENERGY_CPU_J, M_ENERGY_DRAM_J, M_ENERGY_J, M_ENERGY_NODE_J, M_TIME_S
from mlflow_roofline.ingest.mapping import ENERGY_UNITS_J, Mapping

FORMATS: tuple[str, ...] = ("table", "codecarbon")
UNMATCHED_ROW_KEY = "__unmatched_row_key__"
"""Field a row carries when the mapping's ``rows`` has no entry for its key value."""
CODECARBON_COLUMNS: tuple[str, ...] = ("duration", "energy_consumed", "cpu_energy", "gpu_energy", "ram_energy")
"""Columns every CodeCarbon ``emissions.csv`` holds (energies in kWh, duration in seconds)."""


CODECARBON_FIELDS: tuple[str, ...] = (M_TIME_S, M_ENERGY_J, "energy_source", "device", "hardware")
"""Schema fields every CodeCarbon row gives (``num_devices`` and the node energies: GPU rows only)."""


@dataclasses.dataclass(frozen=True)
class RawRow:
    """One row of the file as schema fields, not yet checked.

    Attributes:
        where: ``line N`` of a CSV (the header is line 1) or ``row N`` of a Parquet file.
        fields: schema field -> value as read (strings or numbers); energies in joules,
            times in seconds.
    """

    where: str
    fields: dict[str, object]


@dataclasses.dataclass(frozen=True)
class RawTable:
    """A file's rows and the schema fields the file offers, before any row is checked.

    Attributes:
        rows: the rows, in file order.
        offered: every field name a row of this file can hold: the table's columns (after
            the mapping's renames; the mapping's row key aside), the mapping's constants and
            per-row fields, and what the CodeCarbon format derives. A required field outside
            it is missing from the whole file; a name the schema does not know is an
            unknown column.
    """

    rows: list[RawRow]
    offered: frozenset[str]


def read_rows(path: str | Path, fmt: str, mapping: Mapping) -> list[RawRow]:
    """The file's rows as :class:`RawRow` in file order (:func:`read_table`'s rows)."""
    return read_table(path, fmt, mapping).rows


def read_table(path: str | Path, fmt: str, mapping: Mapping) -> RawTable:
    """The file's rows as :class:`RawRow` in file order, and the fields it offers.

    Raises:
        ConfigError: an unknown format, an unreadable file, or a mapping that does not
            fit the file (naming the file or the mapping key).
    """
    if fmt not in FORMATS:
        raise ConfigError("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    frame, where = _read_frame(Path(path))
    from_mapping = {*mapping.constants, *(k for values in mapping.row_values.values() for k in values)}
    if fmt == "codecarbon":
        rows = _codecarbon_rows(frame, where, mapping, str(path))
        derived = {k for row in rows for k in row.fields if k != UNMATCHED_ROW_KEY}
        return RawTable(rows, frozenset({*CODECARBON_FIELDS, *derived, *from_mapping}))
    columns = {str(c) for c in frame.rename(columns=mapping.columns).columns} - {mapping.row_key}
    return RawTable(_table_rows(frame, where, mapping), frozenset({*columns, *from_mapping}))


def _read_frame(path: Path) -> tuple[pd.DataFrame, list[str]]:
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            return frame, [f"row {i + 1}" for i in range(len(frame))]
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False, encoding="utf-8")
    except (OSError, ValueError, UnicodeDecodeError, ImportError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError("file", f"cannot read {path}: {why}") from None
    return frame, [f"line {i + 2}" for i in range(len(frame))]


def _table_rows(frame: pd.DataFrame, where: list[str], mapping: Mapping) -> list[RawRow]:
    frame = frame.rename(columns=mapping.columns)
    _check_constants(frame, mapping)
    rows = []
    for label, record in zip(where, frame.to_dict("records")):
        fields = {str(k): _cell(v) for k, v in record.items() if _cell(v) is not None and k != mapping.row_key}
        fields = {**mapping.constants, **_row_values(record, mapping, label), **fields}
        for name, scale in ((M_ENERGY_J, mapping.joules_per_unit), (M_TIME_S, mapping.seconds_per_unit)):
            if name in fields:
                fields[name] = _scaled(fields[name], scale)
        rows.append(RawRow(label, fields))
    return rows


def _codecarbon_rows(frame: pd.DataFrame, where: list[str], mapping: Mapping, path: str) -> list[RawRow]:
    missing = [c for c in CODECARBON_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError("file", f"{path} is not a CodeCarbon emissions.csv: no column {', '.join(missing)}")
    if mapping.energy_unit != "J" or mapping.time_unit != "s" or mapping.columns:
        raise ConfigError("mapping", "codecarbon files have fixed columns and units (kWh, s): give only constants/rows")
    _check_constants(frame, mapping)
    rows = []
    for label, record in zip(where, frame.to_dict("records")):
        fields = {**_codecarbon_fields(record), **mapping.constants, **_row_values(record, mapping, label)}
        rows.append(RawRow(label, fields))
    return rows


def _codecarbon_fields(record: dict[str, object]) -> dict[str, object]:
    kwh = ENERGY_UNITS_J["kWh"]
    gpu_count = _number(record.get("gpu_count")) or 0
    gpu_energy = _number(record.get("gpu_energy")) or 0.0
    fields: dict[str, object] = {M_TIME_S: _number(record.get("duration"))}
    node = _number(record.get("energy_consumed"))
    if gpu_count > 0 and gpu_energy > 0:
        fields.update({M_ENERGY_J: gpu_energy * kwh, "energy_source": "nvml", "device": "cuda"})
        fields["num_devices"] = int(gpu_count) if float(gpu_count).is_integer() else gpu_count
        fields["hardware"] = re.sub(r"^\s*\d+\s*x\s*", "", str(record.get("gpu_model") or "")).strip() or None
        for name, column in ((M_ENERGY_CPU_J, "cpu_energy"), (M_ENERGY_DRAM_J, "ram_energy")):
            value = _number(record.get(column))
            if value is not None:
                fields[name] = value * kwh
        if node is not None:
            fields[M_ENERGY_NODE_J] = node * kwh
    else:
        fields.update({M_ENERGY_J: None if node is None else node * kwh, "energy_source": "estimate", "device": "cpu"})
        fields["hardware"] = str(record.get("cpu_model") or "").strip() or None
    return {k: v for k, v in fields.items() if v is not None}


def _check_constants(frame: pd.DataFrame, mapping: Mapping) -> None:
    for name in mapping.constants:
        if name in frame.columns:
            raise ConfigError(f"mapping.constants.{name}", "the file already has this column; drop the constant")
    if mapping.row_key is not None and mapping.row_key not in frame.columns:
        raise ConfigError("mapping.rows.key", f"the file has no column {mapping.row_key!r}")


def _row_values(record: dict[str, object], mapping: Mapping, label: str) -> dict[str, object]:
    if mapping.row_key is None:
        return {}
    key = str(_cell(record.get(mapping.row_key)) or "")
    if key not in mapping.row_values:
        return {UNMATCHED_ROW_KEY: f"{mapping.row_key}={key!r}"}
    return dict(mapping.row_values[key])


def _cell(value: object) -> object:
    """A cell as read, with empty strings and NaN meaning 'no value'."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.strip() if isinstance(value, str) else value


def _number(value: object) -> float | None:
    value = _cell(value)
    if not isinstance(value, (str, bytes, SupportsFloat, SupportsIndex)):
        return None  # no value, or a type float() refuses
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _scaled(value: object, scale: float) -> object:
    """``value`` times ``scale`` when it is a number; left as read (for the check to name) otherwise."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else _number(value)
    if number is None or (isinstance(value, str) and _number(value) is None):
        return value
    return number * scale
