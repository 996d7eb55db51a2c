"""The job table: every column of a fine-tuning job, declared once.

A job's columns (its sizes, where it runs, what kind of model it trains and how) are
read by many places: the train run's params and their validation, the click options of
``train`` and ``predict``, the sweep spec's grid keys, the import's fields, the fit's run
pull, the served model's signature and input checks, the MLproject parameters and
docs/schema.md. Each of those is a view of :data:`JOB_COLUMNS`; adding a column is one
:class:`JobColumn` line here (plus the law's features when it enters the law).

Groups:

- ``size``: the integer sizes of the job (required in a request);
- ``placement``: the strategy and the device count (a request's, unless it asks for a plan);
- ``run``: how one measured run is taken (its warm-up, its device); not a request column;
- ``kind``: what model is trained and how; optional everywhere, a run or model logged
  before a column existed is read with its default.

This module imports nothing of the package: every other names list derives from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

ColumnType = Literal["int", "text", "bool"]
Group = Literal["size", "placement", "run", "kind"]
Default = int | str | bool | None

AUTO = "auto"
"""The default of a column whose value another column or the host decides (``default_by``, the device)."""


@dataclasses.dataclass(frozen=True)
class JobColumn:
    """One column of a fine-tuning job.

    Attributes:
        name: the param, option, grid key, import field and model input name.
        type: ``int``, ``text`` (one of ``levels``) or ``bool`` (``true``/``false``).
        group: ``size``, ``placement``, ``run`` or ``kind`` (module docstring).
        help: what it holds, with its unit, for ``--help`` and docs/schema.md.
        default: the value when not given; None: required (a size of the job).
        levels: the values a text column allows, its default level first where it has one.
        minimum: the smallest value of an int column.
        default_by: an int column whose default depends on a text column: that column's name
            and the default under each of its levels (``vocab_size`` by ``arch``).
        paper: one of the paper's params, logged by every train run since the first release
            and always hashed; the others are hashed only off their default, so that a run
            logged before they existed keeps its hashes.
        request: the served model takes it as an input column.
        symbol: the paper's letter (``L``, ``d``), for help texts.
        served_default: what the served model answers a request without the column at, where that is
            not ``default`` (``precision``: the precision the law was fitted at); empty: ``default``.
        spellings: other names of a text column's levels in other tools' tables (lower case), which
            ``import`` reads as the level (:meth:`level_of`): ``bfloat16`` and Lightning's ``bf16-mixed``
            are ``bf16``.
    """

    name: str
    type: ColumnType
    group: Group
    help: str
    default: Default = None
    levels: tuple[str, ...] = ()
    minimum: int = 1
    default_by: tuple[str, Mapping[str, int]] | None = None
    paper: bool = True
    request: bool = True
    symbol: str = ""
    served_default: str = ""
    spellings: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def option(self) -> str:
        """The command-line option, ``--num-layers``."""
        return "--" + self.name.replace("_", "-")

    @property
    def required(self) -> bool:
        """No default: every job must give it."""
        return self.default is None

    def level_of(self, text: str) -> str | None:
        """The level ``text`` names, whatever its case and surrounding blanks, or one of its :attr:`spellings`;
        None where it names none (``FP16`` and ``float16`` are ``fp16``; ``mixed`` is no level)."""
        key = text.strip().lower()
        return key if key in self.levels else self.spellings.get(key)

    def default_under(self, level: str) -> int | None:
        """The default of a ``default_by`` column where its deciding column says ``level`` (None: unknown level)."""
        return None if self.default_by is None else self.default_by[1].get(level)

    @property
    def sentence(self) -> str:
        """The help as a sentence, the paper's letter first: ``L, transformer layers.``"""
        text = f"{self.symbol}, {self.help}" if self.symbol else self.help[:1].upper() + self.help[1:]
        return text + "."

    @property
    def auto_text(self) -> str:
        """What ``auto`` gives a ``default_by`` column: ``auto: 30522 under arch encoder, ...`` (empty otherwise)."""
        if self.default_by is None:
            return ""
        by, defaults = self.default_by
        return f"{AUTO}: " + ", ".join(f"{v} under {by} {level}" for level, v in defaults.items()) + "."

    def describe(self) -> str:
        """The help text with the levels a text column allows and what ``auto`` gives."""
        parts = [self.sentence]
        if self.levels:
            parts.append(f"One of {', '.join(self.levels)}.")
        if self.auto_text:
            parts.append(self.auto_text)
        return " ".join(parts)


