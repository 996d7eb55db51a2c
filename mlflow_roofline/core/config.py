"""One fine-tuning configuration: its fields, its validation, its hashes and name.

The rules it is validated against are those of :mod:`mlflow_roofline.core.rules`.

A :class:`TrainConfig` is what a train run measures and what a sweep plans. It knows
nothing of MLflow or torch; the MLflow params of a train run are exactly
:meth:`TrainConfig.to_params`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mlflow_roofline.core import job_table
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.rules import INT_FIELDS, KIND_INT_FIELDS, MINIMUM, first_broken, integer_kind
from mlflow_roofline.core.schema import (
    DATA_PARALLEL_STRATEGIES,
    KIND_PARAM_NAMES,
    TRAIN_PARAM_NAMES,
    WORKLOAD_PARAM_NAMES,
)

ColumnValue = int | str | bool
"""A job column's value: an integer, a level (text) or a flag."""

__all__ = ["AUTO", "INT_FIELDS", "KIND_INT_FIELDS", "TrainConfig", "parse_bool"]

AUTO = -1
"""``vocab_size`` / ``lora_rank`` not given: the arch's / the peft's default (resolved on construction)."""
AUTO_WORDS = ("", "auto")
"""How a CLI option or an MLproject parameter says :data:`AUTO` for an integer kind field."""

INT64_MAX = 2**63 - 1
"""Largest value of an integer field (MLflow and the served model's columns hold int64)."""

MAX_CPU_PROCESSES_PER_CORE = 4
"""CPU processes per core a node hosts at most; past one per core a run is oversubscribed (slower)."""


