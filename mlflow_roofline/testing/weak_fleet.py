"""Train runs of four real GPUs under weak-scaling data parallelism, drawn from a physical machine model.

Where :mod:`testing.roofline_generator` simulates a device in the law's own proxies, this
generator counts the work of each step from the real shape of the model and spends it on
a GPU whose figures are its row of the hardware table (:mod:`core.gpu_datasheets`: peak
FLOP/s at the runs' precision, FP16 tensor by default; memory bandwidth in bytes/s, board
power in W, interconnect bytes/s).
Nothing in it has the form of the energy law: the law sees only the proxies (``log_C``,
``log_M``), the generator never uses them.

One optimizer step of a job on N devices (:func:`step_cost`), per device:

- work from the shape (:class:`EncoderShape`; a decoder, LoRA or checkpointing is another
  shape with the same methods, :mod:`testing.mixed_arch`): ``6 * params * tokens`` FLOPs
  plus the attention's ``12 * L * S^2 * d``
  per sample, the parameters counting the embeddings (vocabulary 30522: the tied output
  projection of a masked-LM head makes them matrix work); bytes moved: activations written
  forward and read backward, weights read forward and backward, and the optimizer's
  ``16`` bytes per parameter (fp32 master weights and Adam moments read and written);
- the device's share: data parallel (ddp, fsdp) splits the samples, tensor parallel (tp)
  the width; ddp keeps a whole replica (weights and optimizer per device), fsdp and tp
  shard them;
- compute seconds = FLOPs / (peak * mfu), the achieved fraction ``mfu`` rising with the
  matrix width per device and the tokens per device (small widths run far below peak; a
  bigger GPU needs wider matrices); memory seconds = bytes / (bandwidth * 0.8);
  forward-backward seconds = a smooth max (power mean, k = 3) of the two; the optimizer
  runs after it, memory-bound; a fixed overhead per step (launches: per layer and per step);
- communication, ring collectives over the interconnect at half its both-directions figure
  times 0.75, plus a latency per ring hop (10 us on NVLink, 20 us on PCIe): ddp all-reduces
  the fp16 gradients ``2 (N-1)/N * P * 2`` bytes in 25 MB buckets; fsdp all-gathers twice and
  reduce-scatters ``3 (N-1)/N * P * 2`` bytes, three collectives per layer; tp all-reduces the
  activations ``B*S*d*2`` bytes four times per layer, ``2 (N-1)/N`` each. A share (ddp 0.6,
  fsdp 0.4, tp 0) of it hides behind the backward pass (two thirds of forward-backward);
- power per device = idle + dynamic * (achieved FLOP/s / peak) + memory * (achieved bytes/s /
  bandwidth), capped at the board power; energy = N * power * seconds.

Weak scaling (:func:`generate_weak_fleet_runs`): every workload has a per-device batch b;
its single runs use b (``repeats`` of them), ddp and fsdp keep b per device (global
``batch_size = b * N``, so no single run shares their ``workload_hash``: their baseline is
``per_device``), tp keeps the global batch b. Times carry 2 % and energies 3 % log-normal
noise. The frame has the columns of :func:`testing.roofline_generator.generate_roofline_runs`
(``log_C`` and ``log_M`` are the law's proxies of the run), so ``fit_hardware``,
``fit_pooled`` and ``log_runs`` take it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.gpu_datasheets import TABLE_PRECISION, HardwareTable, load_hardware_table
from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.core.schema import DATA_PARALLEL_STRATEGIES, M_AVG_POWER_W, M_ENERGY_J, M_TIME_S
from mlflow_roofline.testing.roofline_generator import finish_runs, gpu_config, run_plan

FLEET_NAMES: tuple[str, ...] = ("T4", "V100 SXM2", "A100 SXM4 80GB", "H100 SXM")
"""Four generations (Turing on PCIe; Volta, Ampere and Hopper on NVLink), by their hardware-table names."""

ENCODER_VOCAB = 30522
"""BERT's WordPiece vocabulary (tokens)."""

