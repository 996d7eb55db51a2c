"""The ``predict`` command end to end: options in, a registered law model asked, tables and JSON out."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from law_factory import make_law, query
from support.registered_law import registered_law

from mlflow_roofline.cli import main
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.placement_search import pareto_frame, recommend_frame
from mlflow_roofline.serve.predict import predict_frame


@pytest.fixture(scope="module")
def law() -> FittedLaw:
    return make_law()


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory, store_template: Path, law: FittedLaw) -> Iterator[str]:
    """The law logged, registered and aliased @champion in this module's own store; its models:/ URI."""
    yield from registered_law(tmp_path_factory, store_template, law)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    base = [
        "predict",
        "--num-layers",
        "4",
        "--hidden-size",
        "512",
        "--num-heads",
        "8",
        "--ffn-size",
        "2048",
        "--seq-len",
        "128",
        "--batch-size",
        "16",
        "--num-steps",
        "20",
    ]
    code = 0
    try:
        main(base + list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_cli_table_and_json(registered: str, law: FittedLaw, capsys: pytest.CaptureFixture[str]) -> None:
    expected = predict_frame(law, pd.DataFrame([query()])).iloc[0]
    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--json")
    assert code == 0
    record = json.loads(out)
    assert record["energy_j"] == pytest.approx(expected["energy_j"], rel=1e-12)
    assert record["extrapolated"] is False

    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2")
    assert code == 0
    assert f"{expected['energy_j'] / 1e3:.3g} kJ" in out and "95% interval" in out and "fsdp x2" in out

    code, out, _ = _cli(capsys, "--model", registered, "--recommend", "--max-devices", "4", "--objective", "time")
    best = recommend_frame(law, pd.DataFrame([query()]), 4, "time").iloc[0]
    assert code == 0
    assert "best (time)" in out and "energy-optimal" in out and "time-optimal" in out
    best_line = next(line for line in out.splitlines() if line.startswith("best (time)"))
    assert "time-optimal" in best_line  # one choice, said once
    assert re.search(rf"\s{best['strategy']}\s+{best['num_devices']}\b", best_line)


def test_predict_cli_errors_are_one_line(registered: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "--model", registered, "--strategy", "tp", "--num-devices", "3")
    assert code == 2
    assert err.strip() == "Error: num_heads (row 0): must be divisible by num_devices under tp (8 % 3 != 0)"
    code, _, err = _cli(capsys, "--model", "models:/no-such-model@champion")
    assert code == 2
    assert err.startswith("Error: cannot load model models:/no-such-model@champion") and err.count("\n") == 1


def test_predict_cli_says_when_a_given_speedup_is_implausible(
    registered: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--speedup", "3.0")
    assert code == 0
    assert "implausible" in out and "exceeds the device count" in out
    code, out, _ = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--speedup", "1.9")
    assert code == 0 and "implausible" not in out


def test_predict_cli_carbon_cost_and_pareto(
    registered: str, law: FittedLaw, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys,
        "--model",
        registered,
        "--strategy",
        "fsdp",
        "--num-devices",
        "2",
        "--carbon-intensity",
        "400",
        "--price-per-kwh",
        "0.3",
        "--json",
    )
    assert code == 0
    record = json.loads(out)
    assert record["co2e_g"] == pytest.approx(record["energy_j"] / 3.6e6 * 400, rel=1e-12)
    assert record["cost"] == pytest.approx(record["energy_j"] / 3.6e6 * 0.3, rel=1e-12)

    code, out, _ = _cli(capsys, "--model", registered, "--region", "FR", "--strategy", "fsdp", "--num-devices", "2")
    assert code == 0 and "co2e" in out and "g CO2e" in out

    code, out, _ = _cli(capsys, "--model", registered, "--pareto", "--max-devices", "4", "--region", "FR", "--json")
    expected = pareto_frame(law, pd.DataFrame([query()]), 4)
    points = json.loads(out)
    assert code == 0
    assert [(p["strategy"], p["num_devices"]) for p in points] == list(zip(expected.strategy, expected.num_devices))

    code, out, _ = _cli(capsys, "--model", registered, "--pareto", "--max-devices", "4")
    assert code == 0 and f"{len(expected)} choices no other beats in both energy and time" in out

    code, _, err = _cli(capsys, "--model", registered, "--recommend", "--objective", "cost")
    assert code == 2 and err.startswith("Error: objective: must be one of energy, time, edp, got 'cost'")
    code, _, err = _cli(capsys, "--model", registered, "--region", "Atlantis")
    assert code == 2 and err.startswith("Error: region: 'Atlantis' is not in the carbon-intensity table")
    # The shared carbon options, checked as train/measure/sweep check them (before the model loads).
    code, _, err = _cli(capsys, "--model", "models:/absent@none", "--pue", "0.5")
    assert code == 2 and err.startswith("Error: pue: expected a finite number >= 1, got '0.5'")
    code, _, err = _cli(capsys, "--model", registered, "--region", "")  # the MLproject's unset param
    assert code == 0
    code, _, err = _cli(capsys, "--model", registered, "--strategy", "fsdp", "--num-devices", "2", "--speedup", "nan")
    assert code == 2 and "Invalid value for '--speedup': must be a finite number, got 'nan'" in err


def test_a_huge_value_given_is_not_echoed_whole(unopened_tracking_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every command's error line is at most about 1000 characters, whatever it quotes."""
    code, _, err = _cli(capsys, "--model", "models:/absent@none", "--region", "x" * 1_000_000)
    assert code == 2 and err.startswith("Error: region: 'xxx")
    assert len(err) < 1100 and err.endswith("more characters not echoed]\n"), err[-200:]
