"""Reading the file to import: regular files only, under a size cap, each column named once, commas."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.ingest.files import MAX_MAPPING_BYTES, read_cells
from mlflow_roofline.ingest.mapping import load_mapping


def test_dev_zero_is_refused_before_reading() -> None:
    with pytest.raises(ConfigError, match=r"/dev/zero is a character device, not a regular file") as caught:
        read_cells(Path("/dev/zero"))
    assert caught.value.field == "file"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.csv"
    os.mkfifo(fifo)
    result: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(result, fifo), daemon=True)
    reader.start()
    reader.join(timeout=10)  # blocking on open() or read() would hang here: no writer ever comes
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert len(result) == 1 and "is a FIFO, not a regular file" in str(result[0])


def _catch(result: list[BaseException], path: Path) -> None:
    try:
        read_cells(path)
    except ConfigError as exc:
        result.append(exc)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        read_cells(tmp_path)


def test_a_file_over_the_cap_is_refused_naming_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("a,b\n" + "1,2\n" * 100)
    with pytest.raises(ConfigError, match=r"holds 404 bytes, more than the 400 import reads"):
        read_cells(path, max_bytes=400)
    assert len(read_cells(path, max_bytes=404).rows) == 100


def test_a_duplicated_column_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("num_layers,energy_j,time_s,energy_j\n1,2,3,4\n")
    with pytest.raises(ConfigError) as caught:
        read_cells(path)
    assert caught.value.field == "file"
    assert "names the column 'energy_j' twice (columns 2 and 4)" in str(caught.value)


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_another_delimiter_is_refused_saying_so(tmp_path: Path, delimiter: str) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(delimiter.join(["num_layers", "energy_j", "time_s"]) + "\n" + delimiter.join("123") + "\n")
    with pytest.raises(ConfigError) as caught:
        read_cells(path)
    assert f"it looks separated by {delimiter!r}, but import reads comma-separated" in str(caught.value)


def test_an_empty_file_says_it_needs_a_header(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("\n\n")
    with pytest.raises(ConfigError, match="is empty: expected a header line"):
        read_cells(path)


def test_records_keep_their_line_and_extra_cells_are_a_row_problem(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text('\ufeffa,b\n1, 2\n\n"x\ny",\n3,4,5\n')
    cells = read_cells(path)
    assert cells.header == ("a", "b")
    assert cells.rows == [("line 2", {"a": "1", "b": "2"}), ("line 5", {"a": "x\ny"}), ("line 6", {"a": "3", "b": "4"})]
    assert cells.problems == {"line 6": ("file", "has 3 cells, but the header names 2 columns")}


def test_a_mapping_path_that_is_not_a_small_regular_file_is_refused_naming_mapping(tmp_path: Path) -> None:
    fifo = tmp_path / "map.yaml"
    os.mkfifo(fifo)
    for path, rule in (
        (Path("/dev/zero"), "is a character device, not a regular file"),
        (fifo, "is a FIFO, not a regular file"),
    ):
        with pytest.raises(ConfigError, match=rule) as caught:
            load_mapping(path)
        assert caught.value.field == "mapping"
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_MAPPING_BYTES + "\n")
    with pytest.raises(ConfigError, match=f"more than the {MAX_MAPPING_BYTES} import reads"):
        load_mapping(big)