LAYER_CHOICES: tuple[int, ...] = tuple(range(2, 25))
HIDDEN_CHOICES: tuple[int, ...] = tuple(range(256, 2049, 128))
SEQ_CHOICES: tuple[int, ...] = (128, 256, 512)
PER_DEVICE_BATCH_CHOICES: tuple[int, ...] = (8, 16, 32)
HEAD_SIZE = 64
"""Width of one attention head: h = d / 64, as in BERT."""

OPTIMIZER_BYTES_PER_PARAM = 16.0
"""Adam in mixed precision: fp32 master weight and two moments read and written, fp16 gradient read (bytes)."""
WEIGHT_BYTES_PER_PARAM = 4.0
"""fp16 weights read in the forward and in the backward pass (bytes)."""
GRADIENT_BYTES = 2.0
"""Bytes per gradient element on the wire (fp16)."""
DDP_BUCKET_BYTES = 25e6
"""PyTorch DDP's gradient bucket (bytes): one all-reduce each."""
OVERLAP: dict[str, float] = {"single": 0.0, "ddp": 0.6, "fsdp": 0.4, "tp": 0.0}
"""Share of the communication hidden behind the backward pass, per strategy."""
SMOOTH_K = 3.0
"""Sharpness of the smooth max of compute and memory seconds (power mean)."""


@dataclasses.dataclass(frozen=True)
class EncoderShape:
    """A BERT encoder with a masked-LM head: the work of a training step counted from its shape.

    Attributes: ``num_layers`` L, ``hidden_size`` d, ``num_heads`` h, ``ffn_size`` ff,
    ``seq_len`` S (tokens per sample), ``vocab_size``, ``max_positions``.
    """

    num_layers: int
    hidden_size: int
    num_heads: int
    ffn_size: int
    seq_len: int
    vocab_size: int = ENCODER_VOCAB
    max_positions: int = 512

    def embedding_params(self) -> float:
        """Token, position and segment embeddings and their LayerNorm (parameters)."""
        d = self.hidden_size
        return float((self.vocab_size + self.max_positions + 2) * d + 2 * d)

    def layer_params(self) -> float:
        """One encoder layer: attention projections, feed-forward block, two LayerNorms (parameters)."""
        d, ff = self.hidden_size, self.ffn_size
        return float(4 * d * d + 4 * d + 2 * d * ff + ff + d + 4 * d)

    def params(self) -> float:
        """Every parameter, embeddings and pooler included."""
        d = self.hidden_size
        return self.embedding_params() + self.num_layers * self.layer_params() + float(d * d + d)

    def trainable_params(self) -> float:
        """Parameters the optimizer updates and data parallel reduces: all of them (full fine-tuning)."""
        return self.params()

    def train_sizes(self, batch_size: int) -> dict[str, int]:
        """The train params of this shape at ``batch_size`` samples per step (the global batch)."""
        return {
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "ffn_size": self.ffn_size,
            "seq_len": self.seq_len,
            "batch_size": batch_size,
        }

    def train_flops(self, batch: int) -> float:
        """FLOPs of one optimizer step on ``batch`` samples: 6 per parameter per token, plus attention."""
        tokens = float(batch * self.seq_len)
        attention = 12.0 * self.num_layers * self.seq_len * self.hidden_size * tokens
        return 6.0 * self.params() * tokens + attention

    def activation_bytes(self, batch: int) -> float:
        """Activation bytes of one step on ``batch`` samples: written forward, read backward (fp16, bytes).

        Per layer and sample ``34 S d + 5 h S^2`` bytes are stored (the usual count for a
        transformer layer in mixed precision, the attention scores included).
        """
        s, d, h = self.seq_len, self.hidden_size, self.num_heads
        return 2.0 * batch * self.num_layers * (34.0 * s * d + 5.0 * h * s * s)

    def tp_activation_bytes(self, batch: int) -> float:
        """Bytes of one tensor-parallel all-reduce: the layer's output activations ``B*S*d`` in fp16."""
        return 2.0 * batch * self.seq_len * self.hidden_size


