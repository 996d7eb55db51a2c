"""Sweep specs: load a YAML spec (a shipped name or a path) and check every key before anything runs.

A spec names the experiment, the device and a ``grid``: a mapping of train fields to
lists of values (their cartesian product), or a list of such mappings (their union).
Beyond docs/schema.md's keys a spec may use:

- ``ffn_ratio`` instead of ``ffn_size`` (``ffn_size = ffn_ratio * hidden_size``) and
  ``head_size`` instead of ``num_heads`` (``num_heads = hidden_size / head_size``), so that
  the paper's families (head size 64, ff = 4d) are one grid each;
- a single value in place of a one-element list;
- any grid key at the top level: it then applies to every grid that does not set it;
- ``meter`` (energy meter passed to every train run, default ``auto``) and ``timeout_s``
  (wall-clock limit of one configuration, seconds; the run is FAILED past it);
- ``carbon_intensity`` (g CO2e/kWh), ``region``, ``pue`` and ``price_per_kwh``: passed to
  every train run as its carbon options (``--carbon-intensity`` ...);
- every other column of the job table (:mod:`mlflow_roofline.core.job_table`: ``precision``,
  ``arch``, ``vocab_size``, ``peft``, ``lora_rank``, ``grad_checkpointing``), in a grid or at the
  top level; absent, the train runs take their defaults, and the grids (and so the spec's hash)
  are what they were without them.

The ``grid`` part: a grid maps train fields to lists of values (their cartesian product); a
spec holds one grid or a list of them; top-level grid keys apply to every grid that does not
set them. The settings part: ``experiment``, ``device``, ``meter``, ``timeout_s``, ``repeats``,
``description``, the ``slurm`` section and the carbon keys.

Every error is a :class:`~mlflow_roofline.core.errors.ConfigError` naming the key and what is
allowed (``grid[1].strategy``). The YAML is read strictly (:mod:`mlflow_roofline.core.strict_yaml`: YAML 1.2
scalars, no duplicate keys, bounded aliases). This module reads YAML and nothing else: no MLflow, no torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TypedDict, cast

import yaml

from mlflow_roofline.core.carbon import CarbonSettings, resolve_carbon
from mlflow_roofline.core.config import int_field_problem
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.job_table import JOB_COLUMNS, JobColumn
from mlflow_roofline.core.schema import DEFAULT_EXPERIMENT, DEVICE_CHOICES, P_METER
from mlflow_roofline.core.strict_yaml import load_yaml
from mlflow_roofline.energy.select import METER_NAMES

GridValue = int | float | str
"""One value of a grid key: a count, ``ffn_ratio``, a strategy, a precision, an arch, a peft or a bool."""

Grid = dict[str, tuple[GridValue, ...]]
"""One grid: train field -> the values it takes."""

CarbonKeys = Mapping[str, float | str]
"""The spec's carbon keys that are set (``region`` a name, the others numbers)."""

# -- the grid ------------------------------------------------------------------------
SETTING_COLUMNS: tuple[str, ...] = ("device",)
"""Job columns a spec sets once, at the top level, not per grid."""

_GRID_COLUMNS: tuple[JobColumn, ...] = tuple(c for c in JOB_COLUMNS if c.name not in SETTING_COLUMNS)

INT_GRID_KEYS: tuple[str, ...] = (*(c.name for c in _GRID_COLUMNS if c.type == "int"), "head_size")
"""Grid keys whose values are integers (the job table's minimums; ``head_size`` is positive)."""

CHOICE_GRID_KEYS: dict[str, tuple[str, ...]] = {c.name: c.levels for c in _GRID_COLUMNS if c.type == "text"}
"""Grid keys whose values are names, and the names each allows."""

BOOL_GRID_KEYS: tuple[str, ...] = tuple(c.name for c in _GRID_COLUMNS if c.type == "bool")
"""Grid keys whose values are true or false."""

GRID_KEYS: tuple[str, ...] = INT_GRID_KEYS + ("ffn_ratio", *BOOL_GRID_KEYS, *CHOICE_GRID_KEYS)
"""Every key a grid may hold (``device`` is one per sweep, so it is top-level only)."""

REQUIRED_GRID_KEYS: tuple[tuple[str, ...], ...] = (
    ("num_layers",),
    ("hidden_size",),
    ("num_heads", "head_size"),
    ("ffn_size", "ffn_ratio"),
    ("seq_len",),
    ("batch_size",),
)
"""Each grid must give one key of every group (directly or through the top level)."""

