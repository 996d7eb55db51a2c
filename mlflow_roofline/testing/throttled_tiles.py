"""Train runs on GPUs whose matrix units fill in tiles and waves, with serial kernels and a throttling power cap.

A machine unlike the law's and unlike :mod:`testing.weak_fleet`'s (the work per device is
:func:`testing.physics_runs.device_work`, counted from the model's shape). Per device and step:

- achieved FLOP/s = ``peak * MFU_MAX * tile * wave`` (FLOP/s), a step function of the shape: the
  matrices are cut into 128 x 128 tiles (``tile = w / (128 ceil(w / 128))`` of the width ``w`` is
  useful work) and the tiles run in waves over the GPU's streaming multiprocessors
  (``n_sm = 108 sqrt(peak / 312e12)``, dimensionless; ``wave = tiles / (n_sm ceil(tiles / n_sm))``,
  ``tiles = ceil(rows / 128) ceil(w / 128)``): a small problem leaves most of the GPU idle, and
  each extra wave costs a whole wave;
- compute and memory do not overlap: busy seconds = FLOPs / achieved + bytes / (bandwidth * 0.85)
  (serial kernels: a sum, not a maximum); the optimizer's bytes after it at the same rate;
- communication is fully exposed (no overlap with compute): ring bytes over half the
  interconnect's both-directions figure times 0.7, plus 15 us per hop of each collective;
- a fixed 60 us per layer and 0.4 ms per step (launches);
- power = ``idle + (board - idle) * (1.4 flop_share + 0.4 byte_share)`` at full clock (W; the
  shares are the fractions of the step at peak FLOP/s and full bandwidth; idle = 25 % of board);
  above the cap (90 % of the board power) the clock throttles: dynamic power goes as the clock
  cubed and compute time inversely, so the clock settles at ``f = ((cap - idle) / (P - idle))^(1/3)``,
  the compute seconds grow by ``1 / f`` and the power is the cap: never above the board power;
- noise: Student-t with 3 degrees of freedom (heavy tails), scale 2 % on time and 3 % on energy
  (log units, clipped at +-40 %).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.testing.physics_runs import DeviceWork, generate_physics_runs
from mlflow_roofline.testing.weak_fleet import FLEET_NAMES, fleet_gpu

TILE = 128
"""Tile edge of the matrix units (elements)."""
MFU_MAX = 0.7
"""Achieved fraction of peak FLOP/s of a full tile in a full wave."""
NOISE_DF = 3.0
"""Degrees of freedom of the Student-t noise (heavy tails)."""
NOISE_CLIP = 0.4
"""Largest absolute log noise (about +-40 %)."""


@dataclasses.dataclass(frozen=True)
class ThrottledGpu:
    """One GPU of this machine model (hardware-table figures; units in the names).

    ``noise_scale`` multiplies both noise scales (0: noise-free runs).
    """

    name: str
    peak_flops: float
    mem_bandwidth: float
    board_power_w: float
    link_bandwidth: float
    cap_fraction: float = 0.9
    idle_fraction: float = 0.25
    layer_overhead_s: float = 6e-5
    step_overhead_s: float = 4e-4
    hop_latency_s: float = 15e-6
    noise_scale: float = 1.0

    @property
    def n_sm(self) -> int:
        """Streaming multiprocessors: 108 at the A100's 312 TFLOP/s, as the square root of peak."""
        return max(8, round(108 * math.sqrt(self.peak_flops / 312e12)))

    def achieved_flops(self, width: float, rows: float) -> float:
        """FLOP/s on matrices ``width`` wide over ``rows`` rows (tile and wave quantisation)."""
        col_tiles, row_tiles = math.ceil(width / TILE), math.ceil(rows / TILE)
        tiles = col_tiles * row_tiles
        tile = width / (TILE * col_tiles)
        wave = tiles / (self.n_sm * math.ceil(tiles / self.n_sm))
        return self.peak_flops * MFU_MAX * tile * wave

    def step(self, work: DeviceWork, num_layers: int) -> tuple[float, float]:
        """Seconds of one step and mean watts of one device over it (see the module docstring)."""
        compute = work.flops / self.achieved_flops(work.width, work.rows)
        rate = self.mem_bandwidth * 0.85
        memory = (work.memory_bytes + work.optimizer_bytes) / rate
        comm = work.comm_bytes / (self.link_bandwidth / 2.0 * 0.7) + work.collectives * work.hops * self.hop_latency_s
        fixed = comm + self.layer_overhead_s * num_layers + self.step_overhead_s
        seconds = compute + memory + fixed
        idle = self.idle_fraction * self.board_power_w
        flop_share = work.flops / self.peak_flops / seconds
        byte_share = (work.memory_bytes + work.optimizer_bytes) / self.mem_bandwidth / seconds
        power = idle + (self.board_power_w - idle) * (1.4 * flop_share + 0.4 * byte_share)
        cap = self.cap_fraction * self.board_power_w
        if power <= cap:
            return seconds, power
        clock = ((cap - idle) / (power - idle)) ** (1.0 / 3.0)
        return compute / clock + memory + fixed, cap

    def noise(self, rng: np.random.Generator, workloads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Heavy-tailed (Student-t) multiplicative noise of each run's seconds and joules."""
        draw = rng.standard_t(NOISE_DF, size=(2, len(workloads))) * self.noise_scale
        scaled = np.clip(draw * np.array([[0.02], [0.03]]), -NOISE_CLIP, NOISE_CLIP)
        return np.exp(scaled[0]), np.exp(scaled[1])


def throttled_gpu(name: str, noise_scale: float = 1.0) -> ThrottledGpu:
    """The :class:`ThrottledGpu` of the hardware table's row ``name``."""
    fleet = fleet_gpu(name)
    return ThrottledGpu(
        name=fleet.name,
        peak_flops=fleet.peak_flops,
        mem_bandwidth=fleet.mem_bandwidth,
        board_power_w=fleet.board_power_w,
        link_bandwidth=fleet.link_bandwidth,
        noise_scale=noise_scale,
    )


def generate_throttled_runs(
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
    machines = [throttled_gpu(name, noise_scale) for name in gpus]
    return generate_physics_runs(machines, n_workloads, kinds=kinds, seed=seed, **plan)  # type: ignore[arg-type]
