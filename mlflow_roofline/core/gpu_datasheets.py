"""Datasheet figures of accelerators: peak FLOP/s, memory, board power and interconnect, with their source.

The table shipped as package data (``mlflow_roofline/data/hardware.csv``) holds every
NVIDIA data-centre and workstation GPU since Pascal (P100, V100, V100S, T4, A2, A10, A10G,
A16, A30, A40, A100, L4, L40, L40S, H100, H200, H20, B100, B200, GB200, RTX A4000-A6000,
RTX 6000 Ada, Quadro RTX 6000/8000, Titan RTX), the common GeForce cards (RTX 2080 Ti,
3080, 3090, 4080, 4090, 5090), AMD Instinct MI210, MI250, MI250X and MI300X and Intel
Gaudi 2 and 3. Every row names its source: the vendor's datasheet or architecture
whitepaper (a URL), or, for the two parts without a public datasheet (A10G, H20), where
the figures come from. The tensor figure is DENSE (datasheets print the with-sparsity
figure, twice as large, beside it) and, for GeForce cards, the rate with FP32
accumulation, which is what mixed-precision training uses; the note says how each row's
figure was read.

Columns (units in the names): ``name``; ``pattern``, the names NVML / amdsmi /
``torch.cuda.get_device_name`` report for it (the ``roofline.hardware`` value, e.g.
``Tesla T4``, ``NVIDIA A100-SXM4-80GB``, ``AMD Instinct MI250X``), alternatives separated
by ``|``, each a literal name or a glob (``*`` any run of characters, ``?`` one), all
case-insensitive; never a regular expression, so matching cannot backtrack;
``fp16_tensor_flops`` (FLOP/s, FP16/BF16 tensor or matrix, dense); ``fp32_flops`` (FLOP/s,
non-tensor); ``mem_bandwidth_bytes_per_s``; ``board_power_w`` (W, TDP / board power);
``source``; optional: ``tf32_tensor_flops``, ``bf16_tensor_flops``, ``fp8_tensor_flops`` (FLOP/s, the
dense tensor rate at that precision, empty where the device has no such mode: a V100 has no bf16),
``memory_bytes`` (the datasheet's GB, which for device memory is
GiB: 2**30 bytes each), ``interconnect`` (the fastest device-to-device link the part
supports: NVLink, NVLink bridge, Infinity Fabric, RoCE, PCIe) and
``interconnect_bytes_per_s`` (its peak peer bandwidth per device, both directions summed,
as NVIDIA quotes NVLink), ``note``. The shipped table fills every column.

Reading a table checks it (:class:`~core.errors.ConfigError` naming ``<file>:<line>.<column>``):
every number must lie in :data:`DEVICE_RANGES`, the range a real device can have, which
is narrower than a factor 1000 around today's parts, so a unit slip of 10^3 to 10^9
(GB/s written as bytes/s, TFLOP/s as FLOP/s, kW as W) is refused; no two rows may share
a name or a pattern, nor may one row's pattern match another's name or literal pattern.
A simulated device (``source`` starting ``simulated:``, the test generator's fleet, whose
bandwidth is in its memory proxy's units) is only checked to be finite and positive, and is
read only where ``ROOFLINE_ALLOW_SIMULATED_HARDWARE=1`` says so (tests and benchmarks): in
any other table such a row is refused, so the prefix cannot wave a unit slip through.

A user file with the same columns (the optional ones may be absent) extends it
(:func:`load_hardware_table`: the argument, else the env var ``ROOFLINE_HARDWARE_TABLE``);
its rows are looked up first, so a user row also overrides a shipped one. No network call
is ever made.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

from mlflow_roofline.core.errors import ConfigError

ENV_HARDWARE_TABLE = "ROOFLINE_HARDWARE_TABLE"
ENV_ALLOW_SIMULATED = "ROOFLINE_ALLOW_SIMULATED_HARDWARE"
"""Set to 1 to read ``simulated:`` rows (the test generator's fleet); refused otherwise."""
TABLE_RESOURCE = "hardware.csv"
COVARIATE_NAMES: tuple[str, ...] = ("log_jpf", "log_jpv", "log_ridge", "log_peak")
"""The covariates (logs) of :meth:`HardwareSpec.covariates` every law pooled over GPUs may read (``log_link``
aside: only a pooled speedup law reads it, where the row gives it)."""
NUMBER_COLUMNS: tuple[str, ...] = ("fp16_tensor_flops", "fp32_flops", "mem_bandwidth_bytes_per_s", "board_power_w")
COLUMNS: tuple[str, ...] = ("name", "pattern", *NUMBER_COLUMNS, "source")
PRECISION_COLUMNS: Mapping[str, str] = {
    "fp32": "fp32_flops",
    "tf32": "tf32_tensor_flops",
    "bf16": "bf16_tensor_flops",
    "fp16": "fp16_tensor_flops",
    "fp8": "fp8_tensor_flops",
}
"""The column holding the peak FLOP/s at each precision of the job table (dense tensor rates but fp32's)."""
VECTOR_PRECISIONS: tuple[str, ...] = tuple(p for p, column in PRECISION_COLUMNS.items() if column == "fp32_flops")
"""The precisions whose matmuls run on the vector FP32 units (CUDA cores), not on tensor cores: ``fp32``."""
TABLE_PRECISION = "fp16"
"""The precision whose peak every row gives (``fp16_tensor_flops`` is required): where a law takes a GPU's
covariates when no other precision is known (a law fitted before ``precision`` entered it took them all here)."""
OPTIONAL_NUMBER_COLUMNS: tuple[str, ...] = (
    "tf32_tensor_flops",
    "bf16_tensor_flops",
    "fp8_tensor_flops",
    "memory_bytes",
    "interconnect_bytes_per_s",
)
OPTIONAL_COLUMNS: tuple[str, ...] = (*OPTIONAL_NUMBER_COLUMNS, "interconnect", "note")
SIMULATED_SOURCE = "simulated:"
"""The ``source`` prefix of a simulated device's row (exempt from :data:`DEVICE_RANGES`)."""

DEVICE_RANGES: Mapping[str, tuple[float, float]] = {
    "fp16_tensor_flops": (4e12, 1e16),
    "fp32_flops": (2e11, 4e15),
    "tf32_tensor_flops": (2e12, 8e15),
    "bf16_tensor_flops": (4e12, 1e16),
    "fp8_tensor_flops": (8e12, 2e16),
    "mem_bandwidth_bytes_per_s": (1e10, 1e14),
    "board_power_w": (10.0, 5000.0),
    "memory_bytes": (1e9, 4e12),
    "interconnect_bytes_per_s": (2e9, 2e13),
}
"""Per number column, the [low, high] a real device can have: wide enough for a small inference
card and well beyond today's largest part, yet each shipped value times or over 1000 falls out."""

_UNITS = {
    "fp16_tensor_flops": "FLOP/s",
    "fp32_flops": "FLOP/s",
    "tf32_tensor_flops": "FLOP/s",
    "bf16_tensor_flops": "FLOP/s",
    "fp8_tensor_flops": "FLOP/s",
    "mem_bandwidth_bytes_per_s": "bytes/s",
    "board_power_w": "W",
    "memory_bytes": "bytes",
    "interconnect_bytes_per_s": "bytes/s",
}

WILDCARDS = frozenset("*?")
REGEX_SYNTAX = frozenset("\\()[]{}^$+")
"""Characters of a regular expression that no device name holds: a pattern using one is refused."""


def glob_matches(pattern: str, text: str) -> bool:
    """Whether ``text`` is matched by the glob ``pattern`` (``*`` any run, ``?`` one character), any case.

    The classic two-pointer match (:func:`glob_match_steps`): never exponential time.
    """
    return glob_match_steps(pattern, text)[0]


def glob_match_steps(pattern: str, text: str) -> tuple[bool, int]:
    """Whether the glob ``pattern`` matches ``text`` (any case), and the loop steps it took.

    It backtracks only to the last ``*``, so the steps are at most
    ``(len(pattern) + 1) * (len(text) + 1)`` whatever the input: no regular expression and
    no ``fnmatch`` (which translates globs to regular expressions) is involved.
    """
    p, t = pattern.lower(), text.lower()
    pi = ti = steps = 0
    star, resume = -1, 0
    while ti < len(t):
        steps += 1
        if pi < len(p) and p[pi] != "*" and (p[pi] == "?" or p[pi] == t[ti]):
            pi, ti = pi + 1, ti + 1
        elif pi < len(p) and p[pi] == "*":
            star, resume = pi, ti
            pi += 1
        elif star >= 0:
            resume += 1
            pi, ti = star + 1, resume
        else:
            return False, steps
    return all(c == "*" for c in p[pi:]), steps


def split_patterns(pattern: str) -> tuple[str, ...]:
    """The alternatives of a ``pattern`` cell (``|``-separated, each stripped)."""
    return tuple(part.strip() for part in pattern.split("|"))


@dataclasses.dataclass(frozen=True)
class HardwareSpec:
    """One device's datasheet figures (see the module docstring for units)."""

    name: str
    pattern: str
    fp16_tensor_flops: float
    fp32_flops: float
    mem_bandwidth_bytes_per_s: float
    board_power_w: float
    source: str
    note: str = ""
    memory_bytes: float | None = None
    interconnect: str = ""
    interconnect_bytes_per_s: float | None = None
    tf32_tensor_flops: float | None = None
    bf16_tensor_flops: float | None = None
    fp8_tensor_flops: float | None = None

    @property
    def patterns(self) -> tuple[str, ...]:
        """The names and globs this row answers to, besides its own name."""
        return split_patterns(self.pattern)

    def literals(self) -> tuple[str, ...]:
        """The exact names this row answers to: its name and its patterns without wildcards."""
        return (self.name, *(p for p in self.patterns if not WILDCARDS & set(p)))

    def matches(self, hardware: str) -> bool:
        """Whether ``hardware`` (a ``roofline.hardware`` value, or this row's name) is this device."""
        text = hardware.strip()
        return text.lower() == self.name.lower() or any(glob_matches(p, text) for p in self.patterns)

    def supports(self, precision: str) -> bool:
        """Whether the row gives a peak FLOP/s at ``precision`` (a mode the device has)."""
        return getattr(self, PRECISION_COLUMNS.get(precision, "-"), None) is not None

    def same_peak(self, precision: str, other: str) -> bool:
        """Whether the row's peak FLOP/s is the same at both precisions (both given, equal to 1e-9 relative)."""
        if not (self.supports(precision) and self.supports(other)):
            return False
        return math.isclose(self.peak_flops(precision), self.peak_flops(other), rel_tol=1e-9)

    def peak_flops(self, precision: str = TABLE_PRECISION) -> float:
        """Peak FLOP/s at ``precision`` (:data:`PRECISION_COLUMNS`: the FP32 rate for ``fp32``, else the dense
        tensor rate of that precision).

        Raises:
            ConfigError: naming ``precision`` where the row has no figure for it (a V100 has no bf16).
        """
        peak = getattr(self, PRECISION_COLUMNS.get(precision, "-"), None)
        if peak is None:
            known = [p for p in PRECISION_COLUMNS if self.supports(p)]
            raise ConfigError(
                "precision", f"{self.name} has no {precision} peak in the hardware table; it gives {', '.join(known)}"
            )
        return float(peak)

    def covariates(self, precision: str = TABLE_PRECISION) -> dict[str, float]:
        """What a law pooled over hardware knows of this GPU, natural logs: ``log_jpf`` (board watts per
        peak FLOP/s: J/FLOP at peak), ``log_jpv`` (board watts per FP32 vector FLOP/s: J/FLOP of work that
        runs off the tensor cores, whatever the precision), ``log_ridge`` (peak FLOP/s per byte/s of
        bandwidth: the roofline's ridge point, FLOP/byte), ``log_peak`` (peak FLOP/s) and, where the row
        gives it, ``log_link`` (log interconnect bytes/s per device: what a pooled comm-time speedup law
        scales by)."""
        peak = self.peak_flops(precision)
        out = {
            "log_jpf": math.log(self.board_power_w / peak),
            "log_jpv": math.log(self.board_power_w / self.fp32_flops),
            "log_ridge": math.log(peak / self.mem_bandwidth_bytes_per_s),
            "log_peak": math.log(peak),
        }
        if self.interconnect_bytes_per_s:
            out["log_link"] = math.log(self.interconnect_bytes_per_s)
        return out


LOOKUPS_KEPT = 4096
"""Hardware names a table remembers the row of (a served model looks one up per request)."""


@dataclasses.dataclass(frozen=True)
class HardwareTable:
    """Devices by datasheet; :meth:`lookup` finds the row of a hardware name (the first that matches)."""

    specs: tuple[HardwareSpec, ...]
    _found: dict[str, HardwareSpec | None] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def lookup(self, hardware: str) -> HardwareSpec | None:
        """The row of ``hardware``, or None when no row matches it.

        Each row's name and globs are tried in turn (30-100 us over the shipped table; a served
        request looks up twice), so the first :data:`LOOKUPS_KEPT` names looked up are remembered
        (0.1 us): the table never changes.
        """
        try:
            return self._found[hardware]
        except KeyError:
            pass
        spec = next((spec for spec in self.specs if spec.matches(hardware)), None)
        if len(self._found) < LOOKUPS_KEPT:
            self._found[hardware] = spec
        return spec

    def names(self) -> list[str]:
        """Every row's name, in lookup order."""
        return [spec.name for spec in self.specs]


def parse_rows(
    rows: Iterable[Mapping[str, str | None]], where: str, allow_simulated: bool = False
) -> tuple[HardwareSpec, ...]:
    """Check CSV rows (``csv.DictReader`` of a table) into specs, refusing duplicates among them
    (and ``simulated:`` rows unless ``allow_simulated``).

    Raises:
        ConfigError: naming ``<where>:<line>`` and the column, or the missing columns.
    """
    specs: list[HardwareSpec] = []
    for line, row in enumerate(rows, start=2):
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise ConfigError(
                where,
                f"the hardware table lacks the column(s) {', '.join(missing)}; "
                f"expected {', '.join(COLUMNS)} (and optionally {', '.join(OPTIONAL_COLUMNS)})",
            )
        specs.append(_spec(row, f"{where}:{line}", allow_simulated))
    check_unique(specs, where)
    return tuple(specs)


def check_unique(specs: Iterable[HardwareSpec], where: str) -> None:
    """Refuse two rows sharing a name or a pattern, or one row's pattern matching another's names.

    Raises:
        ConfigError: at ``<where>:<line>.name`` or ``.pattern`` of the later row, naming the earlier.
    """
    seen: list[tuple[int, HardwareSpec]] = []
    for line, spec in enumerate(specs, start=2):
        for earlier_line, earlier in seen:
            clash = _clash(spec, earlier)
            if clash:
                column, text = clash
                raise ConfigError(
                    f"{where}:{line}.{column}",
                    f"{text!r} also names line {earlier_line} ({earlier.name!r}): every name and pattern "
                    "must pick one row",
                )
        seen.append((line, spec))


def _clash(spec: HardwareSpec, earlier: HardwareSpec) -> tuple[str, str] | None:
    """The column and text of ``spec`` that names the ``earlier`` row too (None when none does)."""
    if earlier.matches(spec.name):
        return "name", spec.name
    earlier_patterns = {p.lower() for p in earlier.patterns}
    for pattern in spec.patterns:
        if pattern.lower() in earlier_patterns or (not WILDCARDS & set(pattern) and earlier.matches(pattern)):
            return "pattern", pattern
    for text in earlier.literals():
        if spec.matches(text):
            return ("name" if text.lower() == spec.name.lower() else "pattern"), text
    return None


def _number(row: Mapping[str, str | None], column: str, at: str, simulated: bool) -> float:
    raw = (row.get(column) or "").strip()
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{at}.{column}", f"must be a finite positive number, got {raw!r}")
    low, high = DEVICE_RANGES[column]
    if not simulated and not low <= value <= high:
        unit = _UNITS[column]
        raise ConfigError(
            f"{at}.{column}",
            f"{raw} {unit} is outside what a real device can have ({low:g} to {high:g} {unit}): "
            "a unit slip? (the column is in the unit its name says)",
        )
    return value


def _spec(row: Mapping[str, str | None], at: str, allow_simulated: bool = False) -> HardwareSpec:
    texts = {c: (row.get(c) or "").strip() for c in ("name", "pattern", "source", "note", "interconnect")}
    for column in ("name", "pattern", "source"):
        if not texts[column]:
            raise ConfigError(f"{at}.{column}", "must not be empty (every figure needs its datasheet source)")
    simulated = texts["source"].startswith(SIMULATED_SOURCE)
    if simulated and not allow_simulated:
        raise ConfigError(
            f"{at}.source",
            f"{texts['source']!r} marks a simulated device (figures in a test generator's units), read only "
            f"with {ENV_ALLOW_SIMULATED}=1; a real device's source names its datasheet",
        )
    values = {column: _number(row, column, at, simulated) for column in NUMBER_COLUMNS}
    optional = {
        column: _number(row, column, at, simulated) if (row.get(column) or "").strip() else None
        for column in OPTIONAL_NUMBER_COLUMNS
    }
    _check_pattern(texts["pattern"], f"{at}.pattern")
    return HardwareSpec(
        texts["name"],
        texts["pattern"],
        **values,
        source=texts["source"],
        note=texts["note"],
        memory_bytes=optional["memory_bytes"],
        interconnect=texts["interconnect"],
        interconnect_bytes_per_s=optional["interconnect_bytes_per_s"],
        tf32_tensor_flops=optional["tf32_tensor_flops"],
        bf16_tensor_flops=optional["bf16_tensor_flops"],
        fp8_tensor_flops=optional["fp8_tensor_flops"],
    )


def _check_pattern(pattern: str, at: str) -> None:
    for part in split_patterns(pattern):
        if not part:
            raise ConfigError(at, f"has an empty alternative in {pattern!r} (alternatives are separated by |)")
        syntax = sorted(REGEX_SYNTAX & set(part))
        if syntax:
            raise ConfigError(
                at,
                f"{part!r} holds {', '.join(repr(c) for c in syntax)}: a pattern is a literal name or a glob "
                "(* any run, ? one character), alternatives separated by |, not a regular expression",
            )


@functools.cache
def shipped_specs() -> tuple[HardwareSpec, ...]:
    """The rows of the table shipped as package data."""
    text = resources.files("mlflow_roofline").joinpath(f"data/{TABLE_RESOURCE}").read_text(encoding="utf-8")
    return parse_rows(csv.DictReader(text.splitlines()), f"package:data/{TABLE_RESOURCE}")


def read_user_table(path: str | Path, allow_simulated: bool = False) -> tuple[HardwareSpec, ...]:
    """The rows of a user's table (same columns as the shipped one); ``simulated:`` rows only
    with ``allow_simulated``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(ENV_HARDWARE_TABLE, f"cannot read the hardware table {str(file)!r}: {exc.strerror}") from None
    return parse_rows(csv.DictReader(text.splitlines()), str(file), allow_simulated)


def load_hardware_table(extra: str | Path | None = None, env: Mapping[str, str] | None = None) -> HardwareTable:
    """The shipped table, extended by ``extra`` or else the file named by ``ROOFLINE_HARDWARE_TABLE``.

    The user's rows come first, so they override a shipped row that matches the same name.
    ``simulated:`` rows are read only where ``env`` (default: the process environment) sets
    ``ROOFLINE_ALLOW_SIMULATED_HARDWARE=1``.
    """
    env = os.environ if env is None else env
    path = extra if extra is not None else env.get(ENV_HARDWARE_TABLE) or None
    allow_simulated = env.get(ENV_ALLOW_SIMULATED, "").strip().lower() in ("1", "true")
    if not path:
        return shipped_table()
    try:
        stat = os.stat(path)
    except OSError:
        return HardwareTable(read_user_table(path, allow_simulated) + shipped_specs())  # refused there, naming it
    return user_table(os.fspath(path), stat.st_mtime_ns, stat.st_size, allow_simulated)


@functools.lru_cache(maxsize=8)
def user_table(path: str, mtime_ns: int, size: int, allow_simulated: bool) -> HardwareTable:
    """A user's table (ahead of the shipped rows), read once per version of the file (its modification time in
    ns and size in bytes): a served request looks a GPU up several times, and reading and checking both files
    took about 0.2 ms each time. A file changed on disk is read again."""
    return HardwareTable(read_user_table(path, allow_simulated) + shipped_specs())


@functools.cache
def shipped_table() -> HardwareTable:
    """The shipped table alone: one object per process, so its lookups are remembered."""
    return HardwareTable(shipped_specs())
