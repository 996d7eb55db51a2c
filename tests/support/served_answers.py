"""A fixed grid of served queries and the answers the model gave: the golden file of test_served_answers.py.

The laws are fitted once on the generators of :mod:`mlflow_roofline.testing` (no MLflow) and kept
as their JSON, so the golden answers pin the serving code alone, not the fit. The grid: predict,
recommend (each objective, several ``max_devices``, with and without a carbon intensity) and
pareto mode, on a one-GPU law with the paper's speedups, a one-GPU law with workload-aware
(comm-time) speedups, a law of mixed kinds (decoders, LoRA, checkpointing), the pooled law of three
GPUs and the fleet law over them (a GPU no run measured among the rows).

Regenerate only when an answer is meant to change (and say why in the commit); ``--answers-only`` keeps the
stored laws and rewrites the answers (a change of the serving code, not of the fit):

    PYTHONPATH=$PWD:$PWD/tests python tests/support/served_answers.py [--answers-only]
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlflow_roofline.law.fleet import law_from_json

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "served_answers.json"

MEASURED = ("T4", "V100 SXM2", "A100 SXM4 80GB")
UNMEASURED = "H100 SXM"

PREDICT_STRATEGIES = (("single", 1), ("ddp", 2), ("fsdp", 4), ("tp", 2), ("ddp", 8), ("tp", 4))

PARAMS: tuple[dict[str, Any], ...] = (
    {"mode": "predict"},
    {"mode": "predict", "carbon_intensity": 400.0, "price_per_kwh": 0.2},
    {"mode": "recommend", "max_devices": 1},
    {"mode": "recommend", "max_devices": 4, "objective": "time"},
    {"mode": "recommend", "max_devices": 8, "objective": "edp"},
    {"mode": "recommend", "max_devices": 8, "objective": "carbon", "carbon_intensity": 300.0},
    {"mode": "recommend", "max_devices": 16, "objective": "energy"},
    {"mode": "pareto", "max_devices": 8},
    {"mode": "pareto", "max_devices": 16, "carbon_intensity": 400.0},
)


def _sizes(rng: np.random.Generator) -> dict[str, int]:
    heads = int(rng.choice([2, 4, 8, 12]))
    return {
        "num_layers": int(rng.integers(2, 13)),
        "hidden_size": 64 * heads,
        "num_heads": heads,
        "ffn_size": 256 * heads,
        "seq_len": int(rng.choice([64, 128])),
        "batch_size": int(rng.choice([8, 16, 24, 32])),
        "num_steps": int(rng.choice([10, 20, 30, 500])),
    }


def queries(seed: int, n_jobs: int = 8, kinds: bool = False, hardware: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rows of ``n_jobs`` jobs under each placement of :data:`PREDICT_STRATEGIES`, the first job twice more.

    ``kinds``: a decoder / LoRA / checkpointing mix; ``hardware``: each job on one of these GPUs in turn.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for j in range(n_jobs):
        job: dict[str, Any] = _sizes(rng)
        if kinds:
            job.update(
                arch=["encoder", "decoder"][j % 2],
                vocab_size=[30522, 50257][j % 2],
                peft=["none", "lora"][(j // 2) % 2],
                lora_rank=[0, 8][(j // 2) % 2],
                grad_checkpointing=bool(j % 3 == 0),
            )
        if hardware:
            job["hardware"] = hardware[j % len(hardware)]
        for strategy, n in PREDICT_STRATEGIES:
            if strategy == "tp" and job["num_heads"] % n:
                continue
            rows.append({**job, "strategy": strategy, "num_devices": n})
    return rows + rows[:2]  # a repeated job: the same answer twice


def search_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each job once (recommend and pareto ignore the placement asked), then the first job twice more."""
    once = [row for row in rows if row["strategy"] == "single"]
    return once + once[:1] * 2


def fitted_laws() -> dict[str, str]:
    """The laws of the grid, as their JSON (fitted here, without MLflow)."""
    from law_factory import make_law

    from mlflow_roofline.core.gpu_datasheets import load_hardware_table
    from mlflow_roofline.fit.fleet_fit import fit_fleet
    from mlflow_roofline.fit.hardware_fit import fit_hardware
    from mlflow_roofline.fit.pooled import fit_pooled
    from mlflow_roofline.testing.mixed_arch import generate_mixed_arch_runs
    from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

    warnings.simplefilter("ignore")
    weak = generate_weak_fleet_runs(8, seed=0, gpus=MEASURED, device_counts=(2, 4))
    fits = sorted(
        (fit_hardware(rows.copy(), str(hw)) for hw, rows in weak.groupby("hardware")), key=lambda f: -len(f.frame)
    )
    pooled = fit_pooled(fits, load_hardware_table(env={}), 0)
    fleet = fit_fleet(fits, pooled)
    mixed = fit_hardware(generate_mixed_arch_runs(12, seed=0), "A100 SXM4 80GB")
    return {
        "paper": make_law().to_json(),
        "comm_time": next(f for f in fits if f.hardware == "A100 SXM4 80GB").law.to_json(),
        "mixed_kinds": mixed.law.to_json(),
        "pooled": pooled.law.to_json(),
        "fleet": fleet.law.to_json(),
    }


def grid_queries() -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """Each set of query rows: the law it asks and its rows (a pooled law searches one GPU per request)."""
    every_gpu = (*MEASURED, UNMEASURED)
    sets = {
        "paper": ("paper", queries(1)),
        "comm_time": ("comm_time", queries(2)),
        "mixed_kinds": ("mixed_kinds", queries(3, kinds=True)),
        "fleet": ("fleet", queries(5, hardware=every_gpu)),
    }
    for i, gpu in enumerate(every_gpu):
        sets[f"pooled on {gpu}"] = ("pooled", queries(6 + i, n_jobs=4, hardware=(gpu,)))
    return sets


def answer(law_json: str, rows: list[dict[str, Any]], params: dict[str, Any]) -> pd.DataFrame:
    """What the served model answers ``rows`` under ``params`` (the pyfunc's own predict)."""
    from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel

    model = RooflineEnergyModel()
    model.law = law_from_json(law_json)
    return model.predict(None, pd.DataFrame(rows), params)  # type: ignore[arg-type]


def asked(rows: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a case asks: all of them in predict mode, :func:`search_rows` in the search modes."""
    return rows if params["mode"] == "predict" else search_rows(rows)


def as_json_columns(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """The answer as plain columns (NaN as None)."""

    def plain(value: Any) -> Any:
        if isinstance(value, (np.floating, float)):
            return None if math.isnan(value) else float(value)
        if isinstance(value, (np.bool_, bool)):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        return value

    return {str(c): [plain(v) for v in frame[c].tolist()] for c in frame.columns}


def main(argv: list[str] | None = None) -> None:
    answers_only = "--answers-only" in (sys.argv[1:] if argv is None else argv)
    if answers_only:
        stored = json.loads(GOLDEN.read_text())
        laws, grid = stored["laws"], {name: tuple(pair) for name, pair in stored["queries"].items()}
    else:
        laws, grid = fitted_laws(), grid_queries()
    cases = [
        {"queries": name, "params": params, "answer": as_json_columns(answer(laws[law], asked(rows, params), params))}
        for name, (law, rows) in grid.items()
        for params in PARAMS
    ]
    GOLDEN.write_text(json.dumps({"laws": laws, "queries": grid, "cases": cases}))
    print(f"wrote {len(cases)} answers to {GOLDEN} ({GOLDEN.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
