"""Train runs drawn from a roofline machine model, per hardware: data with a regime change.

Where :mod:`testing.synthetic` draws energy from a known power law, this generator
simulates how a device spends time and power, so that small models are memory-bound
and large ones compute-bound (C/M = 12d + 3S grows with the model), a shape no single
power law follows. For one step of a job with C FLOPs and M elements of traffic
(the proxies of :mod:`core.proxies`, per step) on N devices under a strategy:

- time per step (seconds) = ``max(C / (N*peak_flops), M / (N*mem_rate))``
  ``+ step_overhead_s + comm_s[strategy] * (N - 1) / N * P / link_rate`` with
  ``P = 12*L*d^2`` the weight count: a roofline, a fixed per-step cost and a
  communication term that grows with N (zero on one device);
- power per device (watts) = ``idle_w + dynamic_w * u_c + memory_w * u_m`` with the
  utilisations ``u_c = (C / (N*peak_flops)) / step time`` of the compute units and
  ``u_m = (M / (N*mem_rate)) / step time`` of the memory system;
- energy (joules) = N x power x time per step x steps.

:data:`TIME_BOUND_GPU` is a device whose power hardly depends on what it does (most of
its watts are drawn whenever it is busy), so energy follows time, and time the
``max`` of the compute and memory terms: the regime change shows in the energy as a
sharp corner, the shape of the smooth roofline in time. The default device spends most
of its watts on the work itself, so its energy is closer to the additive roofline.

Times carry log-normal noise ``time_noise_sd`` and energies ``energy_noise_sd`` on each
repeat. Speedup and eta are measured from the times as the fit measures them. The frame
has the columns of :func:`testing.synthetic.generate_synthetic_runs`, so
:func:`testing.synthetic_log.log_runs` logs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlflow_roofline.core.config import INT_FIELDS, TrainConfig
from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.core.schema import M_AVG_POWER_W, M_ENERGY_J, M_SAMPLES_PER_S, M_STEP_TIME_S, M_TIME_S
from mlflow_roofline.fit.runs.measured_speedup import measure_speedup
from mlflow_roofline.testing.synthetic import draw_workloads


@dataclasses.dataclass(frozen=True)
class RooflineHardware:
    """One device type of the machine model (units in the attribute names).

    The defaults put the compute/memory crossover (C/M = peak_flops/mem_rate = 9000,
    hidden_size near 700) inside the BERT grid, so the grid spans both regimes and the
    largest models lie beyond it.
    """

    name: str = "Roofline GPU"
    peak_flops: float = 12e12
    mem_rate: float = 1.33e9  # proxy elements per second
    step_overhead_s: float = 2e-5
    link_rate: float = 2e10  # weights per second
    comm_s: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"single": 0.0, "ddp": 1.0, "fsdp": 1.6, "tp": 3.0}
    )
    idle_w: float = 60.0
    dynamic_w: float = 240.0
    memory_w: float = 200.0
    time_noise_sd: float = 0.02
    energy_noise_sd: float = 0.03

    def step(
        self, flops: np.ndarray, traffic: np.ndarray, weights: np.ndarray, strategy: str, devices: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Seconds per step and watts per device of steps with ``flops`` and ``traffic`` each."""
        compute = flops / (devices * self.peak_flops)
        memory = traffic / (devices * self.mem_rate)
        comm = self.comm_s.get(strategy, 1.0) * (devices - 1) / devices * weights / self.link_rate
        seconds = np.maximum(compute, memory) + self.step_overhead_s + comm
        return seconds, self.idle_w + (self.dynamic_w * compute + self.memory_w * memory) / seconds


TIME_BOUND_GPU = RooflineHardware(name="Time-bound GPU", idle_w=250.0, dynamic_w=40.0, memory_w=30.0)
"""Nearly flat power (250 W busy floor of 320 W): energy follows the step time's max(compute, memory)."""


