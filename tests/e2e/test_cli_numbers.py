"""Every numeric option of every command refuses NaN and infinities, naming the option.

The options are found by walking the commands (a new numeric option is covered without
editing this test): click number types, and text options whose metavar says a number.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from support.cli_args import TINY_SHAPE
from support.store_template import copy_store

from mlflow_roofline import cli
from mlflow_roofline.commands.options import CARBON_OPTION_NAMES, FiniteFloat

# Valid arguments of each command; the option under test is appended (click keeps the last).
BASE = {
    "train": [
        *TINY_SHAPE,
        "--meter",
        "estimate",
    ],
    "predict": [
        *TINY_SHAPE,
        "--num-steps",
        "10",
        "--strategy",
        "ddp",
        "--num-devices",
        "2",
    ],
    "fit": [],
    "measure": [],
    "sweep": ["smoke", "--dry-run"],
    "specs": [],
}
TAIL = {"measure": ["--", "true"]}
NUMBER_METAVARS = ("INT", "WATTS", "NUMBER", "FLOAT", "SECONDS")
NUMERIC_CARBON = tuple(n for n in CARBON_OPTION_NAMES if n != "region")
"""The shared carbon options that hold numbers (text options, checked by core.carbon)."""


def _numeric_options() -> list[tuple[str, click.Option]]:
    found = []
    for name in cli.COMMANDS:
        command = cli.cli.get_command(click.Context(cli.cli), name)
        assert command is not None
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag:
                continue
            numeric = isinstance(
                param.type,
                (click.types.IntParamType, click.types.FloatParamType, FiniteFloat),
            )
            if numeric or (param.metavar or "").upper() in NUMBER_METAVARS or param.name in NUMERIC_CARBON:
                found.append((name, param))
    return found


NUMERIC = _numeric_options()


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> str:
    """One SQLite store for the module (``train`` ends its refused runs FAILED there)."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("numbers")
    uri = f"sqlite:///{copy_store(store_template, root / 'mlflow.db')}"
    here = os.getcwd()
    os.chdir(root)  # the store's artifact root (./mlruns) resolves here, not in the repository
    try:
        MlflowClient(uri).search_experiments()  # creates the Default experiment once
    finally:
        os.chdir(here)
    return uri


@pytest.fixture
def store(shared_store: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    import mlflow

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", shared_store)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    mlflow.set_tracking_uri(shared_store)
    return shared_store


def test_every_float_option_is_finite_checked() -> None:
    floats = [(name, p.name) for name, p in NUMERIC if isinstance(p.type, click.types.FloatParamType)]
    assert floats == [], "use commands.options.FINITE_FLOAT: click's float takes 'nan'"
    assert ("predict", "speedup") in [(name, p.name) for name, p in NUMERIC]


def _carbon_options(name: str) -> list[tuple[list[str], str | None, str | None]]:
    command = cli.cli.get_command(click.Context(cli.cli), name)
    assert command is not None
    return [(p.opts, p.metavar, p.help) for p in command.params if p.name in CARBON_OPTION_NAMES]


def test_every_command_takes_the_same_carbon_options() -> None:
    """predict, train, measure and sweep share one definition: the same flags, metavars and help."""
    shared = _carbon_options("measure")
    assert [opts for opts, _, _ in shared] == [["--carbon-intensity"], ["--region"], ["--pue"], ["--price-per-kwh"]]
    for name in ("predict", "train", "sweep"):
        assert _carbon_options(name) == shared, name


@pytest.mark.parametrize("value", ["nan", "-inf", "1e999"])
@pytest.mark.parametrize(("command", "option"), NUMERIC, ids=[f"{c}{o.opts[0]}" for c, o in NUMERIC])
def test_a_non_finite_number_is_refused_naming_the_option(
    store: str,
    command: str,
    option: click.Option,
    value: str,
    capsys: pytest.CaptureFixture,
) -> None:
    flag = option.opts[0]
    with pytest.raises(SystemExit) as caught:
        cli.main([command, *BASE[command], flag, value, *TAIL.get(command, [])])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("Error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert flag in lines[0] or option.name in lines[0], lines[0]
    assert value in lines[0] or repr(value) in lines[0], lines[0]
