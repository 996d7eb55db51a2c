"""Embodied carbon of a GPU: the shipped table ``mlflow_roofline/data/embodied.csv``, and its lookup.

Each row gives one GPU's manufacturing emissions (``gpu_kg_co2e``, kg CO2e, cradle to gate),
its share of the server it sits in (``server_share_kg_co2e``, kg CO2e; blank where no sourced
figure exists), and the service life they are amortised over (``life_hours``), each with its
source. The ``name`` is a name of the hardware table (``data/hardware.csv``): a
``roofline.hardware`` value (``NVIDIA H100 80GB HBM3``) is matched to that table's row first
(:meth:`~mlflow_roofline.core.gpu_datasheets.HardwareTable.lookup`), then joined on its name. A
GPU without a row has no figure: it is never given 0. No network call is ever made.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
from collections.abc import Mapping
from importlib import resources

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.gpu_datasheets import load_hardware_table, shipped_specs

TABLE_RESOURCE = "embodied.csv"
G_PER_KG = 1000.0


@dataclasses.dataclass(frozen=True)
class EmbodiedFigure:
    """One GPU's manufacturing emissions and life (kg CO2e, hours), with their sources."""

    name: str
    gpu_kg_co2e: float
    server_share_kg_co2e: float | None
    life_hours: float
    source: str
    server_source: str = ""
    life_source: str = ""
    note: str = ""

    @property
    def manufacturing_kg_co2e(self) -> float:
        """The GPU and, where the table has it, its share of the server, kg CO2e."""
        return self.gpu_kg_co2e + (self.server_share_kg_co2e or 0.0)

    @property
    def g_per_device_hour(self) -> float:
        """Manufacturing grams CO2e per hour of the device's life: what one device-hour carries."""
        return self.manufacturing_kg_co2e * G_PER_KG / self.life_hours

    def describe(self) -> str:
        """``table:<name> (GPU 164 + server share 712.5 kg CO2e over 26280 h)``: the run's source tag."""
        server = "" if self.server_share_kg_co2e is None else f" + server share {self.server_share_kg_co2e:g}"
        return f"table:{self.name} (GPU {self.gpu_kg_co2e:g}{server} kg CO2e over {self.life_hours:g} h)"


def _positive(row: Mapping[str, str | None], column: str, at: str, required: bool = True) -> float | None:
    raw = (row.get(column) or "").strip()
    if not raw and not required:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(
            f"{at}.{column}", f"must be a finite positive number (a missing figure is left out), got {raw!r}"
        )
    return value


def _figure(row: Mapping[str, str | None], at: str, known: set[str]) -> EmbodiedFigure:
    text = {c: (row.get(c) or "").strip() for c in ("name", "source", "server_source", "life_source", "note")}
    if text["name"].lower() not in known:
        raise ConfigError(f"{at}.name", f"{text['name']!r} is not a name of the hardware table (data/hardware.csv)")
    server = _positive(row, "server_share_kg_co2e", at, required=False)
    for column in ("source", "life_source") + (("server_source",) if server is not None else ()):
        if not text[column]:
            raise ConfigError(f"{at}.{column}", "must not be empty: every figure names its source")
    return EmbodiedFigure(
        name=text["name"],
        gpu_kg_co2e=float(_positive(row, "gpu_kg_co2e", at) or 0.0),
        server_share_kg_co2e=server,
        life_hours=float(_positive(row, "life_hours", at) or 0.0),
        source=text["source"],
        server_source=text["server_source"],
        life_source=text["life_source"],
        note=text["note"],
    )


@functools.cache
def embodied_table() -> dict[str, EmbodiedFigure]:
    """The shipped rows keyed by lower-case hardware-table name.

    Raises:
        ConfigError: naming ``package:data/embodied.csv:<line>.<column>`` for a figure that is not a
            finite positive number, a missing source, or a name the hardware table lacks.
    """
    where = f"package:data/{TABLE_RESOURCE}"
    text = resources.files("mlflow_roofline").joinpath(f"data/{TABLE_RESOURCE}").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    known = {spec.name.lower() for spec in shipped_specs()}
    figures = [_figure(row, f"{where}:{i}", known) for i, row in enumerate(csv.DictReader(lines), start=2)]
    return {figure.name.lower(): figure for figure in figures}


def lookup_embodied(hardware: str) -> EmbodiedFigure | None:
    """The figure of ``hardware`` (a table name or a ``roofline.hardware`` value), or None without one."""
    table = embodied_table()
    direct = table.get(hardware.strip().lower())
    if direct is not None:
        return direct
    spec = load_hardware_table().lookup(hardware)
    return None if spec is None else table.get(spec.name.lower())


def missing_embodied(hardware: str) -> str:
    """Why ``hardware`` has no ``embodied_co2e_g``: the figure that is missing, and what the table holds."""
    names = ", ".join(figure.name for figure in embodied_table().values())
    return (
        f"no manufacturing figure for {hardware!r} in the embodied-carbon table (data/{TABLE_RESOURCE}: "
        f"{names}); no embodied_co2e_g"
    )
