"""The public tables of benchmarks/data/public/: each imports whole, names GPUs of the hardware table,
and holds the conversions its README states (so that every value can be traced to its source)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from mlflow_roofline.cli import main
from mlflow_roofline.core.gpu_datasheets import load_hardware_table

PUBLIC = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public"
TABLES = sorted(PUBLIC.glob("*.csv"))
ZEUS_EXAMPLES = {"squad": 87_599, "sentiment140": 425_000}
"""Examples per epoch the README assumes for each Zeus dataset."""


def test_there_is_a_public_table_and_the_readme_describes_each() -> None:
    readme = (PUBLIC / "README.md").read_text(encoding="utf-8")
    assert TABLES
    for path in TABLES:
        assert f"`{path.name}`" in readme


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_every_row_of_a_public_table_imports(path: Path, tracking_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    rows = len(pd.read_csv(path))
    code = 0
    try:
        main(["import", str(path), "--experiment", "public", "--dry-run"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"would import {rows}, skipped 0 already present, refused 0" in out.out


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_a_public_table_names_gpus_of_the_hardware_table(path: Path) -> None:
    table = load_hardware_table(env={})
    for name in pd.read_csv(path)["hardware"].unique():
        assert table.lookup(str(name)) is not None, name


def test_the_zeus_table_holds_the_readme_conversions() -> None:
    rows = pd.read_csv(PUBLIC / "zeus_bert_base.csv")
    energy = rows["zeus_time_per_epoch_s"] * rows["zeus_average_power_w"]
    assert rows["energy_j"].to_numpy() == pytest.approx(energy.to_numpy(), rel=1e-12)
    assert (rows["time_s"] == rows["zeus_time_per_epoch_s"]).all()
    steps = [math.ceil(ZEUS_EXAMPLES[d] / b) for d, b in zip(rows["zeus_dataset"], rows["batch_size"], strict=True)]
    assert rows["num_steps"].tolist() == steps
    assert rows["seq_len"].tolist() == [384 if d == "squad" else 128 for d in rows["zeus_dataset"]]
    # one row per (GPU, dataset, batch size): the highest power limit the trace profiled on that GPU
    assert not rows.duplicated(["hardware", "zeus_dataset", "batch_size"]).any()
    assert rows.groupby("hardware")["zeus_power_limit_w"].nunique().eq(1).all()