GRID_DEFAULTS: Grid = {c.name: (c.default,) for c in _GRID_COLUMNS if c.paper and c.default is not None}
"""The paper's columns a grid need not give, at the job table's defaults (the others are left to the
train run, so that a spec's grids and hash are what they were before those columns existed)."""


def positive_number(value: object) -> bool:
    """A real number (not a bool), finite and above zero."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def raw_grids(raw_grid: object) -> tuple[list[str], list[object]]:
    """The spec's ``grid``: one mapping or a non-empty list of them, with the label of each."""
    if raw_grid is None:
        raise ConfigError("grid", "is required: a mapping of train fields to value lists, or a list of them")
    if isinstance(raw_grid, Mapping):
        return ["grid"], [raw_grid]
    if not isinstance(raw_grid, list):
        raise ConfigError("grid", f"must be a mapping or a list of mappings, got {type(raw_grid).__name__}")
    if not raw_grid:
        raise ConfigError("grid", "is empty; give at least one mapping of train fields to values")
    return [f"grid[{i}]" for i in range(len(raw_grid))], list(raw_grid)


def check_grid(label: str, raw: object, top: Mapping[str, tuple[GridValue, ...]]) -> Grid:
    """One grid checked, with the top-level values it does not shadow and the defaults filled in."""
    if not isinstance(raw, Mapping):
        raise ConfigError(label, f"must be a mapping of train fields to value lists, got {type(raw).__name__}")
    if not raw:
        raise ConfigError(label, "is empty; give train fields and their values")
    for key in raw:
        if key not in GRID_KEYS:
            hint = " (device is set once, at the top level)" if key == "device" else ""
            raise ConfigError(f"{label}.{key}", f"unknown grid key{hint}; allowed: {', '.join(GRID_KEYS)}")
    own = {key: grid_values(f"{label}.{key}", value) for key, value in raw.items()}
    for group in (g for g in REQUIRED_GRID_KEYS if len(g) == 2):  # (num_heads, head_size), (ffn_size, ffn_ratio)
        if all(k in own for k in group):
            raise ConfigError(f"{label}.{group[1]}", f"give either {group[0]} or {group[1]}, not both")
        if all(k in top for k in group) and not any(k in own for k in group):
            raise ConfigError(group[1], f"give either {group[0]} or {group[1]} at the top level, not both")
    # A grid's own key wins over a top-level value of it or of its alternative.
    shadowed = {alt for group in REQUIRED_GRID_KEYS for k in group if k in own for alt in group if alt != k}
    grid = {**GRID_DEFAULTS, **{k: v for k, v in top.items() if k not in shadowed}, **own}
    for required in REQUIRED_GRID_KEYS:
        if not any(k in grid for k in required):
            alternative = f" (or {required[1]})" if len(required) > 1 else ""
            raise ConfigError(f"{label}.{required[0]}", f"is required{alternative}, in the grid or at the top level")
    multi = [str(s) for s in grid["strategy"] if s != "single"]  # checked strategy names
    if multi and not any(int(n) >= 2 for n in grid["num_devices"]):  # checked counts
        raise ConfigError(
            f"{label}.num_devices",
            f"strategies {', '.join(multi)} need a value >= 2 (single always runs on 1 device)",
        )
    return grid


def grid_values(key: str, raw: object) -> tuple[GridValue, ...]:
    """One grid entry as a tuple of checked values; a scalar counts as a one-element list."""
    field = key.rsplit(".", 1)[-1]
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise ConfigError(key, "must list at least one value")
    checked = tuple(_value(f"{key}[{i}]" if isinstance(raw, list) else key, field, v) for i, v in enumerate(items))
    return tuple(dict.fromkeys(checked))  # drop repeats, keep order


def _value(key: str, field: str, value: object) -> GridValue:
    if field in INT_GRID_KEYS:
        problem = int_field_problem(field, value)  # head_size follows the rule of the other counts
        if problem is not None:
            raise ConfigError(key, problem)
        return cast(int, value)  # int_field_problem found an int
    if field == "ffn_ratio":
        if not positive_number(value):
            raise ConfigError(
                key, f"must be a finite positive number (ffn_size = ffn_ratio * hidden_size), got {value!r}"
            )
        return cast(float, value)  # positive_number found an int or a float
    if field in CHOICE_GRID_KEYS:
        return choice(key, value, CHOICE_GRID_KEYS[field], what=field)
    if field in BOOL_GRID_KEYS:
        if not isinstance(value, bool):
            raise ConfigError(key, f"must be true or false, got {value!r}")
        return value
    raise ConfigError(key, f"unknown grid key; allowed: {', '.join(GRID_KEYS)}")  # pragma: no cover


