"""A locked store is told from a broken one, and :func:`patiently` outlasts a lock another process holds.

Real locks only: an SQLite store under a temp dir, locked by ``BEGIN EXCLUSIVE`` in a child
process that lets go when told. MLflow's own sessions wait 20 s for a lock (it sets SQLite's
``busy_timeout`` on each), so the retries themselves are met through a plain ``sqlite3``
connection that waits 0.1 s; MLflow's errors are met where it opens a store (the URI's
``?timeout=`` applies there).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlflow_roofline.tracking.client import TrackingClient, TrackingError
from mlflow_roofline.tracking.store_errors import patiently, store_locked

HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
print("free", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def database(tracking_uri: str) -> Path:
    return Path(tracking_uri[len("sqlite:///") :])


@pytest.fixture
def run_id(tracking_uri: str) -> str:
    client = TrackingClient()
    return client.open_run(client.create_experiment("locks"), "r")


@pytest.fixture
def locked(database: Path, run_id: str) -> Iterator[subprocess.Popen[str]]:
    """A process holding the store's exclusive lock until a line is written to its stdin."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    try:
        yield holder
    finally:
        holder.kill()
        holder.wait()


def _release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "free"


def _tag_the_experiment(database: Path, attempts: list[float]) -> None:
    """One write to the store, waiting 0.1 s for its lock."""
    attempts.append(time.monotonic())
    with sqlite3.connect(database, timeout=0.1) as db:
        db.execute("INSERT INTO experiment_tags (key, value, experiment_id) VALUES ('k', 'v', 0)")


def test_a_lock_held_past_the_patience_is_raised_and_said_to_be_a_lock(
    database: Path, locked: subprocess.Popen[str]
) -> None:
    attempts: list[float] = []
    with pytest.raises(sqlite3.OperationalError) as raised:
        patiently(lambda: _tag_the_experiment(database, attempts), patience_s=1.0)
    assert store_locked(raised.value)
    assert len(attempts) >= 3 and 0.5 <= attempts[-1] - attempts[0] <= 1.0


def test_a_lock_let_go_within_the_patience_is_waited_for(database: Path, locked: subprocess.Popen[str]) -> None:
    attempts: list[float] = []
    releaser = threading.Timer(1.0, _release, [locked])
    releaser.start()
    try:
        patiently(lambda: _tag_the_experiment(database, attempts), patience_s=30.0)
    finally:
        releaser.join()
    assert len(attempts) >= 3  # refused while held, then written
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT value FROM experiment_tags WHERE key = 'k'").fetchall() == [("v",)]


def test_ending_a_run_through_the_client_outlasts_a_lock(
    tracking_uri: str, run_id: str, locked: subprocess.Popen[str]
) -> None:
    releaser = threading.Timer(1.0, _release, [locked])
    releaser.start()
    try:
        patiently(lambda: TrackingClient().end_run(run_id, "KILLED"))
    finally:
        releaser.join()
    assert TrackingClient().get_run(run_id).info.status == "KILLED"


def test_mlflows_error_on_a_locked_store_is_a_lock(tracking_uri: str, locked: subprocess.Popen[str]) -> None:
    with pytest.raises(Exception) as raised:  # SQLAlchemy's, as MLflow opens a store it has not opened before
        TrackingClient(f"{tracking_uri}?timeout=0.2")
    assert store_locked(raised.value)


def test_other_errors_are_not_retried(tracking_uri: str) -> None:
    calls = []

    def missing_run() -> None:
        calls.append(1)
        TrackingClient().get_run("0" * 32)

    with pytest.raises(TrackingError) as raised:
        patiently(missing_run, patience_s=30.0)
    assert calls == [1]
    assert not store_locked(raised.value)


def test_a_read_only_store_is_not_a_lock(tmp_path: Path) -> None:
    database = tmp_path / "ro.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE t (x)")
    readonly = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as raised:
        readonly.execute("INSERT INTO t VALUES (1)")
    assert "readonly" in str(raised.value)
    assert not store_locked(raised.value)
