"""Train runs on GPUs that overlap everything, draw power sub-linearly, and drift from run to run.

A machine unlike the law's and unlike :mod:`testing.weak_fleet`'s (the work per device is
:func:`testing.physics_runs.device_work`, counted from the model's shape). Per device and step:

- achieved FLOP/s = ``peak * 0.65 * (1 - exp(-w / w_knee)) * (1 - exp(-rows / 2048))`` (FLOP/s): a
  saturating curve with an exponential knee in the matrix width ``w`` (``w_knee = 384 sqrt(peak /
  312e12)`` elements: a bigger GPU needs wider matrices) and in the tokens per device ``rows``;
- compute and memory fully overlap: busy seconds = ``max(FLOPs / achieved, bytes / (bandwidth *
  0.8))`` (a hard roofline), and communication fully overlaps both: ``max(busy, comm)``, comm =
  ring bytes over half the interconnect's both-directions figure times 0.8 plus 8 us per hop;
  then the optimizer's bytes at the same memory rate, and 20 us per layer plus 0.2 ms per step;
- power = ``idle + (board - idle) * u^0.6`` (W; idle = 30 % of board), sub-linear in the
  utilisation ``u = min(1, 0.8 flop_share + 0.5 byte_share)`` (the fractions of the step at peak
  FLOP/s and full bandwidth): never above the board power;
- noise: a per-workload time offset (2 %, the same for every run of a workload: its data
  pipeline), 1 % white noise on time; on energy a slow drift across the runs in the order
  measured (AR(1) in log watts, coefficient 0.95, stationary sd 4 %: temperature, leakage), plus
  1.5 % white noise (log units).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.testing.physics_runs import DeviceWork, generate_physics_runs
from mlflow_roofline.testing.weak_fleet import FLEET_NAMES, fleet_gpu

DRIFT_COEF = 0.95
"""AR(1) coefficient of the energy drift from one run to the next (dimensionless)."""
DRIFT_SD = 0.04
"""Stationary standard deviation of the drift (log units)."""
POWER_EXPONENT = 0.6
"""Exponent of the utilisation in the power (sub-linear)."""


@dataclasses.dataclass(frozen=True)
class OverlapGpu:
    """One GPU of this machine model (hardware-table figures; units in the names).

    ``noise_scale`` multiplies every noise term (0: noise-free runs).
    """

    name: str
    peak_flops: float
    mem_bandwidth: float
    board_power_w: float
    link_bandwidth: float
    idle_fraction: float = 0.3
    token_knee: float = 2048.0
    layer_overhead_s: float = 2e-5
    step_overhead_s: float = 2e-4
    hop_latency_s: float = 8e-6
    noise_scale: float = 1.0

    @property
    def width_knee(self) -> float:
        """Matrix width (elements) of the knee: 384 at the A100's 312 TFLOP/s, as the square root of peak."""
        return 384.0 * math.sqrt(self.peak_flops / 312e12)

    def achieved_flops(self, width: float, rows: float) -> float:
        """FLOP/s on matrices ``width`` wide over ``rows`` rows (saturating exponential knees)."""
        return self.peak_flops * 0.65 * -math.expm1(-width / self.width_knee) * -math.expm1(-rows / self.token_knee)

    def step(self, work: DeviceWork, num_layers: int) -> tuple[float, float]:
        """Seconds of one step and mean watts of one device over it (see the module docstring)."""
        rate = self.mem_bandwidth * 0.8
        busy = max(work.flops / self.achieved_flops(work.width, work.rows), work.memory_bytes / rate)
        comm = work.comm_bytes / (self.link_bandwidth / 2.0 * 0.8) + work.collectives * work.hops * self.hop_latency_s
        seconds = max(busy, comm) + work.optimizer_bytes / rate + self.layer_overhead_s * num_layers
        seconds += self.step_overhead_s
        flop_share = work.flops / self.peak_flops / seconds
        byte_share = (work.memory_bytes + work.optimizer_bytes) / self.mem_bandwidth / seconds
        use = min(1.0, 0.8 * flop_share + 0.5 * byte_share)
        idle = self.idle_fraction * self.board_power_w
        return seconds, idle + (self.board_power_w - idle) * use**POWER_EXPONENT

    def noise(self, rng: np.random.Generator, workloads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-workload and white time noise; drifting and white energy noise (multiplicative, run order)."""
        n = len(workloads)
        offsets = rng.normal(0.0, 0.02, int(workloads.max()) + 1 if n else 0)
        time_log = offsets[workloads] + rng.normal(0.0, 0.01, n)
        innovations = rng.normal(0.0, DRIFT_SD * math.sqrt(1.0 - DRIFT_COEF**2), n)
        drift = np.empty(n)
        level = rng.normal(0.0, DRIFT_SD)
        for i, step in enumerate(innovations):
            level = DRIFT_COEF * level + step
            drift[i] = level
        energy_log = drift + rng.normal(0.0, 0.015, n)
        return np.exp(self.noise_scale * time_log), np.exp(self.noise_scale * energy_log)


def overlap_gpu(name: str, noise_scale: float = 1.0) -> OverlapGpu:
    """The :class:`OverlapGpu` of the hardware table's row ``name``."""
    fleet = fleet_gpu(name)
    return OverlapGpu(
        name=fleet.name,
        peak_flops=fleet.peak_flops,
        mem_bandwidth=fleet.mem_bandwidth,
        board_power_w=fleet.board_power_w,
        link_bandwidth=fleet.link_bandwidth,
        noise_scale=noise_scale,
    )


def generate_overlap_drift_runs(
    n_workloads: int,
    *,
    gpus: Sequence[str] = FLEET_NAMES,
    kinds: bool = False,
    noise_scale: float = 1.0,
    seed: int = 0,
    **plan: object,
) -> pd.DataFrame:
    """Runs of ``n_workloads`` workloads on each GPU of ``gpus`` (hardware-table names) on this machine model.

    ``kinds``: mixed encoders, decoders, LoRA and checkpointing; ``plan``: the keywords of
    :func:`testing.physics_runs.generate_physics_runs` (strategies, device_counts, repeats).
    """
    machines = [overlap_gpu(name, noise_scale) for name in gpus]
    return generate_physics_runs(machines, n_workloads, kinds=kinds, seed=seed, **plan)  # type: ignore[arg-type]
