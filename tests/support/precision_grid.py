"""A fixed grid of queries without ``precision``, and the fleet and one-GPU laws that answer it.

The fleet is the weak-scaling fleet of tests/fit/test_fleet.py (three real GPUs of the shipped
hardware table, fp16 runs, seed 0), fitted without MLflow. tests/data/precision_default.json holds
the answers this module computed on the code before ``precision`` entered the law (commit
45da7b2), written by :func:`write_expected`::

    PYTHONPATH=<checkout>:tests python -c "from support.precision_grid import write_expected; write_expected()"

so that a request without ``precision`` can be checked to answer exactly as it did then.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.fit.fleet_fit import FleetFit, fit_fleet
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.pooled import fit_pooled
from mlflow_roofline.serve.fleet_routing import fleet_frame
from mlflow_roofline.serve.placement_search import recommend_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

EXPECTED = Path(__file__).resolve().parents[1] / "data" / "precision_default.json"
MEASURED = ("T4", "V100 SXM2", "A100 SXM4 80GB")
UNMEASURED = ("H100 SXM", "NVIDIA L4")
COLUMNS = ("energy_j", "energy_j_lower", "energy_j_upper", "time_s", "speedup")
JOBS = (
    {"num_layers": 6, "hidden_size": 512, "num_heads": 8, "ffn_size": 2048, "seq_len": 128, "batch_size": 16},
    {"num_layers": 12, "hidden_size": 768, "num_heads": 12, "ffn_size": 3072, "seq_len": 256, "batch_size": 32},
    {"num_layers": 4, "hidden_size": 256, "num_heads": 4, "ffn_size": 1024, "seq_len": 64, "batch_size": 8},
)
PLACEMENTS = ({"strategy": "single", "num_devices": 1}, {"strategy": "ddp", "num_devices": 4})


def fleet_fit() -> FleetFit:
    """The three-GPU weak fleet (fp16 runs), each GPU fitted, pooled and made one fleet law."""
    warnings.simplefilter("ignore")
    frame = generate_weak_fleet_runs(8, seed=0, gpus=MEASURED, strategies=("single", "ddp"), device_counts=(2, 4))
    fits = sorted(
        (fit_hardware(rows.copy(), str(hw)) for hw, rows in frame.groupby("hardware")), key=lambda f: -len(f.frame)
    )
    return fit_fleet(fits, fit_pooled(fits, load_hardware_table(env={}), 0))


def grid() -> pd.DataFrame:
    """Every job x placement x hardware (measured and of the table), 20 steps, no ``precision`` column."""
    rows = [
        {**job, **placed, "num_steps": 20, "hardware": name}
        for job in JOBS
        for placed in PLACEMENTS
        for name in (*MEASURED, *UNMEASURED)
    ]
    return pd.DataFrame(rows)


def answers(fleet: FleetFit) -> dict[str, list[float]]:
    """The grid's answers: the fleet in predict and recommend mode, and the first GPU's own law alone."""
    queries = grid()
    predicted = fleet_frame(fleet.law, queries, lambda law, rows: predict_frame(law, rows))
    first = fleet.law.known_hardware[0]
    own_rows = queries[queries["hardware"] == first].drop(columns="hardware").reset_index(drop=True)
    own = predict_frame(fleet.law.hardware_laws[first], own_rows)
    best = fleet_frame(fleet.law, queries.drop_duplicates("hardware"), lambda law, rows: recommend_frame(law, rows))
    out = {f"fleet_{c}": predicted[c].astype(float).tolist() for c in COLUMNS}
    out.update({f"own_{c}": own[c].astype(float).tolist() for c in COLUMNS})
    out.update({f"recommend_{c}": best[c].astype(float).tolist() for c in COLUMNS})
    return out


def write_expected(path: Path = EXPECTED) -> None:
    """Write the grid's answers. First written on the code before ``precision`` entered the law (45da7b2);
    rewritten when the datasheet roofline joined the pooled forms (2026-12-03), after checking that the
    code of that day, with that form left out, still gave every answer of the first file to 1e-9; rewritten
    when that form took its vector term (same day): the rows it answers moved by <= 7.5e-7 in energy (the
    solver's tolerance) and <= 0.5 % in their interval bounds (one coefficient more, at 0 on this fleet),
    every other answer unchanged to 1e-9; rewritten when a GPU's forms that tie became their average
    (2026-12-07), after checking that the code of that day, with the average left out
    (``fit.forms.energy_laws._average_ties`` returning its ``chosen``), gave every answer of the file to 4.1e-9
    (with it, up to 20 % apart: the GPUs whose law is now an average); rewritten when the registered mean became
    the 1-SE pick's with its best one or two partners (2026-12-07, ``fit.forms.energy_laws._register_best``), after
    checking that the code of that day, with the rule before it put back in its place, gave every answer of the
    file exactly (with it, up to 21 % apart: the GPUs whose average changed members); rewritten when the served
    energy and time were held to the board power (2026-12-07, ``serve.power_limit``), after checking that the code
    of that day with the limit switched off gave every answer of the file exactly (with it, 3 of the 30 fleet rows
    and 1 of the 5 recommended placements moved: energy down by up to 29 %, time up by up to 41 %); rewritten when a
    GPU no run measured was timed by the roofline in time pooled over the measured GPUs (2026-12-07,
    ``fit.pooled_time``), after checking that the code of that day with that law left out of the fleet's pooled law
    (``unmeasured_time_law=None``) gave every answer of the file exactly (with it, the time of 10 of the 30 fleet
    rows, all of the H100 and L4, and 2 of the 5 recommended placements moved, by up to 3.8x on the smallest job,
    which lies below the sizes fitted, and the speedup of 6; every energy unchanged)."""
    path.write_text(json.dumps(answers(fleet_fit()), indent=1) + "\n")
