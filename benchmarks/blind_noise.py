"""How much of the blind table's error is its noise: the same runs simulated without it, and the laws fitted on both.

``benchmarks/data/simulated/blind_fleet.csv`` was written by a per-kernel simulation with noise (a
silicon factor per GPU, a data-pipeline factor per workload, time and power per run;
``benchmarks/data/simulated/README.md``). This script replays the simulation with the same seed and
order, checks that it reproduces every energy of the table, and takes each run's energy once more
without the per-workload and per-run noise (the per-GPU silicon factor kept: a law learns it). Then:

1. the noise floor: the MAPE (%) of the table's energies against the noise-free ones on the bigger
   models (those above the 75th percentile of the table's sizes ``L*d^2``, as ``fleet_loho.py --bigger``
   splits them), per GPU and over all: what a law that knew the simulation exactly would still miss;
2. each GPU's own law (``fit_hardware`` on its smaller models, the fit's own code) asked about its bigger
   models, fitted on the table and on its noise-free twin: if noise were what the law misses, the second
   would be near the floor.

    python benchmarks/blind_noise.py

About 3 minutes on a 2-core VM (numpy, pandas and the package; no MLflow store).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from fit_accuracy import served_errors  # benchmarks/ is the script's directory

from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.testing.table_runs import runs_from_table

SIMULATION = Path(__file__).resolve().parent / "data" / "simulated"
sys.path.insert(0, str(SIMULATION))
import make_blind_fleet as blind  # noqa: E402  (the simulation's own functions, not a copy)

QUANTILE = 0.75
"""Runs at or below this quantile of the table's distinct sizes ``L*d^2`` are the smaller models."""


def twin_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The table as the simulation writes it, and the same runs' energies (J) and times (s) without the
    per-workload pipeline factor and the per-run time, power and limiter noise."""
    rng = np.random.default_rng(blind.SEED)
    noisy, clean = [], []
    for gpu in blind.load_gpus():
        silicon = float(blind.stable_rng("silicon", gpu.name).lognormal(0.0, 0.04))
        for job in blind.plan(gpu):
            row = blind.simulate(job, gpu, rng)  # draws the run's noise in the table's order
            host_s = (blind.HOST_STEP_S + blind.HOST_SAMPLE_S * job.b) * gpu.host
            _, step_s, step_j = blind.solve_clock(blind.build_step(job, gpu), host_s, silicon)
            public = {k: v for k, v in row.items() if not k.startswith("_")}
            noisy.append(public)
            steps = int(row["num_steps"])
            clean.append({**public, "energy_j": step_j * steps * job.N, "time_s": step_s * steps})
    return pd.DataFrame(noisy), pd.DataFrame(clean)


def bigger_mask(table: pd.DataFrame) -> np.ndarray:
    """The runs above :data:`QUANTILE` of the table's distinct sizes ``L*d^2``."""
    size = table["num_layers"].to_numpy(dtype=float) * table["hidden_size"].to_numpy(dtype=float) ** 2
    return size > np.quantile(np.unique(size), QUANTILE)


def own_law_errors(table: pd.DataFrame, big: np.ndarray) -> dict[str, float]:
    """Per GPU, the MAPE (%) of its own law fitted on its smaller models, asked about its bigger ones."""
    runs = runs_from_table(table)
    errors = {}
    for hw, rows in runs.groupby("hardware", sort=False):
        on = big[rows.index.to_numpy()]
        fit = fit_hardware(rows[~on].copy(), str(hw), seed=0)
        errors[str(hw)] = float(served_errors(fit.law, rows[on].reset_index(drop=True))[0].mean())
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    noisy, clean = twin_tables()
    published = pd.read_csv(blind.OUT_CSV)
    if not np.allclose(noisy["energy_j"].round(1), published["energy_j"], rtol=0, atol=0.051):
        raise SystemExit(f"the simulation no longer reproduces {blind.OUT_CSV}: regenerate it or this script")
    big = bigger_mask(noisy)
    floor = 100.0 * np.abs(noisy["energy_j"] / clean["energy_j"] - 1.0)
    noisy_own, clean_own = own_law_errors(noisy, big), own_law_errors(clean, big)
    print(f"blind table: {len(noisy)} runs, {int(big.sum())} bigger models; MAPE (%) on the bigger models")
    print(f"  {'GPU':18s} {'noise floor':>12s} {'own law, table':>15s} {'own law, noise-free':>20s}")
    for hw in noisy_own:
        on = big & (noisy["hardware"] == hw).to_numpy()
        print(f"  {hw:18s} {floor[on].mean():12.1f} {noisy_own[hw]:15.1f} {clean_own[hw]:20.1f}")
    print(f"  {'all':18s} {floor[big].mean():12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
