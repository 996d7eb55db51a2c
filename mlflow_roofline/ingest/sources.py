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
  A row that claims GPUs (``gpu_count`` > 0) whose ``gpu_energy`` is negative, not a
  number, or more than the node's ``energy_consumed`` is refused (naming
  ``gpu_energy``), never imported as a CPU job; so is a negative or NaN ``gpu_energy``
  on any row.

A mapping supplies what the file lacks and never replaces what it has: a constant or a
``rows`` entry naming a field the file gives (a column after the renames; for
CodeCarbon, the measured energies and time) is refused, naming the mapping key. Two
file columns renamed to one field are refused. The mapping's units apply to every
energy field (:data:`~mlflow_roofline.ingest.mapping.ENERGY_FIELDS`) and every time
field (:data:`~mlflow_roofline.ingest.mapping.TIME_FIELDS`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import SupportsFloat, SupportsIndex

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import M_ENERGY_CPU_J, M_ENERGY_DRAM_J, M_ENERGY_J, M_ENERGY_NODE_J, M_TIME_S
from mlflow_roofline.ingest.files import Cells, read_cells
from mlflow_roofline.ingest.mapping import ENERGY_FIELDS, ENERGY_UNITS_J, TIME_FIELDS, Mapping

FORMATS: tuple[str, ...] = ("table", "codecarbon")
CODECARBON_COLUMNS: tuple[str, ...] = ("duration", "energy_consumed", "cpu_energy", "gpu_energy", "ram_energy")
"""Columns every CodeCarbon ``emissions.csv`` holds (energies in kWh, duration in seconds)."""
CODECARBON_MEASURED: tuple[str, ...] = (*ENERGY_FIELDS, *TIME_FIELDS)
"""Schema fields a CodeCarbon row measures: a mapping may never give them."""


CODECARBON_FIELDS: tuple[str, ...] = (M_TIME_S, M_ENERGY_J, "energy_source", "device", "hardware")
"""Schema fields every CodeCarbon row gives (``num_devices`` and the node energies: GPU rows only)."""


@dataclasses.dataclass(frozen=True)
class RawRow:
    """One row of the file as schema fields, not yet checked.

    Attributes:
        where: ``line N`` of a CSV (the header is line 1) or ``row N`` of a Parquet file.
        fields: schema field -> value as read (strings or numbers); energies in joules,
            times in seconds.
        problem: ``(field, rule)`` when the row cannot be read at all (a CodeCarbon GPU
            energy that cannot be right, no ``rows`` entry for its key, more cells than
            the header): the row is refused with it.
    """

    where: str
    fields: dict[str, object]
    problem: tuple[str, str] | None = None


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
        ConfigError: an unknown format, an unreadable file (:func:`ingest.files.read_cells`),
            or a mapping that does not fit the file (naming the file or the mapping key).
    """
    if fmt not in FORMATS:
        raise ConfigError("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    cells = read_cells(Path(path))
    from_mapping = {*mapping.constants, *(k for values in mapping.row_values.values() for k in values)}
    if fmt == "codecarbon":
        rows = _codecarbon_rows(cells, mapping, str(path))
        derived = {k for row in rows for k in row.fields}
        return RawTable(rows, frozenset({*CODECARBON_FIELDS, *derived, *from_mapping}))
    renames = _renames(cells.header, mapping)
    columns = set(renames.values()) - {mapping.row_key}
    _check_mapping(columns, mapping, renames, "the file already has this column")
    return RawTable(_table_rows(cells, renames, mapping), frozenset({*columns, *from_mapping}))


def _renames(header: tuple[str, ...], mapping: Mapping) -> dict[str, str]:
    """File column -> field after the mapping's renames; two columns becoming one field are refused."""
    renames: dict[str, str] = {}
    source_of: dict[str, str] = {}
    for column in header:
        field = mapping.columns.get(column, column)
        if field in source_of:
            raise ConfigError(
                f"mapping.columns.{column}" if column in mapping.columns else f"mapping.columns.{source_of[field]}",
                f"file columns {source_of[field]!r} and {column!r} would both be {field!r}: "
                "map one column to each field",
            )
        source_of[field] = column
        renames[column] = field
    return renames


def _check_mapping(given: set[str], mapping: Mapping, renames: dict[str, str] | None, why: str) -> None:
    """Refuse constants and per-row entries naming a field in ``given``, and a row key the file lacks."""
    for name in mapping.constants:
        if name in given:
            raise ConfigError(f"mapping.constants.{name}", f"{why}; drop the constant")
    for key, values in mapping.row_values.items():
        for name in values:
            if name in given:
                raise ConfigError(f"mapping.rows.values.{key}.{name}", f"{why}; drop it from the entry")
    fields = set(renames.values()) if renames is not None else None
    if mapping.row_key is not None and fields is not None and mapping.row_key not in fields:
        raise ConfigError("mapping.rows.key", f"the file has no column {mapping.row_key!r}")


def _table_rows(cells: Cells, renames: dict[str, str], mapping: Mapping) -> list[RawRow]:
    rows = []
    for label, record in cells.rows:
        fields = {renames[k]: _clean(v) for k, v in record.items() if renames[k] != mapping.row_key}
        values, problem = _row_values({renames[k]: v for k, v in record.items()}, mapping)
        fields = {**mapping.constants, **values, **fields}
        for names, scale in ((ENERGY_FIELDS, mapping.joules_per_unit), (TIME_FIELDS, mapping.seconds_per_unit)):
            for name in names:
                if name in fields:
                    fields[name] = _scaled(fields[name], scale)
        rows.append(RawRow(label, fields, cells.problems.get(label) or problem))
    return rows


def _codecarbon_rows(cells: Cells, mapping: Mapping, path: str) -> list[RawRow]:
    missing = [c for c in CODECARBON_COLUMNS if c not in cells.header]
    if missing:
        raise ConfigError("file", f"{path} is not a CodeCarbon emissions.csv: no column {', '.join(missing)}")
    if mapping.columns:
        raise ConfigError("mapping.columns", "codecarbon files have fixed columns: give only constants and rows")
    if mapping.energy_unit != "J" or mapping.time_unit != "s":
        raise ConfigError("mapping.units", "codecarbon files have fixed units (kWh, s): give only constants and rows")
    _check_mapping(set(CODECARBON_MEASURED), mapping, None, "CodeCarbon's file measures this field")
    if mapping.row_key is not None and mapping.row_key not in cells.header:
        raise ConfigError("mapping.rows.key", f"the file has no column {mapping.row_key!r}")
    rows = []
    for label, record in cells.rows:
        measured, problem = _codecarbon_fields(record)
        values, unmatched = _row_values(record, mapping)
        fields = {**measured, **mapping.constants, **values}
        rows.append(RawRow(label, fields, cells.problems.get(label) or problem or unmatched))
    return rows


def _codecarbon_fields(record: dict[str, object]) -> tuple[dict[str, object], tuple[str, str] | None]:
    """The schema fields of one CodeCarbon row, and the problem that refuses it (None when none)."""
    kwh = ENERGY_UNITS_J["kWh"]
    gpu_count = _number(record.get("gpu_count")) or 0.0
    raw_gpu = record.get("gpu_energy")
    gpu_energy = _number(raw_gpu)
    if raw_gpu is not None and (gpu_energy is None or not math.isfinite(gpu_energy) or gpu_energy < 0):
        return {}, ("gpu_energy", f"must be a finite, non-negative energy in kWh, got {_clean(raw_gpu)!r}")
    gpu_energy = gpu_energy or 0.0
    fields: dict[str, object] = {M_TIME_S: _number(record.get("duration"))}
    node = _number(record.get("energy_consumed"))
    if gpu_count > 0 and gpu_energy > 0:
        if node is not None and math.isfinite(node) and gpu_energy > node * (1 + 1e-9):
            return {}, (
                "gpu_energy",
                f"{gpu_energy:g} kWh is more than the node's whole energy_consumed, {node:g} kWh: "
                "the row cannot be right",
            )
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
    return {k: v for k, v in fields.items() if v is not None}, None


def _row_values(record: dict[str, object], mapping: Mapping) -> tuple[dict[str, object], tuple[str, str] | None]:
    """The mapping's ``rows`` entry for this record, or the problem that it has none."""
    if mapping.row_key is None:
        return {}, None
    key = str(_clean(record.get(mapping.row_key)) or "")
    if key not in mapping.row_values:
        return {}, ("mapping.rows.values", f"no entry for {mapping.row_key}={key!r}")
    return dict(mapping.row_values[key]), None


def _clean(value: object) -> object:
    """A cell as read, strings stripped."""
    return value.strip() if isinstance(value, str) else value


def _number(value: object) -> float | None:
    """The cell as a float; None when empty or not a number (bytes included: they are not text)."""
    value = _clean(value)
    if value is None or value == "" or isinstance(value, (bool, bytes)):
        return None
    if not isinstance(value, (str, SupportsFloat, SupportsIndex)):
        return None  # a type float() refuses
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _scaled(value: object, scale: float) -> object:
    """``value`` times ``scale`` when it is a number; left as read (for the check to name) otherwise."""
    if scale == 1.0:
        return value
    number = _number(value)
    return value if number is None else number * scale
