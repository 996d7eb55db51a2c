"""Train runs of encoders and decoders, full and LoRA, with and without checkpointing, from physics.

The weak fleet's machine model (:func:`testing.weak_fleet.step_cost`: a real GPU's row of the
hardware table, compute and memory seconds, the optimizer's bytes, ring collectives, power
from achieved FLOP/s and bytes/s) spends the work of a :class:`KindShape`, counted from the
model's shape, never from the law's proxies:

- FLOPs per token: 2 per weight met forward, 4 backward (2 where the weight is frozen under
  LoRA: no weight gradient), 2 more with activation checkpointing (one more forward); the
  weights met per token are the layers' and, for a decoder, the vocabulary head's ``V x d``
  (tied to the token embeddings); the encoder's embeddings are a lookup and its
  classification head acts once per sample; plus the attention's ``12 L S^2 d`` per sample,
  scaled the same way;
- bytes: activations (with checkpointing only each layer's input is kept, the rest
  recomputed), a decoder's logits (``B S V`` in fp16, written and read twice), weights read
  forward and backward, and the optimizer's 16 bytes per *trained* parameter (every weight,
  embeddings included, or LoRA's adapters); ddp all-reduces the trained parameters' gradients.

Every workload draws an arch (``encoder``: V = 30,522; ``decoder``: V from
:data:`DECODER_VOCABS`), LoRA (rank 8 or 16) on a quarter of them and checkpointing on a
quarter, a depth, width and sequence length; it runs ``repeats`` times on one device and once
per strategy and device count (strong scaling: the same global batch). Times carry 2 % and
energies 3 % log-normal noise. The frame has the columns of
:func:`testing.roofline_generator.generate_roofline_runs` plus the kind params, so
``fit_hardware`` takes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.core import job_table
from mlflow_roofline.core.proxies import lora_params_per_layer
from mlflow_roofline.core.schema import DEFAULT_VOCAB_SIZE, KIND_PARAM_NAMES
from mlflow_roofline.testing.roofline_generator import finish_runs, gpu_config, run_plan
from mlflow_roofline.testing.weak_fleet import EncoderShape, fleet_gpu, measured_run

MIXED_GPU = "A100 SXM4 80GB"
"""The hardware-table row the runs are drawn on."""
LAYER_CHOICES: tuple[int, ...] = tuple(range(2, 25, 2))
HIDDEN_CHOICES: tuple[int, ...] = tuple(range(256, 1537, 128))
SEQ_CHOICES: tuple[int, ...] = (128, 256, 512)
BATCH_CHOICES: tuple[int, ...] = (8, 16, 32)
DECODER_VOCABS: tuple[int, ...] = (32000, 50257, 128256)
"""Vocabularies of the decoders drawn: LLaMA-2's, GPT-2's, LLaMA-3's (tokens)."""
LORA_RANKS: tuple[int, ...] = (8, 16)
HEAD_SIZE = 64


@dataclasses.dataclass(frozen=True)
class KindShape(EncoderShape):
    """A model and how it is fine-tuned, with the methods :func:`~testing.weak_fleet.step_cost` reads.

    Attributes beyond :class:`~testing.weak_fleet.EncoderShape`: ``arch``, ``peft``,
    ``lora_rank``, ``grad_checkpointing`` (the train params of the same names).
    """

    arch: str = "encoder"
    peft: str = "none"
    lora_rank: int = 0
    grad_checkpointing: bool = False

    @property
    def decoder(self) -> bool:
        return self.arch == "decoder"

    def embedding_params(self) -> float:
        """Token and position embeddings (and the encoder's segment embeddings), their LayerNorm (parameters)."""
        d = self.hidden_size
        positions = 1024 if self.decoder else self.max_positions + 2
        return float((self.vocab_size + positions) * d + 2 * d)

    def params(self) -> float:
        """Every parameter: embeddings, layers, the encoder's pooler and classifier or the decoder's final norm."""
        d = self.hidden_size
        top = 2.0 * d if self.decoder else float(d * d + d + 2 * (d + 1))
        return self.embedding_params() + self.num_layers * self.layer_params() + top

    def trainable_params(self) -> float:
        """Every parameter, or LoRA's adapters (and the encoder's fresh classifier)."""
        if self.peft != "lora":
            return self.params()
        adapters = self.num_layers * lora_params_per_layer(self.hidden_size, self.ffn_size, self.lora_rank, self.arch)
        return float(adapters + (0 if self.decoder else 2 * (self.hidden_size + 1)))

    def _flops_per_weight_token(self) -> float:
        backward = 2.0 if self.peft == "lora" else 4.0
        return 2.0 + backward + (2.0 if self.grad_checkpointing else 0.0)

    def train_flops(self, batch: int) -> float:
        """FLOPs of one optimizer step on ``batch`` samples (see the module docstring)."""
        tokens = float(batch * self.seq_len)
        weights = self.num_layers * self.layer_params() + (self.vocab_size * self.hidden_size if self.decoder else 0.0)
        per_weight = self._flops_per_weight_token()
        attention = 2.0 * self.num_layers * self.seq_len * self.hidden_size * tokens * per_weight
        return per_weight * weights * tokens + attention

    def activation_bytes(self, batch: int) -> float:
        """Activation bytes of one step (fp16): stored forward, read backward; a decoder's logits too."""
        s, d, h = self.seq_len, self.hidden_size, self.num_heads
        kept = 2.0 * s * d if self.grad_checkpointing else 34.0 * s * d + 5.0 * h * s * s
        logits = 4.0 * 2.0 * s * self.vocab_size if self.decoder else 0.0
        return 2.0 * batch * self.num_layers * kept + batch * logits