@dataclasses.dataclass(frozen=True)
class FleetGpu:
    """One GPU of the fleet: its hardware-table figures and the generator's machine constants.

    Attributes:
        name: the table's name.
        peak_flops: FLOP/s (dense) at ``precision``: the table's peak there (the FP16 tensor rate by default).
        mem_bandwidth: bytes/s.
        board_power_w: watts, the cap of the drawn power.
        link_bandwidth: interconnect bytes/s, both directions summed.
        hop_latency_s: seconds per ring hop of a collective (10 us NVLink, 20 us PCIe).
        mfu_max: the best achieved fraction of peak FLOP/s.
        width_half: matrix width (elements) at which half of ``mfu_max`` is reached: grows with
            the square root of peak, ``96 * sqrt(peak / 1e14)``.
        token_half: tokens per device at which half of ``mfu_max`` is reached.
        mem_efficiency: achieved fraction of the memory bandwidth.
        link_efficiency: achieved fraction of the one-direction link bandwidth.
        step_overhead_s: fixed seconds per step (optimizer launch, data loading).
        layer_overhead_s: launch seconds per layer and step.
        idle_w, dynamic_w, memory_w: watts idle, per unit of achieved FLOP/s over peak, per unit
            of achieved bytes/s over bandwidth.
    """

    name: str
    peak_flops: float
    mem_bandwidth: float
    board_power_w: float
    link_bandwidth: float
    hop_latency_s: float
    mfu_max: float = 0.6
    token_half: float = 128.0
    mem_efficiency: float = 0.8
    link_efficiency: float = 0.75
    step_overhead_s: float = 5e-4
    layer_overhead_s: float = 8e-5
    idle_fraction: float = 0.2
    dynamic_fraction: float = 1.2
    memory_fraction: float = 0.4
    precision: str = TABLE_PRECISION

    @property
    def width_half(self) -> float:
        """Matrix width (elements) at half the best achieved fraction of peak."""
        return 96.0 * math.sqrt(self.peak_flops / 1e14)

    def mfu(self, width: float, tokens: float) -> float:
        """Achieved fraction of peak FLOP/s for matrices ``width`` wide over ``tokens`` rows."""
        return self.mfu_max * width / (width + self.width_half) * tokens / (tokens + self.token_half)


def fleet_gpu(name: str, table: HardwareTable | None = None, precision: str = TABLE_PRECISION) -> FleetGpu:
    """The :class:`FleetGpu` of the hardware table's row ``name`` (the shipped table by default), computing
    at ``precision`` (its peak FLOP/s the row's at that precision).

    Raises:
        ValueError: the table has no such row, or the row lacks the interconnect bandwidth.
        ConfigError: naming ``precision`` where the row has no peak at it.
    """
    spec = (table or load_hardware_table(env={})).lookup(name)
    if spec is None or spec.interconnect_bytes_per_s is None:
        raise ValueError(f"the hardware table has no row {name!r} with an interconnect bandwidth")
    pcie = "pcie" in spec.interconnect.lower()
    return FleetGpu(
        name=spec.name,
        peak_flops=spec.peak_flops(precision),
        mem_bandwidth=spec.mem_bandwidth_bytes_per_s,
        board_power_w=spec.board_power_w,
        link_bandwidth=spec.interconnect_bytes_per_s,
        hop_latency_s=20e-6 if pcie else 10e-6,
        precision=precision,
    )


@dataclasses.dataclass(frozen=True)
class StepCost:
    """One optimizer step on one device: seconds (total and by part) and mean watts."""

    seconds: float
    watts: float
    compute_s: float
    memory_s: float
    optimizer_s: float
    comm_s: float
    exposed_comm_s: float


