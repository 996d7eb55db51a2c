"""What the physics generators share: a device's work in one step, and the weak-scaling run loop.

The work of one optimizer step is counted from the model's shape (:class:`~testing.weak_fleet.EncoderShape`,
or :class:`~testing.mixed_arch.KindShape` for decoders, LoRA and checkpointing), never from the
law's proxies, and split over N devices as the strategy does (:func:`device_work`):

- FLOPs: ``shape.train_flops(B) / N`` (FLOPs);
- memory bytes: activations ``shape.activation_bytes(B) / N`` plus weights read forward and
  backward (4 bytes per parameter; ddp a whole replica, tp a 1/N share, fsdp gathers every
  layer's full weights) (bytes); the optimizer's 16 bytes per *trained* parameter (ddp all of
  them, fsdp and tp a 1/N share) (bytes);
- the matrices: width ``d`` (``d / N`` under tp) and rows, the tokens per device (elements);
- collectives (ring, fp16): ddp all-reduces the trained parameters' gradients ``2 (N-1)/N P_t 2``
  bytes in 25 MB buckets; fsdp all-gathers twice and reduce-scatters ``3 (N-1)/N P 2`` bytes,
  ``3 (L + 1)`` collectives; tp all-reduces ``B S d 2`` bytes four times per layer, ``2 (N-1)/N``
  each (bytes, count).

How fast and at what power a device spends that work is each generator's machine
(:class:`Machine`); the run loop (:func:`generate_physics_runs`) is the weak fleet's: ddp and
fsdp keep the per-device batch (global ``batch_size = b * N``), tp keeps the global batch ``b``;
each workload runs ``repeats`` times on one device. The machine's noise multiplies each run's
seconds and joules (:meth:`Machine.noise`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from mlflow_roofline.core import job_table
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import DATA_PARALLEL_STRATEGIES, KIND_PARAM_NAMES, M_ENERGY_J, M_TIME_S
from mlflow_roofline.testing.mixed_arch import draw_kind_shapes
from mlflow_roofline.testing.roofline_generator import finish_runs, gpu_config, run_plan
from mlflow_roofline.testing.weak_fleet import EncoderShape, draw_shapes

WEIGHT_BYTES_PER_PARAM = 4.0
"""fp16 weights read forward and backward (bytes per parameter)."""
OPTIMIZER_BYTES_PER_PARAM = 16.0
"""AdamW in mixed precision: fp32 master weight and two moments read and written (bytes per trained parameter)."""
GRADIENT_BYTES = 2.0
"""fp16 gradient element on the wire (bytes)."""
BUCKET_BYTES = 25e6
"""DDP's gradient bucket (bytes): one all-reduce each."""


@dataclasses.dataclass(frozen=True)
class DeviceWork:
    """One device's share of one optimizer step (see the module docstring for the counts).

    Attributes:
        flops: FLOPs; memory_bytes: activation and weight bytes; optimizer_bytes: the optimizer's bytes;
        width: matrix width (elements); rows: tokens per device; comm_bytes: bytes sent by the ring
        collectives; collectives: their count; hops: ring hops per collective.
    """

    flops: float
    memory_bytes: float
    optimizer_bytes: float
    width: float
    rows: float
    comm_bytes: float
    collectives: int
    hops: int


def _collectives(shape: EncoderShape, strategy: str, devices: int, batch: int) -> tuple[float, int, int]:
    """(bytes, collectives, hops per collective) of one step's communication."""
    if strategy == "single" or devices < 2:
        return 0.0, 0, 0
    ring = (devices - 1) / devices
    if strategy == "ddp":
        grads = shape.trainable_params() * GRADIENT_BYTES
        return 2.0 * ring * grads, math.ceil(grads / BUCKET_BYTES), 2 * (devices - 1)
    if strategy == "fsdp":
        return 3.0 * ring * shape.params() * GRADIENT_BYTES, 3 * (shape.num_layers + 1), devices - 1
    volume = 4.0 * shape.num_layers * shape.tp_activation_bytes(batch) * 2.0 * ring
    return volume, 4 * shape.num_layers, 2 * (devices - 1)


def device_work(shape: EncoderShape, strategy: str, devices: int, batch: int) -> DeviceWork:
    """The work of one device in one step of ``batch`` samples (global) on ``devices`` GPUs."""
    replica = strategy == "ddp" or devices < 2
    weights = shape.params() if strategy == "fsdp" or replica else shape.params() / devices
    trained = shape.trainable_params() / (1 if replica else devices)
    per_device_batch = batch / devices if strategy in DATA_PARALLEL_STRATEGIES else batch
    comm, collectives, hops = _collectives(shape, strategy, devices, batch)
    return DeviceWork(
        flops=shape.train_flops(batch) / devices,
        memory_bytes=shape.activation_bytes(batch) / devices + WEIGHT_BYTES_PER_PARAM * weights,
        optimizer_bytes=OPTIMIZER_BYTES_PER_PARAM * trained,
        width=shape.hidden_size / (devices if strategy == "tp" else 1),
        rows=per_device_batch * shape.seq_len,
        comm_bytes=comm,
        collectives=collectives,
        hops=hops,
    )