def int_field_problem(name: str, value: object) -> str | None:
    """The rule integer field ``name`` breaks with ``value`` (None if none).

    ``warmup_steps`` and ``lora_rank`` may be 0 (:data:`~mlflow_roofline.core.rules.MINIMUM`),
    every other integer field must be positive; none may pass :data:`INT64_MAX`.
    """
    minimum = MINIMUM.get(name, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a non-negative" if minimum == 0 else "a positive"
        return f"must be {kind} integer, got {value!r}"
    if value > INT64_MAX:
        return f"must be at most {INT64_MAX} (the int64 range), got {value}"
    return None


TRAINER_PRECISIONS: Mapping[str, tuple[str, ...]] = {
    "cuda": ("fp32", "tf32", "bf16", "fp16"),
    "cpu": ("fp32", "bf16", "fp16"),
}
"""The precisions this package's trainer runs on each device kind (the job table allows more: fp8 runs
measured elsewhere are imported and predicted, not trained here)."""


def precision_problem(config: TrainConfig) -> ConfigError | None:
    """Why this package's trainer cannot run ``config.precision`` on ``config.device`` (None if it can)."""
    allowed = TRAINER_PRECISIONS.get(config.device, ())
    if config.precision in allowed:
        return None
    if config.precision == "fp8":
        why = "fp8 training needs Transformer Engine, which this trainer does not use"
    elif config.precision == "tf32":
        why = "tf32 is a mode of NVIDIA tensor cores"
    else:
        why = f"{config.precision} is not a precision this trainer knows"
    return ConfigError(
        "precision",
        f"{why}: on {config.device} use one of {', '.join(allowed)} "
        "(runs measured elsewhere at any precision can be brought in with `mlflow-roofline import`)",
    )


def node_problem(config: TrainConfig, cuda_devices: int | None, cpu_cores: int | None) -> ConfigError | None:
    """Why ``config`` cannot run on this node (None if it can).

    Args:
        config: a validated configuration.
        cuda_devices: GPUs visible here, checked when ``config.device`` is ``cuda`` (None: unknown, not checked).
        cpu_cores: cores here, checked when ``config.device`` is ``cpu``: at most
            :data:`MAX_CPU_PROCESSES_PER_CORE` processes per core (None: not checked).

    The precision is checked first (:func:`precision_problem`).
    """
    precision = precision_problem(config)
    if precision is not None:
        return precision
    n = config.num_devices
    if config.device == "cuda" and cuda_devices is not None and n > cuda_devices:
        return ConfigError("num_devices", f"needs {n} GPUs, {cuda_devices} visible here")
    if config.device == "cpu" and cpu_cores is not None and n > MAX_CPU_PROCESSES_PER_CORE * cpu_cores:
        return ConfigError(
            "num_devices",
            f"needs {n} CPU processes, more than this node hosts ({MAX_CPU_PROCESSES_PER_CORE} per core "
            f"x {cpu_cores} cores = {MAX_CPU_PROCESSES_PER_CORE * cpu_cores})",
        )
    return None


def oversubscribes_cpu(config: TrainConfig, cpu_cores: int) -> bool:
    """Whether ``config`` runs more CPU processes than the node has cores (it runs, slower: warn)."""
    return config.device == "cpu" and config.num_devices > cpu_cores


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """A fine-tuning configuration (the train-run params of docs/schema.md).

    The fields after ``precision`` (:data:`~mlflow_roofline.core.schema.KIND_PARAM_NAMES`)
    say what kind of model is trained; their defaults are the paper's BERT classification,
    and a configuration at those defaults has the hashes it had before they existed.

    Attributes:
        num_layers: L, transformer layers.
        hidden_size: d, model width.
        num_heads: h, attention heads.
        ffn_size: ff, width of the feed-forward block.
        seq_len: S, tokens per sample.
        batch_size: global batch, samples per optimizer step over all devices.
        num_steps: optimizer steps inside the measured window.
        warmup_steps: steps run before the measured window opens.
        strategy: ``single``, ``ddp``, ``fsdp`` or ``tp``.
        num_devices: N, devices (processes) the job runs on.
        device: ``cuda`` or ``cpu`` (``auto`` is resolved before a config is built).
        precision: ``fp32``, ``bf16`` or ``fp16``.
        arch: ``encoder`` (BERT sequence classification) or ``decoder`` (GPT-2 causal LM).
        vocab_size: V, tokens in the vocabulary; :data:`AUTO` gives the arch's default
            (:data:`~mlflow_roofline.core.schema.DEFAULT_VOCAB_SIZE`). Note that
            ``dataclasses.replace`` keeps a resolved V when only ``arch`` changes.
        peft: ``none`` (every weight trained) or ``lora`` (adapters only).
        lora_rank: rank of the LoRA adapters (0 under ``none``); :data:`AUTO` gives the
            peft's default (the job table's ``default_by``).
        grad_checkpointing: recompute activations in the backward pass (one more forward).
    """

    num_layers: int
    hidden_size: int
    num_heads: int
    ffn_size: int
    seq_len: int
    batch_size: int
    num_steps: int = 20
    warmup_steps: int = 3
    strategy: str = "single"
    num_devices: int = 1
    device: str = "cpu"
    precision: str = "fp32"
    arch: str = "encoder"
    vocab_size: int = AUTO
    peft: str = "none"
    lora_rank: int = AUTO
    grad_checkpointing: bool = False
    extra: tuple[tuple[str, ColumnValue], ...] = ()
    """Columns of the job table that no field above holds (a column added to the table and not yet
    read by the trainer): logged, hashed and validated like the others."""

    def __post_init__(self) -> None:
        for name in KIND_INT_FIELDS:
            by, defaults = job_table.column(name).default_by or ("", {})
            decided = defaults.get(str(self.value(by))) if by else None
            if self.value(name) == AUTO and decided is not None:
                self._set(name, decided)

    def _set(self, name: str, value: ColumnValue) -> None:
        if name in _FIELD_NAMES:
            object.__setattr__(self, name, value)
        else:
            object.__setattr__(self, "extra", tuple((k, value if k == name else v) for k, v in self.extra))

    def value(self, name: str) -> ColumnValue:
        """The value of job column ``name`` (a field, or one of :attr:`extra`)."""
        if name in _FIELD_NAMES:
            return getattr(self, name)
        return dict(self.extra)[name]

    def values(self) -> dict[str, ColumnValue]:
        """Every job column's value, in the job table's order."""
        return {name: self.value(name) for name in TRAIN_PARAM_NAMES}

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Build a config from strings or numbers (MLflow params, CLI options, YAML).

        The params beyond the paper's may be absent (their defaults); ``vocab_size`` and
        ``lora_rank`` may also say ``auto`` (or be empty) for their defaults.

        Raises:
            ConfigError: a field is missing, unknown, or not an integer (or boolean) where one is needed.
        """
        unknown = sorted(set(values) - set(TRAIN_PARAM_NAMES))
        if unknown:
            raise ConfigError(unknown[0], f"unknown field; expected one of {', '.join(TRAIN_PARAM_NAMES)}")
        parsed: dict[str, ColumnValue] = {}
        for entry in job_table.JOB_COLUMNS:
            if entry.name not in values:
                if entry.required:
                    raise ConfigError(entry.name, "is required")
                if entry.name in _FIELD_NAMES:
                    continue
                raw: object = entry.default
            else:
                raw = values[entry.name]
            parsed[entry.name] = _parsed(entry, raw)
        kwargs: dict[str, Any] = {k: v for k, v in parsed.items() if k in _FIELD_NAMES}
        kwargs["extra"] = tuple((k, v) for k, v in parsed.items() if k not in _FIELD_NAMES)
        return cls(**kwargs)

    def validate(self) -> None:
        """Check every rule a configuration must satisfy before any process starts.

        The integer fields must hold ints; then every rule of
        :data:`mlflow_roofline.core.rules.RULES`, in order.

        Raises:
            ConfigError: naming the first field that breaks a rule, and the rule.
        """
        values = self.values()
        for name in INT_FIELDS:
            problem = int_field_problem(name, values[name])
            if problem is not None:
                raise ConfigError(name, problem)
        for name in KIND_INT_FIELDS:  # their minimums are rules of the table, after the columns deciding them
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, int) or value > INT64_MAX:
                raise ConfigError(name, f"must be an integer of the int64 range, got {value!r}")
        for name in job_table.names(type="bool"):
            if not isinstance(values[name], bool):
                raise ConfigError(name, f"must be true or false, got {values[name]!r}")
        rule = first_broken(values)
        if rule is not None:
            raise ConfigError(rule.field, rule.describe(values))

    def to_params(self) -> dict[str, str]:
        """The MLflow params of a train run: every schema param, as strings (booleans ``true``/``false``)."""
        return {name: _param_text(value) for name, value in self.values().items()}

    def kind_defaults(self) -> dict[str, str]:
        """What each param beyond the paper's says when a run does not give it (as param text).

        A ``default_by`` column defaults by the column that decides it (``vocab_size`` by ``arch``),
        so a default is always a function of the params that are kept.
        """
        return {name: _param_text(self._default(job_table.column(name))) for name in KIND_PARAM_NAMES}

    def _default(self, entry: job_table.JobColumn) -> ColumnValue:
        """``entry``'s default for this job: its own, or its level's where another column decides it."""
        if entry.default_by is not None:
            decided = entry.default_under(str(self.value(entry.default_by[0])))
            return AUTO if decided is None else decided
        return entry.default if entry.default is not None else ""

    def hashed_params(self) -> dict[str, str]:
        """The params the hashes read: every param, except one beyond the paper's at its default.

        A run logged before those params existed hashed the paper's params alone; leaving a
        default out keeps its hash, and the configuration it stood for, unchanged.
        """
        defaults = self.kind_defaults()
        return {k: v for k, v in self.to_params().items() if k not in KIND_PARAM_NAMES or v != defaults[k]}

    def config_hash(self, hardware: str) -> str:
        """Stable hash of every param plus the hardware: one key per measured configuration."""
        return _stable_hash({**self.hashed_params(), "hardware": hardware})

    def workload_hash(self, hardware: str) -> str:
        """The config hash without strategy, device count and step counts.

        Runs that share it do the same work per sample; it finds a run's single-device
        baseline.
        """
        workload = set(WORKLOAD_PARAM_NAMES) | set(KIND_PARAM_NAMES)
        params = {k: v for k, v in self.hashed_params().items() if k in workload}
        return _stable_hash({**params, "hardware": hardware})

    @property
    def run_name(self) -> str:
        """The configuration at a glance, placement first, e.g. ``fsdp-x2-L4-d256-h4-ff1024-S128-B16``: the
        UI's runs table cuts a long name at its right end, and the placement is what tells a sweep's runs
        of one model apart.

        Params beyond the paper's follow where they differ from their defaults, e.g.
        ``ddp-x2-L2-...-B4-decoder-V1000-lora8-ckpt``.
        """
        name = (
            f"{self.strategy}-x{self.num_devices}-L{self.num_layers}-d{self.hidden_size}-h{self.num_heads}"
            f"-ff{self.ffn_size}-S{self.seq_len}-B{self.batch_size}"
        )
        differs = {k for k, v in self.hashed_params().items() if k in KIND_PARAM_NAMES}
        if "arch" in differs:
            name += f"-{self.arch}"
        if "vocab_size" in differs:
            name += f"-V{self.vocab_size}"
        if "peft" in differs:  # a rank off its default comes with LoRA (the rules refuse a rank without it)
            name += f"-{self.peft}{self.lora_rank if self.peft != 'none' else ''}"
        if self.grad_checkpointing:
            name += "-ckpt"
        return name

    @property
    def per_device_batch_size(self) -> int:
        """Samples each process handles per step: split under ddp/fsdp, whole under single/tp."""
        if self.strategy in DATA_PARALLEL_STRATEGIES:
            return self.batch_size // self.num_devices
        return self.batch_size


_FIELD_NAMES: frozenset[str] = frozenset(f.name for f in dataclasses.fields(TrainConfig) if f.name != "extra")
"""The job columns :class:`TrainConfig` holds as typed fields."""


def _parsed(entry: job_table.JobColumn, raw: object) -> ColumnValue:
    """One column's value from text or a number, by its type (``auto`` where its default is decided)."""
    if entry.type == "bool":
        return parse_bool(entry.name, raw if isinstance(raw, bool) else str(raw))
    if entry.type == "int":
        if entry.default == job_table.AUTO and isinstance(raw, str) and raw.strip().lower() in AUTO_WORDS:
            return AUTO
        number = _as_int(entry.name, raw)
        if number == AUTO and entry.default == job_table.AUTO:  # -1 is no way to say auto: refused as any negative
            raise ConfigError(entry.name, f"must be {integer_kind(entry.name)} or auto, got {number}")
        return number
    return str(raw)


def _as_int(field: str, raw: object) -> int:
    if isinstance(raw, bool):
        raise ConfigError(field, f"must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        with contextlib.suppress(ValueError):
            return int(raw.strip())  # exact, however large
        try:
            number = float(raw.strip())  # MLflow Projects pass numbers as text, maybe "4.0"
        except ValueError:
            number = float("nan")
        if number.is_integer():
            return int(number)
    raise ConfigError(field, f"must be an integer, got {raw!r}")


def _param_text(value: object) -> str:
    """A field as its MLflow param: booleans as ``true``/``false`` (docs/schema.md), the rest as ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _stable_hash(values: Mapping[str, str]) -> str:
    payload = json.dumps(dict(values), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


TRUE_WORDS = ("true", "1", "yes", "y", "on")
FALSE_WORDS = ("false", "0", "no", "n", "off")


def parse_bool(field: str, value: str | bool) -> bool:
    """``true``/``false`` (and yes/no, y/n, 1/0, on/off) as a bool.

    MLflow Projects pass every parameter as text, so boolean options arrive as words.

    Raises:
        ConfigError: any other word, naming ``field``.
    """
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ConfigError(field, f"must be true or false, got {value!r}")
