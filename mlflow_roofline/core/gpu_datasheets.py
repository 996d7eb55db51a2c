"""Datasheet figures of GPUs: peak FLOP/s, memory bandwidth and board power, with their source.

The table shipped as package data (``mlflow_roofline/data/hardware.csv``) holds common
NVIDIA data-centre and workstation GPUs. Every row carries the URL of the NVIDIA datasheet
or architecture whitepaper its figures come from. The tensor figure is DENSE (NVIDIA's
datasheets print the with-sparsity figure, twice as large, beside it) and, for GeForce
cards, the rate with FP32 accumulation, which is what mixed-precision training uses.

Columns (units in the names): ``name``; ``pattern``, a regular expression matched against
the whole ``roofline.hardware`` value (the NVML / ``torch.cuda.get_device_name`` name,
``NVIDIA A100-SXM4-80GB``), case-insensitive; ``fp16_tensor_flops`` (FLOP/s, FP16/BF16
tensor, dense); ``fp32_flops`` (FLOP/s, non-tensor); ``mem_bandwidth_bytes_per_s``;
``board_power_w`` (W); ``source`` (URL); ``note`` (optional).

A user file with the same columns extends it (:func:`load_hardware_table`: the argument,
else the env var ``ROOFLINE_HARDWARE_TABLE``); its rows are looked up first, so a user row
also overrides a shipped one. No network call is ever made.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import os
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

from mlflow_roofline.core.errors import ConfigError

ENV_HARDWARE_TABLE = "ROOFLINE_HARDWARE_TABLE"
TABLE_RESOURCE = "hardware.csv"
NUMBER_COLUMNS: tuple[str, ...] = ("fp16_tensor_flops", "fp32_flops", "mem_bandwidth_bytes_per_s", "board_power_w")
COLUMNS: tuple[str, ...] = ("name", "pattern", *NUMBER_COLUMNS, "source")


@dataclasses.dataclass(frozen=True)
class HardwareSpec:
    """One GPU's datasheet figures (see the module docstring for units)."""

    name: str
    pattern: str
    fp16_tensor_flops: float
    fp32_flops: float
    mem_bandwidth_bytes_per_s: float
    board_power_w: float
    source: str
    note: str = ""

    def matches(self, hardware: str) -> bool:
        """Whether ``hardware`` (a ``roofline.hardware`` value, or this row's name) is this GPU."""
        text = hardware.strip()
        return text.lower() == self.name.lower() or re.fullmatch(self.pattern, text, re.IGNORECASE) is not None

    def peak_flops(self, precision: str = "fp16") -> float:
        """Peak FLOP/s at ``precision``: the FP32 rate for ``fp32``, else the FP16/BF16 tensor rate."""
        return self.fp32_flops if precision == "fp32" else self.fp16_tensor_flops

    def covariates(self, precision: str = "fp16") -> dict[str, float]:
        """What a law pooled over hardware knows of this GPU, natural logs: ``log_jpf`` (board watts per
        peak FLOP/s: J/FLOP at peak), ``log_ridge`` (peak FLOP/s per byte/s of bandwidth: the roofline's
        ridge point, FLOP/byte) and ``log_peak`` (peak FLOP/s)."""
        peak = self.peak_flops(precision)
        return {
            "log_jpf": math.log(self.board_power_w / peak),
            "log_ridge": math.log(peak / self.mem_bandwidth_bytes_per_s),
            "log_peak": math.log(peak),
        }


@dataclasses.dataclass(frozen=True)
class HardwareTable:
    """GPUs by datasheet; :meth:`lookup` finds the row of a hardware name (the first that matches)."""

    specs: tuple[HardwareSpec, ...]

    def lookup(self, hardware: str) -> HardwareSpec | None:
        """The row of ``hardware``, or None when no row matches it."""
        return next((spec for spec in self.specs if spec.matches(hardware)), None)

    def names(self) -> list[str]:
        """Every row's name, in lookup order."""
        return [spec.name for spec in self.specs]


def parse_rows(rows: Iterable[Mapping[str, str | None]], where: str) -> tuple[HardwareSpec, ...]:
    """Check CSV rows (``csv.DictReader`` of a table) into specs.

    Raises:
        ConfigError: naming ``<where>:<line>`` and the column, or the missing columns.
    """
    specs = []
    for line, row in enumerate(rows, start=2):
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise ConfigError(
                where,
                f"the hardware table lacks the column(s) {', '.join(missing)}; "
                f"expected {', '.join(COLUMNS)} (and optionally note)",
            )
        specs.append(_spec(row, f"{where}:{line}"))
    return tuple(specs)


def _spec(row: Mapping[str, str | None], at: str) -> HardwareSpec:
    values: dict[str, float] = {}
    for column in NUMBER_COLUMNS:
        raw = (row.get(column) or "").strip()
        try:
            values[column] = float(raw)
        except ValueError:
            values[column] = float("nan")
        if not (math.isfinite(values[column]) and values[column] > 0):
            raise ConfigError(f"{at}.{column}", f"must be a finite positive number, got {raw!r}")
    texts = {c: (row.get(c) or "").strip() for c in ("name", "pattern", "source", "note")}
    for column in ("name", "pattern", "source"):
        if not texts[column]:
            raise ConfigError(f"{at}.{column}", "must not be empty (every figure needs its datasheet source)")
    try:
        re.compile(texts["pattern"])
    except re.error as exc:
        raise ConfigError(f"{at}.pattern", f"must be a regular expression: {exc}") from None
    return HardwareSpec(texts["name"], texts["pattern"], **values, source=texts["source"], note=texts["note"])


@functools.cache
def shipped_specs() -> tuple[HardwareSpec, ...]:
    """The rows of the table shipped as package data."""
    text = resources.files("mlflow_roofline").joinpath(f"data/{TABLE_RESOURCE}").read_text(encoding="utf-8")
    return parse_rows(csv.DictReader(text.splitlines()), f"package:data/{TABLE_RESOURCE}")


def read_user_table(path: str | Path) -> tuple[HardwareSpec, ...]:
    """The rows of a user's table (same columns as the shipped one)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(ENV_HARDWARE_TABLE, f"cannot read the hardware table {str(file)!r}: {exc.strerror}") from None
    return parse_rows(csv.DictReader(text.splitlines()), str(file))


def load_hardware_table(extra: str | Path | None = None, env: Mapping[str, str] | None = None) -> HardwareTable:
    """The shipped table, extended by ``extra`` or else the file named by ``ROOFLINE_HARDWARE_TABLE``.

    The user's rows come first, so they override a shipped row that matches the same name.
    """
    env = os.environ if env is None else env
    path = extra if extra is not None else env.get(ENV_HARDWARE_TABLE) or None
    user = read_user_table(path) if path else ()
    return HardwareTable(user + shipped_specs())
