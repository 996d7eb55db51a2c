"""A small FittedLaw for the serving tests: synthetic runs from a known law, fitted by OLS.

The runs come from :mod:`mlflow_roofline.testing.synthetic` (no MLflow); the energy law is the
paper's form ``log_E ~ log_C + log_M + log_eta + strategy`` with HC3 covariance, the time
law ``log_t1 ~ log_C + log_M`` on the single-device runs, and the speedup laws are the
known true ones (fitting them is the fit's job, tested there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.serve.validate import INPUT_COLUMNS
from mlflow_roofline.testing.synthetic import GroundTruth, generate_synthetic_runs


def linear_law(result, formula: str) -> LinearLaw:
    """A statsmodels OLS result as plain data."""
    return LinearLaw(
        formula=formula,
        terms=list(result.model.exog_names),
        coef=[float(v) for v in result.params.to_numpy()],
        cov=result.cov_params().to_numpy().tolist(),
        resid_var=float(result.scale),
        df_resid=float(result.df_resid),
    )


def synthetic_frame(
    n_workloads: int = 30, strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"), seed: int = 0
) -> tuple[GroundTruth, pd.DataFrame]:
    """Synthetic runs with the law's columns (log_E, log_eta, log_t1 for single runs)."""
    truth, frame = generate_synthetic_runs(n_workloads, strategies=strategies, device_counts=(2, 4), seed=seed)
    frame["log_E"] = np.log(frame["energy_j"])
    frame["log_eta"] = np.log(frame["eta"])
    frame["log_t1"] = np.log(frame["time_s"])
    return truth, frame


def make_law(
    n_workloads: int = 30, strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"), seed: int = 0
) -> FittedLaw:
    """Fit a FittedLaw on synthetic runs of ``strategies`` (``single`` must be among them)."""
    return fit_law(n_workloads, strategies, seed)[0]


def fit_law(
    n_workloads: int = 30, strategies: Sequence[str] = ("single", "ddp", "fsdp", "tp"), seed: int = 0
) -> tuple[FittedLaw, Any, Any, GroundTruth]:
    """The law, the statsmodels energy and time results it was built from, and the truth."""
    truth, frame = synthetic_frame(n_workloads, strategies, seed)
    energy_formula = "log_E ~ log_C + log_M + log_eta" + (" + strategy" if len(strategies) > 1 else "")
    energy = smf.ols(energy_formula, data=frame).fit(cov_type="HC3", use_t=True)
    singles = frame[frame["strategy"] == "single"]
    time_formula = "log_t1 ~ log_C + log_M"
    time = smf.ols(time_formula, data=singles).fit(cov_type="HC3", use_t=True)
    numeric = [c for c in INPUT_COLUMNS if c != "strategy"] + ["log_C", "log_M"]
    ranges = {c: [float(frame[c].min()), float(frame[c].max())] for c in numeric}
    law = FittedLaw(
        hardware="Synthetic GPU",
        energy_source="nvml",
        form="paper",
        energy_law=linear_law(energy, energy_formula),
        time_law=linear_law(time, time_formula),
        speedup_laws={s: truth.speedup_laws[s] for s in strategies},
        ranges=ranges,
        n_runs=len(frame),
        cv_mape=float("nan"),
    )
    return law, energy, time, truth


def query(**overrides: object) -> dict[str, object]:
    """A valid query row inside the synthetic ranges (override any field)."""
    row: dict[str, object] = dict(
        num_layers=4,
        hidden_size=512,
        num_heads=8,
        ffn_size=2048,
        seq_len=128,
        batch_size=16,
        num_steps=20,
        strategy="fsdp",
        num_devices=2,
    )
    row.update(overrides)
    return row


SEARCH_JOBS = [
    query(),  # h=8, ff=2048, B=16
    query(num_layers=12, hidden_size=768, num_heads=12, ffn_size=3072, batch_size=24, num_steps=1000),
    query(num_heads=2, hidden_size=128, ffn_size=512, batch_size=9, seq_len=32),  # odd batch: no ddp/fsdp
]
"""Jobs for the recommend and pareto searches; the last one's odd batch rules out ddp and fsdp."""


def valid_configs(job: dict, strategies: Sequence[str], max_devices: int) -> list[dict]:
    """Every (strategy, N <= max_devices) of ``job`` that TrainConfig accepts."""
    rows = []
    for strategy in strategies:
        for n in range(1, max_devices + 1):
            config = {**job, "strategy": strategy, "num_devices": n}
            try:
                TrainConfig(**config).validate()
            except ConfigError:
                continue
            rows.append(config)
    return rows


def valid_grid(law: FittedLaw, job: dict, max_devices: int) -> pd.DataFrame:
    """Every configuration TrainConfig accepts, predicted one by one (the searches' brute-force reference)."""
    grid = pd.DataFrame(valid_configs(job, law.strategies, max_devices))
    return pd.concat([grid[["strategy", "num_devices"]], predict_frame(law, grid)], axis=1)
