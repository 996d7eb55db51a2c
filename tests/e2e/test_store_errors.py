"""A tracking store that cannot be written is one line naming the store, for every command.

Real faults only: an SQLite file that cannot be written (mode 0444; a root test process
drops its override of file permissions in the child, so that the mode holds), and a real
lock held by another process (``BEGIN EXCLUSIVE`` in a subprocess) past the store's wait.
The read-only store needs the command in a child process (the dropped override cannot be
taken back); the lock and the folder that is a file are met by the command run in this
process (:func:`~support.cli_in_process.run_cli`, stderr as a child's).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from support.cli_args import TINY_SHAPE
from support.cli_in_process import run_cli
from support.file_modes import honour_file_modes
from support.store_template import copy_store

from mlflow_roofline.testing.synthetic import log_synthetic_runs

CLI = str(Path(sys.executable).parent / "mlflow-roofline")
TINY = [
    *TINY_SHAPE,
    "--num-steps",
    "1",
    "--warmup-steps",
    "0",
    "--meter",
    "estimate",
]
COMMANDS = {
    "train": ["train", *TINY, "--experiment", "roofline-bert"],
    "measure": ["measure", "--experiment", "roofline-bert", "--", "true"],
    "sweep": ["sweep", "smoke", "--no-progress", "--experiment", "roofline-bert"],
    "fit": ["fit", "--experiment", "roofline-bert", "--allow-estimate", "true"],
    "predict": ["predict", *TINY[:12], "--num-steps", "10"],
}


@pytest.fixture(scope="module")
def populated_store(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Path:
    """A store holding an experiment with finished train runs (what fit needs to reach its writes), made once."""
    root = tmp_path_factory.mktemp("populated-store")
    db = copy_store(store_template, root / "mlflow.db")
    client = MlflowClient(f"sqlite:///{db}")
    experiment_id = client.create_experiment("roofline-bert", artifact_location=(root / "art").as_uri())
    log_synthetic_runs(
        client,
        experiment_id,
        4,
        strategies=("single", "ddp"),
        device_counts=(2,),
        seed=1,
    )
    return db


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, populated_store: Path) -> Iterator[Path]:
    """This test's own copy of :func:`populated_store`."""
    db = copy_store(populated_store, tmp_path / "mlflow.db")
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    yield db


def _run(command: str, uri: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [CLI, *COMMANDS[command]],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        **kwargs,
    )


def _run_here(command: str, uri: str, monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess[str]:
    """The command in this process, against ``uri`` (the environment and MLflow's current URI both name it)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    return run_cli(*COMMANDS[command])


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    # A warning about the plan (e.g. more processes than cores) is not the error: it may come first.
    lines = [
        line
        for line in done.stderr.splitlines()
        if line.strip() and " INFO " not in line and not line.startswith("Warning: ")
    ]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "[SQL:" not in done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [pytest.param("train", marks=pytest.mark.slow), "measure", "sweep", "fit"],
)
def test_a_read_only_store_is_one_line(store: Path, command: str) -> None:
    uri = f"sqlite:///{store}"
    before = store.read_bytes()
    store.chmod(0o444)
    try:
        done = _run(command, uri, preexec_fn=honour_file_modes)
    finally:
        store.chmod(0o644)
    assert _one_error_line(done) == (
        f"Error: tracking store {uri} cannot be written (attempt to write a readonly "
        "database): check the file's and its folder's permissions"
    )
    assert store.read_bytes() == before


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("train", marks=pytest.mark.slow),
        "measure",
        "sweep",
        "fit",
        "predict",
    ],
)
def test_a_store_locked_by_another_process_is_one_line(
    store: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                f"db = sqlite3.connect({str(store)!r}, isolation_level=None)\n"
                "db.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\nsys.stdin.read()"
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        uri = f"sqlite:///{store}?timeout=1"
        done = _run_here(command, uri, monkeypatch)
    finally:
        holder.kill()
        holder.wait()
    line = _one_error_line(done)
    assert line.startswith(
        f"Error: tracking store {uri} is locked by another process and stayed locked past the wait (database is locked)"
    )


@pytest.mark.parametrize("command", ["measure", "predict"])
def test_a_store_whose_folder_is_a_file_is_one_line(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "results"
    blocker.write_text("a file where the store's folder should be\n")
    for database in (blocker / "mlflow.db", blocker / "deeper" / "mlflow.db"):
        uri = f"sqlite:///{database}"
        line = _one_error_line(_run_here(command, uri, monkeypatch))
        assert line == f"Error: tracking store {uri} cannot be created: {blocker} is a file, not a folder"
    assert blocker.read_text() == "a file where the store's folder should be\n"
