"""Synthetic train runs drawn from a known law, logged with the exact run schema of docs/schema.md.

Tests and benchmarks need many train runs whose true energy law is known, without
running BERT. :func:`generate_synthetic_runs` draws BERT workloads (L, d, h = d/64,
ff = 4d, S, B), runs each on one device (``singles_per_workload`` times, with step
counts that differ) and under every requested strategy and device count, and gives
each run:

- a wall time: the single-device job time follows the *time law*
  ``t1 = exp(log_tau) * C^beta_c * M^beta_m`` (seconds), a parallel run takes
  ``t1 / S_w(N)`` where ``S_w`` is the strategy's speedup law with a per-workload
  jitter ``S_w(N) = 1 + (S(N) - 1) * exp(u_w)``, ``u_w ~ N(0, speedup_jitter)``;
  every time carries log-normal noise ``time_noise_sd``;
- the speedup and efficiency a fit measures from those times, exactly as docs/schema.md
  defines them (seconds per sample against the median single run of the workload, or
  of the per-device batch; single runs have S = 1; NaN for a run with neither);
- an energy from the *energy law* in that measured efficiency (the true one where
  nothing can be measured):
  ``E = exp(log_kappa) * C^alpha_c * M^alpha_m * eta^alpha_eta * exp(psi[strategy])``
  (joules) times log-normal noise ``noise_sd``.

:func:`log_runs` writes such a frame to MLflow (one run per row: the 12 params, the
proxy metrics, ``energy_j``, ``time_s``, ``step_time_s``, ``samples_per_s``,
``avg_power_w`` and the ``roofline.*`` tags), and :func:`log_synthetic_runs` does both.
``flops_counted`` is not logged: nothing was counted.

The laws are :class:`~mlflow_roofline.testing.ground_truth.GroundTruth`
(:mod:`testing.ground_truth`), the logging :mod:`testing.synthetic_log`; both are
re-exported here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from mlflow import MlflowClient

from mlflow_roofline.core.config import INT_FIELDS, TrainConfig
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    DATA_PARALLEL_STRATEGIES,
    M_AVG_POWER_W,
    M_ENERGY_J,
    M_PROXY_FLOPS,
    M_PROXY_MEM_TRAFFIC,
    M_SAMPLES_PER_S,
    M_STEP_TIME_S,
    M_TIME_S,
)
from mlflow_roofline.fit.runs.measured_speedup import measure_speedup
from mlflow_roofline.testing.ground_truth import DEFAULT_HARDWARE, GroundTruth, default_speedup_laws
from mlflow_roofline.testing.synthetic_log import log_runs

__all__ = [
    "DEFAULT_HARDWARE",
    "GroundTruth",
    "SyntheticRuns",
    "default_speedup_laws",
    "draw_workloads",
    "generate_synthetic_runs",
    "log_runs",
    "log_synthetic_runs",
]


# The workload space draws come from (head size 64 and ff = 4d, as in the paper's grid).
LAYER_CHOICES: tuple[int, ...] = tuple(range(1, 25))
HIDDEN_CHOICES: tuple[int, ...] = tuple(range(128, 1025, 64))
SEQ_CHOICES: tuple[int, ...] = (32, 64, 128, 256, 512)
BATCH_CHOICES: tuple[int, ...] = (8, 16, 32, 64)


@dataclasses.dataclass
class SyntheticRuns:
    """What :func:`log_synthetic_runs` logged.

    Attributes:
        truth: the laws the runs were drawn from.
        frame: one row per run: the params, ``hardware``, ``energy_source``,
            ``config_hash``, ``workload_hash``, the logged metrics, and the truth columns
            ``log_C``, ``log_M``, ``speedup`` and ``eta`` (as measured from the times),
            ``speedup_true`` (the jittered law), ``run_id`` once logged.
        run_ids: MLflow run ids, in frame order.
    """

    truth: GroundTruth
    frame: pd.DataFrame
    run_ids: list[str]


def draw_workloads(rng: np.random.Generator, n_workloads: int) -> list[dict[str, Any]]:
    """``n_workloads`` distinct BERT workloads (L, d, h = d/64, ff = 4d, S, B) drawn from the choices above.

    Each maps the size params to ints (typed ``Any`` so that it spreads into ``TrainConfig``,
    whose other fields are not all ints).
    """
    seen: set[tuple[int, ...]] = set()
    workloads: list[dict[str, Any]] = []
    capacity = len(LAYER_CHOICES) * len(HIDDEN_CHOICES) * len(SEQ_CHOICES) * len(BATCH_CHOICES)
    if n_workloads > capacity:
        raise ValueError(f"n_workloads must be at most {capacity}, got {n_workloads}")
    while len(workloads) < n_workloads:
        key = (
            int(rng.choice(LAYER_CHOICES)),
            int(rng.choice(HIDDEN_CHOICES)),
            int(rng.choice(SEQ_CHOICES)),
            int(rng.choice(BATCH_CHOICES)),
        )
        if key in seen:
            continue
        seen.add(key)
        layers, hidden, seq, batch = key
        workloads.append(
            dict(
                num_layers=layers,
                hidden_size=hidden,
                num_heads=hidden // 64,
                ffn_size=4 * hidden,
                seq_len=seq,
                batch_size=batch,
            )
        )
    return workloads


def generate_synthetic_runs(
    n_workloads: int,
    *,
    truth: GroundTruth | None = None,
    strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"),
    device_counts: Sequence[int] = (2, 4),
    singles_per_workload: int = 2,
    steps: Sequence[int] = (10, 20, 30),
    warmup_steps: int = 3,
    hardware: str = DEFAULT_HARDWARE,
    energy_source: str = "nvml",
    device: str = "cuda",
    precision: str = "fp16",
    seed: int = 0,
    weak_scaling: bool = False,
) -> tuple[GroundTruth, pd.DataFrame]:
    """Draw runs from ``truth`` without touching MLflow; see the module docstring.

    Combinations the config rules forbid (tp with N not dividing h or ff) are skipped.
    Every workload gets ``singles_per_workload`` single-device runs when ``single`` is in
    ``strategies`` (set it to 0 to make runs without a baseline).

    ``weak_scaling``: the drawn batch is the per-device batch, as HF Trainer's
    ``per_device_train_batch_size`` holds it: ddp/fsdp runs on N devices have the global
    batch N times it (so no single run shares their ``workload_hash``; their baseline is
    the single run at the per-device batch), single and tp runs the drawn batch.

    Returns:
        the truth and one row per run (columns as :class:`SyntheticRuns` describes).
    """
    truth = truth or GroundTruth()
    rng = np.random.default_rng(seed)
    labels = {"hardware": hardware, "energy_source": energy_source}
    rows: list[dict[str, object]] = []
    for w_index, workload in enumerate(draw_workloads(rng, n_workloads)):
        plan: list[tuple[str, int]] = []
        if "single" in strategies:
            plan += [("single", 1)] * singles_per_workload
        plan += [(s, n) for s in strategies if s != "single" for n in device_counts]
        jitter = {s: float(rng.normal(0.0, truth.speedup_jitter)) for s in strategies}
        for strategy, num_devices in plan:
            scale = num_devices if weak_scaling and strategy in DATA_PARALLEL_STRATEGIES else 1
            config = TrainConfig(
                **{**workload, "batch_size": workload["batch_size"] * scale},
                num_steps=int(rng.choice(steps)),
                warmup_steps=warmup_steps,
                strategy=strategy,
                num_devices=num_devices,
                device=device,
                precision=precision,
            )
            try:
                config.validate()
            except ValueError:
                continue
            row = _run_row(config, truth, jitter[strategy], rng, hardware)
            rows.append({**row, "workload_index": w_index, **labels})
    return truth, _with_energy(pd.DataFrame(rows), truth, rng)


def _run_row(
    config: TrainConfig, truth: GroundTruth, jitter: float, rng: np.random.Generator, hardware: str
) -> dict[str, object]:
    """One run's params, hashes on ``hardware``, proxies (logs), true speedup and measured time (seconds)."""
    proxies = proxy_metrics(config)
    log_c = float(np.log(proxies[M_PROXY_FLOPS]))
    log_m = float(np.log(proxies[M_PROXY_MEM_TRAFFIC]))
    law = truth.speedup_laws[config.strategy]
    s_true = 1.0 + (float(law(np.asarray(config.num_devices))) - 1.0) * float(np.exp(jitter))
    t1 = float(np.exp(truth.log_time_single(np.asarray(log_c), np.asarray(log_m))))
    time_s = t1 / s_true * float(np.exp(rng.normal(0.0, truth.time_noise_sd)))
    return {
        **config.to_params(),
        "config_hash": config.config_hash(hardware),
        "workload_hash": config.workload_hash(hardware),
        "log_C": log_c,
        "log_M": log_m,
        "speedup_true": s_true,
        M_TIME_S: time_s,
    }


