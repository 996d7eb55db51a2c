"""`mlflow-roofline import` stores each row exactly once: run twice at once, after a SIGKILL, stopped by SIGTERM.

Real processes on one SQLite store: the importer is the console command, the orphan is
what a killed importer leaves (a RUNNING run carrying its row's hash and a dead pid).
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support.sweeps import CLI, HANG_GUARD_S, init_store, wait_until

from mlflow_roofline.cli import main
from mlflow_roofline.core.schema import TAG_ERROR, TAG_HOST, TAG_IMPORT_ROW_HASH, TAG_PID, TAG_RUN_TYPE, TAG_SOURCE
from mlflow_roofline.ingest import writer
from mlflow_roofline.ingest.mapping import load_mapping
from mlflow_roofline.ingest.records import Record, check_row
from mlflow_roofline.ingest.sources import read_rows

pytestmark = pytest.mark.slow

GPU = "NVIDIA A100-SXM4-80GB"
HEADER = [
    "num_layers",
    "hidden_size",
    "num_heads",
    "ffn_size",
    "seq_len",
    "batch_size",
    "num_steps",
    "strategy",
    "num_devices",
    "device",
    "precision",
    "energy_source",
    "hardware",
    "energy_j",
    "time_s",
]


def write_rows(path: Path, count: int) -> Path:
    """A table of ``count`` distinct valid rows (single-GPU runs of growing step counts)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for i in range(count):
            writer.writerow([12, 768, 12, 3072, 128, 32, 100 + i, "single", 1, "cuda", "fp16", "nvml", GPU, 9000, 30])
    return path


def runs_of(experiment: str = "imported") -> list:
    client = MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=5000)


