"""The job table is the one list of a job's columns: every other list is a view of it, kept in sync here.

The last test adds a column to the table (one line, in a fresh process, before anything else of
the package is imported) and finds it in every view: the train params and their checks, the
command-line options of ``train`` and ``predict``, the sweep's grid keys, the import's fields,
the served model's signature and its input checks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from mlflow_roofline.commands.predict import predict_command
from mlflow_roofline.commands.train import train_command
from mlflow_roofline.core import job_table
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.fit.runs.run_data import FRAME_COLUMNS
from mlflow_roofline.ingest.records import KNOWN_FIELDS, RowError, check_row
from mlflow_roofline.ingest.sources import RawRow
from mlflow_roofline.serve.errors import InputError
from mlflow_roofline.serve.pyfunc_model import model_signature
from mlflow_roofline.serve.validate import validate_sizes
from mlflow_roofline.sweep.spec import GRID_KEYS, SETTING_COLUMNS, grid_values

REPO = Path(job_table.__file__).resolve().parents[2]
COLUMNS = job_table.JOB_COLUMNS
ALL = tuple(c.name for c in COLUMNS)
SIZES = dict(num_layers=2, hidden_size=64, num_heads=2, ffn_size=256, seq_len=16, batch_size=4)


def test_train_config_holds_every_column_with_the_table_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(TrainConfig) if f.name != "extra"}
    assert tuple(fields) == ALL
    for entry in COLUMNS:
        default = fields[entry.name].default
        if entry.required:
            assert default is dataclasses.MISSING, entry.name
        elif entry.default == job_table.AUTO and entry.type == "int":
            assert default == -1, entry.name  # resolved by the column deciding it
        elif entry.name != "device":  # auto: resolved from the host before a config is built
            assert default == entry.default, entry.name


def test_mlproject_train_parameters_are_the_job_columns_with_their_defaults() -> None:
    train = yaml.safe_load((REPO / "MLproject").read_text())["entry_points"]["train"]
    params = train["parameters"]
    job = [name for name in params if name in ALL]
    assert job == list(ALL), "MLproject's train parameters are not the job table's columns, in its order"
    for entry in COLUMNS:
        given = params[entry.name].get("default")
        if entry.default is None:
            assert given is None, entry.name
        else:
            assert str(given).lower() == str(entry.default).lower(), entry.name
        assert f"{entry.option} {{{entry.name}}}" in train["command"], f"the command does not pass {entry.option}"


def test_the_command_options_are_the_job_columns() -> None:
    train = {p.name for p in train_command.params}
    predict = {p.name for p in predict_command.params}
    assert set(ALL) <= train
    assert set(job_table.names(request=True)) <= predict
    assert not set(job_table.names(request=False)) & predict  # warm-up and device are the run's, not a query's


def test_the_sweep_grid_the_import_and_the_fit_pull_read_every_column() -> None:
    assert set(ALL) - set(SETTING_COLUMNS) <= set(GRID_KEYS)
    assert set(ALL) <= KNOWN_FIELDS
    assert set(ALL) <= set(FRAME_COLUMNS)


def test_the_model_signature_takes_the_request_columns_and_requires_the_sizes() -> None:
    inputs = {spec.name: spec for spec in model_signature().inputs.inputs}
    for entry in COLUMNS:
        if not entry.request:
            assert entry.name not in inputs
            continue
        assert inputs[entry.name].required == (entry.group == "size"), entry.name


def test_docs_schema_has_a_row_for_every_column_with_its_levels() -> None:
    text = (REPO / "docs" / "schema.md").read_text()
    for entry in COLUMNS:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{entry.name}` |")), None)
        assert row is not None, f"docs/schema.md has no row for `{entry.name}`"
        for level in entry.levels:
            assert f"`{level}`" in row, f"docs/schema.md's row of `{entry.name}` does not name `{level}`"


ADD_A_COLUMN = """
import json
from mlflow_roofline.core import job_table

job_table.JOB_COLUMNS = (
    *job_table.JOB_COLUMNS,
    job_table.JobColumn("optimizer", "text", "kind", "optimizer", "adamw", ("adamw", "sgd"), paper=False),
)

import pandas as pd
from click.testing import CliRunner
from mlflow_roofline.commands.predict import predict_command
from mlflow_roofline.commands.train import train_command
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.ingest.records import KNOWN_FIELDS
from mlflow_roofline.serve.errors import InputError
from mlflow_roofline.serve.pyfunc_model import model_signature
from mlflow_roofline.serve.validate import validate_sizes
from mlflow_roofline.sweep.spec import GRID_KEYS

