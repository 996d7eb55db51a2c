"""The mapping file: how a foreign table's columns become the run schema's fields.

A mapping is YAML with four optional keys::

    columns:              # file column -> schema name
      layers: num_layers
      joules: energy_j
    units:                # of every energy and every time field
      energy: kWh         # J, Wh or kWh: energy_j, energy_cpu_j, energy_dram_j, energy_node_j
      time: min           # s, min or h: time_s
    constants:            # schema fields the file lacks, the same for every row
      hardware: NVIDIA A100-SXM4-80GB
      precision: bf16
    rows:                 # codecarbon: per-run fields, keyed by the value of `key`
      key: project_name
      values:
        bert-base-ddp4: {num_layers: 12, hidden_size: 768, strategy: ddp, num_devices: 4}

The file is read strictly (:mod:`mlflow_roofline.core.strict_yaml`): YAML 1.2 scalars (``1:30``
and ``yes`` are text, ``1e-300`` a number), a key written twice is an error, aliases are bounded.
Each file column maps to its own field: two columns renamed to one field are refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping as MappingABC
from pathlib import Path

import yaml

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import M_ENERGY_CPU_J, M_ENERGY_DRAM_J, M_ENERGY_J, M_ENERGY_NODE_J, M_TIME_S
from mlflow_roofline.core.strict_yaml import load_yaml
from mlflow_roofline.ingest.files import read_small_text

ENERGY_UNITS_J: dict[str, float] = {"J": 1.0, "Wh": 3600.0, "kWh": 3.6e6}
"""Joules in one unit of each accepted energy unit."""

TIME_UNITS_S: dict[str, float] = {"s": 1.0, "min": 60.0, "h": 3600.0}
"""Seconds in one unit of each accepted time unit."""

ENERGY_FIELDS: tuple[str, ...] = (M_ENERGY_J, M_ENERGY_CPU_J, M_ENERGY_DRAM_J, M_ENERGY_NODE_J)
"""Every energy field of a run: the mapping's energy unit applies to each (joules once converted)."""

TIME_FIELDS: tuple[str, ...] = (M_TIME_S,)
"""Every time field of a run: the mapping's time unit applies to each (seconds once converted)."""

MAPPING_KEYS: tuple[str, ...] = ("columns", "units", "constants", "rows")


@dataclasses.dataclass(frozen=True)
class Mapping:
    """A parsed mapping file.

    Attributes:
        columns: file column -> schema field.
        energy_unit: unit of every energy field (a key of :data:`ENERGY_UNITS_J`).
        time_unit: unit of every time field (a key of :data:`TIME_UNITS_S`).
        constants: schema field -> value for every row.
        row_key: the file column whose value selects one entry of ``row_values``.
        row_values: key value -> schema field -> value, for that row only.
    """

    columns: dict[str, str] = dataclasses.field(default_factory=dict)
    energy_unit: str = "J"
    time_unit: str = "s"
    constants: dict[str, object] = dataclasses.field(default_factory=dict)
    row_key: str | None = None
    row_values: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)

    @property
    def joules_per_unit(self) -> float:
        """Joules in one unit of the file's energy fields."""
        return ENERGY_UNITS_J[self.energy_unit]

    @property
    def seconds_per_unit(self) -> float:
        """Seconds in one unit of the file's time fields."""
        return TIME_UNITS_S[self.time_unit]


def load_mapping(path: str | Path | None) -> Mapping:
    """Read and check a mapping file; no path is the identity mapping in joules and seconds.

    Raises:
        ConfigError: an unreadable file (not a regular file, over 1 MiB: see
            :func:`ingest.files.read_small_text`), an unknown key or unit, or a malformed
            section, naming the key.
    """
    if path is None:
        return Mapping()
    text = read_small_text(Path(path), "mapping")  # a regular file of at most 1 MiB: never /dev/zero or a FIFO
    try:
        raw = load_yaml(text, what="mapping")
    except yaml.YAMLError as exc:
        raise ConfigError("mapping", f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    except ConfigError as exc:
        field = exc.field if exc.field == "mapping" else f"mapping.{exc.field}"
        raise ConfigError(field, exc.rule) from None
    return parse_mapping(raw or {})


def parse_mapping(raw: object) -> Mapping:
    """Build a :class:`Mapping` from the YAML's data.

    Raises:
        ConfigError: naming the key at fault.
    """
    if not isinstance(raw, MappingABC):
        raise ConfigError("mapping", f"must be a mapping with keys {', '.join(MAPPING_KEYS)}")
    unknown = sorted(set(raw) - set(MAPPING_KEYS))
    if unknown:
        raise ConfigError(f"mapping.{unknown[0]}", f"unknown key; expected one of {', '.join(MAPPING_KEYS)}")
    columns = _str_dict(raw.get("columns") or {}, "mapping.columns")
    _check_one_column_per_field(columns)
    units = _str_dict(raw.get("units") or {}, "mapping.units")
    for key in sorted(set(units) - {"energy", "time"}):
        raise ConfigError(f"mapping.units.{key}", "unknown unit kind; expected energy or time")
    energy_unit = units.get("energy", "J")
    if energy_unit not in ENERGY_UNITS_J:
        raise ConfigError("mapping.units.energy", f"must be one of {', '.join(ENERGY_UNITS_J)}, got {energy_unit!r}")
    time_unit = units.get("time", "s")
    if time_unit not in TIME_UNITS_S:
        raise ConfigError("mapping.units.time", f"must be one of {', '.join(TIME_UNITS_S)}, got {time_unit!r}")
    constants = raw.get("constants") or {}
    if not isinstance(constants, MappingABC):
        raise ConfigError("mapping.constants", "must be a mapping of schema field -> value")
    row_key, row_values = _rows(raw.get("rows"))
    return Mapping(columns, energy_unit, time_unit, {str(k): v for k, v in constants.items()}, row_key, row_values)


def _check_one_column_per_field(columns: dict[str, str]) -> None:
    """Refuse two file columns renamed to one field (one of them would silently win)."""
    source_of: dict[str, str] = {}
    for column, field in columns.items():
        if field in source_of:
            raise ConfigError(
                f"mapping.columns.{column}",
                f"{source_of[field]!r} and {column!r} are both mapped to {field!r}: map one column to each field",
            )
        source_of[field] = column


def _str_dict(value: object, field: str) -> dict[str, str]:
    if not isinstance(value, MappingABC) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(field, "must be a mapping of names to names")
    return {str(k): v for k, v in value.items()}


def _rows(raw: object) -> tuple[str | None, dict[str, dict[str, object]]]:
    if raw is None:
        return None, {}
    if not isinstance(raw, MappingABC) or not isinstance(raw.get("key"), str):
        raise ConfigError("mapping.rows", "must hold `key` (a file column) and `values` (key value -> fields)")
    values = raw.get("values") or {}
    if not isinstance(values, MappingABC) or not all(isinstance(v, MappingABC) for v in values.values()):
        raise ConfigError("mapping.rows.values", "must map each key value to a mapping of schema fields")
    return raw["key"], {str(k): dict(v) for k, v in values.items()}
