"""Sweep specs: load a YAML spec (a shipped name or a path) and check every key before anything runs.

A spec names the experiment, the device and a ``grid``: a mapping of train fields to
lists of values (their cartesian product), or a list of such mappings (their union).
Beyond DESIGN.md's keys a spec may use:

- ``ffn_ratio`` instead of ``ffn_size`` (``ffn_size = ffn_ratio * hidden_size``) and
  ``head_size`` instead of ``num_heads`` (``num_heads = hidden_size / head_size``), so that
  the paper's families (head size 64, ff = 4d) are one grid each;
- a single value in place of a one-element list;
- any grid key at the top level: it then applies to every grid that does not set it;
- ``meter`` (energy meter passed to every train run, default ``auto``) and ``timeout_s``
  (wall-clock limit of one configuration, seconds; the run is FAILED past it);
- ``carbon_intensity`` (g CO2e/kWh), ``region``, ``pue`` and ``price_per_kwh``: passed to
  every train run as its carbon options (``--carbon-intensity`` ...).

Every error is a :class:`~mlflow_roofline.core.errors.ConfigError` naming the key and what is
allowed. This module reads YAML and nothing else: no MLflow, no torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import P_METER
from mlflow_roofline.sweep.spec_grid import (
    GRID_DEFAULTS,
    GRID_KEYS,
    INT_GRID_KEYS,
    REQUIRED_GRID_KEYS,
    check_grid,
    grid_values,
    raw_grids,
)
from mlflow_roofline.sweep.spec_settings import CARBON_KEYS, SETTING_KEYS, SLURM_KEYS, spec_settings

__all__ = [
    "CARBON_KEYS",
    "GRID_DEFAULTS",
    "GRID_KEYS",
    "INT_GRID_KEYS",
    "REQUIRED_GRID_KEYS",
    "SETTING_KEYS",
    "SLURM_KEYS",
    "SPEC_SUFFIXES",
    "SweepSpec",
    "load_spec",
    "parse_spec",
    "resolve_spec_path",
    "shipped_specs",
]

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
    grids: tuple[dict[str, tuple[Any, ...]], ...]
    text: str
    description: str = ""
    slurm: dict[str, Any] = dataclasses.field(default_factory=dict)
    carbon: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    repeats: int = 1

    @property
    def carbon_args(self) -> list[str]:
        """The carbon options of every train run: ``["--region", "DE", ...]``."""
        return carbon_args(self.carbon)

    @property
    def spec_hash(self) -> str:
        """Stable hash of the checked content (not of comments or layout)."""
        content: dict[str, Any] = {
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
        data = yaml.safe_load(text)
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


def parse_spec(data: Any, name: str = "spec", source: str = "<memory>", text: str = "") -> SweepSpec:
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


def carbon_args(carbon: Mapping[str, Any]) -> list[str]:
    """The train options that pass the carbon settings ``carbon`` on: ``["--region", "DE", ...]``."""
    return [arg for key, value in carbon.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
