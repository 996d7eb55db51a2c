"""``predict --hardware``: the command reaches a law pooled over several hardware (a multi-GPU fit's @champion)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from support.registered_law import registered_law

from mlflow_roofline.cli import main
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.pooled import fit_pooled
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.placement_search import recommend_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.hardware_fleet import FLEET, load_fleet_table, write_fleet_table
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs

JOB = {"num_layers": 4, "hidden_size": 512, "num_heads": 8, "ffn_size": 2048, "seq_len": 128, "batch_size": 16}
STEPS = 1000


@pytest.fixture(scope="module")
def pooled_law(tmp_path_factory: pytest.TempPathFactory) -> FittedLaw:
    warnings.simplefilter("ignore")
    frame = generate_roofline_runs(10, hardware=FLEET, seed=0)  # the CLI path; accuracy: fit/test_pooled
    fits = sorted(
        (fit_hardware(rows.copy(), str(hw)) for hw, rows in frame.groupby("hardware")), key=lambda f: -len(f.frame)
    )
    table = write_fleet_table(Path(tmp_path_factory.mktemp("table")) / "fleet.csv")
    law = fit_pooled(fits, load_fleet_table(table)).law
    assert law is not None and len(law.known_hardware) == 3
    return law


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory, store_template: Path, pooled_law: FittedLaw) -> Iterator[str]:
    yield from registered_law(tmp_path_factory, store_template, pooled_law)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    sizes = [f"--{key.replace('_', '-')}={value}" for key, value in JOB.items()]
    code = 0
    try:
        main(["predict", *sizes, f"--num-steps={STEPS}", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_hardware_reaches_every_hardware_of_a_pooled_champion(
    registered: str, pooled_law: FittedLaw, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "--model", registered)
    assert code == 2 and "hardware" in err and "Sim Base" in err  # which hardware: the model lists them
    row = {**JOB, "num_steps": STEPS}
    for name in pooled_law.known_hardware:
        code, out, err = _cli(capsys, "--model", registered, "--hardware", name, "--json")
        assert code == 0, err
        expected = predict_frame(
            pooled_law, pd.DataFrame([{**row, "strategy": "single", "num_devices": 1, "hardware": name}])
        )
        assert json.loads(out)["energy_j"] == pytest.approx(expected["energy_j"].iloc[0], rel=1e-12)
        code, out, err = _cli(capsys, "--model", registered, "--hardware", name, "--recommend", "--max-devices", "4")
        assert code == 0 and f"hardware: {name}" in out, err
    code, out, err = _cli(capsys, "--model", registered, "--hardware", "Sim Fast", "--recommend", "--json")
    best = recommend_frame(pooled_law, pd.DataFrame([{**row, "hardware": "Sim Fast"}]))
    assert code == 0 and json.loads(out)["energy_j"] == pytest.approx(best["energy_j"].iloc[0], rel=1e-12)
