"""A served answer never puts a GPU above its board power: energy and time meet halfway on the limit.

The laws and queries are those of the golden grid (tests/support/served_answers.py): three measured
GPUs, a GPU no run measured, a law of mixed kinds on an A100; all metered by NVML.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from support.served_answers import GOLDEN

from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.law.fleet import law_from_json
from mlflow_roofline.serve.power_limit import board_power_w, power_limit_factor
from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel

_GOLDEN = json.loads(GOLDEN.read_text())
LAWS_ON_GPUS = ("mixed_kinds", "fleet")
"""The grid's sets with jobs the laws put above the board power (the pooled law's sets have none)."""


def _answer(law: object, rows: list[dict], params: dict | None = None) -> pd.DataFrame:
    model = RooflineEnergyModel()
    model.law = law  # type: ignore[assignment]
    return model.predict(None, pd.DataFrame(rows), params)  # type: ignore[arg-type]


def _board_w(rows: list[dict], law_hardware: str) -> np.ndarray:
    table = load_hardware_table()
    return np.array([table.lookup(row.get("hardware", law_hardware)).board_power_w for row in rows])


def _relabelled(law: object, source: str) -> object:
    """The same law, its runs' energy said to come from ``source`` (a fleet's every law)."""
    if hasattr(law, "hardware_laws") and hasattr(law, "routes"):  # the fleet law
        pooled = law.pooled and _relabelled(law.pooled, source)  # type: ignore[attr-defined]
        own = {name: _relabelled(one, source) for name, one in law.hardware_laws.items()}  # type: ignore[attr-defined]
        return dataclasses.replace(law, hardware_laws=own, pooled=pooled)  # type: ignore[call-overload]
    inner = {name: _relabelled(one, source) for name, one in law.hardware_laws.items()}  # type: ignore[attr-defined]
    return dataclasses.replace(law, energy_source=source, hardware_laws=inner)  # type: ignore[call-overload]


@pytest.mark.parametrize("queries", LAWS_ON_GPUS)
def test_no_answer_puts_a_gpu_above_its_board_power_and_energy_times_time_is_kept(queries: str) -> None:
    law_name, rows = _GOLDEN["queries"][queries]
    law = law_from_json(_GOLDEN["laws"][law_name])
    held = _answer(law, rows)
    free = _answer(_relabelled(law, "rapl"), rows)  # RAPL counts more than the GPUs: no limit applies
    board = _board_w(rows, getattr(law, "hardware", ""))
    devices = np.array([row["num_devices"] for row in rows], dtype=float)

    power = held["energy_j"].to_numpy() / (devices * held["time_s"].to_numpy())
    assert (power <= board * (1 + 1e-9)).all(), (power / board).max()
    free_power = free["energy_j"].to_numpy() / (devices * free["time_s"].to_numpy())
    over = free_power > board
    assert over.any(), "the grid has no job the laws put above the board power: the test checks nothing"
    np.testing.assert_allclose(power[over], board[over], rtol=1e-9)  # moved onto the limit, not below it
    np.testing.assert_allclose(  # halfway in logs: energy down and time up by the same factor
        held["energy_j"] * held["time_s"], free["energy_j"] * free["time_s"], rtol=1e-9
    )
    for column in ("energy_j", "energy_j_lower", "energy_j_upper", "time_s", "speedup", "eta"):
        np.testing.assert_array_equal(held[column].to_numpy()[~over], free[column].to_numpy()[~over], column)
    ratio = held["energy_j"].to_numpy()[over] / free["energy_j"].to_numpy()[over]
    for bound in ("energy_j_lower", "energy_j_upper"):  # the interval moves with its energy
        np.testing.assert_allclose(held[bound].to_numpy()[over] / free[bound].to_numpy()[over], ratio, rtol=1e-9)


def test_recommend_and_pareto_answer_a_placement_as_predict_does() -> None:
    law_name, rows = _GOLDEN["queries"]["mixed_kinds"]
    law = law_from_json(_GOLDEN["laws"][law_name])
    job = next(row for row in rows if row["strategy"] == "single")
    for params in ({"mode": "recommend", "max_devices": 8}, {"mode": "pareto", "max_devices": 8}):
        for _, best in _answer(law, [job], params).iterrows():
            asked = {**job, "strategy": best["strategy"], "num_devices": int(best["num_devices"])}
            predicted = _answer(law, [asked]).iloc[0]
            assert best["energy_j"] == pytest.approx(predicted["energy_j"], rel=1e-12)
            assert best["time_s"] == pytest.approx(predicted["time_s"], rel=1e-12)


def test_the_limit_holds_for_device_meters_on_table_gpus_only() -> None:
    assert board_power_w("A100 SXM4 80GB", "nvml") == 400.0
    assert board_power_w("NVIDIA A100-SXM4-80GB", "nvml_power") == 400.0  # the name NVML reports
    assert board_power_w("AMD Instinct MI250X", "rocm") == 560.0
    assert board_power_w("A100 SXM4 80GB", "nvml+nvml_power") == 400.0  # a law over runs of both NVML meters
    assert np.isnan(board_power_w("A100 SXM4 80GB", "nvml+rapl"))
    assert np.isnan(board_power_w("A100 SXM4 80GB", "rapl"))  # a CPU package meter
    assert np.isnan(board_power_w("A100 SXM4 80GB", "estimate"))
    assert np.isnan(board_power_w("Synthetic GPU", "nvml"))  # no row in the table


def test_the_factor_is_the_square_root_of_the_excess_and_one_elsewhere() -> None:
    energy = np.array([4000.0, 100.0, 800.0, np.inf])
    time_s = np.array([1.0, 1.0, 1.0, 1.0])
    factor = power_limit_factor(energy, time_s, np.array([1.0, 1.0, 2.0, 1.0]), 250.0)
    np.testing.assert_allclose(factor[:3], [0.25, 1.0, np.sqrt(250 / 400)])
    assert np.isfinite(factor).all()
    assert (power_limit_factor(energy, time_s, np.ones(4), float("nan")) == 1.0).all()