def choice(key: str, value: object, allowed: tuple[str, ...], what: str = "value") -> str:
    """``value`` when it is one of ``allowed``; else a ConfigError naming ``key``."""
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(key, f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return value


# -- the settings --------------------------------------------------------------------
CARBON_KEYS: tuple[str, ...] = ("carbon_intensity", "region", "pue", "price_per_kwh")
"""Top-level keys passed to every train run as its carbon options."""

SETTING_KEYS: tuple[str, ...] = (
    "experiment",
    "device",
    P_METER,
    "timeout_s",
    "description",
    "slurm",
    "repeats",
) + CARBON_KEYS
"""Top-level keys that are settings of the sweep, not grid values."""


class SpecSettings(TypedDict):
    """The checked settings of a spec, as :class:`SweepSpec` takes them."""

    experiment: str
    device: str
    meter: str
    timeout_s: float | None
    description: str
    slurm: dict[str, str | int]
    carbon: dict[str, float | str]
    repeats: int


def spec_settings(data: Mapping[str, object]) -> SpecSettings:
    """The spec's settings (experiment, device, meter, timeout_s, description), checked in that order."""
    experiment = data.get("experiment", DEFAULT_EXPERIMENT)
    if not isinstance(experiment, str) or not experiment.strip():
        raise ConfigError("experiment", f"must be a non-empty experiment name, got {experiment!r}")
    device = choice("device", data.get("device", "auto"), DEVICE_CHOICES)
    meter = choice(P_METER, data.get(P_METER, "auto"), METER_NAMES)
    timeout_s = data.get("timeout_s")
    if timeout_s is not None and not positive_number(timeout_s):
        raise ConfigError("timeout_s", f"must be a finite positive number of seconds, got {timeout_s!r}")
    repeats = data.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError("repeats", f"must be a positive integer (measured runs per configuration), got {repeats!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError("description", f"must be text, got {type(description).__name__}")
    return SpecSettings(
        experiment=experiment.strip(),
        device=device,
        meter=meter,
        timeout_s=float(cast(float, timeout_s)) if timeout_s is not None else None,
        description=description,
        slurm=_slurm(data.get("slurm")),
        carbon=_carbon(data),
        repeats=repeats,
    )


def _carbon(data: Mapping[str, object]) -> dict[str, float | str]:
    """The spec's carbon keys that are set, checked (a bad value or unknown region names its key)."""
    carbon = {key: cast("float | str", data[key]) for key in CARBON_KEYS if data.get(key) is not None}
    resolved_carbon(carbon, env={})
    return carbon


def resolved_carbon(carbon: CarbonKeys, env: Mapping[str, str] | None = None) -> CarbonSettings:
    """The carbon settings of ``carbon`` (the spec's keys, or the CLI's over them), checked.

    ``env``: the environment that fills what is not set (None: this process's).

    Raises:
        ConfigError: a bad value or an unknown region, naming its key.
    """
    region = cast("str | None", carbon.get("region"))  # resolve_carbon refuses what is not a region name
    intensity, pue, price = carbon.get("carbon_intensity"), carbon.get("pue"), carbon.get("price_per_kwh")
    if env is None:
        return resolve_carbon(carbon_intensity=intensity, region=region, pue=pue, price_per_kwh=price)
    return resolve_carbon(carbon_intensity=intensity, region=region, pue=pue, price_per_kwh=price, env=env)


SLURM_KEYS: tuple[str, ...] = ("partition", "account", "time_min")


def _slurm(raw: object) -> dict[str, str | int]:
    """The ``slurm`` section: partition and account names, time_min a positive whole number of minutes."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("slurm", f"must be a mapping with keys {', '.join(SLURM_KEYS)}")
    for key, value in raw.items():
        if key not in SLURM_KEYS:
            raise ConfigError(f"slurm.{key}", f"unknown key; expected one of {', '.join(SLURM_KEYS)}")
        if key == "time_min":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError("slurm.time_min", f"must be a positive whole number of minutes, got {value!r}")
        elif not isinstance(value, str) or not value.strip():
            raise ConfigError(f"slurm.{key}", f"must be a non-empty name, got {value!r}")
    return dict(raw)


# -- the spec ------------------------------------------------------------------------
SPEC_SUFFIXES: tuple[str, ...] = (".yaml", ".yml")


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A checked sweep spec.

    Attributes:
        name: the shipped name (``smoke``) or the file's stem.
        source: where it was read from (a path, or ``package:specs/<name>.yaml``).
        experiment: MLflow experiment the train runs go to.
        device: ``auto``, ``cuda`` or ``cpu`` (resolved when the plan is made).
        meter: energy meter every train run asks for.
        timeout_s: wall-clock limit of one configuration in seconds, or None for none.
        grids: the grids, each a mapping key -> tuple of values, top-level values merged in
            and defaults filled, so every grid holds every key it needs.
        text: the spec's YAML text as read (logged as an artifact of the sweep run).
        description: free text from the spec, or "".
        slurm: the ``slurm`` section for ``--executor slurm``: ``partition``, ``account``
            (names) and ``time_min`` (minutes per configuration); the command's options win.
        carbon: the carbon settings given (keys of :data:`CARBON_KEYS`), passed to every train run.
        repeats: measured runs per configuration (a positive integer, default 1).
    """

    name: str
    source: str
    experiment: str
    device: str
    meter: str
    timeout_s: float | None
    grids: tuple[Grid, ...]
    text: str
    description: str = ""
    slurm: Mapping[str, str | int] = dataclasses.field(default_factory=dict)
    carbon: CarbonKeys = dataclasses.field(default_factory=dict)
    repeats: int = 1

    @property
    def carbon_args(self) -> list[str]:
        """The carbon options of every train run: ``["--region", "DE", ...]``."""
        return carbon_args(self.carbon)

    @property
    def spec_hash(self) -> str:
        """Stable hash of the checked content (not of comments or layout)."""
        content: dict[str, object] = {
            "experiment": self.experiment,
            "device": self.device,
            P_METER: self.meter,
            "grids": [{k: list(v) for k, v in sorted(g.items())} for g in self.grids],
        }
        if self.repeats != 1:  # specs without repeats keep the hash they always had
            content["repeats"] = self.repeats
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def shipped_specs() -> dict[str, Path]:
    """The specs that ship with the package, name -> path."""
    folder = resources.files("mlflow_roofline") / "specs"
    found: dict[str, Path] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(SPEC_SUFFIXES):
            found[entry.name.rsplit(".", 1)[0]] = Path(str(entry))
    return dict(sorted(found.items()))


def resolve_spec_path(spec: str) -> Path:
    """Find a spec: an existing file path first, else a shipped name.

    Raises:
        ConfigError: neither a readable file nor a shipped spec.
    """
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    shipped = shipped_specs()
    if spec in shipped:
        return shipped[spec]
    raise ConfigError(
        "spec", f"{spec!r} is neither a YAML file nor a shipped spec; shipped: {', '.join(shipped) or 'none'}"
    )


def load_spec(spec: str) -> SweepSpec:
    """Read and check a spec given by shipped name or path.

    Raises:
        ConfigError: the file is missing, not UTF-8 text or not YAML, or a key breaks a rule.
    """
    path = resolve_spec_path(spec)
    text = _read_text(path)
    try:
        data = load_yaml(text, what="spec")
    except yaml.YAMLError as exc:
        raise ConfigError("spec", f"{path} is not valid YAML ({exc.__class__.__name__}: {exc})") from None
    shipped = shipped_specs()
    name = path.stem
    source = f"package:specs/{path.name}" if shipped.get(name) == path else str(path)
    return parse_spec(data, name=name, source=source, text=text)


def _read_text(path: Path) -> str:
    """The spec file's text; a file that cannot be read or is not UTF-8 text is a ConfigError naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("spec", f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise ConfigError("spec", f"cannot read {path}: {exc.strerror or exc}") from None


def parse_spec(data: object, name: str = "spec", source: str = "<memory>", text: str = "") -> SweepSpec:
    """Check a spec's parsed YAML and fill its defaults.

    Raises:
        ConfigError: naming the key at fault (``grid[1].strategy``) and what is allowed.
    """
    if not isinstance(data, Mapping):
        raise ConfigError("spec", f"must be a YAML mapping with a 'grid' key, got {type(data).__name__}")
    allowed = SETTING_KEYS + ("grid",) + GRID_KEYS
    for key in data:
        if key not in allowed:
            raise ConfigError(str(key), f"unknown key; allowed: {', '.join(allowed)}")
    settings = spec_settings(data)
    top = {key: grid_values(key, data[key]) for key in GRID_KEYS if key in data}
    labels, raws = raw_grids(data.get("grid"))
    grids = tuple(check_grid(label, g, top) for label, g in zip(labels, raws))
    return SweepSpec(name=name, source=source, grids=grids, text=text, **settings)


def carbon_args(carbon: Mapping[str, object]) -> list[str]:
    """The train options that pass the carbon settings ``carbon`` on: ``["--region", "DE", ...]``."""
    return [arg for key, value in carbon.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