def _comm_seconds(gpu: FleetGpu, shape: EncoderShape, strategy: str, devices: int, batch: int) -> float:
    """Seconds of one step's collectives (volume over the link, plus a latency per ring hop)."""
    if strategy == "single" or devices < 2:
        return 0.0
    ring = (devices - 1) / devices
    params = shape.params()
    if strategy == "ddp":  # the gradients of the trained parameters
        grads = shape.trainable_params()
        volume = 2.0 * ring * grads * GRADIENT_BYTES
        collectives, hops = math.ceil(grads * GRADIENT_BYTES / DDP_BUCKET_BYTES), 2 * (devices - 1)
    elif strategy == "fsdp":
        volume = 3.0 * ring * params * GRADIENT_BYTES
        collectives, hops = 3 * (shape.num_layers + 1), devices - 1
    else:
        volume = 4.0 * shape.num_layers * shape.tp_activation_bytes(batch) * 2.0 * ring
        collectives, hops = 4 * shape.num_layers, 2 * (devices - 1)
    link = gpu.link_bandwidth / 2.0 * gpu.link_efficiency
    return volume / link + collectives * hops * gpu.hop_latency_s


def step_cost(gpu: FleetGpu, shape: EncoderShape, strategy: str, devices: int, batch: int) -> StepCost:
    """Seconds and watts per device of one step of ``batch`` samples (global) on ``devices`` GPUs."""
    flops = shape.train_flops(batch) / devices
    sharded = strategy != "ddp"  # ddp keeps a whole replica per device, fsdp and tp a 1/N share
    state = shape.params() / (devices if sharded else 1)
    trained = shape.trainable_params() / (devices if sharded else 1)  # the optimizer's share
    per_device_batch = batch / devices if strategy in DATA_PARALLEL_STRATEGIES else batch
    width = shape.hidden_size / (devices if strategy == "tp" else 1)
    compute = flops / (gpu.peak_flops * gpu.mfu(width, per_device_batch * shape.seq_len))
    traffic = shape.activation_bytes(batch) / devices + WEIGHT_BYTES_PER_PARAM * (
        shape.params() if strategy == "fsdp" else state  # fsdp gathers every layer's full weights
    )
    rate = gpu.mem_bandwidth * gpu.mem_efficiency
    memory = traffic / rate
    busy = (compute**SMOOTH_K + memory**SMOOTH_K) ** (1.0 / SMOOTH_K)
    optimizer = OPTIMIZER_BYTES_PER_PARAM * trained / rate
    comm = _comm_seconds(gpu, shape, strategy, devices, batch)
    exposed = comm - OVERLAP.get(strategy, 0.0) * min(comm, 2.0 / 3.0 * busy)
    overhead = gpu.step_overhead_s + gpu.layer_overhead_s * shape.num_layers
    seconds = busy + optimizer + exposed + overhead
    flop_share = flops / gpu.peak_flops / seconds
    byte_share = (traffic + OPTIMIZER_BYTES_PER_PARAM * trained) / gpu.mem_bandwidth / seconds
    power = gpu.board_power_w * (
        gpu.idle_fraction + gpu.dynamic_fraction * flop_share + gpu.memory_fraction * byte_share
    )
    return StepCost(seconds, min(power, gpu.board_power_w), compute, memory, optimizer, comm, exposed)