sizes = dict(num_layers=2, hidden_size=64, num_heads=2, ffn_size=256, seq_len=16, batch_size=4)
plain, sgd = TrainConfig.from_mapping(sizes), TrainConfig.from_mapping({**sizes, "optimizer": "sgd"})
try:
    TrainConfig.from_mapping({**sizes, "optimizer": "lion"}).validate()
    refused = ""
except ConfigError as exc:
    refused = str(exc)
try:
    validate_sizes(pd.DataFrame([{**sizes, "num_steps": 10, "optimizer": "lion"}]))
    served_refusal = ""
except InputError as exc:
    served_refusal = str(exc)
served = validate_sizes(pd.DataFrame([{**sizes, "num_steps": 10, "optimizer": "sgd"}]))
print(json.dumps({
    "param": sgd.to_params()["optimizer"],
    "default_param": plain.to_params()["optimizer"],
    "hash_at_default": plain.config_hash("gpu"),
    "hash_differs": plain.config_hash("gpu") != sgd.config_hash("gpu"),
    "refused": refused,
    "served_refusal": served_refusal,
    "served": list(served["optimizer"]),
    "train_help": "--optimizer" in CliRunner().invoke(train_command, ["--help"]).output,
    "predict_help": "--optimizer [adamw|sgd]" in CliRunner().invoke(predict_command, ["--help"]).output,
    "signature": "optimizer" in model_signature().inputs.input_names(),
    "grid": "optimizer" in GRID_KEYS,
    "import": "optimizer" in KNOWN_FIELDS,
}))
"""


def test_a_column_added_to_the_table_reaches_every_view(tmp_path: Path) -> None:
    script = tmp_path / "add_a_column.py"
    script.write_text(ADD_A_COLUMN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["param"] == "sgd" and seen["default_param"] == "adamw"
    assert seen["hash_at_default"] == TrainConfig.from_mapping(SIZES).config_hash("gpu")  # older runs keep theirs
    assert seen["hash_differs"]
    assert re.search(r"optimizer.*must be one of adamw, sgd, got 'lion'", seen["refused"]), seen["refused"]
    assert re.search(r"optimizer \(row 0\): must be one of adamw, sgd", seen["served_refusal"]), seen
    assert seen["served"] == ["sgd"]
    assert all(seen[view] for view in ("train_help", "predict_help", "signature", "grid", "import")), seen


def test_minus_one_means_the_same_everywhere_it_is_refused_naming_the_field() -> None:
    """-1 is the config's internal "auto": a user who writes it gets the refusal every entry point gives."""
    for name, extra in (("vocab_size", {}), ("lora_rank", {"peft": "lora"})):
        with pytest.raises(ConfigError, match=rf"^{name}: must be a (positive|non-negative) integer or auto, got -1"):
            TrainConfig.from_mapping({**SIZES, **extra, name: "-1"})
        with pytest.raises(ConfigError, match=rf"^{name}: must be a (positive|non-negative) integer or auto"):
            TrainConfig.from_mapping({**SIZES, **extra, name: -1})
        with pytest.raises(ConfigError, match=rf"^grid.{name}: must be a"):
            grid_values(f"grid.{name}", -1)
        with pytest.raises(InputError, match=rf"^{name} \(row 0\): must be"):
            validate_sizes(pd.DataFrame([{**SIZES, "num_steps": 10, **extra, name: -1}]))
        row = {**SIZES, "num_steps": 10, "strategy": "single", "num_devices": 1, "device": "cuda", **extra}
        row.update(precision="fp16", energy_j=1.0, time_s=1.0, hardware="gpu", energy_source="nvml", **{name: -1})
        checked = check_row(RawRow("line 2", row, None))
        assert isinstance(checked, RowError) and checked.field == name, checked
        result = CliRunner().invoke(train_command, [*_options(SIZES), f"--{name.replace('_', '-')}", "-1"])
        assert isinstance(result.exception, ConfigError) and str(result.exception).startswith(f"{name}: must be")


def _options(values: dict[str, int]) -> list[str]:
    return [arg for name, value in values.items() for arg in (f"--{name.replace('_', '-')}", str(value))]


def test_every_spelling_names_a_level_of_its_own_column_and_is_no_level_itself() -> None:
    spelled = [c for c in job_table.JOB_COLUMNS if c.spellings]
    assert {c.name for c in spelled} == {"strategy", "device", "precision", "arch", "peft"}
    for entry in spelled:
        for spelling, level in entry.spellings.items():
            assert spelling == spelling.strip().lower() and spelling not in entry.levels, (entry.name, spelling)
            assert level in entry.levels, (entry.name, spelling, level)
            assert entry.level_of(f" {spelling.upper()} ") == level
        assert all(entry.level_of(level.upper()) == level for level in entry.levels)
    assert job_table.column("precision").level_of("mixed") is None