def _run_row(hw: RooflineHardware, config: TrainConfig, rng: np.random.Generator) -> dict[str, object]:
    """One run's params, hashes, proxies (logs), time and energy."""
    args = (config.num_layers, config.hidden_size, config.seq_len, config.batch_size)
    flops, traffic = float(proxy_flops(*args, 1)), float(proxy_mem_traffic(*args, 1))
    weights = 12.0 * config.num_layers * config.hidden_size**2
    seconds, watts = hw.step(
        np.array([flops]), np.array([traffic]), np.array([weights]), config.strategy, config.num_devices
    )
    time_s = float(seconds[0]) * config.num_steps * float(np.exp(rng.normal(0.0, hw.time_noise_sd)))
    energy = config.num_devices * float(watts[0]) * time_s * float(np.exp(rng.normal(0.0, hw.energy_noise_sd)))
    return {
        **config.to_params(),
        "hardware": hw.name,
        "config_hash": config.config_hash(hw.name),
        "workload_hash": config.workload_hash(hw.name),
        "log_C": float(np.log(flops * config.num_steps)),
        "log_M": float(np.log(traffic * config.num_steps)),
        M_TIME_S: time_s,
        M_ENERGY_J: energy,
    }


def generate_roofline_runs(
    n_workloads: int,
    *,
    hardware: Sequence[RooflineHardware] = (RooflineHardware(),),
    strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"),
    device_counts: Sequence[int] = (2, 4),
    repeats: int = 2,
    steps: Sequence[int] = (10, 20, 30),
    energy_source: str = "nvml",
    seed: int = 0,
    workloads: Sequence[Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Runs of ``n_workloads`` BERT workloads on each hardware (see the module docstring).

    Every workload runs ``repeats`` times on one device and once per strategy and
    device count; combinations the config rules forbid are skipped. ``workloads`` (sizes by
    param name, as :func:`draw_workloads` gives them) replaces the drawn ones: a table of one
    model size, say.
    """
    rng = np.random.default_rng(seed)
    workloads = draw_workloads(rng, n_workloads) if workloads is None else list(workloads)
    rows: list[dict[str, object]] = []
    for hw in hardware:
        for w_index, workload in enumerate(workloads):
            for strategy, devices in run_plan(strategies, device_counts, repeats):
                config = gpu_config(workload, int(rng.choice(steps)), strategy, devices)
                if config is not None:
                    row = _run_row(hw, config, rng)
                    rows.append({**row, "workload_index": w_index, "energy_source": energy_source})
    return finish_runs(pd.DataFrame(rows))


def run_plan(strategies: Sequence[str], device_counts: Sequence[int], repeats: int) -> list[tuple[str, int]]:
    """(strategy, devices) of every run of one workload: ``repeats`` singles, then each strategy and count."""
    plan = [("single", 1)] * (repeats if "single" in strategies else 0)
    return plan + [(s, n) for s in strategies if s != "single" for n in device_counts]


def gpu_config(
    workload: Mapping[str, Any], num_steps: int, strategy: str, num_devices: int, precision: str = "fp16"
) -> TrainConfig | None:
    """The simulated GPU run (``precision``, fp16 by default; 3 warm-up steps) of ``workload`` (its int sizes
    by param name, typed ``Any`` so that they spread into ``TrainConfig``), or
    None where the config rules forbid it (say tp with N not dividing the heads)."""
    config = TrainConfig(
        **workload,
        num_steps=num_steps,
        warmup_steps=3,
        strategy=strategy,
        num_devices=num_devices,
        device="cuda",
        precision=precision,
    )
    try:
        config.validate()
    except ValueError:
        return None
    return config


def finish_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Integer params, the measured speedup and eta, and the derived metrics of a generator's raw rows."""
    for name in INT_FIELDS:
        frame[name] = frame[name].astype(int)
    frame["speedup"] = measure_speedup(frame)["speedup"].to_numpy()
    frame["eta"] = frame["speedup"] / frame["num_devices"]
    frame[M_STEP_TIME_S] = frame[M_TIME_S] / frame["num_steps"]
    frame[M_SAMPLES_PER_S] = frame["batch_size"] * frame["num_steps"] / frame[M_TIME_S]
    frame[M_AVG_POWER_W] = frame[M_ENERGY_J] / frame[M_TIME_S]
    return frame