def draw_shapes(rng: np.random.Generator, n_workloads: int) -> list[tuple[EncoderShape, int]]:
    """``n_workloads`` encoder shapes with distinct (L, d, S), each with a per-device batch.

    Distinct shapes keep every weak-scaling run away from another workload's single runs:
    a ddp run's global batch b*N never meets a single run of the same shape.
    """
    capacity = len(LAYER_CHOICES) * len(HIDDEN_CHOICES) * len(SEQ_CHOICES)
    if n_workloads > capacity:
        raise ValueError(f"n_workloads must be at most {capacity}, got {n_workloads}")
    seen: set[tuple[int, int, int]] = set()
    drawn: list[tuple[EncoderShape, int]] = []
    while len(drawn) < n_workloads:
        key = (int(rng.choice(LAYER_CHOICES)), int(rng.choice(HIDDEN_CHOICES)), int(rng.choice(SEQ_CHOICES)))
        if key in seen:
            continue
        seen.add(key)
        layers, hidden, seq = key
        shape = EncoderShape(layers, hidden, hidden // HEAD_SIZE, 4 * hidden, seq)
        drawn.append((shape, int(rng.choice(PER_DEVICE_BATCH_CHOICES))))
    return drawn


def measured_run(
    gpu: FleetGpu,
    shape: EncoderShape,
    config: TrainConfig,
    rng: np.random.Generator,
    proxies: Mapping[str, float] | None = None,
) -> dict[str, object]:
    """One run's params, hardware, hashes, ``proxies`` (columns of its own, where given), time
    (seconds) and energy (joules, all its devices), from its step cost with 2 % and 3 % log-normal noise."""
    cost = step_cost(gpu, shape, config.strategy, config.num_devices, config.batch_size)
    time_s = cost.seconds * config.num_steps * float(np.exp(rng.normal(0.0, 0.02)))
    energy = config.num_devices * cost.watts * time_s * float(np.exp(rng.normal(0.0, 0.03)))
    return {
        **config.to_params(),
        "hardware": gpu.name,
        "config_hash": config.config_hash(gpu.name),
        "workload_hash": config.workload_hash(gpu.name),
        **(proxies or {}),
        M_TIME_S: time_s,
        M_ENERGY_J: energy,
    }


def _run_row(gpu: FleetGpu, shape: EncoderShape, config: TrainConfig, rng: np.random.Generator) -> dict[str, object]:
    """:func:`measured_run` with the paper's proxies (logs)."""
    args = (config.num_layers, config.hidden_size, config.seq_len, config.batch_size, config.num_steps)
    logs = {"log_C": float(np.log(proxy_flops(*args))), "log_M": float(np.log(proxy_mem_traffic(*args)))}
    return measured_run(gpu, shape, config, rng, logs)


def generate_weak_fleet_runs(
    n_workloads: int,
    *,
    gpus: Sequence[str] = FLEET_NAMES,
    strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"),
    device_counts: Sequence[int] = (2, 4, 8),
    repeats: int = 2,
    steps: Sequence[int] = (10, 15, 20, 25, 30),
    energy_source: str = "nvml",
    table: HardwareTable | None = None,
    seed: int = 0,
    precisions: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Runs of the same ``n_workloads`` encoder workloads on each GPU of ``gpus`` (see the module docstring).

    ``gpus`` are hardware-table names (``table``, else the shipped one). Combinations the
    config rules forbid (tp with N not dividing the heads) are skipped. ``precisions``: the precision
    each GPU's runs compute at, by name (fp16 where not given), at the table's peak FLOP/s there; the
    runs' param ``precision`` says it.
    """
    rng = np.random.default_rng(seed)
    workloads = draw_shapes(rng, n_workloads)
    rows: list[dict[str, object]] = []
    at = precisions or {}
    for gpu in (fleet_gpu(name, table, at.get(name, TABLE_PRECISION)) for name in gpus):
        for w_index, (shape, per_device) in enumerate(workloads):
            for strategy, devices in run_plan(strategies, device_counts, repeats):
                weak = devices if strategy in DATA_PARALLEL_STRATEGIES else 1
                sizes = shape.train_sizes(per_device * weak)
                config = gpu_config(sizes, int(rng.choice(steps)), strategy, devices, gpu.precision)
                if config is not None:
                    row = _run_row(gpu, shape, config, rng)
                    rows.append({**row, "workload_index": w_index, "energy_source": energy_source})
    return finish_runs(pd.DataFrame(rows))


def energy_falling_per_flop(frame: pd.DataFrame, exponent: float = 0.8) -> pd.DataFrame:
    """``frame`` with each run's energy (joules) scaled so that it grows as (FLOPs per step)^``exponent``
    at a fixed step count: a GPU whose energy per FLOP falls with the model's size, as real tables show."""
    per_step = proxy_flops(frame["num_layers"], frame["hidden_size"], frame["seq_len"], frame["batch_size"], 1)
    energy = frame[M_ENERGY_J] * (per_step / np.median(per_step)) ** (exponent - 1.0)
    return frame.assign(**{M_ENERGY_J: energy, M_AVG_POWER_W: energy / frame[M_TIME_S]})
