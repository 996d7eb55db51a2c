"""The measured workload: a transformer fine-tuned on seeded synthetic batches.

Everything a training step needs and nothing about how it is measured, distributed or
tracked:

- the model, by ``arch``: ``BertForSequenceClassification`` built from ``BertConfig``
  (``encoder``, the paper's) or a GPT-2 causal LM (``decoder``, :mod:`.decoder`), no hub
  download, dropout off so that every strategy computes the same function and losses can
  be compared across strategies; under ``peft=lora`` only LoRA adapters train
  (:mod:`.adapters`); ``grad_checkpointing`` turns on the model's own checkpointing;
- the data: a *global* batch per optimizer step, generated from ``(seed, step)`` alone,
  so that every rank can produce the same global batch and take its own rows of it;
  for the encoder, token ids are drawn uniformly from the vocabulary (V, by default the
  BERT-base WordPiece size :data:`VOCAB_SIZE` = 30522) and the label (:data:`NUM_LABELS`
  = 2, an SST-2-style binary task) is a fixed function of the tokens, so the loss can
  actually fall; for the decoder, the labels are the tokens themselves (next-token loss);
- the optimizer: AdamW, gradient clipping that works on plain tensors and DTensors alike;
- precision: autocast to bf16 or fp16 (fp16 with a gradient scaler), fp32 weights; tf32 lets CUDA matmuls
  use TF32 tensor cores (fp32 tensors).
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import torch
from torch import nn

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.proxies import MAX_POSITIONS, NUM_LABELS, VOCAB_SIZE
from mlflow_roofline.train.adapters import add_lora
from mlflow_roofline.train.decoder import build_decoder, decoder_batch

if TYPE_CHECKING:
    # imported lazily at run time: transformers is slow to load
    from transformers import BertConfig, PreTrainedModel

LEARNING_RATE = 1e-4
WEIGHT_DECAY = 0.01
MAX_GRAD_NORM = 1.0
DEFAULT_SEED = 0

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def bert_config(config: TrainConfig) -> BertConfig:
    """The ``BertConfig`` of a train configuration: L, d, h, ff as given, dropout off."""
    from transformers import BertConfig  # transformers is slow to load: only when a model is built

    # num_labels and attn_implementation go to PreTrainedConfig through **kwargs.
    return BertConfig(  # type: ignore[call-arg]
        vocab_size=config.vocab_size,
        num_hidden_layers=config.num_layers,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_heads,
        intermediate_size=config.ffn_size,
        max_position_embeddings=max(MAX_POSITIONS, config.seq_len),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=NUM_LABELS,
        attn_implementation="sdpa",
    )


def build_model(config: TrainConfig, device: torch.device | str = "cpu", seed: int = DEFAULT_SEED) -> PreTrainedModel:
    """A freshly initialised model of ``config.arch`` on ``device``, in training mode.

    ``BertForSequenceClassification`` for the encoder, ``GPT2LMHeadModel`` for the decoder;
    with LoRA adapters under ``peft=lora``, gradient checkpointing on under
    ``grad_checkpointing``. The same ``seed`` gives bit-identical weights on every rank,
    which is what lets the parallel strategies start from the single-device model.
    """
    from transformers import BertForSequenceClassification  # transformers is slow to load: only when a model is built

    torch.manual_seed(seed)
    with torch.device(device):
        model: PreTrainedModel = (
            build_decoder(config) if config.arch == "decoder" else BertForSequenceClassification(bert_config(config))
        )
        if config.peft == "lora":
            model = add_lora(model, config)
    if config.grad_checkpointing:
        # non-reentrant: works with frozen weights (LoRA), DDP, FSDP2 and DTensors alike
        kwargs = {"use_reentrant": False}
        enable = getattr(model, "activation_checkpointing_enable", None)  # its name from transformers 5 on
        if enable is not None:
            enable(kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    return model.train()


def global_batch(
    step: int,
    batch_size: int,
    seq_len: int,
    seed: int = DEFAULT_SEED,
    device: torch.device | str = "cpu",
    vocab_size: int = VOCAB_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder's global batch of optimizer step ``step``: ``(input_ids [B, S], labels [B])``.

    Generated on the CPU from ``(seed, step)`` only, so every rank gets the same batch.
    Ids are uniform over the vocabulary; position 0 holds ``[CLS]`` (101, or the last id of
    a smaller vocabulary) as in BERT, and the label says whether token 1 lies in the upper
    half of the vocabulary.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    input_ids[:, 0] = min(101, vocab_size - 1)
    key = input_ids[:, 1] if seq_len > 1 else input_ids[:, 0]
    labels = (key >= vocab_size // 2).long()
    return input_ids.to(device), labels.to(device)


def config_batch(config: TrainConfig, step: int, seed: int = DEFAULT_SEED) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch ``(input_ids, labels)`` of step ``step`` for ``config.arch``, on the CPU.

    The decoder's labels are its input ids (the model shifts them: next-token loss).
    """
    if config.arch == "decoder":
        input_ids = decoder_batch(step, config.batch_size, config.seq_len, config.vocab_size, seed)
        return input_ids, input_ids
    return global_batch(step, config.batch_size, config.seq_len, seed, vocab_size=config.vocab_size)