class Machine(Protocol):
    """A GPU as a generator simulates it: how long a step takes, at what power, and the noise of its runs."""

    @property
    def name(self) -> str: ...

    def step(self, work: DeviceWork, num_layers: int) -> tuple[float, float]:
        """Seconds of one step and mean watts of one device over it."""
        ...

    def noise(self, rng: np.random.Generator, workloads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Multiplicative factors of each run's seconds and joules, runs in the order measured
        (``workloads``: each run's workload index)."""
        ...


def _shapes(rng: np.random.Generator, n_workloads: int, kinds: bool) -> list[tuple[EncoderShape, int]]:
    """Encoder shapes (per-device batch), or mixed kinds when ``kinds``."""
    if not kinds:
        return draw_shapes(rng, n_workloads)
    return [(shape, batch) for shape, batch in draw_kind_shapes(rng, n_workloads)]


PAPER_KIND: dict[str, object] = {name: getattr(TrainConfig(1, 1, 1, 1, 1, 1), name) for name in KIND_PARAM_NAMES}
"""The kind params of an :class:`~testing.weak_fleet.EncoderShape` (the paper's kind, the job table's defaults)."""


def _kind_params(shape: EncoderShape) -> dict[str, object]:
    """The train params of the shape's kind (its own where it has them, the paper's where not)."""
    return {name: getattr(shape, name, default) for name, default in PAPER_KIND.items()}


def _machine_rows(
    machine: Machine, workloads: list[tuple[EncoderShape, int]], plan: list[tuple[str, int]], rng: np.random.Generator
) -> list[dict[str, object]]:
    """One machine's noise-free runs of every workload under ``plan``, then its noise applied in run order."""
    rows: list[dict[str, object]] = []
    for w_index, (shape, per_device) in enumerate(workloads):
        kind = _kind_params(shape)
        for strategy, devices in plan:
            weak = devices if strategy in DATA_PARALLEL_STRATEGIES else 1
            config = gpu_config(
                {**shape.train_sizes(per_device * weak), **kind}, int(rng.choice(STEPS)), strategy, devices
            )
            if config is None:
                continue
            seconds, watts = machine.step(device_work(shape, strategy, devices, config.batch_size), shape.num_layers)
            rows.append(
                {
                    **config.to_params(),
                    **kind,
                    "hardware": machine.name,
                    "config_hash": config.config_hash(machine.name),
                    "workload_hash": config.workload_hash(machine.name),
                    M_TIME_S: seconds * config.num_steps,
                    M_ENERGY_J: devices * watts * seconds * config.num_steps,
                    "workload_index": w_index,
                }
            )
    time_noise, energy_noise = machine.noise(rng, np.array([r["workload_index"] for r in rows]))
    return [
        {**r, M_TIME_S: float(r[M_TIME_S]) * t, M_ENERGY_J: float(r[M_ENERGY_J]) * t * e}  # type: ignore[arg-type]
        for r, t, e in zip(rows, time_noise, energy_noise)
    ]


STEPS: tuple[int, ...] = (10, 15, 20, 25, 30)
"""Optimizer steps a run is drawn with."""


def generate_physics_runs(
    machines: Sequence[Machine],
    n_workloads: int,
    *,
    kinds: bool = False,
    strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"),
    device_counts: Sequence[int] = (2, 4, 8),
    repeats: int = 2,
    energy_source: str = "nvml",
    seed: int = 0,
) -> pd.DataFrame:
    """Runs of the same ``n_workloads`` workloads on each machine (see the module docstring).

    ``kinds``: encoders and decoders, LoRA, checkpointing (:func:`testing.mixed_arch.draw_kind_shapes`),
    else encoders. Combinations the config rules forbid are skipped. The frame has the columns of
    :func:`testing.roofline_generator.generate_roofline_runs` (and the kind params), so
    ``fit_hardware`` takes it.
    """
    rng = np.random.default_rng(seed)
    workloads = _shapes(rng, n_workloads, kinds)
    plan = run_plan(strategies, device_counts, repeats)
    rows = [row for machine in machines for row in _machine_rows(machine, workloads, plan, rng)]
    frame = finish_runs(pd.DataFrame(rows).assign(energy_source=energy_source))
    for name in job_table.names(type="int", paper=False):
        if name in frame:
            frame[name] = frame[name].astype(int)
    for name in job_table.names(type="bool"):
        if name in frame:
            frame[name] = frame[name].astype(bool)
    return frame