def run_cli(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_two_imports_of_one_file_at_once_store_each_row_once(tracking_uri: str, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "runs.csv", 40)
    init_store()
    MlflowClient().create_experiment("imported")
    imports = [
        subprocess.Popen(
            [*CLI, "import", str(data), "--experiment", "imported"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in imports]
    assert [p.returncode for p in imports] == [0, 0], outputs
    runs = runs_of()
    assert Counter(r.info.status for r in runs) == {"FINISHED": 40}, outputs  # no duplicate, nothing RUNNING
    assert len({r.data.tags[TAG_IMPORT_ROW_HASH] for r in runs}) == 40


FIRST_OPEN = textwrap.dedent(
    """
    import sys
    from mlflow_roofline.cli import main
    import mlflow_roofline.ingest.writer  # MLflow and the importer loaded: the store is opened first thing after

    print("ready", flush=True)
    sys.stdin.readline()  # the test releases every importer at once
    main(["import", sys.argv[1], "--experiment", "imported"])
    """
)


def test_first_imports_at_once_into_a_store_that_does_not_exist_yet_all_succeed(
    unopened_tracking_uri: str, tmp_path: Path
) -> None:
    """MLflow creates a new store's tables and migrates them without a lock: two first opens raced, one
    printed an alembic trace. Released together, every importer succeeds and each row is stored once."""
    data = write_rows(tmp_path / "runs.csv", 10)
    importers = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_OPEN, str(data)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    try:
        for importer in importers:
            assert importer.stdout is not None and importer.stdout.readline() == "ready\n"
        for importer in importers:
            assert importer.stdin is not None
            importer.stdin.write("go\n")
            importer.stdin.flush()
        outputs = [importer.communicate(timeout=600) for importer in importers]
    finally:
        for importer in importers:
            if importer.poll() is None:
                importer.kill()
    assert [i.returncode for i in importers] == [0, 0, 0], outputs
    assert not any("Traceback" in err or "alembic" in err for _, err in outputs), outputs
    runs = runs_of()
    assert Counter(r.info.status for r in runs) == {"FINISHED": 10}, outputs
    assert len({r.data.tags[TAG_IMPORT_ROW_HASH] for r in runs}) == 10


ORPHAN = textwrap.dedent(
    """
    import os, signal, sys
    from mlflow.tracking import MlflowClient
    from mlflow_roofline.ingest.mapping import load_mapping
    from mlflow_roofline.ingest.records import check_row
    from mlflow_roofline.ingest.sources import read_rows
    from mlflow_roofline.system.liveness import process_tags

    # What an importer killed between creating a row's run and ending it leaves behind.
    record = check_row(read_rows(sys.argv[1], "table", load_mapping(None))[0])
    client = MlflowClient()
    tags = {
        "roofline.run_type": "train",
        "roofline.source": "import:table",
        "roofline.import_row_hash": record.row_hash("table"),
        **process_tags(os.getpid()),
    }
    client.create_run(client.create_experiment("imported"), tags=tags)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_rerun_reclaims_the_row_a_killed_import_left_running(tracking_uri: str, tmp_path: Path, capsys) -> None:
    data = write_rows(tmp_path / "runs.csv", 3)
    init_store()
    killed = subprocess.run([sys.executable, "-c", ORPHAN, str(data)], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (orphan,) = runs_of()
    assert orphan.info.status == "RUNNING"

    assert run_cli(["import", str(data), "--experiment", "imported"]) == 0
    assert "imported 3, skipped 0 already present" in capsys.readouterr().out
    runs = {r.info.run_id: r for r in runs_of()}
    assert Counter(r.info.status for r in runs.values()) == {"FINISHED": 3, "KILLED": 1}
    assert runs[orphan.info.run_id].info.status == "KILLED"
    assert "its importer ended before the row was stored" in runs[orphan.info.run_id].data.tags[TAG_ERROR]


def test_sigterm_stops_between_rows_leaving_nothing_running_then_a_rerun_stores_the_rest(
    tracking_uri: str, tmp_path: Path
) -> None:
    data = write_rows(tmp_path / "runs.csv", 60)
    init_store()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [*CLI, "import", str(data), "--experiment", "imported"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_until(lambda: any(r.info.status == "FINISHED" for r in runs_of()), "a first imported row")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=HANG_GUARD_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "Error: interrupted by SIGTERM; the import stopped between rows, nothing is left RUNNING" in err
    statuses = Counter(r.info.status for r in runs_of())
    assert "RUNNING" not in statuses and 1 <= statuses["FINISHED"] < 60, statuses

    assert run_cli(["import", str(data), "--experiment", "imported"]) == 0
    finished = [r for r in runs_of() if r.info.status == "FINISHED"]
    assert len(finished) == 60 and len({r.data.tags[TAG_IMPORT_ROW_HASH] for r in finished}) == 60
    killed = [r for r in runs_of() if r.info.status == "KILLED"]
    assert all(r.data.tags[TAG_ERROR] == "interrupted by SIGTERM" for r in killed)


def test_a_row_held_by_a_run_of_another_host_is_reported_held_not_skipped_nor_waited_on_forever(
    tracking_uri: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RUNNING run recorded on another host cannot be checked from here: it may be live, so it holds its
    row; the import waits a bounded time, reports the row held (exit 1) and stores the others."""
    data = write_rows(tmp_path / "runs.csv", 3)
    record = check_row(read_rows(data, "table", load_mapping(None))[0])
    assert isinstance(record, Record)
    client = MlflowClient()
    held = client.create_run(
        client.create_experiment("imported"),
        tags={
            TAG_RUN_TYPE: "train",
            TAG_SOURCE: "import:table",
            TAG_IMPORT_ROW_HASH: record.row_hash("table"),
            TAG_HOST: "another-host",
            TAG_PID: "4242",
        },
    ).info.run_id
    monkeypatch.setattr(writer, "HOLD_WAIT_S", 0.5)
    assert run_cli(["import", str(data), "--experiment", "imported"]) == 1
    out = capsys.readouterr()
    assert f"held line 2: run {held} of another import holds this row (RUNNING)" in out.err
    assert "imported 2, skipped 0 already present, refused 0, left 1 held by another import" in out.out
    assert Counter(r.info.status for r in runs_of()) == {"FINISHED": 2, "RUNNING": 1}  # the other host's run untouched