def _with_energy(frame: pd.DataFrame, truth: GroundTruth, rng: np.random.Generator) -> pd.DataFrame:
    """The runs with their measured speedup and eta, energy (joules) from the law, and throughput."""
    for name in INT_FIELDS:
        frame[name] = frame[name].astype(int)
    frame["speedup"] = measure_speedup(frame)["speedup"].to_numpy()  # as the fit will measure it
    frame["eta"] = frame["speedup"] / frame["num_devices"]
    # Energy follows the efficiency the run achieved: as measured where a baseline exists,
    # else the true one (a fit cannot measure it; its speedup and eta stay NaN here).
    achieved = frame["eta"].fillna(frame["speedup_true"] / frame["num_devices"]).to_numpy()
    log_e = truth.log_energy(frame["log_C"].to_numpy(), frame["log_M"].to_numpy(), np.log(achieved), frame["strategy"])
    frame[M_ENERGY_J] = np.exp(log_e + rng.normal(0.0, truth.noise_sd, size=len(frame)))
    samples = frame["batch_size"] * frame["num_steps"]
    frame[M_STEP_TIME_S] = frame[M_TIME_S] / frame["num_steps"]
    frame[M_SAMPLES_PER_S] = samples / frame[M_TIME_S]
    frame[M_AVG_POWER_W] = frame[M_ENERGY_J] / frame[M_TIME_S]
    return frame