JOB_COLUMNS: tuple[JobColumn, ...] = (
    JobColumn("num_layers", "int", "size", "transformer layers", symbol="L"),
    JobColumn("hidden_size", "int", "size", "model width", symbol="d"),
    JobColumn("num_heads", "int", "size", "attention heads, dividing d", symbol="h"),
    JobColumn("ffn_size", "int", "size", "width of the feed-forward block", symbol="ff"),
    JobColumn("seq_len", "int", "size", "tokens per sample", symbol="S"),
    JobColumn("batch_size", "int", "size", "global batch: samples per optimizer step over all devices", symbol="B"),
    JobColumn("num_steps", "int", "size", "measured optimizer steps", default=20),
    JobColumn("warmup_steps", "int", "run", "steps run before the measured window", 3, minimum=0, request=False),
    JobColumn(
        "strategy",
        "text",
        "placement",
        "parallel strategy",
        "single",
        ("single", "ddp", "fsdp", "tp"),
        spellings={
            "single-device": "single",
            "single_device": "single",
            "data-parallel": "ddp",
            "data_parallel": "ddp",
            "distributeddataparallel": "ddp",
            "fully-sharded": "fsdp",
            "fully_sharded": "fsdp",
            "fully_sharded_data_parallel": "fsdp",
            "fsdp2": "fsdp",
            "tensor-parallel": "tp",
            "tensor_parallel": "tp",
        },
    ),
    JobColumn("num_devices", "int", "placement", "devices (processes) the job runs on", 1, symbol="N"),
    JobColumn(
        "device",
        "text",
        "run",
        "device kind; auto: cuda where visible",
        AUTO,
        ("cuda", "cpu"),
        request=False,
        spellings={"gpu": "cuda"},
    ),
    JobColumn(
        "precision",
        "text",
        "kind",
        "compute precision of the matmuls",
        "fp32",
        ("fp32", "tf32", "bf16", "fp16", "fp8"),
        served_default="the precision the law was fitted at",
        spellings={  # torch's dtype names, Lightning's precision flags, short forms
            "float32": "fp32",
            "float": "fp32",
            "32": "fp32",
            "32-true": "fp32",
            "tensorfloat32": "tf32",
            "bfloat16": "bf16",
            "bf16-mixed": "bf16",
            "bf16-true": "bf16",
            "float16": "fp16",
            "half": "fp16",
            "16": "fp16",
            "16-mixed": "fp16",
            "16-true": "fp16",
            "fp16-mixed": "fp16",
            "float8": "fp8",
            "e4m3": "fp8",
            "transformer-engine": "fp8",
        },
    ),
    JobColumn(
        "arch",
        "text",
        "kind",
        "model kind",
        "encoder",
        ("encoder", "decoder"),
        paper=False,
        spellings={"encoder-only": "encoder", "decoder-only": "decoder", "causal": "decoder", "causal-lm": "decoder"},
    ),
    JobColumn(
        "vocab_size",
        "int",
        "kind",
        "vocabulary size",
        AUTO,
        default_by=("arch", {"encoder": 30522, "decoder": 50257}),
        paper=False,
        symbol="V",
    ),
    JobColumn(
        "peft",
        "text",
        "kind",
        "parameter-efficient fine-tuning",
        "none",
        ("none", "lora"),
        paper=False,
        spellings={"full": "none", "full-finetuning": "none"},
    ),
    JobColumn(
        "lora_rank",
        "int",
        "kind",
        "rank of the LoRA adapters (0 without adapters)",
        AUTO,
        minimum=0,
        default_by=("peft", {"none": 0, "lora": 8}),
        paper=False,
    ),
    JobColumn(
        "grad_checkpointing",
        "bool",
        "kind",
        "recompute activations in the backward pass (one more forward)",
        False,
        paper=False,
    ),
)
"""Every column of a job, in the order a train run logs them (docs/schema.md's table)."""


def column(name: str) -> JobColumn:
    """The column called ``name``.

    Raises:
        KeyError: no column has that name.
    """
    for entry in JOB_COLUMNS:
        if entry.name == name:
            return entry
    raise KeyError(name)


def names(
    *,
    group: Group | None = None,
    type: ColumnType | None = None,
    paper: bool | None = None,
    request: bool | None = None,
) -> tuple[str, ...]:
    """The names of the columns that match every filter given, in table order."""
    return tuple(
        c.name
        for c in JOB_COLUMNS
        if (group is None or c.group == group)
        and (type is None or c.type == type)
        and (paper is None or c.paper == paper)
        and (request is None or c.request == request)
    )


def levels(name: str) -> tuple[str, ...]:
    """The levels of text column ``name``."""
    return column(name).levels


def defaults_by_level(name: str) -> dict[str, int]:
    """Each level's default of ``default_by`` column ``name`` (``vocab_size``: per ``arch``).

    Raises:
        KeyError: ``name`` is no column, or its default does not depend on another column.
    """
    decided = column(name).default_by
    if decided is None:
        raise KeyError(f"{name} has no default_by")
    return dict(decided[1])
