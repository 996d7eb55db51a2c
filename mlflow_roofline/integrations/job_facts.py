"""What a measured job is, as far as it can be read: the train params of its run.

The adapters (Trainer and Lightning callbacks, Accelerate hook) fill a :class:`JobFacts` from the model,
the arguments and what ran; :meth:`JobFacts.config` turns it into a
:class:`~mlflow_roofline.core.config.TrainConfig` once the measured steps are known, or
names the fields it lacks.

The roofline shape (layers, width, FFN size, heads) is read from a Hugging Face model
config (:func:`model_shape`), each field under the names the common families use, first
match wins:

============  ===============================================================
field         config attribute names
============  ===============================================================
num_layers    ``num_hidden_layers`` (BERT, Llama), ``n_layer`` (GPT-2), ``num_layers``, ``n_layers``
hidden_size   ``hidden_size``, ``n_embd`` (GPT-2), ``d_model``, ``dim``
num_heads     ``num_attention_heads``, ``n_head`` (GPT-2), ``num_heads``, ``n_heads``
ffn_size      ``intermediate_size`` (BERT, Llama), ``n_inner`` (GPT-2), ``ffn_dim``, ``d_ff``, ``hidden_dim``
============  ===============================================================

GPT-2 leaves ``n_inner`` at ``None`` to mean 4 x ``n_embd``; that rule is applied. A model
without a ``config`` of its own (a LightningModule) is read through the first of its
submodules that has one (:func:`configured_module`). A
field found under none of the names is reported missing (the caller warns and logs
energy and time without it).

The params beyond the paper's are read by :func:`model_kind`: ``arch`` from the model's
class (a causal LM head: ``decoder``; sequence classification on a masked-LM family such
as BERT: ``encoder``; anything else is not classified), ``vocab_size`` from its config,
``peft`` and ``lora_rank`` from peft's LoRA layers in it, ``grad_checkpointing`` from the
model's own switch. What cannot be read is named, never guessed.

:func:`batch_shape` reads the rows and padded length of one forward call's batch, for the
integrations' forward pre-hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import DEVICES, PARAM_NAMES, PRECISIONS
from mlflow_roofline.integrations.parallel_probe import ParallelRun

SHAPE_ALIASES: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "ffn_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim"),
}

DTYPE_PRECISION = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}
MIXED_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8")
"""Mixed-precision modes (Trainer flags, Accelerate's ``mixed_precision``) that are the job's precision."""


@dataclasses.dataclass
class JobFacts:
    """The job's train params as read (None where unknown) and why some are missing.

    ``planned_steps`` counts every optimizer step of the job, warm-up included.
    ``rows_per_step`` is per-device batch x (DataParallel GPUs) x gradient accumulation.
    """

    shape: dict[str, int]
    rows_per_step: int | None  # samples one process trains on per optimizer step (accumulation included)
    planned_steps: int | None
    precision: str | None
    device: str | None
    parallel: ParallelRun
    tokens: int = 0  # this process's training tokens (padded) and rows so far
    rows: int = 0
    job_tokens: int = 0  # every process's, as of the last gathering
    job_rows: int = 0
    kind: dict[str, int | str | bool] = dataclasses.field(default_factory=dict)  # arch, vocab_size, ... as read
    kind_unknown: list[str] = dataclasses.field(default_factory=list)  # "<param> (why)" for those not read
    model: str = ""  # what the model is called (model_label)

    def run_name(self, job: str) -> str:
        """The name of a run this job opens: the model, the job (``trainer``, ``accelerate``) and the
        placement, e.g. ``bert-base-uncased-trainer-ddp-x2``."""
        placement = f"{self.parallel.strategy}-x{self.parallel.num_devices}" if self.parallel.strategy else ""
        return "-".join(part for part in (self.model or "model", job, placement) if part)

    @property
    def batch_size(self) -> int | None:
        """Global batch: each process's rows times the processes under data parallel (and one
        process's rows under tensor parallel, where every rank sees the same batch)."""
        if self.rows_per_step is None:
            return None
        replicas = 1 if self.parallel.strategy == "tp" else self.parallel.num_devices
        return self.rows_per_step * replicas

    @property
    def seq_len(self) -> int | None:
        """Mean padded length of the training batches seen (tokens per sample), None before one.

        Over every process once their counts were gathered, else over this process's.
        """
        tokens, rows = (self.job_tokens, self.job_rows) if self.job_rows else (self.tokens, self.rows)
        return round(tokens / rows) if rows else None

    def values(self, num_steps: int, warmup_steps: int) -> dict[str, int | str]:
        """Every train param that is known, under its schema name."""
        known: dict[str, int | str | None] = {
            **self.shape,
            "seq_len": self.seq_len,
            "batch_size": self.batch_size,
            "num_steps": num_steps,
            "warmup_steps": warmup_steps,
            "strategy": self.parallel.strategy,
            "num_devices": self.parallel.num_devices,
            "device": self.device if self.device in DEVICES else None,
            "precision": self.precision if self.precision in PRECISIONS else None,
            **self.kind,
        }
        return {k: v for k, v in known.items() if v is not None}

    @property
    def kind_unread(self) -> list[str]:
        """The params beyond the paper's that could not be read (their names only)."""
        return [entry.split(" ", 1)[0] for entry in self.kind_unknown]

    def missing(self) -> list[str]:
        """The train params that could not be read (num_steps is always known at the end)."""
        known = self.values(1, 0)
        return [name for name in PARAM_NAMES if name not in known]

    def config(self, num_steps: int, warmup_steps: int) -> tuple[TrainConfig | None, str]:
        """The run's configuration, or None and what is missing or contradictory."""
        missing = self.missing()
        if missing:
            why = f"could not read {', '.join(missing)}"
            if self.parallel.why_unknown and "strategy" in missing:
                why += f" ({self.parallel.why_unknown})"
            return None, why
        try:
            config = TrainConfig.from_mapping(self.values(max(num_steps, 1), warmup_steps))
            config.validate()
        except ConfigError as exc:
            return None, f"the values read break a rule: {exc}"
        return config, ""


def precision_of(model: torch.nn.Module | None, mixed: str | None, tf32: bool = False) -> str | None:
    """The job's compute precision: ``bf16``/``fp16``/``fp8`` under mixed precision, else the dtype of the
    model's parameters, ``tf32`` for fp32 weights whose matmuls may use TF32 tensor cores (``tf32``: the
    Trainer's ``tf32`` argument, or torch's CUDA matmul setting)."""
    if mixed in MIXED_PRECISIONS:
        return mixed
    if mixed not in (None, "no", "fp32"):
        return None  # a mode the schema has no level for
    if model is None:
        return None
    try:
        weights = DTYPE_PRECISION.get(str(next(model.parameters()).dtype))
    except (StopIteration, AttributeError):
        return None
    return "tf32" if weights == "fp32" and tf32 else weights


def tf32_matmuls() -> bool:
    """Whether torch lets CUDA's float32 matmuls use TF32 tensor cores (``allow_tf32``, or a matmul precision
    below ``highest``)."""
    return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"


def device_of(model: torch.nn.Module | None) -> str | None:
    """The device type of the model's parameters (``cuda``, ``cpu``...)."""
    if model is None:
        return None
    try:
        return next(model.parameters()).device.type
    except (StopIteration, AttributeError):
        return None


def model_label(model: object) -> str:
    """What the model is called: the last part of its config's ``name_or_path`` (``bert-base-uncased``),
    else its class (``BertForSequenceClassification``)."""
    path = str(getattr(getattr(model, "config", None), "name_or_path", "") or "").rstrip("/")
    return path.rsplit("/", 1)[-1] if path else type(model).__name__


def model_shape(model: object) -> tuple[dict[str, int], list[str]]:
    """The shape fields of ``model.config`` that could be read, and the names of those that could not."""
    config = getattr(model, "config", None)
    shape: dict[str, int] = {}
    for field, names in SHAPE_ALIASES.items():
        value = _first_int(config, names) if config is not None else None
        if value is not None:
            shape[field] = value
    if "ffn_size" not in shape and getattr(config, "model_type", None) == "gpt2" and "hidden_size" in shape:
        shape["ffn_size"] = 4 * shape["hidden_size"]  # GPT-2: n_inner=None means 4 * n_embd
    missing = [field for field in SHAPE_ALIASES if field not in shape]
    return shape, missing


def configured_module(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose ``config`` the shape is read from: ``model`` itself when it has a ``config``,
    else the first of its submodules that has one (a LightningModule's Hugging Face model), else ``model``."""
    for module in model.modules():
        if _attribute(module, "config") is not None:
            return module
    return model


CAUSAL_LM_SUFFIXES: tuple[str, ...] = ("ForCausalLM", "LMHeadModel")
"""Class-name endings of a causal LM with its vocabulary head (``GPT2LMHeadModel``, ``LlamaForCausalLM``)."""


def model_kind(model: object) -> tuple[dict[str, int | str | bool], list[str]]:
    """The params beyond the paper's read from ``model``, and ``"<param> (why)"`` for each not read.

    A peft model is read through to the model it adapts.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    kind: dict[str, int | str | bool] = {}
    unknown: list[str] = []
    arch = _arch_of(base, config)
    if arch is None:
        unknown.append(f"arch ({type(base).__name__} is neither a causal LM nor a masked-LM family's classifier)")
    else:
        kind["arch"] = arch
    vocab = _first_int(config, ("vocab_size",)) if config is not None else None
    if vocab is None:
        unknown.append("vocab_size (the model's config has no vocab_size)")
    else:
        kind["vocab_size"] = vocab
    ranks = {rank for layer in _modules(base) for rank in _lora_ranks(layer)}
    other_peft = getattr(model, "peft_type", None) or getattr(
        getattr(model, "active_peft_config", None), "peft_type", None
    )
    if len(ranks) == 1:
        kind.update(peft="lora", lora_rank=ranks.pop())
    elif ranks:
        unknown += [f"lora_rank (adapters of ranks {sorted(ranks)})"]
        kind["peft"] = "lora"
    elif other_peft is not None and "LORA" not in str(other_peft).upper():
        unknown += [f"peft ({other_peft} is not lora)", "lora_rank (not a LoRA model)"]
    else:
        kind.update(peft="none", lora_rank=0)
    switch = _attribute(base, "is_activation_checkpointing")  # transformers 5; is_gradient_checkpointing before
    if not isinstance(switch, bool):
        switch = _attribute(base, "is_gradient_checkpointing")
    if isinstance(switch, bool):
        kind["grad_checkpointing"] = switch
    else:
        unknown.append("grad_checkpointing (the model has no checkpointing switch)")
    return kind, unknown


def _arch_of(model: object, config: object) -> str | None:
    name = type(model).__name__
    if name.endswith(CAUSAL_LM_SUFFIXES):
        return "decoder"
    if name.endswith("ForSequenceClassification") and not _attribute(config, "is_decoder"):
        from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

        if _attribute(config, "model_type") in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
            return "encoder"
    return None


def _lora_ranks(layer: torch.nn.Module) -> list[int]:
    """The ranks of a peft LoRA layer's adapters (none for any other module)."""
    ranks, adapters = getattr(layer, "r", None), getattr(layer, "lora_A", None)
    if not isinstance(ranks, dict) or not isinstance(adapters, torch.nn.ModuleDict):
        return []
    return [int(ranks[name]) for name in adapters if name in ranks]


def _modules(model: object) -> list[torch.nn.Module]:
    return list(model.modules()) if isinstance(model, torch.nn.Module) else []


def batch_shape(args: tuple[object, ...], kwargs: Mapping[str, object]) -> tuple[int, int] | None:
    """(rows, padded sequence length in tokens) of one forward call's batch, or None.

    Read from the forward pre-hook's arguments: ``input_ids`` (keyword or first positional),
    else ``inputs_embeds``; None when neither has a shape of two or more dimensions.
    """
    ids = kwargs.get("input_ids", args[0] if args else None)
    if ids is None:
        ids = kwargs.get("inputs_embeds")
    shape = getattr(ids, "shape", None)
    if shape is not None and len(shape) >= 2:
        return int(shape[0]), int(shape[1])
    return None


def _first_int(config: object, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = _attribute(config, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _attribute(config: object, name: str) -> object:
    """``config.name`` without triggering a config's attribute map on names it lacks."""
    if isinstance(config, dict):
        return config.get(name)
    try:
        return getattr(config, name, None)
    except Exception:
        return None