def log_synthetic_runs(
    client: MlflowClient,
    experiment_id: str,
    n_workloads: int,
    *,
    truth: GroundTruth | None = None,
    strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"),
    device_counts: Sequence[int] = (2, 4),
    singles_per_workload: int = 2,
    steps: Sequence[int] = (10, 20, 30),
    hardware: str = DEFAULT_HARDWARE,
    energy_source: str = "nvml",
    seed: int = 0,
    weak_scaling: bool = False,
) -> SyntheticRuns:
    """Draw runs from a known law and log them as FINISHED train runs of ``experiment_id``.

    Args:
        client: an ``mlflow.MlflowClient``.
        experiment_id: where the runs go.
        n_workloads: distinct workloads (each gives several runs).
        truth: the laws to draw from (default :class:`GroundTruth`).
        strategies, device_counts, singles_per_workload, steps: the runs of each workload.
        hardware: value of ``roofline.hardware``.
        energy_source: value of ``roofline.energy_source``.
        seed: random seed; the same arguments give the same runs.
        weak_scaling: the drawn batch is per device (see :func:`generate_synthetic_runs`).

    Returns:
        the truth, the frame of runs (with ``run_id``) and the run ids.
    """
    truth, frame = generate_synthetic_runs(
        n_workloads,
        truth=truth,
        strategies=strategies,
        device_counts=device_counts,
        singles_per_workload=singles_per_workload,
        steps=steps,
        hardware=hardware,
        energy_source=energy_source,
        seed=seed,
        weak_scaling=weak_scaling,
    )
    run_ids = log_runs(client, experiment_id, frame)
    frame["run_id"] = run_ids
    return SyntheticRuns(truth=truth, frame=frame, run_ids=run_ids)