def build_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """AdamW over every trainable parameter (plain tensors or DTensors)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)


FULL_WIDTH_PRECISIONS = ("fp32", "tf32")
"""Precisions that keep fp32 tensors (no autocast); tf32 lets CUDA's matmuls use TF32 tensor cores."""


def check_precision(precision: str, device_type: str) -> None:
    """Fail early, naming the param, when ``precision`` cannot run on ``device_type``.

    Raises:
        ConfigError: a precision this trainer does not run there (fp8; tf32 off CUDA), bf16 on a GPU
            without bf16 support, or a precision autocast lacks.
    """
    if precision == "fp32" or (precision == "tf32" and device_type == "cuda"):
        return
    dtype = _AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        allowed = ("fp32", "tf32", *_AUTOCAST_DTYPES) if device_type == "cuda" else ("fp32", *_AUTOCAST_DTYPES)
        raise ConfigError("precision", f"this trainer runs {', '.join(allowed)} on {device_type}, got {precision!r}")
    if not torch.amp.is_autocast_available(device_type):
        raise ConfigError("precision", f"{precision} needs autocast, which torch lacks on {device_type}")
    if device_type == "cuda" and dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise ConfigError("precision", "bf16 is not supported by this GPU; use fp16 or fp32")


def matmul_precision(precision: str) -> str:
    """torch's float32 matmul setting for ``precision``: ``high`` (TF32 allowed) under tf32, else ``highest``."""
    return "high" if precision == "tf32" else "highest"


