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

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.rules import INT_FIELDS, first_broken
from mlflow_roofline.core.schema import DATA_PARALLEL_STRATEGIES, PARAM_NAMES, WORKLOAD_PARAM_NAMES

__all__ = ["INT_FIELDS", "TrainConfig", "parse_bool"]

INT64_MAX = 2**63 - 1
"""Largest value of an integer field (MLflow and the served model's columns hold int64)."""

MAX_CPU_PROCESSES_PER_CORE = 4
"""CPU processes per core a node hosts at most; past one per core a run is oversubscribed (slower)."""


def int_field_problem(name: str, value: object) -> str | None:
    """The rule integer field ``name`` breaks with ``value`` (None if none).

    ``warmup_steps`` may be 0, every other integer field must be positive; none may pass
    :data:`INT64_MAX`.
    """
    minimum = 0 if name == "warmup_steps" else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a non-negative" if minimum == 0 else "a positive"
        return f"must be {kind} integer, got {value!r}"
    if value > INT64_MAX:
        return f"must be at most {INT64_MAX} (the int64 range), got {value}"
    return None


def node_problem(config: TrainConfig, cuda_devices: int | None, cpu_cores: int | None) -> ConfigError | None:
    """Why ``config`` cannot run on this node (None if it can).

    Args:
        config: a validated configuration.
        cuda_devices: GPUs visible here, checked when ``config.device`` is ``cuda`` (None: unknown, not checked).
        cpu_cores: cores here, checked when ``config.device`` is ``cpu``: at most
            :data:`MAX_CPU_PROCESSES_PER_CORE` processes per core (None: not checked).
    """
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
    """A BERT fine-tuning configuration (the train-run params of DESIGN.md).

    Attributes:
        num_layers: L, encoder layers.
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

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Build a config from strings or numbers (MLflow params, CLI options, YAML).

        Raises:
            ConfigError: a field is missing, unknown, or not an integer where one is needed.
        """
        unknown = sorted(set(values) - set(PARAM_NAMES))
        if unknown:
            raise ConfigError(unknown[0], f"unknown field; expected one of {', '.join(PARAM_NAMES)}")
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name not in values:
                if field.default is dataclasses.MISSING:
                    raise ConfigError(field.name, "is required")
                continue
            raw = values[field.name]
            kwargs[field.name] = _as_int(field.name, raw) if field.name in INT_FIELDS else str(raw)
        return cls(**kwargs)

    def validate(self) -> None:
        """Check every rule a configuration must satisfy before any process starts.

        The integer fields must hold ints; then every rule of
        :data:`mlflow_roofline.core.rules.RULES`, in order.

        Raises:
            ConfigError: naming the first field that breaks a rule, and the rule.
        """
        for name in INT_FIELDS:
            problem = int_field_problem(name, getattr(self, name))
            if problem is not None:
                raise ConfigError(name, problem)
        values = {name: getattr(self, name) for name in PARAM_NAMES}
        rule = first_broken(values)
        if rule is not None:
            raise ConfigError(rule.field, rule.describe(values))

    def to_params(self) -> dict[str, str]:
        """The MLflow params of a train run: every schema param, as strings."""
        return {name: str(getattr(self, name)) for name in PARAM_NAMES}

    def config_hash(self, hardware: str) -> str:
        """Stable hash of every param plus the hardware: one key per measured configuration."""
        return _stable_hash({**self.to_params(), "hardware": hardware})

    def workload_hash(self, hardware: str) -> str:
        """The config hash without strategy, device count and step counts.

        Runs that share it do the same work per sample; it finds a run's single-device
        baseline.
        """
        params = self.to_params()
        return _stable_hash({**{k: params[k] for k in WORKLOAD_PARAM_NAMES}, "hardware": hardware})

    @property
    def run_name(self) -> str:
        """The configuration at a glance, e.g. ``L4-d256-h4-ff1024-S128-B16-fsdp-x2``."""
        return (
            f"L{self.num_layers}-d{self.hidden_size}-h{self.num_heads}-ff{self.ffn_size}"
            f"-S{self.seq_len}-B{self.batch_size}-{self.strategy}-x{self.num_devices}"
        )

    @property
    def per_device_batch_size(self) -> int:
        """Samples each process handles per step: split under ddp/fsdp, whole under single/tp."""
        if self.strategy in DATA_PARALLEL_STRATEGIES:
            return self.batch_size // self.num_devices
        return self.batch_size


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