def draw_kind_shapes(rng: np.random.Generator, n_workloads: int) -> list[tuple[KindShape, int]]:
    """``n_workloads`` distinct shapes of mixed kinds, each with a global batch (see the module docstring)."""
    seen: set[tuple[object, ...]] = set()
    drawn: list[tuple[KindShape, int]] = []
    while len(drawn) < n_workloads:
        arch = str(rng.choice(["encoder", "decoder"]))
        layers, hidden = int(rng.choice(LAYER_CHOICES)), int(rng.choice(HIDDEN_CHOICES))
        seq = int(rng.choice(SEQ_CHOICES))
        vocab = int(rng.choice(DECODER_VOCABS)) if arch == "decoder" else DEFAULT_VOCAB_SIZE["encoder"]
        lora = bool(rng.random() < 0.25)
        ckpt = bool(rng.random() < 0.25)
        key = (arch, layers, hidden, seq, vocab, lora, ckpt)
        if key in seen:
            continue
        seen.add(key)
        shape = KindShape(
            num_layers=layers,
            hidden_size=hidden,
            num_heads=hidden // HEAD_SIZE,
            ffn_size=4 * hidden,
            seq_len=seq,
            vocab_size=vocab,
            arch=arch,
            peft="lora" if lora else "none",
            lora_rank=int(rng.choice(LORA_RANKS)) if lora else 0,
            grad_checkpointing=ckpt,
        )
        drawn.append((shape, int(rng.choice(BATCH_CHOICES))))
    return drawn


def _kind_params(shape: KindShape) -> dict[str, object]:
    """The shape's train params beyond the paper's (it has an attribute of each name)."""
    return {name: getattr(shape, name) for name in KIND_PARAM_NAMES}


def generate_mixed_arch_runs(
    n_workloads: int,
    *,
    gpu: str = MIXED_GPU,
    strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"),
    device_counts: Sequence[int] = (2, 4),
    repeats: int = 2,
    steps: Sequence[int] = (10, 20, 30),
    energy_source: str = "nvml",
    seed: int = 0,
) -> pd.DataFrame:
    """Runs of ``n_workloads`` mixed-kind workloads on the hardware-table GPU ``gpu`` (see the module docstring).

    Combinations the config rules forbid (tp with N not dividing the heads) are skipped.
    The kind params are typed as a run puller reads them (``vocab_size``, ``lora_rank`` int,
    ``grad_checkpointing`` bool).
    """
    rng = np.random.default_rng(seed)
    fleet = fleet_gpu(gpu)
    rows: list[dict[str, object]] = []
    for w_index, (shape, batch) in enumerate(draw_kind_shapes(rng, n_workloads)):
        kind = _kind_params(shape)
        for strategy, devices in run_plan(strategies, device_counts, repeats):
            config = gpu_config({**shape.train_sizes(batch), **kind}, int(rng.choice(steps)), strategy, devices)
            if config is not None:
                row = measured_run(fleet, shape, config, rng)
                rows.append({**row, **kind, "workload_index": w_index, "energy_source": energy_source})
    frame = finish_runs(pd.DataFrame(rows))
    for name in job_table.names(type="int", paper=False):
        frame[name] = frame[name].astype(int)
    for name in job_table.names(type="bool"):
        frame[name] = frame[name].astype(bool)
    return frame
