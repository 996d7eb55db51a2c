"""The click group: light help, exit codes kept, our own errors as one line."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from mlflow_roofline import cli
from mlflow_roofline.core.errors import ConfigError


def test_help_lists_every_command_without_importing_torch() -> None:
    code = (
        "import sys; from mlflow_roofline.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'help imported torch'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in cli.COMMANDS:
        assert name in out


def test_exit_codes_and_one_line_errors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    @click.command()
    @click.pass_context
    def exits(ctx: click.Context) -> None:
        ctx.exit(3)

    @click.command()
    def refuses() -> None:
        raise ConfigError("num_layers", "must be a positive integer, got 0")

    monkeypatch.setitem(cli.COMMANDS, "exits", (__name__, "exits", "test"))
    monkeypatch.setitem(cli.COMMANDS, "refuses", (__name__, "refuses", "test"))
    monkeypatch.setitem(globals(), "exits", exits)
    monkeypatch.setitem(globals(), "refuses", refuses)

    with pytest.raises(SystemExit) as caught:
        cli.main(["exits"])
    assert caught.value.code == 3

    with pytest.raises(SystemExit) as caught:
        cli.main(["refuses"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.strip() == "Error: num_layers: must be a positive integer, got 0"


@pytest.mark.parametrize(
    ("word", "expected"), [("true", True), ("No", False), (" 1 ", True), ("off", False), (True, True)]
)
def test_parse_bool_reads_mlflow_project_words(word: str | bool, expected: bool) -> None:
    from mlflow_roofline.commands.options import parse_bool

    assert parse_bool("retry_failed", word) is expected


def test_parse_bool_names_the_field() -> None:
    from mlflow_roofline.commands.options import parse_bool

    with pytest.raises(ConfigError, match="^retry_failed: must be true or false, got 'maybe'$"):
        parse_bool("retry_failed", "maybe")