def autocast(precision: str, device_type: str) -> contextlib.AbstractContextManager:
    """The forward-pass context of ``precision``: nothing for fp32 and tf32, else autocast."""
    if precision in FULL_WIDTH_PRECISIONS:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=_AUTOCAST_DTYPES[precision])


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler`` whose unscaling accepts parameters mixing tensors and DTensors.

    Tensor parallel leaves embeddings and LayerNorms as plain tensors next to sharded
    DTensors on the same device; torch's scaler unscales each (device, dtype) group with
    one fused call, which DTensor refuses for a mixed list. Here plain tensors and
    DTensors are unscaled in separate calls into the same ``found_inf`` (for DTensors
    the inf check is reduced over the mesh, so every rank skips the same steps).
    """

    def _unscale_grads_(
        self, optimizer: torch.optim.Optimizer, inv_scale: torch.Tensor, found_inf: torch.Tensor, allow_fp16: bool
    ) -> dict[torch.device, torch.Tensor]:
        from torch.distributed.tensor import DTensor  # loads the tensor-parallel machinery: only when unscaling

        groups: dict[tuple[torch.device, torch.dtype, bool], list[torch.Tensor]] = {}
        for param_group in optimizer.param_groups:
            for param in param_group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                if grad.dtype == torch.float16 and not allow_fp16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                groups.setdefault((grad.device, grad.dtype, isinstance(grad, DTensor)), []).append(grad)
        found_per_device: dict[torch.device, torch.Tensor] = {}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Found a non-scalar tensor with numel=1")
            for (device, _, _), grads in groups.items():
                found = found_per_device.setdefault(device, found_inf.to(device))
                torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv_scale.to(device))
        return found_per_device


def grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler:
    """A loss scaler, enabled for fp16 only (bf16 has fp32's exponent range)."""
    return GradScaler(device_type, enabled=precision == "fp16")


@torch.no_grad()
def clip_grad_norm(parameters: Iterable[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale gradients so that their global L2 norm is at most ``max_norm``; return the norm.

    Works when the parameters mix plain tensors and DTensors (tensor parallel shards some
    Linear layers and leaves embeddings and LayerNorms whole; FSDP2 shards everything):
    the DTensor part's norm is reduced over its mesh (``full_tensor``), the plain part is
    already whole on every rank, and the two are combined.
    """
    from torch.distributed.tensor import DTensor  # loads the tensor-parallel machinery: only when clipping

    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    dtensor_grads: list[torch.Tensor] = [g for g in grads if isinstance(g, DTensor)]
    plain_grads = [g for g in grads if not isinstance(g, DTensor)]
    squares = []
    if dtensor_grads:
        norm = typing.cast(DTensor, torch.nn.utils.get_total_norm(dtensor_grads, 2.0))  # DTensors in, DTensor out
        squares.append(norm.full_tensor().float() ** 2)
    if plain_grads:
        squares.append(torch.nn.utils.get_total_norm(plain_grads, 2.0).float() ** 2)
    total_norm = torch.stack([s.to(squares[0].device) for s in squares]).sum().sqrt()
    coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
    for group in (dtensor_grads, plain_grads):
        if group:  # one batched kernel per group, not one per parameter: this runs every step
            torch._foreach_mul_(group, coef.to(group[0].device))
    return total_norm


@dataclasses.dataclass
class Trainer:
    """One optimizer step of the workload, with its precision handling.

    Attributes:
        model: the (possibly wrapped) model.
        optimizer: its optimizer.
        precision: ``fp32``, ``tf32`` (CUDA), ``bf16`` or ``fp16``.
        device_type: ``cpu`` or ``cuda``.
        max_grad_norm: gradients are clipped to this global L2 norm.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    precision: str
    device_type: str
    max_grad_norm: float = MAX_GRAD_NORM

    def __post_init__(self) -> None:
        check_precision(self.precision, self.device_type)
        torch.set_float32_matmul_precision(matmul_precision(self.precision))
        self.scaler = grad_scaler(self.precision, self.device_type)
        self.last_grad_norm: torch.Tensor | None = None

    def step(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Forward, backward, clip, update: one optimizer step. Returns the detached loss.

        The gradient norm before clipping is kept in :attr:`last_grad_norm`.

        The loss is the mean over this process's rows; it is not synchronised with the
        host, so timing a window of steps does not serialise the device.
        """
        with autocast(self.precision, self.device_type):
            loss = self.model(input_ids=input_ids, labels=labels).loss
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        self.last_grad_norm = clip_grad_norm(self.model.parameters(), self.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach().float()


def batches(
    config: TrainConfig, rows: slice, first_step: int = 0, seed: int = DEFAULT_SEED, device: torch.device | str = "cpu"
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """This process's rows of the global batches from ``first_step`` on, endlessly."""
    step = first_step
    while True:
        input_ids, labels = config_batch(config, step, seed)
        yield input_ids[rows].to(device, non_blocking=True), labels[rows].to(device, non_blocking=True)
        step += 1
